// SPDX-License-Identifier: MIT
/*
 * Partition tables and locating the filesystem (src/image/dev.c, src/volume/part.c). Input: the first
 * bytes of a disk image. It is presented through a read callback as images
 * of three sizes: exactly the input (so backup GPT headers at its end are
 * reached), 64 MiB and 1 TiB (zeros past the input). Invariants on
 * success: the count is bounded and the same with and without an output
 * array; partitions come in increasing number order, are sector-aligned,
 * non-empty, do not wrap, and all come from one table type; a note is only
 * left for a used backup header. bi_dev_locate then either fails with a
 * message or picks a window inside the image with the magic at one of the
 * superblock copies' places (the table's partition, or where the scan of
 * the whole image found a copy: not on the 1 TiB image, which that scan
 * would read in whole).
 * The callback aborts if any read leaves the image.
 */
#include <stdlib.h>
#include <string.h>

#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "volume/part.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)
#define MAXP 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct vimg {
	const uint8_t *data;
	size_t len;
	uint64_t vsize;
};

static int vread(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct vimg *m = ctx;
	CHECK(bi_fits64(m->vsize, off, len));
	memset(buf, 0, len);
	if (off < m->len) {
		size_t n = m->len - off < len ? m->len - off : len;
		memcpy(buf, m->data + off, n);
	}
	return 0;
}

static void check_parts(const struct btrfsimg_partition *p, int n)
{
	for (int i = 0; i < n && i < MAXP; i++) {
		uint64_t end;
		CHECK(p[i].number >= 1 && p[i].size > 0 && p[i].offset % 512 == 0);
		CHECK(bi_add_ok(p[i].offset, p[i].size, &end));
		CHECK(!p[i].is_btrfs && p[i].gpt == p[0].gpt);
		CHECK(i == 0 || p[i].number > p[i - 1].number);
		CHECK(p[i].gpt || p[i].number <= 4 || p[i].number - 5 < 4 * 128);
	}
}

static int parse(struct vimg *m)
{
	struct btrfsimg_partition p[MAXP];
	char err[512], err2[512];
	int n = bi_part_parse(vread, m, m->vsize, p, MAXP, err, sizeof(err));
	int count = bi_part_parse(vread, m, m->vsize, NULL, 0, err2, sizeof(err2));
	CHECK(n == count && strcmp(err, err2) == 0);
	if (n < 0) {
		CHECK(err[0] && (n == -EUCLEAN || n == -ENOMEM));
		return n;
	}
	CHECK(n <= BI_PART_MAX);
	CHECK(!err[0] || strstr(err, "used the backup"));
	check_parts(p, n);
	return n;
}

static void locate(struct vimg *m, int partition)
{
	struct btrfsimg_open_opts o;
	btrfsimg_open_opts_init(&o);
	o.partition = (unsigned)partition;
	btrfsimg_fs *fs;
	CHECK(btrfsimg_fs_new(&fs, &o) == 0);
	CHECK(btrfsimg_add_device_io(fs, vread, m, m->vsize, "fuzz.img") == 0);
	struct bi_dev *d = &fs->devs[0];
	int rc = bi_dev_locate(fs, d);
	if (rc < 0) {
		CHECK(btrfsimg_errmsg(fs)[0]);
	} else {
		uint8_t mg[8];
		uint64_t end;
		CHECK(bi_add_ok(d->base, d->size, &end) && end <= m->vsize);
		bool magic = false;
		for (int i = 0; i < SB_MIRROR_MAX; i++)
			magic |= bi_fits64(d->size, bi_super_offset(i) + SB_MAGIC_OFF, 8) &&
				 bi_dev_read(fs, d, bi_super_offset(i) + SB_MAGIC_OFF, mg, 8) == 0 &&
				 bi_le64(mg) == SB_MAGIC;
		CHECK(magic);
		CHECK(bi_dev_read(fs, d, d->size, mg, 1) == -EIO);
	}
	btrfsimg_fs_free(fs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t sizes[] = { 0, 64ull << 20, 1ull << 40 };
	if (size > (1u << 20))
		return 0;
	for (int i = 0; i < 3; i++) {
		struct vimg m = { data, size, sizes[i] ? sizes[i] : size };
		int n = parse(&m);
		if (sizes[i] >> 40)
			continue;
		locate(&m, 0);
		if (n > 0)
			locate(&m, 1 + (int)(size % 8));
	}
	return 0;
}
