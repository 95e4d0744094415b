/* SPDX-License-Identifier: MIT */
/*
 * The recovered-version model: the tables stale and live leaves fill
 * (names, disk extents, csum items, root refs) and the versions of files
 * built from them, with the functions over it, by the file that owns
 * each step:
 *
 *   reccollect.c  leaves to tables and versions
 *   recover.c     merging, directories known from names, the build, the API
 *   recpath.c     a version's path from the names
 *   reckind.c     kinds, flush artefacts, versions with the same bytes
 *   recdata.c     how far a version's data can be trusted, and its bytes
 *   recext.c      a version's extent map and the owners of a range
 */
#ifndef BI_VERSION_H
#define BI_VERSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "forensic/block_scan.h"
#include "btrfs/tree_checker.h"

#define INODE_NODATASUM (1ull << 0)
#define INODE_NODATACOW (1ull << 1)
#define OUT_CHUNK	(1u << 20)

/* A name of an inode: INODE_REF (ino -> parent) or DIR_INDEX. */
struct fx_ref {
	uint64_t subvol, ino, parent, gen;
	char *name;	 /* its safe form (base/name.h) */
	const char *bad; /* why the raw name is no component, or NULL */
	uint64_t seq;	 /* in the order found: equal generations keep it */
	/* of the names merged into this one (bi_fx_refs_merge), the newest
	 * generation, and the newest of the DIR_INDEX entries of type
	 * directory (if @dir) */
	uint64_t newest, dir_gen;
	bool dir;
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

/* What a reported version's evaluation gives (recover.c's finish): made
 * only for the versions reported, not for the many a live file shows as
 * they are. */
struct fx_result {
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
};

/* Of today's inode of a live file, what tells a flush artefact
 * (reckind.c's size_lags). */
struct fx_live {
	uint64_t generation, size, transid;
	struct btrfsimg_timespec mtime, ctime;
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
	bool has_live;	 /* @live is set (classify) */
	bool skip;
	uint32_t slot;
	size_t leaf;
	enum btrfsimg_recovered_kind kind; /* classify's */
	struct fx_live live;
	struct fx_result *res; /* NULL until finished (reported versions) */
};

/* A slot of the versions' hash table: index + 1 into v (0: empty) and the
 * hash of its key, so that a probe past another key reads no version. */
struct fx_vslot {
	size_t idx;
	uint64_t hash;
};

struct bi_fx_recovered {
	struct fx_ref *refs;
	size_t nrefs, crefs;
	size_t refs_merge_at; /* bi_fx_collect merges the names past this many */
	size_t refs_sorted;   /* the first this many are sorted and merged */
	uint64_t refs_seq;    /* names found so far */
	struct fx_dext *dext;
	size_t ndext, cdext;
	struct fx_csum *csums;
	size_t ncsums, ccsums;
	struct fx_rootref *rrefs;
	size_t nrrefs, crrefs;
	struct fx_version *v;
	size_t nv, cv;
	struct fx_vslot *vslots; /* while collecting: hash of v's keys */
	size_t nvslots;
	struct fx_version *found; /* fs_leaf's versions of one leaf, then added */
	uint64_t *found_hash;	  /* their keys' hashes */
	size_t nfound, cfound, cfound_hash;
	struct btrfsimg_subvol *subvols;
	size_t nsubvols;
	struct bi_zctx *z;
	uint64_t csum_span;		     /* the longest range one csum item covers */
	struct bi_fx_csum_cache *csum_cache; /* recdata.c's */
};

/* FNV-1a, the hash of signatures and contents. */
#define BI_FX_FNV_SEED 0xcbf29ce484222325ull
static inline uint64_t bi_fx_fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return h;
}

static inline int dext_cmp(const void *pa, const void *pb)
{
	const struct fx_dext *a = pa, *b = pb;
	if (a->bytenr != b->bytenr)
		return a->bytenr < b->bytenr ? -1 : 1;
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	return a->gen < b->gen ? -1 : a->gen > b->gen;
}

/* reccollect.c */

/* Names by (subvol, ino), newest generation first, then in the order
 * found: recpath.c's name_of takes the first at or before a generation. */
int bi_fx_ref_cmp(const void *pa, const void *pb);
/* Sort the names (bi_fx_ref_cmp) and drop each that the next one of its
 * inode repeats (the same parent and name, neither damaged): name_of
 * finds the same name through the next one for every generation, and
 * the next one takes its newest and dir_gen. Exact only while no name
 * still to come sorts between two kept ones: bi_fx_collect merges when
 * the next leaf is of a newer generation or another tree. */
void bi_fx_refs_merge(struct bi_fx_recovered *r);

/* An item of a leaf (a block already checked at scan time). */
struct bi_fx_item {
	bi_key key;
	const uint8_t *data;
	uint32_t size;
};
/* Item @slot of the leaf @blk. */
void bi_fx_item_at(const uint8_t *blk, uint32_t slot, struct bi_fx_item *it);
/* Free what a version holds (not the version). */
void bi_fx_version_free(struct fx_version *v);
/* The hash of what makes two versions one: size and extent items (a
 * directory: one value for all its states). */
uint64_t bi_fx_signature(const struct fx_version *v);
/* Parse EXTENT_DATA item @it onto @v's extents (@cap their capacity); a
 * damaged item is skipped. 0 or -ENOMEM. */
int bi_fx_add_extent(struct fx_version *v, const struct bi_fx_item *it, uint32_t sectorsize,
		     size_t *cap);
/* Append @v (its signature set) to the versions; on failure @v is freed.
 * 0 or -ENOMEM. */
int bi_fx_add_version(struct bi_fx_recovered *r, struct fx_version *v);
/* bi_fx_add_version for the versions the leaves show, one per (subvol,
 * ino, creation generation, signature) as they come: the one merging
 * would keep (recover.c's ver_cmp). On failure @v is freed. 0 or -ENOMEM.
 * bi_fx_found_versions_done frees the table when the leaves are read. */
int bi_fx_add_found_version(struct bi_fx_recovered *r, struct fx_version *v);
/* The same for the @n versions of @vs in order (one leaf's), the table's
 * memory fetched for all of them before the first is added. The versions
 * are taken (freed on failure too). */
int bi_fx_add_found_versions(struct bi_fx_recovered *r, struct fx_version *vs, size_t n);
void bi_fx_found_versions_done(struct bi_fx_recovered *r);
/* Every leaf of the index into f->rec's tables and versions (unsorted).
 * 0 or -ENOMEM. */
int bi_fx_collect(struct btrfsimg_forensic *f);

/* recpath.c */

/* Today's subvolume @id, or NULL. */
const struct btrfsimg_subvol *bi_fx_live_subvol(const struct bi_fx_recovered *r, uint64_t id);
/* The path of @v from the names found (r->refs sorted), the first
 * damaged name said in v->name_damage. malloc'd; NULL out of memory. */
char *bi_fx_version_path(const struct bi_fx_recovered *r, struct fx_version *v);

/* reckind.c */

/* Kind of each version; versions today's tree shows as they are are
 * skipped (unless orphans: reported once). */
void bi_fx_classify(struct btrfsimg_forensic *f);
/* Skip empty versions caught between a file's creation and its first
 * write in one transaction. */
void bi_fx_skip_just_created(struct bi_fx_recovered *r);
/* Status "artefact" for inode items flushed with a lagging size. 0 or
 * -ENOMEM. */
int bi_fx_mark_artefacts(struct bi_fx_recovered *r);
/* Versions of one file with the same bytes once: the verified, else the
 * newest. 0 or a negative errno. */
int bi_fx_same_contents(struct btrfsimg_forensic *f);

/* recover.c */

/* Build the versions (the first call's work of btrfsimg_forensic_recovered)
 * unless done. 0 or a negative errno. */
int bi_fx_ready(struct btrfsimg_forensic *f);

/* recdata.c */

/* The csum leaf last read by the checks of a version's sectors, kept
 * between them: created with the versions, freed with them (NULL is
 * fine). NULL out of memory. */
struct bi_fx_csum_cache *bi_fx_csum_cache_new(uint32_t nodesize);
void bi_fx_csum_cache_free(struct bi_fx_csum_cache *c);
/* The longest logical range one csum item covers (the backward search
 * of a sector's checksum stops there). */
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
int bi_fx_out_walk(struct btrfsimg_forensic *f, struct fx_version *v, bool raw, btrfsimg_data_fn fn,
		   void *ctx);
/* Zeros (holes, untrusted ranges) [off, off + len) as one call. */
typedef int (*bi_fx_hole_fn)(void *ctx, uint64_t off, uint64_t len);
/* bi_fx_out_walk, with every run of zeros it would produce given to @hole
 * instead, whatever its length: for work that need not touch each byte. */
int bi_fx_out_walk_holes(struct btrfsimg_forensic *f, struct fx_version *v, bool raw,
			 btrfsimg_data_fn fn, bi_fx_hole_fn hole, void *ctx);

#endif
