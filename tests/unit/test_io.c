// SPDX-License-Identifier: MIT
/*
 * Devices and partition tables (src/image/dev.c, src/volume/part.c).
 *
 * Truth: partition tables are written by sfdisk (util-linux) and what
 * `sfdisk -d` reports about them is what bi_part_parse must find. Live
 * tests build fresh images with sfdisk (skipped without it); fixtures in
 * testdata/part/ (made by testdata/part/gen-part.sh with sfdisk, mkfs.btrfs and
 * blkid) keep the same checks running without sfdisk or root. The btrfs
 * partition of gpt-btrfs was made by mkfs.btrfs through a loop device and
 * blkid confirmed it; bi_dev_locate must pick exactly that partition.
 *
 * Must-fail cases are hand-made from the fixtures, each saying which bytes
 * it damages: bad CRC in both GPT headers, an entry array past the end,
 * absurd entry counts and sizes, an EBR loop, an over-long EBR chain.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <zlib.h>
#include <zstd.h>

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "volume/part.h"

#define MAXP 16
#define MAGIC_AT (SB_PRIMARY_OFFSET + SB_MAGIC_OFF)

/* ------------------------------------------------------------------ */
/* In-memory images: data, then zeros up to a larger virtual size. */

struct img {
	uint8_t *data;
	size_t len;
	uint64_t vsize;
};

static int img_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct img *m = ctx;
	assert_true(bi_fits64(m->vsize, off, len));	/* the parser must stay inside */
	memset(buf, 0, len);
	if (off < m->len) {
		size_t n = m->len - off < len ? m->len - off : len;
		memcpy(buf, m->data + off, n);
	}
	return 0;
}

static int parse(struct img *m, struct btrfsimg_partition *p, char *err)
{
	return bi_part_parse(img_read, m, m->vsize, p, MAXP, err, 512);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	long n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	char *buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* testdata/part/<name>.img.zst, virtual size from <name>.size */
static void fixture_load(const char *name, struct img *m)
{
	char path[512];
	size_t zlen, slen;
	snprintf(path, sizeof(path), "%s/part/%s.img.zst", TESTDATA, name);
	char *z = slurp(path, &zlen);
	unsigned long long n = ZSTD_getFrameContentSize(z, zlen);
	assert_true(n != ZSTD_CONTENTSIZE_ERROR && n != ZSTD_CONTENTSIZE_UNKNOWN);
	assert_true(n <= (64u << 20));
	m->data = malloc(n);
	assert_non_null(m->data);
	assert_int_equal(ZSTD_decompress(m->data, n, z, zlen), n);
	m->len = n;
	free(z);
	snprintf(path, sizeof(path), "%s/part/%s.size", TESTDATA, name);
	char *s = slurp(path, &slen);
	m->vsize = strtoull(s, NULL, 10);
	free(s);
	assert_true(m->vsize >= m->len);
}

/* ------------------------------------------------------------------ */
/* What sfdisk -d says */

struct expect {
	int n;
	bool gpt;
	unsigned ss;
	int number[MAXP];
	uint64_t start[MAXP], size[MAXP];	/* sectors */
};

static void dump_line(struct expect *e, char *line)
{
	char *colon = strstr(line, " : start=");
	if (!colon) {
		if (!strncmp(line, "label: gpt", 10))
			e->gpt = true;
		if (!strncmp(line, "sector-size: ", 13))
			e->ss = (unsigned)strtoul(line + 13, NULL, 10);
		return;
	}
	char *num = colon;
	while (num > line && num[-1] >= '0' && num[-1] <= '9')
		num--;
	const char *t = strstr(line, "type=");
	assert_non_null(t);
	t += 5;
	/* an MBR extended container holds no filesystem: we do not list it */
	if (!e->gpt && (!strncmp(t, "5,", 2) || !strncmp(t, "5\n", 2) || !strncmp(t, "f\n", 2) ||
			!strncmp(t, "85\n", 3) || !strncmp(t, "f,", 2) || !strncmp(t, "85,", 3)))
		return;
	assert_true(e->n < MAXP);
	e->number[e->n] = atoi(num);
	e->start[e->n] = strtoull(strstr(line, "start=") + 6, NULL, 10);
	e->size[e->n] = strtoull(strstr(line, "size=") + 5, NULL, 10);
	e->n++;
}

static void dump_parse(char *text, struct expect *e)
{
	memset(e, 0, sizeof(*e));
	e->ss = 512;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char buf[512];
		snprintf(buf, sizeof(buf), "%s\n", line);
		dump_line(e, buf);
	}
	assert_true(e->n > 0);
}

static void dump_fixture(const char *name, struct expect *e)
{
	char path[512];
	size_t len;
	snprintf(path, sizeof(path), "%s/part/%s.sfdisk", TESTDATA, name);
	char *t = slurp(path, &len);
	dump_parse(t, e);
	free(t);
}

static void expect_match(const struct expect *e, const struct btrfsimg_partition *p, int n)
{
	assert_int_equal(n, e->n);
	for (int i = 0; i < n; i++) {
		assert_int_equal(p[i].number, e->number[i]);
		assert_int_equal(p[i].offset, e->start[i] * e->ss);
		assert_int_equal(p[i].size, e->size[i] * e->ss);
		assert_int_equal(p[i].gpt, e->gpt);
		assert_false(p[i].is_btrfs);
	}
}

/* ------------------------------------------------------------------ */
/* Shell helpers for the live tests */

static bool have(const char *prog)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", prog);
	return system(cmd) == 0;
}

BI_PRINTF(1, 2)
static int sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static char *capture(const char *cmd)
{
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap);
	assert_non_null(buf);
	size_t r;
	while ((r = fread(buf + n, 1, cap - 1 - n, f)) > 0)
		n += r;
	buf[n] = '\0';
	assert_int_equal(pclose(f), 0);
	return buf;
}

static void tmpdir(char *dir)
{
	strcpy(dir, "/tmp/test_io.XXXXXX");
	assert_non_null(mkdtemp(dir));
}

static void rmdir_all(const char *dir)
{
	sh("rm -rf '%s'", dir);
}

/* Build @path of @size with the sfdisk @script; fill @e from sfdisk -d. */
static void sfdisk_make(const char *path, const char *size, const char *script,
			struct expect *e)
{
	assert_int_equal(sh("truncate -s %s '%s' && printf '%s' | sfdisk -q '%s' >/dev/null", size,
			    path, script, path), 0);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "sfdisk -d '%s'", path);
	char *t = capture(cmd);
	dump_parse(t, e);
	free(t);
}

static void check_file(const char *path, const struct expect *e)
{
	struct btrfsimg_partition p[MAXP];
	char err[512];
	int n = btrfsimg_list_partitions(path, p, MAXP, err, sizeof(err));
	if (n < 0)
		fail_msg("%s: %s", path, err);
	expect_match(e, p, n);
}

#define NEED_SFDISK()                                                                  \
	do {                                                                           \
		if (!have("sfdisk")) {                                                 \
			print_message("sfdisk missing (Debian package fdisk): skipped\n"); \
			skip();                                                        \
		}                                                                      \
	} while (0)

#define NEED_ROOT()                                                                    \
	do {                                                                           \
		if (geteuid() != 0 || !have("losetup") || !have("mkfs.btrfs")) {       \
			print_message("needs root, losetup and mkfs.btrfs: skipped\n"); \
			skip();                                                        \
		}                                                                      \
	} while (0)

/* ------------------------------------------------------------------ */
/* Devices */

static btrfsimg_fs *new_fs(void)
{
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, NULL), 0);
	return fs;
}

static void test_mem_read(void **state)
{
	(void)state;
	uint8_t data[100], buf[16];
	for (int i = 0; i < 100; i++)
		data[i] = (uint8_t)i;
	btrfsimg_fs *fs = new_fs();
	assert_int_equal(btrfsimg_add_device_mem(fs, data, sizeof(data), "x.img"), 0);
	struct bi_dev *d = &fs->devs[0];
	assert_int_equal(bi_dev_read(fs, d, 84, buf, 16), 0);
	assert_memory_equal(buf, data + 84, 16);
	assert_int_equal(bi_dev_read(fs, d, 90, buf, 16), -EIO);
	assert_string_equal(btrfsimg_errmsg(fs), "device 'x.img': read of 16 bytes at offset 90 "
						 "past end of device (size 100)");
	assert_int_equal(bi_dev_read(fs, d, UINT64_MAX - 4, buf, 16), -EIO);
	/* a window: offsets are relative to base, bounded by size */
	d->base = 10;
	d->size = 50;
	assert_int_equal(bi_dev_read(fs, d, 0, buf, 16), 0);
	assert_memory_equal(buf, data + 10, 16);
	assert_int_equal(bi_dev_read(fs, d, 40, buf, 16), -EIO);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "at offset 40 past end of device (size 50)"));
	assert_int_equal(bi_dev_read_raw(fs, d, 84, buf, 16), 0);
	assert_memory_equal(buf, data + 84, 16);
	assert_int_equal(btrfsimg_add_device_mem(fs, NULL, 5, "bad"), -EINVAL);
	btrfsimg_fs_free(fs);
}

static void test_file_read(void **state)
{
	(void)state;
	char dir[64], path[128];
	tmpdir(dir);
	snprintf(path, sizeof(path), "%s/f.img", dir);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	for (int i = 0; i < 70000; i++)
		fputc(i * 7 & 0xff, f);
	fclose(f);
	btrfsimg_fs *fs = new_fs();
	assert_int_equal(btrfsimg_add_device_file(fs, path), 0);
	struct bi_dev *d = &fs->devs[0];
	assert_int_equal(d->raw_size, 70000);
	uint8_t buf[5000];
	assert_int_equal(bi_dev_read(fs, d, 65000, buf, 5000), 0);
	for (int i = 0; i < 5000; i++)
		assert_int_equal(buf[i], (65000 + i) * 7 & 0xff);
	assert_int_equal(bi_dev_read(fs, d, 65001, buf, 5000), -EIO);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "f.img': read of 5000 bytes at offset 65001 "
						    "past end of device (size 70000)"));
	/* the image shrinks while open: an I/O error, not a short buffer */
	assert_int_equal(truncate(path, 60000), 0);
	assert_int_equal(bi_dev_read(fs, d, 59000, buf, 5000), -EIO);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "image ended early"));
	assert_int_equal(btrfsimg_add_device_file(fs, dir), -EINVAL);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "not a regular file or block device"));
	snprintf(path, sizeof(path), "%s/absent.img", dir);
	assert_int_equal(btrfsimg_add_device_file(fs, path), -ENOENT);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "absent.img': cannot open"));
	assert_int_equal(fs->ndevs, 1);
	btrfsimg_fs_free(fs);
	rmdir_all(dir);
}

static int failing_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	(void)ctx, (void)off, (void)buf, (void)len;
	return -EIO;
}

static void test_io_error(void **state)
{
	(void)state;
	uint8_t buf[8];
	btrfsimg_fs *fs = new_fs();
	assert_int_equal(btrfsimg_add_device_io(fs, failing_read, NULL, 1 << 20, "cb"), 0);
	assert_int_equal(bi_dev_read(fs, &fs->devs[0], 4096, buf, 8), -EIO);
	assert_string_equal(btrfsimg_errmsg(fs), "device 'cb': read of 8 bytes at offset 4096 "
						 "failed: Input/output error");
	/* the error also stops locating, with the device's message */
	assert_int_equal(bi_dev_locate(fs, &fs->devs[0]), -EIO);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "device 'cb': read of 8 bytes at offset 65600"));
	btrfsimg_fs_free(fs);
}

static void test_device_limit(void **state)
{
	(void)state;
	static const uint8_t b[1];
	btrfsimg_fs *fs = new_fs();
	for (int i = 0; i < BI_MAX_DEVS; i++)
		assert_int_equal(btrfsimg_add_device_mem(fs, b, 1, NULL), 0);
	assert_int_equal(btrfsimg_add_device_mem(fs, b, 1, NULL), -EINVAL);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "too many devices, limit 64"));
	assert_string_equal(fs->devs[63].name, "mem63");
	assert_int_equal(fs->ndevs, BI_MAX_DEVS);
	fs->opened = true;	/* as btrfsimg_open() leaves it */
	btrfsimg_fs_free(fs);
	fs = new_fs();
	fs->opened = true;
	assert_int_equal(btrfsimg_add_device_mem(fs, b, 1, "late"), -EINVAL);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "after btrfsimg_open"));
	btrfsimg_fs_free(fs);
}

/* A block device: its size comes from BLKGETSIZE64 (truth: the file behind it). */
static void test_block_device(void **state)
{
	(void)state;
	NEED_ROOT();
	char dir[64], path[128], loop[64] = "";
	tmpdir(dir);
	snprintf(path, sizeof(path), "%s/b.img", dir);
	assert_int_equal(sh("truncate -s 5M '%s'", path), 0);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "losetup -f --show '%s' 2>/dev/null", path);
	FILE *f = popen(cmd, "r");
	if (!fgets(loop, sizeof(loop), f))
		loop[0] = '\0';
	if (pclose(f) != 0 || !loop[0]) {
		rmdir_all(dir);
		print_message("losetup failed: skipped\n");
		skip();
	}
	loop[strcspn(loop, "\n")] = '\0';
	btrfsimg_fs *fs = new_fs();
	int rc = btrfsimg_add_device_file(fs, loop);
	uint64_t size = rc == 0 ? fs->devs[0].raw_size : 0;
	btrfsimg_fs_free(fs);
	sh("losetup -d %s", loop);
	rmdir_all(dir);
	assert_int_equal(rc, 0);
	assert_int_equal(size, 5u << 20);
}

/* ------------------------------------------------------------------ */
/* Fixtures (sfdisk's view recorded by testdata/part/gen-part.sh) */

static void fixture_check(const char *name)
{
	struct img m;
	struct expect e;
	struct btrfsimg_partition p[MAXP];
	char err[512];
	fixture_load(name, &m);
	dump_fixture(name, &e);
	int n = parse(&m, p, err);
	if (n < 0)
		fail_msg("%s: %s", name, err);
	assert_string_equal(err, "");
	expect_match(&e, p, n);
	/* counting without an output array gives the same number */
	assert_int_equal(bi_part_parse(img_read, &m, m.vsize, NULL, 0, err, sizeof(err)), n);
	free(m.data);
}

static void test_fixture_mbr(void **state)
{
	(void)state;
	fixture_check("mbr-ext");
}

static void test_fixture_gpt(void **state)
{
	(void)state;
	fixture_check("gpt3");
}

static void test_fixture_gpt4k(void **state)
{
	(void)state;
	fixture_check("gpt4k");
}

static btrfsimg_fs *fs_on_img(struct img *m, int partition, int64_t offset)
{
	struct btrfsimg_open_opts o;
	btrfsimg_open_opts_init(&o);
	o.partition = (unsigned)partition;
	if (offset >= 0) {
		o.offset = (uint64_t)offset;
		o.flags |= BTRFSIMG_OPEN_OFFSET;
	}
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, &o), 0);
	assert_int_equal(btrfsimg_add_device_io(fs, img_read, m, m->vsize, "disk.img"), 0);
	return fs;
}

/* mkfs.btrfs made partition 2 (blkid agrees): locate must choose it. */
static void test_fixture_btrfs(void **state)
{
	(void)state;
	struct img m;
	struct expect e;
	size_t len;
	char path[512];
	fixture_load("gpt-btrfs", &m);
	dump_fixture("gpt-btrfs", &e);
	snprintf(path, sizeof(path), "%s/part/gpt-btrfs.blkid", TESTDATA);
	char *b = slurp(path, &len);
	assert_string_equal(b, "2 btrfs\n");
	free(b);
	btrfsimg_fs *fs = fs_on_img(&m, 0, -1);
	struct bi_dev *d = &fs->devs[0];
	assert_int_equal(bi_dev_locate(fs, d), 0);
	assert_int_equal(e.number[1], 2);
	assert_int_equal(d->base, e.start[1] * 512);
	assert_int_equal(d->size, e.size[1] * 512);
	uint8_t mg[8];
	assert_int_equal(bi_dev_read(fs, d, MAGIC_AT, mg, 8), 0);
	assert_memory_equal(mg, "_BHRfS_M", 8);
	/* the fs cannot read past its partition */
	assert_int_equal(bi_dev_read(fs, d, d->size - 4, mg, 8), -EIO);
	assert_int_equal(btrfsimg_damage_count(fs), 0);
	btrfsimg_fs_free(fs);
	free(m.data);
}

/* ------------------------------------------------------------------ */
/* Live sfdisk */

static void test_sfdisk_mbr(void **state)
{
	(void)state;
	NEED_SFDISK();
	char dir[64], path[128];
	struct expect e;
	tmpdir(dir);
	snprintf(path, sizeof(path), "%s/mbr.img", dir);
	sfdisk_make(path, "64M",
		    "label: dos\\nstart=2048, size=8192, type=83\\nstart=10240, size=8192, "
		    "type=7\\nstart=20480, size=100000, type=f\\nstart=22528, size=8192, "
		    "type=83\\nstart=40960, size=20000, type=82\\n",
		    &e);
	assert_int_equal(e.n, 4);
	check_file(path, &e);
	rmdir_all(dir);
}

static void test_sfdisk_gpt(void **state)
{
	(void)state;
	NEED_SFDISK();
	char dir[64], path[128];
	struct expect e;
	tmpdir(dir);
	snprintf(path, sizeof(path), "%s/gpt.img", dir);
	sfdisk_make(path, "64M", "label: gpt\\nsize=8192\\nsize=16384\\nsize=4096\\n", &e);
	assert_int_equal(e.n, 3);
	check_file(path, &e);
	rmdir_all(dir);
}

/* Damage the primary header (its my_lba field, so the CRC fails): the
 * backup at the last sector must give the same table as before. */
static void test_sfdisk_gpt_backup(void **state)
{
	(void)state;
	NEED_SFDISK();
	char dir[64], path[128];
	struct expect e;
	tmpdir(dir);
	snprintf(path, sizeof(path), "%s/gpt.img", dir);
	sfdisk_make(path, "40M", "label: gpt\\nsize=2048\\nsize=4096\\nsize=8192\\n", &e);
	assert_int_equal(sh("printf '\\377' | dd of='%s' bs=1 seek=%d conv=notrunc status=none",
			    path, 512 + 24), 0);
	struct btrfsimg_partition p[MAXP];
	char err[512];
	struct img m;
	size_t len;
	m.data = (uint8_t *)slurp(path, &len);
	m.len = len;
	m.vsize = len;
	int n = parse(&m, p, err);
	expect_match(&e, p, n);
	assert_non_null(strstr(err, "primary GPT header invalid (header at byte 512: bad CRC32"));
	assert_non_null(strstr(err, "used the backup at byte 41942528"));
	free(m.data);
	check_file(path, &e);
	rmdir_all(dir);
}

/* 4096-byte sectors: sfdisk writes through a loop device with that sector size. */
static void test_sfdisk_gpt4k(void **state)
{
	(void)state;
	NEED_SFDISK();
	NEED_ROOT();
	char dir[64], path[128];
	struct expect e;
	tmpdir(dir);
	snprintf(path, sizeof(path), "%s/g4.img", dir);
	assert_int_equal(sh("truncate -s 32M '%s' && L=$(losetup -f --show --sector-size 4096 '%s')"
			    " && printf 'label: gpt\\nsize=1M\\nsize=3M\\nsize=1M\\n' | sfdisk -q "
			    "$L >/dev/null 2>&1; sfdisk -d $L > '%s.dump'; losetup -d $L",
			    path, path, path), 0);
	char dump[160];
	size_t len;
	snprintf(dump, sizeof(dump), "%s.dump", path);
	char *t = slurp(dump, &len);
	dump_parse(t, &e);
	free(t);
	assert_int_equal(e.ss, 4096);
	assert_int_equal(e.n, 3);
	check_file(path, &e);
	rmdir_all(dir);
}

/* A real btrfs in partition 2 of a GPT disk, made through a loop device. */
static void test_real_btrfs(void **state)
{
	(void)state;
	NEED_SFDISK();
	NEED_ROOT();
	char dir[64], path[128];
	struct expect e;
	tmpdir(dir);
	snprintf(path, sizeof(path), "%s/bt.img", dir);
	sfdisk_make(path, "300M", "label: gpt\\nsize=2048\\nsize=250M\\nsize=30M\\n", &e);
	int rc = sh("L=$(losetup -f --show -o %llu --sizelimit %llu '%s') && "
		    "{ mkfs.btrfs -q -f $L >/dev/null; r=$?; losetup -d $L; exit $r; }",
		    (unsigned long long)e.start[1] * 512, (unsigned long long)e.size[1] * 512,
		    path);
	assert_int_equal(rc, 0);
	struct btrfsimg_partition p[MAXP];
	char err[512];
	int n = btrfsimg_list_partitions(path, p, MAXP, err, sizeof(err));
	assert_int_equal(n, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(p[i].is_btrfs, i == 1);
	btrfsimg_fs *fs = new_fs();
	assert_int_equal(btrfsimg_add_device_file(fs, path), 0);
	assert_int_equal(bi_dev_locate(fs, &fs->devs[0]), 0);
	assert_int_equal(fs->devs[0].base, e.start[1] * 512);
	assert_int_equal(fs->devs[0].size, e.size[1] * 512);
	btrfsimg_fs_free(fs);
	rmdir_all(dir);
}

/* ------------------------------------------------------------------ */
/* Must fail (or must recover), hand-damaged fixtures */

/* Recompute the header CRC (over header_size bytes, CRC field zero). */
static void gpt_seal_header(uint8_t *h)
{
	bi_put_le32(h + 16, 0);
	bi_put_le32(h + 16, (uint32_t)crc32(0, h, bi_le32(h + 12)));
}

/* Recompute the entry-array CRC of the header @h of @m, then the header's. */
static void gpt_seal_entries(struct img *m, uint8_t *h)
{
	size_t off = bi_le64(h + 72) * 512, len = (size_t)bi_le32(h + 80) * bi_le32(h + 84);
	assert_true(bi_fits(m->len, off, len));
	bi_put_le32(h + 88, (uint32_t)crc32(0, m->data + off, (uInt)len));
	gpt_seal_header(h);
}

static uint8_t *gpt_primary(struct img *m)
{
	return m->data + 512;
}

static uint8_t *gpt_backup(struct img *m)
{
	return m->data + m->len - 512;
}

static int parse_fail(struct img *m, char *err)
{
	struct btrfsimg_partition p[MAXP];
	int n = parse(m, p, err);
	free(m->data);
	return n;
}

static void test_gpt_bad_crc_both(void **state)
{
	(void)state;
	struct img m;
	char err[512];
	fixture_load("gpt3", &m);
	gpt_primary(&m)[40] ^= 1;	/* first_usable_lba: header CRC now wrong */
	gpt_backup(&m)[40] ^= 1;
	assert_int_equal(parse_fail(&m, err), -EUCLEAN);
	assert_non_null(strstr(err, "primary: header at byte 512: bad CRC32"));
	assert_non_null(strstr(err, "backup: header at byte 16776704: bad CRC32"));
}

/* Only the primary's entry array is damaged: the backup has its own. */
static void test_gpt_primary_entries_bad(void **state)
{
	(void)state;
	struct img m;
	struct expect e;
	struct btrfsimg_partition p[MAXP];
	char err[512];
	fixture_load("gpt3", &m);
	dump_fixture("gpt3", &e);
	m.data[1024 + 32] ^= 0x10;	/* entry 1 first_lba, under the entries CRC */
	assert_int_equal(parse(&m, p, err), 3);
	expect_match(&e, p, 3);
	assert_non_null(strstr(err, "entry array at byte 1024: bad CRC32"));
	free(m.data);
}

static void test_gpt_entries_past_end(void **state)
{
	(void)state;
	struct img m;
	char err[512];
	fixture_load("gpt3", &m);
	bi_put_le64(gpt_primary(&m) + 72, m.vsize / 512 - 2);	/* 16 KiB array from 1 KiB before the end */
	gpt_seal_header(gpt_primary(&m));
	bi_put_le64(gpt_backup(&m) + 72, UINT64_MAX / 256);	/* LBA * 512 overflows */
	gpt_seal_header(gpt_backup(&m));
	assert_int_equal(parse_fail(&m, err), -EUCLEAN);
	assert_non_null(strstr(err, "entry array at LBA 32766 (16384 bytes) lies past the end "
				    "of the image (size 16777216)"));
	assert_non_null(strstr(err, "entry array at LBA 72057594037927935"));
}

static void test_gpt_absurd_entries(void **state)
{
	(void)state;
	struct img m;
	char err[512];
	fixture_load("gpt3", &m);
	bi_put_le32(gpt_primary(&m) + 80, 0x10000000);	/* 2^28 entries of 128 bytes */
	gpt_seal_header(gpt_primary(&m));
	bi_put_le32(gpt_backup(&m) + 84, 100);	/* entry size below 128 */
	gpt_seal_header(gpt_backup(&m));
	assert_int_equal(parse_fail(&m, err), -EUCLEAN);
	assert_non_null(strstr(err, "268435456 entries of 128 bytes, expect <= 1048576"));
	assert_non_null(strstr(err, "entry size 100, expect a multiple of 8 >= 128"));
}

/* A reversed entry (first > last) is skipped; the others keep their numbers. */
static void test_gpt_reversed_entry(void **state)
{
	(void)state;
	struct img m;
	struct btrfsimg_partition p[MAXP];
	char err[512];
	fixture_load("gpt3", &m);
	uint8_t *ent2 = m.data + 1024 + 128;
	bi_put_le64(ent2 + 40, bi_le64(ent2 + 32) - 1);
	gpt_seal_entries(&m, gpt_primary(&m));
	assert_int_equal(parse(&m, p, err), 2);
	assert_int_equal(p[0].number, 1);
	assert_int_equal(p[1].number, 3);
	assert_string_equal(err, "");
	free(m.data);
}

static void test_pmbr_without_gpt(void **state)
{
	(void)state;
	struct img m;
	char err[512];
	fixture_load("gpt3", &m);
	memset(gpt_primary(&m), 0, 512);
	memset(gpt_backup(&m), 0, 512);
	assert_int_equal(parse_fail(&m, err), -EUCLEAN);
	assert_non_null(strstr(err, "no \"EFI PART\" signature at byte 512"));
}

/* EBR sectors of the mbr-ext fixture: the first at the extended start
 * (sfdisk: 10240), the second linked from its entry 2. */
static void test_ebr_loop(void **state)
{
	(void)state;
	struct img m;
	char err[512];
	fixture_load("mbr-ext", &m);
	uint8_t *ebr1 = m.data + 10240 * 512;
	assert_int_equal(ebr1[446 + 16 + 4], 5);
	uint64_t ebr2 = 10240 + bi_le32(ebr1 + 446 + 16 + 8);
	uint8_t *link = m.data + ebr2 * 512 + 446 + 16;
	link[4] = 5;
	bi_put_le32(link + 8, 0);	/* relative to the extended start: back to EBR 1 */
	bi_put_le32(link + 12, 1);
	assert_int_equal(parse_fail(&m, err), -EUCLEAN);
	assert_non_null(strstr(err, "EBR chain loops, link 3 points back to sector 10240"));
}

/* Hand-built: an extended partition of 300 sectors from sector 1, each
 * sector an EBR with one 1-sector logical partition and a link to the next
 * sector. 299 links exceed the bound of 128. */
static void test_ebr_long_chain(void **state)
{
	(void)state;
	struct img m = { calloc(302, 512), 302 * 512, 302 * 512 };
	assert_non_null(m.data);
	char err[512];
	uint8_t *e = m.data + 446;
	e[4] = 0x0f;
	bi_put_le32(e + 8, 1);
	bi_put_le32(e + 12, 300);
	m.data[510] = 0x55, m.data[511] = 0xaa;
	for (int k = 1; k <= 300; k++) {
		uint8_t *s = m.data + k * 512;
		s[446 + 4] = 0x83;
		bi_put_le32(s + 446 + 8, 0);
		bi_put_le32(s + 446 + 12, 1);
		s[462 + 4] = 0x05;
		bi_put_le32(s + 462 + 8, (uint32_t)k);	/* next EBR: extended start + k */
		bi_put_le32(s + 462 + 12, 1);
		s[510] = 0x55, s[511] = 0xaa;
	}
	assert_int_equal(parse_fail(&m, err), -EUCLEAN);
	assert_non_null(strstr(err, "EBR chain longer than 128 links"));
}

/* Hand-built chain checking the EBR rules Linux follows. Extended
 * partition: sectors 8..107. EBR at 8: slot 0 a logical at +2 (number 5),
 * slot 1 the link to +20 (the first link wins), slot 2 garbage pointing
 * outside the extended partition (ignored), slot 3 a second link to +60.
 * EBR at 28: logical at +2000 (number 6: slots 0 and 1 are not checked
 * against the extended partition, and a partition past the image end is
 * listed as the table states it), link to +40. EBR at 48: no 0x55AA,
 * so the chain ends there. EBR at 68 (only reachable by the ignored second
 * link) holds a logical partition that must not appear. */
static void ebr_put(uint8_t *sec, int slot, uint8_t type, uint32_t start, uint32_t count)
{
	uint8_t *e = sec + 446 + 16 * slot;
	e[4] = type;
	bi_put_le32(e + 8, start);
	bi_put_le32(e + 12, count);
}

static void test_ebr_rules(void **state)
{
	(void)state;
	struct img m = { calloc(128, 512), 128 * 512, 128 * 512 };
	assert_non_null(m.data);
	struct btrfsimg_partition p[MAXP];
	char err[512];
	uint8_t *s = m.data;
	ebr_put(s, 0, 0x05, 8, 100);
	s[510] = 0x55, s[511] = 0xaa;
	s = m.data + 8 * 512;
	ebr_put(s, 0, 0x83, 2, 4);
	ebr_put(s, 1, 0x05, 20, 10);
	ebr_put(s, 2, 0x83, 1000, 10);
	ebr_put(s, 3, 0x05, 60, 10);
	s[510] = 0x55, s[511] = 0xaa;
	s = m.data + 28 * 512;
	ebr_put(s, 0, 0x83, 2000, 4);
	ebr_put(s, 1, 0x05, 40, 10);
	s[510] = 0x55, s[511] = 0xaa;
	ebr_put(m.data + 48 * 512, 0, 0x83, 2, 4);
	s = m.data + 68 * 512;
	ebr_put(s, 0, 0x83, 2, 4);
	s[510] = 0x55, s[511] = 0xaa;
	assert_int_equal(parse(&m, p, err), 2);
	assert_int_equal(p[0].number, 5);
	assert_int_equal(p[0].offset, 10 * 512);
	assert_int_equal(p[0].size, 4 * 512);
	assert_int_equal(p[1].number, 6);
	assert_int_equal(p[1].offset, 2028 * 512);
	/* without its signature the MBR is no partition table at all */
	m.data[510] = 0;
	assert_int_equal(parse_fail(&m, err), 0);
}

/* The backup header copied to LBA 1: its CRC is right but my_lba says
 * 32767, so it is no primary; the real backup is used. */
static void test_gpt_wrong_my_lba(void **state)
{
	(void)state;
	struct img m;
	struct btrfsimg_partition p[MAXP];
	char err[512];
	fixture_load("gpt3", &m);
	memcpy(gpt_primary(&m), gpt_backup(&m), 512);
	assert_int_equal(parse(&m, p, err), 3);
	assert_non_null(strstr(err, "header at byte 512: my_lba 32767, expect 1"));
	free(m.data);
}

/* header_size below 92 (resealed) and far above the sector (not resealed:
 * the size is checked before the CRC, which could not be computed). */
static void test_gpt_header_size(void **state)
{
	(void)state;
	struct img m;
	char err[512];
	fixture_load("gpt3", &m);
	bi_put_le32(gpt_primary(&m) + 12, 91);
	gpt_seal_header(gpt_primary(&m));
	bi_put_le32(gpt_backup(&m) + 12, UINT32_MAX);
	assert_int_equal(parse_fail(&m, err), -EUCLEAN);
	assert_non_null(strstr(err, "header at byte 512: header size 91, expect 92..512"));
	assert_non_null(strstr(err, "header size 4294967295, expect 92..512"));
}

/* A FAT boot sector has 0x55AA but boot-indicator bytes that are neither
 * 0x00 nor 0x80 in the "table": not a partition table (Linux agrees). */
static void test_boot_sector(void **state)
{
	(void)state;
	struct img m = { calloc(64, 512), 64 * 512, 64 * 512 };
	assert_non_null(m.data);
	char err[512];
	memset(m.data + 446, 0x4e, 64);
	m.data[510] = 0x55, m.data[511] = 0xaa;
	assert_int_equal(parse_fail(&m, err), 0);
}

/* ------------------------------------------------------------------ */
/* Locate policies on the mbr-ext fixture with hand-placed magics */

static void put_magic(struct img *m, uint64_t part_off)
{
	memcpy(m->data + part_off + MAGIC_AT, "_BHRfS_M", 8);
}

static int locate(struct img *m, int partition, int64_t offset, uint64_t *base,
		  uint64_t *size, char *msg)
{
	btrfsimg_fs *fs = fs_on_img(m, partition, offset);
	int rc = bi_dev_locate(fs, &fs->devs[0]);
	*base = fs->devs[0].base;
	*size = fs->devs[0].size;
	snprintf(msg, 512, "%s", btrfsimg_errmsg(fs));
	rc = rc < 0 ? rc : (int)btrfsimg_damage_count(fs);
	btrfsimg_fs_free(fs);
	return rc;
}

static void test_locate_choice(void **state)
{
	(void)state;
	struct img m;
	struct expect e;
	uint64_t base, size;
	char msg[512];
	fixture_load("mbr-ext", &m);
	dump_fixture("mbr-ext", &e);	/* 1, 2, 5, 6 */
	assert_int_equal(locate(&m, 0, -1, &base, &size, msg), -EUCLEAN);
	assert_string_equal(msg, "no btrfs superblock found: image 'disk.img' has no magic at "
				 "byte 65600, none of its 4 partitions holds btrfs, and a scan "
				 "of its 16777216 bytes found no superblock copy that verifies");
	put_magic(&m, e.start[2] * 512);	/* partition 5 */
	assert_int_equal(locate(&m, 0, -1, &base, &size, msg), 0);
	assert_int_equal(base, e.start[2] * 512);
	assert_int_equal(size, e.size[2] * 512);
	put_magic(&m, e.start[0] * 512);	/* and partition 1 */
	assert_int_equal(locate(&m, 0, -1, &base, &size, msg), -EINVAL);
	assert_string_equal(msg, "image 'disk.img' holds 2 btrfs partitions (1 at 1048576, 5 at "
				 "6291456): choose one with --partition N");
	assert_int_equal(locate(&m, 1, -1, &base, &size, msg), 0);
	assert_int_equal(base, 1048576);
	assert_int_equal(locate(&m, 2, -1, &base, &size, msg), -EUCLEAN);
	assert_non_null(strstr(msg, "partition 2 (at byte 3145728, 2097152 bytes) holds no btrfs"));
	assert_int_equal(locate(&m, 3, -1, &base, &size, msg), -ENOENT);
	assert_string_equal(msg, "image 'disk.img': no partition 3 (not in its partition table)");
	/* an explicit offset wins over everything */
	assert_int_equal(locate(&m, 0, 4096, &base, &size, msg), 0);
	assert_int_equal(base, 4096);
	assert_int_equal(size, m.vsize - 4096);
	assert_int_equal(locate(&m, 0, (int64_t)m.vsize + 1, &base, &size, msg), -EINVAL);
	/* btrfs at 64 KiB of the image itself: whole image, even with a table */
	put_magic(&m, 0);
	assert_int_equal(locate(&m, 5, -1, &base, &size, msg), 0);
	assert_int_equal(base, 0);
	assert_int_equal(size, m.vsize);
	free(m.data);
}

/* The image ends inside partition 6: it is clipped to what is there and
 * reported as damage; partition 5 (wholly inside) is not. */
static void test_locate_truncated(void **state)
{
	(void)state;
	struct img m;
	struct expect e;
	uint64_t base, size;
	char msg[512];
	fixture_load("mbr-ext", &m);
	dump_fixture("mbr-ext", &e);
	put_magic(&m, e.start[3] * 512);
	m.vsize = m.len = e.start[3] * 512 + (1u << 20);
	assert_int_equal(locate(&m, 6, -1, &base, &size, msg), 1);
	assert_int_equal(base, e.start[3] * 512);
	assert_int_equal(size, 1u << 20);
	struct btrfsimg_partition p[MAXP];
	assert_int_equal(parse(&m, p, msg), 4);
	assert_int_equal(p[3].size, e.size[3] * 512);	/* the table's value, unclipped */
	put_magic(&m, e.start[2] * 512);
	assert_int_equal(locate(&m, 5, -1, &base, &size, msg), 0);
	assert_int_equal(size, e.size[2] * 512);
	free(m.data);
}

/* A callback device whose MBR gains a partition between two reads: the
 * listing must not trust the first count. */
static int flaky_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	int *calls = ctx;
	uint8_t *b = buf;
	memset(buf, 0, len);
	if (off == 0 && len >= 512) {
		int parts = (*calls)++ ? 2 : 1;
		for (int i = 0; i < parts; i++)
			ebr_put(b, i, 0x83, 2048 + 2048 * (uint32_t)i, 2048);
		b[510] = 0x55, b[511] = 0xaa;
	}
	return 0;
}

static void test_table_changes(void **state)
{
	(void)state;
	int calls = 0;
	btrfsimg_fs *fs = new_fs();
	assert_int_equal(btrfsimg_add_device_io(fs, flaky_read, &calls, 8u << 20, "f"), 0);
	assert_int_equal(bi_dev_locate(fs, &fs->devs[0]), -EIO);
	assert_string_equal(btrfsimg_errmsg(fs), "image 'f': partition table changed while being "
						 "read (1 then 2 partitions)");
	btrfsimg_fs_free(fs);
}

/* An empty image and a tiny one: no table, no crash. */
static void test_tiny(void **state)
{
	(void)state;
	uint8_t b[600] = { 0 };
	struct img m = { b, 0, 0 };
	struct btrfsimg_partition p[MAXP];
	char err[512];
	assert_int_equal(parse(&m, p, err), 0);
	m.len = m.vsize = sizeof(b);
	b[510] = 0x55, b[511] = 0xaa, b[446 + 4] = 0xee, b[446 + 12] = 1;
	assert_int_equal(parse(&m, p, err), -EUCLEAN);
	uint64_t base, size;
	char msg[512];
	assert_int_equal(locate(&m, 0, -1, &base, &size, msg), -EUCLEAN);
	assert_non_null(strstr(msg, "image 'disk.img': partition table: GPT: no valid header"));
}

/* ------------------------------------------------------------------ */
/* No table: the superblock scan (volume/fsfind.c), on copies placed by
 * hand. Each filesystem's sys_chunk_array maps logical 1 MiB (its chunk
 * root) to device offset 2 MiB, where chunk_root_put() writes the block. */

#define SCAN_IMG (24u << 20)
#define SCAN_NODE 16384u
#define SCAN_FS_BYTES (8u << 20)

static void sb_put(uint8_t *img, uint64_t start, int copy, uint64_t gen)
{
	uint8_t *sb = img + start + bi_super_offset(copy);
	memset(sb, 0, SB_SIZE);
	memset(sb + SB_FSID, 0x5a, 16);
	bi_put_le64(sb + SB_BYTENR, bi_super_offset(copy));
	bi_put_le64(sb + SB_MAGIC_OFF, SB_MAGIC);
	bi_put_le64(sb + SB_GENERATION, gen);
	bi_put_le64(sb + SB_CHUNK_ROOT, 1u << 20);
	bi_put_le32(sb + SB_NODESIZE, SCAN_NODE);
	bi_put_le32(sb + SB_SECTORSIZE, 4096);
	bi_put_le64(sb + SB_DEV_ITEM + 8, SCAN_FS_BYTES);
	uint8_t *a = sb + SB_SYS_CHUNK_ARRAY, *ch = a + 17;
	bi_put_le64(a, 256);
	a[8] = KT_CHUNK_ITEM;
	bi_put_le64(a + 9, 1u << 20);
	bi_put_le64(ch + CHUNK_LENGTH, 4u << 20);
	bi_put_le16(ch + CHUNK_NUM_STRIPES, 1);
	bi_put_le64(ch + CHUNK_SIZE, 1);
	bi_put_le64(ch + CHUNK_SIZE + 8, 2u << 20);
	bi_put_le32(sb + SB_SYS_CHUNK_ARRAY_SIZE, 17 + CHUNK_SIZE + STRIPE_SIZE);
	assert_int_equal(bi_csum(CSUM_TYPE_CRC32C, sb + SB_CSUM_START, SB_SIZE - SB_CSUM_START,
				 sb), 0);
}

static void chunk_root_put(uint8_t *img, uint64_t start)
{
	uint8_t *b = img + start + (2u << 20);
	memset(b, 0, SCAN_NODE);
	memset(b + HDR_FSID, 0x5a, 16);
	bi_put_le64(b + HDR_BYTENR, 1u << 20);
	assert_int_equal(bi_csum(CSUM_TYPE_CRC32C, b + HDR_FSID, SCAN_NODE - HDR_FSID, b), 0);
}

/* A copy of the superblock inside the filesystem's data, and newer: the
 * start whose chunk root verifies is taken, not the newer or the first. */
static void test_scan_forged_copy(void **state)
{
	(void)state;
	struct img m = { calloc(1, SCAN_IMG), SCAN_IMG, SCAN_IMG };
	assert_non_null(m.data);
	uint64_t real = (1u << 20) + 3 * 512, forged = real + (5u << 20), base, size;
	sb_put(m.data, forged, 0, 9);
	sb_put(m.data, real, 0, 8);
	chunk_root_put(m.data, real);
	char msg[512];
	assert_int_equal(locate(&m, 0, -1, &base, &size, msg), 1);
	assert_int_equal(base, real);
	assert_int_equal(size, SCAN_FS_BYTES);
	/* without the chunk root, the newer copy: no evidence against it */
	memset(m.data + real + (2u << 20), 0, SCAN_NODE);
	assert_int_equal(locate(&m, 0, -1, &base, &size, msg), 1);
	assert_int_equal(base, forged);
	free(m.data);
}

/* More forged starts than the scan weighs, all before the filesystem:
 * bounded, and the filesystem is still found. */
static void test_scan_flood(void **state)
{
	(void)state;
	struct img m = { calloc(1, SCAN_IMG), SCAN_IMG, SCAN_IMG };
	assert_non_null(m.data);
	for (uint64_t k = 1; k <= 200; k++) /* k = 0: btrfs at byte 0 */
		sb_put(m.data, k * 4096, 0, 20);
	uint64_t real = (12u << 20) + 512, base, size;
	sb_put(m.data, real, 0, 8);
	chunk_root_put(m.data, real);
	char msg[512];
	assert_int_equal(locate(&m, 0, -1, &base, &size, msg), 1);
	assert_int_equal(base, real);
	free(m.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mem_read),
		cmocka_unit_test(test_file_read),
		cmocka_unit_test(test_io_error),
		cmocka_unit_test(test_device_limit),
		cmocka_unit_test(test_block_device),
		cmocka_unit_test(test_fixture_mbr),
		cmocka_unit_test(test_fixture_gpt),
		cmocka_unit_test(test_fixture_gpt4k),
		cmocka_unit_test(test_fixture_btrfs),
		cmocka_unit_test(test_sfdisk_mbr),
		cmocka_unit_test(test_sfdisk_gpt),
		cmocka_unit_test(test_sfdisk_gpt_backup),
		cmocka_unit_test(test_sfdisk_gpt4k),
		cmocka_unit_test(test_real_btrfs),
		cmocka_unit_test(test_gpt_bad_crc_both),
		cmocka_unit_test(test_gpt_primary_entries_bad),
		cmocka_unit_test(test_gpt_entries_past_end),
		cmocka_unit_test(test_gpt_absurd_entries),
		cmocka_unit_test(test_gpt_reversed_entry),
		cmocka_unit_test(test_pmbr_without_gpt),
		cmocka_unit_test(test_ebr_loop),
		cmocka_unit_test(test_ebr_long_chain),
		cmocka_unit_test(test_ebr_rules),
		cmocka_unit_test(test_gpt_wrong_my_lba),
		cmocka_unit_test(test_gpt_header_size),
		cmocka_unit_test(test_boot_sector),
		cmocka_unit_test(test_locate_choice),
		cmocka_unit_test(test_locate_truncated),
		cmocka_unit_test(test_table_changes),
		cmocka_unit_test(test_tiny),
		cmocka_unit_test(test_scan_forged_copy),
		cmocka_unit_test(test_scan_flood),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
