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
 * After a failure a readable message says what and where, for example
 *   "corrupt leaf: root=5 block=30425088 slot=3, item data past end, have 16400 expect <= 16384".
 *
 * Where the message is: with the state the call worked on, one rule:
 *   - a call on a filesystem handle (every call taking a btrfsimg_fs,
 *     here and in btrfsimg_inum.h and btrfsimg_forensic.h): on the handle,
 *     btrfsimg_errmsg(). An open is such a call too: btrfsimg_open_images()
 *     hands back the handle when the open fails, for its message and
 *     btrfsimg_open_step();
 *   - a call on an image handle (btrfsimg_image_read, btrfsimg_image_verify):
 *     on that handle, btrfsimg_image_errmsg();
 *   - a call with no handle to keep it: the caller's buffer @p err of
 *     @p errlen bytes (may be NULL; always NUL-terminated, cut to fit).
 *     These are btrfsimg_image_open() (it fails before a handle exists),
 *     btrfsimg_list_partitions() and btrfsimg_list_partitions_format()
 *     (given a path), and btrfsimg_inum.h's btrfsimg_collide(),
 *     btrfsimg_collide_groups() and btrfsimg_collide_all() (given plain
 *     data).
 * Damage worked around is not a failure: it goes to the log callback
 * (btrfsimg_set_log) and, for a container, btrfsimg_image_note().
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
	/** Use superblock copy super_mirror only (else the newest valid copy). */
	BTRFSIMG_OPEN_SUPER_MIRROR = 1u << 2,
	/** The filesystem starts at byte offset in every image (else it is
	 *  found: the image itself, or a partition). */
	BTRFSIMG_OPEN_OFFSET = 1u << 3,
};

/**
 * Options for btrfsimg_fs_new(). A zeroed struct means "automatic" for
 * every field: the newest valid superblock copy, the filesystem found in
 * the image or its only btrfs partition, the default cache, no flags.
 */
struct btrfsimg_open_opts {
	/** enum btrfsimg_open_flags */
	unsigned flags;
	/** With BTRFSIMG_OPEN_SUPER_MIRROR: the copy to use, 0 primary,
	 *  1 (64 MiB), 2 (256 GiB). Ignored without the flag. */
	unsigned super_mirror;
	/** 1-based partition number inside whole-disk images; 0 = automatic
	 *  (the image itself if it holds btrfs, else the only btrfs partition). */
	unsigned partition;
	/** With BTRFSIMG_OPEN_OFFSET: byte offset of the filesystem inside
	 *  every image (at most INT64_MAX). Ignored without the flag. */
	uint64_t offset;
	/** Bytes of verified tree blocks to keep cached; 0 = default (64 MiB). */
	uint64_t cache_bytes;
};

/** Fill @p o with the defaults (all zero: see btrfsimg_open_opts). */
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
 * in btrfsimg_open(). Containers (EWF, qcow2, VMDK, VHD/VHDX, split raw)
 * are detected: see btrfsimg_add_device_file_format().
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

/** Image container formats (btrfsimg_add_device_file_format()). */
enum btrfsimg_format {
	BTRFSIMG_FORMAT_AUTO = 0,	/**< detect by signature (split raw: by name) */
	BTRFSIMG_FORMAT_RAW = 1,	/**< the bytes of the disk, as they are */
	BTRFSIMG_FORMAT_SPLIT = 2,	/**< raw in pieces: NAME.001, NAME.002, ... */
	BTRFSIMG_FORMAT_EWF = 3,	/**< Expert Witness (E01, E02, ...; libewf) */
	BTRFSIMG_FORMAT_QCOW2 = 4,	/**< QEMU copy-on-write (libqcow) */
	BTRFSIMG_FORMAT_VMDK = 5,	/**< VMware (libvmdk) */
	BTRFSIMG_FORMAT_VHD = 6,	/**< Virtual PC / Hyper-V VHD (libvhdi) */
	BTRFSIMG_FORMAT_VHDX = 7,	/**< Hyper-V VHDX (libvhdi) */
	/** How many this header knows (not a format; grows with them). At
	 *  run time, btrfsimg_format_name() is NULL past the library's last. */
	BTRFSIMG_FORMAT_COUNT
};

/** Name of a format ("raw", "split", "ewf", "qcow2", "vmdk", "vhd",
 *  "vhdx", "auto"), or NULL past the last: the library's one list of
 *  format names, walked from BTRFSIMG_FORMAT_RAW up to the first NULL. */
BTRFSIMG_API const char *btrfsimg_format_name(int format);
/** The format called @p name (as btrfsimg_format_name), or -EINVAL. */
BTRFSIMG_API int btrfsimg_format_parse(const char *name);
/** Whether @p format can be read by this build (a container library may
 *  have been left out: meson -Dewf=disabled and so on). */
BTRFSIMG_API bool btrfsimg_format_supported(int format);

/**
 * Add one device image by path, as btrfsimg_add_device_file() with
 * @p format (enum btrfsimg_format; AUTO detects). A container's other
 * segments are found by name beside @p path (ev.E01: ev.E02, ...;
 * disk.001: disk.002, ...). Returns 0 when the device was added, 1 when
 * @p path is a segment of a container already added (nothing new), or a
 * negative errno. Missing or truncated segments are reported through the
 * log callback as damage; what they held reads as an I/O error naming
 * them.
 */
BTRFSIMG_API int btrfsimg_add_device_file_format(btrfsimg_fs *fs, const char *path,
						 int format);

/**
 * Open the filesystem made of the devices added so far: pick the
 * superblock, match devices, build the chunk map, read the root tree.
 * Missing devices are accepted when the chunk profiles still hold every
 * copy needed (see btrfsimg_missing_devices()). A partition asked for
 * (btrfsimg_open_opts.partition) of an image that holds btrfs itself
 * (its superblock magic at 64 KiB) is refused with -EINVAL: "--partition
 * N: image 'I' holds btrfs itself, not a partition table; leave
 * --partition out" (BTRFSIMG_STEP_PARTITION). btrfsimg_open_images()
 * does all of an open in one call.
 */
BTRFSIMG_API int btrfsimg_open(btrfsimg_fs *fs);

/**
 * Before btrfsimg_open(): show the filesystem as generation @p transid
 * (a transid btrfsimg_forensic_history() lists) committed it; 0 = the
 * superblock's (the default). The root tree is the superblock's or one
 * of its backup roots', else the one a scan of the devices finds (as
 * history does). The chunk map is today's; the log tree is not replayed
 * for an older generation. Every block is checked against its parent's
 * pointer, so what was overwritten since reads as damage (-EIO/-EUCLEAN
 * where it is reached), never as newer content. btrfsimg_open() fails
 * with -ENOENT ("generation N: no root tree found; history lists: ...")
 * when no root tree of @p transid is found. Returns 0 or -EINVAL (open).
 */
BTRFSIMG_API int btrfsimg_set_generation(btrfsimg_fs *fs, uint64_t transid);

/**
 * After an open with btrfsimg_set_generation(): the generation read (in
 * *@p transid, may be NULL) and where its root tree was found, as
 * "root tree at logical L (from backup root 2)"; borrowed, valid while
 * @p fs is. NULL when no generation was asked for.
 */
BTRFSIMG_API const char *btrfsimg_generation_root(const btrfsimg_fs *fs, uint64_t *transid);

/**
 * The last error message on this handle ("" if none): the message of every
 * call that takes a btrfsimg_fs, the open's included (see the top of this
 * file). Borrowed: valid until the next call on the handle.
 */
BTRFSIMG_API const char *btrfsimg_errmsg(const btrfsimg_fs *fs);

/**
 * Log callback: the library never prints. Damage that was worked around
 * (a bad superblock mirror, a tree block read from its second copy, a
 * missing device) is reported here with @p damage true.
 */
typedef void (*btrfsimg_log_fn)(void *ctx, bool damage, const char *msg);
BTRFSIMG_API void btrfsimg_set_log(btrfsimg_fs *fs, btrfsimg_log_fn fn, void *ctx);

/**
 * Progress of the device scan a salvage open makes when a way in is gone
 * (no valid superblock, chunk tree or root tree): @p fn gets the bytes
 * read of all the devices hold, about every 8 MiB; a nonzero return stops
 * the scan and the open fails with -ECANCELED. NULL: none. Set before
 * btrfsimg_open() (btrfsimg_open_images() takes it in its options).
 */
BTRFSIMG_API void btrfsimg_set_scan_progress(btrfsimg_fs *fs,
					     int (*fn)(void *ctx, uint64_t done, uint64_t total),
					     void *ctx);

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
 * (may be NULL; a caller's buffer, as no handle is made) receives a
 * message on failure; on success it is empty, or notes damage worked
 * around (the backup GPT header used, and why). Kept for the ABI: the
 * same as btrfsimg_list_partitions_format() with BTRFSIMG_FORMAT_AUTO.
 */
BTRFSIMG_API int btrfsimg_list_partitions(const char *path, struct btrfsimg_partition *out,
					  size_t max, char *err, size_t errlen);

/** btrfsimg_list_partitions() of the disk inside the container @p path
 *  of @p format (enum btrfsimg_format; AUTO detects). */
BTRFSIMG_API int btrfsimg_list_partitions_format(const char *path, int format,
						 struct btrfsimg_partition *out, size_t max,
						 char *err, size_t errlen);

/* ------------------------------------------------------------------ */
/** @name Volume layers: LUKS and LVM between the disk and btrfs
 *
 * btrfsimg_open() looks through partitions, LUKS1/LUKS2 and LVM2 for the
 * volume holding btrfs. An encrypted volume needs its passphrase or its
 * volume key (set before opening); a wrong one fails the open with
 * -EKEYREJECTED ("no keyslot opened with this passphrase; tried keyslots
 * 0, 1"), a KDF cost beyond sane limits (Argon2 memory above 4 GiB, or
 * more estimated time than btrfsimg_set_kdf_limit() allows) with
 * -EOPNOTSUPP. Keys are copied, wiped when the handle is freed, and never
 * appear in messages or in btrfsimg_layers(). */

/** Passphrase for LUKS volumes: its exact bytes (like cryptsetup
 *  --key-file). Copied. 0 or -EINVAL (after btrfsimg_open, > 8192 bytes). */
BTRFSIMG_API int btrfsimg_set_passphrase(btrfsimg_fs *fs, const void *pass, size_t len);

/** The volume key itself (a LUKS master key recovered by other means),
 *  checked against each header's digest. Copied. 0 or -EINVAL. */
BTRFSIMG_API int btrfsimg_set_volume_key(btrfsimg_fs *fs, const void *key, size_t len);

/** Asked once, when a LUKS volume is found and no passphrase or volume key
 *  was set: write the passphrase into @p buf (at most @p max bytes) and
 *  return its length, or a negative errno to leave the volume locked.
 *  @p volume names it (image, partition, LUKS version and UUID). */
typedef int (*btrfsimg_passphrase_fn)(void *ctx, const char *volume, void *buf, size_t max);
BTRFSIMG_API int btrfsimg_set_passphrase_fn(btrfsimg_fs *fs, btrfsimg_passphrase_fn fn,
					    void *ctx);

/** The key derivation an open (or btrfsimg_probe()) may do, estimated
 *  before it runs from a few milliseconds of calibration: @p ms per LUKS
 *  keyslot (its PBKDF2 or Argon2 and the digest check after it), three
 *  times that for all keyslots and volume key checks of the open (0: the
 *  default, 10000 ms). A keyslot over it is not tried and says "keyslot N
 *  would need about X s ...; over the limit of Y s"; raise it for a real,
 *  slow keyslot. 0 or -EINVAL (after btrfsimg_open, above
 *  BTRFSIMG_KDF_LIMIT_MAX_MS). */
#define BTRFSIMG_KDF_LIMIT_MAX_MS 86400000u
BTRFSIMG_API int btrfsimg_set_kdf_limit(btrfsimg_fs *fs, uint32_t ms);

/** Use the LVM logical volume @p name ("VG/LV"; NULL: automatic, the one
 *  volume that holds btrfs). Copied. 0, -EINVAL (no '/') or -ENOMEM. */
BTRFSIMG_API int btrfsimg_select_volume(btrfsimg_fs *fs, const char *name);

/**
 * Before btrfsimg_open(): read the filesystem of fsid @p uuid ("1b4e28ba-
 * 2fa1-11d2-883f-0016d3cca427", dashes optional, any case, or its first 8
 * or more hex digits when they name one filesystem only; NULL: the
 * superblock's). Several can be on the devices: `mkfs` over an old
 * filesystem leaves the old one's tree blocks under their own fsid. When
 * the valid superblock found names it (its fsid or metadata_uuid),
 * nothing changes. Else it is rebuilt from its own tree blocks as when no
 * superblock is left (salvage, announced as damage): blocks of other
 * fsids never enter its index, chunk map or roots. An open then fails
 * with -ENOENT (none found) or -EINVAL (a prefix of several), the
 * message listing the filesystems found. 0 or -EINVAL (not a uuid or
 * prefix; after btrfsimg_open).
 */
BTRFSIMG_API int btrfsimg_set_fsid(btrfsimg_fs *fs, const char *uuid);

/** A filesystem whose tree blocks btrfsimg_scan_filesystems() found. */
struct btrfsimg_found_fs {
	uint8_t fsid[16];		/**< a superblock's when one names it, else
					 *   the blocks' (metadata_uuid) */
	uint8_t metadata_uuid[16];	/**< the uuid its tree blocks carry */
	char label[257];		/**< from a valid superblock copy; else "" */
	unsigned supers;		/**< valid superblock copies that name it */
	uint64_t super_generation;	/**< the newest of them; 0: none */
	bool current;			/**< the superblock an open uses names it */
	uint32_t nodesize;		/**< the one its blocks verify under */
	uint16_t csum_type;		/**< enum btrfsimg_csum_type, likewise */
	uint64_t blocks;		/**< tree blocks that verify */
	uint64_t gen_min, gen_max;	/**< their generations */
	uint64_t first, last;		/**< device offsets of the first and the
					 *   last found (of any device) */
	uint32_t devices;		/**< devices they were found on */
};

/**
 * Before btrfsimg_open() (images added): locate the devices as an open
 * does (partitions, LUKS, LVM), read each once, and list every btrfs
 * whose tree blocks are on them (at most 16 told apart; *@p n how many,
 * up to @p max into @p out, the one the current superblock names first,
 * then by blocks). The list is kept: a second call does not read again.
 * 0, or a negative errno with the message on @p fs. The handle cannot be
 * opened after it (btrfsimg_open: -EINVAL): open another to read one of
 * them, with btrfsimg_set_fsid.
 */
BTRFSIMG_API int btrfsimg_scan_filesystems(btrfsimg_fs *fs, struct btrfsimg_found_fs *out,
					   size_t max, size_t *n);

/** One layer of the stack: an image, a partition, LUKS, an LVM PV, VG or
 *  LV, or btrfs. Rows come depth-first: a row's layers follow it. */
struct btrfsimg_layer {
	int parent;		/**< index of the row it lies in; -1: top */
	unsigned depth;		/**< 0 for images (and multi-PV volume groups) */
	char kind[16];		/**< "image", "partition", "luks1", "luks2",
				 *   "lvm-pv", "lvm-vg", "lvm-lv", "btrfs";
				 *   "stopped": probing stopped, detail says why */
	char name[128];		/**< image path, partition number, VG name,
				 *   "VG/LV", LUKS or btrfs label */
	uint64_t offset;	/**< byte offset inside its parent */
	uint64_t size;		/**< bytes */
	char uuid[40];		/**< LUKS, PV, VG, LV uuid or btrfs fsid; "" */
	char detail[512];	/**< LUKS: opened with which keyslot, or locked;
				 *   LV type and segments; why unreadable */
	bool in_use;		/**< on the path to a device btrfsimg_open() uses */
	/* LUKS rows: the same as detail says, field by field */
	char cipher[48];	/**< "aes-xts-plain64"; "" for other rows */
	unsigned key_bits;	/**< size of the volume key */
	unsigned sector_size;	/**< encryption sector, bytes */
	uint64_t payload;	/**< payload offset inside the volume, bytes */
	char kdf[192];		/**< per keyslot, "0: argon2id t=4 m=65536 KiB p=2",
				 *   joined by "; " */
};

/** Find the layers of the images added, without opening btrfs: LUKS
 *  volumes are unlocked when a key is set (else listed as locked). 0 or a
 *  negative errno (out of memory, unreadable image). */
BTRFSIMG_API int btrfsimg_probe(btrfsimg_fs *fs);

/** The rows found by btrfsimg_probe() or btrfsimg_open(): up to @p max
 *  into @p out, *@p n = how many exist. 0 or -EINVAL (neither called). */
BTRFSIMG_API int btrfsimg_layers(btrfsimg_fs *fs, struct btrfsimg_layer *out, size_t max,
				 size_t *n);

/* ------------------------------------------------------------------ */
/** @name Opening in one call
 *
 * btrfsimg_open_images() runs the whole open one way: a handle, its keys
 * and volume, every image added, the filesystem opened; what the CLI,
 * the Python binding and the FUSE mount call. The step-by-step calls
 * above (btrfsimg_fs_new, btrfsimg_set_*, btrfsimg_add_device_*,
 * btrfsimg_open) stay, for devices in memory or behind a callback. */

/**
 * Everything one open takes. ABI: the struct grows only at its end, and
 * @c size says how much of it the caller knows: start from
 * BTRFSIMG_OPEN_OPTIONS_INIT (size set, the rest zero = automatic). A
 * library older than the caller's header takes a larger @c size only if
 * the fields it does not know are zero (else -EINVAL); a newer library
 * takes the fields past @c size as zero.
 */
struct btrfsimg_open_options {
	size_t size;	/**< sizeof(struct btrfsimg_open_options) */
	/** flags (no data checksums, no log replay), superblock mirror,
	 *  partition, offset, cache, as btrfsimg_fs_new() takes them */
	struct btrfsimg_open_opts fs;
	int format;	/**< enum btrfsimg_format of every image; 0: detected */
	/** LUKS passphrase, its exact bytes (NULL: none; copied) */
	const void *passphrase;
	size_t passphrase_len;
	/** LUKS volume key (NULL: none; copied) */
	const void *volume_key;
	size_t volume_key_len;
	/** asked when a LUKS volume is found and neither key is given */
	btrfsimg_passphrase_fn passphrase_fn;
	void *passphrase_ctx;
	uint32_t kdf_limit_ms;	/**< btrfsimg_set_kdf_limit(); 0: the default */
	const char *volume;	/**< LVM "VG/LV" (btrfsimg_select_volume); NULL: automatic */
	uint64_t generation;	/**< btrfsimg_set_generation(); 0: the superblock's */
	/** damage and notes, from the first image added on */
	btrfsimg_log_fn log;
	void *log_ctx;
	/** the filesystem to read when several are on the devices
	 *  (btrfsimg_set_fsid); NULL: the superblock's */
	const char *fsid;
	/** the device scan of a salvage open (btrfsimg_set_scan_progress);
	 *  NULL: none */
	int (*scan_progress)(void *ctx, uint64_t done, uint64_t total);
	void *scan_progress_ctx;
};
#define BTRFSIMG_OPEN_OPTIONS_INIT { .size = sizeof(struct btrfsimg_open_options) }

/**
 * Open the filesystem on the image files @p images[0 .. @p n) with
 * @p o (NULL: every default). The steps, in order: the handle and the
 * options (keys, volume, KDF limit, generation, log); each image added
 * (btrfsimg_add_device_file_format: a later segment of a container
 * already added counts as added); the filesystem opened (btrfsimg_open,
 * which refuses o->fs.partition for an image that holds btrfs itself).
 *
 * Returns 0 with *@p out an open handle. On failure a negative errno and
 * *@p out the handle as far as it came, its btrfsimg_errmsg() saying what
 * and where and btrfsimg_open_step() which step failed; the caller frees
 * it (btrfsimg_fs_free). *@p out is NULL only when no handle could be made:
 * -EINVAL (@p out NULL, @p images NULL with @p n > 0, a bad @c size or
 * option) or -ENOMEM.
 */
BTRFSIMG_API int btrfsimg_open_images(btrfsimg_fs **out, const char *const *images, size_t n,
				      const struct btrfsimg_open_options *o);

/** Which step of an open failed (btrfsimg_open_step()). */
enum btrfsimg_open_step {
	BTRFSIMG_STEP_NONE = 0,	 /**< none failed (or none was tried) */
	BTRFSIMG_STEP_OPTIONS,	 /**< a key, the volume, the KDF limit or generation refused */
	BTRFSIMG_STEP_IMAGE,	 /**< an image could not be added: *image says which */
	BTRFSIMG_STEP_PARTITION, /**< a partition asked of an image that holds btrfs itself */
	BTRFSIMG_STEP_OPEN,	 /**< the filesystem could not be opened */
};

/** After a failed btrfsimg_open_images() or btrfsimg_open(): the step
 *  that failed (enum btrfsimg_open_step) and, for BTRFSIMG_STEP_IMAGE, the
 *  index of the image in *@p image (may be NULL). The message itself is
 *  btrfsimg_errmsg(). */
BTRFSIMG_API int btrfsimg_open_step(const btrfsimg_fs *fs, size_t *image);

/* ------------------------------------------------------------------ */
/** @name Image containers: what an image file holds, and its integrity */

/** An image file opened as its container (or raw). Opaque. */
typedef struct btrfsimg_image btrfsimg_image;

/**
 * Open @p path as @p format (enum btrfsimg_format; AUTO detects), finding
 * its other segments. On success *out owns the handle (btrfsimg_image_free).
 * On failure returns a negative errno and a message in @p err (may be NULL)
 * naming the file: a caller's buffer, as there is no handle to keep it.
 */
BTRFSIMG_API int btrfsimg_image_open(btrfsimg_image **out, const char *path, int format,
				     char *err, size_t errlen);
/** Release an image handle. Accepts NULL. */
BTRFSIMG_API void btrfsimg_image_free(btrfsimg_image *img);

/** What a container is; strings are borrowed from the handle. */
struct btrfsimg_image_info {
	int format;		/**< enum btrfsimg_format (never AUTO) */
	uint64_t size;		/**< bytes of the disk it holds */
	const char *detail;	/**< sub-format ("monolithicSparse", "dynamic",
				 *   "streamOptimized", ...) or "" */
	size_t segments;	/**< files it is made of (btrfsimg_image_segment) */
	size_t meta;		/**< metadata entries (btrfsimg_image_meta) */
	size_t notes;		/**< damage found at open (btrfsimg_image_note) */
	bool has_md5, has_sha1;	/**< hashes stored in it (EWF) */
	uint8_t md5[16], sha1[20];
};
BTRFSIMG_API void btrfsimg_image_info(const btrfsimg_image *img,
				      struct btrfsimg_image_info *out);
/** The @p i th file of the container, in order, and whether it exists
 *  (@p present may be NULL); NULL past the end. Borrowed. */
BTRFSIMG_API const char *btrfsimg_image_segment(const btrfsimg_image *img, size_t i,
						bool *present);
/** The @p i th metadata entry (EWF: case_number, examiner_name,
 *  evidence_number, description, notes, acquiry_date, system_date,
 *  acquiry_software, ...; qcow2/VMDK/VHD: backing or parent file).
 *  Returns 0, or -ENOENT past the end. Borrowed strings. */
BTRFSIMG_API int btrfsimg_image_meta(const btrfsimg_image *img, size_t i, const char **key,
				     const char **value);
/** The @p i th damage note (a missing or truncated segment), or NULL. */
BTRFSIMG_API const char *btrfsimg_image_note(const btrfsimg_image *img, size_t i);
/** Read @p len bytes at @p off of the disk. 0 or a negative errno; the
 *  message, on @p img (btrfsimg_image_errmsg), names the file and the
 *  offset. */
BTRFSIMG_API int btrfsimg_image_read(btrfsimg_image *img, uint64_t off, void *buf, size_t len);
/** The last error message on this image handle ("" if none): the message
 *  of btrfsimg_image_read() and btrfsimg_image_verify(); its open, which
 *  has no handle yet when it fails, says why in the caller's buffer.
 *  Borrowed: valid until the next call on @p img. */
BTRFSIMG_API const char *btrfsimg_image_errmsg(const btrfsimg_image *img);

/** Progress callback: @p done of @p total bytes; return nonzero to stop. */
typedef int (*btrfsimg_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/** Result of btrfsimg_image_verify(). */
struct btrfsimg_image_verify {
	uint8_t md5[16], sha1[20];	/**< computed over every byte of the disk
					 *   (unreadable ranges as zeros) */
	uint64_t bytes;			/**< bytes hashed (the disk's size) */
	uint64_t bad_ranges;		/**< ranges that failed to read (a chunk
					 *   failing its checksum, a missing segment) */
	uint64_t first_bad;		/**< offset of the first, if any */
	bool md5_match, sha1_match;	/**< equal to the stored hash (false
					 *   when none is stored) */
};
/**
 * Read the whole disk as ewfverify does: hash it (MD5, SHA-1), check every
 * chunk against its stored checksum, compare with the stored hashes. Each
 * unreadable range is reported through @p bad (may be NULL) with its
 * message. Returns 0 when the whole disk was read (whatever the hashes
 * say), -ECANCELED when @p progress asked to stop, or a negative errno
 * with its message on @p img (btrfsimg_image_errmsg).
 */
typedef void (*btrfsimg_bad_range_fn)(void *ctx, uint64_t off, uint64_t len, const char *msg);
BTRFSIMG_API int btrfsimg_image_verify(btrfsimg_image *img, btrfsimg_progress_fn progress,
				       btrfsimg_bad_range_fn bad, void *ctx,
				       struct btrfsimg_image_verify *out);

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

/** Which feature word btrfsimg_feature_name() reads. */
enum btrfsimg_feature_kind {
	BTRFSIMG_FEATURE_COMPAT = 0,
	BTRFSIMG_FEATURE_COMPAT_RO = 1,
	BTRFSIMG_FEATURE_INCOMPAT = 2,
};

/**
 * The name btrfs-progs gives feature bit @p bit (0..63) of a feature word
 * ("no_holes", "free_space_tree", ...), or NULL for a bit it does not
 * name. Pure; needs no handle.
 */
BTRFSIMG_API const char *btrfsimg_feature_name(enum btrfsimg_feature_kind kind, unsigned bit);

/** One device of the filesystem: what the chunk tree records (DEV_ITEM)
 *  and which image, if any, supplied it. */
struct btrfsimg_device {
	uint64_t devid;
	uint8_t uuid[16];
	uint64_t total_bytes;		/**< the device's size as btrfs records it */
	bool missing;			/**< no image given for it */
	const char *image;		/**< the image's name (borrowed: valid until
					     btrfsimg_fs_free); NULL when missing */
	int partition;			/**< 1-based partition of the image holding it;
					     0: the image itself or an explicit offset */
	uint64_t offset;		/**< where the filesystem starts in the image */
	uint64_t size;			/**< bytes of the image from offset to its end */
};

/**
 * Every device the filesystem has, in devid order, missing ones included.
 * Writes up to @p max entries and sets *n to how many there are (may
 * exceed @p max). Returns 0 or a negative errno.
 */
BTRFSIMG_API int btrfsimg_devices(btrfsimg_fs *fs, struct btrfsimg_device *out, size_t max,
				  size_t *n);

/** Block-group type bits of btrfsimg_profile_use.type. */
enum btrfsimg_bg_type {
	BTRFSIMG_BG_DATA = 1u << 0,
	BTRFSIMG_BG_SYSTEM = 1u << 1,
	BTRFSIMG_BG_METADATA = 1u << 2,
};

/** Chunks of one type and profile, as `btrfs filesystem df` groups them. */
struct btrfsimg_profile_use {
	unsigned type;			/**< enum btrfsimg_bg_type bits (data and
					     metadata both for mixed groups) */
	const char *profile;		/**< "single", "dup", "raid1", ..., "raid6" (static) */
	uint64_t chunks;
	uint64_t bytes;			/**< logical bytes the chunks map */
	unsigned tolerates;		/**< devices it can lose and still be read whole */
};

/**
 * The (type, profile) pairs in use, data first, then metadata, then
 * system. Writes up to @p max entries, sets *n to how many there are.
 */
BTRFSIMG_API int btrfsimg_profiles(btrfsimg_fs *fs, struct btrfsimg_profile_use *out,
				   size_t max, size_t *n);

/** The name of block-group type bits (btrfsimg_profile_use.type), as
 *  `btrfs filesystem df` prints them: "data", "metadata", "system",
 *  "data+metadata" (mixed groups), "other" for none of these. Static. */
BTRFSIMG_API const char *btrfsimg_bg_type_name(unsigned type);

/** What opening did with the log tree (a crash after fsync). */
struct btrfsimg_log_info {
	bool present;			/**< the superblock names a log tree */
	bool replayed;			/**< replayed in memory (else: not asked, or
					     the kernel would not mount it either) */
	uint64_t generation;		/**< the transaction the replay makes */
	uint64_t subvols;		/**< subvolumes the replay changed */
	uint64_t items;			/**< items it wrote or deleted, csum tree included */
};

/** Fill @p out with what btrfsimg_open() did with the log tree. */
BTRFSIMG_API int btrfsimg_log_info(btrfsimg_fs *fs, struct btrfsimg_log_info *out);

/** Where a device was read from: the layer rows (btrfsimg_layers) between
 *  its image and the btrfs row in use. */
struct btrfsimg_device_where {
	/** "partition 1 at offset 1048576 > luks2 UUID > lvm-lv vg/lv", top
	 *  first; without rows (none probed, out of memory) the partition
	 *  alone, as the device says; "" when btrfs lies in the image itself
	 *  (or at an explicit offset) or the device is missing */
	char chain[512];
	/** a LUKS or LVM layer is on the way: device offsets are not image
	 *  offsets (decrypted, or mapped through an LV's segments) */
	bool volume;
};

/** Fill @p out for device @p d (one of btrfsimg_devices() on @p fs).
 *  Cannot fail: no return value, no message on @p fs. */
BTRFSIMG_API void btrfsimg_device_where(btrfsimg_fs *fs, const struct btrfsimg_device *d,
					struct btrfsimg_device_where *out);

/** Everything `btrfsimg super` reports, gathered in one call: the
 *  superblock, then best effort what lies beyond it. */
struct btrfsimg_fs_facts {
	struct btrfsimg_super_info super;
	struct btrfsimg_device *devices;	/**< devid order; NULL when none (or no memory) */
	struct btrfsimg_device_where *where;	/**< per device; NULL without memory */
	size_t ndevices;
	struct btrfsimg_profile_use profiles[32];
	size_t nprofiles;			/**< at most 32; 0 when unreadable */
	struct btrfsimg_log_info log;
	bool have_log;				/**< btrfsimg_log_info() answered */
};

/**
 * The facts of an open filesystem into *@p out (free with
 * btrfsimg_fs_facts_free). Returns btrfsimg_super()'s failure (its
 * message on @p fs) or -ENOMEM (message on @p fs); devices, profiles and
 * the log tree that cannot be read leave their fields empty instead.
 */
BTRFSIMG_API int btrfsimg_fs_facts(btrfsimg_fs *fs, struct btrfsimg_fs_facts **out);
/** Free what btrfsimg_fs_facts() returned; NULL is fine. */
BTRFSIMG_API void btrfsimg_fs_facts_free(struct btrfsimg_fs_facts *f);

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
	bool snapshot;			/**< made as a snapshot: a ROOT_ITEM of it has a
					     non-zero key offset, the transid it was taken
					     in (the rule of `btrfs subvolume list -s`) */
	uint64_t snapshot_of;		/**< id of the subvolume whose uuid is its
					     parent_uuid (the first in list order); 0 when
					     none here has it (gone, or not a snapshot) */
};

/**
 * List every subvolume, id 5 first, then ascending id. On success *out is
 * an array of *n entries owned by the caller; free it with
 * btrfsimg_subvols_free().
 */
BTRFSIMG_API int btrfsimg_subvols(btrfsimg_fs *fs, struct btrfsimg_subvol **out, size_t *n);
BTRFSIMG_API void btrfsimg_subvols_free(struct btrfsimg_subvol *v, size_t n);

/** The entry of id @p id in a list from btrfsimg_subvols() (binary search:
 *  the list is in ascending id order), or NULL. */
BTRFSIMG_API const struct btrfsimg_subvol *btrfsimg_subvol_find(const struct btrfsimg_subvol *v,
								size_t n, uint64_t id);

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
	/** Made up, not read: a subvolume's root directory (objectid 256)
	 *  whose INODE_ITEM is lost (its leaf unreadable or gone) while items
	 *  of its tree survive. Mode S_IFDIR|0755 (what mkfs and the kernel
	 *  give a new subvolume's root; the true bits are unknown), nlink 1;
	 *  owner, size, generations, flags and times unknown (0 here, null or
	 *  absent in the CLI's and Python's records). Said as damage once per
	 *  subvolume. Its listing is what survives of its directory entries
	 *  and the back references naming it (LOST DIRECTORY ENTRIES). */
	bool synthesized;
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
	/** NULL, or where and why the inode's own name (the INODE_REF the
	 *  path ends with) cannot be a path component: the path shows its safe
	 *  form (btrfsimg_name_safe). Borrowed for the callback. */
	const char *name_damage;
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

/**
 * The highest inode number subvolume @p subvol has used: the objectid of
 * the last item of its tree below the reserved range, where the kernel
 * looks for the next free one; 256 for an empty subvolume. Inode numbers
 * are handed out in ascending order, so this less 255 bounds the
 * subvolume's inode count from above, exactly when none was deleted: a
 * total a progress display can divide by. One path down the tree (items
 * a log replay added are not looked at). -ENOENT if there is no such
 * subvolume.
 */
BTRFSIMG_API int btrfsimg_highest_objectid(btrfsimg_fs *fs, uint64_t subvol, uint64_t *out);

/** Where a directory entry points. */
enum btrfsimg_target_kind {
	BTRFSIMG_TARGET_INODE = 0,	/**< an inode in the same subvolume */
	BTRFSIMG_TARGET_SUBVOL = 1,	/**< the root directory of another subvolume */
	BTRFSIMG_TARGET_STUB = 2,	/**< a subvolume entry with no matching ROOT_REF:
					     the kernel shows an empty directory, ino 2 */
	BTRFSIMG_TARGET_LOST = 3,	/**< a directory the walk made up for inodes whose
					     parent is lost (BTRFSIMG_LOST_FOUND): no items */
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
 * and ".." not included; location, d_type and index are the DIR_INDEX's.
 * Targets are where the name's DIR_ITEM leads (what stat/open of the
 * listed path reach, as btrfsimg_lookup()). DIR_ITEM and DIR_INDEX are
 * cross-checked as btrfs check does, each disagreement reported as damage
 * (log callback, btrfsimg_damage_count()): an index whose name has no
 * DIR_ITEM, or repeats a name already listed, is left out; a DIR_ITEM no
 * index lists is not listed. A stub directory (@p dir 2) is empty.
 * -ENOTDIR if @p dir is not a directory; -EUCLEAN (listing stops, what
 * came before it is listed) at an entry that fails the kernel's checks.
 */
BTRFSIMG_API int btrfsimg_readdir(btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
				  btrfsimg_dirent_fn fn, void *ctx);

/**
 * Look a name up in a directory through its DIR_ITEM (name hash), as the
 * kernel's lookup does; entries whose names share the hash are compared
 * byte by byte. A name found so wins; else the safe form of a damaged name
 * (btrfsimg_name_safe) finds the entry readdir lists under it. *out's name
 * points into @p name; its index is 0. A name found whose inode has no
 * INODE_REF/EXTREF by that name, or whose DIR_INDEX (the ref's index) is
 * missing or differs, is reported as damage and still returned (it is the
 * kernel's answer). -ENOENT
 * if absent (also for names over 255 bytes, "." and "..", and in a stub
 * directory), -ENOTDIR if @p dir is not a directory, -EINVAL for an empty
 * name.
 */
BTRFSIMG_API int btrfsimg_lookup(btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
				 const void *name, size_t name_len, struct btrfsimg_dirent *out);

/**
 * Names that cannot be one path component. A btrfs name holds any byte
 * but NUL and '/' and is neither empty, "." nor ".." (the kernel refuses
 * the rest when it reads the block). Every path this library builds
 * (walk, deleted, subvolume and inode paths) shows such a damaged name by
 * its safe form: each NUL, '/' and '%' byte of it as %00, %2F, %25 (and
 * "." as %2E, ".." as %2E%2E, the empty name as "%"); a valid name is its
 * own safe form. btrfsimg_readdir() and btrfsimg_lookup() keep raw bytes.
 */
/** Why @p name cannot be one component (a constant string), or NULL. */
BTRFSIMG_API const char *btrfsimg_name_problem(const void *name, size_t len);
/** The safe form of @p name into @p out (@p cap bytes, NUL-terminated
 *  when @p cap > 0, cut to fit): its length (at most 3 * @p len + 1). */
BTRFSIMG_API size_t btrfsimg_name_safe(const void *name, size_t len, char *out, size_t cap);
/** The raw bytes of a damaged name whose safe form is @p safe (@p cap
 *  bytes at @p out; @p len suffice) and their length: 0, or -EINVAL when
 *  @p safe is not the safe form of a damaged name. */
BTRFSIMG_API int btrfsimg_name_raw(const char *safe, size_t len, void *out, size_t cap,
				   size_t *out_len);

/** For an entry of directory @p dir of @p subvol (as btrfsimg_readdir()
 *  gives it) whose name is damaged: "damaged name: subvolume S directory D
 *  DIR_INDEX (D 96 INDEX), <why>: shown as '<safe form>'" into @p buf
 *  (@p cap bytes, NUL-terminated, cut to fit) and its length; 0 (nothing
 *  written) for a valid name. The one wording every front end reports. */
BTRFSIMG_API size_t btrfsimg_name_damage(uint64_t subvol, uint64_t dir,
					 const struct btrfsimg_dirent *e, char *buf, size_t cap);

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

/* ------------------------------------------------------------------ */
/** @name Walking a tree
 *
 * Every path under a start, as a process walking the mounted filesystem
 * sees them: depth-first, each directory's entries in readdir (DIR_INDEX)
 * order, crossing into subvolumes, stub directories empty. Pull-style:
 * btrfsimg_walk_next() hands out one record per call. A damaged entry does
 * not end the walk: it comes as a BTRFSIMG_WALK_ERROR record and the walk
 * goes on with the next one. */

/** What a walk record is. */
enum btrfsimg_walk_kind {
	BTRFSIMG_WALK_PATH = 0,	 /**< a path (the start first) */
	BTRFSIMG_WALK_ERROR = 1, /**< a failure at @c path; the walk goes on */
	BTRFSIMG_WALK_POST = 2,	 /**< directory @c path again, after its children
				  *   (only with BTRFSIMG_WALK_POST_DIRS) */
};

#define BTRFSIMG_WALK_POST_DIRS 1u /**< also report directories after their children */
#define BTRFSIMG_WALK_DEPTH_MAX 4096 /**< default depth limit (PATH_MAX nests ~2048 deep) */

struct btrfsimg_walk_opts {
	uint64_t subvol;	/**< where @c path is resolved */
	const char *path;	/**< start path; "" or NULL: the root of @c subvol */
	uint64_t objectid;	/**< not 0: start at inode @c subvol:@c objectid (no path) */
	unsigned flags;		/**< BTRFSIMG_WALK_POST_DIRS */
	size_t max_depth;	/**< do not descend below it; 0: BTRFSIMG_WALK_DEPTH_MAX */
};

/** One record, valid until the next btrfsimg_walk_next() or close. */
struct btrfsimg_walk_entry {
	int kind;		/**< enum btrfsimg_walk_kind */
	const uint8_t *path;	/**< relative to the start, NUL-terminated; "" for it,
				   its name when it is a file started by path */
	size_t path_len;
	size_t depth;		/**< 0 for the start */
	bool is_start;
	bool stub;		/**< a stub directory (BTRFSIMG_TARGET_STUB) */
	/** The parent's entry (readdir's d_ino, d_type, name); for the start
	 *  the last component's as btrfsimg_path_lookup() gives it, zeroed
	 *  when the start is a root or an objectid. */
	struct btrfsimg_dirent ent;
	uint64_t subvol, objectid;	/**< what stat() reaches */
	struct btrfsimg_inode inode;	/**< btrfsimg_stub_inode()'s for stubs */
	uint64_t dir_subvol, dir_objectid; /**< the containing directory (the
					    *   start's own ids for the start) */
	const struct btrfsimg_inode *dir_inode; /**< its inode; NULL for the start */
	/** BTRFSIMG_WALK_ERROR: the negative errno, and the operation that
	 *  failed ("readdir": what was listed before the failure still comes;
	 *  "inode": the entry is left out), or NULL when the walk does not
	 *  descend into directory @c path (deeper than the limit, or a loop:
	 *  one of its own ancestors). btrfsimg_errmsg() says the rest. */
	int error;
	const char *op;
	/** Salvage: 0, or the generation as of which the record's items are
	 *  known live when older than their tree's: its tree was rebuilt from
	 *  the leaves a scan of the devices found, and no surviving node of
	 *  the tree's own generation names the leaves its inode's items are
	 *  in, so they may predate the filesystem's last commit. */
	uint64_t as_of_generation;
	/** Placed by its inode's back references, not by a directory entry:
	 *  the record is under the made-up directory BTRFSIMG_LOST_FOUND of a
	 *  subvolume root (or is it), its path ending in the true inode number
	 *  of the parent whose own items are lost, then the name the back
	 *  reference holds. False for records placed by back references at
	 *  their true path (their directory's entries lost, the directory not).
	 *  A subvolume root whose own inode is lost is inode.synthesized. */
	bool lost_found;
};

/** The made-up directory under a subvolume root that holds the inodes no
 *  surviving chain of back references leads to from the root: its
 *  children are named by the inode number of the lost parent (a
 *  directory, also made up), theirs by the back reference's name; an
 *  inode with no back reference left is "#<ino>" directly under it.
 *  Every record under it has lost_found set (its name alone could be a
 *  real one). */
#define BTRFSIMG_LOST_FOUND "#lost+found"

/**
 * The entry BTRFSIMG_LOST_FOUND of directory @p dir of @p subvol as a
 * listing of it shows it in damaged mode (the directory's listing fails,
 * the filesystem was opened by a salvage, or its root directory is
 * synthesized): 1 and *@p out (kind BTRFSIMG_TARGET_LOST, target objectid
 * 0, index UINT64_MAX: after every real entry) when @p dir is the
 * subvolume's root and some inode's chain of back references breaks; 0
 * when there is none; a negative errno. For front ends that list with
 * btrfsimg_readdir() (the walk adds it itself).
 */
BTRFSIMG_API int btrfsimg_lost_found(btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
				     struct btrfsimg_dirent *out);

/**
 * List a made-up directory under BTRFSIMG_LOST_FOUND of @p subvol, as the
 * walk lists it: @p parent 0 is BTRFSIMG_LOST_FOUND itself (one directory
 * per lost parent, named by its inode number, kind BTRFSIMG_TARGET_LOST,
 * and "#<ino>" per inode without back reference); else the lost parent
 * @p parent (the target objectid of such an entry): the inodes whose back
 * references name it. 0 or a negative errno; @p fn as btrfsimg_readdir().
 */
BTRFSIMG_API int btrfsimg_lost_readdir(btrfsimg_fs *fs, uint64_t subvol, uint64_t parent,
				       btrfsimg_dirent_fn fn, void *ctx);

/** Entry @p name of the made-up directory @p parent (as
 *  btrfsimg_lost_readdir()) into *@p out: 0, -ENOENT, or a negative errno. */
BTRFSIMG_API int btrfsimg_lost_lookup(btrfsimg_fs *fs, uint64_t subvol, uint64_t parent,
				      const void *name, size_t name_len,
				      struct btrfsimg_dirent *out);

/** The inode a made-up directory (kind BTRFSIMG_TARGET_LOST) shows:
 *  objectid @p parent, S_IFDIR|0500, nlink 1, every other field 0 (no
 *  times: none is known). */
BTRFSIMG_API void btrfsimg_lost_dir_inode(uint64_t subvol, uint64_t parent,
					  struct btrfsimg_inode *out);

typedef struct btrfsimg_walk btrfsimg_walk;

/**
 * Start a walk. Resolves the start (its path, or the stub directory's
 * parent) and reads its inode: a failure there is the walk's, returned
 * here with the message on @p fs. The walk borrows @p fs.
 */
BTRFSIMG_API int btrfsimg_walk_open(btrfsimg_fs *fs, const struct btrfsimg_walk_opts *o,
				    btrfsimg_walk **out);
/**
 * The next record into *@p out: 1, 0 at the end, or a negative errno that
 * ends the walk (-ENOMEM). A directory's children are listed on the call
 * after the directory's own record, unless btrfsimg_walk_skip() came
 * between.
 */
BTRFSIMG_API int btrfsimg_walk_next(btrfsimg_walk *w, const struct btrfsimg_walk_entry **out);
/** Do not descend into the directory the last record was. */
BTRFSIMG_API void btrfsimg_walk_skip(btrfsimg_walk *w);
BTRFSIMG_API void btrfsimg_walk_close(btrfsimg_walk *w);

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
 * Where a regular file's next bytes from extents lie, as lseek(2)
 * SEEK_DATA then SEEK_HOLE: the first range [*start, *end) at or after
 * @p offset, inside i_size, that regular, compressed or inline data gives,
 * adjacent extents joined (holes, prealloc and bytes past the last extent
 * are not data: they read as zeros). 0, -ENXIO when no data is left, or a
 * negative errno. One tree search per call, then one step per extent
 * item: walking a file's data costs its items, whatever its size claims.
 */
BTRFSIMG_API int btrfsimg_file_data(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
				    uint64_t offset, uint64_t *start, uint64_t *end);

/**
 * How far a file's holes are followed: 16 bytes for every byte of the
 * devices, at least 1 GiB. A size beyond it is reported as possibly forged
 * instead of being hashed or written out as zeros (btrfsimg_file_digest's
 * -EFBIG; btrfsimg_file_length's cut, which extract and cat keep to; a
 * recovered version's bad range). 0 on a handle not open.
 */
BTRFSIMG_API uint64_t btrfsimg_file_size_bound(btrfsimg_fs *fs);

/**
 * How many bytes of a regular file a reader should produce: *len = i_size,
 * unless that is past btrfsimg_file_size_bound(); then *len is where its
 * data ends (btrfsimg_file_data), at most the bound (data placed at 2^62
 * would make as many zeros before it), and *data_end that end. 0 (the
 * size stands), 1 (cut: the size may be forged, and the reader says so,
 * naming the inode, its size and the bound), or a negative errno. One
 * step per extent item.
 */
BTRFSIMG_API int btrfsimg_file_length(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
				      uint64_t *len, uint64_t *data_end);

/* ------------------------------------------------------------------ */
/** @name Where a file's bytes lie (forward map)
 *
 * A file's extents as records, in file offset order, covering [0, i_size)
 * without gaps: what each range of the file is (inline, regular,
 * prealloc, hole), the extent item it comes from, the logical bytes on
 * disk, and every copy of those bytes: device, physical offset, and where
 * that is in the image file given (through partitions and LVM). */

/** What a record's file range is. */
enum btrfsimg_extent_type {
	BTRFSIMG_EXTENT_INLINE = 0,	/**< bytes inside the leaf (no logical address) */
	BTRFSIMG_EXTENT_REGULAR = 1,	/**< data in a data extent (maybe compressed) */
	BTRFSIMG_EXTENT_PREALLOC = 2,	/**< allocated, never written: reads as zeros */
	BTRFSIMG_EXTENT_HOLE = 3,	/**< no extent (a hole item, a gap, past the last
					 *   item, an inline extent's tail): zeros */
};

/** What checks a record's bytes when they are read: a data checksum per
 *  sector (csum tree), or not, and why not. */
enum btrfsimg_csum_cover {
	BTRFSIMG_CSUM_UNCHECKED = 0,	/**< regular or prealloc data whose csum items
					 *   were not looked up (no BTRFSIMG_EXTENTS_CSUM) */
	BTRFSIMG_CSUM_FULL = 1,		/**< every sector of the disk bytes has one */
	BTRFSIMG_CSUM_PARTIAL = 2,	/**< some sectors have one (csum_bytes says how much) */
	BTRFSIMG_CSUM_NONE = 3,		/**< no csum item covers the disk bytes */
	BTRFSIMG_CSUM_NODATASUM = 4,	/**< the inode is NODATASUM: none are kept */
	BTRFSIMG_CSUM_INLINE = 5,	/**< inline: only the leaf's own checksum covers it */
	BTRFSIMG_CSUM_ZEROS = 6,	/**< hole or prealloc: nothing is read */
};
/** Short name: "unchecked", "full", "partial", "none", "nodatasum",
 *  "inline", "zeros"; NULL for other values. */
BTRFSIMG_API const char *btrfsimg_csum_cover_name(int cover);

/** Most copies a block has (raid1c4). */
#define BTRFSIMG_EXTENT_COPIES_MAX 4

/** One copy of a record's disk bytes. */
struct btrfsimg_extent_copy {
	uint64_t devid;		/**< btrfs device id */
	const char *device;	/**< the image added for it (borrowed from the handle,
				 *   valid until btrfsimg_fs_free); NULL if missing */
	uint64_t physical;	/**< byte offset in the btrfs device */
	bool has_disk_offset;	/**< the bytes lie as they are in the image's disk */
	uint64_t disk_offset;	/**< byte offset in the disk the image holds (past
				 *   partition, LVM extents; the virtual disk of a
				 *   container) */
	bool has_image_offset;	/**< ... and in the image file itself (raw images) */
	uint64_t image_offset;	/**< byte offset in the file @c device names */
	const char *note;	/**< why an offset is missing ("encrypted (LUKS): the
				 *   image holds ciphertext", "inside an ewf
				 *   container: ..."), or "". Static string */
};

/**
 * One record: the file range [file_offset, file_offset + length) and
 * where its bytes come from. Uncompressed data ranges are cut where the
 * logical bytes cross a stripe or chunk boundary, so every copy holds the
 * record's disk bytes contiguously: [logical, logical + disk_length) is
 * the file range itself. A compressed extent is one record whose disk
 * bytes are the whole compressed extent (disk_bytenr, disk_num_bytes);
 * if those cross a stripe boundary it comes as several records with the
 * same file range, each a consecutive part of the compressed bytes.
 */
struct btrfsimg_extent {
	uint64_t file_offset, length;
	int type;		/**< enum btrfsimg_extent_type */
	int compression;	/**< 0 none, 1 zlib, 2 lzo, 3 zstd */
	/** The EXTENT_DATA item (key offset, generation, ram_bytes; for
	 *  regular and prealloc also disk_bytenr, disk_num_bytes, offset);
	 *  zero for gaps with no item. */
	uint64_t item_offset, generation, ram_bytes;
	uint64_t disk_bytenr, disk_num_bytes, extent_offset;
	/** The bytes on disk this record's copies hold (0, 0 for inline and
	 *  holes). */
	uint64_t logical, disk_length;
	int csum;		/**< enum btrfsimg_csum_cover */
	uint64_t csum_bytes;	/**< bytes of [logical, +disk_length) with a csum
				 *   (with BTRFSIMG_EXTENTS_CSUM) */
	size_t ncopies;		/**< copies[] filled: 1 single/raid0/raid5/6 (the data
				 *   stripe), 2 dup/raid1/raid10, 3-4 raid1c3/4;
				 *   0 when unmapped (the message says why) */
	struct btrfsimg_extent_copy copies[BTRFSIMG_EXTENT_COPIES_MAX];
};

/** Flags for btrfsimg_extents_open(). */
#define BTRFSIMG_EXTENTS_CSUM 1u /**< look up csum items for each data record
				  *   (full/partial/none; one csum tree search
				  *   per csum item reached) */

typedef struct btrfsimg_extents btrfsimg_extents;

/**
 * Start listing the extents of inode @p subvol : @p objectid (a regular
 * file or symlink; -EINVAL for a directory). The iterator borrows @p fs.
 * Records stop at i_size; a size beyond btrfsimg_file_size_bound() is
 * listed to where the data ends, then one hole up to i_size.
 */
BTRFSIMG_API int btrfsimg_extents_open(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
				       unsigned flags, btrfsimg_extents **out);
/** The next record into *@p out (valid until the next call or close): 1,
 *  0 at the end, or a negative errno (message on the handle). */
BTRFSIMG_API int btrfsimg_extents_next(btrfsimg_extents *it,
				       const struct btrfsimg_extent **out);
/** Release the iterator. Accepts NULL. */
BTRFSIMG_API void btrfsimg_extents_close(btrfsimg_extents *it);

/** A record handed to a callback (recovered versions): borrowed for the
 *  call. Return 0 to go on, > 0 to stop (returned), < 0 to fail. */
typedef int (*btrfsimg_extent_fn)(void *ctx, const struct btrfsimg_extent *e);

/**
 * One word for a whole file's checksum coverage, from its extents (the
 * csum items looked up): BTRFSIMG_CSUM_FULL (every data byte on disk has
 * a checksum), PARTIAL (some; also inline bytes beside checksummed
 * extents), NONE (data on disk, no csum item), NODATASUM, INLINE (its
 * data is inline only), ZEROS (no data: holes, prealloc, empty). Returns
 * the enum btrfsimg_csum_cover value or a negative errno (-EINVAL for a
 * directory). @p data_bytes and @p csum_bytes (may be NULL): the bytes on
 * disk its records reference and those a checksum covers. One step per
 * extent item and csum item.
 */
BTRFSIMG_API int btrfsimg_file_csum_cover(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
					  uint64_t *data_bytes, uint64_t *csum_bytes);

/**
 * Where byte @p physical of btrfs device @p devid lies in its image: fills
 * @p out's device, has_disk_offset/disk_offset, has_image_offset/
 * image_offset and note (devid and physical as given). 0, or -ENOENT (no
 * such device was supplied).
 */
BTRFSIMG_API int btrfsimg_device_place(btrfsimg_fs *fs, uint64_t devid, uint64_t physical,
				       struct btrfsimg_extent_copy *out);

/* ------------------------------------------------------------------ */
/** @name Who owns a byte range (reverse map)
 *
 * A range of logical address space, of a btrfs device, or of an image
 * (a carving hit, an unallocated range) back to what holds it: the chunk
 * map in reverse, the extent tree's items over the range, their back
 * references (EXTENT_DATA_REF, SHARED_DATA_REF; TREE_BLOCK_REF for
 * metadata), and in every subvolume and snapshot the inodes whose
 * EXTENT_DATA items point into it, as `btrfs inspect-internal
 * logical-resolve` finds them. */

/** What an owner record is. */
enum btrfsimg_owner_kind {
	BTRFSIMG_OWNER_FILE = 0,	/**< file data: subvol, objectid, file range */
	BTRFSIMG_OWNER_EXTENT = 1,	/**< a data extent no file's item was found
					 *   pointing into (ref_* give its first back
					 *   reference) */
	BTRFSIMG_OWNER_TREE_BLOCK = 2,	/**< metadata: a tree block (tree_root) */
	BTRFSIMG_OWNER_FREE = 3,	/**< in a chunk, in no extent: free now (it may
					 *   hold older data: see the forensic scan) */
	BTRFSIMG_OWNER_PARITY = 4,	/**< RAID5/6 parity of the row at logical */
	BTRFSIMG_OWNER_UNMAPPED = 5,	/**< in no chunk (device space never allocated,
					 *   superblocks, the first MiB) */
	BTRFSIMG_OWNER_RECOVERED = 6,	/**< a recovered version's data pointed here
					 *   (btrfsimg_forensic_owners: version_id) */
};
/** "file", "extent", "tree-block", "free", "parity", "unmapped",
 *  "recovered"; NULL. */
BTRFSIMG_API const char *btrfsimg_owner_kind_name(int kind);

/** One owner of a part of the range asked about. */
struct btrfsimg_owner {
	int kind;			/**< enum btrfsimg_owner_kind */
	uint64_t logical, length;	/**< the part (logical addresses; for PARITY the row;
					 *   for UNMAPPED 0 and the device bytes) */
	bool has_device;		/**< asked by device or image: where the part is */
	uint64_t devid, physical;
	/** The EXTENT_ITEM / METADATA_ITEM holding the part (FILE, EXTENT,
	 *  TREE_BLOCK): its start, length and generation. */
	uint64_t extent_bytenr, extent_bytes, extent_generation;
	uint64_t tree_root;		/**< TREE_BLOCK: its TREE_BLOCK_REF root; 0 when
					 *   only shared references name it */
	/** FILE: the inode and the file range whose bytes lie in the part (a
	 *  compressed extent: the whole range its item serves); the
	 *  EXTENT_DATA item's type (regular or prealloc), compression and
	 *  generation. EXTENT: the back reference's root, objectid, offset. */
	uint64_t subvol, objectid, file_offset, file_length;
	int extent_type, compression;
	uint64_t item_generation;
	/** FILE: a path from the top level (first names; "<S:O>" for parts no
	 *  name leads to); borrowed for the callback. NULL for other kinds.
	 *  RECOVERED: the version's path. */
	const char *path;
	/** RECOVERED: the version's id (btrfsimg_forensic_recovered), its
	 *  generation in extent_generation; borrowed for the callback. */
	const char *version_id;
};
/** Return 0 to go on, > 0 to stop (returned), < 0 to fail. */
typedef int (*btrfsimg_owner_fn)(void *ctx, const struct btrfsimg_owner *o);

/**
 * Every owner of logical [@p logical, + @p len), in logical order (one
 * record per part and owner; a shared extent has one FILE record per
 * subvolume and inode). 0, @p fn's value, or a negative errno. Cost: the
 * extent items of the range and their references; per reference, one
 * inode's extent items in each subvolume.
 */
BTRFSIMG_API int btrfsimg_owners_logical(btrfsimg_fs *fs, uint64_t logical, uint64_t len,
					 btrfsimg_owner_fn fn, void *ctx);
/** The same for bytes [@p physical, + @p len) of btrfs device @p devid
 *  (chunk map in reverse; every record has_device). -ENOENT: no such
 *  device in the chunk tree's stripes and none supplied. */
BTRFSIMG_API int btrfsimg_owners_device(btrfsimg_fs *fs, uint64_t devid, uint64_t physical,
					uint64_t len, btrfsimg_owner_fn fn, void *ctx);
/** The same for bytes of an image: @p image names it as added (NULL: the
 *  only one), @p offset counts in the image file (for a container: in the
 *  disk it holds). -EOPNOTSUPP when btrfs lies under LUKS or LVM there
 *  (no linear way back: ask by device), -ENOENT past the filesystem. */
BTRFSIMG_API int btrfsimg_owners_image(btrfsimg_fs *fs, const char *image, uint64_t offset,
				       uint64_t len, btrfsimg_owner_fn fn, void *ctx);

/**
 * Digest of the first @p len bytes of a regular file (UINT64_MAX: all of
 * it), read as btrfsimg_file_read() does, as lowercase hex into @p hex
 * (@p hexlen >= 2 * digest size + 1; 129 fits every algorithm). @p alg is
 * an OpenSSL digest name ("sha256", "md5", "sha1", ...). 0, a read's
 * negative errno (its message on @p fs), -EINVAL (unknown @p alg, @p hex
 * too small), -EFBIG (more of the file read as zeros than 16 bytes per
 * byte of the devices, at least 1 GiB: holes under a size that may be
 * forged are not hashed for years) or -ENOMEM.
 */
BTRFSIMG_API int btrfsimg_file_digest(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
				      uint64_t len, const char *alg, char *hex, size_t hexlen);

/**
 * @p len bytes as 2 * @p len lowercase hex digits and a NUL into @p hex
 * (@p hexlen >= 2 * @p len + 1, else nothing is written and -EINVAL is
 * returned): how digests and file handles are printed. Pure; needs no
 * handle, leaves no message. 0 on success.
 */
BTRFSIMG_API int btrfsimg_hex(const void *data, size_t len, char *hex, size_t hexlen);

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

/**
 * The handle of walk path @p e (btrfsimg_walk_next): encoded from the
 * inodes the walk holds (btrfsimg_file_handle_encode) for a child of a
 * listed directory, looked up (btrfsimg_file_handle) for the start and for
 * stub directories. Returns the length, or a lookup's negative errno with
 * its message on @p fs; -ENODATA (no message) for a synthesized inode, and
 * for the connectable handle of a child of one: the generation a handle
 * holds is not known.
 */
BTRFSIMG_API int btrfsimg_walk_handle(btrfsimg_fs *fs, const struct btrfsimg_walk_entry *e,
				      bool connectable, uint32_t *type, uint8_t out[40]);

/* ------------------------------------------------------------------ */
/** @name What changed between two snapshots */

enum btrfsimg_change_kind {
	BTRFSIMG_CHANGE_ADDED = 1,	/**< a name that @p from did not have */
	BTRFSIMG_CHANGE_DELETED,	/**< a name @p to does not have */
	BTRFSIMG_CHANGE_RENAMED,	/**< an inode's one name moved (old_path) */
	BTRFSIMG_CHANGE_MODIFIED,	/**< the inode kept its name; fields differ */
};

/** Fields of btrfsimg_change: what differs between the two inodes. */
#define BTRFSIMG_DIFF_CONTENT (1u << 0)	/**< the bytes (not merely their extents) */
#define BTRFSIMG_DIFF_SIZE (1u << 1)
#define BTRFSIMG_DIFF_MODE (1u << 2)	/**< type and permission bits */
#define BTRFSIMG_DIFF_UID (1u << 3)
#define BTRFSIMG_DIFF_GID (1u << 4)
#define BTRFSIMG_DIFF_MTIME (1u << 5)
#define BTRFSIMG_DIFF_XATTRS (1u << 6)	/**< any name or value, any namespace */
#define BTRFSIMG_DIFF_TARGET (1u << 7)	/**< a symlink's target */
#define BTRFSIMG_DIFF_RDEV (1u << 8)

/** One change; buffers are borrowed for the callback. Paths are the raw
 *  name bytes joined by '/', relative to the subvolume's root ("" is the
 *  root itself); not NUL-terminated. */
struct btrfsimg_change {
	int kind;			/**< enum btrfsimg_change_kind */
	unsigned fields;		/**< BTRFSIMG_DIFF_* bits */
	uint64_t objectid;
	const uint8_t *path;		/**< in @p to; in @p from for DELETED */
	size_t path_len;
	const uint8_t *old_path;	/**< RENAMED: the name in @p from; else NULL */
	size_t old_path_len;
};

typedef int (*btrfsimg_change_fn)(void *ctx, const struct btrfsimg_change *c);

/** What a diff read: the trees' blocks, and how many were skipped as
 *  shared by both snapshots. */
struct btrfsimg_diff_stats {
	uint64_t inodes_compared;	/**< inodes with an item that differs */
	uint64_t blocks_read;		/**< tree blocks read comparing the trees */
	uint64_t subtrees_shared;	/**< subtrees both reach through one block */
};

/**
 * What changed from subvolume @p from to subvolume @p to (two snapshots of
 * one subvolume: an inode keeps its objectid across them). Only the
 * subtrees the two trees do not share are read. A change belongs to the
 * inode whose own name changed: a moved directory is one RENAMED row, and
 * an inode below it appears only if it changed itself (under its new
 * path). A hard link added or removed is an ADDED or DELETED row for that
 * name; a name taken over by another inode (or a number reused by one: the
 * creation generation differs) is DELETED plus ADDED. CONTENT is set only
 * when the bytes differ: where the extent items differ the data are read
 * and compared. Rows come sorted by path (bytes), @p fn returning non-zero
 * stops and is returned. A subtree of either tree that cannot be read (a
 * checksum, a failed check; an older generation's block written over
 * since) leaves out the inodes whose keys it holds, and an inode whose
 * items, path or data cannot be read is left out: each is reported as
 * damage on the handle that read it (the log callback,
 * btrfsimg_damage_count(): "inodes A to B not compared"), and the rest is
 * reported. Errors: a negative errno, the message on @p fs (-ENOENT for an
 * unknown subvolume; a root that cannot be read). @p stats may be NULL.
 */
BTRFSIMG_API int btrfsimg_diff(btrfsimg_fs *fs, uint64_t from, uint64_t to,
			       btrfsimg_change_fn fn, void *ctx,
			       struct btrfsimg_diff_stats *stats);
/**
 * btrfsimg_diff() with subvolume @p from read through @p from_fs and
 * @p to through @p to_fs: two handles on the same image files, opened at
 * two generations (btrfsimg_open_options.generation), so that one
 * subvolume (@p from == @p to) is compared with itself as an older
 * transaction left it. Subtrees both generations reach through the same
 * block (address and generation) are skipped unread, as between
 * snapshots. @p from_fs may be @p to_fs (then it is btrfsimg_diff). The
 * handles must hold the same filesystem (fsid), else -EINVAL. Errors: the
 * message is on @p to_fs, a failure of the --from side's reads with
 * "(the --from side, generation N)" after it.
 */
BTRFSIMG_API int btrfsimg_diff_between(btrfsimg_fs *from_fs, uint64_t from, btrfsimg_fs *to_fs,
				       uint64_t to, btrfsimg_change_fn fn, void *ctx,
				       struct btrfsimg_diff_stats *stats);
/** "added", "deleted", "renamed", "modified"; NULL for another value. */
BTRFSIMG_API const char *btrfsimg_change_name(int kind);
/** "content", "size", "mode", "uid", "gid", "mtime", "xattrs", "target",
 *  "rdev" for one BTRFSIMG_DIFF_* bit; NULL for anything else. */
BTRFSIMG_API const char *btrfsimg_diff_field_name(unsigned bit);

/* ------------------------------------------------------------------ */
/** @name Send streams */

/** Where a stream goes: all @p len bytes, or a negative errno. */
typedef int (*btrfsimg_write_fn)(void *ctx, const void *buf, size_t len);

#define BTRFSIMG_SEND_COMPRESSED_DATA 1u /**< protocol 2: compressed extents as
					  *   encoded writes, not decompressed */

/**
 * What btrfsimg_send() sends. ABI: as struct btrfsimg_open_options, the
 * struct grows only at its end and @c size says how much of it the caller
 * knows: start from BTRFSIMG_SEND_OPTS_INIT (size set, the rest zero =
 * the defaults). Fields past a smaller @c size are taken as zero; a
 * larger @c size is taken only if the bytes this library does not know
 * are zero (else -EINVAL with a message).
 */
struct btrfsimg_send_opts {
	size_t size;		/**< sizeof(struct btrfsimg_send_opts) */
	uint64_t subvol;	/**< the subvolume or snapshot sent */
	uint64_t parent;	/**< 0: a full stream; else incremental from it */
	const uint64_t *clone_sources;	/**< subvolumes the receiving side holds too:
					 *   extents shared with them go out as clones */
	size_t nclone_sources;
	uint32_t proto;		/**< 1 or 2; 0 means 1 */
	unsigned flags;		/**< BTRFSIMG_SEND_* */
};
#define BTRFSIMG_SEND_OPTS_INIT { .size = sizeof(struct btrfsimg_send_opts) }

struct btrfsimg_send_stats {
	uint64_t bytes;		/**< the stream's size */
	uint64_t inodes;	/**< inodes other than directories sent */
	uint64_t data_bytes;	/**< file bytes sent as writes */
	uint64_t clones;	/**< ranges sent as clones of bytes sent before */
	uint64_t encoded_bytes;	/**< compressed bytes sent as they are on disk */
	uint64_t damaged;	/**< files whose data could not all be read: named as
				 *   damage, sent without the rest of their bytes */
};

/**
 * Write the send stream of @p o->subvol through @p write: what `btrfs
 * send` writes, which `btrfs receive` applies to make the same subvolume
 * (contents, holes, hard links, symlinks, special files, xattrs, owners,
 * modes, atime and mtime; the subvolume's uuid and ctransid in the stream,
 * so that incremental streams can chain on the receiving side). Data
 * extents shared within the subvolume, with @p o->parent or with a clone
 * source go out as clones (from where they are in the other subvolume). A
 * file whose data cannot all be read is reported as damage (the log
 * callback; btrfsimg_damage_count()) and sent without the rest of its
 * bytes and without its size, never with zeros in their place; the stream
 * goes on. Errors: a negative errno with the message on @p fs (the stream
 * is then not complete: it has no END command). @p stats may be NULL.
 */
BTRFSIMG_API int btrfsimg_send(btrfsimg_fs *fs, const struct btrfsimg_send_opts *o,
			       btrfsimg_write_fn write, void *ctx,
			       struct btrfsimg_send_stats *stats);

/* ------------------------------------------------------------------ */
/** @name Library */

/** Version string, e.g. "0.1.0". */
BTRFSIMG_API const char *btrfsimg_version(void);

#ifdef __cplusplus
}
#endif
#endif /* BTRFSIMG_H */
