// SPDX-License-Identifier: MIT
/*
 * Filesystem.walk(): every path under a start, depth-first in readdir
 * (DIR_INDEX) order, crossing into subvolumes, stub directories empty, as
 * `btrfsimg walk --json` lists them (tools/cmds/walk.c), one dict per path
 * with the same keys and values. The traversal is the library's walk
 * iterator (btrfsimg_walk_next), the CLI's too; one record per next(). The
 * test tests/python/test_python.py holds the two equal on every committed image.
 *
 * Each next() gathers one record with the GIL released (struct rec), then
 * builds the dict under the GIL from interned keys.
 */
#include "ext.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum {
	K_PATH,
	K_INO,
	K_SUBVOL,
	K_MODE,
	K_NLINK,
	K_UID,
	K_GID,
	K_SIZE,
	K_RDEV,
	K_ATIME,
	K_MTIME,
	K_CTIME,
	K_BTIME,
	K_TARGET,
	K_D_INO,
	K_HANDLE,
	K_HANDLE_CONN,
	K_SHA256,
	K_XATTRS,
	K_SCHEME_INO,
	K_NFS_FILEID,
	K_SCHEME_D_INO,
	K_NFS_D_FILEID,
	K_NUMDEVS2_DEV,
	K_TYPE,
	K_HEX,
	K_NAME_DAMAGE,
	K_NFS4_D_FILEID,
	K_NFS_FILEID_N,
	K_NFS_D_FILEID_N,
	K_NFS4_D_FILEID_N,
	K_EVIDENCE,
	K_AS_OF,
	K_LOST_FOUND,
	K_SYNTHESIZED,
	K_COUNT
};
static const char *const key_names[K_COUNT] = {
	"path",	  "ino",	"subvol",     "mode",	      "nlink",	      "uid",
	"gid",	  "size",	"rdev",	      "atime",	      "mtime",	      "ctime",
	"btime",  "target",	"d_ino",      "handle",	      "handle_conn",  "sha256",
	"xattrs", "scheme_ino", "nfs_fileid", "scheme_d_ino", "nfs_d_fileid", "numdevs2_dev",
	"type",	  "hex",	"name_damage",
	"nfs4_d_fileid", "nfs_fileid_inumbits", "nfs_d_fileid_inumbits", "nfs4_d_fileid_inumbits",
	"evidence", "as_of_generation", "lost_found", "synthesized",
};
static PyObject *keys[K_COUNT];

int walk_init_keys(void)
{
	for (int i = 0; i < K_COUNT; i++)
		if (!keys[i] && !(keys[i] = PyUnicode_InternFromString(key_names[i])))
			return -1;
	return 0;
}

/* One path's record, gathered without the GIL. */
struct rec {
	struct btrfsimg_inode inode;
	uint64_t ino, subvol, d_ino;
	bool stub, is_start, symlink, target_ok;
	uint8_t *target;
	size_t target_len;
	int handle_len[2];
	uint32_t handle_type[2];
	uint8_t handle[2][40];
	bool hashed, is_reg, sha_ok;
	char sha[65];
	uint8_t *xbuf; /* xattr digests: name_len (size_t), name, 64 hex */
	size_t xlen, xcap;
	bool schemes;
	struct btrfsimg_walk_numbers num; /* under the scheme asked (schemes) */
	const char *name_damage; /* btrfsimg_name_problem of a damaged name, or NULL */
	uint64_t as_of;		 /* btrfsimg_walk_entry.as_of_generation */
	bool lost_found;
};

typedef struct {
	PyObject_HEAD Handle *h;
	uint64_t subvol;
	char *start;
	bool hash, single, done;
	int inumbits;
	btrfsimg_numdevs2 *devs;	     /* numdevs=2 devices (inumbits >= 0) */
	btrfsimg_walk *it;		     /* opened by the first next() */
	const struct btrfsimg_walk_entry *e; /* the current path's */
	struct rec r;
} Walk;

static void note(Walk *w, const char *what, int rc)
{
	char m[1400];
	const struct btrfsimg_walk_entry *e = w->e;
	const char *msg = btrfsimg_errmsg(w->h->fs);
	if (what)
		snprintf(m, sizeof(m), "%.*s: %s: %s", (int)(e->path_len ? e->path_len : 1),
			 e->path_len ? (const char *)e->path : ".", what,
			 *msg ? msg : strerror(-rc));
	else /* not descending: the message says why */
		snprintf(m, sizeof(m), "%.*s: %s", (int)(e->path_len ? e->path_len : 1),
			 e->path_len ? (const char *)e->path : ".", msg);
	handle_note(w->h, m);
}

/* ------------------------------------------------ one record */

static void rec_clear(struct rec *r)
{
	free(r->target);
	free(r->xbuf);
}

static void take_handle(Walk *w, const struct btrfsimg_walk_entry *n, bool conn, struct rec *r)
{
	int k = conn ? 1 : 0;
	int len = btrfsimg_walk_handle(w->h->fs, n, conn, &r->handle_type[k], r->handle[k]);
	r->handle_len[k] = len < 0 || len > 40 ? -1 : len;
}

static int xattr_digest(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *value,
			size_t vlen)
{
	struct rec *r = ctx;
	size_t need = sizeof(size_t) + nlen + 64;
	if (r->xlen + need > r->xcap) {
		size_t cap = r->xcap ? r->xcap : 256;
		while (cap < r->xlen + need)
			cap *= 2;
		uint8_t *b = realloc(r->xbuf, cap);
		if (!b)
			return -ENOMEM;
		r->xbuf = b;
		r->xcap = cap;
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	EVP_Digest(value, vlen, md, &mdlen, EVP_sha256(), NULL);
	btrfsimg_hex(md, mdlen, hex, sizeof(hex));
	memcpy(r->xbuf + r->xlen, &nlen, sizeof(nlen));
	memcpy(r->xbuf + r->xlen + sizeof(nlen), name, nlen);
	memcpy(r->xbuf + r->xlen + sizeof(nlen) + nlen, hex, 64);
	r->xlen += need;
	return 0;
}

static void take_hashes(Walk *w, const struct btrfsimg_walk_entry *n, struct rec *r)
{
	btrfsimg_fs *fs = w->h->fs;
	r->hashed = true;
	r->is_reg = S_ISREG(n->inode.mode);
	if (r->is_reg) {
		r->sha_ok = btrfsimg_file_digest(fs, n->subvol, n->objectid, n->inode.size,
						 "sha256", r->sha, sizeof(r->sha)) == 0;
		if (!r->sha_ok) {
			char m[1400];
			snprintf(m, sizeof(m), "%.*s: %s", (int)n->path_len, (const char *)n->path,
				 btrfsimg_errmsg(fs));
			handle_note(w->h, m);
		}
	}
	if (!n->stub && !n->inode.synthesized) { /* a made-up inode's are unknown */
		int rc = btrfsimg_xattrs(fs, n->subvol, n->objectid, xattr_digest, r);
		if (rc < 0)
			note(w, "xattrs", rc);
	}
}

static void take(Walk *w, const struct btrfsimg_walk_entry *n)
{
	struct rec *r = &w->r;
	*r = (struct rec){ .inode = n->inode,
			   .ino = n->objectid,
			   .subvol = n->subvol,
			   .d_ino = n->ent.location_objectid,
			   .stub = n->stub,
			   .is_start = n->is_start,
			   .as_of = n->as_of_generation,
			   .lost_found = n->lost_found,
			   .name_damage = n->is_start ? NULL
						      : btrfsimg_name_problem(n->ent.name,
									      n->ent.name_len) };
	r->symlink = S_ISLNK(n->inode.mode);
	if (r->symlink) {
		int rc = btrfsimg_readlink(w->h->fs, n->subvol, n->objectid, &r->target,
					   &r->target_len);
		r->target_ok = rc == 0;
		if (rc < 0)
			note(w, "readlink", rc);
	}
	take_handle(w, n, false, r);
	take_handle(w, n, true, r);
	if (w->hash)
		take_hashes(w, n, r);
	r->schemes = w->inumbits >= 0;
	if (r->schemes)
		btrfsimg_walk_numbers(n, (unsigned)w->inumbits, w->devs, &r->num);
}

/* ------------------------------------------------ stepping */

/* Gather the next record into w->r: 1 if there is one, 0 at the end, or a
 * negative errno (fatal: the start could not be read). Per-entry failures
 * become warnings and the walk goes on. */
static int step(Walk *w)
{
	int rc;
	if (!w->it) {
		struct btrfsimg_walk_opts o = { .subvol = w->subvol, .path = w->start };
		if ((rc = btrfsimg_walk_open(w->h->fs, &o, &w->it)) < 0)
			return rc;
	}
	while ((rc = btrfsimg_walk_next(w->it, &w->e)) > 0) {
		if (w->e->kind == BTRFSIMG_WALK_ERROR) {
			note(w, w->e->op, w->e->error);
			continue;
		}
		char m[1024], p[1400]; /* a damaged name: the path shows its safe form */
		if (w->e->kind == BTRFSIMG_WALK_PATH && !w->e->is_start &&
		    btrfsimg_name_damage(w->e->dir_subvol, w->e->dir_objectid, &w->e->ent, m,
					 sizeof(m))) {
			snprintf(p, sizeof(p), "%.*s: %s", (int)w->e->path_len,
				 (const char *)w->e->path, m);
			handle_note(w->h, p);
		}
		take(w, w->e);
		return 1;
	}
	return rc;
}

/* ------------------------------------------------ the dict */

static int put(PyObject *d, int k, PyObject *v)
{
	if (!v)
		return -1;
	int rc = PyDict_SetItem(d, keys[k], v);
	Py_DECREF(v);
	return rc;
}

static PyObject *handle_dict(const struct rec *r, int k)
{
	if (r->handle_len[k] < 0)
		Py_RETURN_NONE;
	char hex[81];
	btrfsimg_hex(r->handle[k], (size_t)r->handle_len[k], hex, sizeof(hex));
	PyObject *d = PyDict_New();
	if (d && (put(d, K_TYPE, PyLong_FromUnsignedLong(r->handle_type[k])) < 0 ||
		  put(d, K_HEX, PyUnicode_FromStringAndSize(hex, 2 * r->handle_len[k])) < 0))
		Py_CLEAR(d);
	return d;
}

static PyObject *xattr_dict(const struct rec *r)
{
	PyObject *d = PyDict_New();
	for (size_t off = 0; d && off < r->xlen;) {
		size_t nlen;
		memcpy(&nlen, r->xbuf + off, sizeof(nlen));
		const uint8_t *name = r->xbuf + off + sizeof(nlen);
		PyObject *k = name_str(name, nlen);
		PyObject *v = PyUnicode_FromStringAndSize((const char *)name + nlen, 64);
		if (!k || !v || PyDict_SetItem(d, k, v) < 0)
			Py_CLEAR(d);
		Py_XDECREF(k);
		Py_XDECREF(v);
		off += sizeof(nlen) + nlen + 64;
	}
	return d;
}

static PyObject *opt_u64(bool none, uint64_t v)
{
	if (none)
		Py_RETURN_NONE;
	return u64(v);
}

static PyObject *opt_time(bool none, const struct btrfsimg_timespec *t)
{
	if (none)
		Py_RETURN_NONE;
	return time_list(t->sec, t->nsec);
}

static PyObject *rdev_str(uint64_t rdev)
{
	static PyObject *zero; /* "0:0": every path but device files */
	if (rdev == 0 && (zero || (zero = PyUnicode_InternFromString("0:0"))))
		return Py_NewRef(zero);
	return PyUnicode_FromFormat("%llu:%llu", (unsigned long long)(rdev >> 20),
				    (unsigned long long)(rdev & 0xfffff));
}

static int put_schemes(PyObject *d, const struct rec *r)
{
	const struct btrfsimg_walk_numbers *n = &r->num;
	if (put(d, K_SCHEME_INO, u64(n->ino)) < 0 || put(d, K_NFS_FILEID, u64(n->nfs_fileid)) < 0 ||
	    put(d, K_SCHEME_D_INO, opt_u64(r->is_start, n->d_ino)) < 0 ||
	    put(d, K_NFS_D_FILEID, opt_u64(r->is_start, n->nfs_d_fileid)) < 0 ||
	    put(d, K_NFS4_D_FILEID, opt_u64(r->is_start, n->nfs4_d_fileid)) < 0 ||
	    put(d, K_NFS_FILEID_N, u64(n->nfs_fileid_inumbits)) < 0 ||
	    put(d, K_NFS_D_FILEID_N, opt_u64(r->is_start, n->nfs_d_fileid_inumbits)) < 0 ||
	    put(d, K_NFS4_D_FILEID_N, opt_u64(r->is_start, n->nfs4_d_fileid_inumbits)) < 0)
		return -1;
	return put(d, K_NUMDEVS2_DEV, opt_u64(n->numdevs2_dev < 0, (uint64_t)n->numdevs2_dev));
}

/* uid through btime; None for each of a synthesized inode (unknown) */
static int put_owner_times(PyObject *d, const struct btrfsimg_inode *i)
{
	bool u = i->synthesized;
	return put(d, K_UID, opt_u64(u, i->uid)) < 0 || put(d, K_GID, opt_u64(u, i->gid)) < 0 ||
			       put(d, K_SIZE, opt_u64(u, i->size)) < 0 ||
			       put(d, K_RDEV, rdev_str(i->rdev)) < 0 ||
			       put(d, K_ATIME, opt_time(u, &i->atime)) < 0 ||
			       put(d, K_MTIME, opt_time(u, &i->mtime)) < 0 ||
			       put(d, K_CTIME, opt_time(u, &i->ctime)) < 0 ||
			       put(d, K_BTIME, opt_time(u, &i->otime)) < 0
		       ? -1
		       : 0;
}

/* tools/cmds/walk.c put_json, key for key. */
static PyObject *rec_dict(Walk *w)
{
	const struct rec *r = &w->r;
	const struct btrfsimg_inode *i = &r->inode;
	PyObject *d = PyDict_New();
	if (!d)
		return NULL;
	if (put(d, K_PATH, name_str(w->e->path, w->e->path_len)) < 0 ||
	    put(d, K_INO, u64(r->ino)) < 0 || put(d, K_SUBVOL, opt_u64(r->stub, r->subvol)) < 0 ||
	    put(d, K_MODE, PyLong_FromUnsignedLong(i->mode)) < 0 ||
	    put(d, K_NLINK, PyLong_FromUnsignedLong(i->nlink)) < 0 || put_owner_times(d, i) < 0)
		goto fail;
	if (r->symlink &&
	    put(d, K_TARGET,
		r->target_ok ? PyUnicode_DecodeUTF8((const char *)r->target,
						    (Py_ssize_t)r->target_len, "surrogateescape")
			     : Py_NewRef(Py_None)) < 0)
		goto fail;
	if (put(d, K_D_INO, opt_u64(r->is_start, r->d_ino)) < 0 ||
	    put(d, K_HANDLE, handle_dict(r, 0)) < 0 || put(d, K_HANDLE_CONN, handle_dict(r, 1)) < 0)
		goto fail;
	if (r->name_damage && put(d, K_NAME_DAMAGE, PyUnicode_FromString(r->name_damage)) < 0)
		goto fail;
	if (r->as_of && (put(d, K_EVIDENCE, PyUnicode_FromString("scan")) < 0 ||
			 put(d, K_AS_OF, PyLong_FromUnsignedLongLong(r->as_of)) < 0))
		goto fail;
	if (r->lost_found && put(d, K_LOST_FOUND, Py_NewRef(Py_True)) < 0)
		goto fail;
	if (i->synthesized && put(d, K_SYNTHESIZED, Py_NewRef(Py_True)) < 0)
		goto fail;
	if (r->hashed) {
		if (r->is_reg && put(d, K_SHA256,
				     r->sha_ok ? PyUnicode_FromStringAndSize(r->sha, 64)
					       : Py_NewRef(Py_None)) < 0)
			goto fail;
		if (put(d, K_XATTRS, i->synthesized ? Py_NewRef(Py_None) : xattr_dict(r)) < 0)
			goto fail;
	}
	if (r->schemes && put_schemes(d, r) < 0)
		goto fail;
	return d;
fail:
	Py_DECREF(d);
	return NULL;
}

/* ------------------------------------------------ the type */

static void walk_end(Walk *w)
{
	btrfsimg_walk_close(w->it);
	w->it = NULL;
	w->e = NULL;
	btrfsimg_numdevs2_free(w->devs);
	w->devs = NULL;
	w->done = true;
}

static PyObject *Walk_next(Walk *w)
{
	Handle *h = w->h;
	if (w->done)
		return NULL;
	if (handle_check_open(h) < 0)
		return NULL;
	int rc = 0;
	HANDLE_CALL(h, rc, rc = step(w));
	PyObject *d = rc > 0 ? rec_dict(w) : NULL;
	if (rc > 0) {
		rec_clear(&w->r);
		memset(&w->r, 0, sizeof(w->r));
	}
	if (rc <= 0 || w->single)
		walk_end(w);
	if (handle_drain(h) < 0) {
		Py_XDECREF(d);
		return NULL;
	}
	if (rc < 0)
		return handle_raise(h, rc);
	return d;
}

static void Walk_dealloc(Walk *w)
{
	PyObject_GC_UnTrack(w);
	walk_end(w);
	rec_clear(&w->r);
	free(w->start);
	Py_XDECREF(w->h);
	PyObject_GC_Del(w);
}

static int Walk_traverse(Walk *w, visitproc visit, void *arg)
{
	Py_VISIT(w->h);
	return 0;
}

PyTypeObject Walk_Type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "btrfsimg._btrfsimg.WalkIterator",
	.tp_basicsize = sizeof(Walk),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
	.tp_doc = "Iterator of walk records (dicts as `btrfsimg walk --json` lines).",
	.tp_dealloc = (destructor)Walk_dealloc,
	.tp_traverse = (traverseproc)Walk_traverse,
	.tp_iter = PyObject_SelfIter,
	.tp_iternext = (iternextfunc)Walk_next,
};

PyObject *walk_new(Handle *h, uint64_t subvol, const char *path, Py_ssize_t path_len, bool hash,
		   int inumbits, uint64_t mount_subvol, bool single)
{
	if (strlen(path) != (size_t)path_len) {
		PyErr_SetString(PyExc_ValueError, "embedded NUL in path");
		return NULL;
	}
	if (inumbits > 64 || (inumbits > 0 && inumbits < 32) || inumbits < -1) {
		PyErr_SetString(PyExc_ValueError, "inumbits is 0 or 32..64");
		return NULL;
	}
	Walk *w = PyObject_GC_New(Walk, &Walk_Type);
	if (!w)
		return NULL;
	memset((char *)w + sizeof(PyObject), 0, sizeof(*w) - sizeof(PyObject));
	w->h = (Handle *)Py_NewRef((PyObject *)h);
	w->subvol = subvol;
	w->hash = hash;
	w->single = single;
	w->inumbits = inumbits;
	w->start = strdup(path);
	PyObject_GC_Track(w);
	if (!w->start) {
		Py_DECREF(w);
		return PyErr_NoMemory();
	}
	if (inumbits >= 0) {
		int rc;
		HANDLE_CALL(h, rc, rc = btrfsimg_numdevs2_open(h->fs, mount_subvol, &w->devs));
		if (rc < 0) {
			Py_DECREF(w);
			handle_drain(h);
			return handle_raise(h, rc);
		}
	}
	return (PyObject *)w;
}
