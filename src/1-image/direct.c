/* SPDX-License-Identifier: MIT */
/*
 * Direct reads of a plain image file (see direct.h). O_DIRECT wants the
 * offset, the length and the buffer aligned to the logical block size of
 * the file's device; ALIGN (4096) covers every device met in practice, and
 * a read the kernel refuses (EINVAL) just makes the caller fall back to
 * buffered reads. A request is widened to aligned bounds and *data points
 * into the widened buffer, so nothing is copied. Two buffers: the one the
 * caller is reading and the one a read ahead (aio_read) fills meanwhile,
 * so the device is kept busy while the caller checks what it has. The
 * file is opened again through /proc/self/fd, so it is the same file
 * whatever its path became.
 */
#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "1-image/direct.h"

#include "0-base/cursor.h"

#define ALIGN 4096u

struct bi_direct {
	int fd;
	uint64_t base, size; /* the device's window of the file */
	uint8_t *buf[2];
	size_t cap;
	int cur;      /* the buffer the last read returned */
	bool pending; /* an aio_read into buf[!cur] is under way */
	struct aiocb cb;
	uint64_t p_off; /* its request, as the caller gave it */
	size_t p_len;
};

struct bi_direct *bi_direct_open(const struct bi_dev *d, size_t maxlen)
{
	if (d->fd < 0 || d->ctr || d->vread || d->rfn || d->mem || maxlen > (1u << 30))
		return NULL;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", d->fd);
	struct bi_direct *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	r->cap = maxlen + 2 * ALIGN;
	for (int i = 0; i < 2; i++)
		if (posix_memalign((void **)&r->buf[i], ALIGN, r->cap) != 0)
			r->buf[i] = NULL;
	if (r->fd < 0 || !r->buf[0] || !r->buf[1]) {
		bi_direct_close(r);
		return NULL;
	}
	r->base = d->base;
	r->size = d->size;
	return r;
}

/* Wait for the read ahead; its byte count or -1. */
static ssize_t ahead_wait(struct bi_direct *r)
{
	const struct aiocb *list[1] = { &r->cb };
	while (aio_error(&r->cb) == EINPROGRESS)
		if (aio_suspend(list, 1, NULL) < 0 && errno != EINTR)
			break;
	r->pending = false;
	return aio_error(&r->cb) == 0 ? aio_return(&r->cb) : (aio_return(&r->cb), -1);
}

void bi_direct_close(struct bi_direct *r)
{
	if (!r)
		return;
	if (r->pending)
		ahead_wait(r);
	if (r->fd >= 0)
		close(r->fd);
	free(r->buf[0]);
	free(r->buf[1]);
	free(r);
}

/* The aligned span [*a, *a + *want) around the request; false if out of
 * bounds. *skip: where the request starts inside it. */
static bool span(const struct bi_direct *r, uint64_t off, size_t len, uint64_t *a, size_t *want,
		 size_t *skip)
{
	uint64_t abs;
	if (!bi_fits64(r->size, off, len) || !bi_add_ok(r->base, off, &abs) ||
	    abs > INT64_MAX - 2 * ALIGN || len + 2 * ALIGN > r->cap)
		return false;
	*a = abs / ALIGN * ALIGN;
	*want = (size_t)((abs + len + ALIGN - 1) / ALIGN * ALIGN - *a);
	*skip = (size_t)(abs - *a);
	return true;
}

void bi_direct_ahead(struct bi_direct *r, uint64_t off, size_t len)
{
	uint64_t a;
	size_t want, skip;
	if (r->pending || !span(r, off, len, &a, &want, &skip))
		return;
	memset(&r->cb, 0, sizeof(r->cb));
	r->cb.aio_fildes = r->fd;
	r->cb.aio_buf = r->buf[!r->cur];
	r->cb.aio_nbytes = want;
	r->cb.aio_offset = (off_t)a;
	r->cb.aio_sigevent.sigev_notify = SIGEV_NONE;
	if (aio_read(&r->cb) == 0) {
		r->pending = true;
		r->p_off = off;
		r->p_len = len;
	}
}

int bi_direct_read(struct bi_direct *r, uint64_t off, size_t len, const uint8_t **data)
{
	uint64_t a;
	size_t want, skip, got = 0;
	if (!span(r, off, len, &a, &want, &skip))
		return -EINVAL;
	if (r->pending) {
		bool mine = r->p_off == off && r->p_len == len;
		ssize_t n = ahead_wait(r);
		if (mine && n >= 0 && (size_t)n >= skip + len) {
			r->cur = !r->cur;
			*data = r->buf[r->cur] + skip;
			return 0;
		}
	}
	uint8_t *b = r->buf[!r->cur];
	while (got < want) {
		ssize_t n = pread(r->fd, b + got, want - got, (off_t)(a + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	/* the file's last block may be partial: only the bytes asked for count */
	if (got < skip + len)
		return -EIO;
	r->cur = !r->cur;
	*data = b + skip;
	return 0;
}
