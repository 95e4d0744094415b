/* SPDX-License-Identifier: MIT */
/**
 * @file btrfsimg.h
 * libbtrfsimg: read btrfs filesystems straight from image files.
 *
 * No mount, no root, no kernel module; images are never written.
 *
 * Error model: every function that can fail returns 0 (or a documented
 * non-negative value) on success and a negative errno on failure:
 *   -EUCLEAN     corrupt metadata (a check on on-disk data failed)
 *   -EIO         I/O error or checksum mismatch on every copy
 *   -EOPNOTSUPP  unsupported feature (the message names it)
 *   -ENOENT      not found
 *   -ENOMEM      out of memory
 *   -EINVAL      misuse of the API (bad argument, wrong state)
 * After a failure, btrfsimg_errmsg() on the handle gives a readable message
 * saying what and where, for example
 *   "corrupt leaf: root=5 block=30425088 slot=3, item data past end, have 16400 expect <= 16384".
 *
 * Threads: no global state. Separate handles may be used from separate
 * threads concurrently; one handle must not be used by two threads at once.
 */
#ifndef BTRFSIMG_H
#define BTRFSIMG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(BTRFSIMG_BUILDING)
#define BTRFSIMG_API __attribute__((visibility("default")))
#else
#define BTRFSIMG_API
#endif

/** An open (or opening) filesystem. Opaque. */
typedef struct btrfsimg_fs btrfsimg_fs;

/* ------------------------------------------------------------------ */
/** @name Opening */

/** Flags for btrfsimg_open_opts.flags. */
enum btrfsimg_open_flags {
	/** Do not verify data checksums when reading file contents. */
	BTRFSIMG_OPEN_NO_DATA_VERIFY = 1u << 0,
	/** Show the last committed state; do not replay the log tree. */
	BTRFSIMG_OPEN_NO_LOG_REPLAY = 1u << 1,
};

/** Options for btrfsimg_fs_new(). Zero-initialise, then set what you need. */
struct btrfsimg_open_opts {
	/** Superblock copy to use: 0 primary, 1 (64 MiB), 2 (256 GiB);
	 *  -1 (or any negative) = the newest valid copy. A zeroed struct
	 *  means "primary"; use btrfsimg_open_opts_init() for the default. */
	int super_mirror;
	/** 1-based partition number inside whole-disk images; 0 = automatic
	 *  (the image itself if it holds btrfs, else the only btrfs partition). */
	int partition;
	/** Byte offset of the filesystem inside every image; -1 = automatic. */
	int64_t offset;
	/** Bytes of verified tree blocks to keep cached; 0 = default (64 MiB). */
	uint64_t cache_bytes;
	/** enum btrfsimg_open_flags */
	unsigned flags;
};

/** Fill @p o with the defaults: newest valid superblock, automatic
 *  partition and offset, default cache, no flags. */
BTRFSIMG_API void btrfsimg_open_opts_init(struct btrfsimg_open_opts *o);

/**
 * Create an empty handle. @p opts may be NULL (defaults). On success *out
 * owns a handle to release with btrfsimg_fs_free(). Returns 0, -ENOMEM or
 * -EINVAL.
 */
BTRFSIMG_API int btrfsimg_fs_new(btrfsimg_fs **out, const struct btrfsimg_open_opts *opts);

/** Release a handle and everything it owns. Accepts NULL. */
BTRFSIMG_API void btrfsimg_fs_free(btrfsimg_fs *fs);

/**
 * Add one device image by path (opened read-only). Devices of one
 * filesystem may be added in any order; they are matched by fsid and devid
 * in btrfsimg_open().
 */
BTRFSIMG_API int btrfsimg_add_device_file(btrfsimg_fs *fs, const char *path);

/**
 * Add one device image held in memory. The buffer is borrowed: it must stay
 * valid and unchanged until btrfsimg_fs_free(). @p name is copied and used
 * in messages (may be NULL).
 */
BTRFSIMG_API int btrfsimg_add_device_mem(btrfsimg_fs *fs, const void *data, size_t len,
					 const char *name);

/**
 * Read callback for btrfsimg_add_device_io(): copy @p len bytes at @p off
 * into @p buf. Return 0 on success or a negative errno.
 */
typedef int (*btrfsimg_read_fn)(void *ctx, uint64_t off, void *buf, size_t len);

/** Add a device read through a callback; @p size is its length in bytes. */
BTRFSIMG_API int btrfsimg_add_device_io(btrfsimg_fs *fs, btrfsimg_read_fn read, void *ctx,
					uint64_t size, const char *name);

/**
 * Open the filesystem made of the devices added so far: pick the
 * superblock, match devices, build the chunk map, read the root tree.
 * Missing devices are accepted when the chunk profiles still hold every
 * copy needed (see btrfsimg_missing_devices()).
 */
BTRFSIMG_API int btrfsimg_open(btrfsimg_fs *fs);

/**
 * The last error message on this handle ("" if none). Borrowed: valid until
 * the next call on the handle.
 */
BTRFSIMG_API const char *btrfsimg_errmsg(const btrfsimg_fs *fs);

/**
 * Log callback: the library never prints. Damage that was worked around
 * (a bad superblock mirror, a tree block read from its second copy, a
 * missing device) is reported here with @p damage true.
 */
typedef void (*btrfsimg_log_fn)(void *ctx, bool damage, const char *msg);
BTRFSIMG_API void btrfsimg_set_log(btrfsimg_fs *fs, btrfsimg_log_fn fn, void *ctx);

/** How many damage events were seen so far (worked around or not). */
BTRFSIMG_API uint64_t btrfsimg_damage_count(const btrfsimg_fs *fs);

/** Number of devices the superblock names that were not supplied. */
BTRFSIMG_API uint64_t btrfsimg_missing_devices(const btrfsimg_fs *fs);

/* ------------------------------------------------------------------ */
/** @name Partitions */

/** One partition found in a whole-disk image. */
struct btrfsimg_partition {
	int number;		/**< 1-based as in the table */
	uint64_t offset;	/**< byte offset in the image */
	uint64_t size;		/**< bytes */
	bool is_btrfs;		/**< a btrfs superblock magic is at offset + 64 KiB */
	bool gpt;		/**< from a GPT (else MBR) */
};

/**
 * List the partitions of an image file (MBR or GPT). Writes up to @p max
 * entries to @p out and returns how many partitions exist (may exceed
 * @p max), 0 if there is no partition table, or a negative errno. @p err
 * (may be NULL) receives a message on failure.
 */
BTRFSIMG_API int btrfsimg_list_partitions(const char *path, struct btrfsimg_partition *out,
					  size_t max, char *err, size_t errlen);

/* ------------------------------------------------------------------ */
/** @name Superblock */

enum btrfsimg_csum_type {
	BTRFSIMG_CSUM_CRC32C = 0,
	BTRFSIMG_CSUM_XXHASH64 = 1,
	BTRFSIMG_CSUM_SHA256 = 2,
	BTRFSIMG_CSUM_BLAKE2B = 3,
};

/** Name of a checksum type ("crc32c", "xxhash64", "sha256", "blake2b"), or NULL. */
BTRFSIMG_API const char *btrfsimg_csum_name(int csum_type);

/** State of one superblock copy on one device. */
enum btrfsimg_mirror_state {
	BTRFSIMG_MIRROR_ABSENT = 0,	/**< device too small to hold it */
	BTRFSIMG_MIRROR_VALID = 1,
	BTRFSIMG_MIRROR_BAD_MAGIC = 2,
	BTRFSIMG_MIRROR_BAD_BYTENR = 3,
	BTRFSIMG_MIRROR_BAD_CSUM = 4,
	BTRFSIMG_MIRROR_BAD_FIELDS = 5,	/**< sanity check failed */
	BTRFSIMG_MIRROR_OTHER_FS = 6,	/**< valid, but another fsid */
	BTRFSIMG_MIRROR_IO_ERROR = 7,
};

struct btrfsimg_super_mirror {
	int index;			/**< 0, 1, 2 */
	uint64_t bytenr;		/**< byte offset on the device */
	enum btrfsimg_mirror_state state;
	uint64_t generation;		/**< 0 unless the magic matched */
};

/** The superblock in use, decoded. */
struct btrfsimg_super_info {
	uint8_t fsid[16];
	uint8_t metadata_uuid[16];	/**< equals fsid unless METADATA_UUID is set */
	char label[257];
	uint64_t generation;
	uint64_t root, chunk_root, log_root;
	uint8_t root_level, chunk_root_level, log_root_level;
	uint16_t csum_type;		/**< enum btrfsimg_csum_type */
	uint32_t nodesize, sectorsize, stripesize;
	uint64_t num_devices;
	uint64_t total_bytes, bytes_used;
	uint64_t root_dir_objectid;
	uint64_t compat_flags, compat_ro_flags, incompat_flags;
	uint64_t cache_generation, uuid_tree_generation;
	uint64_t devid;			/**< devid of the device the copy came from */
	int mirror_used;		/**< 0..2 */
	struct btrfsimg_super_mirror mirrors[3];	/**< of that device */
};

/** Fill @p out with the superblock in use. */
BTRFSIMG_API int btrfsimg_super(btrfsimg_fs *fs, struct btrfsimg_super_info *out);

/* ------------------------------------------------------------------ */
/** @name Subvolumes */

/** One subvolume or snapshot (or the top level, id 5). */
struct btrfsimg_subvol {
	uint64_t id;
	uint64_t parent_id;		/**< from its ROOT_BACKREF (as `btrfs subvolume list`
					     shows it, even when path is NULL); 0 for 5 and
					     for subvolumes with no backref */
	uint64_t dirid;			/**< directory in the parent holding it */
	char *path;			/**< from the top level ("" for 5); NULL if unreachable */
	uint8_t uuid[16], parent_uuid[16], received_uuid[16];
	uint64_t generation;		/**< root_item.generation */
	uint64_t cgen;			/**< creation generation (otransid) */
	uint64_t ctransid;
	int64_t otime_sec;
	uint32_t otime_nsec;
	uint64_t flags;			/**< root_item.flags */
	bool readonly;
	bool deleted;			/**< deleted, not yet cleaned */
	uint64_t bytenr;		/**< tree root block */
	uint8_t level;
};

/**
 * List every subvolume, id 5 first, then ascending id. On success *out is
 * an array of *n entries owned by the caller; free it with
 * btrfsimg_subvols_free().
 */
BTRFSIMG_API int btrfsimg_subvols(btrfsimg_fs *fs, struct btrfsimg_subvol **out, size_t *n);
BTRFSIMG_API void btrfsimg_subvols_free(struct btrfsimg_subvol *v, size_t n);

/** The default subvolume (what a plain mount shows): its id, or a negative errno. */
BTRFSIMG_API int btrfsimg_default_subvol(btrfsimg_fs *fs, uint64_t *id);

/* ------------------------------------------------------------------ */
/** @name Raw tree access */

struct btrfsimg_key {
	uint64_t objectid;
	uint8_t type;
	uint64_t offset;
};

/**
 * Called for each item of a tree in key order between two keys (both
 * inclusive). @p data is borrowed for the duration of the call. Return 0 to
 * go on, a positive value to stop (btrfsimg_tree_walk returns it), or a
 * negative errno to fail.
 */
typedef int (*btrfsimg_item_fn)(void *ctx, const struct btrfsimg_key *key,
				const uint8_t *data, uint32_t size);

/**
 * Walk the items of tree @p tree_id (1 root, 3 chunk, 2 extent, 4 dev,
 * 5 or a subvolume id, 7 csum, 9 uuid, 8 quota, 10 free space, ...)
 * between @p min and @p max. Every block is verified.
 */
BTRFSIMG_API int btrfsimg_tree_walk(btrfsimg_fs *fs, uint64_t tree_id,
				    const struct btrfsimg_key *min,
				    const struct btrfsimg_key *max,
				    btrfsimg_item_fn fn, void *ctx);

/** Read @p len bytes of logical address space (any copy that reads). */
BTRFSIMG_API int btrfsimg_read_logical(btrfsimg_fs *fs, uint64_t logical, void *buf, size_t len);

/* ------------------------------------------------------------------ */
/** @name Inodes, directories, files */

struct btrfsimg_timespec {
	int64_t sec;
	uint32_t nsec;
};

/** An INODE_ITEM, decoded. */
struct btrfsimg_inode {
	uint64_t subvol;		/**< the fs tree it lives in */
	uint64_t objectid;
	uint64_t generation;		/**< creation generation (i_generation = low 32 bits) */
	uint64_t transid;
	uint64_t size;
	uint64_t nbytes;
	uint64_t rdev;			/**< as stored: the kernel's internal dev_t,
					     major << 20 | minor (chr 1:3 is 0x100003) */
	uint64_t flags;
	uint64_t sequence;
	uint32_t nlink, uid, gid, mode;
	struct btrfsimg_timespec atime, mtime, ctime, otime;
};

/**
 * Read one inode. -ENOENT if the tree has no INODE_ITEM for it, which is
 * always the case for objectid 2: the stub directory (BTRFSIMG_TARGET_STUB)
 * exists only in the kernel's memory; use btrfsimg_stub_inode() for it.
 * -EUCLEAN if the item fails the kernel's checks (size 160, valid mode and
 * file type, directory nlink <= 1, known flags, generation and transid <=
 * superblock generation + 1).
 */
BTRFSIMG_API int btrfsimg_inode_get(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
				    struct btrfsimg_inode *out);

/**
 * The inode the kernel builds for a stub directory (objectid 2) reached
 * from directory @p parent_dir of @p subvol (new_simple_dir): mode
 * S_IFDIR|0755, nlink 1, size 0, generation 0, uid, gid and atime of the
 * parent, subvol = @p subvol, every other field 0. The kernel reports the
 * time of the lookup as mtime and ctime and no btime; those are not
 * reproducible and are left 0 here. -ENOTDIR if @p parent_dir is not a
 * directory.
 */
BTRFSIMG_API int btrfsimg_stub_inode(btrfsimg_fs *fs, uint64_t subvol, uint64_t parent_dir,
				     struct btrfsimg_inode *out);

/** One inode with one of its paths, as btrfsimg_inodes() reports it. */
struct btrfsimg_inode_entry {
	struct btrfsimg_inode inode;
	/** One path from the top level (borrowed for the callback); NULL when
	 *  no directory leads to it (orphans, deleted subvolumes). */
	const char *path;
	size_t path_len;		/**< strlen(path), 0 when path is NULL */
	/** false for inodes no directory leads to, or with nlink 0 */
	bool reachable;
};

typedef int (*btrfsimg_inode_entry_fn)(void *ctx, const struct btrfsimg_inode_entry *e);

/**
 * Every inode (objectid 256 and up with an INODE_ITEM) of subvolume
 * @p subvol, or of every subvolume when @p subvol is 0 (ascending subvolume
 * id, then objectid). With @p subvol 0 a subvolume that cannot be read is
 * reported as damage and skipped. @p fn returning non-zero stops the walk
 * and that value is returned.
 */
BTRFSIMG_API int btrfsimg_inodes(btrfsimg_fs *fs, uint64_t subvol, btrfsimg_inode_entry_fn fn,
				 void *ctx);

/** Where a directory entry points. */
enum btrfsimg_target_kind {
	BTRFSIMG_TARGET_INODE = 0,	/**< an inode in the same subvolume */
	BTRFSIMG_TARGET_SUBVOL = 1,	/**< the root directory of another subvolume */
	BTRFSIMG_TARGET_STUB = 2,	/**< a subvolume entry with no matching ROOT_REF:
					     the kernel shows an empty directory, ino 2 */
};

/** One directory entry (DIR_INDEX), as readdir sees it. Where an entry
 *  leads: an INODE_ITEM location is (same subvolume, objectid). A ROOT_ITEM
 *  location is the child's root directory (child, root_dirid = 256) only if
 *  the root tree has ROOT_REF (subvol, 156, child) whose dirid is the
 *  directory and whose name is the entry's, and the child's ROOT_ITEM
 *  exists with refs > 0; otherwise (snapshots of subvolumes that held
 *  nested ones, deleted children) it is a stub: (same subvolume, 2). */
struct btrfsimg_dirent {
	const uint8_t *name;		/**< borrowed: valid during the callback only */
	size_t name_len;
	uint64_t index;			/**< DIR_INDEX key offset (readdir order; getdents64's
					     d_off of the previous entry). 0 from lookups:
					     DIR_ITEM does not record it */
	uint64_t location_objectid;	/**< readdir's d_ino today: the child subvolume id for
					     subvolume entries */
	uint8_t location_type;		/**< key type: 1 INODE_ITEM or 132 ROOT_ITEM */
	uint8_t file_type;		/**< BTRFS_FT_*: 1 reg, 2 dir, 3 chr, 4 blk, 5 fifo,
					     6 sock, 7 symlink */
	/** What stat() on the entry reaches (filled by btrfsimg_readdir). */
	enum btrfsimg_target_kind kind;
	uint64_t target_subvol;		/**< subvolume of the target (containing one for stubs) */
	uint64_t target_objectid;	/**< 256 for subvolume roots, 2 for stubs */
};

/**
 * Called for each entry of a directory in DIR_INDEX order. Return 0 to go
 * on, > 0 to stop (returned by btrfsimg_readdir), < 0 to fail.
 */
typedef int (*btrfsimg_dirent_fn)(void *ctx, const struct btrfsimg_dirent *e);

/**
 * List directory @p dir of subvolume @p subvol as the kernel's readdir
 * does: DIR_INDEX items from index 2 upwards, the first entry of each, "."
 * and ".." not included. Targets are resolved from the DIR_INDEX location
 * (the DIR_ITEM's on a consistent image). A stub directory (@p dir 2) is
 * empty. -ENOTDIR if @p dir is not a directory; -EUCLEAN (listing stops)
 * at an entry that fails the kernel's checks.
 */
BTRFSIMG_API int btrfsimg_readdir(btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
				  btrfsimg_dirent_fn fn, void *ctx);

/**
 * Look a name up in a directory through its DIR_ITEM (name hash), as the
 * kernel's lookup does; entries whose names share the hash are compared
 * byte by byte. *out's name points into @p name; its index is 0. -ENOENT
 * if absent (also for names over 255 bytes, "." and "..", and in a stub
 * directory), -ENOTDIR if @p dir is not a directory, -EINVAL for an empty
 * name.
 */
BTRFSIMG_API int btrfsimg_lookup(btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
				 const void *name, size_t name_len, struct btrfsimg_dirent *out);

/**
 * Resolve a '/'-separated path from the root directory of @p subvol
 * (crossing into subvolumes as the kernel does). Empty components and "."
 * are skipped; ".." goes back to the directory the walk came from (the
 * kernel's dcache parent: out of a subvolume root into the directory
 * holding it, out of a stub into its parent) and stays put at the start
 * root, like "/.." does. Symlinks are not followed. "" (or "/") is the
 * start root: name "" (length 0), location (256, INODE_ITEM), FT_DIR, kind
 * INODE, target (@p subvol, 256). Otherwise *out describes the last
 * component as btrfsimg_lookup() does, its name pointing into @p path.
 * -ENOENT if a component is missing, -ENOTDIR if a non-directory is
 * walked through (or a trailing '/' follows one).
 */
BTRFSIMG_API int btrfsimg_path_lookup(btrfsimg_fs *fs, uint64_t subvol, const char *path,
				      struct btrfsimg_dirent *out);

/**
 * Symlink target, as readlink(2) shows it: the first i_size bytes of the
 * file (an inline extent, decompressed if need be), at most 4095 (PAGE_SIZE
 * - 1, where the kernel cuts). *out is malloc'd with a NUL after the *len
 * bytes (caller frees). -EINVAL if the inode is not a symlink.
 */
BTRFSIMG_API int btrfsimg_readlink(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
				   uint8_t **out, size_t *len);

/** Called for each xattr; buffers are borrowed for the call. Every
 *  xattr of the inode in listxattr(2) order (XATTR_ITEM key order, then
 *  entry order inside an item: names sharing a hash share an item), every
 *  namespace included. -ENOENT if the inode does not exist. */
typedef int (*btrfsimg_xattr_fn)(void *ctx, const uint8_t *name, size_t name_len,
				 const uint8_t *value, size_t value_len);
BTRFSIMG_API int btrfsimg_xattrs(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
				 btrfsimg_xattr_fn fn, void *ctx);

/** Called for each name of an inode: INODE_REF entries (ascending parent
 *  directory), then INODE_EXTREF entries (ascending hash), each item's
 *  entries in order. A subvolume's root directory (256) has one stored
 *  name: "..", parent 256, index 0. -ENOENT if the inode does not exist. */
typedef int (*btrfsimg_name_fn)(void *ctx, uint64_t parent_dir, uint64_t index,
				const uint8_t *name, size_t name_len);
BTRFSIMG_API int btrfsimg_inode_names(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
				      btrfsimg_name_fn fn, void *ctx);

/**
 * Read up to @p len bytes of a regular file from @p offset (holes,
 * prealloc and bytes past the last extent read as zeros; data checksums
 * are verified unless BTRFSIMG_OPEN_NO_DATA_VERIFY). *got receives the
 * bytes read (short only at end of file).
 */
BTRFSIMG_API int btrfsimg_file_read(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
				    uint64_t offset, void *buf, size_t len, size_t *got);

/**
 * The bytes name_to_handle_at() returns for an object, as the kernel
 * encodes them (struct btrfs_fid, little-endian). With @p connectable
 * false: type 0x4d, 20 bytes. With true (AT_HANDLE_CONNECTABLE): the
 * parent directory is encoded for non-directories (type 0x1004e, 32 bytes)
 * and directories get type 0x1004d | 0x20000 (FILEID_IS_DIR) as Linux
 * 6.18 does. @p parent_* are ignored for directories. A parent in another
 * subvolume gives type 0x1004f and 40 bytes (btrfs_encode_fh; not reachable
 * through name_to_handle_at). A stub (objectid 2) encodes root = @p subvol
 * and generation 0. Returns the length.
 */
BTRFSIMG_API int btrfsimg_file_handle(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
				      uint64_t parent_subvol, uint64_t parent_objectid,
				      bool connectable, uint32_t *type, uint8_t out[40]);

/**
 * The same bytes as btrfsimg_file_handle() from values already read, with
 * no I/O (a walk that holds each inode and its directory's inode does not
 * look them up again): the object's @p generation and @p mode, and its
 * parent directory's @p parent_generation (used only when @p connectable
 * and the object is not a directory). The kernel keeps the low 32 bits of
 * each generation. For a stub (objectid 2) pass generation 0, as
 * btrfsimg_file_handle() encodes it. Returns the length (20, 32 or 40); never fails
 * unless @p type or @p out is NULL (-EINVAL).
 */
BTRFSIMG_API int btrfsimg_file_handle_encode(uint64_t subvol, uint64_t objectid,
					     uint64_t generation, uint32_t mode,
					     uint64_t parent_subvol, uint64_t parent_objectid,
					     uint64_t parent_generation, bool connectable,
					     uint32_t *type, uint8_t out[40]);

/* ------------------------------------------------------------------ */
/** @name Inode-number schemes (the 2021 proposals; pure functions) */

/** swab64: byte-reverse a 64-bit value. */
BTRFSIMG_API uint64_t btrfsimg_swab64(uint64_t v);

/**
 * inumbits overlay of a subvolume: 0 if @p inumbits is 0 or @p subvol is 5,
 * else swab64(subvol) >> (64 - inumbits). @p inumbits is 0 or 32..64;
 * other values give 0.
 */
BTRFSIMG_API uint64_t btrfsimg_overlay(uint64_t subvol, unsigned inumbits);

/** objectid if it equals @p v, else objectid XOR @p v. */
BTRFSIMG_API uint64_t btrfsimg_presented(uint64_t objectid, uint64_t v);

/** nfsd ino_uniquifier: 0 for subvolume 5, else swab64(subvol). */
BTRFSIMG_API uint64_t btrfsimg_uniquifier(uint64_t subvol);

/**
 * Subvolume crossings from @p mount_subvol down to @p subvol (0 for the
 * mounted one itself), following parent_id through @p v (the list from
 * btrfsimg_subvols(), sorted by id); -1 when @p subvol is not below the
 * mount, is unreachable, or a parent loop is found. numdevs=2 puts a
 * subvolume on device (depth & 1).
 */
BTRFSIMG_API int btrfsimg_subvol_depth(const struct btrfsimg_subvol *v, size_t n,
				       uint64_t mount_subvol, uint64_t subvol);

/** What today's kernel and each proposal present for one inode. */
struct btrfsimg_presented {
	uint64_t st_ino;		/**< today: the objectid */
	uint64_t tree_id;		/**< STATX_SUBVOL: the subvolume id */
	unsigned inumbits;		/**< N of the inumbits values below */
	uint64_t overlay;		/**< btrfsimg_overlay(subvol, inumbits) */
	uint64_t ino;			/**< st_ino under inumbits=N */
	uint64_t uniquifier;		/**< btrfsimg_uniquifier(subvol) */
	uint64_t nfs_fileid;		/**< nfsd with the uniquifier */
	int numdevs2_dev;		/**< numdevs=2 device (0 or 1); -1 when the
					     subvolume is not below the mounted one */
};

typedef int (*btrfsimg_presented_fn)(void *ctx, const struct btrfsimg_inode_entry *e,
				     const struct btrfsimg_presented *p);

/**
 * btrfsimg_inodes() with each inode's presented numbers under
 * inumbits=@p inumbits (0 or 32..64, else -EINVAL) and numdevs=2 with
 * @p mount_subvol mounted (0: the filesystem's default subvolume).
 */
BTRFSIMG_API int btrfsimg_inodes_presented(btrfsimg_fs *fs, uint64_t subvol, unsigned inumbits,
					   uint64_t mount_subvol, btrfsimg_presented_fn fn,
					   void *ctx);

/* ------------------------------------------------------------------ */
/** @name Inode-number collisions (collide.c)
 *
 * An exact count of presented inode numbers that clash on one device, under
 * each scheme, over an abstract set of inodes. No image is needed: a reader
 * (or a test) describes every subvolume by its objectid set. Sets are
 * borrowed and may be shared: snapshots that share a tree should pass the
 * same array, and a snapshot that diverged a little should pass that array
 * as its base plus small add/del arrays. The engine never expands shared
 * sets into (subvolume, objectid) pairs; see collide.c for the complexity.
 */

/** Strictly increasing objectids. Borrowed; @p v may be NULL when @p n is 0. */
struct btrfsimg_idset {
	const uint64_t *v;
	size_t n;
};

/**
 * One subvolume. Its objectids are base + add - del, where add must be
 * disjoint from base and del a subset of base (-EINVAL otherwise). Each
 * pointer may be NULL (empty). Sets compare by address, so pass the same
 * array for every subvolume sharing it.
 */
struct btrfsimg_csubvol {
	uint64_t id;			/**< fs tree id (5 or >= 256); unique */
	unsigned parity;		/**< numdevs=2 device: 0 (the mounted root's) or 1 */
	const struct btrfsimg_idset *base;
	const struct btrfsimg_idset *add;
	const struct btrfsimg_idset *del;
};

/**
 * An entry that presents a fixed number with no overlay: a stub directory
 * (ino 2). Its device: the single device (nfsd, numdevs=1), device
 * @p parity (numdevs=2; Linux 6.18 stubs report the superblock's device,
 * i.e. 0), or the superblock's device, which no subvolume uses
 * (numdevs=many): so two stubs always clash there.
 */
struct btrfsimg_cextra {
	uint64_t subvol;		/**< containing subvolume (for reports) */
	uint64_t ino;			/**< presented number (2 for stubs) */
	unsigned parity;		/**< 0 or 1 */
};

/** What to count collisions over. Borrowed for the call. */
struct btrfsimg_cinput {
	const struct btrfsimg_csubvol *subvols;
	size_t nsubvols;
	const struct btrfsimg_cextra *extras;
	size_t nextras;
};

/** numdevs values; 3 = many (today's kernel: one device per subvolume). */
enum { BTRFSIMG_NUMDEVS_1 = 1, BTRFSIMG_NUMDEVS_2 = 2, BTRFSIMG_NUMDEVS_MANY = 3 };

/**
 * A scheme. nfsd today = {0, false, 1}; nfsd with ino_uniquifier =
 * {0, true, 1}; inumbits=N,numdevs=D = {N, false, D}; numdevs=many =
 * {0, false, 3}. @p uniquifier needs @p inumbits 0.
 */
struct btrfsimg_scheme {
	unsigned inumbits;		/**< 0 or 32..64 */
	bool uniquifier;		/**< XOR swab64(subvol), 0 for 5 (nfsd) */
	int numdevs;			/**< 1, 2 or 3 (many) */
};

/** Name of a scheme ("nfsd", "nfsd-uniquifier", "inumbits=56,numdevs=2",
 *  "numdevs=many", ...) into @p buf; returns snprintf's length. */
BTRFSIMG_API int btrfsimg_scheme_name(const struct btrfsimg_scheme *s, char *buf, size_t len);

/** Options; zero-initialised means no examples. */
struct btrfsimg_copts {
	size_t max_examples;		/**< example groups to keep per scheme */
	size_t max_members;		/**< members kept per example; 0 = 16 */
};

/** One inode of an example group. */
struct btrfsimg_cmember {
	uint64_t subvol;
	uint64_t objectid;		/**< the extra's ino for extras */
	bool extra;			/**< a btrfsimg_cextra entry (stub) */
	size_t extra_index;		/**< for extras: its index in the input's extras */
};

/**
 * One colliding group: every inode presenting @p ino on @p device.
 * Devices: 0 under one device; the parity under numdevs=2; under
 * numdevs=many 0 is the superblock's device (extras) and i + 1 that of
 * subvols[i].
 */
struct btrfsimg_cgroup {
	uint64_t device;
	uint64_t ino;
	uint64_t size;			/**< inodes in the group (>= 2) */
	size_t nmembers;		/**< stored: min(size, max_members) */
	struct btrfsimg_cmember *members;	/**< subvolumes in input order, objectid
						     ascending, then extras in input order */
};

/**
 * Result for one scheme. Counts are exact. Examples are the first groups in
 * (device, ino) order. Headroom is a bit-range argument assuming real
 * objectids (>= 256) and that new subvolumes get ids above every current
 * one and may land on any device:
 *  - objectids < 2^objbits cannot collide with the current subvolume ids;
 *  - if @p proven (objectids in [256, 2^objbits), no clash possible at all),
 *    new subvolumes with ids up to @p max_subvol cannot cause a collision
 *    while objectids stay below 2^(bit length of the current largest).
 */
struct btrfsimg_cresult {
	struct btrfsimg_scheme scheme;
	uint64_t groups;		/**< presented numbers held by >= 2 inodes of a device */
	uint64_t inodes;		/**< inodes in those groups */
	size_t nexamples;
	struct btrfsimg_cgroup *examples;	/**< owned; btrfsimg_cresult_clear() */
	unsigned objbits;		/**< 0..64 */
	uint64_t max_objectid;		/**< 2^objbits - 1, capped at 2^64 - 256 */
	bool proven;
	uint64_t max_subvol;		/**< 0 unless proven; 2^64 - 256 = unbounded */
	uint64_t clash_subvol;		/**< first id past max_subvol (0 = none) */
	uint64_t clash_with;		/**< the subvolume (or the extra's ino) it would meet */
	char reason[384];		/**< human-readable headroom argument */
};

/**
 * Count collisions of @p in under scheme @p s. @p o may be NULL. @p err
 * (may be NULL) receives a message on failure. Returns 0, -EINVAL (bad
 * input: unsorted set, add/del inconsistent with base, duplicate id,
 * parity > 1, bad scheme) or -ENOMEM. Release @p out with
 * btrfsimg_cresult_clear() (also after failure).
 */
BTRFSIMG_API int btrfsimg_collide(const struct btrfsimg_cinput *in, const struct btrfsimg_scheme *s,
				  const struct btrfsimg_copts *o, struct btrfsimg_cresult *out,
				  char *err, size_t errlen);
BTRFSIMG_API void btrfsimg_cresult_clear(struct btrfsimg_cresult *r);

/** Every scheme, in this order: nfsd, nfsd-uniquifier, inumbits=32..64 with
 *  numdevs=1, inumbits=32..64 with numdevs=2, numdevs=many. */
struct btrfsimg_creport {
	size_t nresults;		/**< BTRFSIMG_CREPORT_SCHEMES */
	struct btrfsimg_cresult *results;
	unsigned min_free_n1, min_free_n2;	/**< smallest collision-free N; 0 = none */
	unsigned min_proven_n1, min_proven_n2;	/**< smallest N proven by bit ranges; 0 = none */
};
#define BTRFSIMG_CREPORT_SCHEMES 69

/** Run every scheme (input validated once). *out is owned by the caller:
 *  btrfsimg_creport_free(). Errors as btrfsimg_collide(). */
BTRFSIMG_API int btrfsimg_collide_all(const struct btrfsimg_cinput *in,
				      const struct btrfsimg_copts *o,
				      struct btrfsimg_creport **out, char *err, size_t errlen);
BTRFSIMG_API void btrfsimg_creport_free(struct btrfsimg_creport *r);

/* ------------------------------------------------------------------ */
/** @name Collisions of a whole filesystem */

/** Every scheme run over every reachable inode of an image. */
/** A stub directory: the entry naming it, in directory @p dir of @p subvol. */
struct btrfsimg_stub {
	uint64_t subvol;
	uint64_t dir;			/**< objectid of the directory holding the entry */
	uint16_t name_len;
	uint8_t name[255];
};

struct btrfsimg_fs_collisions {
	struct btrfsimg_creport *report;	/**< per scheme, btrfsimg_collide_all order */
	uint64_t *readdir_mismatch;	/**< per scheme: directory entries whose readdir
					     number differs from the st_ino (NFS: fileid) of
					     what they name */
	struct btrfsimg_csubvol *subvols;	/**< the analysed subvolumes (ids, parities) */
	size_t nsubvols;
	uint64_t skipped_subvols;	/**< deleted or unreachable: not visible, not analysed */
	uint64_t inodes;		/**< (subvolume, objectid) pairs analysed */
	uint64_t stubs;			/**< stub directories */
	struct btrfsimg_stub *stub_entries;	/**< where each stub is (the extras' order,
						     so a member's extra_index finds it) */
	uint64_t max_objectid, max_subvol;
	uint64_t mount_subvol;		/**< for numdevs=2 */
	void *priv;
};

/**
 * Analyse the filesystem: the inode sets of every reachable subvolume
 * (shared between snapshots: each distinct tree leaf is decoded once), its
 * stub directories, then every scheme with btrfsimg_collide_all().
 * @p mount_subvol is the mounted subvolume for numdevs=2 (0: the default
 * subvolume); subvolumes not below it are left off device 0/1 and counted
 * on neither. @p max_examples groups are kept per scheme. Free *out with
 * btrfsimg_fs_collisions_free().
 */
BTRFSIMG_API int btrfsimg_collisions(btrfsimg_fs *fs, uint64_t mount_subvol, size_t max_examples,
				     struct btrfsimg_fs_collisions **out);
BTRFSIMG_API void btrfsimg_fs_collisions_free(struct btrfsimg_fs_collisions *c);

/* ------------------------------------------------------------------ */
/** @name Library */

/** Version string, e.g. "0.1.0". */
BTRFSIMG_API const char *btrfsimg_version(void);

#ifdef __cplusplus
}
#endif
#endif /* BTRFSIMG_H */
