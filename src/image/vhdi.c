/* SPDX-License-Identifier: MIT */
/*
 * VHD (Virtual PC / Hyper-V: fixed, dynamic, differencing) and VHDX
 * through libvhdi. A differencing disk reads what it does not hold from
 * its parent, found by the file name stored in it (its last path
 * component, Windows or POSIX, beside the image), up to VHDI_CHAIN files.
 * A parent is read only when it is a regular file, opened without blocking,
 * and libvhdi reads it through that descriptor (bfiofd.h), never by name.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#define HAVE_LIBBFIO 1 /* libvhdi.h: declare libvhdi_file_open_file_io_handle */
#include <libvhdi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cursor.h"
#include "image/bfiofd.h"
#include "image/container.h"

#define VHDI_CHAIN 16

struct vhdi {
	libvhdi_file_t *f[VHDI_CHAIN];
	libbfio_handle_t *io[VHDI_CHAIN]; /* what libvhdi reads f[i] through */
	int n;
	/* a fixed VHD: its data read here, the file before the footer
	 * (libvhdi ends the disk at original_size); -1 otherwise */
	int fixed_fd;
};

static void vhdi_why(libvhdi_error_t **e, char *why, size_t len)
{
	why[0] = '\0';
	if (e && *e) {
		libvhdi_error_sprint(*e, why, len);
		libvhdi_error_free(e);
	}
	for (char *p = why; *p; p++)
		if (*p == '\n')
			*p = *(p + 1) ? ';' : '\0';
}

static void vhdi_close(struct bi_ctr *c)
{
	struct vhdi *v = c->h;
	for (int i = 0; i < v->n; i++) {
		libvhdi_file_close(v->f[i], NULL);
		libvhdi_file_free(&v->f[i], NULL);
		libbfio_handle_free(&v->io[i], NULL);
	}
	if (v->fixed_fd >= 0)
		close(v->fixed_fd);
	free(v);
	c->h = NULL;
}

/* Open @name through @fd (closed here), which the caller opened (and, for
 * a parent, checked): libvhdi reads through it, never opening @name. */
static int open_one(struct bi_ctr *c, struct vhdi *v, const char *name, int fd, char *err,
		    size_t errlen)
{
	libvhdi_error_t *e = NULL;
	libvhdi_file_t *f = NULL;
	libbfio_handle_t *io = NULL;
	char why[512] = "";
	int rc = bi_bfio_fd(&io, fd);
	close(fd);
	if (rc < 0 || libvhdi_file_initialize(&f, &e) != 1) {
		libbfio_handle_free(&io, NULL);
		vhdi_why(&e, why, sizeof(why));
		snprintf(err, errlen, "%s image '%s': %s", btrfsimg_format_name(c->ops->format),
			 name, why[0] ? why : "out of memory");
		return -ENOMEM;
	}
	v->io[v->n] = io;
	v->f[v->n++] = f;
	if (libvhdi_file_open_file_io_handle(f, io, LIBVHDI_OPEN_READ, &e) != 1) {
		libvhdi_file_free(&v->f[--v->n], NULL);
		libbfio_handle_free(&v->io[v->n], NULL);
		vhdi_why(&e, why, sizeof(why));
		snprintf(err, errlen, "%s image '%s': cannot open: %s",
			 btrfsimg_format_name(c->ops->format), name, why);
		return -EIO;
	}
	return bi_ctr_add_seg(c, name, true);
}

/* The parent of @f (a differencing disk), beside @name; or NULL. */
static char *parent_of(libvhdi_file_t *f, const char *name)
{
	size_t sz = 0;
	if (libvhdi_file_get_utf8_parent_filename_size(f, &sz, NULL) != 1 || sz <= 1 || sz > 4096)
		return NULL;
	uint8_t b[4096];
	if (libvhdi_file_get_utf8_parent_filename(f, b, sz, NULL) != 1)
		return NULL;
	char *base = (char *)b;
	for (char *q = base; *q; q++)
		if (*q == '\\' || *q == '/')
			base = q + 1;
	return *base ? bi_ctr_beside(name, base) : NULL;
}

static int vhdi_chain(struct bi_ctr *c, struct vhdi *v, char *err, size_t errlen)
{
	int rc = 0;
	char *cur = strdup(c->path), *p = NULL;
	if (!cur)
		return -ENOMEM;
	while (rc == 0 && (p = parent_of(v->f[v->n - 1], cur)) != NULL) {
		rc = bi_ctr_add_meta(c, "parent_file", p);
		if (rc == 0 && v->n >= VHDI_CHAIN) {
			snprintf(err, errlen, "image '%s': more than %d parents", c->path,
				 VHDI_CHAIN);
			rc = -ELOOP;
		}
		const char *why;
		int ck = rc == 0 ? bi_ctr_open_regular(p, &why) : 0;
		if (ck == -ENOENT) {
			snprintf(err, errlen,
				 "image '%s' is a differencing disk; its parent '%s' is not there",
				 cur, p);
			rc = ck;
		} else if (ck < 0) {
			/* a FIFO would block, a device is no image */
			snprintf(err, errlen,
				 "image '%s' is a differencing disk; its parent '%s' %s: refused "
				 "(only a regular file is read)",
				 cur, p, why);
			rc = ck;
		}
		if (rc == 0)
			rc = open_one(c, v, p, ck, err, errlen);
		if (rc == 0 &&
		    libvhdi_file_set_parent_file(v->f[v->n - 2], v->f[v->n - 1], NULL) != 1) {
			snprintf(err, errlen, "image '%s': cannot use parent '%s'", cur, p);
			rc = -EIO;
		}
		free(cur);
		cur = p;
	}
	free(cur);
	return rc;
}

/* A dynamic or differencing VHD (footer @ft read from @fd): the disk is
 * current_size (footer byte 48), as far as libvhdi reads it (*@size: its
 * media size, original_size) and as far as the block table maps it (the
 * dynamic header at footer byte 16: 28 max_table_entries, 32 block_size);
 * what either cuts off is noted as damage. */
static void vhd_dynamic_size(struct bi_ctr *c, int fd, const uint8_t *ft, uint64_t *size)
{
	uint64_t cur = bi_be64(ft + 48), hdr = bi_be64(ft + 16), want = cur;
	uint8_t dh[64];
	if (cur > *size) {
		bi_ctr_note(c,
			    "VHD image '%s': current_size %" PRIu64 " bytes, original_size %" PRIu64
			    " (footer bytes 48 and 40): read as %" PRIu64 " bytes",
			    c->path, cur, *size, *size);
		want = *size;
	}
	if (hdr <= INT64_MAX && pread(fd, dh, sizeof(dh), (off_t)hdr) == (ssize_t)sizeof(dh) &&
	    memcmp(dh, "cxsparse", 8) == 0) {
		uint64_t maps = (uint64_t)bi_be32(dh + 28) * bi_be32(dh + 32); /* < 2^64 */
		if (want > maps) {
			bi_ctr_note(c,
				    "VHD image '%s': disk of %" PRIu64
				    " bytes, but its block table maps %" PRIu64 " (%" PRIu32
				    " blocks of %" PRIu32 " bytes, dynamic header at %" PRIu64
				    "): read as %" PRIu64 " bytes",
				    c->path, want, maps, bi_be32(dh + 28), bi_be32(dh + 32), hdr, maps);
			want = maps;
		}
	}
	*size = want;
}

/* A fixed VHD's size from its footer (the file's last 512 bytes; big-
 * endian; "Virtual Hard Disk Image Format Specification" v1.0):
 *   40 original_size (at creation; informational)   48 current_size
 *   60 disk_type (2: fixed)
 * The disk is current_size bytes, and a fixed disk's data is the file
 * before the footer (qemu-img reads current_size too). libvhdi takes
 * original_size as the media size (and reads no further), so the size is
 * taken here, the current_size, and the data read here too (v->fixed_fd);
 * where the file cannot hold current_size, what the file holds, noted as
 * damage. *@size and v are left alone for a disk that is not fixed. */
static void vhd_fixed_size(struct bi_ctr *c, struct vhdi *v, uint64_t *size)
{
	uint8_t ft[512];
	struct stat st;
	int fd = open(c->path, O_RDONLY | O_CLOEXEC);
	bool ok = fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(ft) &&
		  pread(fd, ft, sizeof(ft), st.st_size - (off_t)sizeof(ft)) == (ssize_t)sizeof(ft);
	if (ok && memcmp(ft, "conectix", 8) == 0 && bi_be32(ft + 60) != 2)
		vhd_dynamic_size(c, fd, ft, size);
	if (!ok || memcmp(ft, "conectix", 8) != 0 || bi_be32(ft + 60) != 2 || v->n != 1) {
		if (fd >= 0)
			close(fd);
		return;
	}
	v->fixed_fd = fd;
	uint64_t cur = bi_be64(ft + 48);
	uint64_t holds = (uint64_t)st.st_size - sizeof(ft);
	*size = cur;
	if (cur > holds) {
		bi_ctr_note(c,
			    "VHD image '%s': fixed disk of current_size %" PRIu64
			    " bytes (footer byte %" PRIu64 "), but the file holds %" PRIu64
			    " bytes before its footer: read as %" PRIu64 " bytes",
			    c->path, cur, holds + 48, holds, holds);
		*size = holds;
	} else if (cur < holds) {
		bi_ctr_note(c,
			    "VHD image '%s': fixed disk of current_size %" PRIu64
			    " bytes (footer byte %" PRIu64 "), but the file holds %" PRIu64
			    " bytes before its footer: the %" PRIu64
			    " bytes after the disk not read",
			    c->path, cur, holds + 48, holds, holds - cur);
	}
}

static int vhdi_open(struct bi_ctr *c, char *err, size_t errlen)
{
	struct vhdi *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	c->h = v;
	v->fixed_fd = -1;
	int fd = open(c->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int en = errno;
		snprintf(err, errlen, "%s image '%s': cannot open: %s",
			 btrfsimg_format_name(c->ops->format), c->path, strerror(en));
		return -en;
	}
	int rc = open_one(c, v, c->path, fd, err, errlen);
	int ft = 0;
	if (rc == 0 && libvhdi_file_get_file_type(v->f[0], &ft, NULL) == 1) {
		int want =
			ft == LIBVHDI_FILE_TYPE_VHDX ? BTRFSIMG_FORMAT_VHDX : BTRFSIMG_FORMAT_VHD;
		if (want != c->ops->format) {
			snprintf(err, errlen, "image '%s' is %s, not %s", c->path,
				 btrfsimg_format_name(want), btrfsimg_format_name(c->ops->format));
			rc = -EINVAL;
		}
	}
	if (rc == 0)
		rc = vhdi_chain(c, v, err, errlen);
	size64_t size = 0;
	uint32_t t = 0;
	if (rc == 0 && libvhdi_file_get_media_size(v->f[0], &size, NULL) != 1) {
		snprintf(err, errlen, "image '%s': no media size", c->path);
		rc = -EIO;
	}
	if (rc == 0 && c->ops->format == BTRFSIMG_FORMAT_VHD)
		vhd_fixed_size(c, v, &size);
	if (rc == 0 && libvhdi_file_get_disk_type(v->f[0], &t, NULL) == 1)
		c->detail = t == LIBVHDI_DISK_TYPE_FIXED	  ? "fixed"
			    : t == LIBVHDI_DISK_TYPE_DYNAMIC	  ? "dynamic"
			    : t == LIBVHDI_DISK_TYPE_DIFFERENTIAL ? "differencing"
								  : "";
	c->size = size;
	return rc;
}

/* A fixed disk's [off, off+len): the same bytes of the file (inside
 * c->size, which the file holds). */
static int fixed_read(struct bi_ctr *c, int fd, uint64_t off, uint8_t *p, size_t len, char *err,
		      size_t errlen)
{
	while (len > 0) {
		ssize_t r = pread(fd, p, len, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			snprintf(err, errlen,
				 "vhd read of %zu bytes at offset %" PRIu64
				 " of fixed disk '%s' failed: %s",
				 len, off, c->path, r == 0 ? "end of file" : strerror(errno));
			return -EIO;
		}
		p += r;
		off += (uint64_t)r;
		len -= (size_t)r;
	}
	return 0;
}

static int vhdi_read(struct bi_ctr *c, uint64_t off, void *buf, size_t len, char *err,
		     size_t errlen)
{
	struct vhdi *v = c->h;
	libvhdi_error_t *e = NULL;
	uint8_t *p = buf;
	if (v->fixed_fd >= 0)
		return fixed_read(c, v->fixed_fd, off, p, len, err, errlen);
	while (len > 0) {
		ssize_t r = libvhdi_file_read_buffer_at_offset(v->f[0], p, len, (off64_t)off, &e);
		if (r <= 0) {
			char why[512];
			vhdi_why(&e, why, sizeof(why));
			snprintf(err, errlen,
				 "%s read of %zu bytes at offset %" PRIu64 " failed: %s",
				 btrfsimg_format_name(c->ops->format), len, off,
				 r == 0 ? "no data" : why);
			return -EIO;
		}
		p += r;
		off += (uint64_t)r;
		len -= (size_t)r;
	}
	return 0;
}

const struct bi_ctr_ops bi_ctr_vhd_ops = {
	.format = BTRFSIMG_FORMAT_VHD,
	.cached = true,
	.open = vhdi_open,
	.read = vhdi_read,
	.close = vhdi_close,
};

const struct bi_ctr_ops bi_ctr_vhdx_ops = {
	.format = BTRFSIMG_FORMAT_VHDX,
	.cached = true,
	.open = vhdi_open,
	.read = vhdi_read,
	.close = vhdi_close,
};
