/* SPDX-License-Identifier: MIT */
/*
 * qcow (QEMU copy-on-write, versions 1 to 3; compressed clusters too)
 * through libqcow. An image with a backing file reads the clusters it
 * does not hold from that file, found as QEMU finds a relative name: the
 * name in the header, relative to the image's folder. An absolute name or
 * one with ".." is not followed out of that folder: its last component is
 * looked for beside the image (bi_ctr_companion), and both names are
 * reported. A backing file is read only when it is a regular file, opened
 * without blocking (a FIFO named there must not hang the open), and
 * libqcow reads it through that descriptor (bfiofd.h), never by name.
 * libqcow reads a backing file only when it is qcow itself; a chain is
 * followed up to QCOW_CHAIN files.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#define HAVE_LIBBFIO 1 /* libqcow.h: declare libqcow_file_open_file_io_handle */
#include <libqcow.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image/bfiofd.h"
#include "image/container.h"
#include "image/qcow_bounds.h"

#define QCOW_CHAIN 16

struct qcow {
	libqcow_file_t *f[QCOW_CHAIN];	   /* [0] the image, then its backing files */
	struct bi_qcheck *chk[QCOW_CHAIN]; /* their bounds (qcow_bounds.h) */
	int fd[QCOW_CHAIN];
	libbfio_handle_t *io[QCOW_CHAIN]; /* libqcow reads through fd[i] */
	int n;
};

static void qcow_why(libqcow_error_t **e, char *why, size_t len)
{
	why[0] = '\0';
	if (e && *e) {
		libqcow_error_sprint(*e, why, len);
		libqcow_error_free(e);
	}
	for (char *p = why; *p; p++)
		if (*p == '\n')
			*p = *(p + 1) ? ';' : '\0';
}

static void qcow_close(struct bi_ctr *c)
{
	struct qcow *q = c->h;
	for (int i = 0; i < q->n; i++) {
		libqcow_file_close(q->f[i], NULL);
		libqcow_file_free(&q->f[i], NULL);
		libbfio_handle_free(&q->io[i], NULL);
		bi_qcheck_free(q->chk[i]);
		if (q->fd[i] >= 0)
			close(q->fd[i]);
	}
	free(q);
	c->h = NULL;
}

/* Open @name, whose descriptor @fd (taken over) the caller opened (and
 * checked): libqcow reads through it, never opening @name itself. */
static int open_one(struct qcow *q, const char *name, int fd, char *err, size_t errlen)
{
	libqcow_error_t *e = NULL;
	libqcow_file_t *f = NULL;
	char why[512];
	struct bi_qcheck *chk = NULL;
	int rc = bi_qcheck_open(&chk, fd, name, err, errlen);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	libbfio_handle_t *io = NULL;
	if (bi_bfio_fd(&io, fd) < 0 || libqcow_file_initialize(&f, &e) != 1) {
		libbfio_handle_free(&io, NULL);
		bi_qcheck_free(chk);
		close(fd);
		qcow_why(&e, why, sizeof(why));
		snprintf(err, errlen, "qcow image '%s': %s", name, why[0] ? why : "out of memory");
		return -ENOMEM;
	}
	q->chk[q->n] = chk;
	q->fd[q->n] = fd;
	q->io[q->n] = io;
	q->f[q->n++] = f;
	if (libqcow_file_open_file_io_handle(f, io, LIBQCOW_OPEN_READ, &e) != 1) {
		q->n--;
		libqcow_file_free(&q->f[q->n], NULL);
		libbfio_handle_free(&q->io[q->n], NULL);
		bi_qcheck_free(q->chk[q->n]);
		close(q->fd[q->n]);
		qcow_why(&e, why, sizeof(why));
		snprintf(err, errlen, "qcow image '%s': cannot open: %s", name, why);
		return -EIO;
	}
	uint32_t enc = 0;
	if (libqcow_file_get_encryption_method(f, &enc, NULL) == 1 &&
	    enc != LIBQCOW_ENCRYPTION_METHOD_NONE) {
		snprintf(err, errlen, "qcow image '%s': encrypted (method %u), not supported", name,
			 enc);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* The backing file of @f, or NULL (none; *rc < 0 on error); its name as
 * stored to @stored (malloc'd), *@moved when that is not where it is
 * looked for (bi_ctr_companion). */
static char *backing(libqcow_file_t *f, const char *name, char **stored, bool *moved, int *rc)
{
	size_t sz = 0;
	*rc = 0;
	if (libqcow_file_get_utf8_backing_filename_size(f, &sz, NULL) != 1 || sz <= 1)
		return NULL;
	if (sz > 4096) {
		*rc = -EUCLEAN;
		return NULL;
	}
	uint8_t *b = malloc(sz);
	if (!b || libqcow_file_get_utf8_backing_filename(f, b, sz, NULL) != 1) {
		free(b);
		*rc = -EIO;
		return NULL;
	}
	b[sz - 1] = 0;
	char *path = bi_ctr_companion(name, (char *)b, moved);
	*stored = (char *)b;
	if (!path)
		*rc = -EUCLEAN;
	return path;
}

/* Open the backing file @b of @cur (@stored as the header names it): only
 * a regular file, only in @cur's folder (bi_ctr_companion); a FIFO or a
 * device named there is refused, never opened for good. */
static int open_backing(struct qcow *q, const char *cur, const char *stored, const char *b,
			bool moved, char *err, size_t errlen)
{
	const char *why;
	char where[4200];
	where[0] = '\0';
	if (moved)
		snprintf(where, sizeof(where),
			 " (named '%s' in it; only the image's folder is searched)", stored);
	int fd = bi_ctr_open_regular(b, &why);
	if (fd == -ENOENT) {
		snprintf(err, errlen,
			 "qcow image '%s': its backing file '%s'%s is not there (put it beside "
			 "the image)",
			 cur, b, where);
		return fd;
	}
	if (fd < 0) {
		snprintf(err, errlen,
			 "qcow image '%s': its backing file '%s'%s %s: refused (only a regular "
			 "file is read)",
			 cur, b, where, why);
		return fd;
	}
	return open_one(q, b, fd, err, errlen);
}

static int qcow_chain(struct bi_ctr *c, struct qcow *q, char *err, size_t errlen)
{
	for (;;) {
		const char *cur = c->segs[c->nsegs - 1].name;
		int rc;
		char *stored = NULL;
		bool moved;
		char *b = backing(q->f[q->n - 1], cur, &stored, &moved, &rc);
		if (!b) {
			if (rc < 0)
				snprintf(err, errlen,
					 "qcow image '%s': unreadable backing file name '%s'", cur,
					 stored ? stored : "");
			free(stored);
			return rc;
		}
		rc = bi_ctr_add_meta(c, "backing_file", b);
		if (rc == 0 && moved)
			rc = bi_ctr_add_meta(c, "backing_file_stored", stored);
		if (rc == 0 && q->n >= QCOW_CHAIN) {
			snprintf(err, errlen, "qcow image '%s': more than %d backing files",
				 c->path, QCOW_CHAIN);
			rc = -ELOOP;
		}
		if (rc == 0)
			rc = open_backing(q, cur, stored, b, moved, err, errlen);
		if (rc == 0)
			rc = bi_ctr_add_seg(c, b, true);
		if (rc == 0 &&
		    libqcow_file_set_parent_file(q->f[q->n - 2], q->f[q->n - 1], NULL) != 1) {
			snprintf(err, errlen, "qcow image '%s': cannot use backing file '%s'", cur,
				 b);
			rc = -EIO;
		}
		free(b);
		free(stored);
		if (rc < 0)
			return rc;
	}
}

static int qcow_open(struct bi_ctr *c, char *err, size_t errlen)
{
	struct qcow *q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	c->h = q;
	int fd = open(c->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int en = errno;
		snprintf(err, errlen, "qcow image '%s': cannot open: %s", c->path, strerror(en));
		return -en;
	}
	int rc = open_one(q, c->path, fd, err, errlen);
	if (rc == 0)
		rc = bi_ctr_add_seg(c, c->path, true);
	if (rc == 0)
		rc = qcow_chain(c, q, err, errlen);
	size64_t size = 0;
	if (rc == 0 && libqcow_file_get_media_size(q->f[0], &size, NULL) != 1) {
		snprintf(err, errlen, "qcow image '%s': no media size", c->path);
		rc = -EIO;
	}
	uint32_t ver = 0;
	if (rc == 0 && libqcow_file_get_format_version(q->f[0], &ver, NULL) == 1)
		c->detail = ver == 1 ? "version 1" : ver == 2 ? "version 2" : "version 3";
	c->size = size;
	return rc;
}

static int qcow_read(struct bi_ctr *c, uint64_t off, void *buf, size_t len, char *err,
		     size_t errlen)
{
	struct qcow *q = c->h;
	libqcow_error_t *e = NULL;
	uint8_t *p = buf;
	for (int i = 0; i < q->n; i++) {
		int rc = bi_qcheck_range(q->chk[i], off, len, err, errlen);
		if (rc < 0)
			return rc;
	}
	if (q->n == 1 && bi_qcheck_fast(q->chk[0], off, buf, len) == 0)
		return 0;
	while (len > 0) {
		ssize_t r = libqcow_file_read_buffer_at_offset(q->f[0], p, len, (off64_t)off, &e);
		if (r <= 0) {
			char why[512];
			qcow_why(&e, why, sizeof(why));
			snprintf(err, errlen,
				 "qcow read of %zu bytes at offset %" PRIu64 " failed: %s", len,
				 off, r == 0 ? "no data" : why);
			return -EIO;
		}
		p += r;
		off += (uint64_t)r;
		len -= (size_t)r;
	}
	return 0;
}

/* The background reader's own tables and buffers (container.c): the fast
 * path only, so only for an image without a backing file; libqcow is not
 * touched off the caller's thread. */
static void *qcow_ahead_new(struct bi_ctr *c)
{
	struct qcow *q = c->h;
	struct bi_qcheck *chk = NULL;
	char err[8];
	if (q->n != 1 || bi_qcheck_open(&chk, q->fd[0], c->path, err, sizeof(err)) < 0)
		return NULL;
	return chk;
}

static int qcow_ahead_read(struct bi_ctr *c, void *st, uint64_t off, uint8_t *buf, size_t len)
{
	char err[8];
	(void)c;
	if (bi_qcheck_range(st, off, len, err, sizeof(err)) < 0)
		return 1;
	return bi_qcheck_fast(st, off, buf, len);
}

static void qcow_ahead_free(void *st)
{
	bi_qcheck_free(st);
}

const struct bi_ctr_ops bi_ctr_qcow_ops = {
	.format = BTRFSIMG_FORMAT_QCOW2,
	.cached = true,
	.open = qcow_open,
	.read = qcow_read,
	.close = qcow_close,
	.ahead_new = qcow_ahead_new,
	.ahead_read = qcow_ahead_read,
	.ahead_free = qcow_ahead_free,
};
