/* SPDX-License-Identifier: MIT */
/*
 * bfiofd.h: a libbfio handle over a descriptor. Open and close only move
 * the handle's state (the descriptor stays open until the handle is
 * freed: libbfio may close and reopen a handle, and reopening by name is
 * what this avoids); a clone reads a dup() of the descriptor with its own
 * position. Reads are pread() at the handle's position; nothing is
 * written.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/bfiofd.h"

struct bfd {
	int fd;
	bool open;
	off64_t pos;
};

static struct bfd *bfd_new(int fd)
{
	struct bfd *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (b->fd < 0) {
		free(b);
		return NULL;
	}
	return b;
}

static int bfd_free(intptr_t **io, libbfio_error_t **e)
{
	(void)e;
	struct bfd *b = (struct bfd *)*io;
	if (b) {
		close(b->fd);
		free(b);
	}
	*io = NULL;
	return 1;
}

static int bfd_clone(intptr_t **dst, intptr_t *src, libbfio_error_t **e)
{
	(void)e;
	*dst = (intptr_t *)bfd_new(((struct bfd *)src)->fd);
	return *dst ? 1 : -1;
}

static int bfd_open(intptr_t *io, int flags, libbfio_error_t **e)
{
	(void)e;
	struct bfd *b = (struct bfd *)io;
	if (flags & LIBBFIO_ACCESS_FLAG_WRITE)
		return -1; /* an image is never written */
	b->open = true;
	b->pos = 0;
	return 1;
}

static int bfd_close(intptr_t *io, libbfio_error_t **e)
{
	(void)e;
	((struct bfd *)io)->open = false;
	return 0;
}

static ssize_t bfd_read(intptr_t *io, uint8_t *buf, size_t n, libbfio_error_t **e)
{
	(void)e;
	struct bfd *b = (struct bfd *)io;
	ssize_t got;
	if (!b->open || b->pos < 0)
		return -1;
	do
		got = pread(b->fd, buf, n, b->pos);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return -1;
	b->pos += got;
	return got;
}

static ssize_t bfd_write(intptr_t *io, const uint8_t *buf, size_t n, libbfio_error_t **e)
{
	(void)io, (void)buf, (void)n, (void)e;
	return -1;
}

static int bfd_size(intptr_t *io, size64_t *size, libbfio_error_t **e)
{
	(void)e;
	struct stat st;
	if (fstat(((struct bfd *)io)->fd, &st) != 0 || st.st_size < 0)
		return -1;
	*size = (size64_t)st.st_size;
	return 1;
}

static off64_t bfd_seek(intptr_t *io, off64_t off, int whence, libbfio_error_t **e)
{
	struct bfd *b = (struct bfd *)io;
	size64_t size = 0;
	off64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? b->pos : -1;
	if (whence == SEEK_END && bfd_size(io, &size, e) == 1 && size <= INT64_MAX)
		base = (off64_t)size;
	if (base < 0 || (off > 0 && base > INT64_MAX - off) || base + off < 0)
		return -1;
	b->pos = base + off;
	return b->pos;
}

static int bfd_exists(intptr_t *io, libbfio_error_t **e)
{
	(void)io, (void)e;
	return 1;
}

static int bfd_is_open(intptr_t *io, libbfio_error_t **e)
{
	(void)e;
	return ((struct bfd *)io)->open ? 1 : 0;
}

int bi_bfio_fd(libbfio_handle_t **out, int fd)
{
	struct bfd *b = bfd_new(fd);
	*out = NULL;
	if (!b)
		return errno == EMFILE ? -EMFILE : -ENOMEM;
	if (libbfio_handle_initialize(out, (intptr_t *)b, bfd_free, bfd_clone, bfd_open,
				      bfd_close, bfd_read, bfd_write, bfd_seek, bfd_exists,
				      bfd_is_open, bfd_size,
				      LIBBFIO_FLAG_IO_HANDLE_MANAGED |
					      LIBBFIO_FLAG_IO_HANDLE_CLONE_BY_FUNCTION,
				      NULL) != 1) {
		intptr_t *io = (intptr_t *)b;
		bfd_free(&io, NULL);
		return -ENOMEM;
	}
	return 0;
}
