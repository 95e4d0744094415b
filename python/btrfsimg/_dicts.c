// SPDX-License-Identifier: MIT
/*
 * Filesystem.superblock, .subvolumes() and .collisions(): the public
 * structs as dicts with the keys and values of `btrfsimg super --json`
 * (tools/cmds/super.c), `subvols --json` (tools/cmds/subvols.c) and
 * `collisions --json` (tools/cmds/collisions.c). tests/python/test_python.py
 * compares them with the CLI's lines on every committed image.
 */
#include "ext.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static PyObject *uuid_str(const uint8_t u[16], bool null_if_zero)
{
	static const uint8_t zero[16];
	if (null_if_zero && memcmp(u, zero, 16) == 0)
		Py_RETURN_NONE;
	char b[40];
	snprintf(b, sizeof(b),
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
		 u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
		 u[15]);
	return PyUnicode_FromString(b);
}

static PyObject *opt_str(const char *s)
{
	if (!s)
		Py_RETURN_NONE;
	return name_str((const uint8_t *)s, strlen(s));
}

static PyObject *features(enum btrfsimg_feature_kind kind, uint64_t flags)
{
	PyObject *l = PyList_New(0);
	for (unsigned bit = 0; l && bit < 64; bit++) {
		if (!(flags >> bit & 1))
			continue;
		const char *name = btrfsimg_feature_name(kind, bit);
		PyObject *s = name ? PyUnicode_FromString(name)
				   : PyUnicode_FromFormat("unknown bit %u", bit);
		if (!s || PyList_Append(l, s) < 0)
			Py_CLEAR(l);
		Py_XDECREF(s);
	}
	return l;
}

static PyObject *device_dict(const struct btrfsimg_device *d, const char *chain)
{
	PyObject *o = PyDict_New();
	if (!o)
		return NULL;
	bool m = d->missing;
	if (set_take(o, "devid", u64(d->devid)) < 0 ||
	    set_take(o, "uuid", uuid_str(d->uuid, false)) < 0 ||
	    set_take(o, "total_bytes", u64(d->total_bytes)) < 0 ||
	    set_take(o, "missing", PyBool_FromLong(m)) < 0 ||
	    set_take(o, "image", opt_str(m ? NULL : d->image)) < 0 ||
	    set_take(o, "partition",
		     m || !d->partition ? Py_NewRef(Py_None) : u64((uint64_t)d->partition)) < 0 ||
	    set_take(o, "offset", m ? Py_NewRef(Py_None) : u64(d->offset)) < 0 ||
	    set_take(o, "image_bytes", m ? Py_NewRef(Py_None) : u64(d->size)) < 0 ||
	    set_take(o, "layers", opt_str(m ? NULL : chain)) < 0)
		Py_CLEAR(o);
	return o;
}

static PyObject *profile_dict(const struct btrfsimg_profile_use *p)
{
	return Py_BuildValue("{s:s,s:s,s:K,s:K,s:I}", "type", btrfsimg_bg_type_name(p->type),
			     "profile", p->profile, "chunks", (unsigned long long)p->chunks,
			     "bytes", (unsigned long long)p->bytes, "tolerates", p->tolerates);
}

static PyObject *mirrors_list(const struct btrfsimg_super_info *s)
{
	PyObject *l = PyList_New(0);
	for (int i = 0; l && i < 3; i++) {
		const struct btrfsimg_super_mirror *m = &s->mirrors[i];
		if (m->state == BTRFSIMG_MIRROR_ABSENT)
			continue;
		PyObject *o = Py_BuildValue("{s:i,s:K,s:O,s:K}", "index", m->index, "bytenr",
					    (unsigned long long)m->bytenr, "valid",
					    m->state == BTRFSIMG_MIRROR_VALID ? Py_True : Py_False,
					    "generation", (unsigned long long)m->generation);
		if (!o || PyList_Append(l, o) < 0)
			Py_CLEAR(l);
		Py_XDECREF(o);
	}
	return l;
}

static PyObject *facts_lists(const struct btrfsimg_fs_facts *f, PyObject *d)
{
	PyObject *devs = PyList_New((Py_ssize_t)f->ndevices);
	for (size_t i = 0; devs && i < f->ndevices; i++) {
		PyObject *o = device_dict(&f->devices[i], f->where ? f->where[i].chain : NULL);
		if (!o)
			Py_CLEAR(devs);
		else
			PyList_SET_ITEM(devs, (Py_ssize_t)i, o);
	}
	if (set_take(d, "devices", devs) < 0)
		return NULL;
	PyObject *prof = PyList_New((Py_ssize_t)f->nprofiles);
	for (size_t i = 0; prof && i < f->nprofiles; i++) {
		PyObject *o = profile_dict(&f->profiles[i]);
		if (!o)
			Py_CLEAR(prof);
		else
			PyList_SET_ITEM(prof, (Py_ssize_t)i, o);
	}
	if (set_take(d, "profiles", prof) < 0)
		return NULL;
	if (f->have_log && set_take(d, "log_tree",
				    Py_BuildValue("{s:O,s:O,s:K,s:K}", "present",
						  f->log.present ? Py_True : Py_False, "replayed",
						  f->log.replayed ? Py_True : Py_False, "items",
						  (unsigned long long)f->log.items, "subvols",
						  (unsigned long long)f->log.subvols)) < 0)
		return NULL;
	return d;
}

PyObject *dict_super(Handle *h)
{
	struct btrfsimg_fs_facts *f = NULL;
	int rc;
	HANDLE_CALL(h, rc, rc = btrfsimg_fs_facts(h->fs, &f));
	if (rc < 0)
		return handle_raise(h, rc);
	const struct btrfsimg_super_info *s = &f->super;
	const char *csum = btrfsimg_csum_name(s->csum_type);
	PyObject *d = PyDict_New();
	if (!d || set_take(d, "fsid", uuid_str(s->fsid, false)) < 0 ||
	    set_take(d, "metadata_uuid", uuid_str(s->metadata_uuid, false)) < 0 ||
	    set_take(d, "label", opt_str(s->label)) < 0 ||
	    set_take(d, "generation", u64(s->generation)) < 0 ||
	    set_take(d, "root", u64(s->root)) < 0 ||
	    set_take(d, "chunk_root", u64(s->chunk_root)) < 0 ||
	    set_take(d, "log_root", u64(s->log_root)) < 0 ||
	    set_take(d, "csum_type", opt_str(csum)) < 0 ||
	    set_take(d, "nodesize", u64(s->nodesize)) < 0 ||
	    set_take(d, "sectorsize", u64(s->sectorsize)) < 0 ||
	    set_take(d, "num_devices", u64(s->num_devices)) < 0 ||
	    set_take(d, "total_bytes", u64(s->total_bytes)) < 0 ||
	    set_take(d, "bytes_used", u64(s->bytes_used)) < 0 ||
	    set_take(d, "incompat_flags", u64(s->incompat_flags)) < 0 ||
	    set_take(d, "compat_ro_flags", u64(s->compat_ro_flags)) < 0 ||
	    set_take(d, "mirrors", mirrors_list(s)) < 0 ||
	    set_take(d, "incompat_features",
		     features(BTRFSIMG_FEATURE_INCOMPAT, s->incompat_flags)) < 0 ||
	    set_take(d, "compat_ro_features",
		     features(BTRFSIMG_FEATURE_COMPAT_RO, s->compat_ro_flags)) < 0 ||
	    !facts_lists(f, d))
		Py_CLEAR(d);
	btrfsimg_fs_facts_free(f);
	return d;
}

/* ------------------------------------------------------------ subvols */

struct svlist {
	struct btrfsimg_subvol *v;
	size_t n;
	uint64_t def;
};

static int svlist_get(Handle *h, struct svlist *s)
{
	int rc = btrfsimg_subvols(h->fs, &s->v, &s->n);
	if (rc < 0)
		return rc;
	s->def = 5;
	if (btrfsimg_default_subvol(h->fs, &s->def) < 0)
		handle_note(h, btrfsimg_errmsg(h->fs));
	return 0;
}

static PyObject *subvol_dict(const struct btrfsimg_subvol *s, bool def)
{
	PyObject *d = PyDict_New();
	if (!d || set_take(d, "id", u64(s->id)) < 0 ||
	    set_take(d, "parent_id",
		     s->id == 5 || !s->parent_id ? Py_NewRef(Py_None) : u64(s->parent_id)) < 0 ||
	    set_take(d, "path", opt_str(s->path)) < 0 ||
	    set_take(d, "uuid", uuid_str(s->uuid, true)) < 0 ||
	    set_take(d, "parent_uuid", uuid_str(s->parent_uuid, true)) < 0 ||
	    set_take(d, "received_uuid", uuid_str(s->received_uuid, true)) < 0 ||
	    set_take(d, "generation", u64(s->generation)) < 0 ||
	    set_take(d, "cgen", u64(s->cgen)) < 0 ||
	    set_take(d, "otime", time_list(s->otime_sec, s->otime_nsec)) < 0 ||
	    set_take(d, "readonly", PyBool_FromLong(s->readonly)) < 0 ||
	    set_take(d, "deleted", PyBool_FromLong(s->deleted)) < 0 ||
	    set_take(d, "snapshot", PyBool_FromLong(s->snapshot)) < 0 ||
	    set_take(d, "snapshot_of", s->snapshot_of ? u64(s->snapshot_of) : Py_NewRef(Py_None)) <
		    0 ||
	    set_take(d, "default", PyBool_FromLong(def)) < 0)
		Py_CLEAR(d);
	return d;
}

PyObject *list_subvols(Handle *h)
{
	struct svlist s = { 0 };
	int rc;
	HANDLE_CALL(h, rc, rc = svlist_get(h, &s));
	PyObject *l = NULL;
	if (rc == 0) {
		l = PyList_New((Py_ssize_t)s.n);
		for (size_t i = 0; l && i < s.n; i++) {
			PyObject *d = subvol_dict(&s.v[i], s.v[i].id == s.def);
			if (!d)
				Py_CLEAR(l);
			else
				PyList_SET_ITEM(l, (Py_ssize_t)i, d);
		}
	}
	btrfsimg_subvols_free(s.v, s.n);
	return rc < 0 ? handle_raise(h, rc) : l;
}

/* ------------------------------------------------------------ collisions */

static PyObject *scheme_name(const struct btrfsimg_scheme *s)
{
	char name[48];
	btrfsimg_scheme_name(s, name, sizeof(name));
	return PyUnicode_FromString(name);
}

static PyObject *member_dict(const struct btrfsimg_fs_collisions *c,
			     const struct btrfsimg_collide_member *m)
{
	PyObject *d = Py_BuildValue("{s:K,s:K}", "subvol", (unsigned long long)m->subvol,
				    "objectid", (unsigned long long)m->objectid);
	if (d && m->extra && m->extra_index < c->stubs) {
		const struct btrfsimg_stub *st = &c->stub_entries[m->extra_index];
		if (set_take(d, "stub", Py_NewRef(Py_True)) < 0 ||
		    set_take(d, "stub_dir", u64(st->dir)) < 0 ||
		    set_take(d, "stub_name", name_str(st->name, st->name_len)) < 0)
			Py_CLEAR(d);
	}
	return d;
}

static PyObject *groups_list(const struct btrfsimg_fs_collisions *c,
			     const struct btrfsimg_collide_result *res)
{
	PyObject *l = PyList_New(0);
	for (size_t g = 0; l && g < res->nexamples; g++) {
		const struct btrfsimg_collide_group *grp = &res->examples[g];
		PyObject *m = PyList_New(0);
		for (size_t k = 0; m && k < grp->nmembers; k++) {
			PyObject *o = member_dict(c, &grp->members[k]);
			if (!o || PyList_Append(m, o) < 0)
				Py_CLEAR(m);
			Py_XDECREF(o);
		}
		if (!m || PyList_Append(l, m) < 0)
			Py_CLEAR(l);
		Py_XDECREF(m);
	}
	return l;
}

static PyObject *headroom(const struct btrfsimg_collide_result *res)
{
	PyObject *d = PyDict_New();
	if (!d || set_take(d, "scheme", scheme_name(&res->scheme)) < 0 ||
	    set_take(d, "max_objectid", u64(res->max_objectid)) < 0 ||
	    set_take(d, "max_subvol", res->proven ? u64(res->max_subvol) : Py_NewRef(Py_None)) <
		    0 ||
	    set_take(d, "proven", PyBool_FromLong(res->proven)) < 0 ||
	    set_take(d, "reason", PyUnicode_FromString(res->reason)) < 0)
		Py_CLEAR(d);
	return d;
}

/* 0 (none found) as null, as `collisions --json` writes it. */
static PyObject *opt_min(unsigned n)
{
	if (!n)
		Py_RETURN_NONE;
	return PyLong_FromUnsignedLong(n);
}

static PyObject *schemes_list(const struct btrfsimg_fs_collisions *c)
{
	const struct btrfsimg_collide_report *rep = c->report;
	const struct btrfsimg_collide_report *ns = btrfsimg_collisions_without_stubs(c);
	PyObject *l = PyList_New(0);
	for (size_t i = 0; l && i < rep->nresults; i++) {
		const struct btrfsimg_collide_result *res = &rep->results[i],
						     *bare = &ns->results[i];
		PyObject *d = PyDict_New();
		if (!d || set_take(d, "scheme", scheme_name(&res->scheme)) < 0 ||
		    set_take(d, "groups", u64(res->groups)) < 0 ||
		    set_take(d, "inodes", u64(res->inodes)) < 0 ||
		    set_take(d, "examples", groups_list(c, res)) < 0 ||
		    set_take(d, "readdir_mismatch", u64(c->readdir_mismatch[i])) < 0 ||
		    set_take(d, "collision_free", PyBool_FromLong(res->groups == 0)) < 0 ||
		    set_take(d, "groups_without_stubs", u64(bare->groups)) < 0 ||
		    set_take(d, "inodes_without_stubs", u64(bare->inodes)) < 0 ||
		    set_take(d, "collision_free_without_stubs",
			     PyBool_FromLong(bare->groups == 0)) < 0 ||
		    PyList_Append(l, d) < 0)
			Py_CLEAR(l);
		Py_XDECREF(d);
	}
	return l;
}

/* The verdict's headroom rows (btrfsimg_collisions_headroom): the schemes
 * collision-free as they are, or only without the stub directories. */
static PyObject *headroom_list(const struct btrfsimg_fs_collisions *c, bool without_stubs)
{
	const struct btrfsimg_collide_report *rep =
		without_stubs ? btrfsimg_collisions_without_stubs(c) : c->report;
	PyObject *l = PyList_New(0);
	for (size_t i = 0; l && i < rep->nresults; i++) {
		if (!btrfsimg_collisions_headroom(c, i, without_stubs))
			continue;
		PyObject *d = headroom(&rep->results[i]);
		if (!d || PyList_Append(l, d) < 0)
			Py_CLEAR(l);
		Py_XDECREF(d);
	}
	return l;
}

/* collisions --json's "nfs" (tools/cmds/collisions.c nfs_json). */
static PyObject *nfs_dict(const struct btrfsimg_nfs_report *n)
{
	PyObject *l = PyList_New(0), *d = PyDict_New();
	for (size_t i = 0; l && i < n->n; i++) {
		const struct btrfsimg_nfs_figures *f = &n->figures[i];
		char name[64];
		btrfsimg_scheme_name(&f->scheme, name, sizeof(name));
		PyObject *e = PyDict_New();
		if (!e || set_take(e, "scheme", PyUnicode_FromString(name)) < 0 ||
		    set_take(e, "groups", u64(f->groups)) < 0 ||
		    set_take(e, "inodes", u64(f->inodes)) < 0 ||
		    set_take(e, "over32", u64(f->over32)) < 0 ||
		    set_take(e, "low32_groups", u64(f->low32_groups)) < 0 ||
		    set_take(e, "low32_inodes", u64(f->low32_inodes)) < 0 ||
		    set_take(e, "readdir_v3",
			     f->nfs ? u64(f->readdir_v3) : Py_NewRef(Py_None)) < 0 ||
		    set_take(e, "readdir_v4",
			     f->nfs ? u64(f->readdir_v4) : Py_NewRef(Py_None)) < 0 ||
		    PyList_Append(l, e) < 0)
			Py_CLEAR(l);
		Py_XDECREF(e);
	}
	if (!l || !d || set_take(d, "transition_changed", u64(n->transition_changed)) < 0 ||
	    set_take(d, "transition_kept", u64(n->transition_kept)) < 0 ||
	    set_take(d, "schemes", l) < 0) {
		Py_XDECREF(d);
		return NULL;
	}
	return d;
}

PyObject *dict_collisions(Handle *h, uint64_t mount_subvol, Py_ssize_t max_examples)
{
	struct btrfsimg_fs_collisions *c = NULL;
	int rc;
	if (max_examples < 0) {
		PyErr_SetString(PyExc_ValueError, "examples must be >= 0");
		return NULL;
	}
	HANDLE_CALL(h, rc, rc = btrfsimg_collisions(h->fs, mount_subvol, (size_t)max_examples, &c));
	if (rc < 0)
		return handle_raise(h, rc);
	const struct btrfsimg_collide_report *rep = c->report;
	const struct btrfsimg_collide_report *ns = btrfsimg_collisions_without_stubs(c);
	PyObject *d = PyDict_New();
	if (!d || set_take(d, "min_inumbits_numdevs1", opt_min(rep->min_free_n1)) < 0 ||
	    set_take(d, "min_inumbits_numdevs2", opt_min(rep->min_free_n2)) < 0 ||
	    set_take(d, "subvols", u64(c->nsubvols)) < 0 ||
	    set_take(d, "skipped_subvols", u64(c->skipped_subvols)) < 0 ||
	    set_take(d, "inodes", u64(c->inodes)) < 0 || set_take(d, "stubs", u64(c->stubs)) < 0 ||
	    set_take(d, "max_objectid", u64(c->max_objectid)) < 0 ||
	    set_take(d, "max_subvol", u64(c->max_subvol)) < 0 ||
	    set_take(d, "mount_subvol", u64(c->mount_subvol)) < 0 ||
	    set_take(d, "headroom", headroom_list(c, false)) < 0 ||
	    set_take(d, "min_inumbits_numdevs1_without_stubs", opt_min(ns->min_free_n1)) < 0 ||
	    set_take(d, "min_inumbits_numdevs2_without_stubs", opt_min(ns->min_free_n2)) < 0 ||
	    set_take(d, "headroom_without_stubs", headroom_list(c, true)) < 0 ||
	    set_take(d, "schemes", schemes_list(c)) < 0 ||
	    set_take(d, "nfs", nfs_dict(c->nfs)) < 0)
		Py_CLEAR(d);
	btrfsimg_fs_collisions_free(c);
	return d;
}
