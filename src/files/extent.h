/* SPDX-License-Identifier: MIT */
/*
 * File contents: extent pieces and open files.
 */
#ifndef BI_EXTENT_H
#define BI_EXTENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"
#include "btrfs/tree_checker.h"

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

/* The first run at or after @pos of bytes extents give (regular,
 * compressed or inline data; not holes, prealloc or the span past the last
 * item), adjacent extents joined, cut at i_size: [*start, *end). 0, -ENXIO
 * when none is left, or a negative errno. One step per extent item,
 * whatever the sizes. */
int bi_file_next_data(struct bi_file *f, uint64_t pos, uint64_t *start, uint64_t *end);

/* The extent item serving file offset @pos (the first item whose visible
 * range, cut where the next item starts, ends past @pos): *e borrowed
 * until the next call on @f, *next the next item's file offset
 * (UINT64_MAX: none); *e NULL past the last item. Steps forward from the
 * cursor; seeks only when @pos is behind it. */
int bi_file_extent_at(struct bi_file *f, uint64_t pos, const struct bi_extent **e,
		      uint64_t *next);
/* Whether the inode is NODATASUM. */
bool bi_file_nodatasum(const struct bi_file *f);
/* Bytes of logical [logical, +len) that csum items cover (the window of
 * bi_file_pread's checks, so a file's extents cost one search per csum
 * item or gap). 0 or a negative errno. */
int bi_file_csum_bytes(struct bi_file *f, uint64_t logical, uint64_t len, uint64_t *covered);

/* The forward map (btrfsimg_extents' records, no csum lookup) of
 * EXTENT_DATA items @ext[0..n) in file order, as a file of @size bytes:
 * for recovered versions, whose items are no longer in a live tree. 0,
 * @fn's value, or a negative errno. */
int bi_extmap_items(struct btrfsimg_fs *fs, const struct bi_extent *ext, size_t n, uint64_t size,
		    bool nodatasum, btrfsimg_extent_fn fn, void *ctx);

/* How large a file's size is believed when nothing but holes backs it: 16
 * bytes for every byte of the devices, at least 1 GiB. An inode's size is
 * only a claim: a real sparse file is rarely that much larger than the
 * disk holding it, while a forged 2^62 over one inline extent would be
 * years of zeros written or hashed. Every reader that turns holes into
 * work (hashing, cat, extract, recovered versions) stops at this bound
 * and says so, so the work stays in proportion to the image. */
uint64_t bi_size_bound(const struct btrfsimg_fs *fs);
/* The bytes of all the devices (saturating). */
uint64_t bi_devices_bytes(const struct btrfsimg_fs *fs);

/* Called with consecutive chunks (at most 1 MiB each) of a file; @offset is
 * the file offset of @data. Return 0 to go on, > 0 to stop, < 0 to fail. */
typedef int (*bi_data_fn)(void *ctx, uint64_t offset, const uint8_t *data, size_t len);
/* Stream [offset, min(offset + len, i_size)) of a file through @fn (for
 * cat and hashing). Returns 0, @fn's positive value, or a negative errno. */
int bi_file_stream(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t ino, uint64_t offset,
		   uint64_t len, bi_data_fn fn, void *ctx);

#endif
