// SPDX-License-Identifier: MIT
/*
 * What every part of the extension stands on: conversions of the
 * library's values to Python objects, the exception classes and how a
 * negative errno becomes one, and the handle's core (its lock's message,
 * the damage queue). The parts (_module.c, _walk.c, _dicts.c, _inodes.c,
 * _forensic.c, _extents.c) call down into this file and never into one
 * another, so no two files depend on each other (scripts/layers.py).
 */
#include "ext.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static PyObject *Error, *NotFoundError, *DamagedError, *UnsupportedError;

/* ------------------------------------------------------------ conversions */

PyObject *u64(uint64_t v)
{
	return PyLong_FromUnsignedLongLong((unsigned long long)v);
}

PyObject *name_str(const uint8_t *s, size_t n)
{
	return PyUnicode_DecodeUTF8((const char *)s, (Py_ssize_t)n, "surrogateescape");
}

PyObject *time_list(int64_t sec, uint32_t nsec)
{
	PyObject *l = PyList_New(2), *a = PyLong_FromLongLong(sec),
		 *b = PyLong_FromUnsignedLong(nsec);
	if (!l || !a || !b) {
		Py_XDECREF(l);
		Py_XDECREF(a);
		Py_XDECREF(b);
		return NULL;
	}
	PyList_SET_ITEM(l, 0, a);
	PyList_SET_ITEM(l, 1, b);
	return l;
}

int set_take(PyObject *d, const char *key, PyObject *v)
{
	if (!v)
		return -1;
	int rc = PyDict_SetItemString(d, key, v);
	Py_DECREF(v);
	return rc;
}

/* ------------------------------------------------------------ errors */

PyObject *raise_errno(int rc, const char *msg)
{
	int e = rc < 0 ? -rc : rc;
	PyObject *cls = Error;
	if (e == ENOENT)
		cls = NotFoundError;
	else if (e == EUCLEAN || e == EIO)
		cls = DamagedError;
	else if (e == EOPNOTSUPP)
		cls = UnsupportedError;
	else if (e == ENOMEM)
		return PyErr_NoMemory();
	const char *m = msg && *msg ? msg : strerror(e);
	PyObject *text = PyUnicode_DecodeUTF8(m, (Py_ssize_t)strlen(m), "backslashreplace");
	PyObject *exc = text ? PyObject_CallFunction(cls, "iO", e, text) : NULL;
	Py_XDECREF(text);
	if (exc) {
		PyErr_SetObject(cls, exc);
		Py_DECREF(exc);
	}
	return NULL;
}

PyObject *handle_raise(Handle *h, int rc)
{
	PyObject *cause = h->io_error;
	h->io_error = NULL;
	raise_errno(rc, h->msg);
	if (cause) {
		PyObject *t, *v, *tb;
		PyErr_Fetch(&t, &v, &tb);
		PyErr_NormalizeException(&t, &v, &tb);
		if (v)
			PyException_SetCause(v, cause); /* steals cause */
		else
			Py_DECREF(cause);
		PyErr_Restore(t, v, tb);
	}
	return NULL;
}

/* ------------------------------------------------------------ the handle */

void handle_keep_msg(Handle *h)
{
	const char *m = h->fs ? btrfsimg_errmsg(h->fs) : "";
	snprintf(h->msg, sizeof(h->msg), "%s", m);
}

int handle_check_open(Handle *h)
{
	if (h->busy) {
		PyErr_SetString(PyExc_RuntimeError,
				"an inodes() iteration is running on this Filesystem: finish or "
				"close() it first (or open a second Filesystem)");
		return -1;
	}
	if (!h->fs) {
		PyErr_SetString(PyExc_ValueError, "I/O operation on a closed btrfsimg.Filesystem");
		return -1;
	}
	if (!h->opened) {
		PyErr_SetString(PyExc_ValueError, "the filesystem is not open yet");
		return -1;
	}
	return 0;
}

static void handle_note_locked(Handle *h, const char *msg)
{
	if (h->ndamage == h->damage_cap) {
		size_t cap = h->damage_cap ? 2 * h->damage_cap : 8;
		char **v = realloc(h->damage, cap * sizeof(*v));
		if (!v)
			return;
		h->damage = v;
		h->damage_cap = cap;
	}
	char *s = strdup(msg);
	if (s)
		h->damage[h->ndamage++] = s;
}

void handle_note(Handle *h, const char *msg)
{
	PyThread_acquire_lock(h->dlock, WAIT_LOCK);
	handle_note_locked(h, msg);
	PyThread_release_lock(h->dlock);
}

int handle_drain(Handle *h)
{
	int rc = 0;
	if (!h->dlock)
		return 0;
	PyThread_acquire_lock(h->dlock, WAIT_LOCK);
	size_t n = h->ndamage;
	char **v = h->damage;
	h->damage = NULL;
	h->ndamage = h->damage_cap = 0;
	PyThread_release_lock(h->dlock);
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (rc == 0 && h->on_damage && h->on_damage != Py_None) {
			PyObject *m = PyUnicode_DecodeUTF8(v[i], (Py_ssize_t)strlen(v[i]),
							   "backslashreplace");
			PyObject *r = m ? PyObject_CallOneArg(h->on_damage, m) : NULL;
			Py_XDECREF(m);
			if (!r)
				rc = -1;
			Py_XDECREF(r);
		}
		free(v[i]);
	}
	free(v);
	return rc;
}

static PyObject *new_error(PyObject *m, const char *name, const char *doc, PyObject *bases)
{
	char full[64];
	snprintf(full, sizeof(full), "btrfsimg.%s", name);
	PyObject *e = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
	if (e && PyModule_AddObjectRef(m, name, e) < 0)
		Py_CLEAR(e);
	return e;
}

int errors_add(PyObject *m)
{
	Error = new_error(m, "Error",
			  "A libbtrfsimg failure: errno is the library's negative return made\n"
			  "positive, strerror (and str()) its message saying what and where.",
			  PyExc_OSError);
	if (!Error)
		return -1;
	PyObject *nf = PyTuple_Pack(2, Error, PyExc_FileNotFoundError);
	NotFoundError = nf ? new_error(m, "NotFoundError",
				       "No such path, inode, subvolume or device (ENOENT).", nf)
			   : NULL;
	Py_XDECREF(nf);
	DamagedError = new_error(m, "DamagedError",
				 "Corrupt metadata (EUCLEAN), or an I/O or checksum failure on\n"
				 "every copy (EIO).",
				 Error);
	UnsupportedError = new_error(m, "UnsupportedError",
				     "A feature libbtrfsimg does not read (EOPNOTSUPP).", Error);
	if (!NotFoundError || !DamagedError || !UnsupportedError)
		return -1;
	return 0;
}
