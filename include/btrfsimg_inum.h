/* SPDX-License-Identifier: MIT */
/**
 * @file btrfsimg_inum.h
 * libbtrfsimg's inode-number analysis: what today's kernel and each of the
 * 2021 proposals (inumbits=N, numdevs=1|2|many, the nfsd uniquifier) present
 * for every inode, and an exact count of the numbers that collide.
 *
 * The scheme functions and btrfsimg_collide() are pure: they need no image.
 * btrfsimg_inodes_presented() and btrfsimg_collisions() run over an open
 * btrfsimg_fs (see btrfsimg.h, whose error model and threading rules hold
 * here too).
 */
#ifndef BTRFSIMG_INUM_H
#define BTRFSIMG_INUM_H

#include "btrfsimg.h"

#ifdef __cplusplus
extern "C" {
#endif
/* ------------------------------------------------------------------ */
/** @name Inode-number schemes (the 2021 proposals; pure functions) */

/**
 * inumbits overlay of a subvolume: 0 if @p inumbits is 0 or @p subvol is 5,
 * else swab64(subvol) >> (64 - inumbits). @p inumbits is 0 or 32..64;
 * other values give 0.
 */
BTRFSIMG_API uint64_t btrfsimg_inumbits_overlay(uint64_t subvol, unsigned inumbits);

/** objectid if it equals @p v, else objectid XOR @p v. */
BTRFSIMG_API uint64_t btrfsimg_presented_ino(uint64_t objectid, uint64_t v);

/** nfsd ino_uniquifier: 0 for subvolume 5, else swab64(subvol). */
BTRFSIMG_API uint64_t btrfsimg_uniquifier(uint64_t subvol);

/**
 * What an NFS client of nfsd with the ino_uniquifier (patch v2) sees, for an
 * export of a btrfs mounted with inumbits=@p inumbits (0: without it; then
 * only the uniquifier applies). With both on, nfsd XORs its uniquifier into
 * the number btrfs already overlaid, each step "unless equal":
 * presented(presented(objectid, overlay), uniquifier). Stub directories
 * (ino 2) are not btrfs inodes to getattr: they show 2 everywhere.
 *
 * btrfsimg_nfs_fileid(): the fileid of inode @p objectid of @p subvol, in
 * GETATTR and READDIRPLUS attributes of NFSv3 and NFSv4 alike (st_ino).
 */
BTRFSIMG_API uint64_t btrfsimg_nfs_fileid(uint64_t subvol, uint64_t objectid, unsigned inumbits);

/**
 * NFSv3 READDIR(PLUS) entry fileid (a v3 client's d_ino): btrfs's readdir
 * number for the entry (its location objectid; a subvolume entry: the
 * child's id) in directory subvolume @p dir_subvol, overlaid as btrfs's
 * readdir does, then XORed with the directory's uniquifier.
 */
BTRFSIMG_API uint64_t btrfsimg_nfs3_d_fileid(uint64_t dir_subvol, uint64_t location_objectid,
					     unsigned inumbits);

/**
 * The d_ino a Linux NFSv4 client shows for an entry: the MOUNTED_ON_FILEID
 * attribute, which the patched nfsd uniquifies only at the root of a crossed
 * mount (never for btrfs subvolumes, which are not mounts on the server). So
 * it is the st_ino of what the entry leads to, as btrfs's getattr gives it:
 * objectid @p objectid of @p subvol (256 of the child for a subvolume entry)
 * overlaid under inumbits, with no uniquifier.
 */
BTRFSIMG_API uint64_t btrfsimg_nfs4_d_fileid(uint64_t subvol, uint64_t objectid, unsigned inumbits);

/**
 * Subvolume crossings from @p mount_subvol down to @p subvol (0 for the
 * mounted one itself), following parent_id through @p v (the list from
 * btrfsimg_subvols(), sorted by id); -1 when @p subvol is not below the
 * mount, is unreachable, or a parent loop is found. numdevs=2 puts a
 * subvolume on device (depth & 1).
 */
BTRFSIMG_API int btrfsimg_subvol_depth(const struct btrfsimg_subvol *v, size_t n,
				       uint64_t mount_subvol, uint64_t subvol);

/**
 * numdevs=2 devices of every subvolume with @p mount_subvol mounted (0: the
 * filesystem's default subvolume), looked up by btrfsimg_numdevs2_dev(): a
 * table read once (btrfsimg_subvols, btrfsimg_subvol_depth), for a walk
 * that asks per path. 0, or a negative errno with the message on @p fs.
 */
typedef struct btrfsimg_numdevs2 btrfsimg_numdevs2;
BTRFSIMG_API int btrfsimg_numdevs2_open(btrfsimg_fs *fs, uint64_t mount_subvol,
					btrfsimg_numdevs2 **out);
/** 0 or 1; -1 when @p subvol is unknown or not below the mounted one. */
BTRFSIMG_API int btrfsimg_numdevs2_dev(const btrfsimg_numdevs2 *t, uint64_t subvol);
BTRFSIMG_API void btrfsimg_numdevs2_free(btrfsimg_numdevs2 *t);

/** The numbers of one walk path (btrfsimg_walk_next) under a scheme, as
 *  `btrfsimg walk --inumbits` reports them. */
struct btrfsimg_walk_numbers {
	uint64_t ino;		/**< st_ino under inumbits=N (a stub's: its own, 2) */
	uint64_t nfs_fileid;	/**< nfsd with the uniquifier */
	uint64_t d_ino;		/**< readdir's d_ino under inumbits=N; 0 for the start */
	uint64_t nfs_d_fileid;	/**< readdir's under the uniquifier; 0 for the start */
	int numdevs2_dev;	/**< numdevs=2 device (0 or 1; a stub's is 0); -1 when
				     the subvolume is not below the mounted one */
	uint64_t nfs4_d_fileid;	/**< a Linux NFSv4 client's readdir d_ino
				     (btrfsimg_nfs4_d_fileid, inumbits 0); 0 for the start */
	/** The same three NFS numbers with btrfs mounted inumbits=N too (the
	 *  uniquifier composed over the overlay: btrfsimg_nfs_fileid). */
	uint64_t nfs_fileid_inumbits, nfs_d_fileid_inumbits, nfs4_d_fileid_inumbits;
};

/** Fill @p out for path @p e under inumbits=@p inumbits (0 or 32..64),
 *  numdevs=2 after @p devs (btrfsimg_numdevs2_open). Pure: cannot fail,
 *  no message. */
BTRFSIMG_API void btrfsimg_walk_numbers(const struct btrfsimg_walk_entry *e, unsigned inumbits,
					const btrfsimg_numdevs2 *devs,
					struct btrfsimg_walk_numbers *out);

/** What today's kernel and each proposal present for one inode. */
struct btrfsimg_inode_numbers {
	uint64_t st_ino;		/**< today: the objectid */
	uint64_t tree_id;		/**< STATX_SUBVOL: the subvolume id */
	unsigned inumbits;		/**< N of the inumbits values below */
	uint64_t overlay;		/**< btrfsimg_inumbits_overlay(subvol, inumbits) */
	uint64_t ino;			/**< st_ino under inumbits=N */
	uint64_t uniquifier;		/**< btrfsimg_uniquifier(subvol) */
	uint64_t nfs_fileid;		/**< nfsd with the uniquifier, btrfs mounted
					     without inumbits: NFSv3 and v4 fileid */
	int numdevs2_dev;		/**< numdevs=2 device (0 or 1); -1 when the
					     subvolume is not below the mounted one */
	uint64_t nfs4_d_fileid;		/**< a Linux NFSv4 client's d_ino for an entry
					     naming this inode (btrfsimg_nfs4_d_fileid,
					     inumbits 0): st_ino */
	uint64_t nfs_fileid_inumbits;	/**< the fileid with btrfs mounted inumbits=N
					     too (composed; btrfsimg_nfs_fileid) */
	uint64_t nfs4_d_fileid_inumbits; /**< the NFSv4 d_ino then: ino */
};

typedef int (*btrfsimg_inode_numbers_fn)(void *ctx, const struct btrfsimg_inode_entry *e,
				     const struct btrfsimg_inode_numbers *p);

/**
 * btrfsimg_inodes() with each inode's presented numbers under
 * inumbits=@p inumbits (0 or 32..64, else -EINVAL) and numdevs=2 with
 * @p mount_subvol mounted (0: the filesystem's default subvolume).
 */
BTRFSIMG_API int btrfsimg_inodes_presented(btrfsimg_fs *fs, uint64_t subvol, unsigned inumbits,
					   uint64_t mount_subvol, btrfsimg_inode_numbers_fn fn,
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
struct btrfsimg_collide_subvol {
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
struct btrfsimg_collide_extra {
	uint64_t subvol;		/**< containing subvolume (for reports) */
	uint64_t ino;			/**< presented number (2 for stubs) */
	unsigned parity;		/**< 0 or 1 */
};

/** What to count collisions over. Borrowed for the call. */
struct btrfsimg_collide_input {
	const struct btrfsimg_collide_subvol *subvols;
	size_t nsubvols;
	const struct btrfsimg_collide_extra *extras;
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
struct btrfsimg_collide_opts {
	size_t max_examples;		/**< example groups to keep per scheme */
	size_t max_members;		/**< members kept per example; 0 = 16 */
};

/** One inode of an example group. */
struct btrfsimg_collide_member {
	uint64_t subvol;
	uint64_t objectid;		/**< the extra's ino for extras */
	bool extra;			/**< a btrfsimg_collide_extra entry (stub) */
	size_t extra_index;		/**< for extras: its index in the input's extras */
};

/**
 * One colliding group: every inode presenting @p ino on @p device.
 * Devices: 0 under one device; the parity under numdevs=2; under
 * numdevs=many 0 is the superblock's device (extras) and i + 1 that of
 * subvols[i].
 */
struct btrfsimg_collide_group {
	uint64_t device;
	uint64_t ino;
	uint64_t size;			/**< inodes in the group (>= 2) */
	size_t nmembers;		/**< stored: min(size, max_members) */
	struct btrfsimg_collide_member *members;	/**< subvolumes in input order, objectid
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
struct btrfsimg_collide_result {
	struct btrfsimg_scheme scheme;
	uint64_t groups;		/**< presented numbers held by >= 2 inodes of a device */
	uint64_t inodes;		/**< inodes in those groups */
	size_t nexamples;
	struct btrfsimg_collide_group *examples;	/**< owned; btrfsimg_collide_result_clear() */
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
 * (may be NULL) receives a message on failure: a caller's buffer, as the
 * call has no handle to keep one (btrfsimg.h, "Where the message is"). Returns 0, -EINVAL (bad
 * input: unsorted set, add/del inconsistent with base, duplicate id,
 * parity > 1, bad scheme) or -ENOMEM. Release @p out with
 * btrfsimg_collide_result_clear() (also after failure).
 */
BTRFSIMG_API int btrfsimg_collide(const struct btrfsimg_collide_input *in, const struct btrfsimg_scheme *s,
				  const struct btrfsimg_collide_opts *o, struct btrfsimg_collide_result *out,
				  char *err, size_t errlen);
BTRFSIMG_API void btrfsimg_collide_result_clear(struct btrfsimg_collide_result *r);

/** Called with each colliding group; @p g and its members are borrowed for
 *  the call. Return 0 to go on, non-zero to stop (that value is returned). */
typedef int (*btrfsimg_collide_group_fn)(void *ctx, const struct btrfsimg_collide_group *g);

/**
 * Every group of scheme @p s over @p in, in (device, ino) order, each with
 * all its members (nmembers == size), handed to @p fn as it is found: memory
 * stays that of a count, however many groups there are. Errors as
 * btrfsimg_collide(); a non-zero return of @p fn ends the run and is
 * returned.
 */
BTRFSIMG_API int btrfsimg_collide_groups(const struct btrfsimg_collide_input *in,
					 const struct btrfsimg_scheme *s,
					 btrfsimg_collide_group_fn fn, void *ctx, char *err,
					 size_t errlen);

/** Every scheme, in this order: nfsd, nfsd-uniquifier, inumbits=32..64 with
 *  numdevs=1, inumbits=32..64 with numdevs=2, numdevs=many. */
struct btrfsimg_collide_report {
	size_t nresults;		/**< BTRFSIMG_COLLIDE_SCHEMES */
	struct btrfsimg_collide_result *results;
	unsigned min_free_n1, min_free_n2;	/**< smallest collision-free N; 0 = none */
	unsigned min_proven_n1, min_proven_n2;	/**< smallest N proven by bit ranges; 0 = none */
};
#define BTRFSIMG_COLLIDE_SCHEMES 69

/** Run every scheme (input validated once). *out is owned by the caller:
 *  btrfsimg_collide_report_free(). Errors as btrfsimg_collide(). */
BTRFSIMG_API int btrfsimg_collide_all(const struct btrfsimg_collide_input *in,
				      const struct btrfsimg_collide_opts *o,
				      struct btrfsimg_collide_report **out, char *err, size_t errlen);
BTRFSIMG_API void btrfsimg_collide_report_free(struct btrfsimg_collide_report *r);

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
	struct btrfsimg_collide_report *report;	/**< per scheme, btrfsimg_collide_all order */
	uint64_t *readdir_mismatch;	/**< per scheme: directory entries whose readdir
					     number differs from the st_ino (NFS: fileid) of
					     what they name */
	struct btrfsimg_collide_subvol *subvols;	/**< the analysed subvolumes (ids, parities) */
	size_t nsubvols;
	uint64_t skipped_subvols;	/**< deleted or unreachable: not visible, not analysed */
	uint64_t inodes;		/**< (subvolume, objectid) pairs analysed */
	uint64_t stubs;			/**< stub directories */
	struct btrfsimg_stub *stub_entries;	/**< where each stub is (the extras' order,
						     so a member's extra_index finds it) */
	uint64_t max_objectid, max_subvol;
	uint64_t mount_subvol;		/**< for numdevs=2 */
	/** The same schemes counted without the stub directories: each stub
	 *  presents 2 on a device where every other stub does too, so with two
	 *  or more no scheme is collision-free; this gives the verdict for the
	 *  rest. NULL when there are no stubs (report is that already). */
	struct btrfsimg_collide_report *report_without_stubs;
	/** NFS v3/v4 and composed schemes, 32-bit figures, the transition. */
	struct btrfsimg_nfs_report *nfs;
};

/**
 * What NFS clients and 32-bit programs see under one scheme, over the
 * inodes and stub directories btrfsimg_collisions() analysed (stubs
 * included: each presents 2).
 */
struct btrfsimg_nfs_figures {
	/** inumbits and uniquifier both set: inumbits=N composed with nfsd's
	 *  uniquifier (btrfsimg_nfs_fileid), on one device */
	struct btrfsimg_scheme scheme;
	uint64_t groups, inodes;	/**< 64-bit numbers shared on a device, and
					     the inodes sharing them */
	uint64_t over32;		/**< inodes presenting a number > 2^32 - 1: a
					     32-bit stat() without large-file support
					     fails with EOVERFLOW on them */
	uint64_t low32_groups, low32_inodes; /**< the same count on the low 32
					     bits (NFSv2, tools keeping 32 bits) */
	bool nfs;			/**< an NFS scheme: the readdir counts are set */
	/** Readdir and stat disagreements of a client: NFSv3 (READDIR's
	 *  fileid) over subvolume entries (other entries agree); NFSv4 (a
	 *  Linux client's d_ino, MOUNTED_ON_FILEID) over subvolume entries
	 *  and every inode but subvolume roots (an inode with several links
	 *  counted once). */
	uint64_t readdir_v3, readdir_v4;
};

/**
 * The NFS figures: every NFS scheme first (nfsd, nfsd-uniquifier, then
 * inumbits=32..64 composed with the uniquifier), then btrfsimg_collide_all's
 * inumbits and numdevs schemes (its order from its third result on), with
 * the 32-bit counts; and the transition to the uniquifier.
 */
struct btrfsimg_nfs_report {
	size_t n;
	struct btrfsimg_nfs_figures *figures;
	size_t nnfs;			/**< the first nnfs figures are NFS schemes */
	/** Patch v2 marks the file handles it issues (fh_options) and a handle
	 *  composed from another inherits its options: a client that mounted
	 *  before the switch keeps today's fileids for everything it reaches.
	 *  A client that mounts afterwards sees transition_changed inodes with
	 *  a new fileid (every inode outside subvolume 5 whose objectid is not
	 *  its uniquifier) and the other transition_kept as before. */
	uint64_t transition_changed, transition_kept;
};
BTRFSIMG_API void btrfsimg_nfs_report_free(struct btrfsimg_nfs_report *r);

/**
 * Analyse the filesystem: the inode sets of every reachable subvolume
 * (shared between snapshots: each distinct tree leaf is decoded once), its
 * stub directories, then every scheme with btrfsimg_collide_all().
 * @p mount_subvol is the mounted subvolume for numdevs=2 (0: the default
 * subvolume): a subvolume below it is on device (crossings below it) & 1;
 * one outside it (reachable only through another mount of the top level)
 * on device (depth below the top level) & 1. @p max_examples groups are kept per scheme. Free *out with
 * btrfsimg_fs_collisions_free().
 */
BTRFSIMG_API int btrfsimg_collisions(btrfsimg_fs *fs, uint64_t mount_subvol, size_t max_examples,
				     struct btrfsimg_fs_collisions **out);
BTRFSIMG_API void btrfsimg_fs_collisions_free(struct btrfsimg_fs_collisions *c);

/** The report with the stub directories left out: report_without_stubs,
 *  or report when there are none (the two are then the same). Pure. */
BTRFSIMG_API const struct btrfsimg_collide_report *
btrfsimg_collisions_without_stubs(const struct btrfsimg_fs_collisions *c);

/**
 * Whether scheme @p i (an index into report->results) gets a row in the
 * verdict's headroom list: how far the filesystem may grow under it. With
 * @p without_stubs false: the schemes collision-free as they are; true:
 * those collision-free only once the stub directories are left out (none
 * when there are no stubs). Pure: no message.
 */
BTRFSIMG_API bool btrfsimg_collisions_headroom(const struct btrfsimg_fs_collisions *c, size_t i,
					       bool without_stubs);

/**
 * Every group of scheme @p s over the inodes @p c analysed, with each of
 * its members, streamed as btrfsimg_collide_groups() does: stub directories
 * included (@p stubs; a stub member has extra set and extra_index into
 * stub_entries) or left out. The handle @p c came from must still be open
 * (a failure's message is left on it). Returns 0, a negative errno, or
 * what @p fn returned to stop.
 */
BTRFSIMG_API int btrfsimg_collisions_groups(const struct btrfsimg_fs_collisions *c,
					    const struct btrfsimg_scheme *s, bool stubs,
					    btrfsimg_collide_group_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif /* BTRFSIMG_INUM_H */
