/* SPDX-License-Identifier: MIT */
/**
 * @file btrfsimg_forensic.h
 * libbtrfsimg forensics: every tree block that ever was, the generations
 * they make up, and the files they show that no live path shows any more
 * (deleted files, earlier versions, dropped subvolumes, orphans), with
 * their bytes and how sure the library is of them.
 *
 * Same error model as btrfsimg.h: 0 or a negative errno, the message on
 * the filesystem handle. Every stale block passes the same checks as a
 * live one (checksum, header, item table) and must sit where a chunk map
 * (today's, or an older one found in a stale chunk-tree leaf) puts its
 * bytenr; nothing else is ever used.
 */
#ifndef BTRFSIMG_FORENSIC_H
#define BTRFSIMG_FORENSIC_H

#include "btrfsimg.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The result of a scan: an index of tree blocks (entries, not blocks:
 *  the blocks are read again when needed). Opaque. Borrows the
 *  filesystem handle it was made from, which must outlive it. */
typedef struct btrfsimg_forensic btrfsimg_forensic;

/** Progress of a scan: @p done of @p total device bytes read. */
typedef void (*btrfsimg_scan_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/**
 * Read every device of open filesystem @p fs from end to end in large
 * sequential reads and index every tree block of this filesystem: the
 * header's fsid is the metadata fsid, the checksum is valid, the header
 * and item table pass the checker, and the bytenr maps to where the block
 * was found through today's chunk map or a chunk item of a stale chunk
 * tree leaf. @p fn (may be NULL) is called after each read. On success
 * *out owns the index (btrfsimg_forensic_free()).
 */
BTRFSIMG_API int btrfsimg_forensic_scan(btrfsimg_fs *fs, btrfsimg_scan_progress_fn fn, void *ctx,
					btrfsimg_forensic **out);
/** Release an index. Accepts NULL. */
BTRFSIMG_API void btrfsimg_forensic_free(btrfsimg_forensic *f);

/** What a scan saw. */
struct btrfsimg_scan_stats {
	uint64_t devices;    /**< devices read */
	uint64_t bytes;	     /**< device bytes read */
	uint64_t candidates; /**< positions whose header carries the fsid */
	uint64_t bad_csum;   /**< ... whose checksum did not match */
	uint64_t bad_block;  /**< ... whose header or item table failed a check */
	uint64_t unmapped;   /**< ... valid, but no chunk map puts the bytenr there */
	uint64_t copies;     /**< valid blocks found again (dup, raid1 copies) */
	uint64_t blocks;     /**< distinct blocks indexed */
	uint64_t old_chunks; /**< chunk items of stale chunk-tree leaves not in
				  today's map */
};
BTRFSIMG_API int btrfsimg_forensic_stats(const btrfsimg_forensic *f,
					 struct btrfsimg_scan_stats *out);

/** One indexed tree block. */
struct btrfsimg_tree_block {
	uint64_t bytenr, generation, owner;
	uint8_t level;
	uint32_t nritems;
	uint64_t devid, physical;	 /**< where it was found (first copy) */
	struct btrfsimg_key first, last; /**< key range (zero when nritems is 0) */
};
typedef int (*btrfsimg_tree_block_fn)(void *ctx, const struct btrfsimg_tree_block *b);
/** Every indexed block ordered by owner, generation, level, first key.
 *  @p fn returning non-zero stops the walk and that value is returned. */
BTRFSIMG_API int btrfsimg_forensic_blocks(btrfsimg_forensic *f, btrfsimg_tree_block_fn fn,
					  void *ctx);

/* ------------------------------------------------------------------ */
/** @name History */

/** One tree a root item of a generation names. */
struct btrfsimg_history_tree {
	uint64_t id;	     /**< tree (subvolume) id */
	uint64_t bytenr;     /**< its root block */
	uint64_t generation; /**< the root item's generation */
	bool found;	     /**< that block (bytenr, generation) is in the index */
};

/** One generation for which a root tree block (or an fs tree root) was found. */
struct btrfsimg_generation {
	uint64_t transid;
	bool superblock;	   /**< a superblock copy (or its backup roots) names it */
	uint64_t root_tree_bytenr; /**< 0 if unknown */
	uint64_t blocks;	   /**< indexed blocks written in this generation */
	const struct btrfsimg_history_tree *trees; /**< borrowed for the call */
	size_t ntrees;
	/** Newest time known for the generation (root items' ctime/otime,
	 *  ctimes of inodes last changed in it); sec 0 and has_time false
	 *  when none. */
	bool has_time;
	struct btrfsimg_timespec time;
};
typedef int (*btrfsimg_generation_fn)(void *ctx, const struct btrfsimg_generation *g);
/** Every generation, oldest first. */
BTRFSIMG_API int btrfsimg_forensic_history(btrfsimg_forensic *f, btrfsimg_generation_fn fn,
					   void *ctx);

/* ------------------------------------------------------------------ */
/** @name Deleted files and earlier versions */

enum btrfsimg_recovered_kind {
	BTRFSIMG_REC_DELETED = 0,	    /**< the inode is gone from its live tree */
	BTRFSIMG_REC_PREVIOUS_VERSION = 1,  /**< it lives; this version had other
						 contents or size */
	BTRFSIMG_REC_DROPPED_SUBVOLUME = 2, /**< its whole tree was deleted */
	BTRFSIMG_REC_ORPHAN = 3,	    /**< link count 0, still in the tree */
};
/** "deleted", "previous-version", "dropped-subvolume", "orphan". */
BTRFSIMG_API const char *btrfsimg_recovered_kind_name(enum btrfsimg_recovered_kind k);

enum btrfsimg_recovered_status {
	BTRFSIMG_REC_INTACT = 0,	/**< every byte read */
	BTRFSIMG_REC_PARTIAL = 1,	/**< some ranges unreadable or reused */
	BTRFSIMG_REC_OVERWRITTEN = 2,	/**< every data extent was reused */
	BTRFSIMG_REC_METADATA_ONLY = 3, /**< no extent information found */
};
/** "intact", "partial", "overwritten", "metadata-only". */
BTRFSIMG_API const char *btrfsimg_recovered_status_name(enum btrfsimg_recovered_status s);

/** A file range of a recovered version that could not be trusted. */
struct btrfsimg_bad_range {
	uint64_t offset, length;
	const char *why; /**< static: "reused", "unreadable", "csum mismatch",
			      "items not found" */
};

/** One recovered version of a file. */
struct btrfsimg_recovered {
	const char *id; /**< stable: SUBVOL-OBJECTID-TRANSID-SIGNATURE */
	enum btrfsimg_recovered_kind kind;
	uint64_t subvol, objectid;
	uint64_t generation; /**< of the newest block this version was seen in */
	/** From the top level; parts no name was found for are written
	 *  <SUBVOL:OBJECTID>. Borrowed: valid until btrfsimg_forensic_free. */
	const char *path;
	struct btrfsimg_inode inode; /**< the version's INODE_ITEM (otime is btime) */
	enum btrfsimg_recovered_status status;
	/** Every data sector read matched a checksum btrfs wrote for that
	 *  extent; never for inline or nodatasum data. */
	bool verified;
	bool has_inline, nodatasum, compressed;
	const struct btrfsimg_bad_range *bad; /**< borrowed, like path */
	size_t nbad;
};
typedef int (*btrfsimg_recovered_fn)(void *ctx, const struct btrfsimg_recovered *r);

/**
 * Every recovered version (regular files and symlinks that no live path
 * shows as they were), grouped by file (subvolume, objectid), newest
 * first; identical versions once. The first call reads back the leaves
 * and checks the data (checksums, reuse); later calls reuse the result.
 */
BTRFSIMG_API int btrfsimg_forensic_recovered(btrfsimg_forensic *f, btrfsimg_recovered_fn fn,
					     void *ctx);

/**
 * Stream the contents of the version with id @p id through @p fn in
 * order (at most 1 MiB a call; ranges that cannot be trusted are written
 * as zeros). Returns 0 when every byte was read (intact), 1 when some
 * could not be (see the record's bad ranges), -ENOENT for an unknown id,
 * another negative errno, or @p fn's non-zero value.
 */
typedef int (*btrfsimg_data_fn)(void *ctx, uint64_t offset, const void *data, size_t len);
BTRFSIMG_API int btrfsimg_forensic_read(btrfsimg_forensic *f, const char *id, btrfsimg_data_fn fn,
					void *ctx);

#ifdef __cplusplus
}
#endif
#endif /* BTRFSIMG_FORENSIC_H */
