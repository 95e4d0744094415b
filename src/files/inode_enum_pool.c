/* SPDX-License-Identifier: MIT */
/*
 * Leaves parsed in parallel: the inode walk of inode_enum.c on more than one
 * core. Apart from the walk's state machine because this is its threaded
 * half (the ring, the workers, the reads that feed them), which is easier
 * to reason about on its own.
 *
 * The walking thread walks the tree's nodes and reads each leaf's copy 0
 * into a ring of IPOOL_RING slots (the handle, its block cache and its
 * devices are used from it alone). A leaf found in the page cache while
 * no leaf waits for a worker is read (pread on a descriptor of the image
 * file), checked and parsed by the walking thread itself, and played at
 * once: handing cached leaves to a worker cost more CPU than it saved (the
 * events and names read back from the other core's cache, the wake-ups:
 * a warm run took 1.3x the CPU of one thread), and a warm run's time is
 * its CPU. The workers take the leaves that come from the disk, where
 * reading ahead leaves time to parse on the other core: worker
 * threads check each leaf as
 * block.c would (checksum, header, item table, what the parent expects) and
 * parse it into events (an inode item parsed and checked, with its first
 * name when the leaf holds it; a name for an inode of an earlier leaf; a
 * damage message); the walking thread then plays each leaf's events, in
 * leaf order, through the same state as the one-thread walk (merge_leaf in
 * inode_enum.c). A leaf whose copy 0 could not be read or failed a check is
 * read again there, when its turn comes, through bi_block_read (every copy,
 * the same messages, the same error). The output, the messages and their
 * order are the same; only the checking and the parsing moved.
 *
 *   walk+read: leaf0 leaf1 leaf2 ... (ring)   workers: check, parse -> events
 *   walking thread: events of leaf0, leaf1, ... -> finish_cur/report (callback)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/grow.h"
#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/name.h"
#include "base/ondisk.h"
#include "image/ring.h"
#include "btrfs/tree_checker.h"
#include "btrfs/chunk.h"
#include "files/inode_enum_pool.h"

#define HOT_RUN	  64
#define HOT_PROBE 16

/* The first entry of an INODE_REF (key offset = parent) or INODE_EXTREF
 * item: false, with the message in @why, when it is unusable. */
bool bi_ipool_ref_first(const bi_key *key, const uint8_t *data, uint32_t size, uint64_t block,
			uint32_t slot, uint64_t subvol, uint64_t *parent_out,
			const uint8_t **name_out, uint16_t *nlen_out, char *why, size_t whylen)
{
	struct bi_cur c = bi_cur_make(data, size);
	bool ext = key->type == KT_INODE_EXTREF;
	size_t hdr = ext ? EXTREF_SIZE : IREF_SIZE;
	uint16_t nlen = bi_u16(&c, ext ? EXTREF_NAME_LEN : IREF_NAME_LEN);
	const uint8_t *name = bi_bytes(&c, hdr, nlen);
	uint64_t parent = ext ? bi_u64(&c, EXTREF_PARENT) : key->offset;
	if (c.bad || nlen == 0 || nlen > 255 || parent == 0) {
		snprintf(why, whylen,
			 "corrupt inode %s: root=%" PRIu64 " block=%" PRIu64
			 " slot=%u, name length %u, item size %u, parent %" PRIu64,
			 ext ? "extref" : "ref", subvol, block, slot, nlen, size, parent);
		return false;
	}
	*parent_out = parent;
	*name_out = name;
	*nlen_out = nlen;
	return true;
}

/* @n bytes into the slot's text: their offset in *@off. */
static int slot_bytes(struct bi_islot *s, const void *bytes, size_t n, uint32_t *off)
{
	/* the call only to grow: once per name it was a tenth of the parse */
	if (s->text_len + n > s->text_cap &&
	    bi_grow((void **)&s->text, &s->text_cap, s->text_len + n, 1))
		return -ENOMEM;
	/* byte by byte: names are short, and libc's memcpy for a length
	 * known only here cost more than the copy */
	const char *src = bytes;
	for (size_t i = 0; i < n; i++)
		s->text[s->text_len + i] = src[i];
	*off = (uint32_t)s->text_len;
	s->text_len += n;
	return 0;
}

static int slot_text(struct bi_islot *s, const char *msg, uint32_t *off)
{
	return slot_bytes(s, msg, strlen(msg) + 1, off);
}

/* An inode item into an event: parsed and checked, or its message. */
static int parse_inode(const struct bi_ipool *p, struct bi_islot *s, struct bi_iev *e,
		       const bi_key *k, const uint8_t *d, uint32_t size, uint32_t slot)
{
	char why[160];
	e->parent = 0;
	e->name_len = 0;
	e->name_bad = false;
	if (bi_inode_parse(d, size, p->subvol, k->objectid, p->max_gen, &e->ino, why,
			   sizeof(why)) == 0) {
		e->kind = IEV_INODE;
		return 0;
	}
	char msg[384];
	snprintf(msg, sizeof(msg),
		 "corrupt inode item: root=%" PRIu64 " block=%" PRIu64 " slot=%u, %s", p->subvol,
		 s->leaf->bytenr, slot, why);
	e->kind = IEV_INODE_BAD;
	return slot_text(s, msg, &e->msg_off);
}

/* A name item: an event of its own when the inode it names is not in this
 * leaf (the walking thread decides, as take_ref), else settled here: the
 * inode's first name, or a damage message. */
static int parse_ref(const struct bi_ipool *p, struct bi_islot *s, struct bi_iev *cur, bool known,
		     const bi_key *k, const uint8_t *d, uint32_t size, uint32_t slot)
{
	if (!known) {
		struct bi_iev *e = &s->ev[s->nev++];
		e->kind = IEV_REF;
		e->ref.slot = slot;
		e->ref.size = size;
		e->ref.data = d;
		e->ref.key = *k;
		return 0;
	}
	if (!cur || cur->ino.objectid != k->objectid || cur->parent)
		return 0;
	char why[256];
	uint64_t parent;
	const uint8_t *name;
	uint16_t nlen;
	if (bi_ipool_ref_first(k, d, size, s->leaf->bytenr, slot, p->subvol, &parent, &name, &nlen,
			       why, sizeof(why))) {
		/* copied while the leaf is in this core's cache: read from
		 * the leaf, the walking thread waited for each name (the
		 * copies line up there, in the order it reads them) */
		cur->parent = parent;
		cur->name_len = nlen;
		cur->name_bad = bi_name_problem(name, nlen) != NULL;
		return slot_bytes(s, name, nlen, &cur->msg_off);
	}
	struct bi_iev *e = &s->ev[s->nev++];
	e->kind = IEV_DAMAGE;
	return slot_text(s, why, &e->msg_off);
}

/* One leaf into events (a worker thread: reads the leaf and the pool's
 * constants only). */
void bi_ipool_parse_leaf(const struct bi_ipool *p, struct bi_islot *s)
{
	const struct bi_block *b = s->leaf;
	s->nev = 0;
	s->text_len = 0;
	s->rc = 0;
	s->end = false;
	s->has_first = false;
	if (s->from >= b->nritems)
		return;
	/* at most one event per inode or name item: room for that many (not
	 * one per item: directory entries would multiply the ring's memory;
	 * the spare buffers have room for a full leaf, and skip the count) */
	if (s->evcap < b->nritems - s->from) {
		size_t want = 0;
		for (uint32_t i = s->from; i < b->nritems; i++) {
			uint8_t type = b->data[HDR_SIZE + (size_t)i * ITEM_SIZE + 8];
			want += type == KT_INODE_ITEM || type == KT_INODE_REF ||
				type == KT_INODE_EXTREF;
		}
		/* doubled, not to the leaf's count: growing by a few events
		 * leaf after leaf was a fault and a TLB flush on the other
		 * core for each move */
		if (bi_grow((void **)&s->ev, &s->evcap, want, sizeof(*s->ev))) {
			s->rc = -ENOMEM;
			return;
		}
	}
	/* the range's end is checked per item only in a leaf that crosses it */
	uint32_t n = b->nritems;
	bi_key k;
	const uint8_t *d;
	uint32_t size;
	bi_leaf_item(b, n - 1, &k, &d, &size);
	bool crosses = bi_key_cmp(&k, &p->max) > 0;
	bool known = false;	   /* an inode item of this leaf was met */
	struct bi_iev *cur = NULL; /* its event (NULL: it failed its checks) */
	int rc = 0;
	for (uint32_t i = s->from; i < n && rc == 0; i++) {
		const uint8_t *it = b->data + HDR_SIZE + (size_t)i * ITEM_SIZE;
		uint8_t type = it[8];
		if (crosses) {
			bi_key_read(it, &k);
			if (bi_key_cmp(&k, &p->max) > 0) {
				s->end = true;
				break;
			}
		}
		if (i == s->from) {
			bi_key_read(it, &s->first);
			s->has_first = true;
		}
		if (type != KT_INODE_ITEM && type != KT_INODE_REF && type != KT_INODE_EXTREF)
			continue;
		bi_leaf_item(b, i, &k, &d, &size);
		if (type == KT_INODE_ITEM) {
			struct bi_iev *e = &s->ev[s->nev++];
			rc = parse_inode(p, s, e, &k, d, size, i);
			known = true;
			cur = e->kind == IEV_INODE ? e : NULL;
		} else {
			rc = parse_ref(p, s, cur, known, &k, d, size, i);
		}
	}
	if (s->has_first) {
		uint32_t last = s->end ? 0 : n - 1;
		if (s->end) { /* the item before the first one past the range */
			for (uint32_t i = s->from; i < n; i++) {
				bi_key_read(b->data + HDR_SIZE + (size_t)i * ITEM_SIZE, &k);
				if (bi_key_cmp(&k, &p->max) > 0)
					break;
				last = i;
			}
		}
		bi_key_read(b->data + HDR_SIZE + (size_t)last * ITEM_SIZE, &s->last);
	}
	s->rc = rc;
}

/* The checks block.c makes of a block it reads (verify_copy), on the
 * slot's copy 0: true when it passes; then the slot's leaf is its view. */
static bool check_copy(const struct bi_ipool *p, struct bi_islot *s)
{
	uint8_t sum[CSUM_SIZE_MAX];
	const uint8_t *b = s->buf;
	char why[384];
	struct bi_expect e = { p->subvol, s->at.generation, 0, &s->at.first_key };
	if (bi_csum(p->csum_type, b + HDR_FSID, p->nodesize - HDR_FSID, sum) < 0 ||
	    memcmp(sum, b, p->csum_size) != 0 ||
	    bi_block_check(b, p->nodesize, s->at.bytenr, p->fsid, &e, why, sizeof(why)) < 0)
		return false;
	s->blk = (struct bi_block){ .bytenr = s->at.bytenr,
				    .generation = bi_le64(b + HDR_GENERATION),
				    .owner = bi_le64(b + HDR_OWNER),
				    .nritems = bi_le32(b + HDR_NRITEMS),
				    .level = b[HDR_LEVEL],
				    .size = p->nodesize,
				    .data = s->buf };
	s->leaf = &s->blk;
	s->from = s->at.first ? bi_leaf_slot(s->leaf, &p->min) : 0;
	return true;
}

/* Copy 0 of a cached leaf, read here (a worker) rather than on the walking
 * thread: that copy out of the page cache was a third of the walking
 * thread's time, and that thread sets the pace. A short or failed read
 * leaves the leaf to the fallback, which says why. */
static bool read_cached(const struct bi_ipool *p, struct bi_islot *s)
{
	size_t done = 0;
	while (done < p->nodesize) {
		ssize_t n = pread(s->rfd, s->buf + done, p->nodesize - done,
				  (off_t)(s->roff + done));
		if (n > 0)
			done += (size_t)n;
		else if (n == 0 || errno != EINTR)
			return false;
	}
	return true;
}

/* A worker's part of one leaf: read it if it is in the page cache, check
 * it, parse it. */
static void work_leaf(const struct bi_ipool *p, struct bi_islot *s)
{
	if (s->rfd >= 0)
		s->read_ok = read_cached(p, s);
	if (!s->read_ok || !check_copy(p, s)) {
		s->fallback = true;
		return;
	}
	bi_ipool_parse_leaf(p, s);
}

/* Leaves queued and not taken: 0 while the walking thread steps both
 * counters past a leaf it parsed itself (next first, for a moment ahead). */
static size_t queued(struct bi_ipool *p)
{
	size_t t = atomic_load(&p->tail), n = atomic_load(&p->next);
	return t > n ? t - n : 0;
}

/* Take the next queued leaf, if any: its index, or (size_t)-1. */
static size_t take_leaf(struct bi_ipool *p)
{
	size_t n = atomic_load(&p->next);
	while (n < atomic_load(&p->tail))
		if (atomic_compare_exchange_weak(&p->next, &n, n + 1))
			return n;
	return (size_t)-1;
}

static void *worker(void *arg)
{
	struct bi_ipool *p = arg;
	for (;;) {
		size_t n = take_leaf(p);
		if (n != (size_t)-1) {
			struct bi_islot *s = &p->ring[n % IPOOL_RING];
			work_leaf(p, s);
			atomic_store(&s->state, ISLOT_PARSED);
			if (atomic_load(&p->waiting)) {
				pthread_mutex_lock(&p->mu);
				pthread_cond_broadcast(&p->done);
				pthread_mutex_unlock(&p->mu);
			}
			continue;
		}
		/* asleep until a batch is queued (the sleeper count is raised
		 * before the queue is looked at again, and the queuing thread
		 * looks at the count after queuing: no wake-up is lost) */
		pthread_mutex_lock(&p->mu);
		atomic_fetch_add(&p->sleepers, 1);
		while (!p->quit && queued(p) < atomic_load(&p->batch))
			pthread_cond_wait(&p->work, &p->mu);
		atomic_fetch_sub(&p->sleepers, 1);
		bool quit = p->quit;
		pthread_mutex_unlock(&p->mu);
		if (quit)
			break;
	}
	return NULL;
}

/* Wake the workers if some sleep and enough is queued for them. */
void bi_ipool_wake(struct bi_ipool *p)
{
	if (atomic_load(&p->sleepers) && queued(p) >= atomic_load(&p->batch)) {
		pthread_mutex_lock(&p->mu);
		pthread_cond_broadcast(&p->work);
		pthread_mutex_unlock(&p->mu);
	}
}

void bi_ipool_free(struct bi_ipool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->quit = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->nth; i++)
		pthread_join(p->th[i], NULL);
	for (size_t i = 0; i < IPOOL_RING; i++) {
		free(p->ring[i].ev);
		free(p->ring[i].text);
		free(p->ring[i].buf);
	}
	free(p->spare.ev);
	free(p->spare.text);
	free(p->spare.buf);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* Worker threads for the parsing: one per processor beyond this one (at
 * least one, at most IPOOL_WORKERS_MAX). NULL when none can be had: the walk then
 * parses on this thread. */
struct bi_ipool *bi_ipool_new(void)
{
	struct bi_ipool *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	if (pthread_mutex_init(&p->mu, NULL) != 0) {
		free(p);
		return NULL;
	}
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	atomic_init(&p->batch, IPOOL_BATCH);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int want = cpus > 1 ? (int)(cpus - 1) : 1;
	if (want > IPOOL_WORKERS_MAX)
		want = IPOOL_WORKERS_MAX;
	while (p->nth < want && pthread_create(&p->th[p->nth], NULL, worker, p) == 0)
		p->nth++;
	if (p->nth == 0) {
		bi_ipool_free(p);
		return NULL;
	}
	return p;
}

/* Queue every slot read in order since the last one queued: the workers
 * take them from there. */
static void pool_publish(struct bi_ipool *p)
{
	size_t t0 = atomic_load(&p->tail), t = t0;
	while (t < p->issued && p->ring[t % IPOOL_RING].io_done) {
		atomic_store(&p->ring[t % IPOOL_RING].state, ISLOT_QUEUED);
		t++;
	}
	if (t != t0) {
		atomic_store(&p->tail, t);
		bi_ipool_wake(p);
	}
}

/* The buffers of @a and @b exchanged (the leaf, its events, its text). */
static void swap_buffers(struct bi_islot *a, struct bi_islot *b)
{
	uint8_t *buf = a->buf;
	struct bi_iev *ev = a->ev;
	char *text = a->text;
	size_t evcap = a->evcap, text_cap = a->text_cap;
	a->buf = b->buf;
	a->ev = b->ev;
	a->evcap = b->evcap;
	a->text = b->text;
	a->text_cap = b->text_cap;
	b->buf = buf;
	b->ev = ev;
	b->evcap = evcap;
	b->text = text;
	b->text_cap = text_cap;
}

/* Slot @t (the next one) read, checked and parsed here, in the spare
 * buffers: every leaf before it is played (so the spare ones are free),
 * and none waits for a worker, which cannot take this one (take_leaf
 * wants an index below tail, which is @t until both move on). */
static void parse_mine(struct bi_ipool *p, struct bi_islot *s, size_t t)
{
	swap_buffers(s, &p->spare);
	/* room for a full leaf's events: the parse then need not count them
	 * (failing, it counts) */
	size_t most = (p->nodesize - HDR_SIZE) / ITEM_SIZE;
	if (s->evcap < most)
		(void)bi_grow((void **)&s->ev, &s->evcap, most, sizeof(*s->ev));
	work_leaf(p, s);
	s->mine = true;
	atomic_store(&s->state, ISLOT_PARSED);
	atomic_store(&p->next, t + 1);
	atomic_store(&p->tail, t + 1);
	p->mine_last = true;
}

/* Read copy 0 of the leaf @at into the next slot, to be queued for the
 * workers once it and those before it are read (a failed read is left to
 * the fallback). A leaf that is not in the page cache is read around it,
 * many in flight, where the image allows (a plain file, aligned); any
 * other, through the page cache here and now. */
void bi_ipool_queue(struct bi_ipool *p, struct btrfsimg_fs *fs, struct bi_leafwalk *lw,
		    const struct bi_leaf_ptr *at)
{
	size_t t = p->issued;
	struct bi_islot *s = &p->ring[t % IPOOL_RING];
	s->at = *at;
	s->leaf = NULL;
	s->held = false;
	s->fallback = false;
	s->io_done = true;
	s->mine = false;
	s->rfd = -1;
	if (!s->buf && posix_memalign((void **)&s->buf, 4096, p->nodesize) != 0)
		s->buf = NULL;
	p->issued = t + 1;
	p->aio_last = false;
	p->mine_last = false;
	const struct bi_dev *d;
	uint64_t phys;
	bool usable = s->buf && p->aio && !p->aio_refused;
	bool buffered = usable && bi_aio_buffered(p->aio); /* every leaf goes to it */
	/* after HOT_RUN leaves in a row found in the cache, one in HOT_PROBE is
	 * looked for there: the others are read from it (as they most likely
	 * are there) without a system call each to ask */
	bool probe = p->hot < HOT_RUN || p->hot % HOT_PROBE == 0;
	bool where = usable && bi_leaf_where(fs, at->bytenr, p->nodesize, &d, &phys) == 0;
	int cached = 1; /* presumed, between probes */
	if (probe)
		cached = where ? bi_aio_cached(p->aio, d, phys, p->nodesize) : -1;
	p->hot = cached == 1 ? p->hot + 1 : 0;
	if (where && cached == 1 &&
	    (s->rfd = bi_aio_cached_fd(p->aio, d, phys, p->nodesize, &s->roff)) >= 0) {
		s->read_ok = false; /* whoever parses it reads it */
		if (p->head == t && atomic_load(&p->tail) == t && atomic_load(&p->next) == t &&
		    (p->spare.buf ||
		     posix_memalign((void **)&p->spare.buf, 4096, p->nodesize) == 0))
			parse_mine(p, s, t);
		else
			pool_publish(p);
		return;
	}
	s->rfd = -1;
	if (where && (buffered || cached == 0) &&
	    bi_aio_submit(p->aio, d, phys, s->buf, p->nodesize, t) == 0) {
		s->io_done = false;
		/* from the disk (or not known to be cached): the walk runs
		 * ahead as far as the ring goes, to keep many in flight */
		p->aio_last = cached != 1;
		return;
	}
	if (cached != 1) /* read through the page cache: ask it to read ahead again */
		lw->p.no_leaf_hints = false;
	s->read_ok = s->buf && bi_read_copy(fs, at->bytenr, s->buf, p->nodesize, 0) == 0;
	pool_publish(p);
}

/* Take the reads that have finished (waiting for one if @wait); a read
 * that failed or came short is made again through the page cache, as if
 * it had been the only way. */
static void pool_reap(struct bi_ipool *p, struct btrfsimg_fs *fs, bool wait)
{
	uint64_t tags[64];
	int res[64];
	unsigned n = bi_aio_reap(p->aio, wait, tags, res, 64);
	for (unsigned i = 0; i < n; i++) {
		struct bi_islot *s = &p->ring[tags[i] % IPOOL_RING];
		s->read_ok = res[i] == (int)p->nodesize;
		if (!s->read_ok) {
			if (res[i] == -EINVAL)
				p->aio_refused = true;
			s->read_ok = bi_read_copy(fs, s->at.bytenr, s->buf, p->nodesize, 0) == 0;
		}
		s->io_done = true;
	}
	pool_publish(p);
}

/* Until the leaf at the head of the ring is parsed. */
static void pool_wait_head(struct bi_ipool *p)
{
	struct bi_islot *s = &p->ring[p->head % IPOOL_RING];
	if (atomic_load(&s->state) == ISLOT_PARSED)
		return;
	atomic_store(&p->batch, 1); /* whatever is queued: this thread waits */
	bi_ipool_wake(p);
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->waiting, true);
	while (atomic_load(&s->state) != ISLOT_PARSED)
		pthread_cond_wait(&p->done, &p->mu);
	atomic_store(&p->waiting, false);
	pthread_mutex_unlock(&p->mu);
	atomic_store(&p->batch, IPOOL_BATCH);
}

/* What to do next (enum bi_ipool_next). Reads run ahead of the workers by
 * up to two batches, or as far as the ring goes while the leaves come from
 * the disk; the head is waited for only when the ring is full or the walk
 * is over. */
enum bi_ipool_next bi_ipool_step(struct bi_ipool *p, struct btrfsimg_fs *fs, bool walking)
{
	if (p->aio && bi_aio_inflight(p->aio))
		pool_reap(p, fs, false);
	size_t tail = atomic_load(&p->tail);
	/* a leaf parsed here is played while it is in this core's cache */
	if (p->mine_last && p->head < tail &&
	    atomic_load(&p->ring[p->head % IPOOL_RING].state) == ISLOT_PARSED)
		return BI_IPOOL_PLAY;
	bool room = walking && p->issued - p->head < IPOOL_RING;
	if (room && (p->issued - atomic_load(&p->next) < 2 * IPOOL_BATCH || p->aio_last))
		return BI_IPOOL_READ;
	if (p->aio)
		bi_aio_flush(p->aio); /* the reads gathered: before this thread turns away */
	if (p->head < tail && atomic_load(&p->ring[p->head % IPOOL_RING].state) == ISLOT_PARSED)
		return BI_IPOOL_PLAY;
	if (room)
		return BI_IPOOL_READ;
	if (p->head == p->issued)
		return BI_IPOOL_DONE;
	if (p->head >= tail) { /* its read is in flight */
		pool_reap(p, fs, true);
		return BI_IPOOL_AGAIN;
	}
	pool_wait_head(p);
	return BI_IPOOL_PLAY;
}

/* Slot @s released: its block cache reference put, the spare buffers given
 * back. */
static void slot_release(struct bi_ipool *p, struct btrfsimg_fs *fs, struct bi_islot *s)
{
	if (s->held)
		bi_block_put_once(fs, s->leaf);
	s->leaf = NULL;
	s->held = false;
	if (s->mine)
		swap_buffers(s, &p->spare);
	s->mine = false;
	atomic_store(&s->state, ISLOT_FREE);
}

void bi_ipool_done(struct bi_ipool *p, struct btrfsimg_fs *fs)
{
	slot_release(p, fs, &p->ring[p->head % IPOOL_RING]);
	p->head++;
}

/* Take back every leaf still queued: none is handed out any more; those
 * taken are waited for; all are released. */
void bi_ipool_drop(struct bi_ipool *p, struct btrfsimg_fs *fs)
{
	uint64_t tag;
	int res;
	while (p->aio && bi_aio_inflight(p->aio)) /* the buffers: not before */
		bi_aio_reap(p->aio, true, &tag, &res, 1);
	size_t tail = atomic_load(&p->tail);
	size_t taken = atomic_exchange(&p->next, tail);
	for (; p->head < p->issued; p->head++) {
		struct bi_islot *s = &p->ring[p->head % IPOOL_RING];
		if (p->head < taken)
			pool_wait_head(p);
		slot_release(p, fs, s);
	}
	/* what was never queued is gone too: no worker may take it */
	atomic_store(&p->next, p->issued);
	atomic_store(&p->tail, p->issued);
}
