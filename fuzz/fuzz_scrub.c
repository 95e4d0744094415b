// SPDX-License-Identifier: MIT
/*
 * Whole-image target for the readers that go through every device byte:
 * open a sparse image (fuzz/sparse_image.h), then run the offline scrub
 * (btrfsimg_scrub) and the unallocated-space listing
 * (btrfsimg_unallocated) with a read of each range's first bytes. Both
 * take the chunk map, the extent tree and the csum tree as they come, so
 * hostile chunk layouts (stripes past the device, overlapping dev
 * extents, RAID5/6 rows), extent items and csum items all reach them.
 * Work is bounded here by the scrub's progress callback (it stops after
 * MAX_BYTES of stripes) and by stopping the listing after MAX_RANGES.
 * Invariants: counts agree with the listed damage (the list never longer
 * than the total, every entry of a known kind, inside a device that was
 * given, of a nonzero length); ranges come in devid then physical order,
 * never overlap, are nonzero and lie inside the device (their first bytes
 * read back); the handle has a message after every failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg_forensic.h"
#include "sparse_image.h"

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			abort();                                                                   \
	} while (0)
#define MAX_BYTES  (2ull << 30)
#define MAX_RANGES 20000

static void on_log(void *ctx, bool damage, const char *msg)
{
	(void)ctx;
	(void)damage;
	CHECK(msg && *msg);
}

static int on_progress(void *ctx, uint64_t done, uint64_t total)
{
	(void)ctx;
	CHECK(done <= total);
	return done > MAX_BYTES;
}

static void scrub(btrfsimg_fs *fs, uint64_t size)
{
	struct btrfsimg_scrub_opts o = { .max_errors = 50, .progress = on_progress };
	struct btrfsimg_scrub_report *r = NULL;
	int rc = btrfsimg_scrub(fs, &o, &r);
	if (rc < 0) {
		CHECK(*btrfsimg_errmsg(fs) && !r);
		return;
	}
	CHECK(r->nerrors <= r->total_errors && r->nerrors <= 50);
	for (size_t i = 0; i < r->nerrors; i++) {
		const struct btrfsimg_scrub_error *e = &r->errors[i];
		CHECK(e->kind <= BTRFSIMG_SCRUB_UNCHECKED && e->length > 0 && e->mirror >= 0);
		CHECK(strcmp(btrfsimg_scrub_kind_name(e->kind), "unknown") != 0);
		bool on_missing = false; /* rebuilt from parity: its physical is not this image's */
		for (size_t k = 0; k < r->ndevs; k++)
			on_missing |= r->devs[k].devid == e->devid && r->devs[k].missing;
		CHECK((on_missing || e->physical < size) && memchr(e->detail, 0, sizeof(e->detail)));
	}
	for (size_t i = 0; i < r->ndevs; i++) {
		const struct btrfsimg_scrub_dev *d = &r->devs[i];
		/* a missing device is never read; what is checked on it was rebuilt */
		CHECK(!d->missing || (d->bytes_read == 0 && d->tree_bytes_scrubbed +
				      d->data_bytes_scrubbed == d->rebuilt_bytes));
		CHECK(d->missing || d->rebuilt_bytes == 0);
		CHECK(d->bytes_read <= size);
	}
	btrfsimg_scrub_report_free(r);
}

struct listing {
	btrfsimg_fs *fs;
	uint64_t size, n, devid, end;
};

static int on_range(void *ctx, const struct btrfsimg_unalloc_range *r)
{
	struct listing *l = ctx;
	CHECK(r->length > 0 && r->physical + r->length <= l->size);
	CHECK(r->devid > l->devid || (r->devid == l->devid && r->physical >= l->end));
	CHECK(strcmp(btrfsimg_unalloc_kind_name(r->kind), "unknown") != 0);
	CHECK(!r->has_logical || r->mirror >= 1);
	uint8_t b[64];
	size_t n = r->length < sizeof(b) ? (size_t)r->length : sizeof(b);
	CHECK(btrfsimg_device_read(l->fs, r->devid, r->physical, b, n) == 0);
	l->devid = r->devid;
	l->end = r->physical + r->length;
	return ++l->n >= MAX_RANGES;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sparse_image im;
	if (sparse_parse(data, size, &im) < 0)
		return 0;
	if (im.fix_csums)
		sparse_fix_csums(&im);
	btrfsimg_fs *fs = NULL;
	if (btrfsimg_fs_new(&fs, NULL) < 0)
		goto out;
	btrfsimg_set_log(fs, on_log, NULL);
	CHECK(btrfsimg_add_device_io(fs, sparse_read, &im, im.size, "fuzz") == 0);
	if (btrfsimg_open(fs) < 0) {
		CHECK(*btrfsimg_errmsg(fs));
		goto out;
	}
	scrub(fs, im.size);
	struct listing l = { fs, im.size, 0, 0, 0 };
	int rc = btrfsimg_unallocated(fs, on_range, &l);
	CHECK(rc >= 0 || *btrfsimg_errmsg(fs));
	CHECK(rc <= 1);
out:
	btrfsimg_fs_free(fs);
	sparse_free(&im);
	return 0;
}
