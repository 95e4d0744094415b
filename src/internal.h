/* SPDX-License-Identifier: MIT */
/*
 * Internal interfaces between the library's files. Cross-file internals use
 * the "bi_" prefix and are hidden (the shared library exports btrfsimg_*
 * only). One section per file, in layer order: handle and errors, device
 * I/O, checksums, superblock, chunk map, tree blocks, roots.
 */
#ifndef BI_INTERNAL_H
#define BI_INTERNAL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btrfsimg.h"
#include "btrfsimg_inum.h"
#include "cursor.h"
#include "ondisk.h"

#ifndef EUCLEAN
#define EUCLEAN 117
#endif

#define BI_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ================= fs.c: the handle, errors, damage ================= */

struct bi_dev;
struct bi_cache;
struct bi_chunk_map;

struct bi_super {
	struct btrfsimg_super_info info;
	uint8_t raw[SB_SIZE];
	uint64_t chunk_root_generation;
	uint64_t log_root_transid;
	uint32_t sys_array_size;
	/* the dev_item of the device the copy came from */
	uint64_t devid;
	uint8_t dev_uuid[16];
	uint8_t dev_fsid[16];
	uint64_t dev_total_bytes;
};

struct bi_root {
	uint64_t id;
	uint64_t bytenr;
	uint64_t generation;
	uint8_t level;
};

struct btrfsimg_fs {
	struct btrfsimg_open_opts opts;
	char err[1024];
	btrfsimg_log_fn log;
	void *log_ctx;
	uint64_t damage;

	struct bi_dev *devs;	/* every device added, in order */
	size_t ndevs, devcap;
	bool opened;

	struct bi_super sb;	/* the copy in use */
	uint64_t missing_devs;
	uint32_t nodesize, sectorsize, csum_size;
	int csum_type;
	uint8_t meta_fsid[16];	/* fsid tree blocks carry */

	struct bi_chunk_map *chunks;
	struct bi_cache *cache;
	struct bi_root root_tree, chunk_tree;
	struct bi_log_overlay *overlays;	/* replayed log, per subvolume (logtree.c) */
};

/* Set the handle's message and return @code (a negative errno). */
int bi_err(struct btrfsimg_fs *fs, int code, const char *fmt, ...) BI_PRINTF(3, 4);
/* Format a parser's reason into @why (may be NULL) and return -EUCLEAN. */
int bi_why(char *why, size_t whylen, const char *fmt, ...) BI_PRINTF(3, 4);
/* Report damage that was worked around; counts it and logs it. */
void bi_damage(struct btrfsimg_fs *fs, const char *fmt, ...) BI_PRINTF(2, 3);
/* Informational log line (not damage). */
void bi_info(struct btrfsimg_fs *fs, const char *fmt, ...) BI_PRINTF(2, 3);
/* Format a uuid as 36 lowercase characters plus NUL. */
void bi_uuid_str(const uint8_t uuid[16], char out[37]);
bool bi_uuid_is_zero(const uint8_t uuid[16]);

/* ================= io.c: devices and partitions ================= */

struct bi_dev {
	char *name;
	int fd;				/* -1 unless a file */
	const uint8_t *mem;		/* borrowed buffer, or NULL */
	btrfsimg_read_fn rfn;		/* callback, or NULL */
	void *rctx;
	uint64_t raw_size;		/* whole image */
	uint64_t base;			/* where the filesystem starts in the image */
	uint64_t size;			/* bytes from base to the end */
	/* set when the superblocks are read (super.c) */
	bool has_super;
	uint64_t devid;
	uint8_t dev_uuid[16];
	uint8_t fsid[16];
	uint64_t generation;
	uint64_t total_bytes;		/* dev_item.total_bytes */
	struct btrfsimg_super_mirror mirrors[SB_MIRROR_MAX];
	bool member;			/* matched to the filesystem in use */
};

/* Read @len bytes at @off (relative to the device's base). A read past the
 * end is -EIO with a message naming the device and the range. */
int bi_dev_read(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t off, void *buf,
		size_t len);
/* Read from the raw image (ignoring base). Same contract. */
int bi_dev_read_raw(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t off, void *buf,
		    size_t len);
/* Tell the kernel [off, off+len) will be read soon (a file device only; a
 * hint, so out-of-range or failing requests are ignored). */
void bi_dev_prefetch(const struct bi_dev *d, uint64_t off, uint64_t len);
/* Choose base/size of every device: the image itself if it holds btrfs at
 * 64 KiB, else the partition asked for, else the only btrfs partition. */
int bi_dev_locate(struct btrfsimg_fs *fs, struct bi_dev *d);
/* The member device with this devid, or NULL if it is missing. */
struct bi_dev *bi_dev_by_id(struct btrfsimg_fs *fs, uint64_t devid);
void bi_devs_close(struct btrfsimg_fs *fs);

/* At most this many devices per handle (more is -EINVAL). */
#define BI_MAX_DEVS 64
/* bi_part_parse never returns more: 8192 GPT entries (1 MiB array of
 * 128-byte entries) or 4 primaries + 4 per EBR over 128 EBRs. */
#define BI_PART_MAX (8192 + 4 + 4 * 128)

typedef int (*bi_read_at_fn)(void *ctx, uint64_t off, void *buf, size_t len);
/* Parse an MBR or GPT partition table through @rd (only called for ranges
 * inside [0, size)). Fills up to @max entries, returns the number of
 * partitions (0: no table, or an empty one; at most BI_PART_MAX) or a
 * negative errno (-EUCLEAN: bad table; @rd's error) with a message in @err.
 * On success @err is empty or notes damage worked around (the backup GPT
 * header used). Partitions are listed as the table states them, possibly
 * extending past @size. Does not probe for btrfs (is_btrfs left false). */
int bi_part_parse(bi_read_at_fn rd, void *ctx, uint64_t size, struct btrfsimg_partition *out,
		  size_t max, char *err, size_t errlen);

/* ================= csum.c: checksums and name hashes ================= */

/* Digest size of a checksum type, 0 if unknown. */
size_t bi_csum_size(int csum_type);
/* Checksum @len bytes into @out (CSUM_SIZE_MAX bytes, zero padded) in the
 * on-disk byte order. Returns 0 or -EOPNOTSUPP for an unknown type. */
int bi_csum(int csum_type, const void *data, size_t len, uint8_t out[CSUM_SIZE_MAX]);
/* Raw CRC-32C update (no pre/post inversion): what name hashes use. */
uint32_t bi_crc32c_raw(uint32_t seed, const void *data, size_t len);
/* DIR_ITEM / XATTR_ITEM key offset of a name. */
uint64_t bi_name_hash(const void *name, size_t len);
/* INODE_EXTREF key offset. */
uint64_t bi_extref_hash(uint64_t parent, const void *name, size_t len);

/* ================= compress.c: bounded decompressors ================= */

/* Reusable decompression state (zstd context, lzo work memory). One per
 * handle; never shared between handles. */
struct bi_zctx;
struct bi_zctx *bi_zctx_new(void);
void bi_zctx_free(struct bi_zctx *z);

/* Decompress one extent's bytes (btrfs compression type 1 zlib, 2 lzo,
 * 3 zstd) into at most @dstlen bytes. *outlen receives the bytes produced
 * (may be < dstlen: on success the rest of dst is zeroed; on failure dst
 * holds garbage). Never reads past @srclen or writes past @dstlen.
 * @sectorsize is the LZO segment unit (a power of 2 in [4K, 64K], else
 * -EINVAL). Returns 0, -EUCLEAN (corrupt stream, @why says where),
 * -EOPNOTSUPP (type not 1..3), -ENOMEM or -EINVAL (NULL arguments). */
int bi_decompress(struct bi_zctx *z, int type, const uint8_t *src, size_t srclen, uint8_t *dst,
		  size_t dstlen, uint32_t sectorsize, size_t *outlen, char *why, size_t whylen);

/* ================= super.c: superblocks ================= */

/* Decode and check one 4096-byte copy read from @bytenr. Returns a
 * btrfsimg_mirror_state; @why receives the reason when not valid. */
int bi_super_parse(const uint8_t *buf, size_t len, uint64_t bytenr, struct bi_super *out,
		   char *why, size_t whylen);
/* Read every device's copies, pick the one to use, match devices. */
int bi_super_load(struct btrfsimg_fs *fs);
/* Offset of superblock copy @i (0..2). */
uint64_t bi_super_offset(int i);

/* ================= chunk.c: logical -> physical ================= */

struct bi_stripe {
	uint64_t devid;
	uint64_t offset;
	uint8_t dev_uuid[16];
};

/* A checked chunk. sub_stripes is the kernel's value for the profile (2
 * for RAID10, else 1), not the on-disk field, which old mkfs left at 0. */
struct bi_chunk {
	uint64_t logical, length, type, stripe_len;
	uint16_t num_stripes, sub_stripes;
	struct bi_stripe stripes[];
};

/* Decode and check one chunk item at @logical with the kernel's
 * tree-checker rules (btrfs_check_chunk_valid): item size exactly 48 + 32
 * per stripe, num_stripes >= 1 and valid for the profile (single 1, dup 2,
 * raid1 2, raid1c3 3, raid1c4 4, raid0 >= 1, raid10 >= 2 with sub_stripes
 * 2, raid5 >= 2, raid6 >= 3), at most one profile bit, at least one of
 * data/system/metadata and no unknown bit, system not mixed with the
 * others, stripe_len 64 KiB, the item's sector_size == @sectorsize, start
 * and length @sectorsize-aligned, length nonzero and below 2^32 stripes,
 * no overflow. Also: no stripe's device range overflows. Data+metadata
 * (mixed) is left to the caller, which knows the feature flags. On success
 * *out is a new chunk (free()). Returns 0, -EUCLEAN with @why set ("chunk
 * at logical L: <check>, have X expect Y"), -ENOMEM, or -EINVAL for a
 * @sectorsize that is not a power of two. */
int bi_chunk_parse(const uint8_t *item, size_t len, uint64_t logical, uint32_t sectorsize,
		   struct bi_chunk **out, char *why, size_t whylen);

/* Bytes each stripe covers on its device: the length for mirrored
 * profiles, else the whole rows the chunk spans times stripe_len. Every
 * physical address the chunk maps to stripe i lies in
 * [stripes[i].offset, stripes[i].offset + span); the sum never overflows. */
uint64_t bi_chunk_stripe_span(const struct bi_chunk *c);

struct bi_chunk_map *bi_chunk_map_new(void);
void bi_chunk_map_free(struct bi_chunk_map *m);
/* Take ownership of @c (freed on every path but a successful insert).
 * An overlap with another chunk is -EUCLEAN with @why set. A chunk with
 * the same start and length as one already present is dropped: 0 if it
 * is identical (the sys array and the chunk tree repeat each other), 1 if
 * it differs (the first one is kept, as the kernel keeps the sys array's). */
int bi_chunk_map_insert(struct bi_chunk_map *m, struct bi_chunk *c, char *why, size_t whylen);
/* The chunk holding @logical, or NULL. Borrowed from the map. O(log n). */
const struct bi_chunk *bi_chunk_lookup(const struct bi_chunk_map *m, uint64_t logical);
size_t bi_chunk_map_count(const struct bi_chunk_map *m);
const struct bi_chunk *bi_chunk_map_at(const struct bi_chunk_map *m, size_t i);
/* Chunks found degraded (some stripe's device missing) while loading. */
uint64_t bi_chunk_map_degraded(const struct bi_chunk_map *m);

/* Where one piece of a logical read lands. */
struct bi_phys {
	uint64_t devid;
	uint64_t physical;
	uint64_t len;		/* bytes usable before the stripe (or chunk) ends */
	uint32_t stripe;	/* index into chunk->stripes */
};
/* Map @logical inside @c for mirror @copy (0-based, below the profile's
 * mirror count: num_stripes for dup and raid1 to raid1c4, 2 for raid10,
 * else 1). RAID5/6 take copy 0 only: the data stripe itself. Pure
 * arithmetic; -EINVAL outside the chunk or for a bad copy. */
int bi_chunk_map_phys(const struct bi_chunk *c, uint64_t logical, int copy,
		      struct bi_phys *out);
/* RAID5/6: position @pos (0..d-1 the data stripes in logical order, d P,
 * d+1 Q) of the full stripe holding @logical, at the same offset inside
 * the stripe. -EINVAL for other profiles or a bad position. */
int bi_chunk_map_row(const struct bi_chunk *c, uint64_t logical, uint32_t pos,
		     struct bi_phys *out);
/* How many ways there are to read a block of @c, as the kernel counts
 * them (btrfs_num_copies): the mirror count for dup, raid1 to raid1c4 and
 * raid10; raid5 2 (direct, rebuilt from P); raid6 num_stripes (direct,
 * from P, from Q, then from P and Q with one more data stripe distrusted,
 * each in turn); else 1. */
int bi_chunk_num_copies(const struct bi_chunk *c);

/* Parse the superblock's sys_chunk_array into fs->chunks. */
int bi_chunk_load_sys_array(struct btrfsimg_fs *fs);
/* Walk the chunk tree and add every chunk, then report (as damage) every
 * chunk with a stripe on a missing device, saying whether it can still be
 * read whole. A stripe's device is present when a member device has its
 * devid and dev_uuid (as the kernel's btrfs_find_device). */
int bi_chunk_load_tree(struct btrfsimg_fs *fs);
/* Read @len bytes at @logical using way @copy (0 <= copy <
 * bi_num_copies(logical), else -EINVAL), crossing stripe and chunk
 * boundaries (a later chunk with fewer ways uses copy modulo its count).
 * Mirrors: copy k reads mirror k (-EIO if its device is missing).
 * RAID5/6: see bi_chunk_num_copies; copy 0 rebuilds when the data device
 * is missing, and every rebuild also works around missing devices while
 * at most 1 (raid5) or 2 (raid6) stripes of the row are lost. Memory: two
 * or three buffers of at most stripe_len, whatever the stripe count. */
int bi_read_copy(struct btrfsimg_fs *fs, uint64_t logical, void *buf, size_t len, int copy);
/* Whether way @copy of @logical (a mirror profile) lies on a device that
 * was not supplied: known since the open, so a failed read of it needs no
 * report of its own. */
bool bi_copy_missing(struct btrfsimg_fs *fs, uint64_t logical, int copy);
/* Start reading the first copy of [logical, +len) into the page cache
 * ahead of its use (see bi_dev_prefetch); RAID5/6 chunks are left alone. */
void bi_prefetch(struct btrfsimg_fs *fs, uint64_t logical, uint64_t len);
/* Number of ways to read @logical (1 if unmapped: the read will fail). */
int bi_num_copies(struct btrfsimg_fs *fs, uint64_t logical);

/* raid.c: rebuilding one data block of a RAID5/6 row (pure; see raid.c).
 * Positions: 0..ndata-1 data in logical order, ndata P, ndata+1 Q. */
struct bi_raid_plan {
	uint32_t ndata, nparity, x, y;	/* x: the block to rebuild; y: a second
					   lost data block or UINT32_MAX */
	bool use_p, use_q;
};
/* Plan the rebuild of data block @x when the positions in @lost (x among
 * them; duplicates allowed) cannot be used. -EINVAL if that is impossible
 * (more lost than @nparity, or two data blocks sharing a Q coefficient). */
int bi_raid_plan(struct bi_raid_plan *p, uint32_t ndata, uint32_t nparity, uint32_t x,
		 const uint32_t *lost, uint32_t nlost);
/* Whether the plan needs the block at @pos. */
bool bi_raid_uses(const struct bi_raid_plan *p, uint32_t pos);
/* Fold the block at @pos (one the plan uses) into @pacc / @qacc (@len
 * bytes each, zeroed before the first fold; @qacc only read if use_q). */
void bi_raid_fold(const struct bi_raid_plan *p, uint32_t pos, const uint8_t *blk, uint8_t *pacc,
		  uint8_t *qacc, size_t len);
/* Write data block x into @out (which may be @pacc) once every used block
 * was folded. Clobbers the accumulators. */
void bi_raid_solve(const struct bi_raid_plan *p, uint8_t *pacc, uint8_t *qacc, size_t len,
		   uint8_t *out);
/* The same over in-memory blocks @blk[pos] (NULL where absent; every block
 * the plan uses must be there, else -EINVAL). 0, -EINVAL or -ENOMEM. */
int bi_raid_rebuild(const uint8_t *const *blk, uint32_t ndata, uint32_t nparity, uint32_t x,
		    const uint32_t *lost, uint32_t nlost, size_t len, uint8_t *out);

/* ================= tree.c: verified tree blocks ================= */

typedef struct btrfsimg_key bi_key;
int bi_key_cmp(const bi_key *a, const bi_key *b);
void bi_key_read(const uint8_t *p, bi_key *k);	/* 17 bytes, already bounds-checked */

/* What the parent (or the superblock) says a block must be. */
struct bi_expect {
	uint64_t owner;			/* tree id, for messages */
	uint64_t generation;		/* 0: not checked */
	int level;			/* -1: not checked */
	const bi_key *first_key;	/* NULL: not checked */
};

/* A verified tree block. Item/pointer tables were checked when read. */
struct bi_block {
	uint64_t bytenr;
	uint64_t generation, owner;
	uint32_t nritems;
	uint8_t level;
	uint32_t size;
	uint8_t *data;
	/* cache bookkeeping (tree.c) */
	uint32_t refs;
	bool uncached;
	struct bi_block *hnext, *lru_prev, *lru_next;
};

/* The structural checker (header, item table, key order), pure: used by
 * the reader and by fuzz targets. Returns 0 or -EUCLEAN with @why set. */
int bi_block_check(const uint8_t *blk, uint32_t nodesize, uint64_t bytenr,
		   const uint8_t fsid[16], const struct bi_expect *e, char *why, size_t whylen);

/* Read and verify the block at @bytenr, trying every copy. Returns a
 * reference: release it with bi_block_put(). */
int bi_block_read(struct btrfsimg_fs *fs, uint64_t bytenr, const struct bi_expect *e,
		  struct bi_block **out);
void bi_block_put(struct btrfsimg_fs *fs, struct bi_block *b);
/* Put a block that will not be wanted again soon (a leaf already read or
 * summarized): unless someone else holds it, it leaves the cache and its
 * buffer serves the next read while still warm in the CPU's cache. */
void bi_block_put_once(struct btrfsimg_fs *fs, struct bi_block *b);

/* Slot accessors: valid for slot < nritems of a checked block. */
void bi_leaf_item(const struct bi_block *b, uint32_t slot, bi_key *k, const uint8_t **data,
		  uint32_t *size);
void bi_node_ptr(const struct bi_block *b, uint32_t slot, bi_key *k, uint64_t *blockptr,
		 uint64_t *gen);

struct bi_cache *bi_cache_new(uint64_t max_bytes);
void bi_cache_free(struct bi_cache *c);

/* Ordered iteration over [min, max] of one tree. */
struct bi_item {
	bi_key key;
	const uint8_t *data;	/* borrowed until the next call */
	uint32_t size;
	uint64_t block;		/* leaf bytenr, for messages */
	uint32_t slot;
};

/* Items that replace or hide a tree's own (the log tree replayed in
 * memory). Puts are sorted by key and unique; dels are sorted,
 * non-overlapping inclusive ranges. Owned by the handle (fs->overlays). */
struct bi_ovl_put {
	bi_key key;
	uint8_t *data;
	uint32_t size;
};
struct bi_ovl_del {
	bi_key start, end;
};
struct bi_log_overlay {
	uint64_t root;
	struct bi_ovl_put *puts;
	size_t nputs;
	struct bi_ovl_del *dels;
	size_t ndels;
	struct bi_log_overlay *next;
};
const struct bi_log_overlay *bi_overlay_for(const struct btrfsimg_fs *fs, uint64_t root);
void bi_overlays_free(struct btrfsimg_fs *fs);

struct bi_iter {
	struct btrfsimg_fs *fs;
	struct bi_root root;
	bi_key min, max, last;
	struct bi_block *path[MAX_LEVEL];
	uint32_t slot[MAX_LEVEL];
	int top;		/* root level */
	bool started, done;
	/* merging with an overlay (tree.c) */
	const struct bi_log_overlay *ovl;
	size_t ovl_pos, del_pos;
	struct bi_item base;
	bool have_base, base_done;
	bool (*skip)(const bi_key *lo, const bi_key *hi);
	bool stream;
	uint32_t ra_slot;	/* streaming: path[1]'s first slot not prefetched */
};

int bi_iter_start(struct btrfsimg_fs *fs, struct bi_iter *it, const struct bi_root *root,
		  const bi_key *min, const bi_key *max);
/* 1: *out holds an item; 0: no more; < 0: error (message on fs). */
int bi_iter_next(struct bi_iter *it, struct bi_item *out);
void bi_iter_end(struct bi_iter *it);
/* Leaves whose whole key range [lo, hi) @skip rejects are not read (after
 * the first leaf; the last leaf under each node is always read, its upper
 * bound being unknown there). For callers that want a few item types: a
 * skipped leaf is neither read nor checked. */
void bi_iter_skip_leaves(struct bi_iter *it, bool (*skip)(const bi_key *lo, const bi_key *hi));
/* Leaves are read once, in order (a whole-tree walk): each one is dropped
 * from the block cache when the walk moves on, unless someone else holds
 * it, and its buffer takes the next leaf, still warm in the CPU's cache.
 * A linear walk of a tree larger than the cache gets no hits from it
 * anyway, and filling the cache cost page faults and cache misses. */
void bi_iter_stream(struct bi_iter *it);

/* Find the item with exactly @key; -ENOENT if absent. The item is copied
 * into *data (malloc'd, caller frees) when @data is not NULL. */
int bi_tree_get(struct btrfsimg_fs *fs, const struct bi_root *root, const bi_key *key,
		uint8_t **data, uint32_t *size);

/* ================= scan.c: fast whole-tree scans ================= */

/* A directory entry naming a subvolume (location type ROOT_ITEM). */
struct bi_subent {
	uint64_t dir;		/* directory objectid */
	uint64_t index;		/* DIR_INDEX offset */
	uint64_t child;		/* subvolume id the entry names */
	uint16_t name_len;
	uint8_t name[255];
};
typedef int (*bi_subent_fn)(void *ctx, const struct bi_subent *e);

/* The objectids of every INODE_ITEM (256..LAST_FREE) of one tree. A full
 * set (base NULL) holds them all in @ids, strictly increasing. A snapshot
 * that shares most leaves with a full set is that base minus @del plus
 * @ids (both strictly increasing, del inside the base, ids outside it), so
 * it costs its difference, not a copy. Reference counted; a delta holds a
 * reference to its base. */
struct bi_tree_ids {
	struct bi_tree_ids *base;
	uint64_t *ids;
	size_t nids;
	uint64_t *del;
	size_t ndel;
	size_t n;		/* inodes in the tree */
	uint64_t max_id;	/* the largest objectid, 0 when empty */
	void **leaves;		/* full sets: its leaves in key order */
	size_t nleaves;
	uint32_t refs;
};
void bi_tree_ids_put(struct bi_tree_ids *set);

struct bi_scan;
struct bi_scan *bi_scan_new(struct btrfsimg_fs *fs);
void bi_scan_free(struct bi_scan *s);
/* Scan tree @r: *out (may be NULL) gets its inode set (a reference: put it),
 * @fn (may be NULL) is called for each subvolume entry in key order. Each
 * distinct leaf is decoded once per bi_scan; a tree whose leaves come
 * mostly from an earlier full set gets a delta against it when that is
 * smaller than a full set. */
int bi_scan_tree(struct bi_scan *s, const struct bi_root *r, struct bi_tree_ids **out,
		 bi_subent_fn fn, void *ctx);

/* ================= extent.c: file contents ================= */

/* Where the bytes of one EXTENT_DATA item come from. */
enum bi_extent_kind {
	BI_EXT_ZERO = 0,	/* hole (disk_bytenr 0), prealloc, or a gap */
	BI_EXT_INLINE = 1,	/* the item's own payload (maybe compressed) */
	BI_EXT_DISK = 2,	/* uncompressed on-disk extent */
	BI_EXT_COMPRESSED = 3,	/* compressed on-disk extent */
};

/* One EXTENT_DATA item (key (ino, 108, file_offset)), decoded and checked. */
struct bi_extent {
	uint64_t file_offset;	/* key.offset */
	uint64_t end;		/* file offset past the bytes it describes: inline
				   round_up(ram_bytes, sectorsize), else
				   file_offset + num_bytes */
	uint64_t generation, ram_bytes;
	uint8_t type;		/* FE_TYPE_INLINE / REG / PREALLOC */
	uint8_t compression;	/* COMPRESS_* (0..3) */
	enum bi_extent_kind kind;
	/* regular / prealloc only */
	uint64_t disk_bytenr, disk_num_bytes, offset, num_bytes;
	/* inline only: the payload inside the parsed item (borrowed) */
	const uint8_t *inline_data;
	uint32_t inline_size;
};

/* Decode and check one EXTENT_DATA item of @size bytes (the kernel's
 * tree-checker rules, plus: other_encoding 0, inline ram_bytes <=
 * sectorsize, compressed extents within 128 KiB, references inside their
 * extent). Pure. Returns 0, -EUCLEAN with @why set, or -EINVAL for a
 * @sectorsize that is not a power of two in [512, 64 KiB]. */
int bi_extent_parse(const uint8_t *item, uint32_t size, uint64_t key_offset,
		    uint32_t sectorsize, struct bi_extent *out, char *why, size_t whylen);

/* A run of file bytes and where they come from. */
struct bi_piece {
	uint64_t pos, len;	/* file range */
	enum bi_extent_kind kind;
	uint64_t src;		/* DISK: logical address; INLINE / COMPRESSED: index
				   into the decoded data (ram_bytes long) */
};

/* The pieces of [pos, end) that extent @e serves, given that the inode's
 * next EXTENT_DATA item starts at @next (UINT64_MAX if none): first the gap
 * [pos, e->file_offset) as zeros, then e's bytes up to min(e->end, @next)
 * (an item is cut where the next begins: the later key wins, as the
 * kernel's lookup takes the last item at or before an offset), inline
 * bytes past ram_bytes as zeros. Writes at most 3 pieces, contiguous from
 * @pos; returns how many. Pure. */
size_t bi_extent_pieces(const struct bi_extent *e, uint64_t next, uint64_t pos, uint64_t end,
			struct bi_piece out[3]);

/* An open regular file: random-access reads that keep their place in the
 * extent items, the checksum item in use and the last decompressed extent,
 * so sequential reads cost one tree walk, not one search per call. */
struct bi_file;
/* Open inode @ino of subvolume @subvol (not a directory: -EINVAL).
 * *out is released with bi_file_close(). */
int bi_file_open(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t ino, struct bi_file **out);
void bi_file_close(struct bi_file *f);
/* i_size of the open file. */
uint64_t bi_file_size(const struct bi_file *f);
/* Read like btrfsimg_file_read: *got < len only at end of file. */
int bi_file_pread(struct bi_file *f, uint64_t offset, void *buf, size_t len, size_t *got);

/* Called with consecutive chunks (at most 1 MiB each) of a file; @offset is
 * the file offset of @data. Return 0 to go on, > 0 to stop, < 0 to fail. */
typedef int (*bi_data_fn)(void *ctx, uint64_t offset, const uint8_t *data, size_t len);
/* Stream [offset, min(offset + len, i_size)) of a file through @fn (for
 * cat and hashing). Returns 0, @fn's positive value, or a negative errno. */
int bi_file_stream(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t ino, uint64_t offset,
		   uint64_t len, bi_data_fn fn, void *ctx);

/* ================= collide.c: exact collision counting ================= */

/* The engine behind btrfsimg_collide(). */
/* x in @s (NULL = empty); O(log n). */
bool bi_idset_has(const struct btrfsimg_idset *s, uint64_t x);
/* a in base + add - del of @s. */
bool bi_collide_subvol_has(const struct btrfsimg_collide_subvol *s, uint64_t a);
/* The constant c_s a scheme XORs in: 0, the overlay or the uniquifier. */
uint64_t bi_scheme_const(const struct btrfsimg_scheme *s, uint64_t subvol);

/* Bit-range headroom (schemes.c). A constant on a device: a subvolume's
 * (c = c_s, id = subvol) or a fixed number's (c = the number, e.g. 2). */
struct bi_subvol_const {
	uint64_t dev, c, id;
};
enum { BI_LIM_NONE, BI_LIM_PAIR, BI_LIM_SAME, BI_LIM_FIXED, BI_LIM_FIXED2 };
/* What bounds objbits: a pair of subvolumes (a, b), a fixed number a and
 * subvolume b, or two fixed numbers a on one device. */
struct bi_limit {
	unsigned bits;
	int kind;
	uint64_t a, b, dev;
};
/* Largest bits such that objectids in [256, 2^bits) cannot collide: every
 * two constants of a device differ at bit >= bits, and no fixed number can
 * be met. Sorts both tables. O((n + nfx) log n). */
void bi_objbits(struct bi_subvol_const *t, size_t n, struct bi_subvol_const *fx, size_t nfx,
		struct bi_limit *l);
/* Smallest x > @lo with (x & @mask) == @want (@want inside @mask); false if
 * none below 2^64. O(64). */
bool bi_next_masked(uint64_t lo, uint64_t mask, uint64_t want, uint64_t *out);
enum { BI_CLASH_NONE, BI_CLASH_SUBVOL, BI_CLASH_NEW, BI_CLASH_FIXED };
struct bi_clash {
	uint64_t at;		/* the first new id that may collide */
	uint64_t with;		/* the subvolume, earlier new id, or fixed number */
	int kind;
};
/* The first new subvolume id > @lo (ids are allocated upwards) whose
 * constant (inumbits @nbits; 64 for the uniquifier, 0 for none) agrees above
 * bit @k0 with a constant of @t, a fixed number of @fx, or an earlier new id:
 * where objectids < 2^k0 stop being provably apart. Devices ignored (a new
 * subvolume may land anywhere). O((n + nfx) 64). */
struct bi_clash bi_first_clash(unsigned nbits, unsigned k0, uint64_t lo,
			       const struct bi_subvol_const *t, size_t n, const struct bi_subvol_const *fx,
			       size_t nfx);
/* What the headroom argument needs to know about an input. */
struct bi_collide_stats {
	uint64_t maxobj, minobj;	/* over every set (minobj UINT64_MAX if none) */
	uint64_t maxid;			/* largest subvolume id */
	uint64_t total;			/* inodes counted with base and add */
	bool any;			/* some set is not empty */
};
/* Fill @o's objbits, max_objectid, proven, max_subvol, clash_* and reason
 * (o->groups and o->inodes already counted) for scheme @s from the
 * subvolume constants @t and the fixed numbers @fx (both get sorted). */
void bi_headroom(const struct btrfsimg_scheme *s, struct bi_subvol_const *t, size_t n,
		 struct bi_subvol_const *fx, size_t nfx, const struct bi_collide_stats *st,
		 struct btrfsimg_collide_result *o);

/* ================= root.c: the root tree ================= */

/* Locate tree @id: 1 and 3 from the superblock, others by ROOT_ITEM. */
int bi_root_find(struct btrfsimg_fs *fs, uint64_t id, struct bi_root *out);

/* ================= inode.c / dir.c: inodes, names, directories ================= */

/*
 * Pure item parsers (no handle, no I/O; fuzzed by fuzz_inode, fuzz_refs,
 * fuzz_dir, fuzz_xattr). They check what the kernel's tree-checker checks,
 * plus: every name is 1..255 bytes. Variable-length entries are walked
 * "header fits, then whole entry fits"; nothing outside [item, item+size)
 * is read and every returned pointer lies inside it. On failure they
 * return -EUCLEAN and put the failed check in @why as "<check>, have X
 * expect Y"; the callers in inode.c/dir.c prefix it with
 * "corrupt <item kind>: root=R block=B slot=S, ".
 */

#define BI_NAME_MAX 255u	/* BTRFS_NAME_LEN and XATTR_NAME_MAX */
/* btrfs inode flags the kernel knows (low 32 bits; bits 0..11 and 31). */
#define BI_INODE_FLAG_MASK 0x80000FFFull

/* INODE_ITEM: exactly 160 bytes; only S_IFMT|07777 mode bits and a valid
 * file type; a directory's nlink <= 1; no unknown flags in the low 32
 * bits; size <= 2^63 - 1 (the kernel's largest file); generation and
 * transid <= @max_gen unless @max_gen is 0 (the kernel allows superblock
 * generation + 1). */
int bi_inode_parse(const uint8_t *item, uint32_t size, uint64_t subvol, uint64_t objectid,
		   uint64_t max_gen, struct btrfsimg_inode *out, char *why, size_t whylen);

/* One entry of a DIR_ITEM (84), DIR_INDEX (96) or XATTR_ITEM (24) item:
 *   +0 location key (17) +17 transid u64 +25 data_len u16 +27 name_len u16
 *   +29 type u8 +30 name[name_len] data[data_len]
 * name/data borrow the item. */
struct bi_dir_entry {
	bi_key location;
	uint64_t transid;
	uint8_t type;		/* FT_* with FT_ENCRYPTED masked off, as the kernel does */
	uint16_t name_len, data_len;
	const uint8_t *name, *data;
	uint32_t offset;	/* where the entry starts inside the item */
};

/* Next entry at *pos (start at 0) of an item of key type @key_type.
 * Returns 1 (entry in *e, *pos advanced), 0 at the end of the item, or
 * -EUCLEAN (*pos unchanged). Checks: location type INODE_ITEM, ROOT_ITEM
 * or 0 with the kernel's key rules (xattrs: an all-zero location); type
 * 1..8 and FT_XATTR exactly for XATTR_ITEM; name 1..255 bytes; data only
 * in xattrs. The name hash is not checked here (see bi_dir_item_check). */
int bi_dir_item_next(const uint8_t *item, uint32_t size, uint8_t key_type, uint32_t *pos,
		     struct bi_dir_entry *e, char *why, size_t whylen);

/* Every entry of the item with key @key parses, there is at least one, and
 * for DIR_ITEM / XATTR_ITEM each name hashes to key->offset. Returns the
 * number of entries or -EUCLEAN. */
int bi_dir_item_check(const uint8_t *item, uint32_t size, const bi_key *key, char *why,
		      size_t whylen);

/* One name of an inode: INODE_REF (12) entries {index u64, name_len u16,
 * name} keyed (ino, 12, parent dir); INODE_EXTREF (13) entries {parent
 * u64, index u64, name_len u16, name} keyed (ino, 13, extref hash). */
struct bi_ref_entry {
	uint64_t parent;
	uint64_t index;
	uint16_t name_len;
	const uint8_t *name;	/* borrows the item */
};

/* Next entry at *pos (start at 0). 1: entry in *e; 0: end; -EUCLEAN. An
 * INODE_REF item must hold at least one entry (the kernel rejects items of
 * <= 10 bytes); an empty INODE_EXTREF item is accepted, as the kernel does. */
int bi_iref_next(const uint8_t *item, uint32_t size, uint64_t key_offset, uint32_t *pos,
		 struct bi_ref_entry *e, char *why, size_t whylen);
int bi_extref_next(const uint8_t *item, uint32_t size, uint32_t *pos, struct bi_ref_entry *e,
		   char *why, size_t whylen);

/* ROOT_REF / ROOT_BACKREF item {dirid u64, sequence u64, name_len u16,
 * name}: the name must fit in the item. name_len 0 is accepted (it can
 * never match a name, as in the kernel's comparison). */
struct bi_root_ref {
	uint64_t dirid, sequence;
	uint16_t name_len;
	const uint8_t *name;
};
int bi_root_ref_parse(const uint8_t *item, uint32_t size, struct bi_root_ref *out, char *why,
		      size_t whylen);

/* Read INODE_ITEM (subvol, objectid) through bi_inode_parse. -ENOENT with
 * a message if absent. */
int bi_inode_read(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t objectid,
		  struct btrfsimg_inode *out);
/* What stat() on an entry of directory @dir in @subvol reaches: fills
 * kind / target_subvol / target_objectid of @e from its location (the
 * kernel's fixup_tree_root_location rule for subvolume entries). */
int bi_dir_resolve(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
		   struct btrfsimg_dirent *e);

/* ================= logtree.c: log tree replay, in memory ================= */

/*
 * Replay the log tree (superblock log_root != 0: a crash after fsync) into
 * overlays on fs->overlays, so every reader sees what the kernel shows
 * after mounting. Nothing is written. Does nothing with
 * BTRFSIMG_OPEN_NO_LOG_REPLAY or log_root 0. A log the kernel could not
 * replay either (corrupt, or an operation the kernel would abort on) is
 * reported as damage (bi_damage) and the last committed state is shown, so
 * this returns 0 except for misuse (-EINVAL: overlays exist already). Call
 * once, at the end of the open sequence.
 */
int bi_log_replay(struct btrfsimg_fs *fs);

/* A read-only sorted item source: a tree, or (tests, fuzzing) an array.
 * first/last give the first/last item with min <= key <= max: 1 with *key,
 * *data (malloc'd copy, caller frees; never NULL) and *size set, 0 if none,
 * or a negative errno (message in the source's own way). */
struct bi_lr_src {
	int (*first)(void *ctx, const bi_key *min, const bi_key *max, bi_key *key,
		     uint8_t **data, uint32_t *size);
	int (*last)(void *ctx, const bi_key *min, const bi_key *max, bi_key *key,
		    uint8_t **data, uint32_t *size);
	void *ctx;
};

/* One item of an in-memory item array (data borrowed). */
struct bi_lr_item {
	bi_key key;
	const uint8_t *data;
	uint32_t size;
};

/* An array source: @items sorted by key, keys unique (not checked here). */
struct bi_lr_array {
	const struct bi_lr_item *items;
	size_t n;
};
void bi_lr_src_array(struct bi_lr_src *src, struct bi_lr_array *arr);

/* The log tree of one subvolume, and that subvolume's fs tree. */
struct bi_lr_log {
	uint64_t root;			/* subvolume id (the log ROOT_ITEM's offset) */
	const struct bi_lr_item *items;	/* the log tree's items, sorted, unique */
	size_t n;
	struct bi_lr_src base;		/* its fs tree; first == NULL: no such
					   subvolume, the log is skipped as the
					   kernel skips it */
};

struct bi_lr_params {
	uint64_t transid;		/* the replay transaction: generation + 1 */
	uint32_t sectorsize, nodesize, csum_size;
	bool no_holes, extended_iref;	/* incompat NO_HOLES, EXTENDED_IREF */
	uint64_t max_bytes;		/* overlay memory limit (0: 256 MiB) */
	uint64_t max_steps;		/* item lookups/updates limit (0: 2^27) */
};

/* The global trees replay reads: the csum tree (changed: logged data's
 * checksums go in, freed extents' go out) and the extent tree (read only,
 * for the reference counts that decide which extents replay frees). */
struct bi_lr_trees {
	struct bi_lr_src csum, extent;
};

/* The pure replay: apply @logs (any order; replayed in the kernel's order)
 * to their fs trees and to the csum tree. On success *out is a list of
 * overlays (one per changed fs tree, plus root 7 for the csum tree) that
 * the caller owns (free with bi_lr_overlays_free, or hang on fs->overlays).
 * Errors: -EUCLEAN (a corrupt log or tree, or an operation the kernel's
 * replay would abort on), -ENOMEM (allocation failed or max_bytes
 * exceeded), -E2BIG (max_steps exceeded), -EINVAL (bad params), or a
 * source's error; @why says what and where. */
int bi_lr_replay(const struct bi_lr_params *p, const struct bi_lr_log *logs, size_t nlogs,
		 const struct bi_lr_trees *trees, struct bi_log_overlay **out, char *why,
		 size_t whylen);
void bi_lr_overlays_free(struct bi_log_overlay *list);


#endif
