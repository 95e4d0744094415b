/* SPDX-License-Identifier: MIT */
/*
 * btrfsimg._btrfsimg: the CPython extension under the btrfsimg package.
 * A thin layer over the public C API (include/btrfsimg.h,
 * btrfsimg_inum.h): one Handle per btrfsimg_fs, dicts shaped as the
 * CLI's JSON lines, iterators for walk and inodes.
 *
 * Threads and the GIL: every library call runs with the GIL released and
 * the handle's lock held (HANDLE_CALL). A device read through a Python
 * file object takes the GIL back inside the callback; the lock is only
 * ever taken without the GIL, so the two cannot deadlock. Damage the
 * library reports through its log callback is queued on the handle (no
 * GIL needed) and handed to the handle's on_damage callable once the call
 * is back under the GIL (handle_drain).
 */
#ifndef BTRFSIMG_PY_EXT_H
#define BTRFSIMG_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <stdbool.h>
#include <stdint.h>

#include "btrfsimg.h"
#include "btrfsimg_forensic.h"
#include "btrfsimg_inum.h"

typedef struct {
	PyObject_HEAD btrfsimg_fs *fs;
	PyThread_type_lock lock;
	bool opened;
	bool busy;		     /* an inodes() iteration holds the lock */
	PyThread_type_lock dlock;    /* guards the damage queue */
	btrfsimg_forensic *forensic; /* deleted(): the scan's index, made once */
	PyObject *devices;	     /* file objects read through callbacks (kept alive) */
	PyObject *on_damage;	     /* callable(str) or None */
	PyObject *io_error;	     /* the first exception a device callback raised */
	char **damage;		     /* messages queued by the log callback */
	size_t ndamage, damage_cap;
	char msg[1024]; /* the last failure's message, copied under the lock */
	struct btrfsimg_open_opts opts; /* as made, for open_images */
} Handle;

extern PyTypeObject Handle_Type;
extern PyTypeObject Walk_Type;
extern PyTypeObject Inodes_Type;

/* Run @stmt with the GIL released and the handle's lock held; on a
 * negative @rcvar the handle's message is copied to h->msg first. */
#define HANDLE_CALL(h, rcvar, stmt)                                                                \
	do {                                                                                       \
		Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock((h)->lock, WAIT_LOCK);                \
		stmt;                                                                              \
		if ((rcvar) < 0)                                                                   \
			handle_keep_msg(h);                                                        \
		PyThread_release_lock((h)->lock);                                                  \
		Py_END_ALLOW_THREADS                                                               \
	} while (0)

/* _util.c: what every part stands on. The parts below call into it and
 * never into one another (only _module.c calls the parts it exposes):
 * scripts/layers.py fails on a call cycle among these files. */
/* Copy the handle's message to h->msg (lock held). */
void handle_keep_msg(Handle *h);
/* Queue a damage message (lock held, GIL not needed). */
void handle_note(Handle *h, const char *msg);
/* Hand queued damage messages to on_damage; -1 with an exception set if
 * it raised. Call with the GIL held. */
int handle_drain(Handle *h);
/* Raise the exception class for @rc with h->msg (or strerror); NULL. */
PyObject *handle_raise(Handle *h, int rc);
/* Raise for @rc with message @msg; returns NULL. */
PyObject *raise_errno(int rc, const char *msg);
/* 0 for an open handle, else -1 with an exception raised. */
int handle_check_open(Handle *h);
/* Create the exception classes and add them to module @m; -1 on error. */
int errors_add(PyObject *m);
PyObject *u64(uint64_t v);
PyObject *name_str(const uint8_t *s, size_t n); /* UTF-8, surrogateescape */
PyObject *time_list(int64_t sec, uint32_t nsec);
int set_take(PyObject *d, const char *key, PyObject *v); /* steals v */

/* _dicts.c */
PyObject *dict_super(Handle *h);
PyObject *list_subvols(Handle *h);
PyObject *dict_collisions(Handle *h, uint64_t mount_subvol, Py_ssize_t max_examples);

/* _walk.c: the record of one path as `walk --json` prints it. */
PyObject *walk_new(Handle *h, uint64_t subvol, const char *path, Py_ssize_t path_len, bool hash,
		   int inumbits, uint64_t mount_subvol, bool single);
/* _forensic.c */
PyObject *list_deleted(Handle *h, bool hash);
PyObject *read_deleted(Handle *h, const char *id, unsigned flags);
void forensic_free(Handle *h);
/* _extents.c: a file's extents as dicts; its checksum coverage word. */
PyObject *list_extents(Handle *h, uint64_t subvol, uint64_t obj);
PyObject *csum_cover(Handle *h, uint64_t subvol, uint64_t obj);
/* _inodes.c */
PyObject *inodes_new(Handle *h, uint64_t subvol, unsigned inumbits, uint64_t mount_subvol);

int walk_init_keys(void);
int inodes_init_keys(void);

#endif
