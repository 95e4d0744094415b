/* SPDX-License-Identifier: MIT */
/*
 * What recover.c (versions, kinds, paths) and recdata.c (trust in their
 * data, their bytes) share: the tables the leaves fill and the versions.
 */
#ifndef BI_RECOVER_H
#define BI_RECOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "forensic/block_scan.h"
#include "btrfs/tree_checker.h"

#define INODE_NODATASUM (1ull << 0)
#define INODE_NODATACOW (1ull << 1)
#define MAX_DEPTH	64
#define OUT_CHUNK	(1u << 20)

/* A name of an inode: INODE_REF (ino -> parent) or DIR_INDEX. */
struct fx_ref {
	uint64_t subvol, ino, parent, gen;
	char *name;	 /* its safe form (base/name.h) */
	const char *bad; /* why the raw name is no component, or NULL */
	bool dir; /* a DIR_INDEX entry of type directory */
};

/* A disk extent some EXTENT_DATA item referenced. */
struct fx_dext {
	uint64_t bytenr, len, gen; /* gen: the item's generation */
	uint64_t last_seen;	   /* newest leaf referencing it */
};

/* An EXTENT_CSUM item of a csum-tree leaf. */
struct fx_csum {
	uint64_t start, end; /* logical bytes covered */
	uint64_t gen;	     /* the leaf's */
	size_t block;	     /* index of the leaf in f->blocks */
	uint32_t off;	     /* item data offset in the leaf */
};

struct fx_rootref {
	uint64_t child, parent, dirid, gen;
	char *name;	 /* its safe form */
	const char *bad; /* why the raw name is no component, or NULL */
};

/* A bad part of an extent judged sector by sector: logical [lo, hi). */
struct fx_subbad {
	size_t ext;
	uint64_t lo, hi;
	const char *why;
};

struct fx_version {
	uint64_t subvol, ino, leaf_gen, sig;
	struct btrfsimg_inode inode;
	struct bi_extent *ext;
	size_t next;
	bool complete;
	bool dir;	 /* a directory: a record of its own, no contents */
	bool names_only; /* a directory known from names only (no INODE_ITEM) */
	bool has_leaf;	 /* its INODE_ITEM is at @slot of block @leaf (xattrs) */
	size_t leaf;
	uint32_t slot;
	/* results */
	struct btrfsimg_recovered rec;
	char id[80];
	char *path;
	char name_damage[192]; /* the first damaged name of the path ("": none) */
	struct btrfsimg_bad_range *bad;
	size_t nbad, cbad;
	uint8_t *state;	       /* per extent: enum ext_state */
	struct fx_subbad *sub; /* bad sectors of EXT_MIXED extents, by extent */
	size_t nsub, csub;
	uint64_t content; /* hash of the bytes (intact versions) */
	uint64_t out_end; /* bytes produced: i_size, or where the data ends
			     when i_size is past bi_size_bound */
	/* today's inode of a live file (classify), for flush artefacts */
	struct btrfsimg_inode live;
	bool has_live;
	bool skip;
};

struct bi_fx_recovered {
	struct fx_ref *refs;
	size_t nrefs, crefs;
	struct fx_dext *dext;
	size_t ndext, cdext;
	struct fx_csum *csums;
	size_t ncsums, ccsums;
	struct fx_rootref *rrefs;
	size_t nrrefs, crrefs;
	struct fx_version *v;
	size_t nv, cv;
	struct btrfsimg_subvol *subvols;
	size_t nsubvols;
	struct bi_zctx *z;
	uint64_t csum_span; /* the longest range one csum item covers */
	uint8_t *csum_leaf; /* the csum leaf last read */
	size_t csum_leaf_idx;
};

static inline int dext_cmp(const void *pa, const void *pb)
{
	const struct fx_dext *a = pa, *b = pb;
	if (a->bytenr != b->bytenr)
		return a->bytenr < b->bytenr ? -1 : 1;
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	return a->gen < b->gen ? -1 : a->gen > b->gen;
}

/* recdata.c */

/* The longest logical range one csum item covers (the backward search
 * of a sector's checksum stops there). */
/* Build the versions (the first call's work of btrfsimg_forensic_recovered)
 * unless done. 0 or a negative errno. */
int bi_fx_ready(struct btrfsimg_forensic *f);
uint64_t bi_fx_csum_span(const struct bi_fx_recovered *r);
/* The bytes the version's extents hold as the kernel counts them in the
 * inode's nbytes (inline ram_bytes, regular and prealloc num_bytes). */
uint64_t bi_fx_nbytes(const struct fx_version *v);
/* Status, verified and bad ranges of a version from its extents: their
 * reuse, their checksums, whether their items agree with the inode. */
int bi_fx_evaluate(struct btrfsimg_forensic *f, struct fx_version *v, uint8_t *buf);
/* The version's bytes [0, out_end) in order through @fn (untrusted ranges
 * as zeros; with @raw, "csum mismatch" ranges as the bytes on disk):
 * out_end is i_size unless that is past bi_size_bound, where the data's
 * end is (bi_fx_evaluate sets it). 0, @fn's value, or a negative errno. */
int bi_fx_out_walk(struct btrfsimg_forensic *f, struct fx_version *v, bool raw,
		   btrfsimg_data_fn fn, void *ctx);
/* Zeros (holes, untrusted ranges) [off, off + len) as one call. */
typedef int (*bi_fx_hole_fn)(void *ctx, uint64_t off, uint64_t len);
/* bi_fx_out_walk, with every run of zeros it would produce given to @hole
 * instead, whatever its length: for work that need not touch each byte. */
int bi_fx_out_walk_holes(struct btrfsimg_forensic *f, struct fx_version *v, bool raw,
			 btrfsimg_data_fn fn, bi_fx_hole_fn hole, void *ctx);

#endif
