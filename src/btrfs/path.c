/* SPDX-License-Identifier: MIT */
/*
 * The one descent of a tree: a path of verified blocks, root to leaf, and
 * its step to the next leaf; what it asks the kernel to read ahead; the
 * last lookups' paths, from which the next lookup may start.
 *
 * Every child is read against what its parent pointer expects (level,
 * generation, first key), so a block reached twice (a loop or a shared
 * subtree inside one tree) fails a check instead of looping: each child's
 * first key must equal its pointer's key, and the walks over the path
 * require keys to increase strictly across leaves. The work is bounded by
 * the number of distinct blocks.
 *
 * Apart from the blocks (block.c) and the cache (cache.c), which know one
 * block at a time, and from what is walked (iter.c: items with the log
 * overlay merged in; leafwalk.c: leaf addresses for other readers), which
 * share this one descent and read-ahead instead of each having its own.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/path.h"

#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/block.h"
#include "btrfs/cache.h"
#include "btrfs/chunk.h"

/* -------------------------------------------------------- read-ahead queue
 *
 * In a RING walk of more than one level-1 node the requests go to a thread
 * of their own: asking the kernel to read ahead blocks the asker while the
 * device's queue is full (a cold walk spent two fifths of its time there),
 * and the walk has better things to do meanwhile. That thread only maps
 * addresses (the chunk map, read-only after the open) and calls fadvise.
 * A STREAM walk asks inline: its reader needs the other core. */

#define QUEUE_MAX 1024

struct bi_ra_queue {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	bool quit;
	size_t head, n;
	struct {
		uint64_t start, len;
	} q[QUEUE_MAX];
	struct btrfsimg_fs *fs;
};

static void *queue_run(void *arg)
{
	struct bi_ra_queue *h = arg;
	pthread_mutex_lock(&h->mu);
	for (;;) {
		while (!h->quit && !h->n)
			pthread_cond_wait(&h->cv, &h->mu);
		if (h->quit)
			break;
		uint64_t start = h->q[h->head].start, len = h->q[h->head].len;
		h->head = (h->head + 1) % QUEUE_MAX;
		h->n--;
		pthread_mutex_unlock(&h->mu);
		bi_prefetch(h->fs, start, len);
		pthread_mutex_lock(&h->mu);
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

static void queue_start(struct bi_path *p)
{
	struct bi_ra_queue *h = calloc(1, sizeof(*h));
	if (!h)
		return; /* asked inline */
	h->fs = p->fs;
	if (pthread_mutex_init(&h->mu, NULL) != 0) {
		free(h);
		return;
	}
	pthread_cond_init(&h->cv, NULL);
	if (pthread_create(&h->thread, NULL, queue_run, h) != 0) {
		pthread_cond_destroy(&h->cv);
		pthread_mutex_destroy(&h->mu);
		free(h);
		return;
	}
	p->queue = h;
}

/* Requests not yet made are dropped: the walk that wanted them is over. */
static void queue_stop(struct bi_path *p)
{
	struct bi_ra_queue *h = p->queue;
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->quit = true;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
	pthread_join(h->thread, NULL);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h);
	p->queue = NULL;
}

/* After a burst of requests: one wake-up for all of them. */
static void queue_flush(struct bi_path *p)
{
	struct bi_ra_queue *h = p->queue;
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	if (h->n)
		pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

static void ask(struct bi_path *p, uint64_t start, uint64_t len)
{
	struct bi_ra_queue *h = p->queue;
	if (h) {
		pthread_mutex_lock(&h->mu);
		bool queued = h->n < QUEUE_MAX;
		if (queued) {
			h->q[(h->head + h->n) % QUEUE_MAX].start = start;
			h->q[(h->head + h->n) % QUEUE_MAX].len = len;
			h->n++;
		}
		pthread_mutex_unlock(&h->mu);
		if (queued)
			return;
	}
	bi_prefetch(p->fs, start, len);
}

/* -------------------------------------------------------------- read-ahead */

/* The window of leaves asked for ahead of the walk, topped up once half of
 * it is used (and the most one request joins).
 *
 * STREAM: the disk always has work queued, so reads find the page cache
 * filled and the kernel's own readahead, blind to the tree, rarely starts
 * (on the bench disk it read 60% more than the walk needed). 1 to 64 MiB
 * measured alike there; asking from a second thread did not help, the
 * formatting thread needing that core.
 *
 * RING: four times that. With the requests off the walking thread and
 * across level-1 nodes, cold runs of the 1M-inode bench walk went from
 * 0.47 to 0.40 s (medians of 5 alternating pairs, machine shared); 64 MiB
 * measured alike. */
static uint32_t window_bytes(const struct bi_path *p)
{
	return p->ra == BI_RA_RING ? 32u << 20 : 8u << 20;
}

/* Whether the leaf behind slot @s of a level-1 node (@data, @nritems)
 * holds nothing the caller wants: its keys lie in [this pointer's key, the
 * next one's). */
static bool ptr_skippable(const struct bi_path *p, const uint8_t *data, uint32_t nritems,
			  uint32_t s)
{
	if (!p->skip || s + 1 >= nritems)
		return false;
	bi_key lo, hi;
	bi_key_read(data + HDR_SIZE + (size_t)s * KP_SIZE, &lo);
	bi_key_read(data + HDR_SIZE + (size_t)(s + 1) * KP_SIZE, &hi);
	return p->skip(&lo, &hi);
}

static bool slot_skippable(const struct bi_path *p, uint32_t s)
{
	return ptr_skippable(p, p->nodes[1]->data, p->nodes[1]->nritems, s);
}

/* Ask for the leaves behind slots [from, to) of a level-1 node that the
 * walk will read (not skipped, not past its range); adjacent blocks go as
 * one request. */
static void prefetch_leaves(struct bi_path *p, const uint8_t *data, uint32_t nritems, uint32_t from,
			    uint32_t to)
{
	uint32_t bs = p->fs->nodesize, most = window_bytes(p);
	uint64_t start = 0, len = 0;
	for (uint32_t s = from; s < to; s++) {
		const uint8_t *kp = data + HDR_SIZE + (size_t)s * KP_SIZE;
		bi_key k;
		bi_key_read(kp, &k);
		uint64_t ptr = bi_le64(kp + KP_BLOCKPTR);
		if (bi_key_cmp(&k, &p->max) > 0)
			break;
		if (ptr_skippable(p, data, nritems, s))
			continue;
		if (len && ptr == start + len && len < most) {
			len += bs;
			continue;
		}
		if (len)
			ask(p, start, len);
		start = ptr;
		len = bs;
	}
	if (len)
		ask(p, start, len);
	queue_flush(p);
}

/* RING: the window has reached the end of this level-1 node: ask for the
 * first leaves of the next one too, so the disk does not run dry while the
 * walk crosses over. That node is not verified yet (it will be when the
 * walk gets there): its bytes, read raw, only steer requests, after the
 * checks that keep the reading of them in bounds. */
static void prefetch_over(struct bi_path *p, uint32_t budget)
{
	if (p->top < 2 || p->over_done || !p->scratch)
		return;
	p->over_done = true;
	const struct bi_block *up = p->nodes[2];
	uint32_t s = p->slots[2] + 1;
	if (s >= up->nritems)
		return;
	bi_key k;
	uint64_t ptr, gen;
	bi_node_ptr(up, s, &k, &ptr, &gen);
	if (bi_key_cmp(&k, &p->max) > 0 ||
	    bi_read_copy(p->fs, ptr, p->scratch, p->fs->nodesize, 0) < 0)
		return;
	const uint8_t *d = p->scratch;
	uint32_t n = bi_le32(d + HDR_NRITEMS);
	if (d[HDR_LEVEL] != 1 || bi_le64(d + HDR_BYTENR) != ptr ||
	    n > (p->fs->nodesize - HDR_SIZE) / KP_SIZE)
		return;
	uint32_t to = n > budget ? budget : n;
	prefetch_leaves(p, d, n, 0, to);
	p->over_bytenr = ptr;
	p->over_to = to;
}

/* Before the leaf at nodes[1]'s slot is read: top the window up once half
 * of it has been used, so requests go in batches. */
static void prefetch_ahead(struct bi_path *p)
{
	if (p->no_leaf_hints)
		return;
	uint32_t s = p->slots[1], n = p->nodes[1]->nritems;
	uint32_t window = window_bytes(p) / p->fs->nodesize;
	if (p->ra_slot > s && p->ra_slot - s > window / 2)
		return;
	uint32_t from = p->ra_slot > s ? p->ra_slot : s;
	uint32_t to = n - s > window ? s + window : n;
	if (from < to)
		prefetch_leaves(p, p->nodes[1]->data, n, from, to);
	p->ra_slot = to;
	if (to == n && to - s < window)
		prefetch_over(p, window - (to - s));
}

void bi_path_readahead(struct bi_path *p)
{
	if (p->ra != BI_RA_NONE)
		prefetch_ahead(p);
}

/* On entering a level-1 node: its successor will be read when this one's
 * leaves are done; ask for it now so that read finds it in memory. */
static void prefetch_next_node(struct bi_path *p)
{
	const struct bi_block *up = p->nodes[2];
	uint32_t s = p->slots[2] + 1;
	if (s >= up->nritems)
		return;
	bi_key k;
	uint64_t ptr, gen;
	bi_node_ptr(up, s, &k, &ptr, &gen);
	if (bi_key_cmp(&k, &p->max) <= 0) {
		ask(p, ptr, p->fs->nodesize);
		queue_flush(p);
	}
}

/* ----------------------------------------------------------------- descent */

void bi_path_init(struct bi_path *p, struct btrfsimg_fs *fs, const struct bi_root *root,
		  const bi_key *max, bool leaves)
{
	/* field by field: a memset of a whole iterator was a third of a
	 * lookup's time in bi_iter_start */
	p->fs = fs;
	p->root = *root;
	p->max = *max;
	memset(p->nodes, 0, sizeof(p->nodes));
	memset(p->slots, 0, sizeof(p->slots));
	p->top = 0;
	p->leaves = leaves;
	p->skip = NULL;
	p->ra = BI_RA_NONE;
	p->no_leaf_hints = false;
	p->ra_slot = 0;
	p->scratch = NULL;
	p->over_done = false;
	p->over_bytenr = 0;
	p->over_to = 0;
	p->queue = NULL;
}

/* A walk that reads each leaf once lets the last one go from the cache. */
static bool leaves_once(const struct bi_path *p)
{
	return p->leaves && p->ra != BI_RA_NONE;
}

/* Replace nodes[level - 1] with the child behind nodes[level]'s slot. */
static int descend(struct bi_path *p, int level)
{
	if (level == 1 && p->ra != BI_RA_NONE)
		prefetch_ahead(p);
	bi_key k;
	uint64_t ptr, gen;
	bi_node_ptr(p->nodes[level], p->slots[level], &k, &ptr, &gen);
	struct bi_expect e = { p->root.id, gen, level - 1, &k };
	struct bi_block *child;
	int rc = bi_block_read(p->fs, ptr, &e, &child);
	if (rc < 0)
		return rc;
	if (level == 1 && leaves_once(p))
		bi_block_put_once(p->fs, p->nodes[0]);
	else
		bi_block_put(p->fs, p->nodes[level - 1]);
	p->nodes[level - 1] = child;
	if (level == 2 && p->ra != BI_RA_NONE) {
		/* what prefetch_over asked for of this node is not asked again */
		p->ra_slot = child->bytenr == p->over_bytenr ? p->over_to : 0;
		p->over_done = false;
		p->over_bytenr = 0;
		prefetch_next_node(p);
	}
	return 0;
}

int bi_path_root(struct bi_path *p)
{
	struct bi_expect e = { p->root.id, p->root.generation, p->root.level, NULL };
	struct bi_block *b;
	int rc = bi_block_read(p->fs, p->root.bytenr, &e, &b);
	if (rc < 0)
		return rc;
	p->top = b->level;
	p->nodes[p->top] = b;
	p->slots[p->top] = 0;
	return 0;
}

int bi_path_down(struct bi_path *p, int level)
{
	if (level <= 0 || level > p->top || !p->nodes[level])
		return -EINVAL;
	return descend(p, level);
}

int bi_path_descend(struct bi_path *p, const bi_key *min)
{
	int rc = bi_path_root(p);
	if (rc < 0)
		return rc;
	int stop = p->leaves ? 0 : 1;
	if (p->top < stop)
		return 0; /* a tree of one leaf: nodes[0] */
	if (p->ra == BI_RA_RING && p->top >= 2) {
		p->scratch = malloc(p->fs->nodesize); /* NULL: nothing asked across nodes */
		queue_start(p);
	}
	for (int lvl = p->top; lvl > stop; lvl--) {
		p->slots[lvl] = bi_node_slot(p->nodes[lvl], min);
		rc = descend(p, lvl);
		if (rc < 0) {
			bi_path_release(p);
			return rc;
		}
	}
	p->slots[stop] = stop ? bi_node_slot(p->nodes[1], min) : bi_leaf_slot(p->nodes[0], min);
	return 0;
}

int bi_path_next_leaf(struct bi_path *p)
{
	int lvl = 1;
	while (lvl <= p->top && p->slots[lvl] + 1 >= p->nodes[lvl]->nritems)
		lvl++;
	if (lvl > p->top)
		return 0;
	p->slots[lvl]++;
	bi_key k;
	uint64_t ptr, gen;
	bi_node_ptr(p->nodes[lvl], p->slots[lvl], &k, &ptr, &gen);
	if (bi_key_cmp(&k, &p->max) > 0)
		return 0;
	for (; lvl > 1; lvl--) {
		int rc = descend(p, lvl);
		if (rc < 0)
			return rc;
		p->slots[lvl - 1] = 0;
	}
	while (slot_skippable(p, p->slots[1]))
		p->slots[1]++;
	if (!p->leaves)
		return 1;
	int rc = descend(p, 1);
	if (rc < 0)
		return rc;
	p->slots[0] = 0;
	return 1;
}

void bi_path_release(struct bi_path *p)
{
	queue_stop(p);
	free(p->scratch);
	p->scratch = NULL;
	if (leaves_once(p))
		bi_block_put_once(p->fs, p->nodes[0]);
	else
		bi_block_put(p->fs, p->nodes[0]);
	p->nodes[0] = NULL;
	for (int lvl = 1; lvl < MAX_LEVEL; lvl++) {
		bi_block_put(p->fs, p->nodes[lvl]);
		p->nodes[lvl] = NULL;
	}
}

/* --------------------------------------------------------------- path hints
 *
 * The cache keeps the path of the last lookups that ended (root to leaf,
 * one reference held per block) with the key range [lo, hi) for which a
 * descent from that root takes exactly this path: at each node the pointer
 * followed is the last one whose key is <= the target (the first one for
 * any target before it), so the range is the intersection over the levels
 * of [this pointer's key, the next pointer's key). A lookup whose start key
 * lies in it begins at that leaf without the descent: lookups in key order
 * (the inodes of a directory's entries, one after the other) mostly fall in
 * the last leaf. Same blocks, same slots as a descent, so the same result,
 * even on a damaged tree; paths through blocks kept out of the cache are
 * not kept. */

static bool same_root(const struct bi_root *a, const struct bi_root *b)
{
	return a->id == b->id && a->bytenr == b->bytenr && a->generation == b->generation &&
	       a->level == b->level;
}

/* The hint kept for @root, or NULL. */
static struct bi_path_hint *hint_for(struct bi_cache *c, const struct bi_root *root)
{
	for (int i = 0; i < BI_PATH_HINTS; i++)
		if (c->hint[i].top >= 0 && same_root(&c->hint[i].root, root))
			return &c->hint[i];
	return NULL;
}

bool bi_path_hint_start(struct bi_path *p, const bi_key *min)
{
	struct bi_cache *c = p->fs->cache;
	struct bi_path_hint *h = hint_for(c, &p->root);
	if (!h || !p->leaves || (!h->lo_open && bi_key_cmp(min, &h->lo) < 0) ||
	    (!h->hi_open && bi_key_cmp(min, &h->hi) >= 0))
		return false;
	h->used = ++c->hint_clock;
	p->top = h->top;
	for (int lvl = 0; lvl <= h->top; lvl++) {
		p->nodes[lvl] = h->nodes[lvl];
		p->nodes[lvl]->refs++;
		p->slots[lvl] = h->slots[lvl];
	}
	p->slots[0] = bi_leaf_slot_from(p->nodes[0], min, h->slots[0]);
	return true;
}

/* Whether the path ends on the hint's own (it started there and stayed in
 * that leaf): the hint is then already right. */
static bool on_hint_path(const struct bi_path *p, struct bi_path_hint *h)
{
	if (h->top != p->top)
		return false;
	for (int lvl = 0; lvl <= h->top; lvl++)
		if (h->nodes[lvl] != p->nodes[lvl] || (lvl && h->slots[lvl] != p->slots[lvl]))
			return false;
	return true;
}

static void hint_drop(struct btrfsimg_fs *fs, struct bi_path_hint *h)
{
	for (int lvl = 0; lvl <= h->top; lvl++)
		bi_block_put(fs, h->nodes[lvl]);
	h->top = -1;
}

/* Whether nodes[lvl - 1] is the child behind nodes[lvl]'s slot at every
 * level, as that pointer expects it (not so once a step has gone a slot
 * past the range), with no block private to this path. */
static bool path_whole(const struct bi_path *p)
{
	for (int lvl = 0; lvl <= p->top; lvl++)
		if (!p->nodes[lvl] || p->nodes[lvl]->uncached)
			return false;
	for (int lvl = 1; lvl <= p->top; lvl++) {
		const struct bi_block *n = p->nodes[lvl];
		bi_key k;
		uint64_t ptr, gen;
		if (p->slots[lvl] >= n->nritems)
			return false;
		bi_node_ptr(n, p->slots[lvl], &k, &ptr, &gen);
		struct bi_expect e = { p->root.id, gen, lvl - 1, &k };
		if (ptr != p->nodes[lvl - 1]->bytenr || !bi_block_matches(p->nodes[lvl - 1], &e))
			return false;
	}
	return true;
}

/* The least recently used slot, a free one first. */
static struct bi_path_hint *hint_victim(struct bi_cache *c)
{
	for (int i = 0; i < BI_PATH_HINTS; i++)
		if (c->hint[i].top < 0)
			return &c->hint[i];
	struct bi_path_hint *h = &c->hint[0];
	for (int i = 1; i < BI_PATH_HINTS; i++)
		if (c->hint[i].used < h->used)
			h = &c->hint[i];
	return h;
}

/* Narrow the hint's range to where a descent takes slot @s of node @n. */
static void hint_narrow(struct bi_path_hint *h, const struct bi_block *n, uint32_t s)
{
	bi_key k;
	if (s > 0) {
		bi_key_read(n->data + HDR_SIZE + (size_t)s * KP_SIZE, &k);
		if (h->lo_open || bi_key_cmp(&k, &h->lo) > 0)
			h->lo = k;
		h->lo_open = false;
	}
	if (s + 1 < n->nritems) {
		bi_key_read(n->data + HDR_SIZE + (size_t)(s + 1) * KP_SIZE, &k);
		if (h->hi_open || bi_key_cmp(&k, &h->hi) < 0)
			h->hi = k;
		h->hi_open = false;
	}
}

bool bi_path_hint_keep(struct bi_path *p)
{
	if (p->ra != BI_RA_NONE || !p->leaves || p->top < 0 || p->top >= MAX_LEVEL)
		return false;
	struct bi_cache *c = p->fs->cache;
	struct bi_path_hint *h = hint_for(c, &p->root);
	if (h && on_hint_path(p, h)) {
		h->slots[0] = p->slots[0];
		return false; /* the path puts its references */
	}
	if (!path_whole(p))
		return false;
	if (!h)
		h = hint_victim(c);
	hint_drop(p->fs, h);
	h->used = ++c->hint_clock;
	h->root = p->root;
	h->top = p->top;
	h->lo_open = h->hi_open = true;
	for (int lvl = 0; lvl <= p->top; lvl++) {
		h->nodes[lvl] = p->nodes[lvl];
		h->slots[lvl] = p->slots[lvl];
		p->nodes[lvl] = NULL;
		if (lvl > 0)
			hint_narrow(h, h->nodes[lvl], h->slots[lvl]);
	}
	return true;
}
