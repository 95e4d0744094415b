/* SPDX-License-Identifier: MIT */
/*
 * Enumerate every inode of one subvolume (or of all) with one path each.
 *
 * One ordered pass over the fs tree reads, per objectid, the INODE_ITEM and
 * its first name (INODE_REF, else INODE_EXTREF: parent directory plus
 * name). Inodes are reported in objectid order as the pass goes: an inode
 * whose parent directories have all been read is reported at once, so a
 * million-inode tree is streamed and only its directories are kept (their
 * paths are built once and reused by their children). An inode whose
 * parent has a higher objectid (renamed into a newer directory) waits, with
 * every inode after it, until that parent is read. A name chain that does
 * not reach the subvolume's root directory (orphans, corrupt references,
 * loops) leaves the inode unreachable rather than failing the enumeration.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "0-base/cursor.h"
#include "0-base/err.h"
#include "0-base/handle.h"
#include "0-base/key.h"
#include "0-base/ondisk.h"
#include "0-base/csum.h"
#include "1-image/direct.h"
#include "3-btrfs/check.h"
#include "3-btrfs/chunk.h"
#include "3-btrfs/leafwalk.h"
#include "3-btrfs/root.h"
#include "3-btrfs/tree.h"

#define PATH_DEPTH_MAX_INODES 2048 /* PATH_MAX bytes nest at most ~2048 deep */

struct irec {
	struct btrfsimg_inode ino;
	uint64_t parent;   /* 0: no name seen */
	uint32_t name_off; /* into the list's names arena */
	uint16_t name_len;
	int32_t path_state; /* directories: 0 unresolved, 1 resolving, 2 done */
	char *path;	    /* directories: cached full path; NULL unreachable */
	size_t path_len;
};

struct ilist {
	struct irec *v;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
};

struct iwalk {
	struct btrfsimg_fs *fs;
	uint64_t subvol;
	const char *root_path; /* NULL for a deleted subvolume */
	size_t root_len;
	btrfsimg_inode_entry_fn fn;
	void *ctx;
	struct ilist dirs;    /* every directory read so far, ascending objectid */
	struct ilist pending; /* read, waiting for a parent not read yet */
	struct irec cur;      /* the objectid being read */
	uint8_t cur_name[255];
	bool have_cur;
	uint64_t seen_max;  /* every objectid <= this one is complete */
	size_t last_parent; /* index into dirs: siblings come in runs */
	char *buf;	    /* path of the inode being reported */
	size_t cap;
	int stop; /* the callback's non-zero return */
};

static void ilist_free(struct ilist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].path);
	free(l->v);
	free(l->names);
}

/* Append @r with its name copied into the list's arena. */
static int ilist_push(struct btrfsimg_fs *fs, struct ilist *l, const struct irec *r,
		      const uint8_t *name)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		void *v = realloc(l->v, cap * sizeof(*l->v));
		if (!v)
			return bi_err(fs, -ENOMEM, "out of memory listing inodes");
		l->v = v;
		l->cap = cap;
	}
	if (l->names_len + r->name_len > l->names_cap) {
		size_t cap = l->names_cap ? l->names_cap * 2 : 4096;
		while (cap < l->names_len + r->name_len)
			cap *= 2;
		char *v = realloc(l->names, cap);
		if (!v)
			return bi_err(fs, -ENOMEM, "out of memory for names");
		l->names = v;
		l->names_cap = cap;
	}
	struct irec *d = &l->v[l->n++];
	*d = *r;
	d->name_off = (uint32_t)l->names_len;
	if (r->name_len) /* nameless (no ref yet): the arena may not exist */
		memcpy(l->names + l->names_len, name, r->name_len);
	l->names_len += r->name_len;
	return 0;
}

static struct irec *find_rec(const struct ilist *l, uint64_t objectid)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (l->v[mid].ino.objectid == objectid)
			return &l->v[mid];
		if (l->v[mid].ino.objectid < objectid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static struct irec *find_dir(struct iwalk *w, uint64_t objectid)
{
	if (w->last_parent < w->dirs.n && w->dirs.v[w->last_parent].ino.objectid == objectid)
		return &w->dirs.v[w->last_parent];
	struct irec *d = find_rec(&w->dirs, objectid);
	if (d)
		w->last_parent = (size_t)(d - w->dirs.v);
	return d;
}

/* Short copies (names, paths) byte by byte: libc's memcpy for a length
 * known only at run time took a fifth of an inodes run on the bench
 * machine (its AVX-512 variant), more than the copying itself. */
static inline void copy_short(char *dst, const char *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i];
}

/* dir + "/" + name into @out (no separator after the empty top-level
 * path); returns the length, or -1 when out of memory. */
static ssize_t join_into(char **out, size_t *cap, const char *dir, size_t dlen, const char *name,
			 size_t nlen)
{
	size_t need = dlen + nlen + 2;
	if (need > *cap) {
		char *p = realloc(*out, need);
		if (!p)
			return -1;
		*out = p;
		*cap = need;
	}
	char *p = *out;
	copy_short(p, dir, dlen);
	size_t at = dlen;
	if (dlen)
		p[at++] = '/';
	copy_short(p + at, name, nlen);
	p[at + nlen] = '\0';
	return (ssize_t)(at + nlen);
}

static void set_dir_path(struct irec *c, const struct irec *base, const char *names, int *err)
{
	size_t cap = 0;
	ssize_t n = join_into(&c->path, &cap, base->path, base->path_len, names + c->name_off,
			      c->name_len);
	if (n < 0) {
		*err = -ENOMEM;
		free(c->path);
		c->path = NULL;
		return;
	}
	c->path_len = (size_t)n;
}

/*
 * Path of a directory record, cached on it. Iterative: walk up to the
 * first ancestor with a known state, then fill paths back down, so a deep
 * or looping chain costs no stack. Only called once every ancestor is read.
 */
static const struct irec *dir_path(struct iwalk *w, struct irec *r, int *err)
{
	struct irec *chain[PATH_DEPTH_MAX_INODES];
	size_t n = 0;
	struct irec *cur = r;
	while (cur && cur->path_state == 0 && n < PATH_DEPTH_MAX_INODES) {
		cur->path_state = 1;
		chain[n++] = cur;
		if (cur->ino.objectid == OBJ_FIRST_FREE)
			break;
		cur = cur->parent ? find_rec(&w->dirs, cur->parent) : NULL;
	}
	const struct irec *base = NULL;
	if (n && chain[n - 1]->ino.objectid == OBJ_FIRST_FREE) {
		n--;
		if (w->root_path && !(chain[n]->path = strdup(w->root_path)))
			*err = -ENOMEM;
		chain[n]->path_len = w->root_len;
		chain[n]->path_state = 2;
		base = chain[n]->path ? chain[n] : NULL;
	} else if (cur && cur->path_state == 2 && cur->path) {
		base = cur;
	}
	while (n--) {
		struct irec *c = chain[n];
		if (base && !*err)
			set_dir_path(c, base, w->dirs.names, err);
		c->path_state = 2;
		base = c->path ? c : NULL;
	}
	return r->path ? r : NULL;
}

/*
 * Whether the path of an inode named in directory @parent can be settled
 * now: every ancestor up to a settled one has been read, or the chain
 * already breaks (a missing or non-directory parent among those read).
 */
static bool settled(struct iwalk *w, uint64_t parent)
{
	for (int depth = 0; parent && depth < PATH_DEPTH_MAX_INODES; depth++) {
		if (parent > w->seen_max)
			return false;
		const struct irec *d = find_dir(w, parent);
		if (!d || d->path_state == 2 || d->ino.objectid == OBJ_FIRST_FREE)
			return true;
		parent = d->parent;
	}
	return true;
}

static int report(struct iwalk *w, const struct irec *r, const char *name)
{
	struct btrfsimg_inode_entry e = { .inode = r->ino };
	int err = 0;
	if (r->ino.objectid == OBJ_FIRST_FREE) {
		e.path = w->root_path;
		e.path_len = w->root_len;
	} else if (r->parent) {
		struct irec *p = find_dir(w, r->parent);
		const struct irec *d = p ? dir_path(w, p, &err) : NULL;
		ssize_t n = d ? join_into(&w->buf, &w->cap, d->path, d->path_len, name, r->name_len)
			      : 0;
		if (n < 0)
			err = -ENOMEM;
		else if (d) {
			e.path = w->buf;
			e.path_len = (size_t)n;
		}
	}
	if (err)
		return bi_err(w->fs, err, "out of memory building paths");
	e.reachable = e.path != NULL && r->ino.nlink > 0;
	w->stop = w->fn(w->ctx, &e);
	return 0;
}

/* Report waiting inodes, in order, as far as their parents allow (all of
 * them once the tree is read: @final). */
static int drain(struct iwalk *w, bool final)
{
	struct ilist *q = &w->pending;
	size_t i = 0;
	int rc = 0;
	while (rc == 0 && !w->stop && i < q->n && (final || settled(w, q->v[i].parent))) {
		rc = report(w, &q->v[i], q->names + q->v[i].name_off);
		i++;
	}
	if (i == q->n) {
		q->n = 0;
		q->names_len = 0;
	} else if (i) {
		memmove(q->v, q->v + i, (q->n - i) * sizeof(*q->v));
		q->n -= i;
	}
	return rc;
}

/* The current objectid is complete: keep it if it is a directory, then
 * report it now or queue it behind the others waiting. */
static int finish_cur(struct iwalk *w)
{
	if (!w->have_cur)
		return 0;
	w->have_cur = false;
	struct irec *r = &w->cur;
	w->seen_max = r->ino.objectid;
	int rc = 0;
	if (S_ISDIR(r->ino.mode))
		rc = ilist_push(w->fs, &w->dirs, r, w->cur_name);
	if (rc == 0 && w->pending.n == 0 && settled(w, r->parent))
		return report(w, r, (const char *)w->cur_name);
	if (rc == 0)
		rc = ilist_push(w->fs, &w->pending, r, w->cur_name);
	return rc ? rc : drain(w, false);
}

static int take_inode(struct iwalk *w, const struct bi_item *it)
{
	int rc = finish_cur(w);
	if (rc < 0 || w->stop)
		return rc;
	struct btrfsimg_fs *fs = w->fs;
	/* bi_inode_parse fills .ino; a memset of the whole record per inode
	 * showed as 9% of an inodes run */
	struct irec *r = &w->cur;
	r->parent = 0;
	r->name_off = 0;
	r->name_len = 0;
	r->path_state = 0;
	r->path = NULL;
	r->path_len = 0;
	char why[160];
	if (bi_inode_parse(it->data, it->size, w->subvol, it->key.objectid,
			   fs->sb.info.generation + 1, &w->cur.ino, why, sizeof(why)) < 0) {
		/* one bad inode is skipped and reported; the others still count */
		bi_damage(fs, "corrupt inode item: root=%" PRIu64 " block=%" PRIu64 " slot=%u, %s",
			  w->subvol, it->block, it->slot, why);
		return 0;
	}
	w->have_cur = true;
	return 0;
}

/* The first entry of an INODE_REF (key offset = parent) or INODE_EXTREF
 * item: false, with the message in @why, when it is unusable. */
static bool ref_first(const bi_key *key, const uint8_t *data, uint32_t size, uint64_t block,
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

/* First entry of an INODE_REF (key offset = parent) or INODE_EXTREF item. */
static void take_ref(struct iwalk *w, const struct bi_item *it)
{
	if (!w->have_cur || w->cur.ino.objectid != it->key.objectid || w->cur.parent)
		return; /* no inode item before it, or a name is known already */
	uint64_t parent;
	const uint8_t *name;
	uint16_t nlen;
	char why[256];
	if (!ref_first(&it->key, it->data, it->size, it->block, it->slot, w->subvol, &parent, &name,
		       &nlen, why, sizeof(why))) {
		bi_damage(w->fs, "%s", why); /* unusable; a later name may serve */
		return;
	}
	copy_short((char *)w->cur_name, (const char *)name, nlen);
	w->cur.parent = parent;
	w->cur.name_len = nlen;
}

/* A leaf whose keys all lie past one objectid's names and before the next
 * objectid's INODE_ITEM (a large directory's DIR_ITEM and DIR_INDEX runs:
 * a third of a big tree) holds nothing this pass wants. */
static bool only_dir_entries(const bi_key *lo, const bi_key *hi)
{
	if (lo->type <= KT_INODE_EXTREF)
		return false;
	return hi->objectid == lo->objectid ||
	       (hi->objectid == lo->objectid + 1 && hi->type <= KT_INODE_ITEM);
}

static int walk_tree(struct iwalk *w, const struct bi_root *r)
{
	bi_key min = { OBJ_FIRST_FREE, 0, 0 }, max = { OBJ_LAST_FREE, 255, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(w->fs, &it, r, &min, &max);
	bi_iter_skip_leaves(&it, only_dir_entries);
	bi_iter_stream(&it);
	while (rc == 0 && !w->stop && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = 0;
		if (item.key.type == KT_INODE_ITEM)
			rc = take_inode(w, &item);
		else if (item.key.type == KT_INODE_REF || item.key.type == KT_INODE_EXTREF)
			take_ref(w, &item);
	}
	bi_iter_end(&it);
	if (rc == 0 && !w->stop)
		rc = finish_cur(w);
	w->seen_max = UINT64_MAX;
	if (rc == 0 && !w->stop)
		rc = drain(w, true);
	return rc;
}

/* ------------------------------------------------- leaves parsed in parallel
 *
 * The walk above on more than one core. This thread walks the tree's nodes
 * and reads each leaf's copy 0 into a ring of LEAF_RING slots (the handle,
 * its block cache and its devices are used from it alone); worker threads
 * check each leaf as tree.c would (checksum, header, item table, what the
 * parent expects) and parse it into events (an inode item parsed and
 * checked, with its first name when the leaf holds it; a name for an inode
 * of an earlier leaf; a damage message); this thread then plays each
 * leaf's events, in leaf order, through the same state as the walk above.
 * A leaf whose copy 0 could not be read or failed a check is read again
 * here, when its turn comes, through bi_block_read (every copy, the same
 * messages, the same error). The output, the messages and their order are
 * the same; only the checking and the parsing moved.
 *
 *   walk+read: leaf0 leaf1 leaf2 ... (ring)   workers: check, parse -> events
 *   this thread: events of leaf0, leaf1, ... -> finish_cur/report (callback)
 */

#define LEAF_RING 256
#define HOT_RUN	  64
#define HOT_PROBE 16
/* Workers are woken for this many leaves at once, not for each one: a
 * wake-up per leaf cost more in context switches than the parsing saved. */
#define LEAF_BATCH  16
#define WORKERS_MAX 3

enum { EV_INODE, EV_INODE_BAD, EV_DAMAGE, EV_REF };
enum { SLOT_FREE, SLOT_QUEUED, SLOT_PARSING, SLOT_PARSED };

struct lev {
	uint8_t kind;
	uint16_t name_len;	   /* EV_INODE: its first name in this leaf, or 0 */
	uint32_t slot;		   /* EV_REF: the item's */
	uint32_t size;		   /* EV_REF */
	uint32_t msg_off;	   /* EV_INODE_BAD, EV_DAMAGE: into the slot's text */
	uint64_t parent;	   /* EV_INODE */
	const uint8_t *data;	   /* EV_INODE: its name; EV_REF: the item (in the leaf) */
	bi_key key;		   /* EV_REF */
	struct btrfsimg_inode ino; /* EV_INODE */
};

struct lslot {
	/* the leaf's copy 0 as read by the walking thread, checked (checksum,
	 * header, item table, what the parent expects) by the worker */
	struct bi_leaf_ptr at; /* where it is, what its parent expects */
	uint8_t *buf;	       /* the slot's own, nodesize bytes (page-aligned) */
	bool read_ok;	       /* copy 0 was read into buf */
	bool io_done;	       /* read (not in flight): the walking thread's */
	bool fallback;	       /* unread or failed a check: the walking thread
				* reads it through the block cache (every copy,
				* the messages) when it gets there */
	bool held;	       /* leaf is a block cache reference */
	struct bi_block blk;   /* the view of buf once checked */
	struct bi_block *leaf; /* &blk, a cache reference, or NULL */
	uint32_t from;	       /* first slot at or after the walk's start */
	_Atomic int state;     /* SLOT_*: handed between threads */
	int rc;		       /* the parse's: -ENOMEM */
	bool end;	       /* an item past the walk's range: nothing after it */
	bool has_first;	       /* the leaf holds an item in range */
	bi_key first, last;    /* keys of its first and last items in range */
	struct lev *ev;
	size_t nev, evcap;
	char *text;
	size_t text_len, text_cap;
};

struct ipool {
	pthread_mutex_t mu; /* for sleeping only: the ring runs on atomics */
	pthread_cond_t work, done;
	pthread_t th[WORKERS_MAX];
	int nth;
	bool quit;	      /* under mu */
	size_t head;	      /* the next leaf to play (this thread's) */
	size_t issued;	      /* leaves read or being read (>= tail; this thread's) */
	struct bi_aio *aio;   /* leaves not in the page cache read around it, or NULL */
	bool aio_last;	      /* the last leaf went to it: the cache is cold */
	bool aio_refused;     /* a read was refused (EINVAL): none more */
	uint32_t hot;	      /* leaves found in the page cache in a row */
	_Atomic size_t tail;  /* leaves queued so far (ever-growing) */
	_Atomic size_t next;  /* leaves taken by a worker so far */
	_Atomic size_t batch; /* queued leaves a sleeping worker waits for */
	_Atomic int sleepers; /* workers asleep (or about to be) on work */
	_Atomic bool waiting; /* this thread asleep (or about to be) on done */
	/* the walk's constants (set before its first leaf is queued) */
	uint64_t subvol, max_gen;
	bi_key min, max;
	uint32_t nodesize, csum_size;
	int csum_type;
	uint8_t fsid[16];
	struct lslot ring[LEAF_RING];
};

static int slot_text(struct lslot *s, const char *msg, uint32_t *off)
{
	size_t n = strlen(msg) + 1;
	if (s->text_len + n > s->text_cap) {
		size_t cap = s->text_cap ? s->text_cap * 2 : 1024;
		while (cap < s->text_len + n)
			cap *= 2;
		char *t = realloc(s->text, cap);
		if (!t)
			return -ENOMEM;
		s->text = t;
		s->text_cap = cap;
	}
	memcpy(s->text + s->text_len, msg, n);
	*off = (uint32_t)s->text_len;
	s->text_len += n;
	return 0;
}

/* An inode item into an event: parsed and checked, or its message. */
static int parse_inode(const struct ipool *p, struct lslot *s, struct lev *e, const bi_key *k,
		       const uint8_t *d, uint32_t size, uint32_t slot)
{
	char why[160];
	e->parent = 0;
	e->name_len = 0;
	if (bi_inode_parse(d, size, p->subvol, k->objectid, p->max_gen, &e->ino, why,
			   sizeof(why)) == 0) {
		e->kind = EV_INODE;
		return 0;
	}
	char msg[384];
	snprintf(msg, sizeof(msg),
		 "corrupt inode item: root=%" PRIu64 " block=%" PRIu64 " slot=%u, %s", p->subvol,
		 s->leaf->bytenr, slot, why);
	e->kind = EV_INODE_BAD;
	return slot_text(s, msg, &e->msg_off);
}

/* A name item: an event of its own when the inode it names is not in this
 * leaf (the walking thread decides, as take_ref), else settled here: the
 * inode's first name, or a damage message. */
static int parse_ref(const struct ipool *p, struct lslot *s, struct lev *cur, bool known,
		     const bi_key *k, const uint8_t *d, uint32_t size, uint32_t slot)
{
	if (!known) {
		struct lev *e = &s->ev[s->nev++];
		*e = (struct lev){
			.kind = EV_REF, .slot = slot, .size = size, .data = d, .key = *k
		};
		return 0;
	}
	if (!cur || cur->ino.objectid != k->objectid || cur->parent)
		return 0;
	char why[256];
	uint64_t parent;
	const uint8_t *name;
	uint16_t nlen;
	if (ref_first(k, d, size, s->leaf->bytenr, slot, p->subvol, &parent, &name, &nlen, why,
		      sizeof(why))) {
		cur->parent = parent;
		cur->data = name;
		cur->name_len = nlen;
		return 0;
	}
	struct lev *e = &s->ev[s->nev++];
	e->kind = EV_DAMAGE;
	return slot_text(s, why, &e->msg_off);
}

/* One leaf into events (a worker thread: reads the leaf and the pool's
 * constants only). */
static void parse_leaf(const struct ipool *p, struct lslot *s)
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
	 * one per item: directory entries would multiply the ring's memory) */
	size_t want = 0;
	for (uint32_t i = s->from; i < b->nritems; i++) {
		uint8_t type = b->data[HDR_SIZE + (size_t)i * ITEM_SIZE + 8];
		want += type == KT_INODE_ITEM || type == KT_INODE_REF || type == KT_INODE_EXTREF;
	}
	if (s->evcap < want) {
		struct lev *v = realloc(s->ev, want * sizeof(*v));
		if (!v) {
			s->rc = -ENOMEM;
			return;
		}
		s->ev = v;
		s->evcap = want;
	}
	/* the range's end is checked per item only in a leaf that crosses it */
	uint32_t n = b->nritems;
	bi_key k;
	const uint8_t *d;
	uint32_t size;
	bi_leaf_item(b, n - 1, &k, &d, &size);
	bool crosses = bi_key_cmp(&k, &p->max) > 0;
	bool known = false;	/* an inode item of this leaf was met */
	struct lev *cur = NULL; /* its event (NULL: it failed its checks) */
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
			struct lev *e = &s->ev[s->nev++];
			rc = parse_inode(p, s, e, &k, d, size, i);
			known = true;
			cur = e->kind == EV_INODE ? e : NULL;
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

/* First item whose key is >= @target (nritems if none). */
static uint32_t leaf_slot(const struct bi_block *b, const bi_key *target)
{
	uint32_t lo = 0, hi = b->nritems;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		bi_key k;
		bi_key_read(b->data + HDR_SIZE + (size_t)mid * ITEM_SIZE, &k);
		if (bi_key_cmp(&k, target) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The checks tree.c makes of a block it reads (verify_copy), on the
 * slot's copy 0: true when it passes; then the slot's leaf is its view. */
static bool check_copy(const struct ipool *p, struct lslot *s)
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
	s->from = s->at.first ? leaf_slot(s->leaf, &p->min) : 0;
	return true;
}

/* A worker's part of one leaf: check it, parse it. */
static void work_leaf(const struct ipool *p, struct lslot *s)
{
	if (!s->read_ok || !check_copy(p, s)) {
		s->fallback = true;
		return;
	}
	parse_leaf(p, s);
}

/* Take the next queued leaf, if any: its index, or (size_t)-1. */
static size_t take_leaf(struct ipool *p)
{
	size_t n = atomic_load(&p->next);
	while (n < atomic_load(&p->tail))
		if (atomic_compare_exchange_weak(&p->next, &n, n + 1))
			return n;
	return (size_t)-1;
}

static void *worker(void *arg)
{
	struct ipool *p = arg;
	for (;;) {
		size_t n = take_leaf(p);
		if (n != (size_t)-1) {
			struct lslot *s = &p->ring[n % LEAF_RING];
			work_leaf(p, s);
			atomic_store(&s->state, SLOT_PARSED);
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
		while (!p->quit &&
		       atomic_load(&p->tail) - atomic_load(&p->next) < atomic_load(&p->batch))
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
static void pool_wake(struct ipool *p)
{
	if (atomic_load(&p->sleepers) &&
	    atomic_load(&p->tail) - atomic_load(&p->next) >= atomic_load(&p->batch)) {
		pthread_mutex_lock(&p->mu);
		pthread_cond_broadcast(&p->work);
		pthread_mutex_unlock(&p->mu);
	}
}

static void pool_free(struct ipool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->quit = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->nth; i++)
		pthread_join(p->th[i], NULL);
	for (size_t i = 0; i < LEAF_RING; i++) {
		free(p->ring[i].ev);
		free(p->ring[i].text);
		free(p->ring[i].buf);
	}
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* Worker threads for the parsing: one per processor beyond this one (at
 * least one, at most WORKERS_MAX). NULL when none can be had: the walk then
 * parses on this thread. */
static struct ipool *pool_new(void)
{
	struct ipool *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	if (pthread_mutex_init(&p->mu, NULL) != 0) {
		free(p);
		return NULL;
	}
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	atomic_init(&p->batch, LEAF_BATCH);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int want = cpus > 1 ? (int)(cpus - 1) : 1;
	if (want > WORKERS_MAX)
		want = WORKERS_MAX;
	while (p->nth < want && pthread_create(&p->th[p->nth], NULL, worker, p) == 0)
		p->nth++;
	if (p->nth == 0) {
		pool_free(p);
		return NULL;
	}
	return p;
}

/* Play one parsed leaf's events through the walk's state, as walk_tree
 * does with its items. */
static int merge_leaf(struct iwalk *w, const struct bi_root *r, const struct ipool *p,
		      struct lslot *s, bool *started, bi_key *last)
{
	if (s->fallback) { /* as the walk would have read it, messages and all */
		struct bi_expect e = { r->id, s->at.generation, 0, &s->at.first_key };
		int rc = bi_block_read(w->fs, s->at.bytenr, &e, &s->leaf);
		if (rc < 0)
			return rc;
		s->held = true;
		s->from = s->at.first ? leaf_slot(s->leaf, &p->min) : 0;
		parse_leaf(p, s);
	}
	if (s->rc)
		return bi_err(w->fs, s->rc, "out of memory listing inodes");
	if (s->has_first) {
		if (*started && bi_key_cmp(&s->first, last) <= 0)
			return bi_item_err(w->fs, -EUCLEAN, "leaf", r->id, s->leaf->bytenr, s->from,
					   "key (%" PRIu64 " %u %" PRIu64
					   ") not after the previous leaf's (%" PRIu64
					   " %u %" PRIu64 ")",
					   s->first.objectid, s->first.type, s->first.offset,
					   last->objectid, last->type, last->offset);
		*started = true;
		*last = s->last;
	}
	int rc = 0;
	for (size_t i = 0; i < s->nev && rc == 0 && !w->stop; i++) {
		const struct lev *e = &s->ev[i];
		if (e->kind == EV_INODE || e->kind == EV_INODE_BAD) {
			rc = finish_cur(w);
			if (rc < 0 || w->stop)
				break;
		}
		if (e->kind == EV_INODE) {
			struct irec *c = &w->cur;
			c->ino = e->ino;
			c->parent = e->parent;
			c->name_off = 0;
			c->name_len = e->name_len;
			c->path_state = 0;
			c->path = NULL;
			c->path_len = 0;
			copy_short((char *)w->cur_name, (const char *)e->data, e->name_len);
			w->have_cur = true;
		} else if (e->kind == EV_REF) {
			struct bi_item it = { e->key, e->data, e->size, s->leaf->bytenr, e->slot };
			take_ref(w, &it);
		} else {
			bi_damage(w->fs, "%s", s->text + e->msg_off);
		}
	}
	return rc;
}

/* Queue every slot read in order since the last one queued: the workers
 * take them from there. */
static void pool_publish(struct ipool *p)
{
	size_t t0 = atomic_load(&p->tail), t = t0;
	while (t < p->issued && p->ring[t % LEAF_RING].io_done) {
		atomic_store(&p->ring[t % LEAF_RING].state, SLOT_QUEUED);
		t++;
	}
	if (t != t0) {
		atomic_store(&p->tail, t);
		pool_wake(p);
	}
}

/* Read copy 0 of the leaf @at into the next slot, to be queued for the
 * workers once it and those before it are read (a failed read is left to
 * the fallback). A leaf that is not in the page cache is read around it,
 * many in flight, where the image allows (a plain file, aligned); any
 * other, through the page cache here and now. */
static void pool_queue(struct ipool *p, struct btrfsimg_fs *fs, struct bi_leafwalk *lw,
		       const struct bi_leaf_ptr *at)
{
	size_t t = p->issued;
	struct lslot *s = &p->ring[t % LEAF_RING];
	s->at = *at;
	s->leaf = NULL;
	s->held = false;
	s->fallback = false;
	s->io_done = true;
	if (!s->buf && posix_memalign((void **)&s->buf, 4096, p->nodesize) != 0)
		s->buf = NULL;
	p->issued = t + 1;
	p->aio_last = false;
	const struct bi_dev *d;
	uint64_t phys;
	/* after HOT_RUN leaves in a row found in the cache, one in HOT_PROBE is
	 * looked for there: the others are read from it (as they most likely
	 * are there) without a system call each to ask */
	bool probe = p->hot < HOT_RUN || p->hot % HOT_PROBE == 0;
	int cached = 1; /* presumed, between probes */
	if (probe) {
		cached = -1;
		if (s->buf && p->aio && !p->aio_refused &&
		    bi_leaf_where(fs, at->bytenr, p->nodesize, &d, &phys) == 0)
			cached = bi_aio_cached(p->aio, d, phys, p->nodesize);
		if (cached == 0 && bi_aio_submit(p->aio, d, phys, s->buf, p->nodesize, t) == 0) {
			s->io_done = false;
			p->aio_last = true;
			p->hot = 0;
			return;
		}
	}
	if (cached == 1) {
		p->hot++;
	} else { /* read through the page cache: ask it to read ahead again */
		p->hot = 0;
		lw->no_leaf_hints = false;
	}
	s->read_ok = s->buf && bi_read_copy(fs, at->bytenr, s->buf, p->nodesize, 0) == 0;
	pool_publish(p);
}

/* Take the reads that have finished (waiting for one if @wait); a read
 * that failed or came short is made again through the page cache, as if
 * it had been the only way. */
static void pool_reap(struct ipool *p, struct btrfsimg_fs *fs, bool wait)
{
	uint64_t tags[64];
	int res[64];
	unsigned n = bi_aio_reap(p->aio, wait, tags, res, 64);
	for (unsigned i = 0; i < n; i++) {
		struct lslot *s = &p->ring[tags[i] % LEAF_RING];
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
static void pool_wait_head(struct ipool *p)
{
	struct lslot *s = &p->ring[p->head % LEAF_RING];
	if (atomic_load(&s->state) == SLOT_PARSED)
		return;
	atomic_store(&p->batch, 1); /* whatever is queued: this thread waits */
	pool_wake(p);
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->waiting, true);
	while (atomic_load(&s->state) != SLOT_PARSED)
		pthread_cond_wait(&p->done, &p->mu);
	atomic_store(&p->waiting, false);
	pthread_mutex_unlock(&p->mu);
	atomic_store(&p->batch, LEAF_BATCH);
}

/* What to do next: 1 play the head leaf, 2 read one more, 3 look again
 * (a read finished), 0 nothing is left. Reads run ahead of the workers by
 * up to two batches, or as far as the ring goes while the leaves come from
 * the disk; the head is waited for only when the ring is full or the walk
 * is over. */
static int pool_step(struct ipool *p, struct btrfsimg_fs *fs, bool walking)
{
	if (p->aio && bi_aio_inflight(p->aio))
		pool_reap(p, fs, false);
	size_t tail = atomic_load(&p->tail);
	bool room = walking && p->issued - p->head < LEAF_RING;
	if (room && (p->issued - atomic_load(&p->next) < 2 * LEAF_BATCH || p->aio_last))
		return 2;
	if (p->aio)
		bi_aio_flush(p->aio); /* the reads gathered: before this thread turns away */
	if (p->head < tail && atomic_load(&p->ring[p->head % LEAF_RING].state) == SLOT_PARSED)
		return 1;
	if (room)
		return 2;
	if (p->head == p->issued)
		return 0;
	if (p->head >= tail) { /* its read is in flight */
		pool_reap(p, fs, true);
		return 3;
	}
	pool_wait_head(p);
	return 1;
}

/* Take back every leaf still queued: none is handed out any more; those
 * taken are waited for; all are released. */
static void pool_drop(struct ipool *p, struct btrfsimg_fs *fs)
{
	uint64_t tag;
	int res;
	while (p->aio && bi_aio_inflight(p->aio)) /* the buffers: not before */
		bi_aio_reap(p->aio, true, &tag, &res, 1);
	size_t tail = atomic_load(&p->tail);
	size_t taken = atomic_exchange(&p->next, tail);
	for (; p->head < p->issued; p->head++) {
		struct lslot *s = &p->ring[p->head % LEAF_RING];
		if (p->head < taken)
			pool_wait_head(p);
		if (s->held)
			bi_block_put_once(fs, s->leaf);
		s->leaf = NULL;
		s->held = false;
		atomic_store(&s->state, SLOT_FREE);
	}
	/* what was never queued is gone too: no worker may take it */
	atomic_store(&p->next, p->issued);
	atomic_store(&p->tail, p->issued);
}

static int walk_tree_par(struct iwalk *w, const struct bi_root *r, struct ipool *p)
{
	bi_key min = { OBJ_FIRST_FREE, 0, 0 }, max = { OBJ_LAST_FREE, 255, UINT64_MAX };
	struct btrfsimg_fs *fs = w->fs;
	struct bi_leafwalk lw;
	int rc = bi_leafwalk_start(fs, &lw, r, &min, &max, only_dir_entries);
	if (rc < 0)
		return rc;
	if (lw.top == 0) { /* one leaf: nothing to share out */
		bi_leafwalk_end(&lw);
		return walk_tree(w, r);
	}
	/* no leaf is queued: the workers read these after the next one is */
	p->subvol = w->subvol;
	p->max_gen = fs->sb.info.generation + 1;
	p->min = min;
	p->max = max;
	p->csum_type = fs->csum_type;
	p->csum_size = fs->csum_size;
	memcpy(p->fsid, fs->meta_fsid, sizeof(p->fsid));
	if (p->nodesize != fs->nodesize) { /* a pool serves one handle: never */
		for (size_t i = 0; i < LEAF_RING; i++) {
			free(p->ring[i].buf);
			p->ring[i].buf = NULL;
		}
		p->nodesize = fs->nodesize;
	}
	atomic_store(&p->batch, LEAF_BATCH);
	p->aio = bi_aio_open(LEAF_RING);
	p->aio_refused = false;
	p->aio_last = false;
	p->hot = 0;
	/* a leaf is in the cache, or read around it: no hints, unless one is
	 * read through the cache after all (pool_queue) */
	lw.no_leaf_hints = p->aio != NULL;
	bool walking = true, started = false, end = false;
	bi_key last = { 0, 0, 0 };
	int walk_rc = 0;
	char *walk_msg = NULL; /* a failed read's message, for when the merge gets there */
	while (rc == 0 && !w->stop && !end) {
		int what = pool_step(p, fs, walking);
		if (what == 0)
			break;
		if (what == 3)
			continue;
		if (what == 2) {
			struct bi_leaf_ptr at;
			int lr = bi_leafwalk_next_ptr(&lw, &at);
			if (lr > 0) {
				pool_queue(p, fs, &lw, &at);
				continue;
			}
			walking = false;
			atomic_store(&p->batch, 1); /* the last leaves: no full batch */
			pool_wake(p);
			walk_rc = lr;
			if (lr < 0 && !(walk_msg = strdup(fs->err)))
				rc = bi_err(fs, -ENOMEM, "out of memory listing inodes");
			continue;
		}
		struct lslot *s = &p->ring[p->head % LEAF_RING];
		rc = merge_leaf(w, r, p, s, &started, &last);
		end = s->end;
		if (s->held)
			bi_block_put_once(fs, s->leaf);
		s->leaf = NULL;
		s->held = false;
		atomic_store(&s->state, SLOT_FREE);
		p->head++;
	}
	pool_drop(p, fs);
	bi_aio_close(p->aio);
	p->aio = NULL;
	bi_leafwalk_end(&lw);
	if (rc == 0 && !w->stop && !end && walk_rc < 0)
		rc = bi_err(fs, walk_rc, "%s", walk_msg); /* every leaf before it was played */
	free(walk_msg);
	if (rc == 0 && !w->stop)
		rc = finish_cur(w);
	w->seen_max = UINT64_MAX;
	if (rc == 0 && !w->stop)
		rc = drain(w, true);
	return rc;
}

/* The library's error (< 0), else the callback's stop value in *stop. */
static int inodes_of(struct btrfsimg_fs *fs, const struct btrfsimg_subvol *sv,
		     btrfsimg_inode_entry_fn fn, void *ctx, struct ipool **pool, bool *no_pool,
		     int *stop)
{
	struct bi_root r;
	struct iwalk w = { .fs = fs,
			   .subvol = sv->id,
			   .fn = fn,
			   .ctx = ctx,
			   .root_path = sv->deleted ? NULL : sv->path };
	w.root_len = w.root_path ? strlen(w.root_path) : 0;
	int rc = bi_root_find(fs, sv->id, &r);
	/* a tree of one leaf has nothing to share out; a log overlay's items
	 * are merged by the iterator */
	bool par = rc == 0 && r.level > 0 && !bi_overlay_for(fs, r.id);
	if (par && !*pool && !*no_pool && !(*pool = pool_new()))
		*no_pool = true;
	if (rc == 0)
		rc = par && *pool ? walk_tree_par(&w, &r, *pool) : walk_tree(&w, &r);
	*stop = w.stop;
	ilist_free(&w.dirs);
	ilist_free(&w.pending);
	free(w.buf);
	return rc;
}

int btrfsimg_inodes(btrfsimg_fs *fs, uint64_t subvol, btrfsimg_inode_entry_fn fn, void *ctx)
{
	if (!fs || !fn)
		return -EINVAL;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	struct btrfsimg_subvol *v = NULL;
	size_t n = 0;
	int rc = btrfsimg_subvols(fs, &v, &n);
	bool found = false, no_pool = false;
	struct ipool *pool = NULL; /* started with the first tree that needs it */
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (subvol && v[i].id != subvol)
			continue;
		found = true;
		int stop = 0;
		rc = inodes_of(fs, &v[i], fn, ctx, &pool, &no_pool, &stop);
		if (rc < 0 && rc != -ENOMEM && !subvol) {
			/* one damaged subvolume must not hide the others */
			bi_damage(fs, "subvolume %" PRIu64 ": %s", v[i].id, fs->err);
			rc = 0;
		}
		if (stop)
			rc = stop; /* the callback's word ends the walk, as it is */
	}
	if (rc == 0 && subvol && !found)
		rc = bi_err(fs, -ENOENT, "no subvolume %" PRIu64, subvol);
	pool_free(pool);
	btrfsimg_subvols_free(v, n);
	return rc;
}

int btrfsimg_highest_objectid(btrfsimg_fs *fs, uint64_t subvol, uint64_t *out)
{
	if (!fs || !out)
		return -EINVAL;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	struct bi_root r;
	int rc = bi_root_find(fs, subvol, &r);
	if (rc < 0)
		return rc;
	bi_key max = { OBJ_LAST_FREE, 255, UINT64_MAX }, last;
	rc = bi_tree_last(fs, &r, &max, &last);
	if (rc == -ENOENT || (rc == 0 && last.objectid < OBJ_FIRST_FREE)) {
		*out = OBJ_FIRST_FREE;
		return 0;
	}
	if (rc == 0)
		*out = last.objectid;
	return rc;
}
