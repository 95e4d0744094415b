/* SPDX-License-Identifier: MIT */
/*
 * The worker pool behind the inode enumeration's parallel walk (private
 * to src/files): the ring of leaves, their events, and what inode_enum.c
 * calls to fill and drain it. Apart so that the walk's state machine
 * (inode_enum.c) and the threads that feed it each stay readable on their own.
 *
 * Threads: bi_ipool_new starts the workers; every other function here is
 * called by the one walking thread, which alone touches the handle.
 */
#ifndef BI_INODES_POOL_H
#define BI_INODES_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"
#include "base/key.h"
#include "btrfs/leafwalk.h"
#include "btrfs/tree.h"

#define IPOOL_RING 256
/* Workers are woken for this many leaves at once, not for each one: a
 * wake-up per leaf cost more in context switches than the parsing saved. */
#define IPOOL_BATCH	  16
#define IPOOL_WORKERS_MAX 3

enum { IEV_INODE, IEV_INODE_BAD, IEV_DAMAGE, IEV_REF };
enum { ISLOT_FREE, ISLOT_QUEUED, ISLOT_PARSING, ISLOT_PARSED };

/* One event per inode: the walking thread reads those of a worker's leaf
 * from the other core's cache, so what only a name item's event needs
 * shares the inode's room (176 bytes, not 208). */
struct bi_iev {
	uint8_t kind;
	bool name_bad;	   /* IEV_INODE: bi_name_problem finds fault with the name */
	uint16_t name_len; /* IEV_INODE: its first name in this leaf, or 0 */
	uint32_t msg_off;  /* into the slot's text: IEV_INODE_BAD, IEV_DAMAGE
			    * the message; IEV_INODE its name (name_len) */
	uint64_t parent;   /* IEV_INODE */
	union {
		struct btrfsimg_inode ino;   /* IEV_INODE */
		struct {		     /* IEV_REF */
			uint32_t slot, size; /* the item's */
			const uint8_t *data; /* the item (in the leaf) */
			bi_key key;
		} ref;
	};
};

struct bi_islot {
	/* the leaf's copy 0 as read by the walking thread, checked (checksum,
	 * header, item table, what the parent expects) by the worker */
	struct bi_leaf_ptr at; /* where it is, what its parent expects */
	uint8_t *buf;	       /* the slot's own, nodesize bytes (page-aligned) */
	bool read_ok;	       /* copy 0 was read into buf */
	int rfd;	       /* >= 0: the worker reads copy 0 (cached) from
				* this descriptor at roff, before its checks */
	uint64_t roff;
	bool io_done;	       /* read (not in flight): the walking thread's */
	bool mine;	       /* read, checked and parsed by the walking thread */
	bool fallback;	       /* unread or failed a check: the walking thread
				* reads it through the block cache (every copy,
				* the messages) when it gets there */
	bool held;	       /* leaf is a block cache reference */
	struct bi_block blk;   /* the view of buf once checked */
	struct bi_block *leaf; /* &blk, a cache reference, or NULL */
	uint32_t from;	       /* first slot at or after the walk's start */
	_Atomic int state;     /* ISLOT_*: handed between threads */
	int rc;		       /* the parse's: -ENOMEM */
	bool end;	       /* an item past the walk's range: nothing after it */
	bool has_first;	       /* the leaf holds an item in range */
	bi_key first, last;    /* keys of its first and last items in range */
	struct bi_iev *ev;
	size_t nev, evcap;
	char *text;
	size_t text_len, text_cap;
};

struct bi_ipool {
	pthread_mutex_t mu; /* for sleeping only: the ring runs on atomics */
	pthread_cond_t work, done;
	pthread_t th[IPOOL_WORKERS_MAX];
	int nth;
	bool quit;	      /* under mu */
	size_t head;	      /* the next leaf to play (this thread's) */
	size_t issued;	      /* leaves read or being read (>= tail; this thread's) */
	struct bi_aio *aio;   /* leaves not in the page cache read around it, or NULL */
	bool aio_last;	      /* the last leaf went to it: the cache is cold */
	bool mine_last;	      /* the last leaf was parsed here: play it now */
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
	/* the buffers of a leaf parsed here (buf, ev, text), lent to its slot
	 * until it is played: the same few pages leaf after leaf stay in the
	 * cache, where the ring's would come back cold */
	struct bi_islot spare;
	struct bi_islot ring[IPOOL_RING];
};

/* The first entry of an INODE_REF (key offset = parent) or INODE_EXTREF
 * item: false, with the message in @why, when it is unusable. @name_out
 * points into @data. */
bool bi_ipool_ref_first(const bi_key *key, const uint8_t *data, uint32_t size, uint64_t block,
			uint32_t slot, uint64_t subvol, uint64_t *parent_out,
			const uint8_t **name_out, uint16_t *nlen_out, char *why, size_t whylen);

/* Worker threads: one per processor beyond this one (at least one, at most
 * IPOOL_WORKERS_MAX). NULL when none can be had. Freed by bi_ipool_free
 * (NULL is fine), which stops and joins them. */
struct bi_ipool *bi_ipool_new(void);
void bi_ipool_free(struct bi_ipool *p);

/* Wake the workers if some sleep and enough is queued for them. */
void bi_ipool_wake(struct bi_ipool *p);

/* Read copy 0 of the leaf @at into the next slot of the ring, to be queued
 * for the workers once it and those before it are read. */
void bi_ipool_queue(struct bi_ipool *p, struct btrfsimg_fs *fs, struct bi_leafwalk *lw,
		    const struct bi_leaf_ptr *at);

/* What bi_ipool_step says to do next. */
enum bi_ipool_next {
	BI_IPOOL_DONE = 0,  /* nothing is left */
	BI_IPOOL_PLAY = 1,  /* play the head leaf (parsed) */
	BI_IPOOL_READ = 2,  /* read one more leaf (bi_ipool_queue) */
	BI_IPOOL_AGAIN = 3, /* look again: a read finished */
};
enum bi_ipool_next bi_ipool_step(struct bi_ipool *p, struct btrfsimg_fs *fs, bool walking);

/* The head slot played: released (its block cache reference put, what
 * it was lent given back) and the head moved on. */
void bi_ipool_done(struct bi_ipool *p, struct btrfsimg_fs *fs);

/* Take back every leaf still queued, waiting for those taken; all slots
 * are released (block cache references put). */
void bi_ipool_drop(struct bi_ipool *p, struct btrfsimg_fs *fs);

/* One checked leaf (@s->leaf from @s->from) into events: on a worker, or
 * on the walking thread for a leaf read again through the block cache. */
void bi_ipool_parse_leaf(const struct bi_ipool *p, struct bi_islot *s);

#endif
