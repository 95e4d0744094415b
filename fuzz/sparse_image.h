/* SPDX-License-Identifier: MIT */
/*
 * Whole-image fuzz inputs. A btrfs image is at least ~100 MiB, mostly
 * zeros, so inputs describe a sparse image:
 *
 *   u8  flags            bit 0: recompute checksums after mutation
 *   u64 image size (le)  clamped to [1 MiB, 1 TiB], and past 512 MiB to
 *                        the end of the last record (sparse_clamp; without
 *                        a superblock to 512 MiB)
 *   then records: u64 offset (le), u16 length (le), length bytes
 *
 * Unlisted bytes read as zero. Records are bounded (offset + length within
 * the image; later records win). With bit 0 set, the harness rewrites the
 * superblock checksum at 64 KiB and the checksum of every record that
 * starts like a tree block of this filesystem (its fsid at byte 32), so
 * structurally hostile but checksum-valid blocks reach the deep parsers,
 * as a deliberate attacker would build them. With no superblock (the
 * salvage path), the checksum type, nodesize and fsid are those the first
 * record verifies under (sparse_learn). fuzz/gen_sparse_seeds.py turns real
 * images into this format; fuzz/gen_salvage_seeds.py damaged ones.
 */
#ifndef FUZZ_SPARSE_IMAGE_H
#define FUZZ_SPARSE_IMAGE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/ondisk.h"

#define SPARSE_MAX_RECORDS 4096
#define SPARSE_SCAN_MAX (512ull << 20)

struct sparse_rec {
	uint64_t off;
	uint32_t len;
	uint8_t *data;	/* owned copy (checksums may be rewritten) */
};

struct sparse_image {
	uint64_t size;
	bool fix_csums;
	struct sparse_rec *recs;
	size_t n;
};

static inline void sparse_free(struct sparse_image *im)
{
	for (size_t i = 0; i < im->n; i++)
		free(im->recs[i].data);
	free(im->recs);
}

/* An open that falls back to the salvage scan reads every byte of the
 * image: past SPARSE_SCAN_MAX, the image ends at its last record (rounded
 * up to 1 MiB), whose zero tail changes nothing but the size, and with no
 * superblock magic at 64 KiB (the scan certain) records past
 * SPARSE_SCAN_MAX are dropped, so that one run stays short. */
static inline int sparse_read(void *ctx, uint64_t off, void *buf, size_t len);

static inline void sparse_clamp(struct sparse_image *im)
{
	if (im->size <= SPARSE_SCAN_MAX)
		return;
	uint8_t magic[8];
	if (sparse_read(im, SB_PRIMARY_OFFSET + SB_MAGIC_OFF, magic, 8) < 0 ||
	    bi_le64(magic) != SB_MAGIC) { /* no primary: the scan is certain */
		size_t w = 0;
		for (size_t i = 0; i < im->n; i++) {
			if (bi_fits64(SPARSE_SCAN_MAX, im->recs[i].off, im->recs[i].len))
				im->recs[w++] = im->recs[i];
			else
				free(im->recs[i].data);
		}
		im->n = w;
	}
	uint64_t end = SPARSE_SCAN_MAX;
	for (size_t i = 0; i < im->n; i++) {
		uint64_t e = (im->recs[i].off + im->recs[i].len + (1u << 20) - 1) & ~((1ull << 20) - 1);
		if (e > end)
			end = e;
	}
	if (end < im->size)
		im->size = end;
}

static inline int sparse_parse(const uint8_t *d, size_t size, struct sparse_image *im)
{
	memset(im, 0, sizeof(*im));
	if (size < 9)
		return -1;
	im->fix_csums = d[0] & 1;
	im->size = bi_le64(d + 1);
	if (im->size < (1ull << 20))
		im->size = 1ull << 20;
	if (im->size > (1ull << 40))
		im->size = 1ull << 40;
	im->recs = calloc(SPARSE_MAX_RECORDS, sizeof(*im->recs));
	if (!im->recs)
		return -1;
	for (size_t p = 9; p + 10 <= size && im->n < SPARSE_MAX_RECORDS;) {
		uint64_t off = bi_le64(d + p);
		uint32_t len = bi_le16(d + p + 8);
		p += 10;
		if (len > size - p)
			len = (uint32_t)(size - p);
		if (len && bi_fits64(im->size, off, len)) {
			struct sparse_rec *r = &im->recs[im->n];
			r->data = malloc(len);
			if (!r->data)
				break;
			memcpy(r->data, d + p, len);
			r->off = off;
			r->len = len;
			im->n++;
		}
		p += len;
	}
	sparse_clamp(im);
	return 0;
}

static inline int sparse_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct sparse_image *im = ctx;
	if (!bi_fits64(im->size, off, len))
		return -EIO;
	memset(buf, 0, len);
	for (size_t i = 0; i < im->n; i++) {
		const struct sparse_rec *r = &im->recs[i];
		uint64_t lo = r->off > off ? r->off : off;
		uint64_t hi = r->off + r->len < off + len ? r->off + r->len : off + len;
		if (lo < hi)
			memcpy((uint8_t *)buf + (lo - off), r->data + (lo - r->off), hi - lo);
	}
	return 0;
}

/* No superblock (the salvage path): the checksum type, nodesize and fsid
 * of the first record that verifies as a tree block under some pair, as
 * the salvage scan learns them. 0 if none does. */
static inline int sparse_learn(const struct sparse_image *im, int *type, uint32_t *nodesize,
			       uint8_t fsid[16])
{
	for (size_t i = 0; i < im->n; i++) {
		const struct sparse_rec *r = &im->recs[i];
		for (int t = 0; t < 4; t++)
			for (uint32_t ns = 4096; ns <= 65536 && ns <= r->len; ns <<= 1) {
				uint8_t sum[CSUM_SIZE_MAX];
				size_t n = bi_csum_size(t);
				if (!n || bi_csum(t, r->data + HDR_FSID, ns - HDR_FSID, sum) < 0 ||
				    memcmp(sum, r->data, n) != 0)
					continue;
				*type = t;
				*nodesize = ns;
				memcpy(fsid, r->data + HDR_FSID, 16);
				return 1;
			}
	}
	return 0;
}

/* Rewrite checksums: the superblock's, then each tree-block-looking record's. */
static inline void sparse_fix_csums(struct sparse_image *im)
{
	uint8_t sb[SB_SIZE], learned[16];
	if (sparse_read(im, SB_PRIMARY_OFFSET, sb, SB_SIZE) < 0)
		return;
	int type = bi_le16(sb + SB_CSUM_TYPE);
	uint32_t nodesize = bi_le32(sb + SB_NODESIZE);
	const uint8_t *fsid = (bi_le64(sb + SB_INCOMPAT_FLAGS) & INCOMPAT_METADATA_UUID)
				      ? sb + SB_METADATA_UUID : sb + SB_FSID;
	if (bi_le64(sb + SB_MAGIC_OFF) != SB_MAGIC) {
		if (!sparse_learn(im, &type, &nodesize, learned))
			return;
		fsid = learned;
	}
	if (!bi_csum_size(type))
		return;
	for (size_t i = 0; i < im->n; i++) {
		struct sparse_rec *r = &im->recs[i];
		if (r->off == SB_PRIMARY_OFFSET && r->len >= SB_SIZE) {
			bi_csum(type, r->data + SB_CSUM_START, SB_SIZE - SB_CSUM_START, r->data);
		} else if (nodesize >= 4096 && r->len >= nodesize &&
			   !memcmp(r->data + HDR_FSID, fsid, 16)) {
			bi_csum(type, r->data + HDR_FSID, nodesize - HDR_FSID, r->data);
		}
	}
}

#endif
