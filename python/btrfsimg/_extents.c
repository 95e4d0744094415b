// SPDX-License-Identifier: MIT
/* Filesystem.extents() and the checksum coverage of stat(): a file's
 * extents (btrfsimg_extents_*) as dicts with the keys of
 * `btrfsimg extents --json`. The records are gathered under the handle's
 * lock without the GIL, then turned into dicts. */
#include "ext.h"

#include <stdlib.h>
#include <string.h>

struct exlist {
	struct btrfsimg_extent *v;
	size_t n, cap;
};

static int gather(btrfsimg_fs *fs, uint64_t subvol, uint64_t obj, struct exlist *l)
{
	btrfsimg_extents *it;
	int rc = btrfsimg_extents_open(fs, subvol, obj, BTRFSIMG_EXTENTS_CSUM, &it);
	if (rc < 0)
		return rc;
	const struct btrfsimg_extent *e;
	while ((rc = btrfsimg_extents_next(it, &e)) > 0) {
		if (l->n == l->cap) {
			size_t cap = l->cap ? l->cap * 2 : 16;
			struct btrfsimg_extent *v = realloc(l->v, cap * sizeof(*v));
			if (!v) {
				rc = -ENOMEM;
				break;
			}
			l->v = v;
			l->cap = cap;
		}
		l->v[l->n++] = *e;
	}
	btrfsimg_extents_close(it);
	return rc;
}

static PyObject *opt_u64(bool has, uint64_t v)
{
	if (has)
		return u64(v);
	Py_RETURN_NONE;
}

static PyObject *copy_dict(const struct btrfsimg_extent_copy *k)
{
	PyObject *d = PyDict_New();
	if (!d)
		return NULL;
	PyObject *dev = k->device ? PyUnicode_DecodeFSDefault(k->device) : (Py_INCREF(Py_None), Py_None);
	PyObject *note = k->note[0] ? PyUnicode_FromString(k->note) : (Py_INCREF(Py_None), Py_None);
	if (set_take(d, "devid", u64(k->devid)) < 0 || set_take(d, "device", dev) < 0 ||
	    set_take(d, "physical", u64(k->physical)) < 0 ||
	    set_take(d, "disk_offset", opt_u64(k->has_disk_offset, k->disk_offset)) < 0 ||
	    set_take(d, "image_offset", opt_u64(k->has_image_offset, k->image_offset)) < 0 ||
	    set_take(d, "note", note) < 0) {
		Py_DECREF(d);
		return NULL;
	}
	return d;
}

static PyObject *extent_dict(const struct btrfsimg_extent *e)
{
	static const char *const types[] = { "inline", "regular", "prealloc", "hole" };
	static const char *const comps[] = { "none", "zlib", "lzo", "zstd" };
	PyObject *d = PyDict_New(), *copies = PyList_New(0);
	if (!d || !copies)
		goto fail;
	for (size_t i = 0; i < e->ncopies; i++) {
		PyObject *c = copy_dict(&e->copies[i]);
		if (!c || PyList_Append(copies, c) < 0) {
			Py_XDECREF(c);
			goto fail;
		}
		Py_DECREF(c);
	}
	if (set_take(d, "file_offset", u64(e->file_offset)) < 0 ||
	    set_take(d, "length", u64(e->length)) < 0 ||
	    set_take(d, "type", PyUnicode_FromString(types[e->type & 3])) < 0 ||
	    set_take(d, "compression", PyUnicode_FromString(comps[e->compression & 3])) < 0 ||
	    set_take(d, "item_offset", u64(e->item_offset)) < 0 ||
	    set_take(d, "generation", u64(e->generation)) < 0 ||
	    set_take(d, "ram_bytes", u64(e->ram_bytes)) < 0 ||
	    set_take(d, "disk_bytenr", u64(e->disk_bytenr)) < 0 ||
	    set_take(d, "disk_num_bytes", u64(e->disk_num_bytes)) < 0 ||
	    set_take(d, "extent_offset", u64(e->extent_offset)) < 0 ||
	    set_take(d, "logical", u64(e->logical)) < 0 ||
	    set_take(d, "disk_length", u64(e->disk_length)) < 0 ||
	    set_take(d, "csum", PyUnicode_FromString(btrfsimg_csum_cover_name(e->csum))) < 0 ||
	    set_take(d, "csum_bytes", u64(e->csum_bytes)) < 0)
		goto fail;
	if (set_take(d, "copies", copies) < 0) {
		copies = NULL;
		goto fail;
	}
	return d;
fail:
	Py_XDECREF(copies);
	Py_XDECREF(d);
	return NULL;
}

PyObject *list_extents(Handle *h, uint64_t subvol, uint64_t obj)
{
	struct exlist l = { 0 };
	int rc;
	HANDLE_CALL(h, rc, rc = gather(h->fs, subvol, obj, &l));
	if (rc == -ENOMEM)
		snprintf(h->msg, sizeof(h->msg), "out of memory listing extents");
	PyObject *list = rc < 0 ? NULL : PyList_New(0);
	for (size_t i = 0; list && i < l.n; i++) {
		PyObject *d = extent_dict(&l.v[i]);
		if (!d || PyList_Append(list, d) < 0)
			Py_CLEAR(list);
		Py_XDECREF(d);
	}
	free(l.v);
	if (rc < 0)
		return handle_drain(h) < 0 ? NULL : handle_raise(h, rc);
	if (handle_drain(h) < 0)
		Py_CLEAR(list);
	return list;
}

PyObject *csum_cover(Handle *h, uint64_t subvol, uint64_t obj)
{
	int rc;
	HANDLE_CALL(h, rc, rc = btrfsimg_file_csum_cover(h->fs, subvol, obj, NULL, NULL));
	if (handle_drain(h) < 0)
		return NULL;
	if (rc < 0)
		return handle_raise(h, rc);
	return PyUnicode_FromString(btrfsimg_csum_cover_name(rc));
}
