/* SPDX-License-Identifier: MIT */
/*
 * A verified tree block and what can be read from it: its items, its
 * pointers, the slot a key falls in. Read through the block cache
 * (btrfs/cache.h), which also owns the references.
 */
#ifndef BI_BLOCK_H
#define BI_BLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "base/handle.h"
#include "base/key.h"
#include "btrfs/tree_checker.h"

/* A verified tree block. Item/pointer tables were checked when read. */
struct bi_block {
	uint64_t bytenr;
	uint64_t generation, owner;
	uint32_t nritems;
	uint8_t level;
	uint32_t size;
	uint8_t *data;
	/* cache bookkeeping (cache.c) */
	uint32_t refs;
	bool uncached;
	bool synthetic;	/* pinned by the salvage (bi_block_pin_synthetic) */
	struct bi_block *hnext, *lru_prev, *lru_next;
};

/* Read and verify the block at @bytenr, trying every copy. Returns a
 * reference: release it with bi_block_put(). */
int bi_block_read(struct btrfsimg_fs *fs, uint64_t bytenr, const struct bi_expect *e,
		  struct bi_block **out);
/* Whether a verified block is what a parent pointer expects of it (level,
 * generation, first key; @e NULL: anything is). A synthesized node's
 * first key is its first surviving child's, which may be past the key its
 * parent holds for it (the keys of a lost first child are gone): not
 * compared. */
bool bi_block_matches(const struct bi_block *b, const struct bi_expect *e);

/* Pin @buf (@size bytes, ownership passes; freed on error) in the block
 * cache as the block at its header's bytenr, for the handle's life: a
 * node the salvage synthesized (salvage_rebuild.c) in place of one lost on
 * every copy, built to what its parent and children expect (level,
 * generation); it is never read from the image nor checksummed. */
int bi_block_pin_synthetic(struct btrfsimg_fs *fs, uint8_t *buf, uint32_t size);

/* Slot accessors: valid for slot < nritems of a checked block. */
void bi_leaf_item(const struct bi_block *b, uint32_t slot, bi_key *k, const uint8_t **data,
		  uint32_t *size);
void bi_node_ptr(const struct bi_block *b, uint32_t slot, bi_key *k, uint64_t *blockptr,
		 uint64_t *gen);
/* The first item of a checked leaf whose key is >= @target (nritems if
 * none). */
uint32_t bi_leaf_slot(const struct bi_block *b, const bi_key *target);
/* bi_leaf_slot, searching from @near first (where the last lookup in this
 * leaf ended): the same answer, sooner for lookups in key order. */
uint32_t bi_leaf_slot_from(const struct bi_block *b, const bi_key *target, uint32_t near);
/* The last pointer of a checked node whose key is <= @target (slot 0 if
 * @target is before all): the child a descent to @target follows. */
uint32_t bi_node_slot(const struct bi_block *b, const bi_key *target);

#endif
