// SPDX-License-Identifier: MIT
/*
 * btrfsimg verify-image: check an image container's integrity as the
 * format's own tool does (ewfverify for EWF): read every byte of the disk
 * it holds, each chunk against its stored checksum, and compare the MD5
 * and SHA-1 of the whole with those stored at acquisition. A progress line
 * on a terminal. (Not `verify`: that is the filesystem's scrub.)
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "common/json.h"

/* Unreadable ranges are said as runs: adjacent bad pieces failing for one
 * reason make one line (its first error said), and after VERIFY_LINES
 * lines only a count. A disk mostly unreadable gives a few lines, not one
 * per 32 KiB. */
#define VERIFY_LINES 50

struct vstate {
	const char *image;
	bool tty;
	struct timespec start, last;
	bool shown;
	/* the run of adjacent unreadable ranges failing for one reason, said
	 * as one line when it ends: a missing segment is thousands of reads */
	uint64_t run_off, run_end, run_n;
	char run_msg[512], run_shape[512];
	uint64_t lines, unsaid; /* runs said; runs past VERIFY_LINES */
};

static double secs(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static int progress(void *ctx, uint64_t done, uint64_t total)
{
	struct vstate *v = ctx;
	if (!v->tty)
		return 0;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (v->shown && secs(&v->last, &now) < 0.1 && done < total)
		return 0;
	v->last = now;
	v->shown = true;
	double f = total ? (double)done / (double)total : 1, t = secs(&v->start, &now);
	double left = f > 0.01 ? t / f - t : 0;
	fprintf(stderr, "\rverify-image: %" PRIu64 " of %" PRIu64 " MiB, %3.0f%%, %d:%02d left ",
		done >> 20, total >> 20, 100 * f, (int)left / 60, (int)left % 60);
	return 0;
}

/* @msg with each run of digits as one '#': the reason without where. */
static void shape(const char *msg, char *out, size_t n)
{
	size_t k = 0;
	for (const char *p = msg; *p && k + 1 < n; p++)
		if (*p < '0' || *p > '9')
			out[k++] = *p;
		else if (p[1] < '0' || p[1] > '9')
			out[k++] = '#';
	out[k] = '\0';
}

static void run_say(struct vstate *v)
{
	if (!v->run_n)
		return;
	if (v->lines++ >= VERIFY_LINES) {
		v->unsaid++;
		v->run_n = 0;
		return;
	}
	if (v->tty && v->shown)
		fputc('\n', stderr);
	v->shown = false;
	if (v->run_n == 1)
		cli_warn("%s: bytes %" PRIu64 "-%" PRIu64 ": %s", v->image, v->run_off,
			 v->run_end - 1, v->run_msg);
	else
		cli_warn("%s: bytes %" PRIu64 "-%" PRIu64 ": %" PRIu64
			 " unreadable ranges in a row for one reason; the first: %s",
			 v->image, v->run_off, v->run_end - 1, v->run_n, v->run_msg);
	v->run_n = 0;
}

static void bad_range(void *ctx, uint64_t off, uint64_t len, const char *msg)
{
	struct vstate *v = ctx;
	char sh[sizeof(v->run_shape)];
	shape(msg, sh, sizeof(sh));
	if (v->run_n && off == v->run_end && !strcmp(sh, v->run_shape)) {
		v->run_end = off + len;
		v->run_n++;
		return;
	}
	run_say(v);
	v->run_off = off;
	v->run_end = off + len;
	v->run_n = 1;
	snprintf(v->run_msg, sizeof(v->run_msg), "%s", msg);
	memcpy(v->run_shape, sh, sizeof(sh));
}

/* The last run, and how many were not said. */
static void runs_end(struct vstate *v)
{
	run_say(v);
	if (v->unsaid)
		cli_warn("%s: %" PRIu64 " more runs of unreadable ranges not listed", v->image,
			 v->unsaid);
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

/* The files read (a container's segments, extent files, backing files):
 * those the library opened, which are not always the names the container
 * stores (a VMDK extent named by an absolute path is read beside the
 * descriptor). In text, only when they are other than @image alone. */
static void files_text(const btrfsimg_image *img, const char *image,
		       const struct btrfsimg_image_info *in)
{
	bool present;
	if (in->segments == 1 && !strcmp(btrfsimg_image_segment(img, 0, &present), image))
		return;
	for (size_t i = 0; i < in->segments; i++) {
		const char *f = btrfsimg_image_segment(img, i, &present);
		if (present)
			printf("  file  %s\n", f);
	}
}

static void report_text(const btrfsimg_image *img, const char *image,
			const struct btrfsimg_image_info *in, const struct btrfsimg_image_verify *r)
{
	char h[41], s[41];
	printf("%s: %s, %" PRIu64 " bytes read\n", image, btrfsimg_format_name(in->format),
	       r->bytes);
	files_text(img, image, in);
	printf("  unreadable ranges   %" PRIu64 "\n", r->bad_ranges);
	hex(r->md5, 16, h);
	if (in->has_md5)
		hex(in->md5, 16, s);
	printf("  MD5  computed  %s\n       stored    %s  %s\n", h, in->has_md5 ? s : "(none)",
	       !in->has_md5   ? ""
	       : r->md5_match ? "match"
			      : "MISMATCH");
	hex(r->sha1, 20, h);
	if (in->has_sha1)
		hex(in->sha1, 20, s);
	printf("  SHA1 computed  %s\n       stored    %s  %s\n", h, in->has_sha1 ? s : "(none)",
	       !in->has_sha1   ? ""
	       : r->sha1_match ? "match"
			       : "MISMATCH");
}

static void report_json(const btrfsimg_image *img, const char *image,
			const struct btrfsimg_image_info *in, const struct btrfsimg_image_verify *r)
{
	char h[41];
	struct jw w;
	bool present;
	jw_begin(&w, stdout);
	jw_str(&w, "image", image);
	jw_str(&w, "format", btrfsimg_format_name(in->format));
	jw_open_arr(&w, "files");
	for (size_t i = 0; i < in->segments; i++) {
		const char *f = btrfsimg_image_segment(img, i, &present);
		if (present)
			jw_str(&w, NULL, f);
	}
	jw_close_arr(&w);
	jw_u64(&w, "bytes", r->bytes);
	jw_u64(&w, "unreadable_ranges", r->bad_ranges);
	hex(r->md5, 16, h);
	jw_str(&w, "md5", h);
	hex(in->md5, 16, h);
	jw_str(&w, "md5_stored", in->has_md5 ? h : NULL);
	hex(r->sha1, 20, h);
	jw_str(&w, "sha1", h);
	hex(in->sha1, 20, h);
	jw_str(&w, "sha1_stored", in->has_sha1 ? h : NULL);
	jw_bool(&w, "verified",
		r->bad_ranges == 0 && (in->has_md5 || in->has_sha1) &&
			(!in->has_md5 || r->md5_match) && (!in->has_sha1 || r->sha1_match));
	jw_end(&w);
}

/* EXIT_OK: read whole, stored hashes match; EXIT_DAMAGED: a bad range or a
 * mismatch; EXIT_FAILED: cannot open. */
static int verify_one(const struct cli *c, const char *image)
{
	char err[1024];
	btrfsimg_image *img;
	int rc = btrfsimg_image_open(&img, image, c->format, err, sizeof(err));
	if (rc < 0) {
		cli_warn("%s", err);
		return EXIT_FAILED;
	}
	struct btrfsimg_image_info in;
	btrfsimg_image_info(img, &in);
	for (size_t i = 0; i < in.notes; i++)
		cli_warn("warning: %s", btrfsimg_image_note(img, i));
	struct vstate v = { .image = image, .tty = isatty(2) && !c->quiet };
	clock_gettime(CLOCK_MONOTONIC, &v.start);
	struct btrfsimg_image_verify r;
	rc = btrfsimg_image_verify(img, progress, bad_range, &v, &r);
	runs_end(&v);
	if (v.tty && v.shown)
		fputs("\r\033[K", stderr);
	if (rc < 0) {
		cli_warn("%s: %s", image, btrfsimg_image_errmsg(img));
		btrfsimg_image_free(img);
		return EXIT_FAILED;
	}
	if (c->json)
		report_json(img, image, &in, &r);
	else
		report_text(img, image, &in, &r);
	int status = EXIT_OK;
	if (r.bad_ranges || in.notes || (in.has_md5 && !r.md5_match) ||
	    (in.has_sha1 && !r.sha1_match))
		status = EXIT_DAMAGED;
	if (!in.has_md5 && !in.has_sha1)
		cli_warn("%s: no hash stored in the image; computed only", image);
	btrfsimg_image_free(img);
	return status;
}

static int cmd_verify_image(struct cli *c)
{
	int status = EXIT_OK;
	for (int i = 0; i < c->nimages; i++) {
		int s = verify_one(c, c->images[i]);
		if (s > status)
			status = s;
	}
	return status;
}

static const struct cmd_option verify_image_options[] = {
	{ OPT_JSON, "one JSON object per image" },
	{ OPT_FORMAT, NULL },
	{ OPT_QUIET, "no progress line" },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_verify_image = {
	.name = "verify-image",
	.summary = "check an EWF image against its stored checksums and hashes",
	.args = "IMAGE...",
	.about = "Read the whole disk an image holds, as ewfverify does: every EWF chunk\n"
		 "against its stored checksum (a bad one is named, with its byte range),\n"
		 "and the MD5 and SHA-1 of the whole disk against those stored at\n"
		 "acquisition; prints computed and stored. Other formats are hashed (they\n"
		 "store no hash). A progress line on a terminal. Exit status 0 when every\n"
		 "byte was read and the stored hashes match, 1 when not.",
	.examples = "btrfsimg verify-image case.E01\n"
		    "btrfsimg verify-image --json case.E01",
	.options = verify_image_options,
	.run = cmd_verify_image,
	.no_fs = true,
};
