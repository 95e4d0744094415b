// SPDX-License-Identifier: MIT
/*
 * The path of a recovered version, from the names the leaves held: its
 * own name nearest the version's generation, then each directory's up to
 * the subvolume's top, then the subvolume's place (its live path, else a
 * stale ROOT_BACKREF). A name missing on the way is shown as
 * <subvol:inode>; a damaged one by its safe form (base/name.h), the first
 * said in the version's name_damage. Depth is bounded (MAX_DEPTH): names
 * from stale leaves may form a loop.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forensic/version.h"

#include "base/grow.h"
#include "base/ondisk.h"

#define MAX_DEPTH 64

/* The name of (subvol, ino) nearest generation @gen: the newest at or
 * before it, else the oldest after it. */
static const struct fx_ref *name_of(const struct bi_fx_recovered *r, uint64_t subvol, uint64_t ino,
				    uint64_t gen)
{
	size_t a = 0, b = r->nrefs;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		const struct fx_ref *x = &r->refs[m];
		if (x->subvol < subvol || (x->subvol == subvol && x->ino < ino))
			a = m + 1;
		else
			b = m;
	}
	const struct fx_ref *after = NULL;
	for (size_t i = a; i < r->nrefs && r->refs[i].subvol == subvol && r->refs[i].ino == ino;
	     i++) {
		if (r->refs[i].gen <= gen)
			return &r->refs[i];
		after = &r->refs[i];
	}
	return after;
}

struct sbuf {
	char *s;
	size_t len, cap;
	bool oom;
	char *damage; /* where the first damaged name is said (@damage_cap bytes) */
	size_t damage_cap;
};

/* Say the first name of the path that is shown by its safe form. */
static void sb_damage(struct sbuf *b, const char *kind, uint64_t subvol, uint64_t ino,
		      uint64_t parent, uint64_t gen, const char *why)
{
	if (!why || !b->damage || b->damage[0])
		return;
	snprintf(b->damage, b->damage_cap,
		 "%s of %" PRIu64 " in directory %" PRIu64 " of subvolume %" PRIu64
		 " (leaf generation %" PRIu64 "): %s",
		 kind, ino, parent, subvol, gen, why);
}

static void sb_prepend(struct sbuf *b, const char *p, size_t n)
{
	if (b->oom)
		return;
	bool fresh = !b->s;
	if (bi_grow((void **)&b->s, &b->cap, b->len + n + 1, 1)) {
		b->oom = true;
		return;
	}
	if (fresh)
		b->s[0] = '\0';
	memmove(b->s + n, b->s, b->len + 1);
	memcpy(b->s, p, n);
	b->len += n;
}

static void sb_part(struct sbuf *b, const char *p)
{
	if (b->len)
		sb_prepend(b, "/", 1);
	sb_prepend(b, p, strlen(p));
}

static void sb_unknown(struct sbuf *b, uint64_t subvol, uint64_t ino)
{
	char u[64];
	snprintf(u, sizeof(u), "<%" PRIu64 ":%" PRIu64 ">", subvol, ino);
	sb_part(b, u);
}

const struct btrfsimg_subvol *bi_fx_live_subvol(const struct bi_fx_recovered *r, uint64_t id)
{
	for (size_t i = 0; i < r->nsubvols; i++)
		if (r->subvols[i].id == id)
			return &r->subvols[i];
	return NULL;
}

/* Directory @dir of @subvol back to its root (256), then the subvolume's
 * place: live path, else a stale ROOT_BACKREF. */
static void dir_path(const struct bi_fx_recovered *r, struct sbuf *b, uint64_t subvol, uint64_t dir,
		     uint64_t gen, int depth)
{
	for (; dir != OBJ_FIRST_FREE && depth < MAX_DEPTH; depth++) {
		const struct fx_ref *n = name_of(r, subvol, dir, gen);
		if (!n) {
			sb_unknown(b, subvol, dir);
			return;
		}
		sb_part(b, n->name);
		sb_damage(b, "name", subvol, dir, n->parent, n->gen, n->bad);
		dir = n->parent;
	}
	if (depth >= MAX_DEPTH || subvol == OBJ_FS_TREE)
		return;
	const struct btrfsimg_subvol *s = bi_fx_live_subvol(r, subvol);
	if (s && s->path) {
		if (s->path[0])
			sb_part(b, s->path);
		return;
	}
	const struct fx_rootref *best = NULL;
	for (size_t i = 0; i < r->nrrefs; i++)
		if (r->rrefs[i].child == subvol && (!best || r->rrefs[i].gen > best->gen))
			best = &r->rrefs[i];
	if (!best) {
		sb_unknown(b, subvol, OBJ_FIRST_FREE);
		return;
	}
	sb_part(b, best->name);
	sb_damage(b, "subvolume name", best->parent, subvol, best->dirid, best->gen, best->bad);
	dir_path(r, b, best->parent, best->dirid, gen, depth + 1);
}

char *bi_fx_version_path(const struct bi_fx_recovered *r, struct fx_version *v)
{
	struct sbuf b = { .damage = v->res->name_damage, .damage_cap = sizeof(v->res->name_damage) };
	v->res->name_damage[0] = '\0';
	sb_prepend(&b, "", 0);
	const struct fx_ref *n = name_of(r, v->subvol, v->ino, v->leaf_gen);
	if (v->ino == OBJ_FIRST_FREE) /* a subvolume's top directory: its place */
		dir_path(r, &b, v->subvol, OBJ_FIRST_FREE, v->leaf_gen, 0);
	else if (n) {
		sb_part(&b, n->name);
		sb_damage(&b, "name", v->subvol, v->ino, n->parent, n->gen, n->bad);
		dir_path(r, &b, v->subvol, n->parent, v->leaf_gen, 0);
	} else {
		sb_unknown(&b, v->subvol, v->ino);
		dir_path(r, &b, v->subvol, OBJ_FIRST_FREE, v->leaf_gen, 0);
	}
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	return b.s;
}
