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
};

/* Set the handle's message and return @code (a negative errno). */
int bi_err(struct btrfsimg_fs *fs, int code, const char *fmt, ...) BI_PRINTF(3, 4);
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

struct bi_chunk {
	uint64_t logical, length, type, stripe_len;
	uint16_t num_stripes, sub_stripes;
	struct bi_stripe stripes[];
};

/* Decode and check one chunk item at @logical. On success *out is a new
 * chunk (free()). @sectorsize is for alignment checks. */
int bi_chunk_parse(const uint8_t *item, size_t len, uint64_t logical, uint32_t sectorsize,
		   struct bi_chunk **out, char *why, size_t whylen);

struct bi_chunk_map *bi_chunk_map_new(void);
void bi_chunk_map_free(struct bi_chunk_map *m);
/* Take ownership of @c. An overlap with another chunk is -EUCLEAN. An
 * identical chunk (same start, length) is dropped silently (the sys array
 * and the chunk tree repeat each other). */
int bi_chunk_map_insert(struct bi_chunk_map *m, struct bi_chunk *c, char *why, size_t whylen);
const struct bi_chunk *bi_chunk_lookup(const struct bi_chunk_map *m, uint64_t logical);
size_t bi_chunk_map_count(const struct bi_chunk_map *m);
const struct bi_chunk *bi_chunk_map_at(const struct bi_chunk_map *m, size_t i);

/* Where one piece of a logical read lands. */
struct bi_phys {
	uint64_t devid;
	uint64_t physical;
	uint64_t len;		/* bytes usable before the stripe ends */
};
/* Map @logical inside @c for copy @copy (0-based) of a mirrored profile.
 * For RAID5/6 copy 0 is the data stripe itself. Pure arithmetic. */
int bi_chunk_map_phys(const struct bi_chunk *c, uint64_t logical, int copy,
		      struct bi_phys *out);
/* How many ways there are to read @logical: copies for mirrored profiles;
 * for RAID5 2 (direct, rebuilt from P); RAID6 3 (direct, from P, from Q). */
int bi_chunk_num_copies(const struct bi_chunk *c);

/* Parse the superblock's sys_chunk_array into fs->chunks. */
int bi_chunk_load_sys_array(struct btrfsimg_fs *fs);
/* Walk the chunk tree and add every chunk. Needs tree.c. */
int bi_chunk_load_tree(struct btrfsimg_fs *fs);
/* Read @len bytes at @logical using way @copy (see bi_chunk_num_copies),
 * crossing stripe and chunk boundaries as needed. */
int bi_read_copy(struct btrfsimg_fs *fs, uint64_t logical, void *buf, size_t len, int copy);
/* Number of ways to read @logical (1 if unmapped: the read will fail). */
int bi_num_copies(struct btrfsimg_fs *fs, uint64_t logical);

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

struct bi_iter {
	struct btrfsimg_fs *fs;
	struct bi_root root;
	bi_key min, max, last;
	struct bi_block *path[MAX_LEVEL];
	uint32_t slot[MAX_LEVEL];
	int top;		/* root level */
	bool started, done;
};

int bi_iter_start(struct btrfsimg_fs *fs, struct bi_iter *it, const struct bi_root *root,
		  const bi_key *min, const bi_key *max);
/* 1: *out holds an item; 0: no more; < 0: error (message on fs). */
int bi_iter_next(struct bi_iter *it, struct bi_item *out);
void bi_iter_end(struct bi_iter *it);

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

/* The sorted objectids of every INODE_ITEM (256..LAST_FREE) of one tree.
 * Shared by every tree with the same leaves; reference counted. */
struct bi_idset {
	uint64_t *ids;
	size_t n;
	void **leaves;		/* identity of the leaf sequence */
	size_t nleaves;
	uint64_t hash;
	uint32_t refs;
};
void bi_idset_put(struct bi_idset *set);

struct bi_scan;
struct bi_scan *bi_scan_new(struct btrfsimg_fs *fs);
void bi_scan_free(struct bi_scan *s);
/* Scan tree @r: *out (may be NULL) gets its inode set (a reference: put it),
 * @fn (may be NULL) is called for each subvolume entry in key order. Each
 * distinct leaf is decoded once per bi_scan. */
int bi_scan_tree(struct bi_scan *s, const struct bi_root *r, struct bi_idset **out,
		 bi_subent_fn fn, void *ctx);

/* ================= inodes.c: inode enumeration ================= */

/* Decode an INODE_ITEM (size >= 160, else -EUCLEAN). */
int bi_inode_decode(const uint8_t *d, uint32_t size, uint64_t subvol, uint64_t objectid,
		    struct btrfsimg_inode *out);

/* ================= root.c: the root tree ================= */

/* Locate tree @id: 1 and 3 from the superblock, others by ROOT_ITEM. */
int bi_root_find(struct btrfsimg_fs *fs, uint64_t id, struct bi_root *out);

#endif
