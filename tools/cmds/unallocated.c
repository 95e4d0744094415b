// SPDX-License-Identifier: MIT
/* btrfsimg unallocated: the byte ranges no live extent uses, and
 * optionally those bytes in one file, as The Sleuth Kit's blkls writes
 * them, for carvers; the map says where each range landed in OUT. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btrfsimg_forensic.h"
#include "cli.h"
#include "common/json.h"
#include "common/outfile.h"
#include "common/progress.h"

#define CHUNK (1u << 20)

static const char *out_name(const struct cli *c)
{
	return strcmp(c->out, "-") == 0 ? "standard output" : c->out;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

struct unalloc_run {
	struct cli *c;
	struct btrfsimg_device *devs; /* by devid order: where each was read from */
	struct btrfsimg_device_where *where;
	size_t ndevs;
	int fd; /* OUT, or -1 */
	uint8_t *buf;
	uint64_t at;	/* bytes listed so far: the next range's out_offset */
	uint64_t by[4]; /* bytes per kind */
	uint64_t n;
	int status;
};

/* One range's bytes into OUT; 0, or 1 to stop (said). */
static int copy_range(struct unalloc_run *u, const struct btrfsimg_unalloc_range *r)
{
	for (uint64_t off = 0; off < r->length; off += CHUNK) {
		size_t len = r->length - off < CHUNK ? (size_t)(r->length - off) : CHUNK;
		if (btrfsimg_device_read(u->c->fs, r->devid, r->physical + off, u->buf, len) < 0) {
			/* zeros keep the offsets of the map right */
			cli_warn("unallocated: %s; written as zeros", btrfsimg_errmsg(u->c->fs));
			memset(u->buf, 0, len);
			u->c->errors++;
		}
		if (write_all(u->fd, u->buf, len) < 0) {
			cli_warn("unallocated: write error on %s: %s", out_name(u->c),
				 strerror(errno));
			u->status = EXIT_FAILED;
			return 1;
		}
		progress_bytes("unallocated", u->at + off + len, 0);
	}
	return 0;
}

/* The device @devid, or NULL (missing, or not listed). */
static const struct btrfsimg_device *device(const struct unalloc_run *u, uint64_t devid,
					    const struct btrfsimg_device_where **w)
{
	for (size_t i = 0; i < u->ndevs; i++)
		if (u->devs[i].devid == devid && !u->devs[i].missing) {
			*w = u->where ? &u->where[i] : NULL;
			return &u->devs[i];
		}
	return NULL;
}

/* Where @r lies in its image file: the device's start there plus the
 * physical offset, when nothing but a partition (or --offset) lies
 * between; false through LUKS (the image holds ciphertext) or LVM (an
 * LV's segments map its bytes apart). */
static bool image_offset(const struct unalloc_run *u, const struct btrfsimg_unalloc_range *r,
			 const char **image, uint64_t *off)
{
	const struct btrfsimg_device_where *w = NULL;
	const struct btrfsimg_device *d = device(u, r->devid, &w);
	*image = d ? d->image : NULL;
	if (!d || !w || w->volume)
		return false;
	*off = d->offset + r->physical;
	return true;
}

static void range_json(const struct unalloc_run *u, const struct btrfsimg_unalloc_range *r,
		       uint64_t at, bool out)
{
	const char *image;
	uint64_t ioff = 0;
	bool linear = image_offset(u, r, &image, &ioff);
	struct jw w;
	jw_begin(&w, stdout);
	jw_str(&w, "type", "range");
	jw_str(&w, "kind", btrfsimg_unalloc_kind_name(r->kind));
	jw_u64(&w, "devid", r->devid);
	jw_u64(&w, "physical", r->physical);
	jw_u64(&w, "length", r->length);
	if (r->has_logical)
		jw_u64(&w, "logical", r->logical);
	else
		jw_null(&w, "logical");
	jw_i64(&w, "mirror", r->mirror);
	jw_str(&w, "image", image);
	if (linear)
		jw_u64(&w, "image_offset", ioff);
	else
		jw_null(&w, "image_offset");
	if (out)
		jw_u64(&w, "out_offset", at);
	jw_end(&w);
}

static void range_text(const struct unalloc_run *u, const struct btrfsimg_unalloc_range *r,
		       uint64_t at, bool out)
{
	const char *image;
	uint64_t ioff = 0;
	bool linear = image_offset(u, r, &image, &ioff);
	printf("%6" PRIu64 " %14" PRIu64 " %14" PRIu64 "  %-8s ", r->devid, r->physical, r->length,
	       btrfsimg_unalloc_kind_name(r->kind));
	if (r->has_logical)
		printf("%14" PRIu64 " %6d", r->logical, r->mirror);
	else
		printf("%14s %6s", "-", "-");
	if (linear)
		printf(" %14" PRIu64, ioff);
	else
		printf(" %14s", "-");
	if (out)
		printf(" %14" PRIu64, at);
	printf("\n");
}

static void summary(const struct unalloc_run *u)
{
	if (u->c->json) {
		struct jw w;
		jw_begin(&w, stdout);
		jw_str(&w, "type", "summary");
		jw_u64(&w, "ranges", u->n);
		jw_u64(&w, "bytes", u->at);
		for (int k = 0; k < 4; k++)
			jw_u64(&w, btrfsimg_unalloc_kind_name(k), u->by[k]);
		jw_end(&w);
		return;
	}
	printf("%" PRIu64 " ranges, %" PRIu64 " bytes: device %" PRIu64 ", data %" PRIu64
	       ", metadata %" PRIu64 ", parity %" PRIu64 "\n",
	       u->n, u->at, u->by[0], u->by[1], u->by[2], u->by[3]);
}

static int on_range(void *ctx, const struct btrfsimg_unalloc_range *r)
{
	struct unalloc_run *u = ctx;
	bool out = u->c->out != NULL, map = !out || strcmp(u->c->out, "-") != 0;
	if (map && u->c->json)
		range_json(u, r, u->at, out);
	else if (map)
		range_text(u, r, u->at, out);
	if (u->fd >= 0 && copy_range(u, r))
		return 1;
	u->by[r->kind & 3] += r->length;
	u->at += r->length;
	u->n++;
	return 0;
}

static int open_out(struct unalloc_run *u)
{
	struct cli *c = u->c;
	if (!c->out)
		return 0;
	u->fd = strcmp(c->out, "-") == 0 ? STDOUT_FILENO : out_create(AT_FDCWD, c->out, 0644);
	if (u->fd < 0) {
		cli_warn("unallocated: cannot create %s: %s (OUT is created new, never over a "
			 "file or through a link)", c->out, strerror(-u->fd));
		u->fd = -1;
		return EXIT_FAILED;
	}
	u->buf = malloc(CHUNK);
	if (!u->buf) {
		cli_warn("unallocated: out of memory");
		return EXIT_FAILED;
	}
	return 0;
}

static int cmd_unallocated(struct cli *c)
{
	struct unalloc_run u = { .c = c, .fd = -1 };
	size_t n = 0;
	if (btrfsimg_devices(c->fs, NULL, 0, &n) == 0 && n &&
	    (u.devs = calloc(n, sizeof(*u.devs))) &&
	    btrfsimg_devices(c->fs, u.devs, n, &u.ndevs) == 0 && u.ndevs > n)
		u.ndevs = n;
	if (u.ndevs && (u.where = calloc(u.ndevs, sizeof(*u.where))))
		for (size_t i = 0; i < u.ndevs; i++)
			btrfsimg_device_where(c->fs, &u.devs[i], &u.where[i]);
	bool map = !c->out || strcmp(c->out, "-") != 0;
	int status = open_out(&u);
	if (status == EXIT_OK && map && !c->json)
		printf("%6s %14s %14s  %-8s %14s %6s %14s%s\n", "devid", "physical", "length",
		       "kind", "logical", "mirror", "image_offset",
		       c->out ? "     out_offset" : "");
	int rc = status == EXIT_OK ? btrfsimg_unallocated(c->fs, on_range, &u) : 0;
	progress_done();
	if (rc < 0)
		status = cli_fail(c, rc, "unallocated");
	else if (u.status)
		status = u.status;
	else if (status == EXIT_OK && map)
		summary(&u);
	if (u.fd >= 0 && u.fd != STDOUT_FILENO && close(u.fd) < 0 && status == EXIT_OK) {
		cli_warn("unallocated: write error on %s: %s", c->out, strerror(errno));
		status = EXIT_FAILED;
	}
	free(u.buf);
	free(u.devs);
	free(u.where);
	return status == EXIT_OK ? cli_status(c) : status;
}

/* The last argument is OUT when it is '-' or names no existing file
 * (OUT is never overwritten: an existing file is read as an image). */
static int unallocated_check(struct cli *c)
{
	if (cli_need_images(c, 1, "IMAGE... [OUT]"))
		return EXIT_USAGE;
	const char *last = c->images[c->nimages - 1];
	struct stat st;
	if (c->nimages >= 2 &&
	    (strcmp(last, "-") == 0 || (stat(last, &st) < 0 && errno == ENOENT))) {
		c->out = last;
		c->nimages--;
	}
	if (c->out && strcmp(c->out, "-") == 0 && isatty(STDOUT_FILENO)) {
		cli_warn("unallocated: standard output is a terminal; redirect it, or give a file");
		return EXIT_USAGE;
	}
	return 0;
}

static const struct cmd_option unallocated_options[] = {
	{ OPT_JSON, "one JSON object per range, then a summary" },
	CMD_IMAGE_OPTIONS, { OPT_GENERATION, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_unallocated = {
	.name = "unallocated",
	.summary = "byte ranges no live extent uses, and their bytes (carving)",
	.args = "IMAGE... [OUT]",
	.about = "List every byte range of every device that no live extent uses: device\n"
		 "space outside every chunk ('device'; superblock copies left out), and\n"
		 "inside chunks the ranges the extent tree does not allocate, per copy\n"
		 "('data', 'metadata', RAID5/6 'parity' of empty rows), each with its\n"
		 "device, physical offset (from the start of the filesystem), length and\n"
		 "the logical address and mirror where it has one, and image_offset: where\n"
		 "it lies in the image file ('-' through LUKS or LVM). With OUT (a file that\n"
		 "does not exist yet, or '-' for standard output) those bytes are written\n"
		 "one after another in the order listed, as blkls does, and the map gains\n"
		 "out_offset: a hit at byte X of OUT lies in the range with out_offset <=\n"
		 "X < out_offset + length, at physical + (X - out_offset) of its device.\n"
		 "With '-' the map is not printed (run again without OUT to get it).",
	.examples = "btrfsimg unallocated disk.img\n"
		    "btrfsimg unallocated --json disk.img unalloc.bin\n"
		    "btrfsimg unallocated dev1.img dev2.img - | foremost -i /dev/stdin",
	.options = unallocated_options,
	.check = unallocated_check,
	.run = cmd_unallocated,
};
