/* SPDX-License-Identifier: MIT */
/*
 * VMDK (VMware virtual disks) through libvmdk: monolithicSparse and
 * streamOptimized (one file, sparse extent with an embedded descriptor),
 * and a text descriptor with its extent files (monolithicFlat,
 * twoGbMaxExtentSparse/Flat, ...), found beside the descriptor as VMware
 * finds them. Every extent file must be there: a missing one is named. A
 * child disk (parentFileNameHint) reads what it does not hold from its
 * parent, followed up to VMDK_CHAIN files.
 */
#include <errno.h>
#include <inttypes.h>
#include <libvmdk.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "1-image/container.h"

#define VMDK_CHAIN 16

struct vmdk {
	libvmdk_handle_t *h[VMDK_CHAIN]; /* [0] the disk, then its parents */
	int n;
};

static void vmdk_why(libvmdk_error_t **e, char *why, size_t len)
{
	why[0] = '\0';
	if (e && *e) {
		libvmdk_error_sprint(*e, why, len);
		libvmdk_error_free(e);
	}
	for (char *p = why; *p; p++)
		if (*p == '\n')
			*p = *(p + 1) ? ';' : '\0';
}

static void vmdk_close(struct bi_ctr *c)
{
	struct vmdk *v = c->h;
	for (int i = 0; i < v->n; i++) {
		libvmdk_handle_close(v->h[i], NULL);
		libvmdk_handle_free(&v->h[i], NULL);
	}
	free(v);
	c->h = NULL;
}

static const char *disk_type(int t)
{
	switch (t) {
	case LIBVMDK_DISK_TYPE_MONOLITHIC_SPARSE:
		return "monolithicSparse";
	case LIBVMDK_DISK_TYPE_MONOLITHIC_FLAT:
		return "monolithicFlat";
	case LIBVMDK_DISK_TYPE_STREAM_OPTIMIZED:
		return "streamOptimized";
	case LIBVMDK_DISK_TYPE_2GB_EXTENT_SPARSE:
		return "twoGbMaxExtentSparse";
	case LIBVMDK_DISK_TYPE_2GB_EXTENT_FLAT:
		return "twoGbMaxExtentFlat";
	case LIBVMDK_DISK_TYPE_VMFS_FLAT:
		return "vmfs";
	case LIBVMDK_DISK_TYPE_VMFS_SPARSE:
		return "vmfsSparse";
	default:
		return "";
	}
}

/* Record the extent files of @h (descriptor @name); each must exist. */
static int extents(struct bi_ctr *c, libvmdk_handle_t *h, const char *name, char *err,
		   size_t errlen)
{
	int n = 0;
	if (libvmdk_handle_get_number_of_extents(h, &n, NULL) != 1 || n < 0 || n > 4096) {
		snprintf(err, errlen, "VMDK image '%s': cannot count its extents", name);
		return -EIO;
	}
	for (int i = 0; i < n; i++) {
		libvmdk_extent_descriptor_t *d = NULL;
		uint8_t fn[4096];
		if (libvmdk_handle_get_extent_descriptor(h, i, &d, NULL) != 1)
			continue;
		int ok = libvmdk_extent_descriptor_get_utf8_filename(d, fn, sizeof(fn), NULL);
		libvmdk_extent_descriptor_free(&d, NULL);
		if (ok != 1)
			continue; /* a ZERO extent has no file */
		char *path = bi_ctr_beside(name, (char *)fn);
		if (!path)
			return -ENOMEM;
		bool there = access(path, R_OK) == 0;
		int rc = bi_ctr_add_seg(c, path, there);
		if (rc == 0 && !there) {
			snprintf(err, errlen, "VMDK image '%s': extent file '%s' is missing", name,
				 path);
			rc = -ENOENT;
		}
		free(path);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int open_one(struct bi_ctr *c, struct vmdk *v, const char *name, char *err, size_t errlen)
{
	libvmdk_error_t *e = NULL;
	libvmdk_handle_t *h = NULL;
	char why[512];
	if (libvmdk_handle_initialize(&h, &e) != 1) {
		vmdk_why(&e, why, sizeof(why));
		snprintf(err, errlen, "VMDK image '%s': %s", name, why);
		return -ENOMEM;
	}
	v->h[v->n++] = h;
	if (libvmdk_handle_open(h, name, LIBVMDK_OPEN_READ, &e) != 1) {
		libvmdk_handle_free(&v->h[--v->n], NULL);
		vmdk_why(&e, why, sizeof(why));
		snprintf(err, errlen, "VMDK image '%s': cannot open: %s", name, why);
		return -EIO;
	}
	int rc = extents(c, h, name, err, errlen);
	if (rc < 0)
		return rc;
	const char *slash = strrchr(name, '/');
	char dir[4096];
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - name) : 1, slash ? name : ".");
	if ((libvmdk_handle_set_extent_data_files_path(h, dir, strlen(dir), &e) != 1 ||
	     libvmdk_handle_open_extent_data_files(h, &e) != 1)) {
		vmdk_why(&e, why, sizeof(why));
		snprintf(err, errlen, "VMDK image '%s': cannot open its extent files: %s", name,
			 why);
		return -EIO;
	}
	return 0;
}

/* The parent of the last disk opened, or NULL. */
static char *parent_of(libvmdk_handle_t *h, const char *name)
{
	size_t sz = 0;
	if (libvmdk_handle_get_utf8_parent_filename_size(h, &sz, NULL) != 1 || sz <= 1 || sz > 4096)
		return NULL;
	uint8_t b[4096];
	if (libvmdk_handle_get_utf8_parent_filename(h, b, sz, NULL) != 1)
		return NULL;
	return bi_ctr_beside(name, (char *)b);
}

static int vmdk_open(struct bi_ctr *c, char *err, size_t errlen)
{
	struct vmdk *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	c->h = v;
	int rc = open_one(c, v, c->path, err, errlen);
	char *cur = strdup(c->path), *p = NULL;
	if (!cur)
		rc = -ENOMEM;
	while (rc == 0 && (p = parent_of(v->h[v->n - 1], cur)) != NULL) {
		rc = bi_ctr_add_meta(c, "parent_file", p);
		if (rc == 0 && v->n >= VMDK_CHAIN) {
			snprintf(err, errlen, "VMDK image '%s': more than %d parents", c->path,
				 VMDK_CHAIN);
			rc = -ELOOP;
		}
		if (rc == 0 && access(p, R_OK) != 0) {
			snprintf(err, errlen, "VMDK image '%s': its parent '%s' is not there", cur,
				 p);
			rc = -ENOENT;
		}
		if (rc == 0)
			rc = open_one(c, v, p, err, errlen);
		if (rc == 0 &&
		    libvmdk_handle_set_parent_handle(v->h[v->n - 2], v->h[v->n - 1], NULL) != 1) {
			snprintf(err, errlen, "VMDK image '%s': cannot use parent '%s'", cur, p);
			rc = -EIO;
		}
		free(cur);
		cur = p;
	}
	free(cur);
	size64_t size = 0;
	int t = 0;
	if (rc == 0 && libvmdk_handle_get_media_size(v->h[0], &size, NULL) != 1) {
		snprintf(err, errlen, "VMDK image '%s': no media size", c->path);
		rc = -EIO;
	}
	if (rc == 0 && libvmdk_handle_get_disk_type(v->h[0], &t, NULL) == 1)
		c->detail = disk_type(t);
	c->size = size;
	return rc;
}

static int vmdk_read(struct bi_ctr *c, uint64_t off, void *buf, size_t len, char *err,
		     size_t errlen)
{
	struct vmdk *v = c->h;
	libvmdk_error_t *e = NULL;
	uint8_t *p = buf;
	while (len > 0) {
		ssize_t r = libvmdk_handle_read_buffer_at_offset(v->h[0], p, len, (off64_t)off, &e);
		if (r <= 0) {
			char why[512];
			vmdk_why(&e, why, sizeof(why));
			snprintf(err, errlen,
				 "VMDK read of %zu bytes at offset %" PRIu64 " failed: %s", len,
				 off, r == 0 ? "no data" : why);
			return -EIO;
		}
		p += r;
		off += (uint64_t)r;
		len -= (size_t)r;
	}
	return 0;
}

const struct bi_ctr_ops bi_ctr_vmdk_ops = {
	.format = BTRFSIMG_FORMAT_VMDK,
	.cached = true,
	.open = vmdk_open,
	.read = vmdk_read,
	.close = vmdk_close,
};
