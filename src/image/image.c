/* SPDX-License-Identifier: MIT */
/*
 * Image handles (btrfsimg_image_*): one image file opened as its
 * container, for what the layer listing prints (format, size, segments,
 * acquisition metadata, stored hashes) and for integrity checks
 * (btrfsimg_image_verify, as ewfverify: every chunk against its checksum,
 * the whole disk against the stored MD5/SHA-1). No filesystem handle.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image/container.h"

#include "base/cursor.h"

struct btrfsimg_image {
	struct bi_ctr *c;
	char err[1024];
};

/* What @path is when @format is AUTO; a later segment of a set opens from
 * its first (*@first, malloc'd). */
static int image_format(const char *path, int *format, char **first, char *err, size_t errlen)
{
	*first = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "'%s': cannot open: %s", path, strerror(e));
		return -e;
	}
	int rc = 0;
	if (*format == BTRFSIMG_FORMAT_AUTO)
		rc = bi_ctr_detect(path, fd, format);
	close(fd);
	if (rc < 0) {
		snprintf(err, errlen, "'%s': cannot read its first bytes: %s", path, strerror(-rc));
		return rc;
	}
	if (*format == BTRFSIMG_FORMAT_EWF)
		*first = bi_ctr_first_segment(path);
	return 0;
}

int btrfsimg_image_open(btrfsimg_image **out, const char *path, int format, char *err,
			size_t errlen)
{
	char dummy[8];
	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (!out || !path || !btrfsimg_format_name(format))
		return -EINVAL;
	*out = NULL;
	char *first;
	int rc = image_format(path, &format, &first, err, errlen);
	if (rc < 0)
		return rc;
	btrfsimg_image *img = calloc(1, sizeof(*img));
	if (!img) {
		free(first);
		return -ENOMEM;
	}
	rc = bi_ctr_open(&img->c, first ? first : path, format, err, errlen);
	free(first);
	if (rc < 0) {
		free(img);
		return rc;
	}
	*out = img;
	return 0;
}

void btrfsimg_image_free(btrfsimg_image *img)
{
	if (!img)
		return;
	bi_ctr_free(img->c);
	free(img);
}

void btrfsimg_image_info(const btrfsimg_image *img, struct btrfsimg_image_info *out)
{
	memset(out, 0, sizeof(*out));
	const struct bi_ctr *c = img->c;
	out->format = c->ops->format;
	out->size = c->size;
	out->detail = c->detail ? c->detail : "";
	out->segments = c->nsegs;
	out->meta = c->nmeta;
	out->notes = c->nnotes;
	out->has_md5 = c->has_md5;
	out->has_sha1 = c->has_sha1;
	memcpy(out->md5, c->md5, sizeof(out->md5));
	memcpy(out->sha1, c->sha1, sizeof(out->sha1));
}

const char *btrfsimg_image_segment(const btrfsimg_image *img, size_t i, bool *present)
{
	if (!img || i >= img->c->nsegs)
		return NULL;
	if (present)
		*present = img->c->segs[i].present;
	return img->c->segs[i].name;
}

int btrfsimg_image_meta(const btrfsimg_image *img, size_t i, const char **key, const char **value)
{
	if (!img || i >= img->c->nmeta)
		return -ENOENT;
	*key = img->c->meta[i].key;
	*value = img->c->meta[i].value;
	return 0;
}

const char *btrfsimg_image_note(const btrfsimg_image *img, size_t i)
{
	return img && i < img->c->nnotes ? img->c->notes[i] : NULL;
}

int btrfsimg_image_read(btrfsimg_image *img, uint64_t off, void *buf, size_t len)
{
	if (!img || (!buf && len))
		return -EINVAL;
	char why[768] = "";
	img->err[0] = '\0';
	int rc = bi_ctr_read(img->c, off, buf, len, why, sizeof(why));
	if (rc < 0)
		snprintf(img->err, sizeof(img->err), "'%s': %s", img->c->path, why);
	return rc;
}

const char *btrfsimg_image_errmsg(const btrfsimg_image *img)
{
	return img ? img->err : "";
}

/* ---------------------------------------------------------------- */
/* Verification */

/* Pieces of the disk read at once: a multiple of every EWF chunk size
 * (up to 32768 sectors of 512 bytes = 16 MiB would be rare; 1 MiB holds
 * the usual 32 KiB chunks whole), split further on a failure. */
#define VERIFY_PIECE (1u << 20)
#define VERIFY_SMALL (32u * 1024)

struct verify {
	btrfsimg_image *img;
	EVP_MD_CTX *md5, *sha1;
	uint8_t *buf;
	btrfsimg_bad_range_fn bad;
	void *ctx;
	struct btrfsimg_image_verify *out;
};

/* Read [off, off+len) into v->buf; on failure, again in VERIFY_SMALL
 * pieces, zeroing and reporting each bad one. */
static void verify_piece(struct verify *v, uint64_t off, size_t len)
{
	if (btrfsimg_image_read(v->img, off, v->buf, len) == 0)
		return;
	for (size_t at = 0; at < len; at += VERIFY_SMALL) {
		size_t n = len - at < VERIFY_SMALL ? len - at : VERIFY_SMALL;
		if (btrfsimg_image_read(v->img, off + at, v->buf + at, n) == 0)
			continue;
		memset(v->buf + at, 0, n);
		if (v->out->bad_ranges++ == 0)
			v->out->first_bad = off + at;
		if (v->bad)
			v->bad(v->ctx, off + at, n, v->img->err);
	}
}

static int verify_all(struct verify *v, btrfsimg_progress_fn progress, void *ctx)
{
	uint64_t size = v->img->c->size;
	for (uint64_t off = 0; off < size;) {
		size_t n = size - off < VERIFY_PIECE ? (size_t)(size - off) : VERIFY_PIECE;
		verify_piece(v, off, n);
		if (EVP_DigestUpdate(v->md5, v->buf, n) != 1 ||
		    EVP_DigestUpdate(v->sha1, v->buf, n) != 1)
			return -ENOMEM;
		off += n;
		v->out->bytes = off;
		if (progress && progress(ctx, off, size))
			return -ECANCELED;
	}
	return 0;
}

int btrfsimg_image_verify(btrfsimg_image *img, btrfsimg_progress_fn progress,
			  btrfsimg_bad_range_fn bad, void *ctx, struct btrfsimg_image_verify *out)
{
	if (!img || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	struct verify v = { .img = img, .bad = bad, .ctx = ctx, .out = out };
	v.md5 = EVP_MD_CTX_new();
	v.sha1 = EVP_MD_CTX_new();
	v.buf = malloc(VERIFY_PIECE);
	int rc = -ENOMEM;
	if (v.md5 && v.sha1 && v.buf && EVP_DigestInit_ex(v.md5, EVP_md5(), NULL) == 1 &&
	    EVP_DigestInit_ex(v.sha1, EVP_sha1(), NULL) == 1)
		rc = verify_all(&v, progress, ctx);
	if (rc == 0 && (EVP_DigestFinal_ex(v.md5, out->md5, NULL) != 1 ||
			EVP_DigestFinal_ex(v.sha1, out->sha1, NULL) != 1))
		rc = -ENOMEM;
	if (rc == 0) {
		const struct bi_ctr *c = img->c;
		out->md5_match = c->has_md5 && !memcmp(c->md5, out->md5, sizeof(out->md5));
		out->sha1_match = c->has_sha1 && !memcmp(c->sha1, out->sha1, sizeof(out->sha1));
	}
	if (rc == -ENOMEM)
		snprintf(img->err, sizeof(img->err), "out of memory hashing the image");
	EVP_MD_CTX_free(v.md5);
	EVP_MD_CTX_free(v.sha1);
	free(v.buf);
	return rc;
}
