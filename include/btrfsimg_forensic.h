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
	BTRFSIMG_REC_METADATA_ONLY = 3, /**< no extent information found, or
					     the extent items found are not of
					     the inode item's state ("items
					     disagree with the inode": read as
					     zeros) */
	BTRFSIMG_REC_ARTEFACT = 4,	/**< a flush artefact: the inode item of a
					     later state (same mtime and ctime to
					     the nanosecond) with its size lagging
					     (often 0): a state nobody saw, not a
					     content the file held */
};
/** "intact", "partial", "overwritten", "metadata-only", "artefact". */
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
	/** NULL, or which name of @c path could not be a path component
	 *  (btrfsimg_name_problem), where it was and why: the path shows it by
	 *  its safe form (btrfsimg_name_safe). Borrowed, like path. */
	const char *name_damage;
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
 * first; identical versions once. Directories no live path shows any more
 * (removed, or in a dropped subvolume) come once each (S_ISDIR mode, no
 * contents, never verified): status intact when all their items were
 * found, else metadata-only (also when only their names were found: the
 * parent of a name, a directory entry; then mode is S_IFDIR alone and
 * the times and transid 0). The first call reads back the leaves and
 * checks the data (checksums, reuse); later calls reuse the result.
 */
BTRFSIMG_API int btrfsimg_forensic_recovered(btrfsimg_forensic *f, btrfsimg_recovered_fn fn,
					     void *ctx);

/**
 * Stream the contents of the version with id @p id through @p fn in
 * order (at most 1 MiB a call; ranges that cannot be trusted are written
 * as zeros). Returns 0 when every byte was read (intact), 1 when some
 * could not be (see the record's bad ranges), -ENOENT for an unknown id,
 * -EISDIR for a directory's, another negative errno, or @p fn's non-zero
 * value.
 */
typedef int (*btrfsimg_data_fn)(void *ctx, uint64_t offset, const void *data, size_t len);
BTRFSIMG_API int btrfsimg_forensic_read(btrfsimg_forensic *f, const char *id, btrfsimg_data_fn fn,
					void *ctx);

/**
 * Digest of version @p id's bytes as btrfsimg_forensic_read() streams them,
 * as lowercase hex into @p hex (@p hexlen >= 2 * digest size + 1; 129 fits
 * every algorithm). @p alg is an OpenSSL digest name ("sha256", "md5").
 * Returns btrfsimg_forensic_read()'s value (0 every byte read, 1 some
 * untrusted ranges read as zeros: the digest is of that), a negative errno
 * with its message on the handle @p f came from (nothing written to @p hex),
 * -EINVAL (unknown @p alg, @p hex too small; message on the handle) or
 * -ENOMEM.
 */
BTRFSIMG_API int btrfsimg_forensic_digest(btrfsimg_forensic *f, const char *id, const char *alg,
					  char *hex, size_t hexlen);

/** btrfsimg_forensic_read's flags. */
enum {
	/** Ranges whose bytes differ from the checksums btrfs wrote for them
	 *  (bad range why "csum mismatch") come as the bytes on disk instead
	 *  of zeros: unverified, damaged or not, but this file's (the other
	 *  bad ranges, reused or unreadable, stay zeros: their bytes are
	 *  another file's, or none). */
	BTRFSIMG_FORENSIC_RAW = 1u << 0,
};
/** btrfsimg_forensic_read with @p flags (BTRFSIMG_FORENSIC_*); -EINVAL for
 *  an unknown flag. The return value is the same: 1 when any range could
 *  not be trusted, raw or not. */
BTRFSIMG_API int btrfsimg_forensic_read_flags(btrfsimg_forensic *f, const char *id, unsigned flags,
					      btrfsimg_data_fn fn, void *ctx);

/**
 * The xattrs of the version with id @p id, through @p fn (as
 * btrfsimg_xattrs): the XATTR_ITEMs that follow its INODE_ITEM in the
 * leaf it was found in (a version's xattrs that spill into the next leaf
 * are not looked for; a damaged item is left out). None for a directory
 * known from its names only. Returns 0, -ENOENT for an unknown id,
 * another negative errno, or @p fn's non-zero value.
 */
BTRFSIMG_API int btrfsimg_forensic_xattrs(btrfsimg_forensic *f, const char *id,
					  btrfsimg_xattr_fn fn, void *ctx);

/**
 * Where the bytes of recovered version @p id lay: its EXTENT_DATA items
 * as btrfsimg_extents records (file order, covering its size; csum
 * UNCHECKED: the version's own check is its record's verified), each
 * copy's device, physical and image offset as for live files. The bytes
 * may since have been reused (the record's bad ranges say which). 0,
 * -ENOENT for an unknown id, -EISDIR for a directory's, @p fn's value,
 * or a negative errno.
 */
BTRFSIMG_API int btrfsimg_forensic_extents(btrfsimg_forensic *f, const char *id,
					   btrfsimg_extent_fn fn, void *ctx);

/**
 * The recovered versions whose data extents covered logical
 * [@p logical, + @p len) (a free range, a carving hit): one
 * BTRFSIMG_OWNER_RECOVERED record per version and item, with the
 * version's id, path, generation and the file range. 0, @p fn's value or
 * a negative errno.
 */
BTRFSIMG_API int btrfsimg_forensic_owners(btrfsimg_forensic *f, uint64_t logical, uint64_t len,
					  btrfsimg_owner_fn fn, void *ctx);

/* ------------------------------------------------------------------ */
/** @name Offline scrub */

/** What failed where btrfsimg_scrub() found damage. */
enum btrfsimg_scrub_kind {
	BTRFSIMG_SCRUB_DATA_CSUM = 0, /**< a data sector's checksum differs from the csum tree's */
	BTRFSIMG_SCRUB_TREE_CSUM = 1, /**< a tree block's header checksum does not match */
	BTRFSIMG_SCRUB_TREE_HEADER = 2, /**< its bytenr, fsid, chunk tree uuid or generation */
	BTRFSIMG_SCRUB_READ = 3,	/**< the bytes could not be read (past the image's end) */
	BTRFSIMG_SCRUB_PARITY = 4,	/**< RAID5/6 P or Q differs from the row's data */
	BTRFSIMG_SCRUB_SUPER = 5,	/**< a superblock copy is invalid or stale */
	BTRFSIMG_SCRUB_UNCHECKED = 6,	/**< a chunk stripe left unchecked: its extent or
					     csum items could not be read (length: the
					     stripe's, at most 4 GiB - 1) */
};
/** "data-csum", "tree-csum", "tree-header", "read", "parity", "super",
 *  "unchecked". */
BTRFSIMG_API const char *btrfsimg_scrub_kind_name(enum btrfsimg_scrub_kind k);

/** One damaged range of one copy. */
struct btrfsimg_scrub_error {
	enum btrfsimg_scrub_kind kind;
	uint64_t logical;	  /**< data sector or tree block; parity: the row's first
				       data byte; super: 0 */
	uint64_t devid, physical; /**< where the bad copy lies (from the start of
				       the filesystem on that device) */
	uint32_t length;	  /**< bytes: a sector, a tree block, a parity unit */
	int mirror;		  /**< 1-based copy as btrfs-map-logical numbers them;
				       parity: 0 */
	bool correctable;	  /**< another copy (or a RAID5/6 rebuild) checks out */
	char detail[160];	  /**< the check and have/expect */
};

/** Per device, in the kernel's units (`btrfs scrub start -R -d`): bytes
 *  scrubbed and errors counted in sectors. */
struct btrfsimg_scrub_dev {
	uint64_t devid;
	const char *name; /**< the image, borrowed from the handle; NULL if missing */
	bool missing;	  /**< not supplied: nothing was checked */
	uint64_t data_bytes_scrubbed, tree_bytes_scrubbed;
	uint64_t tree_blocks;	       /**< tree blocks checked */
	uint64_t read_errors;	       /**< sectors that could not be read */
	uint64_t csum_errors;	       /**< data sectors whose checksum differs */
	uint64_t verify_errors;	       /**< sectors of tree blocks that failed (checksum or
					    header), as the kernel counts them */
	uint64_t no_csum;	       /**< data sectors with no checksum (nodatasum): unchecked */
	uint64_t parity_bytes;	       /**< RAID5/6 parity checked */
	uint64_t parity_errors;	       /**< parity sectors that differ */
	uint64_t super_errors;	       /**< superblock copies invalid or stale */
	uint64_t uncorrectable_errors; /**< bad sectors no other copy has right */
	uint64_t bytes_read;	       /**< device bytes read (or tried: past a cut image) */
	uint64_t unchecked_bytes;      /**< stripe bytes left unchecked (see
					    BTRFSIMG_SCRUB_UNCHECKED); on a missing
					    device, every stripe byte on it (none
					    could be read) */
	/** A missing device: bytes of its tree blocks and data in use rebuilt
	 *  from the other stripes and parity of RAID5/6 chunks and checked
	 *  (counted in tree/data_bytes_scrubbed too); 0 for what only mirrors
	 *  or nothing hold (checked on the other copies' devices, or lost). */
	uint64_t rebuilt_bytes;
	/** RAID5/6 parity on this device not checked: a device of its row is
	 *  missing, so the row's data cannot be read to compare with. */
	uint64_t parity_unchecked_bytes;
};

/** The result of btrfsimg_scrub(). */
struct btrfsimg_scrub_report {
	struct btrfsimg_scrub_dev *devs; /**< every device of the filesystem, devid order */
	size_t ndevs;
	struct btrfsimg_scrub_error *errors; /**< the first damaged ranges found, device by
						  device in physical order */
	size_t nerrors;
	uint64_t total_errors; /**< damaged ranges found (errors holds the first) */
};

/** Progress of a scrub: @p done of @p total bytes of chunk stripes gone
 *  through; a non-zero return stops the scrub (btrfsimg_scrub() then
 *  returns -ECANCELED). */
typedef int (*btrfsimg_scrub_progress_fn)(void *ctx, uint64_t done, uint64_t total);

struct btrfsimg_scrub_opts {
	/** How many damaged ranges to list; 0: every one. */
	size_t max_errors;
	/** Called after each read window (may be NULL). */
	btrfsimg_scrub_progress_fn progress;
	void *progress_ctx;
};

/**
 * Check every copy of every tree block and data sector the extent tree
 * says is in use, against its checksum, as `btrfs scrub` does but
 * read-only and offline: tree blocks by their header checksum, bytenr,
 * fsid, chunk tree uuid and the extent item's generation; data sectors by
 * the csum tree (sectors it has no checksum for count as no_csum); RAID5/6
 * parity against the data of its row; superblock copies. Each device is
 * read from start to end in large sequential reads of what is allocated.
 * A damaged range is checked against the other copies (correctable).
 * @p opts may be NULL. On success *out owns the report
 * (btrfsimg_scrub_report_free()); damage is a result, not an error.
 */
BTRFSIMG_API int btrfsimg_scrub(btrfsimg_fs *fs, const struct btrfsimg_scrub_opts *opts,
				struct btrfsimg_scrub_report **out);
/** Release a report. Accepts NULL. */
BTRFSIMG_API void btrfsimg_scrub_report_free(struct btrfsimg_scrub_report *r);

/* ------------------------------------------------------------------ */
/** @name Unallocated space */

/** What an unallocated range is. */
enum btrfsimg_unalloc_kind {
	BTRFSIMG_UNALLOC_DEVICE = 0,   /**< device space no chunk maps (superblock copies
					    left out) */
	BTRFSIMG_UNALLOC_DATA = 1,     /**< free space in a data block group */
	BTRFSIMG_UNALLOC_METADATA = 2, /**< free space in a metadata or system block group */
	BTRFSIMG_UNALLOC_PARITY = 3,   /**< RAID5/6 parity of rows with no data in use */
};
/** "device", "data", "metadata", "parity". */
BTRFSIMG_API const char *btrfsimg_unalloc_kind_name(enum btrfsimg_unalloc_kind k);

/** One range of device bytes no live extent uses. */
struct btrfsimg_unalloc_range {
	enum btrfsimg_unalloc_kind kind;
	uint64_t devid;
	uint64_t physical; /**< from the start of the filesystem on the device */
	uint64_t length;
	bool has_logical; /**< inside a chunk: logical is where it maps */
	uint64_t logical;
	int mirror; /**< 1-based copy of that logical range; 0 for none */
};

/** Called once per range, in order; non-zero stops the listing. */
typedef int (*btrfsimg_unalloc_fn)(void *ctx, const struct btrfsimg_unalloc_range *r);

/**
 * Every byte range of every supplied device that no live extent uses:
 * device space outside every chunk (up to the image's end, superblock
 * copies excepted), and inside chunks the ranges the extent tree has no
 * EXTENT_ITEM or METADATA_ITEM for, per copy. In devid order, then
 * physical offset; ranges never overlap, neighbours that continue each
 * other (kind, copy, logical address) are one range. Memory stays small
 * whatever the count. Returns 0, a negative errno, or @p fn's non-zero
 * value.
 */
BTRFSIMG_API int btrfsimg_unallocated(btrfsimg_fs *fs, btrfsimg_unalloc_fn fn, void *ctx);

/**
 * Read @p len bytes of device @p devid at @p physical (from the start of
 * the filesystem on it): the bytes of an unallocated range. -ENOENT for a
 * device not supplied, -EIO past its end.
 */
BTRFSIMG_API int btrfsimg_device_read(btrfsimg_fs *fs, uint64_t devid, uint64_t physical, void *buf,
				      size_t len);

#ifdef __cplusplus
}
#endif
#endif /* BTRFSIMG_FORENSIC_H */
