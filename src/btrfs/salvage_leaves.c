// SPDX-License-Identifier: MIT
/*
 * A subvolume tree whose root node is lost on every copy and whose extent
 * tree cannot say which blocks below it were live (a new filesystem's
 * first commits wrote over both), rebuilt from the leaves a scan of the
 * devices finds under its owner and fsid (bi_salvage_leaves, salvage.h).
 *
 * With no extent record, generations and keys decide. Leaves are taken
 * newest generation first; one whose key range overlaps a leaf already
 * taken is set aside, so a copy older than a surviving newer one covering
 * the same keys is never used. Two overlapping leaves of one generation (a
 * block written out and changed again in one transaction) are told apart
 * by what names them: a root item of a surviving root-tree leaf (naming
 * the leaf, or a node that names it) first, then the free space tree of
 * the tree's generation (the copy kept is allocated, the other was freed
 * at the commit), then the newest surviving node; named alike and holding
 * different items, neither is used and
 * their keys are said lost (as are those of any older leaf over them). A leaf newer than the tree's
 * generation (its root item's) is not the tree's at that root: set aside,
 * counted (a forgery, or a later filesystem of the same fsid).
 *
 * What is not certain is said. A leaf taken is known live as of the
 * generation of the newest surviving node or root item that names it
 * (bytenr and generation), or its own when none does; when that is older
 * than the tree's, it may hold items the tree changed later.
 * bi_salvage_as_of gives that generation per inode, for the records front
 * ends mark. Between two leaves no node names one after the other, keys
 * may be lost: an inode whose items reach such an edge may miss extents or
 * xattrs, and bi_salvage_cut names it so that it is not read short.
 *
 * The leaves taken become the children of a node synthesized at the
 * root's address, of level 1 (the root item's level overridden through
 * fs->salvage_roots); more than a node's worth of leaves, of as many
 * levels as they take, over nodes synthesized at addresses no chunk maps
 * (SYNTH_BASE down), which only the block cache, where they are pinned,
 * holds. Which leaves are taken is the rule of salvage_decide.c, in
 * O(n log n) of the leaves: no count of them is refused.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/salvage.h"
#include "btrfs/salvage_decide.h"
#include "btrfs/salvage_scan.h"

#include "base/err.h"
#include "base/grow.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/block.h"
#include "btrfs/chunk.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"

/* The synthesized nodes' addresses (all but the root's) count down from
 * here (aligned to the node size): far above any chunk mkfs or the kernel
 * makes; one that a chunk maps is refused. */
#define SYNTH_BASE ((uint64_t)1 << 62)

/* free space tree items (btrfs_tree.h): per block group an INFO, then its
 * free ranges as EXTENT items (start, type, length) or BITMAP items (one
 * bit per sector, set: free) */
#define KT_FREE_SPACE_INFO 198
#define KT_FREE_SPACE_EXTENT 199
#define KT_FREE_SPACE_BITMAP 200
/* A block group searched for at most this far below an address. */
#define FST_BG_MAX ((uint64_t)16 << 30)
/* Free space tree items weighed at most per address. */
#define FST_ITEMS_MAX (1u << 20)

struct cand {
	const struct bi_sv_blk *b;	/* a copy that read again */
	bi_key first, last;
	uint64_t as_of;			/* newest generation a surviving node names it in */
	uint64_t next[4];		/* leaves named right after it by a node */
	bool rooted;			/* by a node a root item names (or by a root item) */
	bool allocated;			/* where the free space tree has it allocated */
};

/* A root item of the tree in a root-tree leaf the first scan found: the
 * root (bytenr, generation) it names, as of that leaf's generation. */
struct named_root {
	uint64_t bytenr, generation, as_of;
};

/* A key range taken (a leaf) or blocked (keys no surviving leaf decides). */
struct range {
	bi_key first, last;
	const struct cand *c;		/* NULL: blocked */
};

struct leaves {
	struct bi_sv_scan *s;	/* fs->tree_scan; this tree's blocks [lo, hi) */
	size_t lo, hi;
	uint64_t tree, generation;
	uint8_t *buf;
	uint32_t nodesize;
	struct cand *c;
	size_t nc, ccap;
	struct range *r;
	size_t nr;
	size_t newer, stale, same, ambiguous, named;
	struct named_root *roots;
	size_t nroots, roots_cap;
};

/* The first and last key of the block in @l->buf. */
static void block_keys(const struct leaves *l, bi_key *first, bi_key *last)
{
	uint32_t n = bi_le32(l->buf + HDR_NRITEMS);
	size_t step = l->buf[HDR_LEVEL] ? KP_SIZE : ITEM_SIZE;
	bi_key_read(l->buf + HDR_SIZE, first);
	bi_key_read(l->buf + HDR_SIZE + (size_t)(n - 1) * step, last);
}

/* Each leaf of the scan once (its copies share bytenr and generation):
 * the first copy that reads again the same. */
static int gather_leaves(struct btrfsimg_fs *fs, struct leaves *l)
{
	const struct bi_sv_blk *prev = NULL;
	for (size_t i = l->lo; i < l->hi; i++) {
		const struct bi_sv_blk *b = &l->s->blk[i];
		if (b->level || !b->nritems)
			continue;
		if (b->generation > l->generation) {
			l->newer++;
			continue;
		}
		if (prev && prev->bytenr == b->bytenr && prev->generation == b->generation)
			continue;
		if (bi_sv_scan_reread(fs, l->s, b, l->buf) < 0)
			continue; /* another copy may read */
		prev = b;
		if (bi_grow((void **)&l->c, &l->ccap, l->nc + 1, sizeof(*l->c)))
			return bi_err(fs, -ENOMEM, "salvage: out of memory");
		struct cand *c = &l->c[l->nc++];
		*c = (struct cand){ .b = b, .as_of = 0 };
		block_keys(l, &c->first, &c->last);
	}
	return 0;
}

static int cand_by_block(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;
	if (a->b->bytenr != b->b->bytenr)
		return a->b->bytenr < b->b->bytenr ? -1 : 1;
	return a->b->generation < b->b->generation ? -1 : a->b->generation > b->b->generation;
}

/* The root items of tree @l->tree in the root-tree leaves the first scan
 * found (it keeps them all): which root each generation of the root tree
 * named, the strongest evidence left when the newest root is lost. */
static int gather_roots(struct btrfsimg_fs *fs, struct leaves *l)
{
	size_t lo = 0, hi = 0;
	if (fs->scan)
		bi_salvage_owner_range(fs->scan, fs->salvage_fsidx, OBJ_ROOT_TREE, &lo, &hi);
	for (size_t i = lo; i < hi; i++) {
		const struct bi_sv_blk *b = &fs->scan->blk[i];
		if (b->level || bi_sv_scan_reread(fs, fs->scan, b, l->buf) < 0)
			continue;
		struct bi_cur c = bi_cur_make(l->buf, l->nodesize);
		for (uint32_t s = 0; s < b->nritems; s++) {
			size_t it = HDR_SIZE + (size_t)s * ITEM_SIZE;
			if (bi_u64(&c, it) != l->tree || bi_u8(&c, it + 8) != KT_ROOT_ITEM)
				continue;
			size_t at = HDR_SIZE + bi_u32(&c, it + ITEM_OFFSET);
			if (bi_u32(&c, it + ITEM_DSIZE) < RI_BYTENR + 8 || !bi_cur_check(&c, at, RI_BYTENR + 8))
				continue;
			if (bi_grow((void **)&l->roots, &l->roots_cap, l->nroots + 1, sizeof(*l->roots)))
				return bi_err(fs, -ENOMEM, "salvage: out of memory");
			l->roots[l->nroots++] = (struct named_root){ bi_u64(&c, at + RI_BYTENR),
				bi_u64(&c, at + RI_GENERATION), b->generation };
		}
	}
	return 0;
}

/* The newest root-tree generation that names block @bytenr of generation
 * @gen as the tree's root; 0 if none. */
static uint64_t root_named(const struct leaves *l, uint64_t bytenr, uint64_t gen)
{
	uint64_t as_of = 0;
	for (size_t i = 0; i < l->nroots; i++)
		if (l->roots[i].bytenr == bytenr && l->roots[i].generation == gen &&
		    l->roots[i].as_of > as_of)
			as_of = l->roots[i].as_of;
	return as_of;
}

/* Evidence that @c was live as of @gen (@rooted: through a root item):
 * kept when stronger than what it had. */
static void evidence(struct cand *c, uint64_t gen, bool rooted)
{
	if (rooted > c->rooted || (rooted == c->rooted && gen > c->as_of)) {
		c->as_of = gen;
		c->rooted = rooted;
	}
}

/* A node names @next right after @c: nothing was between them then. */
static void note_next(struct cand *c, uint64_t next)
{
	for (size_t i = 0; i < sizeof(c->next) / sizeof(c->next[0]); i++)
		if (!c->next[i] || c->next[i] == next) {
			c->next[i] = next;
			return;
		}
}

static bool named_next(const struct cand *c, const struct cand *next)
{
	for (size_t i = 0; i < sizeof(c->next) / sizeof(c->next[0]); i++)
		if (c->next[i] == next->b->bytenr)
			return true;
	return false;
}

/* The nodes found (level 1, no newer than the tree) name leaves by bytenr
 * and generation: each named leaf is known live as of the node's. */
static void name_leaves(struct btrfsimg_fs *fs, struct leaves *l)
{
	if (!l->nc)
		return; /* no leaf: nothing to name (and no array to sort) */
	qsort(l->c, l->nc, sizeof(*l->c), cand_by_block);
	for (size_t i = 0; i < l->nc; i++) { /* a root that was a leaf */
		uint64_t g = root_named(l, l->c[i].b->bytenr, l->c[i].b->generation);
		if (g)
			evidence(&l->c[i], g, true);
	}
	for (size_t i = l->lo; i < l->hi; i++) {
		const struct bi_sv_blk *b = &l->s->blk[i];
		if (b->level != 1 || b->generation > l->generation ||
		    bi_sv_scan_reread(fs, l->s, b, l->buf) < 0)
			continue;
		uint64_t rooted = root_named(l, b->bytenr, b->generation);
		for (uint32_t k = 0; k < b->nritems; k++) {
			const uint8_t *kp = l->buf + HDR_SIZE + (size_t)k * KP_SIZE;
			struct bi_sv_blk key = { .bytenr = bi_le64(kp + KP_BLOCKPTR),
						 .generation = bi_le64(kp + KP_GENERATION) };
			struct cand want = { .b = &key };
			struct cand *c = bsearch(&want, l->c, l->nc, sizeof(*l->c), cand_by_block);
			if (c)
				evidence(c, rooted ? rooted : b->generation, rooted != 0);
			if (c && k + 1 < b->nritems)
				note_next(c, bi_le64(kp + KP_SIZE + KP_BLOCKPTR));
		}
	}
}

/* ------------------------------------------------ the free space tree */

/* Whether @bytenr is allocated as of the free space tree of @fst: 1, 0 if
 * free, -1 if it does not say (no block group item covers it). A copy of a
 * leaf written twice in the last transaction (the kernel COWs a block
 * again once it was written out) is freed at the commit; the one the tree
 * kept is allocated. */
static int fst_allocated(struct btrfsimg_fs *fs, const struct bi_root *fst, uint64_t bytenr,
			 uint32_t sectorsize)
{
	bi_key min = { 0, 0, 0 }, max = { bytenr, UINT8_MAX, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int covered = -1, free_here = 0, rc;
	unsigned n = 0;
	/* the block group's INFO and its free ranges all start at or before
	 * @bytenr: their keys are below (bytenr, max, max), and no block group
	 * the kernel makes is larger than 10 GiB; the last INFO before it is
	 * its block group's */
	min.objectid = bytenr > FST_BG_MAX ? bytenr - FST_BG_MAX : 0;
	rc = bi_iter_start(fs, &it, fst, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0 && ++n <= FST_ITEMS_MAX) {
		rc = 0;
		uint64_t start = item.key.objectid, len = item.key.offset;
		bool in = bytenr >= start && bytenr - start < len;
		if (item.key.type == KT_FREE_SPACE_INFO) {
			covered = in ? 1 : -1;
			free_here = 0;
		} else if (in && item.key.type == KT_FREE_SPACE_EXTENT) {
			free_here = 1;
		} else if (in && item.key.type == KT_FREE_SPACE_BITMAP && sectorsize) {
			uint64_t bit = (bytenr - start) / sectorsize;
			if (bit / 8 < item.size && (item.data[bit / 8] >> (bit % 8)) & 1)
				free_here = 1;
		}
	}
	bi_iter_end(&it);
	if (rc < 0 || n > FST_ITEMS_MAX || covered < 0)
		return -1;
	return !free_here;
}

/* Each candidate of the tree's last generation marked where the free space
 * tree of that generation or a newer one has it allocated (a copy freed
 * at that commit and allocated again since was written over, so it is no
 * candidate); nothing when there is none. */
static void mark_allocated(struct btrfsimg_fs *fs, struct leaves *l)
{
	struct bi_root fst;
	char keep[sizeof(fs->err)];
	snprintf(keep, sizeof(keep), "%s", fs->err);
	if (bi_root_find(fs, OBJ_FREE_SPACE_TREE, &fst) == 0 && fst.generation >= l->generation)
		for (size_t i = 0; i < l->nc; i++)
			if (l->c[i].b->generation == l->generation)
				l->c[i].allocated = fst_allocated(fs, &fst, l->c[i].b->bytenr,
								  fs->sectorsize) == 1;
	snprintf(fs->err, sizeof(fs->err), "%s", keep); /* a lost free space tree says nothing */
}

/* Newest generation first; of one generation, the one a newer node names,
 * the one the free space tree has allocated. */
static int cand_by_age(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;
	if (a->b->generation != b->b->generation)
		return a->b->generation > b->b->generation ? -1 : 1;
	if (a->rooted != b->rooted)
		return a->rooted ? -1 : 1;
	if (a->allocated != b->allocated)
		return a->allocated ? -1 : 1;
	if (a->as_of != b->as_of)
		return a->as_of > b->as_of ? -1 : 1;
	int k = bi_key_cmp(&a->first, &b->first);
	if (k)
		return k;
	/* one order however qsort goes: which of two twins of one first key
	 * comes first decides only which of two alike copies is read and
	 * what is counted */
	return a->b->bytenr < b->b->bytenr ? -1 : a->b->bytenr > b->b->bytenr;
}

/* Of one rank: what cand_by_age weighs before the keys. */
static bool same_age(const struct cand *a, const struct cand *b)
{
	return a->b->generation == b->b->generation && a->rooted == b->rooted &&
	       a->allocated == b->allocated && a->as_of == b->as_of;
}

/* Whether leaves @a and @b hold the same items (both reread). */
static int same_items(struct btrfsimg_fs *fs, struct leaves *l, const struct cand *a,
		      const struct cand *b, bool *same)
{
	uint8_t *other = malloc(l->nodesize);
	int rc = other ? 0 : bi_err(fs, -ENOMEM, "salvage: out of memory");
	if (rc == 0)
		rc = bi_sv_scan_reread(fs, l->s, a->b, l->buf);
	if (rc == 0)
		rc = bi_sv_scan_reread(fs, l->s, b->b, other);
	*same = rc == 0 && memcmp(l->buf + HDR_NRITEMS, other + HDR_NRITEMS, 4) == 0 &&
		memcmp(l->buf + HDR_SIZE, other + HDR_SIZE, l->nodesize - HDR_SIZE) == 0;
	free(other);
	return rc == -ENOMEM ? rc : 0;
}

/* A node of @level at @bytenr of tree @r, its header bytes (fsid, chunk
 * tree uuid) from @hdr, with room for @n pointers filled by the caller. */
static uint8_t *node_new(const struct leaves *l, const struct bi_root *r, const uint8_t *hdr,
			 uint64_t bytenr, uint8_t level, size_t n)
{
	uint8_t *buf = calloc(1, l->nodesize);
	if (!buf)
		return NULL;
	memcpy(buf, hdr, HDR_SIZE);
	bi_put_le64(buf + HDR_BYTENR, bytenr);
	bi_put_le64(buf + HDR_GENERATION, r->generation);
	bi_put_le64(buf + HDR_OWNER, r->id);
	bi_put_le32(buf + HDR_NRITEMS, (uint32_t)n);
	buf[HDR_LEVEL] = level;
	return buf;
}

static void ptr_put(uint8_t *buf, size_t slot, const bi_key *k, uint64_t bytenr, uint64_t gen)
{
	uint8_t *kp = buf + HDR_SIZE + slot * KP_SIZE;
	bi_put_le64(kp, k->objectid);
	kp[8] = k->type;
	bi_put_le64(kp + 9, k->offset);
	bi_put_le64(kp + KP_BLOCKPTR, bytenr);
	bi_put_le64(kp + KP_GENERATION, gen);
}

/* The address of synthesized node @i (counted from the first level-1
 * node, level by level), or 0 where a chunk maps it. */
static uint64_t synth_addr(struct btrfsimg_fs *fs, uint32_t nodesize, size_t i)
{
	uint64_t a = SYNTH_BASE - (uint64_t)(i + 1) * nodesize;
	const struct bi_chunk *c = bi_chunk_lookup(fs->chunks, a);
	return c && a >= c->logical && a - c->logical < c->length ? 0 : a;
}

/* What a synthesized node names: a child's first key and where it is. */
struct ptr {
	bi_key first;
	uint64_t bytenr, generation;
};

static uint8_t *node_of(const struct leaves *l, const struct bi_root *r, uint64_t bytenr,
			uint8_t level, const struct ptr *kids, size_t n)
{
	uint8_t *buf = node_new(l, r, l->buf, bytenr, level, n);
	for (size_t j = 0; buf && j < n; j++)
		ptr_put(buf, j, &kids[j].first, kids[j].bytenr, kids[j].generation);
	return buf;
}

/* Nodes of @level over @kids[0..*@n), each as full as the others, pinned
 * at synth_addr from *@made on; their pointers replace @kids in place
 * (node k is written once its children, from k * per on, are read), their
 * count in *@n. */
static int synth_layer(struct btrfsimg_fs *fs, const struct bi_root *r, const struct leaves *l,
		       struct ptr *kids, size_t *n, uint8_t level, size_t *made)
{
	size_t max = (l->nodesize - HDR_SIZE) / KP_SIZE;
	size_t nodes = (*n + max - 1) / max, per = (*n + nodes - 1) / nodes;
	nodes = (*n + per - 1) / per; /* none left empty */
	for (size_t k = 0; k < nodes; k++, (*made)++) {
		size_t at = k * per, here = *n - at < per ? *n - at : per;
		uint64_t a = synth_addr(fs, l->nodesize, *made);
		if (!a)
			return bi_err(fs, -EEXIST, "salvage: a chunk maps logical %" PRIu64
				      ", where a node would be synthesized",
				      SYNTH_BASE - (uint64_t)(*made + 1) * l->nodesize);
		uint8_t *buf = node_of(l, r, a, level, kids + at, here);
		if (!buf)
			return bi_err(fs, -ENOMEM, "salvage: out of memory");
		int rc = bi_block_pin_synthetic(fs, buf, l->nodesize);
		if (rc < 0)
			return rc;
		kids[k] = (struct ptr){ kids[at].first, a, r->generation };
	}
	*n = nodes;
	return 0;
}

/* The tree that was at @r over the @n leaves taken: a node at its address
 * over them, or, more than a node holds, over as many levels of nodes
 * pinned at synth_addr as it takes (each level's nodes as full as each
 * other). Its level in *level. Beside the nodes pinned, a pointer per leaf
 * (41 bytes). 0, or a negative errno (the message on @fs). */
static int synthesize(struct btrfsimg_fs *fs, const struct bi_root *r, struct leaves *l,
		      size_t n, uint8_t *level)
{
	size_t max = (l->nodesize - HDR_SIZE) / KP_SIZE, made = 0, k = 0;
	const struct cand *first = NULL;
	for (size_t i = 0; i < l->nr && !first; i++)
		first = l->r[i].c;
	if (bi_sv_scan_reread(fs, l->s, first->b, l->buf) < 0) /* its header for the nodes' */
		return bi_err(fs, -EIO, "salvage: tree %" PRIu64 ": leaf at logical %" PRIu64
			      " (generation %" PRIu64 ") no longer reads as the scan found it",
			      r->id, first->b->bytenr, first->b->generation);
	struct ptr *kids = malloc(n * sizeof(*kids));
	if (!kids)
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	for (size_t i = 0; i < l->nr; i++)
		if (l->r[i].c)
			kids[k++] = (struct ptr){ l->r[i].c->first, l->r[i].c->b->bytenr,
						  l->r[i].c->b->generation };
	int rc = 0;
	for (*level = 1; rc == 0 && n > max; (*level)++)
		rc = *level + 1 >= MAX_LEVEL
			? bi_err(fs, -E2BIG, "salvage: tree %" PRIu64 ": %zu leaves found by "
				 "scanning, more than %d levels of nodes hold", r->id, k, MAX_LEVEL)
			: synth_layer(fs, r, l, kids, &n, *level, &made);
	uint8_t *root = rc == 0 ? node_of(l, r, r->bytenr, *level, kids, n) : NULL;
	free(kids);
	if (rc == 0 && !root)
		rc = bi_err(fs, -ENOMEM, "salvage: out of memory");
	return rc == 0 ? bi_block_pin_synthetic(fs, root, l->nodesize) : rc;
}

static int asof_order(const void *pa, const void *pb)
{
	const struct bi_sv_asof *a = pa, *b = pb;
	if (a->tree != b->tree)
		return a->tree < b->tree ? -1 : 1;
	return (a->first > b->first) - (a->first < b->first);
}

static int cut_order(const void *pa, const void *pb)
{
	const struct bi_sv_cut *a = pa, *b = pb;
	if (a->tree != b->tree)
		return a->tree < b->tree ? -1 : 1;
	return (a->objectid > b->objectid) - (a->objectid < b->objectid);
}

/* The marks sorted by (tree, first), each with the furthest last of its
 * tree up to it: bi_salvage_as_of, asked once per record, searches them
 * instead of reading every one (a tree of 46,056 leaves made that a third
 * of a walk). */
static void index_as_of(struct btrfsimg_fs *fs)
{
	struct bi_sv_asof *a = fs->salvage_asof;
	if (fs->nsalvage_asof > 1)
		qsort(a, fs->nsalvage_asof, sizeof(*a), asof_order);
	for (size_t i = 0; i < fs->nsalvage_asof; i++)
		a[i].reach = i && a[i - 1].tree == a[i].tree && a[i - 1].reach > a[i].last
				     ? a[i - 1].reach : a[i].last;
}

/* What the walk marks: per leaf taken, its keys and the generation it is
 * known live as of (0: the tree's own, certain). */
static int keep_as_of(struct btrfsimg_fs *fs, const struct bi_root *r, const struct leaves *l,
		      uint64_t *oldest)
{
	*oldest = r->generation;
	for (size_t i = 0; i < l->nr; i++)
		if (l->r[i].c && l->r[i].c->as_of < *oldest)
			*oldest = l->r[i].c->as_of > l->r[i].c->b->generation
					  ? l->r[i].c->as_of : l->r[i].c->b->generation;
	for (size_t i = 0; i < l->nr; i++) {
		const struct cand *c = l->r[i].c;
		if (!c)
			continue;
		if (bi_grow((void **)&fs->salvage_asof, &fs->salvage_asof_cap,
			    fs->nsalvage_asof + 1, sizeof(*fs->salvage_asof)))
			return bi_err(fs, -ENOMEM, "salvage: out of memory");
		uint64_t as_of = c->as_of > c->b->generation ? c->as_of : c->b->generation;
		if (as_of >= r->generation)
			continue; /* live at the tree's own generation: certain */
		fs->salvage_asof[fs->nsalvage_asof++] = (struct bi_sv_asof){
			r->id, c->first.objectid, c->last.objectid, as_of, 0 };
	}
	index_as_of(fs);
	return 0;
}

static int cut(struct btrfsimg_fs *fs, uint64_t tree, uint64_t objectid)
{
	if (bi_grow((void **)&fs->salvage_cut, &fs->salvage_cut_cap, fs->nsalvage_cut + 1,
		    sizeof(*fs->salvage_cut)))
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	fs->salvage_cut[fs->nsalvage_cut++] = (struct bi_sv_cut){ tree, objectid };
	return 0;
}

/* Between two leaves taken that no node names one after the other, keys
 * may be lost: the inode whose items the first ends with, and the one the
 * second begins with unless at its INODE_ITEM (the first key an inode
 * has), may miss items there (before the first leaf and after the last
 * too). Kept for bi_salvage_cut. */
static int keep_cuts(struct btrfsimg_fs *fs, const struct bi_root *r, const struct leaves *l,
		     size_t *ncut)
{
	const struct cand *prev = NULL;
	int rc = 0;
	*ncut = fs->nsalvage_cut;
	for (size_t i = 0; i <= l->nr && rc == 0; i++) {
		const struct cand *c = i < l->nr ? l->r[i].c : NULL;
		if (i < l->nr && !c)
			continue;
		if (prev && c && named_next(prev, c)) {
			prev = c;
			continue;
		}
		if (prev)
			rc = cut(fs, r->id, prev->last.objectid);
		if (rc == 0 && c && c->first.type > KT_INODE_ITEM)
			rc = cut(fs, r->id, c->first.objectid);
		prev = c;
	}
	*ncut = fs->nsalvage_cut - *ncut;
	if (fs->nsalvage_cut > 1) /* for bi_salvage_cut's search */
		qsort(fs->salvage_cut, fs->nsalvage_cut, sizeof(*fs->salvage_cut), cut_order);
	return rc;
}

/* The root read instead of the root item's: the synthesized node. */
static int override_root(struct btrfsimg_fs *fs, const struct bi_root *r, uint8_t level)
{
	struct bi_root n = *r;
	n.level = level;
	for (size_t i = 0; i < fs->nsalvage_roots; i++)
		if (fs->salvage_roots[i].id == r->id) {
			fs->salvage_roots[i] = n;
			return 0;
		}
	struct bi_root *v = realloc(fs->salvage_roots, (fs->nsalvage_roots + 1) * sizeof(*v));
	if (!v)
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	fs->salvage_roots = v;
	v[fs->nsalvage_roots++] = n;
	return 0;
}

struct weigh_ctx {
	struct btrfsimg_fs *fs;
	struct leaves *l;
};

static int twins_alike(void *ctx, size_t a, size_t b, bool *same)
{
	struct weigh_ctx *w = ctx;
	return same_items(w->fs, w->l, &w->l->c[a], &w->l->c[b], same);
}

/* The candidates, in age order, weighed (salvage_decide.h): the key
 * ranges decided in @l->r. */
static int weigh(struct btrfsimg_fs *fs, struct leaves *l)
{
	struct bi_sv_span *sp = l->nc ? malloc(l->nc * sizeof(*sp)) : NULL;
	struct bi_sv_kept *kept = NULL;
	struct bi_sv_tally t;
	struct weigh_ctx w = { fs, l };
	size_t nk = 0;
	if (l->nc && !sp)
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	for (size_t i = 0; i < l->nc; i++)
		sp[i] = (struct bi_sv_span){ l->c[i].first, l->c[i].last,
			!i ? 0 : sp[i - 1].rank + !same_age(&l->c[i - 1], &l->c[i]) };
	int rc = bi_sv_decide(sp, l->nc, twins_alike, &w, &kept, &nk, &t);
	free(sp);
	l->r = rc == 0 && nk ? malloc(nk * sizeof(*l->r)) : NULL;
	if (rc == 0 && nk && !l->r)
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < nk; i++)
		l->r[i] = (struct range){ kept[i].first, kept[i].last,
			kept[i].leaf == BI_SV_BLOCKED ? NULL : &l->c[kept[i].leaf] };
	free(kept);
	if (rc == -ENOMEM)
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	if (rc == -EINVAL) /* cand_by_age is the order weighed: not reached */
		return bi_err(fs, -EINVAL, "salvage: tree %" PRIu64 ": leaves weighed out of "
			      "order", l->tree);
	if (rc < 0)
		return rc;
	l->nr = nk;
	l->stale = t.stale;
	l->same = t.same;
	l->ambiguous = t.ambiguous;
	return 0;
}

static int assemble(struct btrfsimg_fs *fs, const struct bi_root *r, struct leaves *l,
		    size_t *taken)
{
	int rc = gather_roots(fs, l);
	if (rc == 0)
		rc = gather_leaves(fs, l);
	if (rc < 0)
		return rc;
	name_leaves(fs, l);
	mark_allocated(fs, l);
	if (l->nc > 1)
		qsort(l->c, l->nc, sizeof(*l->c), cand_by_age);
	rc = weigh(fs, l);
	*taken = 0;
	for (size_t i = 0; i < l->nr; i++) {
		*taken += l->r[i].c != NULL;
		l->named += l->r[i].c && l->r[i].c->as_of;
	}
	if (rc == 0 && !*taken)
		rc = bi_err(fs, -ENOENT, "no leaf of it found by scanning (%zu newer than "
			    "generation %" PRIu64 ")", l->newer, r->generation);
	return rc;
}

int bi_salvage_leaves(struct btrfsimg_fs *fs, const struct bi_root *r, const char *why,
		      const char *no_records)
{
	struct leaves l = { .tree = r->id, .generation = r->generation,
			    .nodesize = fs->nodesize };
	size_t taken = 0;
	uint64_t oldest = 0;
	l.buf = malloc(fs->nodesize);
	int rc = l.buf ? 0 : bi_err(fs, -ENOMEM, "salvage: out of memory");
	if (rc == 0 && !fs->tree_scan) /* one scan for every tree rebuilt */
		rc = bi_sv_scan_trees(fs, &fs->tree_scan);
	l.s = fs->tree_scan;
	if (rc == 0)
		bi_salvage_owner_range(l.s, 0, r->id, &l.lo, &l.hi);
	if (rc == 0)
		rc = assemble(fs, r, &l, &taken);
	uint8_t level = 1;
	if (rc == 0)
		rc = synthesize(fs, r, &l, taken, &level);
	if (rc == 0)
		rc = override_root(fs, r, level);
	if (rc == 0)
		rc = keep_as_of(fs, r, &l, &oldest);
	size_t ncut = 0;
	if (rc == 0)
		rc = keep_cuts(fs, r, &l, &ncut);
	if (rc == 0)
		bi_damage(fs,
			  "tree %" PRIu64 ": root node at logical %" PRIu64 " overwritten (%s) and "
			  "no extent record of its blocks (%s): rebuilt from %zu leaves found by "
			  "scanning, the newest of each key range; %zu named by a surviving node, "
			  "none by the lost root: their items are as of generation %" PRIu64
			  " at the oldest, the tree's is %" PRIu64 " (marked as_of_generation); "
			  "%zu older copies of keys a newer leaf holds, %zu copies alike, %zu "
			  "newer than the tree not used; %zu key ranges two leaves of one "
			  "generation disagree on, lost; %" PRIu64 " blocks past the scan's limit; "
			  "%zu inodes whose items may run into lost keys not read",
			  r->id, r->bytenr, why, no_records, taken, l.named, oldest, r->generation,
			  l.stale, l.same, l.newer, l.ambiguous, l.s ? l.s->dropped : 0, ncut);
	free(l.c);
	free(l.r);
	free(l.roots);
	free(l.buf);
	return rc;
}

bool bi_salvage_cut(const struct btrfsimg_fs *fs, uint64_t tree, uint64_t objectid)
{
	struct bi_sv_cut want = { tree, objectid };
	return fs->nsalvage_cut && bsearch(&want, fs->salvage_cut, fs->nsalvage_cut,
					   sizeof(want), cut_order) != NULL;
}

uint64_t bi_salvage_as_of(const struct btrfsimg_fs *fs, uint64_t tree, uint64_t objectid)
{
	const struct bi_sv_asof *a = fs->salvage_asof;
	size_t lo = 0, hi = fs->nsalvage_asof;
	while (lo < hi) { /* past the last entry at or before (tree, objectid) */
		size_t mid = lo + (hi - lo) / 2;
		if (a[mid].tree < tree || (a[mid].tree == tree && a[mid].first <= objectid))
			lo = mid + 1;
		else
			hi = mid;
	}
	uint64_t as_of = 0;
	/* back while an entry at or before can still reach @objectid */
	for (size_t i = lo; i-- > 0 && a[i].tree == tree && a[i].reach >= objectid;)
		if (a[i].last >= objectid && (!as_of || a[i].as_of < as_of))
			as_of = a[i].as_of;
	return as_of;
}
