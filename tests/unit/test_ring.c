// SPDX-License-Identifier: MIT
/*
 * The ring reader (image/ring.c) and the two whole-device passes that
 * use it (forensic scan, offline scrub).
 *
 * Ring: every byte it hands out must equal the file's byte at that offset
 * (a pattern written by the test), for requests straddling buffer and
 * 4 KiB boundaries, a device not a multiple of anything, a device smaller
 * than one buffer, a device starting at an unaligned image offset, with
 * O_DIRECT and through the page cache. A
 * range past the end of the file (the image cut while open) must fail,
 * in order, without disturbing the ranges around it.
 *
 * Passes: the scan and the scrub read with small pieces (blocks and
 * extents across every boundary), without the ring (bi_dev_read only),
 * and with their defaults must give the same index and the same report
 * on committed kernel-made images. An image cut while open must be
 * reported as damage naming the device and the offset, the blocks before
 * the cut still found.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/handle.h"
#include "image/dev.h"
#include "image/ring.h"
#include "patfile.h"
#include "forensic/block_scan.h"
#include "forensic/scrub.h"
#include "unpack.h"

static void check_bytes(const uint8_t *p, uint64_t abs, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pat(abs + i))
			fail_msg("byte %llu: have %u expect %u", (unsigned long long)(abs + i),
				 p[i], pat(abs + i));
}

/* Read the whole device in @piece steps with @over bytes of overlap, as the
 * scan does, keeping the ring full; every byte checked. */
static void read_all(struct bi_dev *d, size_t piece, size_t over, unsigned depth, bool direct)
{
	struct bi_ring *r = bi_ring_open(d, piece + over, depth, !direct);
	assert_non_null(r);
	assert_int_equal(bi_ring_direct(r), direct);
	uint64_t sub = 0, pieces = 0;
	for (uint64_t pos = 0; pos < d->size; pos += piece) {
		for (; sub < d->size && bi_ring_room(r); sub += piece) {
			uint64_t n = d->size - sub < piece + over ? d->size - sub : piece + over;
			assert_int_equal(bi_ring_submit(r, sub, (size_t)n), 0);
		}
		uint64_t len = d->size - pos < piece + over ? d->size - pos : piece + over;
		const uint8_t *p;
		assert_int_equal(bi_ring_next(r, &p), 0);
		check_bytes(p, d->base + pos, (size_t)len);
		pieces++;
	}
	assert_int_equal(bi_ring_next(r, &(const uint8_t *){ NULL }), -ENOENT);
	assert_true(pieces > 0);
	bi_ring_close(r);
}

static void ring_cases(const char *dir, bool direct)
{
	/* not a multiple of the piece nor of 4 KiB */
	char *path = pattern_file(dir, 5 * 65536 + 12345);
	static const uint64_t bases[] = { 0, 4096, 1000 };
	for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++) {
		struct bi_dev d = file_dev(path, bases[b]);
		read_all(&d, 65536, 16384, 3, direct); /* pieces straddle one another */
		read_all(&d, 12288, 0, 2, direct);     /* 4 KiB multiple, no overlap */
		read_all(&d, 5000, 333, 16, direct);   /* nothing aligned */
		read_all(&d, 1u << 20, 0, 4, direct);  /* the device is smaller than a buffer */
		close(d.fd);
	}
	/* a device smaller than one block */
	char *tiny = pattern_file(dir, 100);
	struct bi_dev t = file_dev(tiny, 0);
	read_all(&t, 65536, 0, 2, direct);
	close(t.fd);
	unlink(tiny);
	free(tiny);

	/* room, -EAGAIN, -EINVAL, out-of-range requests fail in their turn */
	struct bi_dev d = file_dev(path, 0);
	struct bi_ring *r = bi_ring_open(&d, 8192, 2, !direct);
	assert_non_null(r);
	const uint8_t *p;
	assert_int_equal(bi_ring_next(r, &p), -ENOENT);
	assert_int_equal(bi_ring_submit(r, 0, 8193), -EINVAL);
	assert_int_equal(bi_ring_submit(r, d.size - 100, 200), 0); /* past the end */
	assert_int_equal(bi_ring_submit(r, 100, 8000), 0);
	assert_false(bi_ring_room(r));
	assert_int_equal(bi_ring_submit(r, 0, 10), -EAGAIN);
	assert_true(bi_ring_next(r, &p) < 0);
	assert_null(p);
	assert_int_equal(bi_ring_submit(r, 0, 10), -EAGAIN); /* the failed one is held */
	bi_ring_release(r);
	assert_int_equal(bi_ring_submit(r, d.size - 100, 100), 0); /* the last bytes */
	assert_int_equal(bi_ring_next(r, &p), 0);
	check_bytes(p, 100, 8000);
	assert_int_equal(bi_ring_next(r, &p), 0);
	check_bytes(p, d.size - 100, 100);
	bi_ring_close(r);

	/* the image cut while the ring reads it: the ranges past the cut fail,
	 * in order, the others are read */
	r = bi_ring_open(&d, 65536, 4, !direct);
	assert_non_null(r);
	assert_int_equal(truncate(path, 2 * 65536 + 4096 + 7), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(bi_ring_submit(r, (uint64_t)i * 65536, 65536), 0);
	assert_int_equal(bi_ring_next(r, &p), 0);
	check_bytes(p, 0, 65536);
	assert_int_equal(bi_ring_next(r, &p), 0);
	check_bytes(p, 65536, 65536);
	assert_int_equal(bi_ring_next(r, &p), -EIO); /* 4103 of 65536 bytes there */
	assert_int_equal(bi_ring_next(r, &p), -EIO); /* nothing there */
	bi_ring_close(r);
	close(d.fd);

	unlink(path);
	free(path);
}

static void test_ring_direct(void **state)
{
	(void)state;
	const char *tmp = getenv("TMPDIR");
	const char *dir = tmp && *tmp ? tmp : "/tmp";
	char *probe = pattern_file(dir, 4096);
	int fd = open(probe, O_RDONLY | O_DIRECT);
	unlink(probe);
	free(probe);
	if (fd < 0) {
		print_message("%s refuses O_DIRECT: the ring reads it through the page cache "
			      "(tested below)\n",
			      dir);
		skip();
		return;
	}
	close(fd);
	ring_cases(dir, true);
}

static void test_ring_page_cache(void **state)
{
	(void)state;
	const char *tmp = getenv("TMPDIR");
	ring_cases(tmp && *tmp ? tmp : "/tmp", false);
}

/* bi_dev_hole against the file's bytes: a sparse file of 4 MiB with data
 * at [1 MiB, 1 MiB + 4 KiB) and in its last 4 KiB. No range with data may
 * be called a hole (the scan would miss its blocks); where the file
 * system tells holes (SEEK_DATA finds the first data at 1 MiB), the ranges
 * without data are holes; answers asked in order with one cache are the
 * answers asked afresh. */
static void test_dev_hole(void **state)
{
	(void)state;
	const char *tmp = getenv("TMPDIR");
	char path[4096];
	snprintf(path, sizeof(path), "%s/holeXXXXXX", tmp && *tmp ? tmp : "/tmp");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	const uint64_t size = 4u << 20, data1 = 1u << 20, data2 = size - 4096;
	uint8_t blk[4096];
	memset(blk, 0xab, sizeof(blk));
	assert_int_equal(pwrite(fd, blk, sizeof(blk), (off_t)data1), (ssize_t)sizeof(blk));
	assert_int_equal(pwrite(fd, blk, sizeof(blk), (off_t)data2), (ssize_t)sizeof(blk));
	bool tells = lseek(fd, 0, SEEK_DATA) == (off_t)data1;
	close(fd);
	struct bi_dev d = file_dev(path, 0);
	uint64_t cache = 0;
	for (uint64_t off = 0; off < size; off += 65536) {
		uint64_t len = 65536 + 16384 < size - off ? 65536 + 16384 : size - off;
		bool data = (off < data1 + 4096 && data1 < off + len) || off + len > data2;
		uint64_t fresh = 0;
		bool hole = bi_dev_hole(&d, off, len, &cache);
		assert_int_equal(hole, bi_dev_hole(&d, off, len, &fresh));
		if (data)
			assert_false(hole);
		else if (tells)
			assert_true(hole);
	}
	if (!tells)
		print_message("no SEEK_DATA in %s: no range is a hole\n", path);
	/* past the device, or not a plain file: never a hole */
	cache = 0;
	assert_false(bi_dev_hole(&d, size - 4096, 8192, &cache));
	d.base = 4096; /* the same file as a device starting further in */
	d.size = size - 4096;
	cache = 0;
	assert_true(bi_dev_hole(&d, data1 - 4096 - 8192, 8192, &cache) == tells);
	assert_false(bi_dev_hole(&d, data1 - 4096, 4096, &cache));
	close(d.fd);
	d.fd = -1;
	cache = 0;
	assert_false(bi_dev_hole(&d, 0, 4096, &cache));
	unlink(path);
}

static void test_ring_refused(void **state)
{
	(void)state;
	static const uint8_t mem[4096];
	struct bi_dev d = { .name = "mem", .fd = -1, .mem = mem, .raw_size = 4096, .size = 4096 };
	assert_null(bi_ring_open(&d, 4096, 2, false)); /* memory: bi_dev_read */
	char *path = pattern_file("/tmp", 4096);
	d = file_dev(path, 0);
	assert_null(bi_ring_open(&d, 4096, 1, false));	/* no ring of one */
	assert_null(bi_ring_open(&d, 0, 2, false));	/* nothing to read */
	assert_null(bi_ring_open(&d, 4096, 17, false)); /* too deep */
	close(d.fd);
	unlink(path);
	free(path);
}

/* ------------------------------------------------------------ the scan */

struct blocks {
	struct btrfsimg_tree_block *v;
	size_t n;
};

static int collect(void *ctx, const struct btrfsimg_tree_block *b)
{
	struct blocks *s = ctx;
	s->v = realloc(s->v, (s->n + 1) * sizeof(*s->v));
	assert_non_null(s->v);
	memset(&s->v[s->n], 0, sizeof(*s->v));
	s->v[s->n] = *b;
	s->n++;
	return 0;
}

static btrfsimg_fs *open_images(char **paths, size_t n)
{
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, NULL), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(btrfsimg_add_device_file(fs, paths[i]), 0);
	assert_int_equal(btrfsimg_open(fs), 0);
	return fs;
}

static void scan(btrfsimg_fs *fs, size_t piece, unsigned depth, struct blocks *out,
		 struct btrfsimg_scan_stats *st)
{
	btrfsimg_forensic *f;
	memset(out, 0, sizeof(*out));
	assert_int_equal(bi_fx_scan(fs, piece, depth, NULL, NULL, &f), 0);
	assert_int_equal(btrfsimg_forensic_blocks(f, collect, out), 0);
	assert_int_equal(btrfsimg_forensic_stats(f, st), 0);
	btrfsimg_forensic_free(f);
}

static void same_blocks(const struct blocks *a, const struct blocks *b)
{
	assert_int_equal(a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		const struct btrfsimg_tree_block *x = &a->v[i], *y = &b->v[i];
		assert_int_equal(x->bytenr, y->bytenr);
		assert_int_equal(x->generation, y->generation);
		assert_int_equal(x->owner, y->owner);
		assert_int_equal(x->level, y->level);
		assert_int_equal(x->nritems, y->nritems);
		assert_int_equal(x->devid, y->devid);
		assert_int_equal(x->physical, y->physical);
		assert_memory_equal(&x->first, &y->first, sizeof(x->first));
		assert_memory_equal(&x->last, &y->last, sizeof(x->last));
	}
}

static char **unpack_set(const char *const *names, size_t n)
{
	char **p = calloc(n, sizeof(*p));
	for (size_t i = 0; i < n; i++) {
		char zst[4096];
		snprintf(zst, sizeof(zst), "%s/%s", TESTDATA, names[i]);
		p[i] = unpack_zst(zst, NULL);
	}
	return p;
}

static void drop_set(char **p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unlink(p[i]);
		free(p[i]);
	}
	free(p);
}

static const char *const single[] = { "forensic/single.img.zst" };
static const char *const multi[] = { "forensic/multi.1.img.zst", "forensic/multi.2.img.zst" };

static void scan_pieces(const char *const *names, size_t n)
{
	char **p = unpack_set(names, n);
	btrfsimg_fs *fs = open_images(p, n);
	struct blocks ref, o;
	struct btrfsimg_scan_stats rs, os;
	scan(fs, 8u << 20, 4, &ref, &rs); /* btrfsimg_forensic_scan's */
	assert_true(ref.n > 10);
	/* pieces of one sector: every block lies across piece boundaries;
	 * pieces of 5 sectors and of 1 MiB + 1 sector: boundaries at every
	 * offset of a node; depth 1: no ring, bi_dev_read only */
	static const struct {
		size_t piece;
		unsigned depth;
	} v[] = { { 4096, 3 },	   { 20480, 2 }, { (1u << 20) + 4096, 16 },
		  { 8u << 20, 1 }, { 20480, 1 }, { 64u << 20, 2 } };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		scan(fs, v[i].piece, v[i].depth, &o, &os);
		same_blocks(&ref, &o);
		assert_memory_equal(&rs, &os, sizeof(rs));
		free(o.v);
	}
	assert_int_equal(bi_fx_scan(fs, 1000, 2, NULL, NULL, &(btrfsimg_forensic *){ NULL }),
			 -EINVAL);
	free(ref.v);
	btrfsimg_fs_free(fs);
	drop_set(p, n);
}

static void test_scan_pieces(void **state)
{
	(void)state;
	scan_pieces(single, 1);
	scan_pieces(multi, 2);
}

struct log {
	int damage;
	char first[1024];
};

static void log_fn(void *ctx, bool damage, const char *msg)
{
	struct log *l = ctx;
	if (!damage)
		return;
	if (!l->damage++)
		snprintf(l->first, sizeof(l->first), "%s", msg);
}

static void test_scan_cut(void **state)
{
	(void)state;
	char **p = unpack_set(single, 1);
	btrfsimg_fs *fs = open_images(p, 1);
	struct blocks ref, o;
	struct btrfsimg_scan_stats rs, os;
	scan(fs, 1u << 20, 4, &ref, &rs);
	/* cut the image while open, mid-device and not on a 4 KiB boundary */
	uint64_t size = (uint64_t)lseek(fs->devs[0].fd, 0, SEEK_END);
	uint64_t cut = size / 2 + 12345;
	assert_int_equal(truncate(p[0], (off_t)cut), 0);
	struct log l = { 0 };
	btrfsimg_set_log(fs, log_fn, &l);
	scan(fs, 1u << 20, 4, &o, &os);
	assert_true(l.damage > 0);
	char want[512];
	/* the first piece (1 MiB and the nodesize after it) the cut reaches */
	uint64_t first_bad = 0, pl = (1u << 20) + fs->nodesize;
	while (first_bad + (size - first_bad < pl ? size - first_bad : pl) <= cut)
		first_bad += 1u << 20;
	snprintf(want, sizeof(want), "device '%s': read of", p[0]);
	if (!strstr(l.first, "forensic scan") || !strstr(l.first, want))
		fail_msg("damage message: %s", l.first);
	snprintf(want, sizeof(want), "at offset %llu", (unsigned long long)first_bad);
	if (!strstr(l.first, want))
		fail_msg("damage message: %s (want %s)", l.first, want);
	/* every block that lies before the first piece cut is still found */
	size_t kept = 0;
	for (size_t i = 0; i < ref.n; i++) {
		if (ref.v[i].physical + fs->nodesize > first_bad)
			continue;
		bool found = false;
		for (size_t j = 0; j < o.n && !found; j++)
			found = o.v[j].bytenr == ref.v[i].bytenr &&
				o.v[j].generation == ref.v[i].generation;
		assert_true(found);
		kept++;
	}
	assert_true(kept > 0 && o.n < ref.n + 1);
	free(ref.v);
	free(o.v);
	btrfsimg_fs_free(fs);
	drop_set(p, 1);
}

/* ------------------------------------------------------------ the scrub */

static void same_report(const struct btrfsimg_scrub_report *a,
			const struct btrfsimg_scrub_report *b, bool same_window)
{
	assert_int_equal(a->ndevs, b->ndevs);
	assert_int_equal(a->nerrors, b->nerrors);
	assert_int_equal(a->total_errors, b->total_errors);
	for (size_t i = 0; i < a->ndevs; i++) {
		struct btrfsimg_scrub_dev x = a->devs[i], y = b->devs[i];
		if (!same_window)
			x.bytes_read = y.bytes_read = 0; /* what a window spans differs */
		assert_memory_equal(&x, &y, sizeof(x));
	}
	for (size_t i = 0; i < a->nerrors; i++)
		assert_memory_equal(&a->errors[i], &b->errors[i], sizeof(a->errors[i]));
}

static void scrub_windows(const char *const *names, size_t n)
{
	char **p = unpack_set(names, n);
	btrfsimg_fs *fs = open_images(p, n);
	struct btrfsimg_scrub_report *ref, *o;
	assert_int_equal(btrfsimg_scrub(fs, NULL, &ref), 0);
	uint64_t checked = 0;
	for (size_t i = 0; i < ref->ndevs; i++)
		checked += ref->devs[i].tree_blocks;
	assert_true(checked > 0);
	static const struct {
		uint32_t window;
		unsigned depth;
		bool same; /* same window as the default (1 MiB) */
	} v[] = { { 1u << 20, 1, true }, { 1u << 20, 2, true }, { 1u << 20, 16, true },
		  { 65536, 3, false },	 { 65536, 1, false },	{ 196608, 2, false },
		  { 8u << 20, 4, false } };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		assert_int_equal(bi_scrub_run(fs, NULL, v[i].window, v[i].depth, &o), 0);
		same_report(ref, o, v[i].same);
		btrfsimg_scrub_report_free(o);
	}
	assert_int_equal(bi_scrub_run(fs, NULL, 4096, 2, &o), -EINVAL);
	btrfsimg_scrub_report_free(ref);
	btrfsimg_fs_free(fs);
	drop_set(p, n);
}

static void test_scrub_windows(void **state)
{
	(void)state;
	static const char *const raid1[] = { "scrub/raid1/dev1.img.zst",
					     "scrub/raid1/dev2.img.zst" };
	static const char *const raid5[] = { "images/raid5/dev1.img.zst",
					     "images/raid5/dev2.img.zst",
					     "images/raid5/dev3.img.zst" };
	scrub_windows(single, 1);
	scrub_windows(raid1, 2);
	scrub_windows(raid5, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_direct),  cmocka_unit_test(test_ring_page_cache),
		cmocka_unit_test(test_ring_refused), cmocka_unit_test(test_scan_pieces),
		cmocka_unit_test(test_scan_cut),     cmocka_unit_test(test_scrub_windows),
		cmocka_unit_test(test_dev_hole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
