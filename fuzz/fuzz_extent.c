// SPDX-License-Identifier: MIT
/*
 * EXTENT_DATA item parser and range composition. Input layout:
 *
 *   byte 0      sectorsize = 4096 << (b % 5)  (4 KiB .. 64 KiB)
 *   bytes 1-8   key offset (le64)
 *   bytes 9-16  file offset of the next item (le64), for the cut
 *   bytes 17-   the item
 *
 * On success every field the reader relies on must hold (alignment,
 * bounds, kind), and every piece bi_extent_pieces returns for a few ranges
 * must be contiguous, inside the range, and point inside the extent's own
 * bytes. On failure the reason must be set.
 */
#include <stdlib.h>
#include <string.h>

#include "base/cursor.h"
#include "base/err.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"
#include "files/extent.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)

static void check_fields(const struct bi_extent *e, const uint8_t *item, uint32_t size,
			 uint64_t key_off, uint32_t ss)
{
	CHECK(e->file_offset == key_off && key_off % ss == 0);
	CHECK(e->compression <= COMPRESS_ZSTD && e->type <= FE_TYPE_PREALLOC);
	if (e->type == FE_TYPE_INLINE) {
		CHECK(e->kind == BI_EXT_INLINE && key_off == 0);
		CHECK(e->inline_data == item + FE_INLINE_DATA);
		CHECK(e->inline_size == size - FE_INLINE_DATA);
		CHECK(e->ram_bytes <= ss);
		CHECK(e->end == (e->ram_bytes ? ss : 0));
		if (e->compression == COMPRESS_NONE)
			CHECK(e->inline_size == e->ram_bytes);
		return;
	}
	CHECK(size == FE_SIZE && e->end == key_off + e->num_bytes && e->end >= key_off);
	CHECK(e->disk_bytenr % ss == 0 && e->disk_num_bytes % ss == 0 && e->offset % ss == 0 &&
	      e->num_bytes % ss == 0 && e->ram_bytes % ss == 0);
	if (e->type == FE_TYPE_PREALLOC || e->disk_bytenr == 0) {
		CHECK(e->kind == BI_EXT_ZERO);
		return;
	}
	uint64_t stop = e->offset + e->num_bytes;
	CHECK(stop >= e->offset && e->disk_bytenr + e->disk_num_bytes > e->disk_bytenr);
	if (e->compression == COMPRESS_NONE) {
		CHECK(e->kind == BI_EXT_DISK && stop <= e->disk_num_bytes);
	} else {
		CHECK(e->kind == BI_EXT_COMPRESSED && e->disk_num_bytes <= 131072);
		CHECK(e->ram_bytes >= 1 && e->ram_bytes <= 131072 && stop <= e->ram_bytes);
	}
}

static void check_pieces(const struct bi_extent *e, uint64_t next, uint64_t pos, uint64_t end)
{
	struct bi_piece p[3];
	size_t n = bi_extent_pieces(e, next, pos, end, p);
	CHECK(n <= 3);
	uint64_t stop = e->end < next ? e->end : next;
	for (size_t i = 0; i < n; i++) {
		CHECK(p[i].pos == pos && p[i].len > 0 && p[i].len <= end - pos);
		uint64_t rel = p[i].pos - e->file_offset;
		if (p[i].kind != BI_EXT_ZERO)
			CHECK(p[i].pos >= e->file_offset && p[i].pos + p[i].len <= stop);
		switch (p[i].kind) {
		case BI_EXT_DISK:
			CHECK(p[i].src == e->disk_bytenr + e->offset + rel);
			CHECK(p[i].src + p[i].len <= e->disk_bytenr + e->disk_num_bytes);
			break;
		case BI_EXT_COMPRESSED:
			CHECK(p[i].src == e->offset + rel && p[i].src + p[i].len <= e->ram_bytes);
			break;
		case BI_EXT_INLINE:
			CHECK(p[i].src == rel && p[i].src + p[i].len <= e->ram_bytes);
			break;
		default:
			break;
		}
		pos += p[i].len;
	}
	/* everything before the extent's stop is covered when the range is */
	if (n && stop > pos)
		CHECK(pos == end);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 17 || size - 17 > 65536)
		return 0;
	uint32_t ss = 4096u << (data[0] % 5);
	uint64_t key_off = bi_le64(data + 1), next = bi_le64(data + 9);
	uint32_t isize = (uint32_t)(size - 17);
	/* a private copy, so reads past the item are caught by the sanitizer */
	uint8_t *item = malloc(isize ? isize : 1);
	if (!item)
		return 0;
	memcpy(item, data + 17, isize);
	struct bi_extent e;
	char why[256];
	int rc = bi_extent_parse(item, isize, key_off, ss, &e, why, sizeof(why));
	if (rc < 0) {
		CHECK(rc == -EUCLEAN && why[0]);
	} else {
		CHECK(rc == 0);
		check_fields(&e, item, isize, key_off, ss);
		uint64_t edges[] = { 0, key_off, e.end, next, key_off + ss / 2, UINT64_MAX };
		for (size_t a = 0; a < 6; a++)
			for (size_t b = 0; b < 6; b++)
				if (edges[a] < edges[b])
					check_pieces(&e, next, edges[a], edges[b]);
	}
	free(item);
	return 0;
}
