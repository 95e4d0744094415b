// SPDX-License-Identifier: MIT
/*
 * Subvolume trees whose nodes are lost on every copy (a new filesystem's
 * first commits wrote over them, a zeroed range), rebuilt in memory from
 * the blocks that survive below them (bi_salvage_rebuild_lost, see
 * salvage.h): the root or any node under it, at any level.
 *
 * A salvage open checks every tree at once. Any other open checks none
 * (an intact image pays nothing): the first block of a subvolume or
 * checksum tree that reads on no copy has block.c call
 * bi_salvage_rebuild_tree through fs->lost_block, which checks that tree
 * then, and the read is retried. Each tree is checked once per handle,
 * rebuilt or not; the evidence is loaded once and kept for the next tree.
 * A handle is read from one thread at a time (its block cache has no
 * locks: the threaded readers, inode_enum_pool.c and path.c's read-ahead,
 * never read blocks through it from their workers), so the rebuild, which
 * runs on the thread whose read failed, needs no lock of its own; its own
 * failed reads do not start another (fs->rebuild->busy).
 *
 * Each subvolume tree's nodes are walked from its root (leaves are left to
 * the readers). A node that reads on no copy is replaced by a node
 * synthesized at its address and pinned in the block cache, whose children
 * are the blocks one level below it that evidence says it held:
 *
 *   - the extent tree (of the lost node's generation or newer) records
 *     every live tree block with its level and generation and who points
 *     at it: a SHARED_BLOCK_REF names the parent node itself (a node with
 *     full back references, as a snapshot's shared nodes get when one of
 *     the trees copies them), a TREE_BLOCK_REF only the tree that owns the
 *     parent. So a lost node with full back references gets exactly the
 *     blocks whose SHARED_BLOCK_REF names it; any other gets the blocks its
 *     owner's TREE_BLOCK_REF names that no readable node of that owner
 *     points at (its orphans), inside the key range its parent's slot
 *     gives it (the next slot's key bounds it);
 *   - a child must be recorded at its address with its generation, no
 *     newer than the lost node, at the level below, and read; children
 *     whose keys overlap are refused (one of them is forged);
 *   - a lost child node is rebuilt the same way, from the level below it,
 *     over the keys between its readable siblings (the kernel's keys of a
 *     lost node are gone with it: it spans the gap).
 *
 * A stale copy (older generation) or a block the extent tree does not
 * record at that address is never used. A recorded child that does not
 * read takes its keys with it: said, counted, never invented. Every
 * rebuilt node is said (tree, level, children, which evidence) as damage.
 * Without a readable extent tree of the tree's generation nothing is
 * rebuilt. Work is bounded: levels only go down, each node is walked once
 * (a node pointed at twice, as a hostile tree may, is not walked again),
 * each recorded block is read once, and a child is used once.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "btrfs/salvage.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/grow.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "base/search.h"
#include "btrfs/block.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"

/* extent item: refs, generation, flags; tree blocks add (fat items) a
 * tree_block_info (key, level) before the inline references */
#define EXT_GENERATION 8
#define EXT_FLAGS 16
#define EXT_INLINE 24
#define EXT_TREE_INFO 18
#define EXT_FLAG_TREE_BLOCK 2ULL
#define EXT_FLAG_FULL_BACKREF 256ULL
#define REF_TREE_BLOCK 176
#define REF_SHARED_BLOCK 182
#define REF_OWNER 172	/* simple quotas' owner reference: not a parent */


enum { BLK_UNREAD, BLK_READ, BLK_LOST };

/* A tree block the extent tree records; first/last keys once read. */
struct ev_rec {
	uint64_t bytenr, generation;
	uint8_t level, state;
	bool full_backref, used;
	uint64_t owners[2];	/* the first trees its TREE_BLOCK_REFs name */
	bi_key first, last;
};

/* One of its references: the tree owning its parent (TREE_BLOCK_REF) or
 * the parent's address (SHARED_BLOCK_REF). */
struct ev_ref {
	uint64_t value;
	size_t rec;
	uint8_t kind;
	bool claimed;	/* a readable node of that owner points at it */
};

struct evidence {
	bool loaded;
	int rc;			/* of the collection: 0, or why there is none */
	char why[sizeof(((struct btrfsimg_fs *)0)->err)];
	uint64_t gen;		/* the extent tree's */
	struct ev_rec *rec;	/* by bytenr */
	size_t nrec, rec_cap;
	struct ev_ref *ref;	/* by (kind, value, rec) */
	size_t nref, ref_cap;
	uint64_t *seen;		/* nodes walked, sorted */
	size_t nseen, seen_cap;
	uint8_t ids[HDR_GENERATION - HDR_FSID]; /* a read block's fsid .. chunk uuid */
	bool have_ids;
	size_t max;		/* pointers a node holds */
	uint64_t work;		/* candidates left to weigh (a hostile tree's bound) */
};

/* What the rebuild of one node gathers. */
struct child {
	bi_key first, last;	/* last: of a child read, not rebuilt */
	uint64_t bytenr, generation;
	bool rebuilt;
};
struct node_build {
	struct child *v;
	size_t n, cap;
	size_t *lost;		/* recorded children (nodes) that do not read */
	size_t nlost, lost_cap;
	size_t unread, outside, rebuilt;
	uint64_t owner;		/* whose TREE_BLOCK_REFs; 0: SHARED_BLOCK_REFs */
};

/* What the rebuild keeps on the handle: the evidence, loaded the first
 * time a node is lost and shared by every tree after it, and the trees
 * tried, each once (a tree whose rebuild failed is not walked again). */
struct bi_rebuild {
	struct evidence ev;
	uint64_t *tried;	/* sorted */
	size_t ntried, tried_cap;
	bool busy;		/* a rebuild runs: its own failed reads wait */
	size_t synthesized;	/* nodes rebuilt, in this open or the salvage's */
};

/* ------------------------------------------------------------ evidence */

static struct ev_rec *rec_find(struct evidence *ev, uint64_t bytenr)
{
	size_t a = bi_lower_bound_field(ev->rec, ev->nrec, sizeof(*ev->rec),
					offsetof(struct ev_rec, bytenr), bytenr);
	return a < ev->nrec && ev->rec[a].bytenr == bytenr ? &ev->rec[a] : NULL;
}

static int add_ref(struct btrfsimg_fs *fs, struct evidence *ev, uint8_t kind, uint64_t value)
{
	if (!ev->nrec)
		return 0;
	if (bi_grow((void **)&ev->ref, &ev->ref_cap, ev->nref + 1, sizeof(*ev->ref)))
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	struct ev_rec *r = &ev->rec[ev->nrec - 1];
	for (size_t i = 0; kind == REF_TREE_BLOCK && i < 2; i++)
		if (!r->owners[i] || r->owners[i] == value) {
			r->owners[i] = value;
			break;
		}
	ev->ref[ev->nref++] = (struct ev_ref){ .value = value, .rec = ev->nrec - 1, .kind = kind };
	return 0;
}

/* The inline references at @p (@len bytes) of the record just added. */
static int inline_refs(struct btrfsimg_fs *fs, struct evidence *ev, const uint8_t *p, uint32_t len)
{
	for (uint32_t o = 0; o + 9 <= len; o += 9) {
		if (p[o] == REF_OWNER)
			continue;
		if (p[o] != REF_TREE_BLOCK && p[o] != REF_SHARED_BLOCK)
			return 0; /* a data reference: not a tree block's */
		int rc = add_ref(fs, ev, p[o], bi_le64(p + o + 1));
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* One extent-tree item: a tree block's record, or a reference of the
 * record before it kept in an item of its own. */
static int extent_item(struct btrfsimg_fs *fs, struct evidence *ev, const struct bi_item *it)
{
	uint32_t inl = EXT_INLINE;
	uint8_t level;
	bool last = ev->nrec && ev->rec[ev->nrec - 1].bytenr == it->key.objectid;
	if (it->key.type == REF_TREE_BLOCK || it->key.type == REF_SHARED_BLOCK)
		return last ? add_ref(fs, ev, it->key.type, it->key.offset) : 0;
	if (it->key.type == KT_METADATA_ITEM && it->size >= EXT_INLINE) {
		level = (uint8_t)it->key.offset;
	} else if (it->key.type == KT_EXTENT_ITEM && it->size >= EXT_INLINE + EXT_TREE_INFO &&
		   (bi_le64(it->data + EXT_FLAGS) & EXT_FLAG_TREE_BLOCK)) {
		level = it->data[EXT_INLINE + 17];
		inl += EXT_TREE_INFO;
	} else {
		return 0;
	}
	if (last || level >= MAX_LEVEL ||
	    (it->key.type == KT_METADATA_ITEM && it->key.offset >= MAX_LEVEL))
		return 0; /* a second record of one address, or no tree block's */
	if (bi_grow((void **)&ev->rec, &ev->rec_cap, ev->nrec + 1, sizeof(*ev->rec)))
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	ev->rec[ev->nrec++] = (struct ev_rec){
		.bytenr = it->key.objectid, .generation = bi_le64(it->data + EXT_GENERATION),
		.level = level, .full_backref = bi_le64(it->data + EXT_FLAGS) & EXT_FLAG_FULL_BACKREF };
	return inline_refs(fs, ev, it->data + inl, it->size - inl);
}

static int ref_cmp(const void *pa, const void *pb)
{
	const struct ev_ref *a = pa, *b = pb;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	if (a->value != b->value)
		return a->value < b->value ? -1 : 1;
	return a->rec < b->rec ? -1 : a->rec > b->rec;
}

/* The references of @kind naming @value: [*lo, *hi) of ev->ref. */
static void refs_of(const struct evidence *ev, uint8_t kind, uint64_t value, size_t *lo,
		    size_t *hi)
{
	size_t a = 0, b = ev->nref;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		const struct ev_ref *r = &ev->ref[m];
		if (r->kind < kind || (r->kind == kind && r->value < value))
			a = m + 1;
		else
			b = m;
	}
	*lo = a;
	while (a < ev->nref && ev->ref[a].kind == kind && ev->ref[a].value == value)
		a++;
	*hi = a;
}

/* Read recorded block @r once, as the extent tree says it is. */
static void rec_read(struct btrfsimg_fs *fs, struct evidence *ev, struct ev_rec *r)
{
	if (r->state != BLK_UNREAD)
		return;
	struct bi_expect e = { .generation = r->generation, .level = r->level };
	struct bi_block *b;
	r->state = BLK_LOST;
	if (bi_block_read(fs, r->bytenr, &e, &b) < 0)
		return;
	if (b->nritems) {
		r->state = BLK_READ;
		bi_key_read(b->data + HDR_SIZE, &r->first);
		size_t step = b->level ? KP_SIZE : ITEM_SIZE;
		bi_key_read(b->data + HDR_SIZE + (size_t)(b->nritems - 1) * step, &r->last);
	}
	if (!ev->have_ids && !b->synthetic) {
		memcpy(ev->ids, b->data + HDR_FSID, sizeof(ev->ids));
		ev->have_ids = true;
	}
	bi_block_put(fs, b);
}

/* The reference of @kind naming @value that record @rec holds, or NULL. */
static struct ev_ref *ref_find(struct evidence *ev, uint8_t kind, uint64_t value, size_t rec)
{
	size_t lo, hi;
	refs_of(ev, kind, value, &lo, &hi);
	while (lo < hi) {
		size_t m = lo + (hi - lo) / 2;
		if (ev->ref[m].rec < rec)
			lo = m + 1;
		else
			hi = m;
	}
	return lo < ev->nref && ev->ref[lo].kind == kind && ev->ref[lo].value == value &&
			       ev->ref[lo].rec == rec ?
		       &ev->ref[lo] :
		       NULL;
}

/* The children a readable node of ordinary back references points at
 * are not orphans of its owner: their TREE_BLOCK_REF of it is claimed. */
static void claim_children(struct btrfsimg_fs *fs, struct evidence *ev, struct ev_rec *r)
{
	struct bi_expect e = { .generation = r->generation, .level = r->level };
	struct bi_block *b;
	if (bi_block_read(fs, r->bytenr, &e, &b) < 0)
		return;
	for (uint32_t i = 0; i < b->nritems; i++) {
		const uint8_t *kp = b->data + HDR_SIZE + (size_t)i * KP_SIZE;
		const struct ev_rec *c = rec_find(ev, bi_le64(kp + KP_BLOCKPTR));
		struct ev_ref *ref = c ? ref_find(ev, REF_TREE_BLOCK, b->owner, (size_t)(c - ev->rec)) :
					 NULL;
		if (ref)
			ref->claimed = true;
	}
	bi_block_put(fs, b);
}

/* Every tree block the extent tree records, their references, and which
 * of them the readable nodes claim. */
static int collect(struct btrfsimg_fs *fs, struct evidence *ev, const struct bi_root *ext)
{
	bi_key min = { 0, 0, 0 }, max = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, ext, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0)
		rc = extent_item(fs, ev, &item);
	bi_iter_end(&it);
	if (rc < 0)
		return rc;
	if (ev->nref > 1)
		qsort(ev->ref, ev->nref, sizeof(*ev->ref), ref_cmp);
	for (size_t i = 0; i < ev->nrec; i++) {
		struct ev_rec *r = &ev->rec[i];
		if (!r->level)
			continue;
		rec_read(fs, ev, r);
		if (r->state == BLK_READ && !r->full_backref)
			claim_children(fs, ev, r);
	}
	return 0;
}

/* The evidence, gathered the first time a node is lost. */
static int evidence_load(struct btrfsimg_fs *fs, struct evidence *ev)
{
	if (ev->loaded)
		return ev->rc;
	struct bi_root ext;
	int rc = bi_root_find(fs, OBJ_EXTENT_TREE, &ext);
	if (rc == 0)
		rc = collect(fs, ev, &ext);
	if (rc == 0)
		ev->gen = ext.generation;
	ev->loaded = rc != -ENOMEM;
	ev->work = 64 * (uint64_t)ev->nrec + (1u << 20);
	if (rc < 0 && rc != -ENOMEM) {
		snprintf(ev->why, sizeof(ev->why), "%s", fs->err);
		ev->rc = rc;
	}
	return rc;
}

/* Whether node @bytenr was walked before; else it is now. */
static int seen_before(struct btrfsimg_fs *fs, struct evidence *ev, uint64_t bytenr, bool *seen)
{
	size_t at = bi_lower_bound(ev->seen, ev->nseen, bytenr);
	*seen = at < ev->nseen && ev->seen[at] == bytenr;
	if (*seen)
		return 0;
	if (bi_grow((void **)&ev->seen, &ev->seen_cap, ev->nseen + 1, sizeof(*ev->seen)))
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	memmove(ev->seen + at + 1, ev->seen + at, (ev->nseen - at) * sizeof(*ev->seen));
	ev->seen[at] = bytenr;
	ev->nseen++;
	return 0;
}

/* ------------------------------------------------------------ one node */

/* A key range [lo, hi); hi NULL: unbounded. */
struct range {
	bi_key lo, hi;
	bool bounded;
};

static bool in_range(const struct range *r, const bi_key *first, const bi_key *last)
{
	return bi_key_cmp(first, &r->lo) >= 0 && (!r->bounded || bi_key_cmp(last, &r->hi) < 0);
}

static bool key_next(const bi_key *k, bi_key *out)
{
	*out = *k;
	if (++out->offset)
		return true;
	if (++out->type)
		return true;
	return ++out->objectid != 0;
}

struct walk {
	struct btrfsimg_fs *fs;
	struct evidence *ev;
	uint64_t tree;
	char root_no[256];	/* why the tree's lost root was not rebuilt, or "" */
};

static int add_child(struct btrfsimg_fs *fs, struct node_build *nb, const bi_key *first,
		     const bi_key *last, uint64_t bytenr, uint64_t gen)
{
	if (bi_grow((void **)&nb->v, &nb->cap, nb->n + 1, sizeof(*nb->v)))
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	nb->v[nb->n++] = (struct child){ *first, last ? *last : *first, bytenr, gen, !last };
	return 0;
}

/* Recorded block @ri as a child of a lost node of level @level and
 * generation @gen over @r: taken if it reads and fits, kept aside if it is
 * a node that does not read. */
static int consider(struct walk *w, struct node_build *nb, size_t ri, uint8_t level, uint64_t gen,
		    const struct range *r)
{
	struct ev_rec *c = &w->ev->rec[ri];
	if (!w->ev->work)
		return bi_err(w->fs, -E2BIG, "more candidates weighed than %zu recorded blocks "
			      "warrant", w->ev->nrec);
	w->ev->work--;
	if (c->level + 1 != level || c->used)
		return 0;
	if (c->generation > gen) {
		nb->outside++;
		return 0;
	}
	rec_read(w->fs, w->ev, c);
	if (c->state == BLK_READ) {
		if (!in_range(r, &c->first, &c->last)) {
			nb->outside++;
			return 0;
		}
		return add_child(w->fs, nb, &c->first, &c->last, c->bytenr, c->generation);
	}
	if (!c->level) {
		nb->unread++;
		return 0;
	}
	if (bi_grow((void **)&nb->lost, &nb->lost_cap, nb->nlost + 1, sizeof(*nb->lost)))
		return bi_err(w->fs, -ENOMEM, "salvage: out of memory");
	nb->lost[nb->nlost++] = ri;
	return 0;
}

/* The candidates of lost node @me: the blocks its SHARED_BLOCK_REFs name
 * (full back references), else the orphans of the first owner that has
 * any in its range: its tree, then the owners of its parents. */
static int candidates(struct walk *w, struct node_build *nb, const struct ev_rec *me,
		      const struct range *r)
{
	size_t lo, hi;
	int rc = 0;
	if (me->full_backref) {
		refs_of(w->ev, REF_SHARED_BLOCK, me->bytenr, &lo, &hi);
		for (size_t i = lo; rc == 0 && i < hi; i++)
			rc = consider(w, nb, w->ev->ref[i].rec, me->level, me->generation, r);
		return rc;
	}
	uint64_t owners[3] = { w->tree };
	size_t nown = 1;
	for (size_t i = 0; i < 2; i++) /* the owners of its parents */
		if (me->owners[i] && me->owners[i] != w->tree)
			owners[nown++] = me->owners[i];
	for (size_t o = 0; rc == 0 && o < nown && !nb->n && !nb->nlost; o++) {
		nb->owner = owners[o];
		nb->unread = nb->outside = 0;
		refs_of(w->ev, REF_TREE_BLOCK, owners[o], &lo, &hi);
		for (size_t i = lo; rc == 0 && i < hi; i++)
			if (!w->ev->ref[i].claimed)
				rc = consider(w, nb, w->ev->ref[i].rec, me->level, me->generation, r);
	}
	return rc;
}

static int child_cmp(const void *pa, const void *pb)
{
	const struct child *a = pa, *b = pb;
	return bi_key_cmp(&a->first, &b->first);
}

static int rebuild(struct walk *w, struct ev_rec *me, const struct range *r, const char *why,
		   bi_key *first);

static void say_rebuilt(const struct walk *w, const struct ev_rec *me, const struct node_build *nb,
			const char *why, bool root)
{
	char by[64];
	if (nb->owner)
		snprintf(by, sizeof(by), "TREE_BLOCK_REF of tree %" PRIu64, nb->owner);
	else
		snprintf(by, sizeof(by), "SHARED_BLOCK_REF naming it");
	bi_damage(w->fs,
		  "tree %" PRIu64 ": %s at logical %" PRIu64 " (level %u, generation %" PRIu64
		  ") lost (%s); rebuilt from %zu live blocks of level %u (%zu of them rebuilt "
		  "too) that the extent tree of generation %" PRIu64 " records by %s; %zu "
		  "recorded blocks unreadable, their keys lost; %zu recorded blocks outside its "
		  "key range or newer than it not used",
		  w->tree, root ? "root node" : "node", me->bytenr, me->level, me->generation, why,
		  nb->n, me->level - 1u, nb->rebuilt, w->ev->gen, by, nb->unread, nb->outside);
}

static void say_not_rebuilt(struct walk *w, uint64_t bytenr, uint8_t level, bool root,
			    const char *no)
{
	if (root)
		snprintf(w->root_no, sizeof(w->root_no), "%s", no);
	bi_damage(w->fs, "tree %" PRIu64 ": %s at logical %" PRIu64 " (level %u) unreadable; not "
		  "rebuilt from the blocks below it: %s", w->tree, root ? "root node" : "node",
		  bytenr, level, no);
}

/* The gap before readable child @g of @nb (g == n: after the last) within
 * @r: false if it holds no key. */
static bool gap_at(const struct walk *w, const struct node_build *nb, size_t nread, size_t g,
		   const struct range *r, struct range *gap)
{
	*gap = *r;
	if (g > 0) {
		const struct ev_rec *prev = rec_find(w->ev, nb->v[g - 1].bytenr);
		if (!prev || !key_next(&prev->last, &gap->lo))
			return false;
	}
	if (g < nread) {
		gap->hi = nb->v[g].first;
		gap->bounded = true;
	}
	return !gap->bounded || bi_key_cmp(&gap->lo, &gap->hi) < 0;
}

/* The lost child nodes rebuilt over the gaps between the readable
 * children @nb->v[0..n) (sorted): before the first, between two, after
 * the last; the keys a lost node held lie where no readable sibling's do.
 * A gap takes the first lost node (by address) that finds blocks in it,
 * over the whole gap (two lost neighbours become one node). The lost
 * nodes no gap takes are said and counted with the unreadable. */
static int fill_gaps(struct walk *w, struct node_build *nb, const struct range *r)
{
	size_t nread = nb->n, placed = 0;
	for (size_t g = 0; g <= nread && placed < nb->nlost; g++) {
		struct range gap;
		if (!gap_at(w, nb, nread, g, r, &gap))
			continue;
		for (size_t k = 0; k < nb->nlost; k++) {
			if (nb->lost[k] == SIZE_MAX)
				continue;
			struct ev_rec *c = &w->ev->rec[nb->lost[k]];
			bi_key first;
			int n = rebuild(w, c, &gap, "unreadable", &first);
			if (n < 0)
				return n;
			if (n == 0)
				continue;
			int rc = add_child(w->fs, nb, &first, NULL, c->bytenr, c->generation);
			if (rc < 0)
				return rc;
			nb->lost[k] = SIZE_MAX;
			nb->rebuilt++;
			placed++;
			break;
		}
	}
	for (size_t k = 0; k < nb->nlost; k++)
		if (nb->lost[k] != SIZE_MAX)
			say_not_rebuilt(w, w->ev->rec[nb->lost[k]].bytenr,
					w->ev->rec[nb->lost[k]].level, false,
					"no gap between its readable siblings holds a readable "
					"recorded block for it");
	nb->unread += nb->nlost - placed;
	return 0;
}

/* The node synthesized at @me's address: its header's identity (fsid,
 * chunk tree uuid) a read block's, its pointers @nb's children. */
static int synth_node(struct walk *w, const struct ev_rec *me, const struct node_build *nb)
{
	uint8_t *buf = calloc(1, w->fs->nodesize);
	if (!buf)
		return bi_err(w->fs, -ENOMEM, "salvage: out of memory");
	memcpy(buf + HDR_FSID, w->ev->ids, sizeof(w->ev->ids));
	bi_put_le64(buf + HDR_BYTENR, me->bytenr);
	bi_put_le64(buf + HDR_GENERATION, me->generation);
	bi_put_le64(buf + HDR_OWNER, nb->owner ? nb->owner : w->tree);
	bi_put_le32(buf + HDR_NRITEMS, (uint32_t)nb->n);
	buf[HDR_LEVEL] = me->level;
	for (size_t i = 0; i < nb->n; i++) {
		uint8_t *kp = buf + HDR_SIZE + i * KP_SIZE;
		bi_put_le64(kp, nb->v[i].first.objectid);
		kp[8] = nb->v[i].first.type;
		bi_put_le64(kp + 9, nb->v[i].first.offset);
		bi_put_le64(kp + KP_BLOCKPTR, nb->v[i].bytenr);
		bi_put_le64(kp + KP_GENERATION, nb->v[i].generation);
	}
	return bi_block_pin_synthetic(w->fs, buf, w->fs->nodesize);
}

/* Why @nb's readable children cannot be @me's: their keys overlap (one of
 * them forged), or there are none, or too many. Empty if they can be. */
static void refuse_why(const struct walk *w, const struct ev_rec *me, const struct node_build *nb,
		       char *no, size_t len)
{
	for (size_t i = 1; i < nb->n; i++) {
		const struct ev_rec *a = rec_find(w->ev, nb->v[i - 1].bytenr);
		if (a && bi_key_cmp(&a->last, &nb->v[i].first) >= 0) {
			snprintf(no, len, "recorded blocks %" PRIu64 " and %" PRIu64 " overlap in "
				 "keys: no one node to rebuild", a->bytenr, nb->v[i].bytenr);
			return;
		}
	}
	if (!nb->n && !nb->nlost)
		snprintf(no, len, "the extent tree of generation %" PRIu64 " records no readable "
			 "block of level %u for it in its key range", w->ev->gen, me->level - 1u);
	else if (nb->n + nb->nlost > w->ev->max)
		snprintf(no, len, "%zu recorded children, more than the %zu a node holds",
			 nb->n + nb->nlost, w->ev->max);
}

static int add_lost(struct btrfsimg_fs *fs, uint64_t tree, const bi_key *lo, const bi_key *hi)
{
	size_t cap = fs->nsalvage_lost;
	if (bi_grow((void **)&fs->salvage_lost, &cap, fs->nsalvage_lost + 1,
		    sizeof(*fs->salvage_lost)))
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	fs->salvage_lost[fs->nsalvage_lost++] =
		(struct bi_lost_keys){ tree, *lo, hi ? *hi : *lo, !hi };
	return 0;
}

/* A rebuilt node some of whose recorded children did not read: where
 * they were is not known, so every gap between two of its readable
 * children (and at its ends) may have held their keys. A rebuilt child
 * says its own gaps. */
static int note_lost(struct walk *w, const struct node_build *nb, const struct range *r)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && nb->unread && i <= nb->n; i++) {
		if ((i > 0 && nb->v[i - 1].rebuilt) || (i < nb->n && nb->v[i].rebuilt))
			continue;
		const bi_key *lo = i ? &nb->v[i - 1].last : &r->lo;
		const bi_key *hi = i < nb->n ? &nb->v[i].first : r->bounded ? &r->hi : NULL;
		if (i == 0 && hi && !bi_key_cmp(lo, hi))
			continue; /* the first child starts where the node does */
		rc = add_lost(w->fs, w->tree, lo, hi);
	}
	return rc;
}

/* Lost node @me rebuilt over @r: the number of children of the node
 * synthesized at its address (its first key in *first), 0 if it was not
 * (said), or a negative errno (no memory). */
static int rebuild_node(struct walk *w, struct ev_rec *me, const struct range *r, const char *why,
			bi_key *first, bool root, bool trial)
{
	struct node_build nb = { 0 };
	char no[sizeof(w->fs->err)] = "";
	me->state = BLK_LOST;
	me->used = true; /* never a child of another lost node */
	int rc = candidates(w, &nb, me, r);
	if (rc == 0 && nb.n > 1)
		qsort(nb.v, nb.n, sizeof(*nb.v), child_cmp);
	if (rc == 0)
		refuse_why(w, me, &nb, no, sizeof(no));
	if (rc == 0 && !*no)
		rc = fill_gaps(w, &nb, r);
	if (rc == 0 && nb.n > 1)
		qsort(nb.v, nb.n, sizeof(*nb.v), child_cmp);
	if (rc == -E2BIG) { /* a hostile tree: this node is left lost */
		snprintf(no, sizeof(no), "%s", w->fs->err);
		rc = 0;
	}
	if (rc == 0 && !*no && !nb.n)
		snprintf(no, sizeof(no), "none of its %zu recorded children reads", nb.nlost);
	if (rc == 0 && !*no)
		rc = synth_node(w, me, &nb);
	if (rc == 0 && !*no)
		rc = note_lost(w, &nb, r);
	if (rc == 0 && *no && !(trial && !nb.n)) /* a gap without it is no failure */
		say_not_rebuilt(w, me->bytenr, me->level, root, no);
	if (rc == 0 && !*no) {
		w->fs->rebuild->synthesized++;
		say_rebuilt(w, me, &nb, why, root);
		for (size_t i = 0; i < nb.n; i++)
			rec_find(w->ev, nb.v[i].bytenr)->used = true;
		*first = nb.v[0].first;
		rc = (int)nb.n;
	}
	free(nb.v);
	free(nb.lost);
	return rc;
}

/* A lost child node tried over a gap: a gap with nothing of it is no
 * failure to say (fill_gaps says the ones no gap takes). */
static int rebuild(struct walk *w, struct ev_rec *me, const struct range *r, const char *why,
		   bi_key *first)
{
	return rebuild_node(w, me, r, why, first, false, true);
}

/* ------------------------------------------------------------ the walk */

static int visit(struct walk *w, uint64_t bytenr, uint8_t level, uint64_t gen,
		 const struct range *r, bool root);

/* The nodes below node @b (over @r): each child node over its slot's
 * range, bounded by the next slot's key. */
static int visit_children(struct walk *w, const struct bi_block *b, const struct range *r)
{
	int rc = 0;
	for (uint32_t i = 0; rc == 0 && b->level >= 2 && i < b->nritems; i++) {
		const uint8_t *kp = b->data + HDR_SIZE + (size_t)i * KP_SIZE;
		struct range cr = *r;
		bi_key_read(kp, &cr.lo);
		if (i + 1 < b->nritems) {
			bi_key_read(kp + KP_SIZE, &cr.hi);
			cr.bounded = true;
		}
		rc = visit(w, bi_le64(kp + KP_BLOCKPTR), (uint8_t)(b->level - 1),
			   bi_le64(kp + KP_GENERATION), &cr, false);
	}
	return rc;
}

/* Node @bytenr reads on no copy: rebuilt where the evidence allows, said
 * either way; then the nodes below the rebuilt one walked. The walk's
 * error keeps naming the block. */
static int lost_node(struct walk *w, uint64_t bytenr, uint8_t level, uint64_t gen,
		     const struct range *r, bool root)
{
	char why[sizeof(w->fs->err)], no[sizeof(w->fs->err) + 64] = "";
	snprintf(why, sizeof(why), "%s", w->fs->err);
	int rc = evidence_load(w->fs, w->ev);
	if (rc == -ENOMEM)
		return rc;
	struct ev_rec *me = rc == 0 ? rec_find(w->ev, bytenr) : NULL;
	if (rc < 0)
		snprintf(no, sizeof(no), "%s", w->ev->why);
	else if (w->ev->gen < gen)
		snprintf(no, sizeof(no), "the extent tree (generation %" PRIu64 ") is older than "
			 "the node (generation %" PRIu64 ")", w->ev->gen, gen);
	else if (!me || me->generation != gen || me->level != level || me->used)
		snprintf(no, sizeof(no), "the extent tree of generation %" PRIu64 " does not "
			 "record it there at level %u, generation %" PRIu64, w->ev->gen, level, gen);
	bi_key first;
	int n = 0;
	if (*no)
		say_not_rebuilt(w, bytenr, level, root, no);
	else
		n = rebuild_node(w, me, r, why, &first, root, false);
	struct bi_expect e = { .generation = gen, .level = level };
	struct bi_block *b;
	if (n > 0 && bi_block_read(w->fs, bytenr, &e, &b) == 0) {
		n = visit_children(w, b, r);
		bi_block_put(w->fs, b);
	}
	snprintf(w->fs->err, sizeof(w->fs->err), "%s", why);
	return n < 0 ? n : 0;
}

static int visit(struct walk *w, uint64_t bytenr, uint8_t level, uint64_t gen,
		 const struct range *r, bool root)
{
	bool seen;
	if (level == 0)
		return 0; /* leaves: the readers say the ones that do not read */
	int rc = seen_before(w->fs, w->ev, bytenr, &seen);
	if (rc < 0 || seen)
		return rc;
	struct bi_expect e = { .generation = gen, .level = level };
	struct bi_block *b;
	if (bi_block_read(w->fs, bytenr, &e, &b) < 0)
		return lost_node(w, bytenr, level, gen, r, root);
	rc = visit_children(w, b, r);
	bi_block_put(w->fs, b);
	return rc;
}

static bool subvolume_tree(uint64_t id)
{
	return id == OBJ_FS_TREE || (id >= OBJ_FIRST_FREE && id <= OBJ_LAST_FREE);
}

/* The subvolume trees the root tree names. */
static int tree_ids(struct btrfsimg_fs *fs, uint64_t **ids, size_t *n)
{
	bi_key min = { 0, KT_ROOT_ITEM, 0 }, max = { UINT64_MAX, KT_ROOT_ITEM, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	uint64_t prev = UINT64_MAX;
	size_t cap = 0;
	int rc = bi_iter_start(fs, &it, &fs->root_tree, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = 0;
		if (item.key.type != KT_ROOT_ITEM || item.key.objectid == prev ||
		    !subvolume_tree(item.key.objectid))
			continue;
		prev = item.key.objectid;
		if (bi_grow((void **)ids, &cap, *n + 1, sizeof(**ids))) {
			rc = bi_err(fs, -ENOMEM, "salvage: out of memory");
			break;
		}
		(*ids)[(*n)++] = prev;
	}
	bi_iter_end(&it);
	return rc < 0 ? rc : 0;
}

/* Whether tree @r's root node reads (as it is, or rebuilt and pinned);
 * if not, why in @why. */
static bool root_reads(struct btrfsimg_fs *fs, const struct bi_root *r, char *why, size_t len)
{
	struct bi_expect e = { .owner = r->id, .generation = r->generation, .level = r->level };
	struct bi_block *b;
	if (bi_block_read(fs, r->bytenr, &e, &b) == 0) {
		bi_block_put(fs, b);
		return true;
	}
	snprintf(why, len, "%s", fs->err);
	return false;
}

/* Tree @id: its lost nodes rebuilt from the extent records (the walk);
 * a root that still does not read, from the leaves a scan finds
 * (salvage_leaves.c), as when the extent tree is lost too. The walk's
 * error keeps naming the block when neither can. */
static int check_tree(struct btrfsimg_fs *fs, struct evidence *ev, uint64_t id)
{
	struct walk w = { fs, ev, id, "" };
	struct bi_root r;
	struct range all = { .lo = { 0, 0, 0 } };
	char why[sizeof(fs->err)];
	if (bi_root_find(fs, id, &r) < 0 || r.level >= MAX_LEVEL)
		return 0;
	bool lost = !root_reads(fs, &r, why, sizeof(why));
	int rc = visit(&w, r.bytenr, r.level, r.generation, &all, true);
	char now[sizeof(fs->err)];
	if (rc < 0 || !lost || root_reads(fs, &r, now, sizeof(now)))
		return rc;
	if (bi_salvage_leaves(fs, &r, why, r.level ? w.root_no : "a leaf") == 0)
		return 0;
	if (r.level)
		bi_damage(fs, "tree %" PRIu64 ": root node at logical %" PRIu64 " not rebuilt "
			  "from the leaves a scan finds either: %s", id, r.bytenr, fs->err);
	snprintf(fs->err, sizeof(fs->err), "%s", why); /* the walk's error names the block */
	return 0;
}

static struct bi_rebuild *rebuild_state(struct btrfsimg_fs *fs)
{
	if (!fs->rebuild) {
		fs->rebuild = calloc(1, sizeof(*fs->rebuild));
		if (fs->rebuild)
			fs->rebuild->ev.max = (fs->nodesize - HDR_SIZE) / KP_SIZE;
	}
	return fs->rebuild;
}

/* Whether tree @id was tried before; else it is now. */
static int tried_before(struct btrfsimg_fs *fs, struct bi_rebuild *st, uint64_t id, bool *tried)
{
	size_t at = bi_lower_bound(st->tried, st->ntried, id);
	*tried = at < st->ntried && st->tried[at] == id;
	if (*tried)
		return 0;
	if (bi_grow((void **)&st->tried, &st->tried_cap, st->ntried + 1, sizeof(*st->tried)))
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	memmove(st->tried + at + 1, st->tried + at, (st->ntried - at) * sizeof(*st->tried));
	st->tried[at] = id;
	st->ntried++;
	return 0;
}

/* Tree @id checked once per handle: 1 if it was now, 0 if it was before,
 * or a negative errno (no memory). */
static int check_once(struct btrfsimg_fs *fs, struct bi_rebuild *st, uint64_t id)
{
	bool tried;
	int rc = tried_before(fs, st, id, &tried);
	if (rc < 0 || tried)
		return rc;
	st->busy = true;
	rc = check_tree(fs, &st->ev, id);
	st->busy = false;
	return rc < 0 ? rc : 1;
}

int bi_salvage_rebuild_lost(struct btrfsimg_fs *fs)
{
	uint64_t *ids = NULL;
	size_t n = 0;
	struct bi_rebuild *st = rebuild_state(fs);
	int rc = st ? tree_ids(fs, &ids, &n) : bi_err(fs, -ENOMEM, "salvage: out of memory");
	for (size_t i = 0; rc >= 0 && i < n; i++)
		rc = check_once(fs, st, ids[i]);
	if (rc >= 0) /* the data checksums, without which no extent is shown */
		rc = check_once(fs, st, OBJ_CSUM_TREE);
	free(ids);
	return rc < 0 ? rc : 0;
}

bool bi_salvage_rebuild_tree(struct btrfsimg_fs *fs, uint64_t tree)
{
	if (!subvolume_tree(tree) && tree != OBJ_CSUM_TREE)
		return false;
	struct bi_rebuild *st = rebuild_state(fs);
	if (!st || st->busy)
		return false; /* the rebuild's own reads fail as they are */
	char why[sizeof(fs->err)];
	snprintf(why, sizeof(why), "%s", fs->err);
	int rc = check_once(fs, st, tree);
	snprintf(fs->err, sizeof(fs->err), "%s", why); /* the read's error, if it still fails */
	return rc > 0;
}

bool bi_salvage_trees_rebuilt(const struct btrfsimg_fs *fs)
{
	return fs->scan || fs->tree_scan || (fs->rebuild && fs->rebuild->synthesized);
}

void bi_salvage_rebuild_free(struct btrfsimg_fs *fs)
{
	struct bi_rebuild *st = fs->rebuild;
	if (!st)
		return;
	free(st->ev.rec);
	free(st->ev.ref);
	free(st->ev.seen);
	free(st->tried);
	free(st);
	fs->rebuild = NULL;
}

const struct bi_lost_keys *bi_salvage_lost_next(const struct btrfsimg_fs *fs, uint64_t tree,
						uint64_t objectid, const struct bi_lost_keys *after)
{
	size_t i = after ? (size_t)(after - fs->salvage_lost) + 1 : 0;
	for (; i < fs->nsalvage_lost; i++) {
		const struct bi_lost_keys *l = &fs->salvage_lost[i];
		if (l->tree == tree && objectid >= l->lo.objectid &&
		    (l->unbounded || objectid <= l->hi.objectid))
			return l;
	}
	return NULL;
}
