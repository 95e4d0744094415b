// SPDX-License-Identifier: MIT
/*
 * Superblock parser (bi_super_parse) on one copy. Input:
 *
 *   byte 0   bit 0: recompute the checksum (any known csum_type) so the
 *            field checks are reached; bits 1-2: the offset the copy is
 *            read from (64 KiB, 64 MiB, 256 GiB, or the copy's own
 *            bytenr field); bit 3: pass the input length as is (else the
 *            copy is zero padded to 4096 bytes)
 *   bytes 1- the superblock copy
 *
 * The result must be one of the states the parser may return, with a
 * reason unless valid. A valid copy must satisfy every rule the parser
 * promises (geometry, levels, alignment, sys_chunk_array size, device
 * count, generation, csum type, dev_item fsid), and every decoded field
 * must equal the bytes at its offset. A copy whose checksum was not fixed
 * and does not match must never be valid. Seeds: the primary copies of the
 * committed images (fuzz/gen_struct_seeds.py).
 */
#include <stdlib.h>
#include <string.h>

#include "base/csum.h"
#include "base/cursor.h"
#include "base/handle.h"
#include "base/ondisk.h"
#include "btrfs/super.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static void check_fields(const uint8_t *b, const struct bi_super *s)
{
	const struct btrfsimg_super_info *i = &s->info;
	CHECK(!memcmp(s->raw, b, SB_SIZE) && !memcmp(i->fsid, b + SB_FSID, 16));
	CHECK(i->generation == bi_le64(b + SB_GENERATION) && i->root == bi_le64(b + SB_ROOT));
	CHECK(i->chunk_root == bi_le64(b + SB_CHUNK_ROOT));
	CHECK(i->log_root == bi_le64(b + SB_LOG_ROOT));
	CHECK(i->total_bytes == bi_le64(b + SB_TOTAL_BYTES));
	CHECK(i->num_devices == bi_le64(b + SB_NUM_DEVICES));
	CHECK(i->sectorsize == bi_le32(b + SB_SECTORSIZE) && i->nodesize == bi_le32(b + SB_NODESIZE));
	CHECK(s->sys_array_size == bi_le32(b + SB_SYS_CHUNK_ARRAY_SIZE));
	CHECK(i->csum_type == bi_le16(b + SB_CSUM_TYPE));
	CHECK(i->incompat_flags == bi_le64(b + SB_INCOMPAT_FLAGS));
	CHECK(i->root_level == b[SB_ROOT_LEVEL] && i->chunk_root_level == b[SB_CHUNK_ROOT_LEVEL]);
	CHECK(s->devid == bi_le64(b + SB_DEV_ITEM + DEV_DEVID) && i->devid == s->devid);
	CHECK(!memcmp(s->dev_fsid, b + SB_DEV_ITEM + DEV_FSID, 16));
	CHECK(!memcmp(i->label, b + SB_LABEL, SB_LABEL_SIZE) && i->label[SB_LABEL_SIZE] == 0);
	const uint8_t *meta = (i->incompat_flags & INCOMPAT_METADATA_UUID) ? b + SB_METADATA_UUID
									   : b + SB_FSID;
	CHECK(!memcmp(i->metadata_uuid, meta, 16));
}

static void check_valid(const uint8_t *b, const struct bi_super *s)
{
	const struct btrfsimg_super_info *i = &s->info;
	check_fields(b, s);
	CHECK(is_pow2(i->sectorsize) && i->sectorsize >= 4096 && i->sectorsize <= 65536);
	CHECK(is_pow2(i->nodesize) && i->nodesize >= i->sectorsize && i->nodesize <= 65536);
	CHECK(i->stripesize == 4096 || i->stripesize == i->sectorsize);
	CHECK(i->root && i->chunk_root && i->root % i->sectorsize == 0);
	CHECK(i->chunk_root % i->sectorsize == 0 && i->log_root % i->sectorsize == 0);
	CHECK(i->root_level < MAX_LEVEL && i->chunk_root_level < MAX_LEVEL &&
	      i->log_root_level < MAX_LEVEL);
	/* the sys array holds at least one chunk with one stripe, inside its area */
	CHECK(s->sys_array_size >= KEY_SIZE + CHUNK_SIZE + STRIPE_SIZE);
	CHECK(s->sys_array_size <= SB_SYS_CHUNK_ARRAY_MAX);
	CHECK(SB_SYS_CHUNK_ARRAY + s->sys_array_size <= SB_SUPER_ROOTS);
	CHECK(i->num_devices >= 1 && i->num_devices <= 65536 && i->generation);
	size_t cs = bi_csum_size(i->csum_type);
	CHECK(cs && cs <= CSUM_SIZE_MAX);
	uint8_t sum[CSUM_SIZE_MAX];
	CHECK(bi_csum(i->csum_type, b + SB_CSUM_START, SB_SIZE - SB_CSUM_START, sum) == 0);
	CHECK(!memcmp(sum, b + SB_CSUM, cs));
	CHECK(!memcmp(s->dev_fsid, i->metadata_uuid, 16));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 1 + 2 * SB_SIZE)
		return 0;
	uint8_t flags = data[0];
	size_t n = size - 1;
	static uint8_t buf[2 * SB_SIZE];
	memset(buf, 0, sizeof(buf));
	memcpy(buf, data + 1, n);
	size_t len = (flags & 8) ? n : SB_SIZE;
	if ((flags & 1) && bi_csum_size(bi_le16(buf + SB_CSUM_TYPE)))
		bi_csum(bi_le16(buf + SB_CSUM_TYPE), buf + SB_CSUM_START, SB_SIZE - SB_CSUM_START,
			buf);
	int sel = (flags >> 1) & 3;
	uint64_t bytenr = sel < 3 ? bi_super_offset(sel) : bi_le64(buf + SB_BYTENR);
	struct bi_super s;
	char why[256];
	int st = bi_super_parse(buf, len, bytenr, &s, why, sizeof(why));
	CHECK(st == BTRFSIMG_MIRROR_VALID || st == BTRFSIMG_MIRROR_BAD_MAGIC ||
	      st == BTRFSIMG_MIRROR_BAD_BYTENR || st == BTRFSIMG_MIRROR_BAD_CSUM ||
	      st == BTRFSIMG_MIRROR_BAD_FIELDS);
	CHECK(memchr(why, 0, sizeof(why)) != NULL);
	if (st != BTRFSIMG_MIRROR_VALID) {
		CHECK(why[0]);
		if (st == BTRFSIMG_MIRROR_BAD_MAGIC)
			CHECK(len < SB_SIZE || bi_le64(buf + SB_MAGIC_OFF) != SB_MAGIC);
		return 0;
	}
	CHECK(len >= SB_SIZE && bi_le64(buf + SB_MAGIC_OFF) == SB_MAGIC);
	CHECK(bi_le64(buf + SB_BYTENR) == bytenr);
	check_valid(buf, &s);
	/* The same bytes parse the same way (no dependence on *out's old contents). */
	struct bi_super again;
	memset(&again, 0xa5, sizeof(again));
	CHECK(bi_super_parse(buf, len, bytenr, &again, why, sizeof(why)) == st);
	CHECK(!memcmp(&again.info, &s.info, sizeof(s.info)) && again.devid == s.devid);
	return 0;
}
