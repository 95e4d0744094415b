/* SPDX-License-Identifier: MIT */
/*
 * The counting core of the collision engine (trie.c): the groups of a
 * sum of signed pieces, each the multiset { a ^ c : a in A } taken m
 * times (A a sorted slice of objectids). collide.c turns a scheme's
 * subvolumes and extras into pieces, device by device; this counts them.
 */
#ifndef BI_TRIE_H
#define BI_TRIE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btrfsimg_inum.h"

/* Whose elements a piece holds: a subvolume's index, or BI_OWNER_MIXED
 * for extras, for a subvolume that may present a value twice and once
 * pieces of two owners merged. One owner presents each value at most
 * once, so the pieces of one owner alone hold no group. */
#define BI_OWNER_MIXED UINT32_MAX
#define BI_OWNER_NONE  (UINT32_MAX - 1)

struct bi_piece {
	const uint64_t *v; /* the slice, ascending; borrowed */
	size_t n;
	uint64_t c; /* the constant XORed in */
	int64_t m;  /* the weight */
	uint32_t owner;
};

/* The most subvolumes the piece arrays can hold (checked with the input). */
#define BI_COLLIDE_MAX_SUBVOLS (SIZE_MAX / 8 / sizeof(struct bi_piece))

/* A group found while streaming (value @value held @m times on @dev): 0
 * to go on; anything else ends the count with that value. */
typedef int (*bi_trie_group_fn)(void *ctx, uint64_t dev, uint64_t value, int64_t m);

struct bi_vm;
struct bi_comp;

/* One device's counting pass. The caller sets dev, the examples (ex,
 * nex, maxex) or the streaming function (group, group_ctx), and puts the
 * pieces on the stack; the count adds to groups and inodes. */
struct bi_trie {
	struct bi_piece *stack; /* DFS piece stack; indices, it may move */
	size_t used, cap;
	uint64_t dev;
	uint64_t groups, inodes;
	struct btrfsimg_collide_group **ex; /* the result's example array, grown */
	size_t *nex, maxex, capex;
	struct bi_vm *mat; /* materialise scratch */
	size_t matcap;
	int32_t *cnt;	   /* full_tally's table, zero between uses */
	uint32_t *touched; /* and the entries it touched */
	size_t cntcap, touchcap;
	struct bi_comp *comps; /* complements of dense slices (see complement_dense) */
	size_t ncomps, capcomps, compvals;
	bi_trie_group_fn group; /* streaming: each group goes to it at once */
	void *group_ctx;
	int stop; /* -ENOMEM, or what @group returned: the run ends */
};

/* Room for @more pieces on the stack past r->used: 0 or -ENOMEM. */
int bi_trie_reserve(struct bi_trie *r, size_t more);
/* Count every group of the @np pieces on the stack (one device): 0,
 * -ENOMEM, or what r->group returned. */
int bi_trie_count(struct bi_trie *r, size_t np);
/* Merge pieces with the same slice and constant; drop weight 0. Returns
 * the pieces left (sorted). */
size_t bi_trie_merge(struct bi_piece *p, size_t np);
/* Free what the passes allocated (not the examples: the result's). */
void bi_trie_free(struct bi_trie *r);

#endif
