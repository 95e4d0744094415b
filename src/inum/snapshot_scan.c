/* SPDX-License-Identifier: MIT */
/*
 * Whole-tree scans that must stay fast when thousands of snapshots share
 * one large fs tree.
 *
 * Snapshots share tree blocks, internal nodes as well as leaves. Each
 * distinct block (by bytenr, with its generation) is summarised once: a
 * leaf by the objectids of its INODE_ITEMs (sorted, because keys are) and
 * its directory entries that name subvolumes; an internal node by its
 * children's summaries and their totals (inodes, first and last objectid,
 * subvolume entries). A tree is its root's summary: a snapshot whose root
 * points at blocks already seen costs that root's pointers.
 *
 * Inode sets. A tree T that shares blocks with an earlier tree P (the one
 * that last walked most of T's top blocks) is compared with P the way
 * btrfs send compares two trees: both are walked in key order together and
 * a block both hold is skipped whole, so only the paths to changed leaves
 * are opened. Their objectids give what only T holds and what only P holds
 * (a leaf rewritten in place cancels out). P is a full set (every
 * objectid, ascending) or a full base minus the ids P lacks plus the ids
 * only P has; T becomes a difference from the same base, composed from
 * P's and its own, unless that difference is as large as T itself: then T
 * gets a full set. Time and memory grow with how the snapshots differ,
 * not with how many there are.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "inum/snapshot_scan.h"

#include "base/grow.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"
#include "btrfs/tree.h"

/* A tree block's summary. */
struct blk {
	uint64_t bytenr, generation;
	bi_key first; /* its first key (the parent's pointer key) */
	uint8_t level;
	uint32_t n;		   /* leaf: ids; node: children */
	uint64_t *ids;		   /* leaf: its inode objectids */
	struct blk **child;	   /* node: its children, in key order */
	uint64_t total;		   /* inodes in the subtree */
	uint64_t lo, hi;	   /* its first and last inode objectid (total > 0) */
	struct bi_subent *subents; /* leaf: entries naming subvolumes */
	uint32_t nsub;
	uint64_t subtotal;  /* such entries in the subtree */
	uint32_t last_tree; /* 1 + index of the last tree walking it */
};

/* A tree scanned from its blocks: a candidate to compare later ones with. */
struct tree {
	struct blk *root;
	struct bi_tree_ids *set; /* a reference */
};

struct idvec {
	uint64_t *v;
	size_t n, cap;
};

/* A memo slot: the bytenr beside the summary, so probing reads no summary. */
struct slot {
	uint64_t bytenr;
	struct blk *blk; /* NULL: empty */
};

/* The inode sets, built from the summaries in the order the trees come
 * (tree_set): on the caller's thread, or on a worker's (bi_scan_start). It
 * writes only its own state, the sets and the summaries' last_tree; the
 * summaries' other fields, set before a tree is handed over, it reads. */
struct setter {
	struct tree *trees;
	size_t ntrees, captrees;
	struct idvec fresh, gone; /* scratch of compare() */
	char err[256];		  /* what failed (no memory), for bi_err */
};

struct job {
	struct blk *root;
	struct bi_tree_ids **out;
};

/* The worker: trees queued in order; the first error stops it (later
 * trees are taken and dropped), the caller sees it at its next tree. */
struct worker {
	pthread_t th;
	bool on;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job *q;
	size_t head, n, cap;
	bool done;
	int rc;
};

/*
 * The summaries live until the scan ends: they are cut from large zeroed
 * chunks, not allocated one by one (three allocations per block, each
 * freed at the end, were ~4% of a 1,000-snapshot scan). Huge pages
 * (MADV_HUGEPAGE) were tried: the kernel's compaction on the faults took
 * more system time than the TLB misses saved. Under AddressSanitizer every
 * piece is its own allocation, so an overrun is still seen.
 */
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_HIDES_BUGS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_HIDES_BUGS 1
#endif
#endif
#ifndef ARENA_HIDES_BUGS
#define ARENA_HIDES_BUGS 0
#endif

#define ARENA_CHUNK ((size_t)8 << 20)

struct chunk {
	struct chunk *next;
	void *map; /* NULL: from calloc */
	size_t maplen;
};

struct arena {
	struct chunk *chunks;
	uint8_t *cur;
	size_t left;
};

/* @n zeroed bytes, 16-aligned, NULL when out of memory. */
static void *arena_alloc(struct arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (ARENA_HIDES_BUGS || n > ARENA_CHUNK - 64) {
		struct chunk *c = n <= SIZE_MAX - 64 ? calloc(1, 64 + n) : NULL;
		if (!c)
			return NULL;
		c->next = a->chunks;
		a->chunks = c;
		return (uint8_t *)c + 64;
	}
	if (n > a->left) {
		uint8_t *m = mmap(NULL, ARENA_CHUNK, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return NULL;
		struct chunk *c = (struct chunk *)m;
		*c = (struct chunk){ a->chunks, m, ARENA_CHUNK };
		a->chunks = c;
		a->cur = m + 64;
		a->left = ARENA_CHUNK - 64;
	}
	void *r = a->cur;
	a->cur += n;
	a->left -= n;
	return r;
}

static void arena_free(struct arena *a)
{
	for (struct chunk *c = a->chunks, *next; c; c = next) {
		next = c->next;
		if (c->map)
			munmap(c->map, c->maplen);
		else
			free(c);
	}
	*a = (struct arena){ 0 };
}

struct bi_scan {
	struct btrfsimg_fs *fs;
	struct slot *slots; /* open addressing by bytenr */
	size_t nslots, used;
	struct arena arena; /* the summaries */
	struct setter set;
	struct worker w;
};

struct bi_scan *bi_scan_new(struct btrfsimg_fs *fs)
{
	struct bi_scan *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->fs = fs;
	s->nslots = 1024;
	s->slots = calloc(s->nslots, sizeof(*s->slots));
	if (!s->slots) {
		free(s);
		return NULL;
	}
	return s;
}

void bi_tree_ids_put(struct bi_tree_ids *set)
{
	if (set && --set->refs == 0) {
		bi_tree_ids_put(set->base); /* bases are full sets: one level */
		free(set->ids);
		free(set->del);
		free(set);
	}
}

void bi_scan_free(struct bi_scan *s)
{
	if (!s)
		return;
	bi_scan_wait(s); /* the worker reads the summaries */
	arena_free(&s->arena);
	for (size_t i = 0; i < s->set.ntrees; i++)
		bi_tree_ids_put(s->set.trees[i].set);
	free(s->set.trees);
	free(s->slots);
	free(s->set.fresh.v);
	free(s->set.gone.v);
	free(s->w.q);
	free(s);
}

static size_t slot_of(uint64_t bytenr, size_t nslots)
{
	uint64_t h = bytenr >> 12; /* murmur3's finaliser: every bit mixes */
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return (size_t)h & (nslots - 1);
}

static struct blk *memo_get(struct bi_scan *s, uint64_t bytenr)
{
	for (size_t i = slot_of(bytenr, s->nslots);; i = (i + 1) & (s->nslots - 1)) {
		if (!s->slots[i].blk)
			return NULL;
		if (s->slots[i].bytenr == bytenr)
			return s->slots[i].blk;
	}
}

static void memo_place(struct slot *v, size_t n, struct blk *l)
{
	size_t i = slot_of(l->bytenr, n);
	while (v[i].blk)
		i = (i + 1) & (n - 1);
	v[i] = (struct slot){ l->bytenr, l };
}

static int memo_grow(struct bi_scan *s)
{
	size_t n = s->nslots * 2;
	struct slot *v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t k = 0; k < s->nslots; k++)
		if (s->slots[k].blk)
			memo_place(v, n, s->slots[k].blk);
	free(s->slots);
	s->slots = v;
	s->nslots = n;
	return 0;
}

static int memo_put(struct bi_scan *s, struct blk *l)
{
	if ((s->used + 1) * 2 > s->nslots && memo_grow(s) < 0)
		return -ENOMEM;
	memo_place(s->slots, s->nslots, l);
	s->used++;
	return 0;
}

static bool is_inode_objectid(uint64_t id)
{
	return id >= OBJ_FIRST_FREE && id <= OBJ_LAST_FREE;
}

/* A DIR_INDEX entry whose location is a ROOT_ITEM: a subvolume (or stub). */
static int add_subent(struct btrfsimg_fs *fs, struct blk *l, const struct bi_block *b,
		      uint32_t slot, const bi_key *k, const uint8_t *d, uint32_t size)
{
	struct bi_cur c = bi_cur_make(d, size);
	uint16_t nlen = bi_u16(&c, DI_NAME_LEN);
	const uint8_t *name = bi_bytes(&c, DI_SIZE, nlen);
	if (c.bad || nlen == 0 || nlen > 255)
		return bi_err(fs, -EUCLEAN,
			      "corrupt dir index: block=%" PRIu64
			      " slot=%u, name length %u, item size %u",
			      b->bytenr, slot, nlen, size);
	struct bi_subent *e = &l->subents[l->nsub++];
	e->dir = k->objectid;
	e->index = k->offset;
	e->child = bi_le64(d + DI_LOCATION);
	e->name_len = nlen;
	memcpy(e->name, name, nlen);
	return 0;
}

static int summarize_leaf(struct bi_scan *s, const struct bi_block *b, struct blk *l)
{
	uint32_t nids = 0, nsub = 0;
	for (uint32_t i = 0; i < b->nritems; i++) {
		bi_key k;
		const uint8_t *d;
		uint32_t size;
		bi_leaf_item(b, i, &k, &d, &size);
		if (i == 0)
			l->first = k;
		nids += k.type == KT_INODE_ITEM && is_inode_objectid(k.objectid);
		nsub += k.type == KT_DIR_INDEX && size > DI_LOCATION + 8 &&
			d[DI_LOCATION + 8] == KT_ROOT_ITEM;
	}
	l->ids = arena_alloc(&s->arena, (nids ? nids : 1) * sizeof(*l->ids));
	l->subents = nsub ? arena_alloc(&s->arena, nsub * sizeof(*l->subents)) : NULL;
	int rc = (!l->ids || (nsub && !l->subents)) ? bi_err(s->fs, -ENOMEM, "out of memory") : 0;
	for (uint32_t i = 0; rc == 0 && i < b->nritems; i++) {
		bi_key k;
		const uint8_t *d;
		uint32_t size;
		bi_leaf_item(b, i, &k, &d, &size);
		if (k.type == KT_INODE_ITEM && is_inode_objectid(k.objectid))
			l->ids[l->n++] = k.objectid;
		else if (k.type == KT_DIR_INDEX && size > DI_LOCATION + 8 &&
			 d[DI_LOCATION + 8] == KT_ROOT_ITEM)
			rc = add_subent(s->fs, l, b, i, &k, d, size);
	}
	l->total = l->n;
	l->lo = l->n ? l->ids[0] : 0;
	l->hi = l->n ? l->ids[l->n - 1] : 0;
	l->subtotal = l->nsub;
	return rc;
}

static int get_blk(struct bi_scan *s, uint64_t treeid, uint64_t bytenr, const struct bi_expect *e,
		   struct blk **out);

/* Inode items are unique keys of one tree: their objectids rise across
 * children too. Each leaf was checked on its own; this catches a node
 * pointing at blocks out of order (or at one twice). */
static int summarize_node(struct bi_scan *s, uint64_t treeid, const struct bi_block *b,
			  struct blk *k)
{
	k->child = arena_alloc(&s->arena, (b->nritems ? b->nritems : 1) * sizeof(*k->child));
	if (!k->child)
		return bi_err(s->fs, -ENOMEM, "out of memory");
	/* A new node of a snapshot points mostly at known blocks: their
	 * summaries are looked up a few pointers ahead of their use, so the
	 * cache misses of the memo and of the summaries overlap. */
	enum { AHEAD = 16 };
	for (uint32_t i = 0; i < b->nritems && i < AHEAD; i++) {
		bi_key key;
		uint64_t ptr, gen;
		bi_node_ptr(b, i, &key, &ptr, &gen);
		__builtin_prefetch(&s->slots[slot_of(ptr, s->nslots)]);
	}
	for (uint32_t i = 0; i < b->nritems; i++) {
		bi_key key;
		uint64_t ptr, gen;
		struct blk *c;
		if (i + AHEAD < b->nritems) {
			bi_node_ptr(b, i + AHEAD, &key, &ptr, &gen);
			__builtin_prefetch(&s->slots[slot_of(ptr, s->nslots)]);
		}
		if (i + AHEAD / 2 < b->nritems) {
			bi_node_ptr(b, i + AHEAD / 2, &key, &ptr, &gen);
			struct blk *ahead = memo_get(s, ptr);
			if (ahead)
				__builtin_prefetch(ahead);
		}
		bi_node_ptr(b, i, &key, &ptr, &gen);
		if (i == 0)
			k->first = key;
		struct bi_expect ce = { treeid, gen, b->level - 1, &key };
		int rc = get_blk(s, treeid, ptr, &ce, &c);
		if (rc < 0)
			return rc;
		if (c->total && k->total && c->lo <= k->hi)
			return bi_err(s->fs, -EUCLEAN,
				      "corrupt tree %" PRIu64 ": block %" PRIu64
				      " slot %u: inode %" PRIu64 " of block %" PRIu64
				      " not after inode %" PRIu64 " of an earlier block",
				      treeid, b->bytenr, i, c->lo, ptr, k->hi);
		if (c->total && !k->total)
			k->lo = c->lo;
		if (c->total)
			k->hi = c->hi;
		k->total += c->total;
		k->subtotal += c->subtotal;
		k->child[k->n++] = c;
	}
	return 0;
}

/* The summary of the block at @bytenr, read (and its subtree) when new.
 * A block met again must be what it was: same generation, level and first
 * key. Levels fall by one per step, so a pointer loop cannot recurse. */
static int get_blk(struct bi_scan *s, uint64_t treeid, uint64_t bytenr, const struct bi_expect *e,
		   struct blk **out)
{
	struct blk *k = memo_get(s, bytenr);
	if (k) {
		if ((e->generation && k->generation != e->generation) ||
		    (e->level >= 0 && k->level != e->level) ||
		    (e->first_key && bi_key_cmp(&k->first, e->first_key)))
			return bi_err(s->fs, -EUCLEAN,
				      "tree %" PRIu64 ": block %" PRIu64 " read twice, as "
				      "generation %" PRIu64 " level %u, then expected as "
				      "generation %" PRIu64 " level %d",
				      treeid, bytenr, k->generation, k->level, e->generation,
				      e->level);
		*out = k;
		return 0;
	}
	struct bi_block *b;
	int rc = bi_block_read(s->fs, bytenr, e, &b);
	if (rc < 0)
		return rc;
	k = arena_alloc(&s->arena, sizeof(*k));
	if (!k) {
		bi_block_put(s->fs, b);
		return bi_err(s->fs, -ENOMEM, "out of memory");
	}
	k->bytenr = bytenr;
	k->generation = b->generation;
	k->level = b->level;
	rc = b->level == 0 ? summarize_leaf(s, b, k) : summarize_node(s, treeid, b, k);
	if (b->level == 0)
		bi_block_put_once(s->fs, b); /* the summary stands for it now */
	else
		bi_block_put(s->fs, b);
	if (rc == 0 && memo_put(s, k) < 0)
		rc = bi_err(s->fs, -ENOMEM, "out of memory");
	if (rc < 0)
		return rc; /* its pieces go with the arena */
	*out = k;
	return 0;
}

static int idvec_reserve(struct setter *x, struct idvec *a, size_t more)
{
	/* at least one element: callers use a->v even when empty */
	size_t need = more > SIZE_MAX - a->n ? SIZE_MAX : a->n + more;
	if (bi_grow((void **)&a->v, &a->cap, need ? need : 1, sizeof(*a->v)))
		return bi_msg(x->err, sizeof(x->err), -ENOMEM, "out of memory for inode numbers");
	return 0;
}

static int idvec_append(struct setter *x, struct idvec *a, const uint64_t *v, size_t n)
{
	int rc = idvec_reserve(x, a, n);
	if (rc == 0 && n) {
		memcpy(a->v + a->n, v, n * sizeof(*v));
		a->n += n;
	}
	return rc;
}

/* Give back the doubling's spare room (kept if that fails: only larger). */
static uint64_t *shrunk(struct idvec *a)
{
	if (!a->n) {
		free(a->v);
		return NULL;
	}
	uint64_t *w = realloc(a->v, a->n * sizeof(*w));
	return w ? w : a->v;
}

/* out += x - y (both ascending); out stays ascending when what it held is
 * below x's first id (the callers merge, see minus_union). */
static size_t minus_into(uint64_t *out, const uint64_t *x, size_t nx, const uint64_t *y, size_t ny)
{
	size_t i = 0, j = 0, k = 0;
	while (i < nx) {
		while (j < ny && y[j] < x[i])
			j++;
		if (j < ny && y[j] == x[i])
			i++;
		else
			out[k++] = x[i++];
	}
	return k;
}

/* @out = (x - y) + (z - w), all ascending, the two parts disjoint. */
static int minus_union(struct setter *st, struct idvec *out, const uint64_t *x, size_t nx,
		       const uint64_t *y, size_t ny, const uint64_t *z, size_t nz,
		       const uint64_t *w, size_t nw)
{
	out->n = 0;
	int rc = idvec_reserve(st, out, 2 * (nx + nz));
	if (rc < 0)
		return rc;
	uint64_t *a = out->v + nx + nz, *b;
	size_t na = minus_into(a, x, nx, y, ny);
	b = a + na;
	size_t nb = minus_into(b, z, nz, w, nw);
	size_t i = 0, j = 0;
	while (i < na || j < nb)
		out->v[out->n++] = j == nb || (i < na && a[i] < b[j]) ? a[i++] : b[j++];
	return 0;
}

/* ---------------------- two trees walked together ---------------------- */

/* A position in a tree's blocks, in key order. */
struct fcur {
	struct blk *stk[MAX_LEVEL];
	uint32_t idx[MAX_LEVEL];
	int depth;
	struct blk *cur; /* NULL: past the end */
};

static void fc_next(struct fcur *c)
{
	while (c->depth > 0) {
		struct blk *p = c->stk[c->depth - 1];
		if (++c->idx[c->depth - 1] < p->n) {
			c->cur = p->child[c->idx[c->depth - 1]];
			return;
		}
		c->depth--;
	}
	c->cur = NULL;
}

/* Into the current node: its first child (levels fall by one per step,
 * so the stack holds at most a root's level). */
static void fc_down(struct fcur *c)
{
	struct blk *p = c->cur;
	if (!p->n || c->depth >= MAX_LEVEL) {
		fc_next(c);
		return;
	}
	c->stk[c->depth] = p;
	c->idx[c->depth] = 0;
	c->depth++;
	c->cur = p->child[0];
}

/* One step on one side: a leaf's ids go to @v, a node is opened. */
static int fc_step(struct setter *x, struct fcur *c, struct idvec *v, uint32_t mark)
{
	struct blk *k = c->cur;
	if (mark)
		k->last_tree = mark;
	if (k->level) {
		fc_down(c);
		return 0;
	}
	fc_next(c);
	return idvec_append(x, v, k->ids, k->n);
}

/*
 * The ids of @t's leaves that @p does not hold (s->fresh) and of @p's
 * leaves that @t does not hold (s->gone), both ascending: both trees are
 * walked in key order, the one behind (or at the same key, the one whose
 * block is higher) moving on, and a block both reach at once is skipped
 * whole. A block of one tree starts at the key it starts at in the other,
 * so shared blocks meet. Blocks of @t are marked with @mark.
 */
static int compare(struct setter *x, struct blk *t, struct blk *p, uint32_t mark)
{
	struct fcur a = { .cur = t }, b = { .cur = p };
	int rc = 0;
	x->fresh.n = x->gone.n = 0;
	while (rc == 0 && (a.cur || b.cur)) {
		if (a.cur == b.cur) {
			a.cur->last_tree = mark;
			fc_next(&a);
			fc_next(&b);
			continue;
		}
		int c = !b.cur ? -1 : !a.cur ? 1 : bi_key_cmp(&a.cur->first, &b.cur->first);
		if (c == 0 && a.cur->level != b.cur->level)
			c = a.cur->level > b.cur->level ? -1 : 1;
		else if (c == 0 && a.cur->level)
			c = -1; /* two nodes at one key: open t's, then p's */
		if (c <= 0)
			rc = fc_step(x, &a, &x->fresh, mark);
		if (c >= 0 && rc == 0) /* c == 0: two leaves at one key, both move */
			rc = fc_step(x, &b, &x->gone, 0);
	}
	return rc;
}

/* --------------------------- the inode sets --------------------------- */

/* The earlier tree that last walked most of @t's top blocks (weighed by
 * their inodes), looking one level further down where a child is new;
 * 0 if none, else 1 + its index. */
static uint32_t similar_tree(const struct blk *t)
{
	struct cand {
		uint32_t tree;
		uint64_t w;
	} cand[8];
	size_t nc = 0, best = 0;
	const struct blk *one[1] = { t };
	const struct blk *const *v = t->level ? (const struct blk *const *)t->child : one;
	size_t n = t->level ? t->n : 1;
	if (t->last_tree)
		return t->last_tree;
	for (size_t i = 0; i < n; i++) {
		const struct blk *c = v[i];
		size_t m = 1;
		const struct blk *const *w = &v[i];
		if (!c->last_tree && c->level) {
			w = (const struct blk *const *)c->child;
			m = c->n;
		}
		for (size_t j = 0; j < m; j++) {
			uint32_t o = w[j]->last_tree;
			size_t k = 0;
			while (k < nc && cand[k].tree != o)
				k++;
			if (!o || (k == nc && nc == 8))
				continue;
			if (k == nc)
				cand[nc++] = (struct cand){ o, 0 };
			cand[k].w += w[j]->total + 1;
			if (cand[k].w > cand[best].w)
				best = k;
		}
	}
	return nc ? cand[best].tree : 0;
}

/* Every objectid of @t, ascending, marking its blocks with @mark. */
static int collect(struct setter *x, struct blk *t, uint32_t mark, struct idvec *out)
{
	struct fcur c = { .cur = t };
	int rc = 0;
	out->n = 0;
	while (rc == 0 && c.cur)
		rc = fc_step(x, &c, out, mark);
	return rc;
}

/* The largest objectid of base - del + add. del is inside the base, both
 * ascending: the base's top ids that del removes are del's top ids. */
static uint64_t delta_max(const struct bi_tree_ids *base, const uint64_t *del, size_t ndel,
			  const uint64_t *add, size_t nadd)
{
	size_t i = base->nids, j = ndel;
	while (i && j && base->ids[i - 1] == del[j - 1])
		i--, j--;
	uint64_t top = i ? base->ids[i - 1] : 0;
	return nadd && add[nadd - 1] > top ? add[nadd - 1] : top;
}

static struct bi_tree_ids *full_set(struct idvec *v)
{
	struct bi_tree_ids *set = calloc(1, sizeof(*set));
	if (!set)
		return NULL;
	*set = (struct bi_tree_ids){
		.ids = v->v, .nids = v->n, .n = v->n, .max_id = v->n ? v->v[v->n - 1] : 0, .refs = 1
	};
	if (!set->ids && !(set->ids = malloc(sizeof(uint64_t)))) {
		free(set);
		return NULL;
	}
	*v = (struct idvec){ 0 };
	return set;
}

/* base - del + add as a full set (del inside base, add outside it). */
static int expand_delta(struct setter *x, const struct bi_tree_ids *base, const struct idvec *del,
			const struct idvec *add, struct idvec *out)
{
	out->n = 0;
	int rc = idvec_reserve(x, out, base->nids + add->n);
	if (rc < 0)
		return rc;
	size_t k = minus_into(out->v + add->n, base->ids, base->nids, del->v, del->n);
	const uint64_t *a = out->v + add->n;
	size_t i = 0, j = 0;
	while (i < k || j < add->n)
		out->v[out->n++] =
			j == add->n || (i < k && a[i] < add->v[j]) ? a[i++] : add->v[j++];
	return 0;
}

/* Whether a difference of @d ids from the base should rather be a full
 * set of @own ids: when it is as large, or (a chain of snapshots drifting
 * away from its base, each one's difference composed from the last) once
 * it passes 1/64 of the tree, so the differences a thousand snapshots keep
 * stay small and so does the collision engine's work on them. */
static bool too_far(size_t d, uint64_t own)
{
	return d >= own || (d > 4096 && d > own / 64);
}

/* T's set from its comparison with P (x->fresh, x->gone): a difference
 * from P's base, or a full set when that is as large as T. */
static int set_from(struct setter *x, struct blk *t, const struct bi_tree_ids *pset,
		    struct bi_tree_ids **out)
{
	struct idvec d = { 0 }, a = { 0 }, del = { 0 }, add = { 0 }, full = { 0 };
	/* what only P holds (d) and only T holds (a) */
	int rc = minus_union(x, &d, x->gone.v, x->gone.n, x->fresh.v, x->fresh.n, NULL, 0, NULL, 0);
	if (rc == 0)
		rc = minus_union(x, &a, x->fresh.v, x->fresh.n, x->gone.v, x->gone.n, NULL, 0, NULL,
				 0);
	struct bi_tree_ids *base = pset->base ? pset->base : (struct bi_tree_ids *)pset;
	/* P = base - delP + addP and T = P - d + a, so (d inside P, a outside)
	 * T's del = (delP - a) + (d - addP), T's add = (addP - d) + (a - delP) */
	if (rc == 0 && pset->base) {
		rc = minus_union(x, &del, pset->del, pset->ndel, a.v, a.n, d.v, d.n, pset->ids,
				 pset->nids);
		if (rc == 0)
			rc = minus_union(x, &add, pset->ids, pset->nids, d.v, d.n, a.v, a.n,
					 pset->del, pset->ndel);
		free(d.v);
		free(a.v);
	} else if (rc == 0) {
		del = d;
		add = a;
	} else {
		free(d.v);
		free(a.v);
	}
	struct bi_tree_ids *set = NULL;
	if (rc == 0 && too_far(del.n + add.n, t->total)) {
		rc = expand_delta(x, base, &del, &add, &full);
		if (rc == 0 && !(set = full_set(&full)))
			rc = bi_msg(x->err, sizeof(x->err), -ENOMEM, "out of memory");
	} else if (rc == 0 && (set = calloc(1, sizeof(*set)))) {
		*set = (struct bi_tree_ids){ .base = base,
					     .ids = shrunk(&add),
					     .nids = add.n,
					     .del = shrunk(&del),
					     .ndel = del.n,
					     .n = base->n - del.n + add.n,
					     .refs = 1 };
		set->max_id = delta_max(base, set->del, set->ndel, set->ids, set->nids);
		base->refs++;
		add = del = (struct idvec){ 0 };
	} else if (rc == 0) {
		rc = bi_msg(x->err, sizeof(x->err), -ENOMEM, "out of memory");
	}
	free(del.v);
	free(add.v);
	free(full.v);
	*out = set;
	return rc;
}

static int remember_tree(struct setter *x, struct blk *root, struct bi_tree_ids *set)
{
	if (bi_grow((void **)&x->trees, &x->captrees, x->ntrees + 1, sizeof(*x->trees)))
		return bi_msg(x->err, sizeof(x->err), -ENOMEM, "out of memory");
	x->trees[x->ntrees++] = (struct tree){ root, set };
	set->refs++;
	return 0;
}

/* The inode set of tree @t, which becomes tree number x->ntrees. */
static int tree_set(struct setter *x, struct blk *t, struct bi_tree_ids **out)
{
	uint32_t mark = (uint32_t)x->ntrees + 1, p = similar_tree(t);
	int rc;
	*out = NULL;
	if (p) {
		rc = compare(x, t, x->trees[p - 1].root, mark);
		if (rc == 0)
			rc = set_from(x, t, x->trees[p - 1].set, out);
	} else {
		struct idvec all = { 0 };
		rc = collect(x, t, mark, &all);
		if (rc == 0 && !(*out = full_set(&all)))
			rc = bi_msg(x->err, sizeof(x->err), -ENOMEM, "out of memory");
		free(all.v);
	}
	if (rc == 0 && (rc = remember_tree(x, t, *out)) < 0) {
		bi_tree_ids_put(*out);
		*out = NULL;
	}
	return rc;
}

/* Subvolume entries of the subtree, in key order. */
static int subents_of(const struct blk *k, bi_subent_fn fn, void *ctx)
{
	int rc = 0;
	if (!k->subtotal)
		return 0;
	for (uint32_t i = 0; rc == 0 && !k->level && i < k->nsub; i++)
		rc = fn(ctx, &k->subents[i]);
	for (uint32_t i = 0; rc == 0 && k->level && i < k->n; i++)
		rc = subents_of(k->child[i], fn, ctx);
	return rc;
}

static int ids_push(struct btrfsimg_fs *fs, struct bi_tree_ids *set, size_t *cap, uint64_t id)
{
	if (bi_grow((void **)&set->ids, cap, set->nids + 1, sizeof(*set->ids)))
		return bi_err(fs, -ENOMEM, "out of memory for inode numbers");
	set->ids[set->nids++] = id;
	set->n = set->nids;
	set->max_id = id; /* the merged view is in key order */
	return 0;
}

static int merged_subent(struct btrfsimg_fs *fs, const struct bi_item *it, bi_subent_fn fn,
			 void *ctx)
{
	struct bi_cur c = bi_cur_make(it->data, it->size);
	uint16_t nlen = bi_u16(&c, DI_NAME_LEN);
	const uint8_t *name = bi_bytes(&c, DI_SIZE, nlen);
	if (c.bad || nlen == 0 || nlen > 255)
		return bi_err(fs, -EUCLEAN,
			      "corrupt dir index: dir %" PRIu64 " index %" PRIu64
			      ", name length %u, item size %u",
			      it->key.objectid, it->key.offset, nlen, it->size);
	struct bi_subent e = {
		it->key.objectid, it->key.offset, bi_le64(it->data + DI_LOCATION), nlen, { 0 }
	};
	memcpy(e.name, name, nlen);
	return fn ? fn(ctx, &e) : 0;
}

/*
 * A tree with a replayed log (an overlay, see replay.c) is not the sum of
 * its leaves: walk it item by item through the merged view instead. Such a
 * set is private (a log belongs to one tree).
 */
static int scan_merged(struct bi_scan *s, const struct bi_root *r, struct bi_tree_ids **out,
		       bi_subent_fn fn, void *ctx)
{
	struct bi_tree_ids *set = calloc(1, sizeof(*set));
	if (!set)
		return bi_err(s->fs, -ENOMEM, "out of memory");
	set->refs = 1;
	size_t cap = 0;
	bi_key min = { OBJ_FIRST_FREE, 0, 0 }, max = { OBJ_LAST_FREE, 255, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(s->fs, &it, r, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = 0;
		if (item.key.type == KT_INODE_ITEM)
			rc = ids_push(s->fs, set, &cap, item.key.objectid);
		else if (item.key.type == KT_DIR_INDEX && item.size > DI_LOCATION + 8 &&
			 item.data[DI_LOCATION + 8] == KT_ROOT_ITEM)
			rc = merged_subent(s->fs, &item, fn, ctx);
	}
	bi_iter_end(&it);
	if (rc < 0 || !out) {
		bi_tree_ids_put(set);
		return rc;
	}
	*out = set;
	return 0;
}

/* ----------------------------- the worker ----------------------------- */

static void *worker_main(void *arg)
{
	struct bi_scan *s = arg;
	struct worker *w = &s->w;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (w->head == w->n && !w->done)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->head == w->n)
			break;
		struct job j = w->q[w->head++];
		bool skip = w->rc != 0;
		pthread_mutex_unlock(&w->mu);
		int rc = skip ? 0 : tree_set(&s->set, j.root, j.out);
		pthread_mutex_lock(&w->mu);
		if (rc < 0 && !w->rc)
			w->rc = rc;
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

void bi_scan_start(struct bi_scan *s)
{
	struct worker *w = &s->w;
	if (w->on || pthread_mutex_init(&w->mu, NULL) != 0)
		return;
	if (pthread_cond_init(&w->cv, NULL) != 0) {
		pthread_mutex_destroy(&w->mu);
		return;
	}
	w->done = false;
	w->rc = 0;
	w->head = w->n = 0;
	if (pthread_create(&w->th, NULL, worker_main, s) != 0) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		return;
	}
	w->on = true;
}

/* The worker's first error, 0 if none (its message then goes to fs). */
static int worker_failed(struct bi_scan *s)
{
	pthread_mutex_lock(&s->w.mu);
	int rc = s->w.rc;
	pthread_mutex_unlock(&s->w.mu);
	return rc < 0 ? bi_err(s->fs, rc, "%s", s->set.err) : 0;
}

#define WAKE_BATCH 32

static int worker_queue(struct bi_scan *s, struct blk *t, struct bi_tree_ids **out)
{
	struct worker *w = &s->w;
	int rc = 0;
	*out = NULL;
	pthread_mutex_lock(&w->mu);
	if (bi_grow((void **)&w->q, &w->cap, w->n + 1, sizeof(*w->q)))
		rc = -ENOMEM;
	if (rc == 0) {
		w->q[w->n++] = (struct job){ t, out };
		/* wake a sleeping worker for a batch, not for each small tree
		 * (10,000 snapshots: 10,000 wake-ups); bi_scan_wait wakes it
		 * for the rest */
		if (w->n - w->head >= WAKE_BATCH)
			pthread_cond_signal(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return rc < 0 ? bi_err(s->fs, rc, "out of memory") : 0;
}

int bi_scan_wait(struct bi_scan *s)
{
	struct worker *w = &s->w;
	if (!w->on)
		return 0;
	pthread_mutex_lock(&w->mu);
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->th, NULL);
	int rc = worker_failed(s);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	w->on = false;
	return rc;
}

int bi_scan_tree(struct bi_scan *s, const struct bi_root *r, struct bi_tree_ids **out,
		 bi_subent_fn fn, void *ctx)
{
	int rc = s->w.on ? worker_failed(s) : 0;
	if (rc < 0)
		return rc;
	if (bi_overlay_for(s->fs, r->id))
		return scan_merged(s, r, out, fn, ctx);
	struct blk *t;
	struct bi_expect e = { r->id, r->generation, r->level, NULL };
	rc = get_blk(s, r->id, r->bytenr, &e, &t);
	if (rc == 0 && fn)
		rc = subents_of(t, fn, ctx);
	if (rc == 0 && out && s->w.on)
		return worker_queue(s, t, out);
	if (rc == 0 && out && (rc = tree_set(&s->set, t, out)) < 0)
		rc = bi_err(s->fs, rc, "%s", s->set.err);
	return rc;
}
