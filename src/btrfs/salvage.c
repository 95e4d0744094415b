/* SPDX-License-Identifier: MIT */
/*
 * Salvage: opening a filesystem whose way in is gone (no valid superblock,
 * no readable chunk tree, no readable root tree), from the tree blocks the
 * scan found on the devices (salvage_scan.c). Nothing is written anywhere.
 *
 * The blocks are attacker-controlled by definition, so nothing rebuilt is
 * used on the word of one block:
 *   - a chunk mapping is a candidate until the tree blocks it covers say
 *     where they are: a block whose header bytenr the mapping puts exactly
 *     where the block was found supports it, one it puts elsewhere counts
 *     against it; the best supported, then the newest, wins a range;
 *   - a root-tree root is used only when its whole tree reads through the
 *     map, and never one newer than a surviving superblock;
 *   - a tree's newer root found by scanning replaces what an older root
 *     tree names only when it verifies where that map reads it.
 * Every fallback taken is announced with bi_damage, which the CLI prints
 * and counts (exit 1: results despite damage).
 *
 * It sits in the btrfs core beside the open sequence (open.c calls it in
 * the middle of its steps), below the file layer.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/salvage.h"

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/chunk.h"
#include "btrfs/root.h"
#include "btrfs/salvage_scan.h"
#include "btrfs/tree.h"
#include "btrfs/tree_checker.h"
#include "image/dev.h"

/* ------------------------------------------------------------ the scan */

int bi_salvage_scan(struct btrfsimg_fs *fs)
{
	if (fs->scan)
		return 0;
	bool known = fs->sb.info.generation != 0 && !fs->salvage_super;
	int rc = bi_sv_scan_devices(fs, known, &fs->scan);
	if (rc == 0)
		fs->salvage_fsidx = 0;
	if (rc == 0)
		rc = bi_salvage_place(fs, fs->scan);
	return rc;
}

void btrfsimg_set_scan_progress(btrfsimg_fs *fs, int (*fn)(void *ctx, uint64_t done, uint64_t total),
				void *ctx)
{
	if (!fs)
		return;
	fs->scan_progress = fn;
	fs->scan_progress_ctx = ctx;
}

/* The blocks of tree @owner in the filesystem in use: [*lo, *hi) of the
 * index (newest generation first). */
void bi_salvage_owner_range(const struct bi_sv_scan *s, unsigned fsidx, uint64_t owner,
			    size_t *lo, size_t *hi)
{
	size_t a = 0, b = s->n;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		const struct bi_sv_blk *x = &s->blk[m];
		if (x->fsidx < fsidx || (x->fsidx == fsidx && x->owner < owner))
			a = m + 1;
		else
			b = m;
	}
	*lo = a;
	while (a < s->n && s->blk[a].fsidx == fsidx && s->blk[a].owner == owner)
		a++;
	*hi = a;
}

/* ------------------------------------------------------------ superblock */

/* "fsid (N blocks, generations A-B), ..." of every filesystem found. */
static void list_found(const struct bi_sv_scan *s, char *out, size_t len)
{
	size_t at = 0;
	out[0] = '\0';
	for (unsigned i = 0; i < s->nfs && at < len; i++) {
		char u[37];
		bi_uuid_str(s->fss[i].fsid, u);
		int w = snprintf(out + at, len - at,
				 "%s%s (%" PRIu64 " blocks, generations %" PRIu64 "-%" PRIu64 ")",
				 i ? ", " : "", u, s->fss[i].nblocks, s->fss[i].gen_min,
				 s->fss[i].gen_max);
		if (w < 0)
			break;
		at += (size_t)w;
	}
	if (!s->nfs)
		snprintf(out, len, "none");
}

/* The filesystem --fsid names, or with none given the one with the most
 * blocks; the others are said. -ENOENT (no such fsid found) or -EINVAL
 * (the prefix names several) with the list of what was found. */
static int pick_fs(struct btrfsimg_fs *fs, const struct bi_sv_scan *s, const char *was)
{
	int best = -1, matches = 0;
	for (unsigned i = 0; i < s->nfs; i++) {
		bool want = bi_sv_fsid_wanted(fs, s->fss[i].fsid);
		matches += want;
		if (want && (best < 0 || s->fss[i].nblocks > s->fss[best].nblocks))
			best = (int)i;
	}
	if (matches != 1 && fs->want_fsid[0]) {
		char list[512];
		list_found(s, list, sizeof(list));
		return bi_err(fs, matches ? -EINVAL : -ENOENT,
			      "%s; --fsid %s: %s on the devices; the filesystems found: %s", was,
			      fs->want_fsid, matches ? "names several filesystems" : "no such filesystem",
			      list);
	}
	for (unsigned i = 0; i < s->nfs; i++) {
		char u[37];
		if ((int)i == best)
			continue;
		bi_uuid_str(s->fss[i].fsid, u);
		bi_damage(fs,
			  "salvage: another filesystem's tree blocks are on the devices too: fsid %s, "
			  "%" PRIu64 " blocks of generations %" PRIu64 "-%" PRIu64 "; not read",
			  u, s->fss[i].nblocks, s->fss[i].gen_min, s->fss[i].gen_max);
	}
	return best;
}

/* The newest root candidate of @owner: the highest level of its newest
 * generation (index order). */
static const struct bi_sv_blk *newest_root(const struct bi_sv_scan *s, unsigned fsidx,
					     uint64_t owner)
{
	size_t lo, hi;
	bi_salvage_owner_range(s, fsidx, owner, &lo, &hi);
	return lo < hi ? &s->blk[lo] : NULL;
}

/* The sector size the chunk items record (io_align and sector_size), from
 * the newest chunk-tree leaf that holds one; 4096 if none does. */
static uint32_t find_sectorsize(struct btrfsimg_fs *fs, const struct bi_sv_scan *s, unsigned fsidx,
				uint8_t *buf)
{
	size_t lo, hi;
	bi_salvage_owner_range(s, fsidx, OBJ_CHUNK_TREE, &lo, &hi);
	for (size_t i = lo; i < hi; i++) {
		const struct bi_sv_blk *b = &s->blk[i];
		if (b->level != 0 || bi_sv_scan_reread(fs, s, b, buf) < 0)
			continue;
		for (uint32_t k = 0; k < b->nritems; k++) {
			const uint8_t *it = buf + HDR_SIZE + (size_t)k * ITEM_SIZE;
			if (it[8] != KT_CHUNK_ITEM || bi_le32(it + ITEM_DSIZE) < CHUNK_SIZE)
				continue;
			uint32_t ss = bi_le32(buf + HDR_SIZE + bi_le32(it + ITEM_OFFSET) +
					      CHUNK_SECTOR_SIZE);
			if (ss >= 4096 && ss <= s->fss[fsidx].nodesize && !(ss & (ss - 1)))
				return ss;
		}
	}
	return 4096;
}

int bi_salvage_super(struct btrfsimg_fs *fs, const char *why)
{
	char was[sizeof(fs->err)];
	snprintf(was, sizeof(was), "%s", why);
	fs->salvage_super = true;
	int rc = bi_salvage_scan(fs);
	if (rc < 0)
		return rc;
	struct bi_sv_scan *s = fs->scan;
	if (s->nfs == 0)
		return bi_err(fs, -EUCLEAN, "%s; a scan of %" PRIu64 " bytes found no btrfs tree block",
			      was, s->bytes);
	int picked = pick_fs(fs, s, was);
	if (picked < 0)
		return picked;
	unsigned fi = (unsigned)picked;
	fs->salvage_fsidx = fi;
	const struct bi_sv_fs *f = &s->fss[fi];
	const struct bi_sv_blk *rt = newest_root(s, fi, OBJ_ROOT_TREE);
	const struct bi_sv_blk *ct = newest_root(s, fi, OBJ_CHUNK_TREE);
	char u[37];
	bi_uuid_str(f->fsid, u);
	if (!rt)
		return bi_err(fs, -EUCLEAN,
			      "%s; filesystem %s: %" PRIu64 " tree blocks found, none of the root tree",
			      was, u, f->nblocks);
	uint8_t *buf = malloc(f->nodesize);
	if (!buf)
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	struct btrfsimg_super_info *i = &fs->sb.info;
	memset(&fs->sb, 0, sizeof(fs->sb));
	memcpy(i->fsid, f->fsid, 16);
	memcpy(i->metadata_uuid, f->fsid, 16);
	i->nodesize = f->nodesize;
	i->csum_type = (uint16_t)f->csum_type;
	i->sectorsize = i->stripesize = find_sectorsize(fs, s, fi, buf);
	free(buf);
	i->generation = rt->generation;
	i->root = rt->bytenr;
	i->root_level = rt->level;
	i->root_dir_objectid = 6;
	if (ct) {
		i->chunk_root = ct->bytenr;
		i->chunk_root_level = ct->level;
		fs->sb.chunk_root_generation = ct->generation;
	}
	i->mirror_used = -1;
	fs->nodesize = f->nodesize;
	fs->sectorsize = i->sectorsize;
	fs->csum_type = f->csum_type;
	fs->csum_size = (uint32_t)bi_csum_size(f->csum_type);
	memcpy(fs->meta_fsid, f->fsid, 16);
	bi_damage(fs,
		  "no superblock (%s): filesystem %s rebuilt from %" PRIu64
		  " tree blocks (nodesize %u, %s, sectorsize %u, generations %" PRIu64 "-%" PRIu64
		  ")",
		  was, u, f->nblocks, f->nodesize, btrfsimg_csum_name(f->csum_type), i->sectorsize,
		  f->gen_min, f->gen_max);
	return 0;
}

int btrfsimg_set_fsid(btrfsimg_fs *fs, const char *uuid)
{
	if (!fs)
		return -EINVAL;
	if (fs->opened)
		return bi_err(fs, -EINVAL, "btrfsimg_set_fsid: the filesystem is open");
	char hex[sizeof(fs->want_fsid)];
	size_t n = 0;
	for (const char *p = uuid; p && *p; p++) {
		if (*p == '-')
			continue;
		if (!isxdigit((unsigned char)*p) || n + 1 >= sizeof(hex))
			return bi_err(fs, -EINVAL,
				      "--fsid '%s': expect a uuid or its first 8 or more hex digits",
				      uuid);
		hex[n++] = (char)tolower((unsigned char)*p);
	}
	if (uuid && n < 8)
		return bi_err(fs, -EINVAL,
			      "--fsid '%s': %zu hex digits, expect 8 to 32 (a uuid or its prefix)",
			      uuid, n);
	hex[n] = '\0';
	memcpy(fs->want_fsid, hex, n + 1);
	return 0;
}

void bi_salvage_free(struct btrfsimg_fs *fs)
{
	bi_sv_scan_free(fs->scan);
	fs->scan = NULL;
	bi_sv_scan_pending_free(fs);
	bi_sv_scan_free(fs->tree_scan);
	fs->tree_scan = NULL;
	free(fs->found);
	fs->found = NULL;
	fs->nfound = 0;
	free(fs->salvage_roots);
	fs->salvage_roots = NULL;
	fs->nsalvage_roots = 0;
	free(fs->salvage_lost);
	fs->salvage_lost = NULL;
	fs->nsalvage_lost = 0;
	free(fs->salvage_unsure);
	fs->salvage_unsure = NULL;
	fs->nsalvage_unsure = 0;
	free(fs->salvage_asof);
	fs->salvage_asof = NULL;
	fs->nsalvage_asof = fs->salvage_asof_cap = 0;
	free(fs->salvage_cut);
	fs->salvage_cut = NULL;
	fs->nsalvage_cut = fs->salvage_cut_cap = 0;
}
