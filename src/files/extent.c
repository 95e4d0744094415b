/* SPDX-License-Identifier: MIT */
/*
 * File contents: EXTENT_DATA items and the data checksums that guard them.
 *
 * An inode's bytes are described by items keyed (ino, EXTENT_DATA 108,
 * file offset), 21 bytes of header then either the inline payload or four
 * more u64 (53 bytes in all):
 *
 *   0 generation  8 ram_bytes  16 compression  17 encryption
 *  18 other_encoding (u16)     20 type (0 inline, 1 regular, 2 prealloc)
 *  21 inline data ...  |  21 disk_bytenr  29 disk_num_bytes  37 offset  45 num_bytes
 *
 * A regular item references [offset, offset + num_bytes) of an extent of
 * disk_num_bytes bytes at logical disk_bytenr (0: a hole). A compressed
 * extent (<= 128 KiB either way) is read and decompressed whole, then the
 * reference is taken from the decoded bytes; an uncompressed one is read at
 * disk_bytenr + offset. Prealloc extents and holes read as zeros, and so do
 * gaps between items (NO_HOLES) and the bytes from the last item to i_size.
 * Inline items live at file offset 0 and describe the first sector: the
 * payload's ram_bytes bytes, then zeros.
 *
 * Overlapping items (corrupt: the kernel's tree-checker refuses them within
 * one leaf) follow the kernel's lookup, which takes the last item at or
 * before an offset: an item is cut where the next one starts, so the later
 * key wins. The overlap is reported as damage; the read goes on.
 *
 * Data checksums sit in the csum tree (7) in items (EXTENT_CSUM -10, 128,
 * logical start) holding one checksum per sector. Every sector read from
 * disk is checked (for compressed extents: the compressed bytes) unless the
 * inode is NODATASUM, the handle was opened with NO_DATA_VERIFY, or no item
 * covers the sector. A bad sector is read again from every other copy
 * (mirror, DUP, RAID5/6 rebuild) and the bad copy reported as damage; when
 * no copy is good the read fails with -EIO naming subvolume, inode, file
 * offset, logical address and both checksums.
 *
 * Cost: a bi_file keeps its place (an open tree iterator on the extent
 * items, the csum item in use, the last decompressed extent), so a file
 * read front to back walks each leaf once and reads each sector once.
 * Searches that must find "the last item at or before X" look X up and step
 * back one slot: the path (path.c) descends along the last pointer <= X at every
 * level, so that item is in the leaf reached (see iter_floor). Where a log
 * tree overlay is merged in, the search starts instead at a key known to be
 * at or before it (inode start; for checksums, X minus what one leaf can
 * cover) and walks forward.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "files/extent.h"

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "btrfs/tree_checker.h"
#include "btrfs/chunk.h"
#include "btrfs/root.h"
#include "btrfs/salvage.h"
#include "btrfs/tree.h"
#include "files/compress.h"

#define STREAM_CHUNK (1u << 20)
#define SYMLINK_MAX 4095	/* the kernel's page_get_link keeps PAGE_SIZE - 1 bytes */
#define INODE_NODATASUM (1ull << 0)

/* ------------------------------------------------------------- parsing */

size_t bi_extent_pieces(const struct bi_extent *e, uint64_t next, uint64_t pos, uint64_t end,
			struct bi_piece out[3])
{
	size_t n = 0;
	if (pos >= end)
		return 0;
	uint64_t start = e->file_offset, stop = e->end < next ? e->end : next;
	if (pos < start) {
		uint64_t gap_end = start < end ? start : end;
		out[n++] = (struct bi_piece){ pos, gap_end - pos, BI_EXT_ZERO, 0 };
		pos = gap_end;
	}
	if (stop > end)
		stop = end;
	if (pos >= stop)
		return n;
	uint64_t rel = pos - start;
	switch (e->kind) {
	case BI_EXT_INLINE:
		if (rel < e->ram_bytes) {
			uint64_t data_end = start + e->ram_bytes < stop ? start + e->ram_bytes : stop;
			out[n++] = (struct bi_piece){ pos, data_end - pos, BI_EXT_INLINE, rel };
			pos = data_end;
		}
		if (pos < stop)
			out[n++] = (struct bi_piece){ pos, stop - pos, BI_EXT_ZERO, 0 };
		break;
	case BI_EXT_DISK:
		out[n++] = (struct bi_piece){ pos, stop - pos, BI_EXT_DISK,
					      e->disk_bytenr + e->offset + rel };
		break;
	case BI_EXT_COMPRESSED:
		out[n++] = (struct bi_piece){ pos, stop - pos, BI_EXT_COMPRESSED, e->offset + rel };
		break;
	default:
		out[n++] = (struct bi_piece){ pos, stop - pos, BI_EXT_ZERO, 0 };
		break;
	}
	return n;
}

/* ---------------------------------------------------------- the reader */

struct bi_file {
	struct btrfsimg_fs *fs;
	uint64_t subvol, ino, isize;
	struct bi_root root;
	bool verify, nodatasum;
	uint8_t *sector;	/* one sector of scratch */

	/* extent cursor: cur, then nxt, then the iterator's remaining items */
	struct bi_iter it;
	bool live;		/* it is open and cur/nxt are valid */
	uint64_t from;		/* the cursor describes file offsets >= from */
	struct bi_extent cur, nxt;
	bool have_cur, have_nxt;

	/* the inline item's payload (copied: items are borrowed) and bytes */
	uint8_t *inl_raw, *inl;
	uint32_t inl_raw_len;
	bool inl_ready;

	/* checksums of logical [win_start, win_end), or none there */
	bool csum_found;
	struct bi_root csum_root;
	uint64_t win_start, win_end;
	bool win_has;
	uint8_t *win;

	/* the last compressed extent read and decoded */
	struct bi_zctx *z;
	uint8_t *zbuf, *ubuf;
	bool u_valid;
	uint64_t u_bytenr, u_disk, u_ram;
	uint8_t u_type;
};

static const bi_key *key_set(bi_key *k, uint64_t obj, uint8_t type, uint64_t off)
{
	k->objectid = obj;
	k->type = type;
	k->offset = off;
	return k;
}

/*
 * Start @it so that its first item is the last one <= @target. The path
 * follows the last node pointer <= target at every level, so that item is
 * in the leaf reached, just before the first item >= target: stepping back
 * one slot returns it. A log overlay merges other items in, so then start at
 * @fallback (a key known to be <= that item) instead; callers skip forward.
 */
static int iter_floor(struct btrfsimg_fs *fs, struct bi_iter *it, const struct bi_root *root,
		      const bi_key *target, const bi_key *fallback, const bi_key *max)
{
	if (bi_overlay_for(fs, root->id))
		return bi_iter_start(fs, it, root, fallback, max);
	int rc = bi_iter_start(fs, it, root, target, max);
	if (rc < 0)
		return rc;
	const struct bi_block *leaf = it->p.nodes[0];
	uint32_t s = it->p.slots[0];
	if (s < leaf->nritems) {
		bi_key k;
		bi_key_read(leaf->data + HDR_SIZE + (size_t)s * ITEM_SIZE, &k);
		if (bi_key_cmp(&k, target) == 0)
			return 0;
	}
	if (s > 0)
		it->p.slots[0] = s - 1;
	return 0;
}

static void cursor_drop(struct bi_file *f)
{
	if (f->live)
		bi_iter_end(&f->it);
	f->live = false;
	f->have_cur = f->have_nxt = false;
}

static int keep_inline(struct bi_file *f, const struct bi_extent *e)
{
	if (!f->inl_raw) {
		f->inl_raw = malloc(f->fs->nodesize);
		f->inl = malloc(f->fs->sectorsize);
		if (!f->inl_raw || !f->inl)
			return bi_err(f->fs, -ENOMEM, "out of memory for an inline extent");
	}
	if (e->inline_size > f->fs->nodesize)
		return bi_err(f->fs, -EUCLEAN, "inline extent of %u bytes in a %u-byte leaf",
			      e->inline_size, f->fs->nodesize);
	memcpy(f->inl_raw, e->inline_data, e->inline_size);
	f->inl_raw_len = e->inline_size;
	f->inl_ready = false;
	return 0;
}

/* Next EXTENT_DATA item of the inode into *e; *have false at the end. */
static int fetch(struct bi_file *f, struct bi_extent *e, bool *have)
{
	struct bi_item item;
	int rc;
	*have = false;
	while ((rc = bi_iter_next(&f->it, &item)) > 0) {
		if (item.key.objectid == f->ino && item.key.type == KT_EXTENT_DATA)
			break;
	}
	if (rc <= 0)
		return rc;
	char why[256];
	rc = bi_extent_parse(item.data, item.size, item.key.offset, f->fs->sectorsize, e, why,
			     sizeof(why));
	if (rc < 0)
		return bi_item_err(f->fs, -EUCLEAN, "leaf", f->subvol, item.block, item.slot,
				   "file extent (ino %" PRIu64 " offset %" PRIu64 "): %s", f->ino,
				   item.key.offset, why);
	if (e->kind == BI_EXT_INLINE && (rc = keep_inline(f, e)) < 0)
		return rc;
	*have = true;
	return 0;
}

static void note_overlap(struct bi_file *f)
{
	if (f->have_cur && f->have_nxt && f->cur.end > f->nxt.file_offset)
		bi_damage(f->fs,
			  "overlapping file extents: subvol=%" PRIu64 " inode=%" PRIu64
			  ", item at %" PRIu64 " ends at %" PRIu64
			  " after the next item's start %" PRIu64 "; the later item wins",
			  f->subvol, f->ino, f->cur.file_offset, f->cur.end, f->nxt.file_offset);
}

static int cursor_seek(struct bi_file *f, uint64_t pos)
{
	cursor_drop(f);
	bi_key target, fallback, max;
	key_set(&target, f->ino, KT_EXTENT_DATA, pos);
	key_set(&fallback, f->ino, KT_EXTENT_DATA, 0);
	key_set(&max, f->ino, KT_EXTENT_DATA, UINT64_MAX);
	int rc = iter_floor(f->fs, &f->it, &f->root, &target, &fallback, &max);
	if (rc < 0)
		return rc;
	f->live = true;
	f->from = pos;
	rc = fetch(f, &f->cur, &f->have_cur);
	if (rc == 0 && f->have_cur)
		rc = fetch(f, &f->nxt, &f->have_nxt);
	if (rc < 0) {
		cursor_drop(f);
		return rc;
	}
	note_overlap(f);
	return 0;
}

static int cursor_advance(struct bi_file *f)
{
	uint64_t stop = f->cur.end;
	if (f->have_nxt && f->nxt.file_offset < stop)
		stop = f->nxt.file_offset;
	if (stop > f->from)
		f->from = stop;
	f->cur = f->nxt;
	f->have_cur = f->have_nxt;
	f->have_nxt = false;
	if (!f->have_cur)
		return 0;
	int rc = fetch(f, &f->nxt, &f->have_nxt);
	if (rc < 0) {
		cursor_drop(f);
		return rc;
	}
	note_overlap(f);
	return 0;
}

/* ----------------------------------------------------------- checksums */

/* [*start, *end) of logical space a csum item covers; -EUCLEAN if it does
 * not hold whole checksums of whole sectors. */
static int csum_item_range(struct bi_file *f, const struct bi_item *item, uint64_t *start,
			   uint64_t *end)
{
	struct btrfsimg_fs *fs = f->fs;
	const uint32_t ss = fs->sectorsize, cs = fs->csum_size;
	*start = item->key.offset;
	if (*start % ss == 0 && item->size % cs == 0 && item->size <= fs->nodesize &&
	    bi_add_ok(*start, (uint64_t)(item->size / cs) * ss, end))
		return 0;
	return bi_item_err(fs, -EUCLEAN, "leaf", 7, item->block, item->slot,
			   "csum item at %" PRIu64
			   " of %u bytes, expect whole %u-byte checksums of %u-byte sectors",
			   *start, item->size, cs, ss);
}

/* Make the window hold the csum item covering @logical, or the gap up to
 * the next item. The item covering it starts at most one leaf's worth of
 * checksums earlier, which bounds the walk where the floor step is off. */
static int csum_load(struct bi_file *f, uint64_t logical)
{
	struct btrfsimg_fs *fs = f->fs;
	const uint32_t ss = fs->sectorsize, cs = fs->csum_size;
	if (cs == 0 || cs > CSUM_SIZE_MAX)
		return bi_err(fs, -EOPNOTSUPP, "data checksums of type %d not supported",
			      fs->csum_type);
	if (!f->csum_found) {
		int rc = bi_root_find(fs, OBJ_CSUM_TREE, &f->csum_root);
		if (rc < 0)
			return rc;
		f->csum_found = true;
	}
	uint64_t reach = (uint64_t)(fs->nodesize - HDR_SIZE - ITEM_SIZE) / cs * ss;
	bi_key target, fallback, max;
	key_set(&target, OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, logical);
	key_set(&fallback, OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, logical > reach ? logical - reach : 0);
	key_set(&max, OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, UINT64_MAX);
	struct bi_iter it;
	struct bi_item item;
	f->win_start = logical;
	f->win_end = UINT64_MAX;
	f->win_has = false;
	int rc = iter_floor(fs, &it, &f->csum_root, &target, &fallback, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		uint64_t start = 0, end = 0;
		if (item.key.objectid != OBJ_EXTENT_CSUM || item.key.type != KT_EXTENT_CSUM)
			continue;
		if ((rc = csum_item_range(f, &item, &start, &end)) < 0)
			break;
		if (start > logical) {
			f->win_end = start;
			rc = 0;
			break;
		}
		if (end > logical) {
			memcpy(f->win, item.data, item.size);
			f->win_start = start;
			f->win_end = end;
			f->win_has = true;
			rc = 0;
			break;
		}
	}
	bi_iter_end(&it);
	if (rc < 0)
		f->win_start = f->win_end = 0;
	return rc < 0 ? rc : 0;
}

/* *want: the stored checksum of the sector at @logical, or NULL if none. */
static int csum_lookup(struct bi_file *f, uint64_t logical, const uint8_t **want)
{
	if (logical < f->win_start || logical >= f->win_end) {
		int rc = csum_load(f, logical);
		if (rc < 0)
			return rc;
	}
	*want = f->win_has ? f->win + (logical - f->win_start) / f->fs->sectorsize *
					      f->fs->csum_size
			   : NULL;
	return 0;
}

/* 1: the sector matches (or has no checksum); 0: mismatch (have filled). */
static int sector_ok(struct bi_file *f, uint64_t logical, const uint8_t *data,
		     uint8_t have[CSUM_SIZE_MAX], const uint8_t **want)
{
	int rc = csum_lookup(f, logical, want);
	if (rc < 0)
		return rc;
	if (!*want)
		return 1;
	bi_csum(f->fs->csum_type, data, f->fs->sectorsize, have);
	return memcmp(have, *want, f->fs->csum_size) == 0;
}

/* ---------------------------------------------------------- data reads */

/* Where a read is, for messages. */
struct where {
	uint64_t fpos;		/* file offset of the first byte */
	bool compressed;	/* fpos is the extent item's offset */
};

static int csum_mismatch(struct bi_file *f, uint64_t logical, uint64_t fpos, const struct where *w,
			 const uint8_t *have, const uint8_t *want, int ncopies)
{
	char h[2 * CSUM_SIZE_MAX + 1], x[2 * CSUM_SIZE_MAX + 1];
	btrfsimg_hex(have, f->fs->csum_size, h, sizeof(h));
	btrfsimg_hex(want, f->fs->csum_size, x, sizeof(x));
	return bi_err(f->fs, -EIO,
		      "data checksum mismatch: subvol=%" PRIu64 " inode=%" PRIu64
		      " file offset=%" PRIu64 "%s logical=%" PRIu64
		      ", have 0x%s expect 0x%s, no good copy among %d",
		      f->subvol, f->ino, fpos, w->compressed ? " (compressed extent)" : "", logical,
		      h, x, ncopies);
}

static void damage_sector(struct bi_file *f, uint64_t logical, uint64_t fpos,
			  const struct where *w, const uint8_t *have, const uint8_t *want, int bad,
			  int good, int ncopies)
{
	char h[2 * CSUM_SIZE_MAX + 1], x[2 * CSUM_SIZE_MAX + 1];
	btrfsimg_hex(have, f->fs->csum_size, h, sizeof(h));
	btrfsimg_hex(want, f->fs->csum_size, x, sizeof(x));
	bi_damage(f->fs,
		  "data checksum mismatch: subvol=%" PRIu64 " inode=%" PRIu64
		  " file offset=%" PRIu64 "%s logical=%" PRIu64
		  " copy %d/%d, have 0x%s expect 0x%s; read from copy %d",
		  f->subvol, f->ino, fpos, w->compressed ? " (compressed extent)" : "", logical,
		  bad + 1, ncopies, h, x, good + 1);
}

/* Replace the sector at @logical (mismatched on copy @bad, or unread if
 * @bad < 0) with the first other copy that reads and matches. */
static int repair(struct bi_file *f, uint64_t logical, uint8_t *dst, int bad, uint64_t fpos,
		  const struct where *w)
{
	struct btrfsimg_fs *fs = f->fs;
	int ncopies = bi_num_copies(fs, logical), read_rc = 0, rc;
	uint8_t have[CSUM_SIZE_MAX], first[CSUM_SIZE_MAX];
	const uint8_t *want = NULL;
	bool mismatch = bad >= 0;
	if (mismatch && (rc = sector_ok(f, logical, dst, first, &want)) < 0)
		return rc;
	for (int copy = 0; copy < ncopies; copy++) {
		if (copy == bad)
			continue;
		rc = bi_read_copy(fs, logical, f->sector, fs->sectorsize, copy);
		if (rc < 0) {
			read_rc = rc;
			continue;
		}
		rc = f->verify ? sector_ok(f, logical, f->sector, have, &want) : 1;
		if (rc < 0)
			return rc;
		if (rc == 0) {
			if (!mismatch)
				memcpy(first, have, sizeof(first));
			mismatch = true;
			continue;
		}
		memcpy(dst, f->sector, fs->sectorsize);
		if (bad >= 0)
			damage_sector(f, logical, fpos, w, first, want, bad, copy, ncopies);
		return 0;
	}
	if (mismatch)
		return csum_mismatch(f, logical, fpos, w, first, want, ncopies);
	return bi_err(fs, read_rc ? read_rc : -EIO,
		      "cannot read data: subvol=%" PRIu64 " inode=%" PRIu64 " file offset=%" PRIu64
		      " logical=%" PRIu64 ": %.600s",
		      f->subvol, f->ino, fpos, logical, fs->err);
}

/* Read whole sectors [logical, +len) into @dst, checked against their
 * checksums; bad sectors come from other copies. */
static int read_sectors(struct bi_file *f, uint64_t logical, uint8_t *dst, size_t len,
			const struct where *w)
{
	struct btrfsimg_fs *fs = f->fs;
	const uint32_t ss = fs->sectorsize;
	int ncopies = bi_num_copies(fs, logical), used = -1;
	for (int copy = 0; copy < ncopies && used < 0; copy++) {
		int rc = bi_read_copy(fs, logical, dst, len, copy);
		if (rc == 0)
			used = copy;
		else if (copy + 1 < ncopies && !bi_copy_missing(fs, logical, copy)) /* said at open */
			bi_damage(fs,
				  "cannot read data: subvol=%" PRIu64 " inode=%" PRIu64
				  " logical=%" PRIu64 " copy %d/%d: %.600s; trying the next copy",
				  f->subvol, f->ino, logical, copy + 1, ncopies, fs->err);
	}
	if (used >= 0 && !f->verify)
		return 0;
	for (size_t i = 0; i < len; i += ss) {
		uint64_t fpos = w->compressed ? w->fpos : w->fpos + i;
		uint8_t have[CSUM_SIZE_MAX];
		const uint8_t *want;
		if (used >= 0) {
			int rc = sector_ok(f, logical + i, dst + i, have, &want);
			if (rc < 0)
				return rc;
			if (rc)
				continue;
		}
		int rc = repair(f, logical + i, dst + i, used, fpos, w);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Uncompressed bytes at any alignment: partial sectors go through scratch. */
static int read_disk(struct bi_file *f, uint64_t logical, uint8_t *dst, uint64_t len,
		     uint64_t fpos)
{
	const uint32_t ss = f->fs->sectorsize;
	while (len) {
		uint64_t off = logical % ss, n;
		int rc;
		if (off || len < ss) {
			n = ss - off < len ? ss - off : len;
			struct where w = { fpos - off, false };
			rc = read_sectors(f, logical - off, f->sector, ss, &w);
			if (rc == 0)
				memcpy(dst, f->sector + off, n);
		} else {
			n = len - len % ss;
			struct where w = { fpos, false };
			rc = read_sectors(f, logical, dst, n, &w);
		}
		if (rc < 0)
			return rc;
		logical += n;
		dst += n;
		fpos += n;
		len -= n;
	}
	return 0;
}

static int decode_error(struct bi_file *f, int rc, uint64_t fpos, uint64_t logical,
			const char *why)
{
	return bi_err(f->fs, rc == -EOPNOTSUPP ? rc : -EUCLEAN,
		      "corrupt compressed data: subvol=%" PRIu64 " inode=%" PRIu64
		      " file offset=%" PRIu64 " logical=%" PRIu64 ", %s",
		      f->subvol, f->ino, fpos, logical, why);
}

static int ensure_zbufs(struct bi_file *f)
{
	if (!f->z)
		f->z = bi_zctx_new();
	if (!f->zbuf)
		f->zbuf = malloc(MAX_COMPRESSED);
	if (!f->ubuf)
		f->ubuf = malloc(MAX_UNCOMPRESSED);
	if (!f->z || !f->zbuf || !f->ubuf)
		return bi_err(f->fs, -ENOMEM, "out of memory for decompression");
	return 0;
}

/* Read and decode the whole compressed extent of @e into ubuf. */
static int ensure_decoded(struct bi_file *f, const struct bi_extent *e)
{
	if (f->u_valid && f->u_bytenr == e->disk_bytenr && f->u_disk == e->disk_num_bytes &&
	    f->u_ram == e->ram_bytes && f->u_type == e->compression)
		return 0;
	f->u_valid = false;
	int rc = ensure_zbufs(f);
	if (rc < 0)
		return rc;
	struct where w = { e->file_offset, true };
	rc = read_sectors(f, e->disk_bytenr, f->zbuf, e->disk_num_bytes, &w);
	if (rc < 0)
		return rc;
	size_t got = 0;
	char why[256];
	rc = bi_decompress(f->z, e->compression, f->zbuf, e->disk_num_bytes, f->ubuf,
			   e->ram_bytes, f->fs->sectorsize, &got, why, sizeof(why));
	if (rc < 0)
		return decode_error(f, rc, e->file_offset, e->disk_bytenr, why);
	memset(f->ubuf + got, 0, e->ram_bytes - got);
	f->u_valid = true;
	f->u_bytenr = e->disk_bytenr;
	f->u_disk = e->disk_num_bytes;
	f->u_ram = e->ram_bytes;
	f->u_type = e->compression;
	return 0;
}

static int ensure_inline(struct bi_file *f, const struct bi_extent *e)
{
	if (f->inl_ready)
		return 0;
	const uint32_t ss = f->fs->sectorsize;
	size_t got = e->ram_bytes;
	if (e->compression == COMPRESS_NONE) {
		memcpy(f->inl, f->inl_raw, e->ram_bytes);
	} else {
		char why[256];
		int rc = ensure_zbufs(f);
		if (rc == 0)
			rc = bi_decompress(f->z, e->compression, f->inl_raw, f->inl_raw_len, f->inl,
					   e->ram_bytes, ss, &got, why, sizeof(why));
		if (rc == -ENOMEM)
			return rc;
		if (rc < 0)
			return bi_err(f->fs, rc == -EOPNOTSUPP ? rc : -EUCLEAN,
				      "corrupt compressed inline extent: subvol=%" PRIu64
				      " inode=%" PRIu64 ", %s",
				      f->subvol, f->ino, why);
	}
	memset(f->inl + got, 0, ss - got);
	f->inl_ready = true;
	return 0;
}

static int fill_piece(struct bi_file *f, const struct bi_piece *p, uint8_t *dst)
{
	int rc = 0;
	switch (p->kind) {
	case BI_EXT_ZERO:
		memset(dst, 0, p->len);
		break;
	case BI_EXT_INLINE:
		rc = ensure_inline(f, &f->cur);
		if (rc == 0)
			memcpy(dst, f->inl + p->src, p->len);
		break;
	case BI_EXT_DISK:
		rc = read_disk(f, p->src, dst, p->len, p->pos);
		break;
	case BI_EXT_COMPRESSED:
		rc = ensure_decoded(f, &f->cur);
		if (rc == 0)
			memcpy(dst, f->ubuf + p->src, p->len);
		break;
	}
	return rc;
}

/* Fill dst with file bytes [pos, end); end <= i_size. */
static int read_range(struct bi_file *f, uint64_t pos, uint8_t *dst, uint64_t end)
{
	const uint64_t base = pos;
	int rc = 0;
	/* Gaps before cur are known zeros; far jumps search afresh. */
	if (!f->live || pos < f->from || (f->have_nxt && pos > f->nxt.end))
		rc = cursor_seek(f, pos);
	while (rc == 0 && pos < end) {
		if (!f->have_cur) {
			memset(dst + (pos - base), 0, end - pos);
			break;
		}
		uint64_t next = f->have_nxt ? f->nxt.file_offset : UINT64_MAX;
		struct bi_piece p[3];
		size_t n = bi_extent_pieces(&f->cur, next, pos, end, p);
		for (size_t i = 0; i < n && rc == 0; i++) {
			rc = fill_piece(f, &p[i], dst + (p[i].pos - base));
			pos = p[i].pos + p[i].len;
		}
		if (rc == 0 && pos < end)
			rc = cursor_advance(f);
	}
	if (rc < 0)
		cursor_drop(f);
	return rc;
}

/* Whether the file extent items that survive cover [pos, stop): an item
 * lost there would overlap one of them, so none was. */
static int items_cover(struct bi_file *f, uint64_t pos, uint64_t stop, bool *covered)
{
	*covered = false;
	while (pos < stop) {
		const struct bi_extent *e;
		uint64_t next;
		int rc = bi_file_extent_at(f, pos, &e, &next);
		if (rc < 0)
			return rc;
		if (!e || e->file_offset > pos)
			return 0;
		pos = e->end; /* past pos: bi_file_extent_at's contract */
	}
	*covered = true;
	return 0;
}

/* The file offsets [*start, *end) whose extent items @l's key range could
 * have held (empty if it holds none of the file's extent keys). */
static void lost_offsets(const struct bi_file *f, const struct bi_lost_keys *l, uint64_t *start,
			 uint64_t *end)
{
	*start = 0;
	*end = UINT64_MAX;
	if (l->lo.objectid == f->ino && l->lo.type > KT_EXTENT_DATA)
		*start = UINT64_MAX;
	else if (l->lo.objectid == f->ino && l->lo.type == KT_EXTENT_DATA)
		*start = l->lo.offset;
	if (!l->unbounded && l->hi.objectid == f->ino && l->hi.type < KT_EXTENT_DATA)
		*end = 0;
	else if (!l->unbounded && l->hi.objectid == f->ino && l->hi.type == KT_EXTENT_DATA)
		*end = l->hi.offset;
	if (*end > f->isize)
		*end = f->isize;
}

/* A file of a tree the salvage rebuilt around a block that did not read
 * (salvage.h): its content is given only if the extent items that survive
 * leave no room for one lost in that block. */
static int whole_after_salvage(struct bi_file *f)
{
	const struct bi_lost_keys *l = NULL;
	while ((l = bi_salvage_lost_next(f->fs, f->subvol, f->ino, l))) {
		uint64_t start, end;
		bool covered;
		lost_offsets(f, l, &start, &end);
		if (start >= end)
			continue;
		int rc = items_cover(f, start, end, &covered);
		if (rc < 0)
			return rc;
		if (!covered)
			return bi_err(f->fs, -EIO,
				      "inode %" PRIu64 " of subvolume %" PRIu64 ": bytes %" PRIu64
				      "-%" PRIu64 " may have had file extents in a tree block lost on "
				      "every copy (between keys (%" PRIu64 " %u %" PRIu64 ") and (%"
				      PRIu64 " %u %" PRIu64 ")%s of the rebuilt tree): content not given",
				      f->ino, f->subvol, start, end, l->lo.objectid, l->lo.type,
				      l->lo.offset, l->hi.objectid, l->hi.type, l->hi.offset,
				      l->unbounded ? " or after" : "");
	}
	return 0;
}

int bi_file_open(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t ino, struct bi_file **out)
{
	*out = NULL;
	struct bi_root root;
	int rc = bi_root_find(fs, subvol, &root);
	if (rc < 0)
		return rc;
	bi_key k;
	uint8_t *data = NULL;
	uint32_t size = 0;
	rc = bi_tree_get(fs, &root, key_set(&k, ino, KT_INODE_ITEM, 0), &data, &size);
	if (rc == -ENOENT)
		return bi_err(fs, rc, "no inode %" PRIu64 " in subvolume %" PRIu64, ino, subvol);
	if (rc < 0)
		return rc;
	struct btrfsimg_inode inode;
	char why[160];
	rc = bi_inode_parse(data, size, subvol, ino, fs->sb.info.generation + 1, &inode, why,
			    sizeof(why));
	free(data);
	if (rc < 0)
		return bi_err(fs, -EUCLEAN,
			      "corrupt inode item: root=%" PRIu64 " ino=%" PRIu64 ", %s", subvol,
			      ino, why);
	if (S_ISDIR(inode.mode))
		return bi_err(fs, -EINVAL,
			      "inode %" PRIu64 " of subvolume %" PRIu64 " is a directory", ino,
			      subvol);
	struct bi_file *f = calloc(1, sizeof(*f));
	if (f) {
		f->sector = malloc(fs->sectorsize);
		f->win = malloc(fs->nodesize);
	}
	if (!f || !f->sector || !f->win) {
		bi_file_close(f);
		return bi_err(fs, -ENOMEM, "out of memory opening inode %" PRIu64, ino);
	}
	f->fs = fs;
	f->subvol = subvol;
	f->ino = ino;
	f->root = root;
	f->isize = inode.size;
	f->nodatasum = (inode.flags & INODE_NODATASUM) != 0;
	f->verify = !(fs->opts.flags & BTRFSIMG_OPEN_NO_DATA_VERIFY) && !f->nodatasum;
	rc = whole_after_salvage(f);
	if (rc < 0) {
		bi_file_close(f);
		return rc;
	}
	*out = f;
	return 0;
}

void bi_file_close(struct bi_file *f)
{
	if (!f)
		return;
	cursor_drop(f);
	bi_zctx_free(f->z);
	free(f->zbuf);
	free(f->ubuf);
	free(f->inl_raw);
	free(f->inl);
	free(f->win);
	free(f->sector);
	free(f);
}

uint64_t bi_file_size(const struct bi_file *f)
{
	return f->isize;
}

int bi_file_pread(struct bi_file *f, uint64_t offset, void *buf, size_t len, size_t *got)
{
	*got = 0;
	if (offset >= f->isize || len == 0)
		return 0;
	uint64_t n = f->isize - offset < len ? f->isize - offset : len;
	int rc = read_range(f, offset, buf, offset + n);
	if (rc < 0)
		return rc;
	*got = (size_t)n;
	return 0;
}

int bi_file_stream(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t ino, uint64_t offset,
		   uint64_t len, bi_data_fn fn, void *ctx)
{
	struct bi_file *f;
	int rc = bi_file_open(fs, subvol, ino, &f);
	if (rc < 0)
		return rc;
	uint8_t *buf = malloc(STREAM_CHUNK);
	if (!buf)
		rc = bi_err(fs, -ENOMEM, "out of memory streaming inode %" PRIu64, ino);
	uint64_t end = f->isize;
	if (offset < end && len < end - offset)
		end = offset + len;
	for (uint64_t pos = offset; rc == 0 && pos < end;) {
		size_t n = end - pos < STREAM_CHUNK ? (size_t)(end - pos) : STREAM_CHUNK;
		rc = read_range(f, pos, buf, pos + n);
		if (rc == 0)
			rc = fn(ctx, pos, buf, n);
		pos += n;
	}
	free(buf);
	bi_file_close(f);
	return rc;
}

/* Like read_range, but only finds where the next bytes extents give lie:
 * pieces that read as zeros (holes, prealloc, an inline tail, the span
 * past the last item) are stepped over whole, one per extent item, and
 * adjacent data pieces are one run, so the cost follows the items, never
 * i_size, and a dense file of small extents is one range. */
int bi_file_next_data(struct bi_file *f, uint64_t pos, uint64_t *start, uint64_t *end)
{
	const uint64_t stop = f->isize;
	int rc = 0;
	if (pos >= stop)
		return -ENXIO;
	if (!f->live || pos < f->from || (f->have_nxt && pos > f->nxt.end))
		rc = cursor_seek(f, pos);
	bool in = false; /* inside a run of data pieces: [*start, *end) */
	while (rc == 0 && f->have_cur && pos < stop) {
		uint64_t next = f->have_nxt ? f->nxt.file_offset : UINT64_MAX;
		struct bi_piece p[3];
		size_t n = bi_extent_pieces(&f->cur, next, pos, stop, p);
		for (size_t i = 0; i < n; i++) {
			if (p[i].kind == BI_EXT_ZERO && in)
				return 0; /* adjacent extents make one run, as SEEK_HOLE */
			if (p[i].kind != BI_EXT_ZERO) {
				*start = in ? *start : p[i].pos;
				*end = p[i].pos + p[i].len;
				in = true;
			}
			pos = p[i].pos + p[i].len;
		}
		if (pos < stop)
			rc = cursor_advance(f);
	}
	if (rc < 0) {
		cursor_drop(f);
		return rc;
	}
	return in ? 0 : -ENXIO;
}

int bi_file_extent_at(struct bi_file *f, uint64_t pos, const struct bi_extent **e,
		      uint64_t *next)
{
	int rc = 0;
	*e = NULL;
	if (!f->live || pos < f->from || (f->have_nxt && pos > f->nxt.end))
		rc = cursor_seek(f, pos);
	while (rc == 0 && f->have_cur) {
		uint64_t nx = f->have_nxt ? f->nxt.file_offset : UINT64_MAX;
		uint64_t stop = f->cur.end < nx ? f->cur.end : nx;
		if (pos < stop)
			break;
		rc = cursor_advance(f);
	}
	if (rc < 0) {
		cursor_drop(f);
		return rc;
	}
	if (f->have_cur) {
		*e = &f->cur;
		*next = f->have_nxt ? f->nxt.file_offset : UINT64_MAX;
	}
	return 0;
}

bool bi_file_nodatasum(const struct bi_file *f)
{
	return f->nodatasum;
}

/* One step per csum item or gap between items: the window is the item
 * covering a position, or the gap up to the next item. */
int bi_file_csum_bytes(struct bi_file *f, uint64_t logical, uint64_t len, uint64_t *covered)
{
	*covered = 0;
	uint64_t end;
	if (!bi_add_ok(logical, len, &end))
		return bi_err(f->fs, -EUCLEAN, "extent at logical %" PRIu64 " of %" PRIu64
				" bytes wraps around", logical, len);
	for (uint64_t pos = logical; pos < end;) {
		if (pos < f->win_start || pos >= f->win_end) {
			int rc = csum_load(f, pos);
			if (rc < 0)
				return rc;
		}
		if (f->win_end <= pos) /* cannot happen after a load; never loop */
			return bi_err(f->fs, -EUCLEAN, "csum window stuck at %" PRIu64, pos);
		uint64_t stop = f->win_end < end ? f->win_end : end;
		if (f->win_has)
			*covered += stop - pos;
		pos = stop;
	}
	return 0;
}

uint64_t bi_devices_bytes(const struct btrfsimg_fs *fs)
{
	uint64_t bytes = 0;
	for (size_t i = 0; i < fs->ndevs; i++)
		bytes = fs->devs[i].size > UINT64_MAX - bytes ? UINT64_MAX : bytes + fs->devs[i].size;
	return bytes;
}

uint64_t bi_size_bound(const struct btrfsimg_fs *fs)
{
	uint64_t bytes = bi_devices_bytes(fs);
	return bytes > (UINT64_MAX >> 4) ? UINT64_MAX
	       : bytes < (1ull << 26)	 ? 1ull << 30
					 : bytes << 4;
}

uint64_t btrfsimg_file_size_bound(btrfsimg_fs *fs)
{
	return fs && bi_opened(fs, __func__) ? bi_size_bound(fs) : 0;
}

int btrfsimg_file_length(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid, uint64_t *len,
			 uint64_t *data_end)
{
	if (!fs || !len || !data_end)
		return -EINVAL;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	struct bi_file *f;
	int rc = bi_file_open(fs, subvol, objectid, &f);
	if (rc < 0)
		return rc;
	uint64_t bound = bi_size_bound(fs), start;
	*len = *data_end = f->isize;
	if (f->isize > bound) {
		*data_end = 0;
		while ((rc = bi_file_next_data(f, *data_end, &start, data_end)) == 0)
			;
		*len = *data_end < bound ? *data_end : bound;
		rc = rc == -ENXIO ? 1 : rc;
	}
	bi_file_close(f);
	return rc;
}

int btrfsimg_file_data(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid, uint64_t offset,
		       uint64_t *start, uint64_t *end)
{
	if (!fs || !start || !end)
		return -EINVAL;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	struct bi_file *f;
	int rc = bi_file_open(fs, subvol, objectid, &f);
	if (rc < 0)
		return rc;
	rc = bi_file_next_data(f, offset, start, end);
	bi_file_close(f);
	return rc;
}

int btrfsimg_file_read(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid, uint64_t offset,
		       void *buf, size_t len, size_t *got)
{
	if (!fs || !got || (!buf && len))
		return -EINVAL;
	*got = 0;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	struct bi_file *f;
	int rc = bi_file_open(fs, subvol, objectid, &f);
	if (rc < 0)
		return rc;
	rc = bi_file_pread(f, offset, buf, len, got);
	bi_file_close(f);
	return rc;
}

int btrfsimg_readlink(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid, uint8_t **out,
		      size_t *len)
{
	if (!fs || !out || !len)
		return -EINVAL;
	*out = NULL;
	*len = 0;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	struct btrfsimg_inode ino;
	int rc = btrfsimg_inode_get(fs, subvol, objectid, &ino);
	if (rc == 0 && !S_ISLNK(ino.mode))
		rc = bi_err(fs, -EINVAL,
			    "inode %" PRIu64 " of subvolume %" PRIu64
			    " is not a symlink (mode 0%o)",
			    objectid, subvol, ino.mode);
	if (rc < 0)
		return rc;
	/* The target is the file's first i_size bytes (an inline extent, maybe
	 * compressed: bi_file_pread decodes it), cut at PAGE_SIZE - 1. */
	size_t want = ino.size < SYMLINK_MAX ? (size_t)ino.size : SYMLINK_MAX, got = 0;
	uint8_t *buf = malloc(want + 1);
	struct bi_file *f = NULL;
	if (!buf)
		return bi_err(fs, -ENOMEM, "out of memory reading a symlink");
	rc = bi_file_open(fs, subvol, objectid, &f);
	if (rc == 0)
		rc = bi_file_pread(f, 0, buf, want, &got);
	bi_file_close(f);
	if (rc == 0 && got != want)
		rc = bi_err(fs, -EUCLEAN,
			    "symlink %" PRIu64 " of subvolume %" PRIu64
			    ": read %zu bytes, expect %zu",
			    objectid, subvol, got, want);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	buf[want] = '\0';
	*out = buf;
	*len = want;
	return 0;
}
