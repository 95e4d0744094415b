/* SPDX-License-Identifier: MIT */
/*
 * VMDK (VMware virtual disks) through libvmdk: monolithicSparse and
 * streamOptimized (one file, sparse extent with an embedded descriptor),
 * and a text descriptor with its extent files (monolithicFlat,
 * twoGbMaxExtentSparse/Flat, ...), found beside the descriptor as VMware
 * finds them. A child disk (parentFileNameHint) reads what it does not
 * hold from its parent, followed up to VMDK_CHAIN files.
 *
 * A missing extent file is named, and the rest of the disk is still read.
 * libvmdk opens a descriptor's extents all together or not at all (and it
 * cannot stand a placeholder in for a sparse extent: it reads each sparse
 * extent's header and grain directory at open), so then every extent is
 * opened as a disk of its own: libvmdk reads a one-extent descriptor made
 * here from what it parsed of the real one (type, size, file, offset),
 * held in memory. Reads are dispatched by virtual offset; a read that
 * touches a missing extent fails naming the file and the offset, and never
 * returns bytes for it.
 *
 *   disk.vmdk:  RW 32768 SPARSE "a-s001.vmdk"   -> part 0: [0, 16 MiB)
 *               RW  4096 SPARSE "a-s002.vmdk"   -> part 1: missing
 *               RW 487424 SPARSE "a-s003.vmdk"  -> part 2: [18 MiB, 256 MiB)
 *
 * A disk with a parent and a missing extent is refused: what a child does
 * not hold comes from its parent at the child's offsets, which one-extent
 * disks cannot follow.
 *
 * An extent file named with a folder ("/vmfs/volumes/ds1/a-flat.vmdk",
 * "C:\\VMs\\a-flat.vmdk") is read, as VMware and libvmdk look for it, by its
 * last component beside the descriptor, and that is the file reported.
 * Such a disk is read extent by extent too, each one-extent descriptor
 * naming only the last component: libvmdk mangles a name with a folder
 * (see parts_open). Extent files and parents are read only when they are
 * regular files (a FIFO would block libvmdk's open).
 */
#include <errno.h>
#include <inttypes.h>
#include <libvmdk.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/container.h"

#include "base/cursor.h"

#define VMDK_CHAIN   16
#define VMDK_EXTENTS 4096

/* One extent of the disk, opened as a disk of its own (when one of its
 * extent files is missing). */
struct vmdk_part {
	uint64_t start, size;	/* its bytes of the virtual disk */
	const char *file;	/* its file (in c->segs), NULL for a ZERO extent */
	bool missing;		/* no file: every read of it fails */
	libvmdk_handle_t *h;	/* NULL when missing or ZERO */
	libbfio_handle_t *desc; /* the one-extent descriptor it was opened from */
	char *text;		/* that descriptor's text */
};

struct vmdk {
	libvmdk_handle_t *h[VMDK_CHAIN]; /* [0] the disk, then its parents */
	int n;
	struct vmdk_part *parts; /* non-NULL: the disk is read extent by extent */
	size_t nparts;
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

static void parts_free(struct vmdk *v)
{
	for (size_t i = 0; i < v->nparts; i++) {
		struct vmdk_part *pt = &v->parts[i];
		if (pt->h) {
			libvmdk_handle_close(pt->h, NULL);
			libvmdk_handle_free(&pt->h, NULL);
		}
		if (pt->desc)
			libbfio_handle_free(&pt->desc, NULL);
		free(pt->text);
	}
	free(v->parts);
	v->parts = NULL;
	v->nparts = 0;
}

static void vmdk_close(struct bi_ctr *c)
{
	struct vmdk *v = c->h;
	parts_free(v);
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
	case LIBVMDK_DISK_TYPE_VMFS_FLAT_PRE_ALLOCATED:
		return "vmfsPreallocated";
	case LIBVMDK_DISK_TYPE_VMFS_FLAT_ZEROED:
		return "vmfsEagerZeroedThick";
	case LIBVMDK_DISK_TYPE_VMFS_SPARSE:
		return "vmfsSparse";
	case LIBVMDK_DISK_TYPE_VMFS_SPARSE_THIN:
		return "vmfsThin";
	default:
		return "";
	}
}

/* An extent's type as a descriptor writes it (libvmdk's own spelling when
 * it parses one), or NULL for a type read here not at all. */
static const char *extent_type(int t)
{
	switch (t) {
	case LIBVMDK_EXTENT_TYPE_FLAT:
		return "FLAT";
	case LIBVMDK_EXTENT_TYPE_SPARSE:
		return "SPARSE";
	case LIBVMDK_EXTENT_TYPE_VMFS_FLAT:
		return "VMFS";
	case LIBVMDK_EXTENT_TYPE_VMFS_SPARSE:
		return "VMFSSPARSE";
	case LIBVMDK_EXTENT_TYPE_ZERO:
		return "ZERO";
	default:
		return NULL;
	}
}

/* What libvmdk parsed of extent @i of @h: type, size, offset in its file
 * and the file's name ("" for a ZERO extent). 0 or -EIO. */
static int extent_of(libvmdk_handle_t *h, int i, int *type, uint64_t *size, int64_t *offset,
		     char *fn, size_t fnlen)
{
	libvmdk_extent_descriptor_t *d = NULL;
	off64_t o = 0;
	size64_t sz = 0;
	if (libvmdk_handle_get_extent_descriptor(h, i, &d, NULL) != 1)
		return -EIO;
	int ok = libvmdk_extent_descriptor_get_type(d, type, NULL) == 1 &&
		 libvmdk_extent_descriptor_get_range(d, &o, &sz, NULL) == 1;
	fn[0] = '\0';
	if (ok && *type != LIBVMDK_EXTENT_TYPE_ZERO &&
	    libvmdk_extent_descriptor_get_utf8_filename(d, (uint8_t *)fn, fnlen, NULL) != 1)
		ok = 0;
	libvmdk_extent_descriptor_free(&d, NULL);
	*size = sz;
	*offset = o;
	return ok ? 0 : -EIO;
}

/* The file libvmdk reads for the extent file name @fn of the descriptor
 * @name: the name's last component ('/' or '\\' before it) in the
 * descriptor's folder, whatever folder the name gives (libvmdk, with
 * its extent data files path set, as here, keeps only that component).
 * *@moved when that is not @fn beside the descriptor. Malloc'd, or NULL. */
static const char *last_component(const char *fn)
{
	const char *base = fn;
	for (const char *p = fn; *p; p++)
		if (*p == '/' || *p == '\\')
			base = p + 1;
	return base;
}

static char *extent_path(const char *name, const char *fn, bool *moved)
{
	const char *base = last_component(fn);
	*moved = base != fn;
	return *base ? bi_ctr_beside(name, base) : NULL;
}

/* Whether the extent file @path (@fn in the descriptor @name) is there; a
 * FIFO, a device or anything but a regular file is refused (libvmdk would
 * open it by name and block, or read a device). */
static int extent_there(const char *name, const char *fn, const char *path, bool *there, char *err,
			size_t errlen)
{
	const char *why;
	*there = access(path, F_OK) == 0;
	if (!*there)
		return 0;
	int rc = bi_ctr_check_regular(path, &why);
	if (rc < 0)
		snprintf(err, errlen,
			 "VMDK image '%s': extent file '%s' (named '%s' in it) %s: refused (only "
			 "a regular file is read)",
			 name, path, fn, why);
	return rc;
}

/* Where an extent's bytes lie in its file (extents()). */
struct ext_at {
	size_t seg; /* in c->segs */
	int type;
	uint64_t off, size;
};

static bool flat(int type)
{
	return type == LIBVMDK_EXTENT_TYPE_FLAT || type == LIBVMDK_EXTENT_TYPE_VMFS_FLAT;
}

static bool same_file(const struct bi_ctr *c, size_t a, size_t b)
{
	const struct bi_ctr_seg *x = &c->segs[a], *y = &c->segs[b];
	if (x->present && y->present)
		return x->dev == y->dev && x->ino == y->ino;
	return !strcmp(x->name, y->name);
}

/* Extent @i (at[i]) against the extents before it: one file backs two
 * extents only as disjoint byte ranges of a flat file. A sparse file named
 * twice, or flat ranges that overlap, make one file's bytes two parts of
 * the disk (a 256 MiB file listed 100 times read as a 25 GiB disk):
 * refused. A flat extent past its file's end is noted (its reads fail). */
static int ext_check(struct bi_ctr *c, const char *name, const struct ext_at *at, int i, char *err,
		     size_t errlen)
{
	const struct ext_at *x = &at[i];
	for (int j = 0; j < i; j++) {
		const struct ext_at *y = &at[j];
		if (y->seg == SIZE_MAX || !same_file(c, x->seg, y->seg))
			continue;
		bool both_flat = flat(x->type) && flat(y->type);
		if (both_flat && (x->off >= y->off + y->size || y->off >= x->off + x->size))
			continue;
		snprintf(err, errlen,
			 "VMDK image '%s': extents %d and %d both read file '%s'%s (bytes %" PRIu64
			 "-%" PRIu64 " and %" PRIu64 "-%" PRIu64 " of it): refused",
			 name, j, i, c->segs[x->seg].name,
			 both_flat ? " at overlapping offsets" : ", a sparse extent file", y->off,
			 y->off + y->size - 1, x->off, x->off + x->size - 1);
		return -EUCLEAN;
	}
	struct stat st;
	if (flat(x->type) && c->segs[x->seg].present && stat(c->segs[x->seg].name, &st) == 0 &&
	    (uint64_t)st.st_size < x->off + x->size)
		bi_ctr_note(c,
			    "VMDK image '%s': extent %d needs bytes %" PRIu64 "-%" PRIu64
			    " of its flat file '%s', which holds %" PRIu64
			    " bytes: the disk is larger than its files",
			    name, i, x->off, x->off + x->size - 1, c->segs[x->seg].name,
			    (uint64_t)st.st_size);
	return 0;
}

/* Record the extent files of @h (descriptor @name). Whether each is there
 * goes to *@missing (how many are not); a parent (@top false) must have
 * them all. */
static int extents(struct bi_ctr *c, libvmdk_handle_t *h, const char *name, bool top,
		   size_t *missing, size_t *moved_n, char *err, size_t errlen)
{
	int n = 0;
	*missing = 0;
	*moved_n = 0;
	if (libvmdk_handle_get_number_of_extents(h, &n, NULL) != 1 || n < 0 || n > VMDK_EXTENTS) {
		snprintf(err, errlen, "VMDK image '%s': cannot count its extents", name);
		return -EIO;
	}
	struct ext_at *at = calloc((size_t)n + 1, sizeof(*at));
	if (!at)
		return -ENOMEM;
	int rc = 0;
	for (int i = 0; i < n; i++) {
		char fn[4096];
		int type;
		uint64_t size;
		int64_t off;
		at[i].seg = SIZE_MAX; /* no file */
		if (extent_of(h, i, &type, &size, &off, fn, sizeof(fn)) < 0 || !fn[0])
			continue; /* a ZERO extent has no file */
		bool moved, there;
		char *path = extent_path(name, fn, &moved);
		if (!path) {
			snprintf(err, errlen, "VMDK image '%s': extent %d names no file ('%s')",
				 name, i, fn);
			rc = -EUCLEAN;
			break;
		}
		rc = extent_there(name, fn, path, &there, err, errlen);
		if (rc == 0 && moved && !top) {
			snprintf(err, errlen,
				 "VMDK image '%s': extent file named with a folder ('%s') in a "
				 "parent disk: not read (only as '%s', beside it, in a child)",
				 name, fn, path);
			rc = -EOPNOTSUPP;
		}
		if (rc == 0 && moved)
			rc = bi_ctr_add_meta(c, "extent_file_stored", fn);
		*moved_n += moved;
		if (rc == 0)
			rc = bi_ctr_add_seg(c, path, there);
		if (rc == 0 && !there && !top) {
			snprintf(err, errlen, "VMDK image '%s': extent file '%s' is missing", name,
				 path);
			rc = -ENOENT;
		}
		*missing += !there;
		free(path);
		/* libvmdk gives the offset in the file as the descriptor
		 * writes it, in 512-byte sectors; the size in bytes */
		if (rc == 0 && (off < 0 || (uint64_t)off > UINT64_MAX / 512 ||
				!bi_fits64(UINT64_MAX, (uint64_t)off * 512, size))) {
			snprintf(err, errlen,
				 "VMDK image '%s': extent %d at sector %" PRId64 " of %" PRIu64
				 " bytes: past 2^64",
				 name, i, off, size);
			rc = -EUCLEAN;
		}
		if (rc == 0) {
			at[i] = (struct ext_at){ c->nsegs - 1, type, (uint64_t)off * 512, size };
			rc = ext_check(c, name, at, i, err, errlen);
		}
		if (rc < 0)
			break;
	}
	free(at);
	return rc;
}

/* The folder of @name, for libvmdk to find the extent files in. */
static void folder_of(const char *name, char *dir, size_t len)
{
	const char *slash = strrchr(name, '/');
	snprintf(dir, len, "%.*s", slash ? (int)(slash - name) : 1, slash ? name : ".");
}

/* Open @pt (extent @i of the disk @name, whose type is @ctype) as a disk of
 * one extent: a descriptor naming only it, in memory, read by libvmdk. */
static int part_open(struct vmdk_part *pt, const char *name, const char *ctype, int type,
		     int64_t off, const char *fn, char *err, size_t errlen)
{
	libvmdk_error_t *e = NULL;
	char why[512], dir[4096];
	const char *t = extent_type(type);
	if (!t || strchr(fn, '"')) {
		snprintf(err, errlen,
			 "VMDK image '%s': extent file '%s' is of a kind not read here", name, fn);
		return -EOPNOTSUPP;
	}
	size_t cap = strlen(fn) + 512;
	pt->text = malloc(cap);
	if (!pt->text)
		return -ENOMEM;
	/* the form of a descriptor (VMware's "Virtual Disk Format 1.1",
	 * section "The Descriptor File"): header, then the extent line */
	int len = snprintf(pt->text, cap,
			   "# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\n"
			   "createType=\"%s\"\n\n# Extent description\nRW %" PRIu64 " %s \"%s\"",
			   ctype, pt->size / 512, t, fn);
	if (type == LIBVMDK_EXTENT_TYPE_FLAT || type == LIBVMDK_EXTENT_TYPE_VMFS_FLAT)
		len += snprintf(pt->text + len, cap - (size_t)len, " %" PRId64, off);
	/* libvmdk wants the disk database's heading after the extents */
	len += snprintf(pt->text + len, cap - (size_t)len, "\n\n# The Disk Data Base\n#DDB\n\n");
	folder_of(name, dir, sizeof(dir));
	if (libbfio_memory_range_initialize(&pt->desc, NULL) != 1 ||
	    libbfio_memory_range_set(pt->desc, (uint8_t *)pt->text, (size_t)len, NULL) != 1 ||
	    libvmdk_handle_initialize(&pt->h, &e) != 1 ||
	    libvmdk_handle_open_file_io_handle(pt->h, pt->desc, LIBVMDK_OPEN_READ, &e) != 1 ||
	    libvmdk_handle_set_extent_data_files_path(pt->h, dir, strlen(dir), &e) != 1 ||
	    libvmdk_handle_open_extent_data_files(pt->h, &e) != 1) {
		vmdk_why(&e, why, sizeof(why));
		snprintf(err, errlen, "VMDK image '%s': cannot open its extent file '%s': %s", name,
			 fn, why);
		return -EIO;
	}
	size64_t size = 0;
	if (libvmdk_handle_get_media_size(pt->h, &size, NULL) != 1 || size != pt->size) {
		snprintf(err, errlen,
			 "VMDK image '%s': extent file '%s' holds %" PRIu64
			 " bytes, its descriptor says %" PRIu64,
			 name, fn, (uint64_t)size, pt->size);
		return -EIO;
	}
	return 0;
}

/* The disk @h (descriptor @name), one of whose extent files is missing:
 * every extent opened as a disk of its own, the missing ones noted. */
static int parts_open(struct bi_ctr *c, struct vmdk *v, libvmdk_handle_t *h, const char *name,
		      char *err, size_t errlen)
{
	int n = 0, dt = 0;
	if (libvmdk_handle_get_number_of_extents(h, &n, NULL) != 1 || n < 1 || n > VMDK_EXTENTS ||
	    libvmdk_handle_get_disk_type(h, &dt, NULL) != 1) {
		snprintf(err, errlen, "VMDK image '%s': cannot list its extents", name);
		return -EIO;
	}
	v->parts = calloc((size_t)n, sizeof(*v->parts));
	if (!v->parts)
		return -ENOMEM;
	uint64_t at = 0;
	size_t seg = 0;
	for (int i = 0; i < n; i++) {
		struct vmdk_part *pt = &v->parts[v->nparts++];
		char fn[4096];
		int type;
		int64_t off;
		if (extent_of(h, i, &type, &pt->size, &off, fn, sizeof(fn)) < 0 || pt->size % 512 ||
		    !bi_fits64(UINT64_MAX, at, pt->size)) {
			snprintf(err, errlen, "VMDK image '%s': its extent %d is unreadable", name,
				 i);
			return -EIO;
		}
		pt->start = at;
		at += pt->size;
		if (!fn[0])
			continue; /* ZERO: reads as zeros */
		/* extents() recorded the files in this order */
		if (seg >= c->nsegs)
			return -EIO;
		const struct bi_ctr_seg *s = &c->segs[seg++];
		pt->file = s->name;
		pt->missing = !s->present;
		if (pt->missing) {
			bi_ctr_note(
				c,
				"VMDK image '%s': extent file '%s' is missing: disk bytes %" PRIu64
				"-%" PRIu64 " cannot be read",
				name, s->name, pt->start, pt->start + pt->size - 1);
			if (!c->lost && !(c->lost = strdup(s->name)))
				return -ENOMEM;
			continue;
		}
		/* its last component only: libvmdk (20200926) joins a name that
		 * has a folder to the extent data files path with a wrong length
		 * (a mangled name, or a read past the name's buffer) */
		int rc = part_open(pt, name, disk_type(dt), type, off, last_component(fn), err,
				   errlen);
		if (rc < 0)
			return rc;
	}
	c->size = at;
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
	size_t missing = 0, moved = 0;
	int rc = extents(c, h, name, v->n == 1, &missing, &moved, err, errlen);
	if (rc < 0)
		return rc;
	if (missing || moved)
		return parts_open(c, v, h, name, err, errlen);
	char dir[4096];
	folder_of(name, dir, sizeof(dir));
	if ((libvmdk_handle_set_extent_data_files_path(h, dir, strlen(dir), &e) != 1 ||
	     libvmdk_handle_open_extent_data_files(h, &e) != 1)) {
		vmdk_why(&e, why, sizeof(why));
		snprintf(err, errlen, "VMDK image '%s': cannot open its extent files: %s", name,
			 why);
		return -EIO;
	}
	return 0;
}

/* The parent of the last disk opened (bi_ctr_companion), or NULL; the
 * name as stored to @stored when it is not the file looked for. */
static char *parent_of(libvmdk_handle_t *h, const char *name, char stored[4096])
{
	size_t sz = 0;
	bool moved;
	stored[0] = '\0';
	if (libvmdk_handle_get_utf8_parent_filename_size(h, &sz, NULL) != 1 || sz <= 1 || sz > 4096)
		return NULL;
	uint8_t b[4096];
	if (libvmdk_handle_get_utf8_parent_filename(h, b, sz, NULL) != 1)
		return NULL;
	b[sz - 1] = 0;
	char *p = bi_ctr_companion(name, (char *)b, &moved);
	if (p && moved)
		snprintf(stored, 4096, "%s", (char *)b);
	return p;
}

/* The parent @p of @cur: there, and a regular file (libvmdk opens it by
 * name: a FIFO would block it). */
static int parent_check(const char *cur, const char *p, const char *stored, char *err,
			size_t errlen)
{
	const char *why;
	char where[4200];
	where[0] = '\0';
	if (stored[0])
		snprintf(where, sizeof(where),
			 " (named '%s' in it; only the image's folder is searched)", stored);
	int rc = bi_ctr_check_regular(p, &why);
	if (rc == -ENOENT)
		snprintf(err, errlen, "VMDK image '%s': its parent '%s'%s is not there", cur, p,
			 where);
	else if (rc < 0)
		snprintf(err, errlen,
			 "VMDK image '%s': its parent '%s'%s %s: refused (only a regular file is "
			 "read)",
			 cur, p, where, why);
	return rc;
}

static int vmdk_open(struct bi_ctr *c, char *err, size_t errlen)
{
	struct vmdk *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	c->h = v;
	int rc = open_one(c, v, c->path, err, errlen);
	char *cur = strdup(c->path), *p = NULL, stored[4096];
	if (!cur)
		rc = -ENOMEM;
	while (rc == 0 && (p = parent_of(v->h[v->n - 1], cur, stored)) != NULL) {
		rc = bi_ctr_add_meta(c, "parent_file", p);
		if (rc == 0 && stored[0])
			rc = bi_ctr_add_meta(c, "parent_file_stored", stored);
		if (rc == 0 && v->parts && c->lost) {
			snprintf(err, errlen,
				 "VMDK image '%s': extent file '%s' is missing, and the disk has a "
				 "parent ('%s'): a child with an extent missing is not read",
				 c->path, c->lost, p);
			rc = -ENOENT;
		} else if (rc == 0 && v->parts) {
			snprintf(err, errlen,
				 "VMDK image '%s': an extent file is named with a folder, and the "
				 "disk has a parent ('%s'): such a child is not read",
				 c->path, p);
			rc = -EOPNOTSUPP;
		}
		if (rc == 0 && v->n >= VMDK_CHAIN) {
			snprintf(err, errlen, "VMDK image '%s': more than %d parents", c->path,
				 VMDK_CHAIN);
			rc = -ELOOP;
		}
		if (rc == 0)
			rc = parent_check(cur, p, stored, err, errlen);
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
	size64_t size = c->size; /* the extents' sum, when read one by one */
	int t = 0;
	if (rc == 0 && !v->parts && libvmdk_handle_get_media_size(v->h[0], &size, NULL) != 1) {
		snprintf(err, errlen, "VMDK image '%s': no media size", c->path);
		rc = -EIO;
	}
	if (rc == 0 && libvmdk_handle_get_disk_type(v->h[0], &t, NULL) == 1)
		c->detail = disk_type(t);
	c->size = size;
	return rc;
}

/* Read [off, off+len) of the disk @h (offsets @base less than the
 * container's: a part starts at @base). */
static int handle_read(libvmdk_handle_t *h, uint64_t base, uint64_t off, uint8_t *p, size_t len,
		       char *err, size_t errlen)
{
	libvmdk_error_t *e = NULL;
	while (len > 0) {
		ssize_t r =
			libvmdk_handle_read_buffer_at_offset(h, p, len, (off64_t)(off - base), &e);
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

/* The part holding byte @off (inside the disk). */
static const struct vmdk_part *part_at(const struct vmdk *v, uint64_t off)
{
	size_t lo = 0, hi = v->nparts;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (v->parts[mid].start <= off)
			lo = mid;
		else
			hi = mid;
	}
	return &v->parts[lo];
}

static int vmdk_read(struct bi_ctr *c, uint64_t off, void *buf, size_t len, char *err,
		     size_t errlen)
{
	struct vmdk *v = c->h;
	uint8_t *p = buf;
	if (!v->parts)
		return handle_read(v->h[0], 0, off, p, len, err, errlen);
	while (len > 0) {
		const struct vmdk_part *pt = part_at(v, off);
		uint64_t in = off - pt->start;
		size_t n = pt->size - in < len ? (size_t)(pt->size - in) : len;
		if (pt->missing) {
			snprintf(err, errlen,
				 "offset %" PRIu64 " lies in VMDK extent file '%s' (byte %" PRIu64
				 " of that extent, disk bytes %" PRIu64 "-%" PRIu64
				 "), which is missing",
				 off, pt->file, in, pt->start, pt->start + pt->size - 1);
			return -EIO;
		}
		if (!pt->h)
			memset(p, 0, n); /* a ZERO extent */
		else if (handle_read(pt->h, pt->start, off, p, n, err, errlen) < 0)
			return -EIO;
		p += n;
		off += n;
		len -= n;
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
