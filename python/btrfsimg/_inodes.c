// SPDX-License-Identifier: MIT
/*
 * Filesystem.inodes(): btrfsimg_inodes_presented() as an iterator of
 * dicts shaped as `btrfsimg inodes --json` lines (tools/cmds/inodes.c).
 * The library pushes inodes through a callback; a Python iterator pulls.
 * So the library runs on a thread of its own (holding the handle's lock
 * throughout) and hands batches of rows over a small bounded queue; the
 * iterator builds dicts from them. Memory stays a few batches, however
 * many inodes there are. While it runs the handle is busy: other calls on
 * the same Filesystem raise instead of waiting forever for the lock.
 */
#include "ext.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH_ROWS 1024
#define QUEUE_MAX  4

struct irow {
	struct btrfsimg_inode i;
	struct btrfsimg_inode_numbers p;
	size_t path_off, path_len;
	bool has_path, reachable;
};

struct batch {
	struct batch *next;
	size_t n;
	struct irow rows[BATCH_ROWS];
	uint8_t *bytes;
	size_t len, cap;
};

typedef struct {
	PyObject_HEAD Handle *h;
	uint64_t subvol, mount;
	unsigned bits;
	pthread_t thr;
	bool started, joined;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct batch *head, *tail, *fill; /* queue; the producer's batch */
	size_t queued;
	bool stop, finished;
	int rc;
	struct batch *cur; /* the consumer's batch */
	size_t pos;
	/* the consumer's values shared by one subvolume's inodes */
	bool have_subvol;
	uint64_t cur_subvol;
	PyObject *sv_obj, *inumbits_obj, *overlay_obj, *uniq_obj, *dev_obj;
} Inodes;

static void batch_free(struct batch *b)
{
	if (b) {
		free(b->bytes);
		free(b);
	}
}

/* Producer: queue the filled batch, waiting while the queue is full. */
static int hand_over(Inodes *it)
{
	pthread_mutex_lock(&it->mu);
	while (it->queued >= QUEUE_MAX && !it->stop)
		pthread_cond_wait(&it->cv, &it->mu);
	bool stop = it->stop;
	if (!stop && it->fill) {
		if (it->tail)
			it->tail->next = it->fill;
		else
			it->head = it->fill;
		it->tail = it->fill;
		it->queued++;
		it->fill = NULL;
		pthread_cond_broadcast(&it->cv);
	}
	pthread_mutex_unlock(&it->mu);
	return stop ? 1 : 0;
}

static int on_inode(void *ctx, const struct btrfsimg_inode_entry *e,
		    const struct btrfsimg_inode_numbers *p)
{
	Inodes *it = ctx;
	if (e->name_damage) { /* the path shows the name's safe form: a DamageWarning */
		char m[1400];
		snprintf(m, sizeof(m), "%.*s: damaged name: %s", (int)e->path_len,
			 e->path ? e->path : "", e->name_damage);
		handle_note(it->h, m);
	}
	if (!it->fill && !(it->fill = calloc(1, sizeof(*it->fill))))
		return -ENOMEM;
	struct batch *b = it->fill;
	if (b->len + e->path_len > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		while (cap < b->len + e->path_len)
			cap *= 2;
		uint8_t *nb = realloc(b->bytes, cap);
		if (!nb)
			return -ENOMEM;
		b->bytes = nb;
		b->cap = cap;
	}
	struct irow *r = &b->rows[b->n++];
	*r = (struct irow){ .i = e->inode,
			    .p = *p,
			    .path_off = b->len,
			    .path_len = e->path_len,
			    .has_path = e->path != NULL,
			    .reachable = e->reachable };
	if (e->path_len)
		memcpy(b->bytes + b->len, e->path, e->path_len);
	b->len += e->path_len;
	return b->n == BATCH_ROWS ? hand_over(it) : 0;
}

static void *producer(void *arg)
{
	Inodes *it = arg;
	Handle *h = it->h;
	PyThread_acquire_lock(h->lock, WAIT_LOCK);
	int rc = btrfsimg_inodes_presented(h->fs, it->subvol, it->bits, it->mount, on_inode, it);
	if (rc < 0)
		handle_keep_msg(h);
	PyThread_release_lock(h->lock);
	if (rc >= 0 && it->fill && it->fill->n)
		hand_over(it);
	pthread_mutex_lock(&it->mu);
	it->rc = rc > 0 ? 0 : rc; /* > 0: stopped on request */
	it->finished = true;
	pthread_cond_broadcast(&it->cv);
	pthread_mutex_unlock(&it->mu);
	return NULL;
}

/* Consumer: the next batch, NULL at the end (it->rc says how it ended). */
static struct batch *take_batch(Inodes *it)
{
	struct batch *b;
	Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&it->mu);
	while (!it->head && !it->finished)
		pthread_cond_wait(&it->cv, &it->mu);
	b = it->head;
	if (b) {
		it->head = b->next;
		if (!it->head)
			it->tail = NULL;
		it->queued--;
		pthread_cond_broadcast(&it->cv);
	}
	pthread_mutex_unlock(&it->mu);
	Py_END_ALLOW_THREADS return b;
}

static void join(Inodes *it)
{
	if (!it->started || it->joined)
		return;
	Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&it->mu);
	it->stop = true;
	pthread_cond_broadcast(&it->cv);
	pthread_mutex_unlock(&it->mu);
	pthread_join(it->thr, NULL);
	Py_END_ALLOW_THREADS it->joined = true;
	it->h->busy = false;
	while (it->head) {
		struct batch *b = it->head;
		it->head = b->next;
		batch_free(b);
	}
	it->tail = NULL;
	batch_free(it->fill);
	it->fill = NULL;
}

enum {
	I_SUBVOL,
	I_OBJECTID,
	I_ST_INO,
	I_TREE_ID,
	I_INUMBITS,
	I_OVERLAY,
	I_INO,
	I_UNIQUIFIER,
	I_NFS_FILEID,
	I_NUMDEVS2_DEV,
	I_PROC_INO,
	I_GENERATION,
	I_MODE,
	I_NLINK,
	I_SIZE,
	I_PATH,
	I_REACHABLE,
	I_NFS4_D_FILEID,
	I_NFS_FILEID_N,
	I_NFS4_D_FILEID_N,
	I_COUNT
};
static const char *const ikey_names[I_COUNT] = {
	"subvol", "objectid",	"st_ino",     "tree_id",      "inumbits",  "overlay",
	"ino",	  "uniquifier", "nfs_fileid", "numdevs2_dev", "proc_ino",  "generation",
	"mode",	  "nlink",	"size",	      "path",	      "reachable",
	"nfs4_d_fileid", "nfs_fileid_inumbits", "nfs4_d_fileid_inumbits",
};
static PyObject *ikeys[I_COUNT];

int inodes_init_keys(void)
{
	for (int i = 0; i < I_COUNT; i++)
		if (!ikeys[i] && !(ikeys[i] = PyUnicode_InternFromString(ikey_names[i])))
			return -1;
	return 0;
}

/* The values every inode of one subvolume shares, made once per
 * subvolume (a million lines are mostly these). */
static int switch_subvol(Inodes *it, const struct irow *r)
{
	const struct btrfsimg_inode_numbers *p = &r->p;
	Py_CLEAR(it->sv_obj);
	Py_CLEAR(it->inumbits_obj);
	Py_CLEAR(it->overlay_obj);
	Py_CLEAR(it->uniq_obj);
	Py_CLEAR(it->dev_obj);
	it->cur_subvol = r->i.subvol;
	it->sv_obj = u64(r->i.subvol);
	it->inumbits_obj = PyLong_FromUnsignedLong(p->inumbits);
	it->overlay_obj = u64(p->overlay);
	it->uniq_obj = u64(p->uniquifier);
	it->dev_obj = p->numdevs2_dev < 0 ? Py_NewRef(Py_None) : PyLong_FromLong(p->numdevs2_dev);
	it->have_subvol =
		it->sv_obj && it->inumbits_obj && it->overlay_obj && it->uniq_obj && it->dev_obj;
	return it->have_subvol ? 0 : -1;
}

static int iput(PyObject *d, int k, PyObject *v)
{
	if (!v)
		return -1;
	int rc = PyDict_SetItem(d, ikeys[k], v);
	Py_DECREF(v);
	return rc;
}

/* tools/cmds/inodes.c put_json, key for key (proc_ino "subvol:objectid", st_ino
 * and tree_id shared when equal): kept equal by tests/python/test_python.py
 * test_dicts_equal_cli_json (inodes --json). */
static PyObject *row_dict(Inodes *it, const struct irow *r, const uint8_t *bytes)
{
	const struct btrfsimg_inode *i = &r->i;
	const struct btrfsimg_inode_numbers *p = &r->p;
	if ((!it->have_subvol || it->cur_subvol != i->subvol) && switch_subvol(it, r) < 0)
		return NULL;
	char proc[48];
	int plen = snprintf(proc, sizeof(proc), "%llu:%llu", (unsigned long long)i->subvol,
			    (unsigned long long)i->objectid);
	PyObject *obj = u64(i->objectid);
	PyObject *d = obj ? PyDict_New() : NULL;
	if (!d || PyDict_SetItem(d, ikeys[I_SUBVOL], it->sv_obj) < 0 ||
	    PyDict_SetItem(d, ikeys[I_OBJECTID], obj) < 0 ||
	    iput(d, I_ST_INO, p->st_ino == i->objectid ? Py_NewRef(obj) : u64(p->st_ino)) < 0 ||
	    iput(d, I_TREE_ID, p->tree_id == i->subvol ? Py_NewRef(it->sv_obj) : u64(p->tree_id)) <
		    0 ||
	    PyDict_SetItem(d, ikeys[I_INUMBITS], it->inumbits_obj) < 0 ||
	    PyDict_SetItem(d, ikeys[I_OVERLAY], it->overlay_obj) < 0 ||
	    iput(d, I_INO, u64(p->ino)) < 0 ||
	    PyDict_SetItem(d, ikeys[I_UNIQUIFIER], it->uniq_obj) < 0 ||
	    iput(d, I_NFS_FILEID, u64(p->nfs_fileid)) < 0 ||
	    iput(d, I_NFS4_D_FILEID, u64(p->nfs4_d_fileid)) < 0 ||
	    iput(d, I_NFS_FILEID_N, u64(p->nfs_fileid_inumbits)) < 0 ||
	    iput(d, I_NFS4_D_FILEID_N, u64(p->nfs4_d_fileid_inumbits)) < 0 ||
	    PyDict_SetItem(d, ikeys[I_NUMDEVS2_DEV], it->dev_obj) < 0 ||
	    iput(d, I_PROC_INO, PyUnicode_FromStringAndSize(proc, plen)) < 0 ||
	    iput(d, I_GENERATION, u64(i->generation)) < 0 ||
	    iput(d, I_MODE, PyLong_FromUnsignedLong(i->mode)) < 0 ||
	    iput(d, I_NLINK, PyLong_FromUnsignedLong(i->nlink)) < 0 ||
	    iput(d, I_SIZE, u64(i->size)) < 0 ||
	    iput(d, I_PATH,
		 r->has_path ? name_str(bytes + r->path_off, r->path_len) : Py_NewRef(Py_None)) <
		    0 ||
	    PyDict_SetItem(d, ikeys[I_REACHABLE], r->reachable ? Py_True : Py_False) < 0)
		Py_CLEAR(d);
	Py_XDECREF(obj);
	return d;
}

static PyObject *Inodes_next(Inodes *it)
{
	Handle *h = it->h;
	if (it->joined)
		return NULL;
	if (!it->started) {
		if (handle_check_open(h) < 0)
			return NULL;
		h->busy = true;
		if (pthread_create(&it->thr, NULL, producer, it) != 0) {
			h->busy = false;
			return PyErr_NoMemory();
		}
		it->started = true;
	}
	while (!it->cur || it->pos == it->cur->n) {
		batch_free(it->cur);
		it->pos = 0;
		it->cur = take_batch(it);
		if (handle_drain(h) < 0)
			return NULL;
		if (!it->cur) {
			int rc = it->rc;
			join(it);
			return rc < 0 ? handle_raise(h, rc) : NULL;
		}
	}
	const struct irow *r = &it->cur->rows[it->pos++];
	return row_dict(it, r, it->cur->bytes);
}

static PyObject *Inodes_close(Inodes *it, PyObject *unused)
{
	join(it);
	it->joined = true;
	batch_free(it->cur);
	it->cur = NULL;
	handle_drain(it->h);
	PyErr_Clear();
	Py_RETURN_NONE;
}

static void Inodes_dealloc(Inodes *it)
{
	PyObject_GC_UnTrack(it);
	join(it);
	batch_free(it->cur);
	Py_XDECREF(it->sv_obj);
	Py_XDECREF(it->inumbits_obj);
	Py_XDECREF(it->overlay_obj);
	Py_XDECREF(it->uniq_obj);
	Py_XDECREF(it->dev_obj);
	pthread_mutex_destroy(&it->mu);
	pthread_cond_destroy(&it->cv);
	Py_XDECREF(it->h);
	PyObject_GC_Del(it);
}

static int Inodes_traverse(Inodes *it, visitproc visit, void *arg)
{
	Py_VISIT(it->h);
	return 0;
}

static PyMethodDef Inodes_methods[] = {
	{ "close", (PyCFunction)Inodes_close, METH_NOARGS,
	  "Stop early and release the Filesystem for other calls." },
	{ NULL, NULL, 0, NULL },
};

PyTypeObject Inodes_Type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "btrfsimg._btrfsimg.InodesIterator",
	.tp_basicsize = sizeof(Inodes),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
	.tp_doc = "Iterator of inode records (dicts as `btrfsimg inodes --json` lines).",
	.tp_dealloc = (destructor)Inodes_dealloc,
	.tp_traverse = (traverseproc)Inodes_traverse,
	.tp_iter = PyObject_SelfIter,
	.tp_iternext = (iternextfunc)Inodes_next,
	.tp_methods = Inodes_methods,
};

PyObject *inodes_new(Handle *h, uint64_t subvol, unsigned inumbits, uint64_t mount_subvol)
{
	if (inumbits > 64 || (inumbits > 0 && inumbits < 32)) {
		PyErr_SetString(PyExc_ValueError, "inumbits is 0 or 32..64");
		return NULL;
	}
	Inodes *it = PyObject_GC_New(Inodes, &Inodes_Type);
	if (!it)
		return NULL;
	memset((char *)it + sizeof(PyObject), 0, sizeof(*it) - sizeof(PyObject));
	it->h = (Handle *)Py_NewRef((PyObject *)h);
	it->subvol = subvol;
	it->bits = inumbits;
	it->mount = mount_subvol;
	pthread_mutex_init(&it->mu, NULL);
	pthread_cond_init(&it->cv, NULL);
	PyObject_GC_Track(it);
	return (PyObject *)it;
}
