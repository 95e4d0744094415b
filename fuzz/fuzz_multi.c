// SPDX-License-Identifier: MIT
/*
 * Multi-device target: one input is up to four device images, opened
 * together as the CLI opens the images it is given (btrfsimg_add_device_*
 * per image, then btrfsimg_open), so that the multi-device paths are
 * fuzzed: devices matched by superblock or, without one, by the tree
 * blocks on them (salvage: devid assignment, stripe order of chunks
 * rebuilt from device extents, a missing device, a foreign device among
 * them). Input:
 *
 *   u8  count            (byte & 3) + 1 devices
 *   u32 length (le)      of each device's part but the last, count - 1 times
 *   then the parts, each a sparse image (fuzz/sparse_image.h); the last
 *   takes what is left, a part cut short by the input ends there; each
 *   device ends at its last record (rounded up to 1 MiB), so that an input
 *   costs the scan of what it holds, not of a 160 MiB zero tail
 *
 * After a successful open: the superblock answers, the devices counted
 * missing are fewer than the superblock names, and a bounded walk of the
 * top subvolume reads each regular file's first MiB (parity and mirrors
 * as the map says). Any result is fine; crashes, hangs, leaks and
 * sanitizer reports are not, nor a failure without a message or an empty
 * log line. Seeds: fuzz/gen_multi_seeds.py.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "btrfsimg.h"
#include "sparse_image.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)
#define MAX_DEVS 4
#define MAX_ENTRIES 2000
#define READ_LEN (1u << 20)

static void log_line(void *ctx, bool damage, const char *msg)
{
	(void)ctx;
	(void)damage;
	CHECK(msg && *msg);
}

/* A device ends at its last record, rounded up to 1 MiB: every open of
 * a device without superblock or partition table reads it whole, and its
 * zero tail would only cost time (up to four devices per input). */
static void trim_tail(struct sparse_image *im)
{
	uint64_t end = 1ull << 20;
	for (size_t i = 0; i < im->n; i++) {
		uint64_t e = (im->recs[i].off + im->recs[i].len + (1u << 20) - 1) & ~((1ull << 20) - 1);
		end = e > end ? e : end;
	}
	if (end < im->size)
		im->size = end;
}

/* Split @data into its parts' sparse images; how many were parsed. */
static size_t split_parts(const uint8_t *data, size_t size, struct sparse_image *im)
{
	if (size < 1)
		return 0;
	size_t n = (size_t)(data[0] & 3) + 1, head = 1 + 4 * (n - 1), got = 0;
	if (size < head)
		return 0;
	size_t pos = head;
	for (size_t i = 0; i < n; i++) {
		size_t len = size - pos;
		if (i + 1 < n && bi_le32(data + 1 + 4 * i) < len)
			len = bi_le32(data + 1 + 4 * i);
		if (sparse_parse(data + pos, len, &im[got]) < 0) {
			sparse_free(&im[got]);
			break;
		}
		trim_tail(&im[got]);
		if (im[got].fix_csums)
			sparse_fix_csums(&im[got]);
		got++;
		pos += len;
	}
	return got;
}

/* The top subvolume's paths, each regular file's first MiB read. */
static void walk_and_read(btrfsimg_fs *fs, uint8_t *buf)
{
	struct btrfsimg_walk_opts o = { .subvol = 5 };
	btrfsimg_walk *w;
	const struct btrfsimg_walk_entry *e;
	if (btrfsimg_walk_open(fs, &o, &w) < 0) {
		CHECK(*btrfsimg_errmsg(fs));
		return;
	}
	for (unsigned k = 0; k < MAX_ENTRIES && btrfsimg_walk_next(w, &e) > 0; k++) {
		CHECK(strlen((const char *)e->path) == e->path_len);
		size_t got = 0;
		if (e->kind == BTRFSIMG_WALK_PATH && !e->stub && S_ISREG(e->inode.mode) &&
		    btrfsimg_file_read(fs, e->subvol, e->objectid, 0, buf, READ_LEN, &got) == 0)
			CHECK(got <= READ_LEN && got <= e->inode.size);
	}
	btrfsimg_walk_close(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sparse_image im[MAX_DEVS];
	size_t n = split_parts(data, size, im);
	btrfsimg_fs *fs = NULL;
	uint8_t *buf = malloc(READ_LEN);
	if (!n || !buf || btrfsimg_fs_new(&fs, NULL) < 0)
		goto out;
	btrfsimg_set_log(fs, log_line, NULL);
	for (size_t i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof(name), "fuzz%zu", i);
		CHECK(btrfsimg_add_device_io(fs, sparse_read, &im[i], im[i].size, name) == 0);
	}
	if (btrfsimg_open(fs) < 0) {
		CHECK(*btrfsimg_errmsg(fs));
		goto out;
	}
	struct btrfsimg_super_info si;
	CHECK(btrfsimg_super(fs, &si) == 0);
	CHECK(btrfsimg_missing_devices(fs) < si.num_devices);
	walk_and_read(fs, buf);
out:
	btrfsimg_fs_free(fs);
	free(buf);
	for (size_t i = 0; i < n; i++)
		sparse_free(&im[i]);
	return 0;
}
