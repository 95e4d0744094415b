/* SPDX-License-Identifier: MIT */
/*
 * Device images: image files (or block devices), borrowed memory buffers
 * and read callbacks behind one read interface.
 *
 * Every read is range-checked against the device with overflow-safe
 * arithmetic; an image is only ever opened O_RDONLY. Reads are relative to
 * the window [base, base + size) that the volume layer chose (the whole
 * image, or one partition: see volume/part.c), so the filesystem cannot
 * read outside its partition:
 *
 *   raw image  |MBR|GPT|...|  partition 2: base ........ base+size  |...|
 *                             ^ bi_dev_read(off 0)         ^ end of window
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/dev.h"

#include "image/container.h"

#include "base/grow.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"

/* A bound on open files and per-device work; real multi-device sets are far smaller. */
#define MAX_DEVS BI_MAX_DEVS
/* ---------------------------------------------------------------- */
/* Adding devices */

static int dev_append(struct btrfsimg_fs *fs, struct bi_dev *d)
{
	if (fs->ndevs >= MAX_DEVS)
		return bi_err(fs, -EINVAL,
			      "device '%s': too many devices, limit %d (each is an open image "
			      "read at open time; no real filesystem needs more)",
			      d->name, MAX_DEVS);
	if (bi_grow_most((void **)&fs->devs, &fs->devcap, fs->ndevs + 1, sizeof(*fs->devs),
			 MAX_DEVS))
		return bi_err(fs, -ENOMEM, "device '%s': out of memory", d->name);
	d->base = 0;
	d->size = d->raw_size;
	fs->devs[fs->ndevs++] = *d;
	return 0;
}

/* Common checks; fills a blank device with a copy of @name (or a default). */
static int dev_init(struct btrfsimg_fs *fs, struct bi_dev *d, const char *name, const char *kind)
{
	memset(d, 0, sizeof(*d));
	d->fd = -1;
	if (fs->opened)
		return bi_err(fs, -EINVAL, "cannot add device '%s' after btrfsimg_open()",
			      name ? name : kind);
	char dflt[32];
	if (!name) {
		snprintf(dflt, sizeof(dflt), "%s%zu", kind, fs->ndevs);
		name = dflt;
	}
	d->name = strdup(name);
	if (!d->name)
		return bi_err(fs, -ENOMEM, "out of memory adding device '%s'", name);
	return 0;
}

static int fd_size(int fd, uint64_t *size, const char **why)
{
	struct stat st;
	if (fstat(fd, &st) != 0) {
		*why = "fstat failed";
		return -errno;
	}
	if (S_ISREG(st.st_mode)) {
		*size = (uint64_t)st.st_size;
		return 0;
	}
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, size) != 0) {
			*why = "BLKGETSIZE64 failed";
			return -errno;
		}
		return 0;
	}
	*why = "not a regular file or block device";
	return -EINVAL;
}

/* The device (if any) whose container holds the file @st. */
static const struct bi_dev *holder(const struct btrfsimg_fs *fs, const struct stat *st)
{
	for (size_t i = 0; i < fs->ndevs; i++)
		if (fs->devs[i].ctr && bi_ctr_holds(fs->devs[i].ctr, st->st_dev, st->st_ino))
			return &fs->devs[i];
	return NULL;
}

/* btrfs's magic at 64 KiB + 64 of the file: a disk of its own, never a
 * later segment of a split set. */
static bool own_disk(int fd)
{
	uint8_t m[8];
	return pread(fd, m, sizeof(m), 65536 + 64) == (ssize_t)sizeof(m) &&
	       memcmp(m, "_BHRfS_M", sizeof(m)) == 0;
}

/* @path is a later segment (ev.E02, disk.002) of the set starting at
 * *@first (malloc'd), to be opened from there. */
static bool later_segment(int fd, const char *path, int format, char **first)
{
	*first = NULL;
	if (format != BTRFSIMG_FORMAT_EWF && format != BTRFSIMG_FORMAT_SPLIT &&
	    format != BTRFSIMG_FORMAT_RAW)
		return false;
	if (format != BTRFSIMG_FORMAT_EWF && own_disk(fd))
		return false;
	*first = bi_ctr_first_segment(path);
	if (!*first)
		return false;
	int ffd = open(*first, O_RDONLY | O_CLOEXEC);
	int ff = BTRFSIMG_FORMAT_RAW;
	if (ffd >= 0) {
		(void)bi_ctr_detect(*first, ffd, &ff);
		close(ffd);
	}
	if (ff == format || (format == BTRFSIMG_FORMAT_RAW && ff == BTRFSIMG_FORMAT_SPLIT))
		return true;
	free(*first);
	*first = NULL;
	return false;
}

/* Open @path as a container of @format into @d (already named). */
static int dev_container(struct btrfsimg_fs *fs, struct bi_dev *d, const char *path, int format)
{
	char err[768];
	int rc = bi_ctr_open(&d->ctr, path, format, err, sizeof(err));
	if (rc < 0)
		return bi_err(fs, rc, "%s", err);
	d->raw_size = d->ctr->size;
	for (size_t i = 0; i < d->ctr->nnotes; i++)
		bi_damage(fs, "%s", d->ctr->notes[i]);
	bi_info(fs, "image '%s': %s container, %" PRIu64 " bytes in %zu file%s", path,
		btrfsimg_format_name(format), d->raw_size, d->ctr->nsegs,
		d->ctr->nsegs == 1 ? "" : "s");
	return 0;
}

/* Which format @path is, and whether it is a segment already added
 * (returns 1) or to be opened from its first segment (*@open_path). */
static int dev_which(struct btrfsimg_fs *fs, int fd, const char *path, int *format,
		     char **open_path)
{
	struct stat st;
	*open_path = NULL;
	if (fstat(fd, &st) == 0) {
		const struct bi_dev *h = holder(fs, &st);
		if (h) {
			bi_info(fs, "image '%s' is a segment of '%s', added already", path,
				h->name);
			return 1;
		}
	}
	if (*format == BTRFSIMG_FORMAT_AUTO) {
		int rc = bi_ctr_detect(path, fd, format);
		if (rc < 0)
			return bi_err(fs, rc, "device '%s': cannot read its first bytes: %s", path,
				      strerror(-rc));
	}
	char *first;
	if (!later_segment(fd, path, *format, &first))
		return 0;
	struct stat fst;
	int rc = 0;
	if (stat(first, &fst) == 0 && holder(fs, &fst)) {
		bi_info(fs, "image '%s' is a segment of '%s', added already", path, first);
		rc = 1;
	} else {
		bi_info(fs, "image '%s' is a later segment: opening the set from '%s'", path,
			first);
		if (*format == BTRFSIMG_FORMAT_RAW)
			*format = BTRFSIMG_FORMAT_SPLIT;
		*open_path = first;
		first = NULL;
	}
	free(first);
	return rc;
}

int btrfsimg_add_device_file_format(btrfsimg_fs *fs, const char *path, int format)
{
	if (!fs || !path || !btrfsimg_format_name(format))
		return -EINVAL;
	struct bi_dev d;
	char *open_path = NULL;
	int rc = dev_init(fs, &d, path, "file");
	if (rc < 0)
		goto out;
	d.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (d.fd < 0) {
		rc = -errno;
		bi_err(fs, rc, "device '%s': cannot open: %s", path, strerror(-rc));
		goto out;
	}
	const char *why = "";
	rc = fd_size(d.fd, &d.raw_size, &why);
	if (rc < 0) {
		bi_err(fs, rc, "device '%s': %s: %s", path, why, strerror(-rc));
		goto out;
	}
	rc = dev_which(fs, d.fd, path, &format, &open_path);
	if (rc != 0)
		goto out;
	if (format != BTRFSIMG_FORMAT_RAW) {
		close(d.fd);
		d.fd = -1;
		if (open_path) {
			free(d.name);
			d.name = strdup(open_path);
			if (!d.name) {
				rc = bi_err(fs, -ENOMEM, "out of memory adding '%s'", path);
				goto out;
			}
		}
		rc = dev_container(fs, &d, open_path ? open_path : path, format);
		if (rc == 0)
			rc = dev_append(fs, &d);
		goto out;
	}
	if (d.raw_size > INT64_MAX) {
		rc = bi_err(fs, -EINVAL, "device '%s': size %" PRIu64 " too large", path,
			    d.raw_size);
		goto out;
	}
	rc = dev_append(fs, &d);
out:
	free(open_path);
	if (rc != 0) {
		if (d.fd >= 0)
			close(d.fd);
		bi_ctr_free(d.ctr);
		free(d.name);
	}
	return rc;
}

int btrfsimg_add_device_file(btrfsimg_fs *fs, const char *path)
{
	return btrfsimg_add_device_file_format(fs, path, BTRFSIMG_FORMAT_AUTO);
}

int btrfsimg_add_device_mem(btrfsimg_fs *fs, const void *data, size_t len, const char *name)
{
	if (!fs || (!data && len))
		return -EINVAL;
	static const uint8_t empty[1];
	struct bi_dev d;
	int rc = dev_init(fs, &d, name, "mem");
	if (rc == 0) {
		/* a non-NULL pointer marks the device as memory-backed */
		d.mem = data ? data : empty;
		d.raw_size = len;
		rc = dev_append(fs, &d);
	}
	if (rc < 0)
		free(d.name);
	return rc;
}

int btrfsimg_add_device_io(btrfsimg_fs *fs, btrfsimg_read_fn read, void *ctx, uint64_t size,
			   const char *name)
{
	if (!fs || !read)
		return -EINVAL;
	struct bi_dev d;
	int rc = dev_init(fs, &d, name, "io");
	if (rc == 0) {
		d.rfn = read;
		d.rctx = ctx;
		d.raw_size = size;
		rc = dev_append(fs, &d);
	}
	if (rc < 0)
		free(d.name);
	return rc;
}

void bi_devs_close(struct btrfsimg_fs *fs)
{
	for (size_t i = 0; i < fs->ndevs; i++) {
		if (fs->devs[i].fd >= 0)
			close(fs->devs[i].fd);
		bi_ctr_free(fs->devs[i].ctr);
		free(fs->devs[i].name);
	}
	free(fs->devs);
	fs->devs = NULL;
	fs->ndevs = fs->devcap = 0;
}

struct bi_dev *bi_dev_by_id(struct btrfsimg_fs *fs, uint64_t devid)
{
	for (size_t i = 0; i < fs->ndevs; i++)
		if (fs->devs[i].member && fs->devs[i].devid == devid)
			return &fs->devs[i];
	return NULL;
}

/* ---------------------------------------------------------------- */
/* Reading */

/* Whole-range pread: retries short reads and EINTR. A premature end of
 * file (the image shrank under us) is -EIO. */
static int pread_full(int fd, uint64_t off, uint8_t *buf, size_t len)
{
	while (len > 0) {
		size_t n = len > (1u << 30) ? (1u << 30) : len;
		ssize_t r = pread(fd, buf, n, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -ENODATA;
		buf += r;
		off += (uint64_t)r;
		len -= (size_t)r;
	}
	return 0;
}

/* Read the raw image: the file, the buffer, the callback, or the disk
 * inside the container (whose message goes to @why). */
static int raw_read(const struct bi_dev *d, uint64_t off, void *buf, size_t len, char *why,
		    size_t whylen)
{
	if (d->ctr)
		return bi_ctr_read(d->ctr, off, buf, len, why, whylen);
	if (d->rfn) {
		int rc = d->rfn(d->rctx, off, buf, len);
		return rc > 0 ? -EIO : rc;
	}
	if (d->fd >= 0)
		return pread_full(d->fd, off, buf, len);
	if (len)
		memcpy(buf, d->mem + off, len);
	return 0;
}

/* Read [off, off+len) of the window [base, base+size) of the raw image. */
static int window_read(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t base, uint64_t size,
		       uint64_t off, void *buf, size_t len)
{
	char where[64] = "";
	if (base)
		snprintf(where, sizeof(where), " (image offset %" PRIu64 ")", base);
	if (!bi_fits64(size, off, len))
		return bi_err(fs, -EIO,
			      "device '%s': read of %zu bytes at offset %" PRIu64
			      " past end of device "
			      "(size %" PRIu64 ")%s",
			      d->name, len, off, size, where);
	char why[768] = "";
	int rc = raw_read(d, base + off, buf, len, why, sizeof(why));
	if (rc < 0 && why[0])
		return bi_err(fs, -EIO,
			      "device '%s': read of %zu bytes at offset %" PRIu64 "%s: %s", d->name,
			      len, off, where, why);
	if (rc == -ENODATA)
		return bi_err(fs, -EIO,
			      "device '%s': read of %zu bytes at offset %" PRIu64
			      "%s failed: image "
			      "ended early (truncated while open?)",
			      d->name, len, off, where);
	if (rc < 0)
		return bi_err(fs, -EIO,
			      "device '%s': read of %zu bytes at offset %" PRIu64 "%s failed: %s",
			      d->name, len, off, where, strerror(-rc));
	return 0;
}

int bi_dev_read(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t off, void *buf, size_t len)
{
	if (d->vread)
		return d->vread(fs, d, off, buf, len);
	return window_read(fs, d, d->base, d->size, off, buf, len);
}

int bi_dev_read_raw(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t off, void *buf,
		    size_t len)
{
	return window_read(fs, d, 0, d->raw_size, off, buf, len);
}

void bi_dev_prefetch(const struct bi_dev *d, uint64_t off, uint64_t len)
{
	if (d->fd < 0 || d->vread || !bi_fits64(d->size, off, len) || d->base + off > INT64_MAX)
		return;
	(void)posix_fadvise(d->fd, (off_t)(d->base + off), (off_t)len, POSIX_FADV_WILLNEED);
}

bool bi_dev_hole(const struct bi_dev *d, uint64_t off, uint64_t len, uint64_t *data)
{
	if (d->fd < 0 || d->ctr || d->vread || d->rfn || d->mem || !bi_fits64(d->size, off, len) ||
	    d->base + d->size > INT64_MAX)
		return false;
	if (off + len <= *data)
		return true;
	if (off < *data)
		return false;
	/* lseek moves the descriptor's offset, which nothing uses: every
	 * read is a pread */
	off_t at = lseek(d->fd, (off_t)(d->base + off), SEEK_DATA);
	struct stat st;
	if (at < 0 && errno == ENXIO && fstat(d->fd, &st) == 0)
		at = st.st_size; /* no data up to the file's end; a file cut
				    short since it was opened is no hole (the
				    read past its end says so) */
	if (at < 0 || (uint64_t)at < d->base + off)
		return false; /* cannot say (EINVAL: no SEEK_DATA there) */
	*data = (uint64_t)at - d->base;
	return off + len <= *data;
}
