// SPDX-License-Identifier: MIT
/*
 * One chunk item: parse, map, read. Input layout:
 *
 *   bytes 0-7    logical address of the chunk (le64)
 *   byte  8      sectorsize = 4096 << (b % 5)  (4 KiB .. 64 KiB)
 *   byte  9      devices: bit i set = the device of stripe i is present
 *                (stripes 0..7; others are missing)
 *   bytes 10-17  a probe offset (le64, taken modulo the chunk length)
 *   bytes 18-    the chunk item
 *
 * On failure the reason names the chunk. On success the mapping must
 * satisfy chunk_invariants.h at both ends, around the probe and at stripe
 * edges; then every way to read (bi_read_copy) a few small ranges around
 * the probe runs against in-memory devices of 256 KiB (the harness input,
 * repeated), with the chosen devices missing: it must return 0 or -EIO
 * with a message, and never touch memory it should not (ASan).
 * Seeds: real chunk items from testdata/chunk (made by the kernel), some
 * with their stripe offsets moved under 256 KiB so reads reach the devices.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunk_invariants.h"

#define HDR 18
#define DEV_SIZE (256u << 10)
#define MAX_DEVS 8

static void check_reads(const struct bi_chunk *c, uint8_t present, uint64_t probe,
			const uint8_t *seed, size_t seedlen)
{
	struct btrfsimg_fs *fs;
	if (btrfsimg_fs_new(&fs, NULL))
		return;
	static uint8_t mem[MAX_DEVS][DEV_SIZE];
	char why[256];
	struct bi_chunk *own = malloc(sizeof(*c) + c->num_stripes * sizeof(c->stripes[0]));
	fs->chunks = bi_chunk_map_new();
	fs->sectorsize = 4096;
	if (!own || !fs->chunks) {
		free(own);
		goto out;
	}
	memcpy(own, c, sizeof(*c) + c->num_stripes * sizeof(c->stripes[0]));
	CHECK(bi_chunk_map_insert(fs->chunks, own, why, sizeof(why)) == 0);
	for (uint32_t i = 0; i < c->num_stripes && i < MAX_DEVS; i++) {
		if (!(present & (1u << i)) || bi_dev_by_id(fs, c->stripes[i].devid))
			continue;
		for (size_t k = 0; k < DEV_SIZE; k += seedlen)
			memcpy(mem[i] + k, seed, seedlen < DEV_SIZE - k ? seedlen : DEV_SIZE - k);
		mem[i][0] ^= (uint8_t)i;
		if (btrfsimg_add_device_mem(fs, mem[i], DEV_SIZE, NULL))
			goto out;
		struct bi_dev *d = &fs->devs[fs->ndevs - 1];
		d->member = true;
		d->devid = c->stripes[i].devid;
		memcpy(d->dev_uuid, c->stripes[i].dev_uuid, 16);
	}
	uint64_t p = probe % c->length;
	static const uint64_t lens[] = { 1, 4096, 65536 + 7 };
	static uint8_t buf[2][65536 + 7];
	int ways = bi_chunk_num_copies(c);
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		uint64_t len = lens[l] < c->length - p ? lens[l] : c->length - p;
		for (int copy = 0; copy < ways && copy < 8; copy++) {
			int rc = bi_read_copy(fs, c->logical + p, buf[copy > 0], len, copy);
			CHECK(rc == 0 || rc == -EIO);
			CHECK(rc == 0 || fs->err[0]);
		}
	}
	CHECK(bi_read_copy(fs, c->logical + p, buf[0], 1, ways) == -EINVAL);
out:
	btrfsimg_fs_free(fs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < HDR)
		return 0;
	uint64_t logical = bi_le64(data), probe = bi_le64(data + 10);
	uint32_t ss = 4096u << (data[8] % 5);
	struct bi_chunk *c = NULL;
	char why[512] = "";
	int rc = bi_chunk_parse(data + HDR, size - HDR, logical, ss, &c, why, sizeof(why));
	if (rc) {
		CHECK(rc == -EUCLEAN && c == NULL);
		char want[64];
		snprintf(want, sizeof(want), "chunk at logical %llu: ", (unsigned long long)logical);
		CHECK(!strncmp(why, want, strlen(want)));
		return 0;
	}
	CHECK(c->num_stripes >= 1 && c->stripe_len == 65536 && c->length % ss == 0);
	CHECK(c->logical % ss == 0 && c->logical + c->length > c->logical);
	check_chunk(c, probe);
	check_reads(c, data[9], probe, data + HDR, size - HDR);
	free(c);
	return 0;
}
