// SPDX-License-Identifier: MIT
/*
 * Filesystem.deleted() and .read_deleted(): btrfsimg_forensic.h's
 * recovered versions as dicts with the keys and values of `btrfsimg
 * deleted --json` (tools/common/recovered.c rec_json), and their bytes. The
 * scan (every device read end to end) runs once per Filesystem; its index
 * lives on the handle until it is closed.
 */
#include "ext.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg_forensic.h"

struct drow {
	struct btrfsimg_recovered r; /* id, path and bad point at the copies below */
	char *id, *path;
	struct btrfsimg_bad_range *bad;
	bool have_sha;
	char sha[65];
};

struct drows {
	btrfsimg_forensic *f;
	bool hash;
	struct drow *v;
	size_t n, cap;
};

static int on_recovered(void *ctx, const struct btrfsimg_recovered *r)
{
	struct drows *d = ctx;
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 64;
		void *v = realloc(d->v, cap * sizeof(*d->v));
		if (!v)
			return -ENOMEM;
		d->v = v;
		d->cap = cap;
	}
	struct drow *w = &d->v[d->n];
	*w = (struct drow){ .r = *r };
	w->id = strdup(r->id ? r->id : "");
	w->path = r->path ? strdup(r->path) : NULL;
	w->bad = r->nbad ? calloc(r->nbad, sizeof(*w->bad)) : NULL;
	if (!w->id || (r->path && !w->path) || (r->nbad && !w->bad)) {
		free(w->id);
		free(w->path);
		free(w->bad);
		return -ENOMEM;
	}
	if (r->nbad)
		memcpy(w->bad, r->bad, r->nbad * sizeof(*w->bad));
	d->n++;
	if (d->hash && r->status == BTRFSIMG_REC_INTACT)
		w->have_sha =
			btrfsimg_forensic_digest(d->f, w->id, "sha256", w->sha, sizeof(w->sha)) == 0;
	return 0;
}

static void drows_free(struct drows *d)
{
	for (size_t i = 0; i < d->n; i++) {
		free(d->v[i].id);
		free(d->v[i].path);
		free(d->v[i].bad);
	}
	free(d->v);
}

static int scan(Handle *h)
{
	if (h->forensic)
		return 0;
	return btrfsimg_forensic_scan(h->fs, NULL, NULL, &h->forensic);
}

static PyObject *opt_str(const char *s)
{
	if (!s)
		Py_RETURN_NONE;
	return name_str((const uint8_t *)s, strlen(s));
}

static PyObject *bad_list(const struct drow *w)
{
	PyObject *l = PyList_New((Py_ssize_t)w->r.nbad);
	for (size_t k = 0; l && k < w->r.nbad; k++) {
		PyObject *o = Py_BuildValue("{s:K,s:K,s:s}", "offset",
					    (unsigned long long)w->bad[k].offset, "length",
					    (unsigned long long)w->bad[k].length, "why",
					    w->bad[k].why ? w->bad[k].why : "");
		if (!o)
			Py_CLEAR(l);
		else
			PyList_SET_ITEM(l, (Py_ssize_t)k, o);
	}
	return l;
}

/* tools/common/recovered.c rec_json, key for key. */
static PyObject *row_dict(const struct drow *w)
{
	const struct btrfsimg_recovered *r = &w->r;
	const struct btrfsimg_inode *i = &r->inode;
	PyObject *d = PyDict_New();
	if (!d || set_take(d, "id", opt_str(w->id)) < 0 ||
	    set_take(d, "kind", opt_str(btrfsimg_recovered_kind_name(r->kind))) < 0 ||
	    set_take(d, "subvol", u64(r->subvol)) < 0 ||
	    set_take(d, "objectid", u64(r->objectid)) < 0 ||
	    set_take(d, "generation", u64(r->generation)) < 0 ||
	    set_take(d, "transid", u64(i->transid)) < 0 ||
	    set_take(d, "path", opt_str(w->path)) < 0 || set_take(d, "mode", u64(i->mode)) < 0 ||
	    set_take(d, "uid", u64(i->uid)) < 0 || set_take(d, "gid", u64(i->gid)) < 0 ||
	    set_take(d, "size", u64(i->size)) < 0 || set_take(d, "nlink", u64(i->nlink)) < 0 ||
	    set_take(d, "atime", time_list(i->atime.sec, i->atime.nsec)) < 0 ||
	    set_take(d, "mtime", time_list(i->mtime.sec, i->mtime.nsec)) < 0 ||
	    set_take(d, "ctime", time_list(i->ctime.sec, i->ctime.nsec)) < 0 ||
	    set_take(d, "btime", time_list(i->otime.sec, i->otime.nsec)) < 0 ||
	    set_take(d, "status", opt_str(btrfsimg_recovered_status_name(r->status))) < 0 ||
	    set_take(d, "verified", PyBool_FromLong(r->verified)) < 0 ||
	    set_take(d, "inline", PyBool_FromLong(r->has_inline)) < 0 ||
	    set_take(d, "compressed", PyBool_FromLong(r->compressed)) < 0 ||
	    set_take(d, "nodatasum", PyBool_FromLong(r->nodatasum)) < 0 ||
	    set_take(d, "bad_ranges", bad_list(w)) < 0 ||
	    (w->have_sha && set_take(d, "sha256", PyUnicode_FromStringAndSize(w->sha, 64)) < 0))
		Py_CLEAR(d);
	return d;
}

PyObject *list_deleted(Handle *h, bool hash)
{
	struct drows d = { .hash = hash };
	int rc;
	HANDLE_CALL(h, rc, rc = scan(h); d.f = h->forensic;
		    if (rc == 0) rc = btrfsimg_forensic_recovered(d.f, on_recovered, &d));
	PyObject *l = NULL;
	if (rc >= 0) {
		l = PyList_New((Py_ssize_t)d.n);
		for (size_t i = 0; l && i < d.n; i++) {
			PyObject *o = row_dict(&d.v[i]);
			if (!o)
				Py_CLEAR(l);
			else
				PyList_SET_ITEM(l, (Py_ssize_t)i, o);
		}
	}
	drows_free(&d);
	return rc < 0 ? handle_raise(h, rc) : l;
}

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static int take_piece(void *ctx, uint64_t off, const void *data, size_t len)
{
	struct buf *b = ctx;
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		while (cap < b->len + len)
			cap *= 2;
		uint8_t *p = realloc(b->p, cap);
		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
	return 0;
}

PyObject *read_deleted(Handle *h, const char *id, unsigned flags)
{
	struct buf b = { 0 };
	int rc;
	HANDLE_CALL(h, rc, rc = scan(h);
		    if (rc == 0) rc = btrfsimg_forensic_read_flags(h->forensic, id, flags, take_piece,
									&b));
	PyObject *r = rc < 0 ? NULL
			     : Py_BuildValue("(y#O)", b.p ? (const char *)b.p : "",
					     (Py_ssize_t)b.len, rc == 0 ? Py_True : Py_False);
	free(b.p);
	return rc < 0 ? handle_raise(h, rc) : r;
}

void forensic_free(Handle *h)
{
	btrfsimg_forensic_free(h->forensic);
	h->forensic = NULL;
}
