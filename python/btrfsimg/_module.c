// SPDX-License-Identifier: MIT
/*
 * btrfsimg._btrfsimg: the module, its exceptions and the Handle type (one
 * btrfsimg_fs). The Python package (__init__.py) builds the user-facing
 * API over it; see ext.h for the threading rules.
 */
#include "ext.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------ damage */

/* Runs with the handle's lock held and maybe without the GIL: queue only. */
static void on_log(void *ctx, bool damage, const char *msg)
{
	if (damage)
		handle_note(ctx, msg);
}

/* Finish a call: damage first (it may raise), then the failure if any. */
static PyObject *finish(Handle *h, int rc, PyObject *result)
{
	if (handle_drain(h) < 0) {
		Py_XDECREF(result);
		return NULL;
	}
	if (rc < 0) {
		Py_XDECREF(result);
		return handle_raise(h, rc);
	}
	Py_CLEAR(h->io_error);
	return result;
}

/* ------------------------------------------------------------ devices */

struct devio {
	Handle *h;	   /* borrowed: the handle owns the capsule */
	PyObject *read_at; /* read_at(offset, size), or NULL */
	PyObject *seek, *read, *readinto;
};

static void devio_free(PyObject *cap)
{
	struct devio *d = PyCapsule_GetPointer(cap, "btrfsimg.devio");
	if (!d)
		return;
	Py_XDECREF(d->read_at);
	Py_XDECREF(d->seek);
	Py_XDECREF(d->read);
	Py_XDECREF(d->readinto);
	free(d);
}

/* Copy what @r (a bytes-like object) holds into buf; -1 on error. */
static Py_ssize_t take_bytes(PyObject *r, uint8_t *buf, size_t room)
{
	Py_buffer b;
	if (PyObject_GetBuffer(r, &b, PyBUF_SIMPLE) < 0)
		return -1;
	Py_ssize_t n = b.len;
	if ((size_t)n > room) {
		PyBuffer_Release(&b);
		PyErr_Format(PyExc_ValueError, "device read returned %zd bytes, asked for %zu", n,
			     room);
		return -1;
	}
	memcpy(buf, b.buf, (size_t)n);
	PyBuffer_Release(&b);
	return n;
}

static int devio_read_locked(struct devio *d, uint64_t off, uint8_t *buf, size_t len)
{
	if (d->read_at) {
		PyObject *r = PyObject_CallFunction(d->read_at, "Kn", (unsigned long long)off,
						    (Py_ssize_t)len);
		if (!r)
			return -1;
		Py_ssize_t n = take_bytes(r, buf, len);
		Py_DECREF(r);
		if (n >= 0 && (size_t)n != len) {
			PyErr_Format(PyExc_EOFError, "read_at(%llu, %zu) returned %zd bytes",
				     (unsigned long long)off, len, n);
			return -1;
		}
		return n < 0 ? -1 : 0;
	}
	PyObject *r = PyObject_CallFunction(d->seek, "Ki", (unsigned long long)off, 0);
	if (!r)
		return -1;
	Py_DECREF(r);
	size_t got = 0;
	while (got < len) {
		Py_ssize_t n;
		if (d->readinto) {
			PyObject *mv = PyMemoryView_FromMemory(
				(char *)buf + got, (Py_ssize_t)(len - got), PyBUF_WRITE);
			if (!mv)
				return -1;
			r = PyObject_CallOneArg(d->readinto, mv);
			Py_DECREF(mv);
			if (!r)
				return -1;
			n = r == Py_None ? 0 : PyLong_AsSsize_t(r);
		} else {
			r = PyObject_CallFunction(d->read, "n", (Py_ssize_t)(len - got));
			if (!r)
				return -1;
			n = take_bytes(r, buf + got, len - got);
		}
		Py_DECREF(r);
		if (n < 0)
			return -1;
		if (n == 0) {
			PyErr_Format(PyExc_EOFError,
				     "end of file at %llu reading %zu bytes at %llu",
				     (unsigned long long)(off + got), len, (unsigned long long)off);
			return -1;
		}
		got += (size_t)n;
	}
	return 0;
}

static int devio_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	struct devio *d = ctx;
	PyGILState_STATE g = PyGILState_Ensure();
	int rc = 0;
	if (devio_read_locked(d, off, buf, len) < 0) {
		rc = -EIO;
		if (!d->h->io_error) {
			PyObject *t, *v, *tb;
			PyErr_Fetch(&t, &v, &tb);
			PyErr_NormalizeException(&t, &v, &tb);
			if (v && tb)
				PyException_SetTraceback(v, tb);
			d->h->io_error = v;
			Py_XDECREF(t);
			Py_XDECREF(tb);
		} else {
			PyErr_Clear();
		}
	}
	PyGILState_Release(g);
	return rc;
}

/* ------------------------------------------------------------ Handle */

static int Handle_init(Handle *h, PyObject *args, PyObject *kw)
{
	static char *kwl[] = {
		"flags", "partition", "offset", "super_mirror", "cache_bytes", NULL
	};
	unsigned flags = 0, partition = 0;
	PyObject *offset = Py_None, *mirror = Py_None;
	unsigned long long cache = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|IIOOK", kwl, &flags, &partition, &offset,
					 &mirror, &cache))
		return -1;
	if (h->fs) {
		PyErr_SetString(PyExc_RuntimeError, "Handle already initialised");
		return -1;
	}
	struct btrfsimg_open_opts o;
	btrfsimg_open_opts_init(&o);
	o.flags = flags;
	o.partition = partition;
	o.cache_bytes = cache;
	if (offset != Py_None) {
		o.offset = PyLong_AsUnsignedLongLong(offset);
		if (PyErr_Occurred())
			return -1;
		o.flags |= BTRFSIMG_OPEN_OFFSET;
	}
	if (mirror != Py_None) {
		o.super_mirror = (unsigned)PyLong_AsUnsignedLong(mirror);
		if (PyErr_Occurred())
			return -1;
		o.flags |= BTRFSIMG_OPEN_SUPER_MIRROR;
	}
	h->lock = PyThread_allocate_lock();
	h->dlock = PyThread_allocate_lock();
	h->devices = PyList_New(0);
	if (!h->lock || !h->dlock || !h->devices) {
		PyErr_NoMemory();
		return -1;
	}
	h->opts = o;
	int rc = btrfsimg_fs_new(&h->fs, &o);
	if (rc < 0) {
		raise_errno(rc, "creating the handle: bad options");
		return -1;
	}
	btrfsimg_set_log(h->fs, on_log, h);
	Py_INCREF(Py_None);
	h->on_damage = Py_None;
	return 0;
}

static void handle_release(Handle *h)
{
	forensic_free(h);
	btrfsimg_fs_free(h->fs);
	h->fs = NULL;
	h->opened = false;
	for (size_t i = 0; i < h->ndamage; i++)
		free(h->damage[i]);
	free(h->damage);
	h->damage = NULL;
	h->ndamage = h->damage_cap = 0;
}

static void Handle_dealloc(Handle *h)
{
	handle_release(h);
	if (h->lock)
		PyThread_free_lock(h->lock);
	if (h->dlock)
		PyThread_free_lock(h->dlock);
	Py_XDECREF(h->devices);
	Py_XDECREF(h->on_damage);
	Py_XDECREF(h->io_error);
	Py_TYPE(h)->tp_free((PyObject *)h);
}

static PyObject *Handle_close(Handle *h, PyObject *unused)
{
	if (h->busy) {
		PyErr_SetString(PyExc_RuntimeError,
				"an inodes() iteration is running: close() it first");
		return NULL;
	}
	if (h->fs) {
		Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(h->lock, WAIT_LOCK);
		handle_release(h);
		PyThread_release_lock(h->lock);
		Py_END_ALLOW_THREADS
	}
	Py_CLEAR(h->devices);
	h->devices = PyList_New(0);
	Py_XSETREF(h->on_damage, Py_NewRef(Py_None));
	Py_RETURN_NONE;
}

static int check_adding(Handle *h)
{
	if (!h->fs || h->opened) {
		PyErr_SetString(PyExc_ValueError, "devices are added before open()");
		return -1;
	}
	return 0;
}

static PyObject *Handle_add_file(Handle *h, PyObject *args)
{
	PyObject *arg, *b = NULL;
	int format = BTRFSIMG_FORMAT_AUTO;
	if (!PyArg_ParseTuple(args, "O|i", &arg, &format) || check_adding(h) < 0 ||
	    !PyUnicode_FSConverter(arg, &b))
		return NULL;
	const char *path = PyBytes_AS_STRING(b);
	int rc;
	HANDLE_CALL(h, rc, rc = btrfsimg_add_device_file_format(h->fs, path, format));
	Py_DECREF(b);
	return finish(h, rc, rc < 0 ? NULL : PyBool_FromLong(rc == 0));
}

/* set_key(kind, bytes): 0 passphrase, 1 volume key; set_key(2, str): the
 * LVM volume "VG/LV". */
static PyObject *Handle_set_key(Handle *h, PyObject *args)
{
	int kind;
	Py_buffer b;
	if (!PyArg_ParseTuple(args, "iy*", &kind, &b))
		return NULL;
	if (check_adding(h) < 0) {
		PyBuffer_Release(&b);
		return NULL;
	}
	int rc = -EINVAL;
	char *name = kind == 2 ? strndup(b.buf, (size_t)b.len) : NULL;
	HANDLE_CALL(h, rc,
		    rc = kind == 0   ? btrfsimg_set_passphrase(h->fs, b.buf, (size_t)b.len)
			 : kind == 1 ? btrfsimg_set_volume_key(h->fs, b.buf, (size_t)b.len)
			 : name	     ? btrfsimg_select_volume(h->fs, name)
				     : -ENOMEM);
	free(name);
	PyBuffer_Release(&b);
	return finish(h, rc, rc < 0 ? NULL : Py_NewRef(Py_None));
}

/* set_kdf_limit(ms): btrfsimg_set_kdf_limit (0: the default). */
static PyObject *Handle_set_kdf_limit(Handle *h, PyObject *args)
{
	unsigned long ms;
	if (!PyArg_ParseTuple(args, "k", &ms) || check_adding(h) < 0)
		return NULL;
	int rc = -EINVAL;
	if (ms <= BTRFSIMG_KDF_LIMIT_MAX_MS)
		HANDLE_CALL(h, rc, rc = btrfsimg_set_kdf_limit(h->fs, (uint32_t)ms));
	return finish(h, rc, rc < 0 ? NULL : Py_NewRef(Py_None));
}

/* set_generation(transid): btrfsimg_set_generation (0: the superblock's). */
static PyObject *Handle_set_generation(Handle *h, PyObject *args)
{
	unsigned long long gen;
	if (!PyArg_ParseTuple(args, "K", &gen) || check_adding(h) < 0)
		return NULL;
	int rc;
	HANDLE_CALL(h, rc, rc = btrfsimg_set_generation(h->fs, gen));
	return finish(h, rc, rc < 0 ? NULL : Py_NewRef(Py_None));
}

/* generation_root() -> (transid, how) or None: btrfsimg_generation_root. */
static PyObject *Handle_generation_root(Handle *h, PyObject *Py_UNUSED(args))
{
	if (handle_check_open(h) < 0)
		return NULL;
	uint64_t gen = 0;
	const char *how = btrfsimg_generation_root(h->fs, &gen);
	if (!how)
		Py_RETURN_NONE;
	return Py_BuildValue("(Ks)", (unsigned long long)gen, how);
}

static PyObject *Handle_add_io(Handle *h, PyObject *args)
{
	PyObject *obj;
	unsigned long long size;
	const char *name;
	int use_read_at;
	if (!PyArg_ParseTuple(args, "OKsp", &obj, &size, &name, &use_read_at) ||
	    check_adding(h) < 0)
		return NULL;
	struct devio *d = calloc(1, sizeof(*d));
	if (!d)
		return PyErr_NoMemory();
	d->h = h;
	PyObject *cap = PyCapsule_New(d, "btrfsimg.devio", devio_free);
	if (!cap) {
		free(d);
		return NULL;
	}
	if (use_read_at) {
		d->read_at = PyObject_GetAttrString(obj, "read_at");
	} else {
		d->seek = PyObject_GetAttrString(obj, "seek");
		if (PyObject_HasAttrString(obj, "readinto"))
			d->readinto = PyObject_GetAttrString(obj, "readinto");
		else
			d->read = PyObject_GetAttrString(obj, "read");
	}
	if (PyErr_Occurred() || PyList_Append(h->devices, cap) < 0) {
		Py_DECREF(cap);
		return NULL;
	}
	Py_DECREF(cap);
	int rc;
	HANDLE_CALL(h, rc, rc = btrfsimg_add_device_io(h->fs, devio_read, d, size, name));
	return finish(h, rc, Py_NewRef(Py_None));
}

static PyObject *Handle_open(Handle *h, PyObject *unused)
{
	if (check_adding(h) < 0)
		return NULL;
	int rc;
	HANDLE_CALL(h, rc, rc = btrfsimg_open(h->fs));
	if (rc == 0)
		h->opened = true;
	return finish(h, rc, Py_NewRef(Py_None));
}

/* Paths of @seq (str, bytes or os.PathLike) as a NULL-ended array into
 * *@paths, kept alive by the list *@keep. 0 or -1 with an exception. */
static int fs_paths(PyObject *seq, const char ***paths, PyObject **keep)
{
	PyObject *fast = PySequence_Fast(seq, "images: a sequence of paths");
	if (!fast)
		return -1;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
	*keep = PyList_New(0);
	*paths = PyMem_Calloc((size_t)n + 1, sizeof(**paths));
	for (Py_ssize_t i = 0; *keep && *paths && i < n; i++) {
		PyObject *b = NULL;
		if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(fast, i), &b) ||
		    PyList_Append(*keep, b) < 0) {
			Py_XDECREF(b);
			break;
		}
		(*paths)[i] = PyBytes_AS_STRING(b);
		Py_DECREF(b);
	}
	Py_DECREF(fast);
	if (!*paths && !PyErr_Occurred())
		PyErr_NoMemory();
	if (!PyErr_Occurred())
		return 0;
	PyMem_Free(*paths);
	Py_CLEAR(*keep);
	return -1;
}

/* set_fsid(uuid): btrfsimg_set_fsid (None: the superblock's). */
static PyObject *Handle_set_fsid(Handle *h, PyObject *args)
{
	const char *uuid;
	if (!PyArg_ParseTuple(args, "z", &uuid) || check_adding(h) < 0)
		return NULL;
	int rc;
	HANDLE_CALL(h, rc, rc = btrfsimg_set_fsid(h->fs, uuid));
	return finish(h, rc, rc < 0 ? NULL : Py_NewRef(Py_None));
}

/* open_images(paths, format, passphrase, volume_key, volume, kdf_ms,
 * generation, fsid): the handle made again by btrfsimg_open_images, with the
 * options of Handle() and these, and opened (or its error raised). */
static PyObject *Handle_open_images(Handle *h, PyObject *args)
{
	PyObject *seq, *keep = NULL;
	int format;
	Py_buffer pass = { 0 }, vkey = { 0 };
	const char *volume;
	unsigned long kdf;
	unsigned long long gen;
	const char *fsid;
	const char **paths = NULL;
	if (!PyArg_ParseTuple(args, "Oiz*z*zkKz", &seq, &format, &pass, &vkey, &volume, &kdf, &gen,
			      &fsid))
		return NULL;
	if (check_adding(h) < 0 || fs_paths(seq, &paths, &keep) < 0) {
		PyBuffer_Release(&pass);
		PyBuffer_Release(&vkey);
		return NULL;
	}
	struct btrfsimg_open_options o = BTRFSIMG_OPEN_OPTIONS_INIT;
	o.fs = h->opts;
	o.format = format;
	o.passphrase = pass.buf;
	o.passphrase_len = (size_t)pass.len;
	o.volume_key = vkey.buf;
	o.volume_key_len = (size_t)vkey.len;
	o.volume = volume;
	o.kdf_limit_ms = kdf > UINT32_MAX ? UINT32_MAX : (uint32_t)kdf;
	o.generation = gen;
	o.fsid = fsid;
	o.log = on_log;
	o.log_ctx = h;
	size_t n = (size_t)PyList_GET_SIZE(keep);
	int rc;
	HANDLE_CALL(h, rc, btrfsimg_fs_free(h->fs); h->fs = NULL;
		    rc = btrfsimg_open_images(&h->fs, paths, n, &o));
	PyMem_Free(paths);
	Py_DECREF(keep);
	PyBuffer_Release(&pass);
	PyBuffer_Release(&vkey);
	if (rc == 0)
		h->opened = true;
	return finish(h, rc, Py_NewRef(Py_None));
}

static PyObject *Handle_super(Handle *h, PyObject *unused)
{
	if (handle_check_open(h) < 0)
		return NULL;
	PyObject *d = dict_super(h);
	return d ? finish(h, 0, d) : (handle_drain(h), NULL);
}

static PyObject *Handle_subvols(Handle *h, PyObject *unused)
{
	if (handle_check_open(h) < 0)
		return NULL;
	PyObject *l = list_subvols(h);
	return l ? finish(h, 0, l) : (handle_drain(h), NULL);
}

static PyObject *Handle_default_subvol(Handle *h, PyObject *unused)
{
	uint64_t id = 0;
	int rc;
	if (handle_check_open(h) < 0)
		return NULL;
	HANDLE_CALL(h, rc, rc = btrfsimg_default_subvol(h->fs, &id));
	return finish(h, rc, rc < 0 ? NULL : u64(id));
}

static PyObject *dirent_tuple(const struct btrfsimg_dirent *e, bool with_name)
{
	if (with_name)
		return Py_BuildValue("(y#iKKKi)", (const char *)e->name, (Py_ssize_t)e->name_len,
				     (int)e->kind, (unsigned long long)e->target_subvol,
				     (unsigned long long)e->target_objectid,
				     (unsigned long long)e->location_objectid, (int)e->file_type);
	return Py_BuildValue("(iKKKi)", (int)e->kind, (unsigned long long)e->target_subvol,
			     (unsigned long long)e->target_objectid,
			     (unsigned long long)e->location_objectid, (int)e->file_type);
}

/* lookup(subvol, path: bytes) -> (kind, subvol, objectid, d_ino, file_type) */
static PyObject *Handle_lookup(Handle *h, PyObject *args)
{
	unsigned long long subvol;
	const char *path;
	Py_ssize_t len;
	if (!PyArg_ParseTuple(args, "Ky#", &subvol, &path, &len) || handle_check_open(h) < 0)
		return NULL;
	if (strlen(path) != (size_t)len) {
		PyErr_SetString(PyExc_ValueError, "embedded NUL in path");
		return NULL;
	}
	struct btrfsimg_dirent e;
	int rc;
	HANDLE_CALL(h, rc, rc = btrfsimg_path_lookup(h->fs, subvol, path, &e));
	return finish(h, rc, rc < 0 ? NULL : dirent_tuple(&e, false));
}

struct collect {
	PyObject *list;
	bool failed;
	/* raw rows gathered without the GIL */
	uint8_t *buf;
	size_t len, cap;
	size_t n;
};

static int grow(struct collect *c, size_t need)
{
	if (c->len + need <= c->cap)
		return 0;
	size_t cap = c->cap ? c->cap : 4096;
	while (cap < c->len + need)
		cap *= 2;
	uint8_t *b = realloc(c->buf, cap);
	if (!b)
		return -ENOMEM;
	c->buf = b;
	c->cap = cap;
	return 0;
}

/* A row: header struct then the name's bytes (and the value's). */
struct rawrow {
	struct btrfsimg_dirent e;
	size_t a_len, b_len;
};

static int collect_dirent(void *ctx, const struct btrfsimg_dirent *e)
{
	struct collect *c = ctx;
	size_t need = sizeof(struct rawrow) + e->name_len;
	need = (need + 7) & ~(size_t)7;
	if (grow(c, need) < 0)
		return -ENOMEM;
	struct rawrow r = { .e = *e, .a_len = e->name_len };
	r.e.name = NULL;
	memcpy(c->buf + c->len, &r, sizeof(r));
	memcpy(c->buf + c->len + sizeof(r), e->name, e->name_len);
	c->len += need;
	c->n++;
	return 0;
}

static int collect_xattr(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *value,
			 size_t vlen)
{
	struct collect *c = ctx;
	size_t need = (sizeof(struct rawrow) + nlen + vlen + 7) & ~(size_t)7;
	if (grow(c, need) < 0)
		return -ENOMEM;
	struct rawrow r = { .a_len = nlen, .b_len = vlen };
	memcpy(c->buf + c->len, &r, sizeof(r));
	memcpy(c->buf + c->len + sizeof(r), name, nlen);
	memcpy(c->buf + c->len + sizeof(r) + nlen, value, vlen);
	c->len += need;
	c->n++;
	return 0;
}

static PyObject *rows_list(struct collect *c, bool xattr)
{
	PyObject *l = PyList_New((Py_ssize_t)c->n);
	size_t off = 0;
	for (size_t i = 0; l && i < c->n; i++) {
		struct rawrow r;
		memcpy(&r, c->buf + off, sizeof(r));
		const uint8_t *a = c->buf + off + sizeof(r);
		PyObject *t;
		if (xattr) {
			t = Py_BuildValue("(y#y#)", (const char *)a, (Py_ssize_t)r.a_len,
					  (const char *)a + r.a_len, (Py_ssize_t)r.b_len);
		} else {
			r.e.name = a;
			t = dirent_tuple(&r.e, true);
		}
		if (!t) {
			Py_CLEAR(l);
			break;
		}
		PyList_SET_ITEM(l, (Py_ssize_t)i, t);
		off += (sizeof(r) + r.a_len + r.b_len + 7) & ~(size_t)7;
	}
	free(c->buf);
	return l;
}

/* ------------------------------------------------------------- diff */

struct change_row {
	int kind;
	unsigned fields;
	uint64_t objectid;
	uint8_t *path, *old_path;
	size_t path_len, old_path_len;
	bool has_old;
};

struct changes {
	struct change_row *v;
	size_t n, cap;
};

static uint8_t *dup_bytes(const uint8_t *s, size_t n)
{
	uint8_t *d = malloc(n ? n : 1);
	if (d && n)
		memcpy(d, s, n);
	return d;
}

/* Copied out under the handle's lock, the GIL released; turned into
 * Python objects afterwards. */
static int collect_change(void *ctx, const struct btrfsimg_change *ch)
{
	struct changes *c = ctx;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		if (cap > SIZE_MAX / sizeof(*c->v))
			return -ENOMEM;
		void *v = realloc(c->v, cap * sizeof(*c->v));
		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	struct change_row *r = &c->v[c->n];
	*r = (struct change_row){ ch->kind, ch->fields, ch->objectid,
				  dup_bytes(ch->path, ch->path_len), NULL, ch->path_len, 0,
				  ch->old_path != NULL };
	if (r->has_old)
		r->old_path = dup_bytes(ch->old_path, ch->old_path_len);
	if (!r->path || (r->has_old && !r->old_path)) {
		free(r->path);
		free(r->old_path);
		return -ENOMEM;
	}
	c->n++;
	r->old_path_len = ch->old_path_len;
	return 0;
}

static PyObject *change_dict(const struct change_row *r)
{
	PyObject *fields = PyList_New(0);
	for (unsigned bit = 1; fields && bit && bit <= r->fields; bit <<= 1)
		if (r->fields & bit) {
			PyObject *s = PyUnicode_FromString(btrfsimg_diff_field_name(bit));
			if (!s || PyList_Append(fields, s) < 0) {
				Py_XDECREF(s);
				Py_CLEAR(fields);
				break;
			}
			Py_DECREF(s);
		}
	if (!fields)
		return NULL;
	PyObject *old = r->has_old ? name_str(r->old_path, r->old_path_len) : Py_NewRef(Py_None);
	PyObject *d = old ? Py_BuildValue("{s:s,s:N,s:N,s:K,s:N}", "change",
					  btrfsimg_change_name(r->kind), "path",
					  name_str(r->path, r->path_len), "old_path", old,
					  "objectid", (unsigned long long)r->objectid, "fields",
					  fields)
			  : NULL;
	if (!old)
		Py_DECREF(fields);
	return d;
}

static void changes_free(struct changes *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].path);
		free(c->v[i].old_path);
	}
	free(c->v);
}

/* The diff under both handles' locks (taken in address order, so that two
 * threads diffing the same pair the other way round cannot deadlock). */
static int diff_locked(Handle *h, Handle *o, uint64_t from, uint64_t to, struct changes *c)
{
	int rc;
	Handle *first = o && o < h ? o : h, *second = o && o != h ? (o < h ? h : o) : NULL;
	Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(first->lock, WAIT_LOCK);
	if (second)
		PyThread_acquire_lock(second->lock, WAIT_LOCK);
	rc = btrfsimg_diff_between(o ? o->fs : h->fs, from, h->fs, to, collect_change, c, NULL);
	if (rc < 0)
		handle_keep_msg(h);
	if (second)
		PyThread_release_lock(second->lock);
	PyThread_release_lock(first->lock);
	Py_END_ALLOW_THREADS
	return rc;
}

/* diff(from, to, from_handle=None) -> [{"change", "path", "old_path",
 * "objectid", "fields"}]; from is read through from_handle when given
 * (the same images at another generation) */
static PyObject *Handle_diff(Handle *h, PyObject *args)
{
	unsigned long long from, to;
	PyObject *other = Py_None;
	if (!PyArg_ParseTuple(args, "KK|O", &from, &to, &other) || handle_check_open(h) < 0)
		return NULL;
	Handle *o = NULL;
	if (other != Py_None) {
		if (!PyObject_TypeCheck(other, &Handle_Type)) {
			PyErr_SetString(PyExc_TypeError, "diff: from_handle is not a Handle");
			return NULL;
		}
		o = (Handle *)other;
		if (handle_check_open(o) < 0)
			return NULL;
	}
	struct changes c = { 0 };
	int rc = diff_locked(h, o, from, to, &c);
	PyObject *l = rc < 0 ? NULL : PyList_New((Py_ssize_t)c.n);
	for (size_t i = 0; l && i < c.n; i++) {
		PyObject *d = change_dict(&c.v[i]);
		if (!d) {
			Py_CLEAR(l);
			break;
		}
		PyList_SET_ITEM(l, (Py_ssize_t)i, d);
	}
	changes_free(&c);
	if (o && handle_drain(o) < 0) {
		Py_XDECREF(l);
		return NULL;
	}
	return finish(h, rc, l);
}

/* readdir(subvol, dir) -> [(name, kind, subvol, objectid, d_ino, file_type)] */
static PyObject *Handle_readdir(Handle *h, PyObject *args)
{
	unsigned long long subvol, dir;
	if (!PyArg_ParseTuple(args, "KK", &subvol, &dir) || handle_check_open(h) < 0)
		return NULL;
	struct collect c = { 0 };
	int rc;
	HANDLE_CALL(h, rc, rc = btrfsimg_readdir(h->fs, subvol, dir, collect_dirent, &c));
	if (rc < 0) {
		free(c.buf);
		return finish(h, rc, NULL);
	}
	return finish(h, 0, rows_list(&c, false));
}

/* xattrs(subvol, objectid) -> [(name, value)] in listxattr order */
static PyObject *Handle_xattrs(Handle *h, PyObject *args)
{
	unsigned long long subvol, obj;
	if (!PyArg_ParseTuple(args, "KK", &subvol, &obj) || handle_check_open(h) < 0)
		return NULL;
	struct collect c = { 0 };
	int rc;
	HANDLE_CALL(h, rc, rc = btrfsimg_xattrs(h->fs, subvol, obj, collect_xattr, &c));
	if (rc < 0) {
		free(c.buf);
		return finish(h, rc, NULL);
	}
	return finish(h, 0, rows_list(&c, true));
}

static PyObject *Handle_readlink(Handle *h, PyObject *args)
{
	unsigned long long subvol, obj;
	if (!PyArg_ParseTuple(args, "KK", &subvol, &obj) || handle_check_open(h) < 0)
		return NULL;
	uint8_t *t = NULL;
	size_t len = 0;
	int rc;
	HANDLE_CALL(h, rc, rc = btrfsimg_readlink(h->fs, subvol, obj, &t, &len));
	PyObject *r = rc < 0 ? NULL : PyBytes_FromStringAndSize((const char *)t, (Py_ssize_t)len);
	free(t);
	return finish(h, rc, r);
}

/* inode(subvol, objectid) -> (mode, size, nlink) : what a file object needs */
static PyObject *Handle_inode(Handle *h, PyObject *args)
{
	unsigned long long subvol, obj;
	if (!PyArg_ParseTuple(args, "KK", &subvol, &obj) || handle_check_open(h) < 0)
		return NULL;
	struct btrfsimg_inode i;
	int rc;
	HANDLE_CALL(h, rc, rc = btrfsimg_inode_get(h->fs, subvol, obj, &i));
	return finish(h, rc,
		      rc < 0 ? NULL
			     : Py_BuildValue("(IKI)", i.mode, (unsigned long long)i.size, i.nlink));
}

/* readinto(subvol, objectid, offset, buffer) -> bytes read (0 at EOF) */
static PyObject *Handle_readinto(Handle *h, PyObject *args)
{
	unsigned long long subvol, obj, off;
	Py_buffer b;
	if (!PyArg_ParseTuple(args, "KKKw*", &subvol, &obj, &off, &b))
		return NULL;
	if (handle_check_open(h) < 0) {
		PyBuffer_Release(&b);
		return NULL;
	}
	size_t got = 0;
	int rc;
	HANDLE_CALL(h, rc,
		    rc = btrfsimg_file_read(h->fs, subvol, obj, off, b.buf, (size_t)b.len, &got));
	PyBuffer_Release(&b);
	return finish(h, rc, rc < 0 ? NULL : PyLong_FromSize_t(got));
}

/* read_all(subvol, objectid, offset) -> bytes: a regular file from @offset
 * to its end in one call, read straight into the bytes object returned
 * (no buffer in between, no lookup per chunk: one inode lookup for the
 * length, then one read with the GIL released). The length is i_size,
 * cut where btrfsimg_file_length says the size may be forged (a
 * DamageWarning saying so), so a forged size cannot make the module
 * allocate more than the devices could hold. */
static PyObject *Handle_read_all(Handle *h, PyObject *args)
{
	unsigned long long subvol, obj, off;
	if (!PyArg_ParseTuple(args, "KKK", &subvol, &obj, &off) || handle_check_open(h) < 0)
		return NULL;
	struct btrfsimg_inode i;
	uint64_t len = 0, end = 0;
	int rc, cut = 0;
	HANDLE_CALL(h, rc, {
		rc = btrfsimg_inode_get(h->fs, subvol, obj, &i);
		len = rc == 0 ? i.size : 0;
		if (rc == 0 && S_ISREG(i.mode) && len > btrfsimg_file_size_bound(h->fs))
			rc = cut = btrfsimg_file_length(h->fs, subvol, obj, &len, &end);
	});
	if (rc < 0)
		return finish(h, rc, NULL);
	if (!S_ISREG(i.mode)) {
		handle_drain(h);
		return PyErr_Format(S_ISDIR(i.mode) ? PyExc_IsADirectoryError : PyExc_OSError,
				    "%llu:%llu is %s (mode 0%o)", subvol, obj,
				    S_ISDIR(i.mode) ? "a directory" : "not a regular file", i.mode);
	}
	if (cut == 1) {
		char m[400];
		snprintf(m, sizeof(m),
			 "subvol=%llu inode=%llu size=%llu is more than %llu (16 bytes per byte"
			 " of the devices) and its data ends at byte %llu: read up to byte %llu;"
			 " the rest, under a size that may be forged, left out",
			 subvol, obj, (unsigned long long)i.size,
			 (unsigned long long)btrfsimg_file_size_bound(h->fs),
			 (unsigned long long)end, (unsigned long long)len);
		handle_note(h, m);
	}
	uint64_t left = off < len ? len - off : 0;
	if (left > (uint64_t)PY_SSIZE_T_MAX)
		return finish(h, 0, PyErr_NoMemory());
	size_t want = (size_t)left, got = 0;
	PyObject *r = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)want);
	if (!r || !want)
		return finish(h, 0, r);
	char *buf = PyBytes_AS_STRING(r);
	HANDLE_CALL(h, rc, rc = btrfsimg_file_read(h->fs, subvol, obj, off, buf, want, &got));
	if (rc == 0 && got < want && _PyBytes_Resize(&r, (Py_ssize_t)got) < 0)
		return finish(h, 0, NULL);
	return finish(h, rc, r);
}

static PyObject *Handle_walk(Handle *h, PyObject *args)
{
	unsigned long long subvol, mount;
	const char *path;
	Py_ssize_t len;
	int hash, inumbits, single;
	if (!PyArg_ParseTuple(args, "Ky#piKp", &subvol, &path, &len, &hash, &inumbits, &mount,
			      &single) ||
	    handle_check_open(h) < 0)
		return NULL;
	return walk_new(h, subvol, path, len, hash, inumbits, mount, single);
}

static PyObject *Handle_inodes(Handle *h, PyObject *args)
{
	unsigned long long subvol, mount;
	unsigned bits;
	if (!PyArg_ParseTuple(args, "KIK", &subvol, &bits, &mount) || handle_check_open(h) < 0)
		return NULL;
	return inodes_new(h, subvol, bits, mount);
}

static PyObject *Handle_collisions(Handle *h, PyObject *args)
{
	unsigned long long mount;
	Py_ssize_t examples;
	if (!PyArg_ParseTuple(args, "Kn", &mount, &examples) || handle_check_open(h) < 0)
		return NULL;
	PyObject *d = dict_collisions(h, mount, examples);
	return d ? finish(h, 0, d) : (handle_drain(h), NULL);
}

static PyObject *Handle_extents(Handle *h, PyObject *args)
{
	unsigned long long subvol, obj;
	if (!PyArg_ParseTuple(args, "KK", &subvol, &obj) || handle_check_open(h) < 0)
		return NULL;
	return list_extents(h, subvol, obj);
}

static PyObject *Handle_csum_cover(Handle *h, PyObject *args)
{
	unsigned long long subvol, obj;
	if (!PyArg_ParseTuple(args, "KK", &subvol, &obj) || handle_check_open(h) < 0)
		return NULL;
	return csum_cover(h, subvol, obj);
}

static PyObject *Handle_deleted(Handle *h, PyObject *args)
{
	int hash;
	if (!PyArg_ParseTuple(args, "p", &hash) || handle_check_open(h) < 0)
		return NULL;
	PyObject *l = list_deleted(h, hash);
	return l ? finish(h, 0, l) : (handle_drain(h), NULL);
}

static PyObject *Handle_read_deleted(Handle *h, PyObject *args)
{
	const char *id;
	int raw = 0;
	if (!PyArg_ParseTuple(args, "s|p", &id, &raw) || handle_check_open(h) < 0)
		return NULL;
	PyObject *r = read_deleted(h, id, raw ? BTRFSIMG_FORENSIC_RAW : 0);
	return r ? finish(h, 0, r) : (handle_drain(h), NULL);
}

static PyObject *Handle_counts(Handle *h, PyObject *unused)
{
	if (!h->fs) {
		PyErr_SetString(PyExc_ValueError, "closed");
		return NULL;
	}
	uint64_t d = 0, m = 0;
	int rc = 0;
	HANDLE_CALL(h, rc, d = btrfsimg_damage_count(h->fs); m = btrfsimg_missing_devices(h->fs));
	return Py_BuildValue("(KK)", (unsigned long long)d, (unsigned long long)m);
}

static PyMethodDef Handle_methods[] = {
	{ "close", (PyCFunction)Handle_close, METH_NOARGS, "Release the library handle." },
	{ "add_file", (PyCFunction)Handle_add_file, METH_VARARGS,
	  "add_file(path, format=0) -> False when path is a segment already added" },
	{ "set_key", (PyCFunction)Handle_set_key, METH_VARARGS,
	  "set_key(kind, bytes): 0 passphrase, 1 volume key, 2 LVM volume VG/LV" },
	{ "set_kdf_limit", (PyCFunction)Handle_set_kdf_limit, METH_VARARGS,
	  "set_kdf_limit(ms): LUKS key derivation allowed per keyslot (0: default)" },
	{ "open_images", (PyCFunction)Handle_open_images, METH_VARARGS,
	  "open_images(paths, format, passphrase, volume_key, volume, kdf_ms, generation, fsid): "
	  "the one open (btrfsimg_open_images)" },
	{ "set_fsid", (PyCFunction)Handle_set_fsid, METH_VARARGS,
	  "set_fsid(uuid): read the filesystem of that fsid or prefix (None: the superblock's)" },
	{ "set_generation", (PyCFunction)Handle_set_generation, METH_VARARGS,
	  "set_generation(transid): read that generation's root tree (0: the superblock's)" },
	{ "generation_root", (PyCFunction)Handle_generation_root, METH_NOARGS,
	  "generation_root() -> (transid, how) or None" },
	{ "add_io", (PyCFunction)Handle_add_io, METH_VARARGS,
	  "add_io(obj, size, name, use_read_at)" },
	{ "open", (PyCFunction)Handle_open, METH_NOARGS, "open()" },
	{ "super", (PyCFunction)Handle_super, METH_NOARGS, "super() -> dict" },
	{ "subvols", (PyCFunction)Handle_subvols, METH_NOARGS, "subvols() -> list" },
	{ "default_subvol", (PyCFunction)Handle_default_subvol, METH_NOARGS, "default_subvol()" },
	{ "lookup", (PyCFunction)Handle_lookup, METH_VARARGS, "lookup(subvol, path)" },
	{ "readdir", (PyCFunction)Handle_readdir, METH_VARARGS, "readdir(subvol, dir)" },
	{ "xattrs", (PyCFunction)Handle_xattrs, METH_VARARGS, "xattrs(subvol, objectid)" },
	{ "diff", (PyCFunction)Handle_diff, METH_VARARGS, "diff(from, to, from_handle=None)" },
	{ "readlink", (PyCFunction)Handle_readlink, METH_VARARGS, "readlink(subvol, objectid)" },
	{ "inode", (PyCFunction)Handle_inode, METH_VARARGS, "inode(subvol, objectid)" },
	{ "readinto", (PyCFunction)Handle_readinto, METH_VARARGS,
	  "readinto(subvol, objectid, offset, buffer)" },
	{ "read_all", (PyCFunction)Handle_read_all, METH_VARARGS,
	  "read_all(subvol, objectid, offset) -> bytes from offset to the end" },
	{ "walk", (PyCFunction)Handle_walk, METH_VARARGS,
	  "walk(subvol, path, hash, inumbits, mount_subvol, single)" },
	{ "inodes", (PyCFunction)Handle_inodes, METH_VARARGS, "inodes(subvol, inumbits, mount)" },
	{ "collisions", (PyCFunction)Handle_collisions, METH_VARARGS,
	  "collisions(mount_subvol, max_examples)" },
	{ "deleted", (PyCFunction)Handle_deleted, METH_VARARGS, "deleted(hash) -> list" },
	{ "extents", (PyCFunction)Handle_extents, METH_VARARGS, "extents(subvol, objectid)" },
	{ "csum_cover", (PyCFunction)Handle_csum_cover, METH_VARARGS,
	  "csum_cover(subvol, objectid) -> str" },
	{ "read_deleted", (PyCFunction)Handle_read_deleted, METH_VARARGS,
	  "read_deleted(id, raw=False) -> (bytes, complete)" },
	{ "counts", (PyCFunction)Handle_counts, METH_NOARGS,
	  "counts() -> (damage events, missing devices)" },
	{ NULL, NULL, 0, NULL },
};

static PyObject *Handle_get_on_damage(Handle *h, void *unused)
{
	return Py_NewRef(h->on_damage ? h->on_damage : Py_None);
}

static int Handle_set_on_damage(Handle *h, PyObject *v, void *unused)
{
	if (v && v != Py_None && !PyCallable_Check(v)) {
		PyErr_SetString(PyExc_TypeError, "on_damage must be callable or None");
		return -1;
	}
	Py_XSETREF(h->on_damage, Py_NewRef(v ? v : Py_None));
	return 0;
}

static PyObject *Handle_get_closed(Handle *h, void *unused)
{
	return PyBool_FromLong(h->fs == NULL);
}

static PyGetSetDef Handle_getset[] = {
	{ "on_damage", (getter)Handle_get_on_damage, (setter)Handle_set_on_damage,
	  "callable(message) for damage that was worked around", NULL },
	{ "closed", (getter)Handle_get_closed, NULL, "True once closed", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject Handle_Type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "btrfsimg._btrfsimg.Handle",
	.tp_basicsize = sizeof(Handle),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "One libbtrfsimg handle (internal: use btrfsimg.open()).",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Handle_init,
	.tp_dealloc = (destructor)Handle_dealloc,
	.tp_methods = Handle_methods,
	.tp_getset = Handle_getset,
};

/* ------------------------------------------------------------ module */

static PyObject *mod_version(PyObject *self, PyObject *unused)
{
	return PyUnicode_FromString(btrfsimg_version());
}

static PyObject *mod_format(PyObject *self, PyObject *arg)
{
	const char *name = PyUnicode_AsUTF8(arg);
	if (!name)
		return NULL;
	int f = btrfsimg_format_parse(name);
	if (f < 0)
		return PyErr_Format(PyExc_ValueError, "unknown image format %R", arg);
	if (!btrfsimg_format_supported(f))
		return raise_errno(-EOPNOTSUPP, "this build reads no such container");
	return PyLong_FromLong(f);
}

static PyMethodDef mod_methods[] = {
	{ "format", mod_format, METH_O,
	  "format(name) -> the library's number for a container format" },
	{ "version", mod_version, METH_NOARGS, "The library's version string." },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef moddef = {
	PyModuleDef_HEAD_INIT,
	.m_name = "btrfsimg._btrfsimg",
	.m_doc = "The C layer of btrfsimg (internal: import btrfsimg).",
	.m_size = -1,
	.m_methods = mod_methods,
};

PyMODINIT_FUNC PyInit__btrfsimg(void);
PyMODINIT_FUNC PyInit__btrfsimg(void)
{
	PyObject *m = PyModule_Create(&moddef);
	if (!m)
		return NULL;
	if (PyType_Ready(&Handle_Type) < 0 || PyType_Ready(&Walk_Type) < 0 ||
	    PyType_Ready(&Inodes_Type) < 0 || walk_init_keys() < 0 || inodes_init_keys() < 0)
		goto fail;
	if (PyModule_AddObjectRef(m, "Handle", (PyObject *)&Handle_Type) < 0)
		goto fail;
	if (errors_add(m) < 0)
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
