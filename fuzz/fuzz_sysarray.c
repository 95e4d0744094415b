// SPDX-License-Identifier: MIT
/*
 * The superblock's sys_chunk_array: the input is the array itself (its
 * length is sys_chunk_array_size, so inputs over 2048 bytes test that
 * bound), loaded into a handle with 4 KiB sectors.
 *
 * On failure the message must name the array. On success the map must be
 * sorted and disjoint, hold only system chunks, find each chunk at both
 * ends and nothing just outside, and every chunk must map as
 * chunk_invariants.h demands. Seeds: the arrays of the kernel-made
 * filesystems in testdata/chunk (every profile).
 */
#include <string.h>

#include "chunk_invariants.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct btrfsimg_fs *fs;
	if (size > 4096 || btrfsimg_fs_new(&fs, NULL))
		return 0;
	fs->sectorsize = 4096;
	fs->chunks = bi_chunk_map_new();
	if (!fs->chunks)
		goto out;
	memcpy(fs->sb.raw + SB_SYS_CHUNK_ARRAY, data,
	       size < SB_SYS_CHUNK_ARRAY_MAX ? size : SB_SYS_CHUNK_ARRAY_MAX);
	fs->sb.sys_array_size = (uint32_t)size;
	int rc = bi_chunk_load_sys_array(fs);
	if (rc) {
		CHECK(rc == -EUCLEAN || rc == -ENOMEM);
		CHECK(rc == -ENOMEM || strstr(fs->err, "sys_chunk_array") != NULL);
		goto out;
	}
	size_t n = bi_chunk_map_count(fs->chunks);
	CHECK(n >= 1 && n <= size / (KEY_SIZE + CHUNK_SIZE + STRIPE_SIZE));
	const struct bi_chunk *prev = NULL;
	for (size_t i = 0; i < n; i++) {
		const struct bi_chunk *c = bi_chunk_map_at(fs->chunks, i);
		CHECK(c->type & BG_SYSTEM);
		CHECK(!prev || prev->logical + prev->length <= c->logical);
		CHECK(bi_chunk_lookup(fs->chunks, c->logical) == c);
		CHECK(bi_chunk_lookup(fs->chunks, c->logical + c->length - 1) == c);
		if (!prev || prev->logical + prev->length < c->logical)
			CHECK(c->logical == 0 || bi_chunk_lookup(fs->chunks, c->logical - 1) == NULL);
		check_chunk(c, c->logical ^ c->length);
		prev = c;
	}
	CHECK(bi_chunk_lookup(fs->chunks, prev->logical + prev->length) == NULL ||
	      prev->logical + prev->length == 0);
out:
	btrfsimg_fs_free(fs);
	return 0;
}
