/* SPDX-License-Identifier: MIT */
/*
 * Two-thread batch handoff (see handoff.h). Three batches circulate: the
 * one being filled, at most one waiting, and the one being written, so the
 * reader only waits when the writer is a whole batch behind.
 */
#include "common/handoff.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A batch holds up to BATCH_RECS records and at most BATCH_BYTES of them,
 * so larger records (walk's) do not multiply the memory held. */
#define BATCH_RECS 32768
#define BATCH_BYTES (4u << 20)
#define NBATCH 3

struct batch {
	char *recs;
	size_t n;
	char *bytes;
	size_t nbytes, cap;
};

struct handoff {
	size_t rec_size, batch_recs;
	handoff_fn fn;
	void *ctx;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct batch b[NBATCH];
	struct batch *free_[NBATCH];	/* empty batches */
	size_t nfree;
	struct batch *ready;		/* full, waiting for the writer */
	struct batch *fill;		/* being filled by the reader */
	bool done;
};

static void *writer(void *arg)
{
	struct handoff *h = arg;
	pthread_mutex_lock(&h->mu);
	for (;;) {
		while (!h->ready && !h->done)
			pthread_cond_wait(&h->cv, &h->mu);
		struct batch *b = h->ready;
		if (!b)
			break;
		h->ready = NULL;
		pthread_cond_broadcast(&h->cv);
		pthread_mutex_unlock(&h->mu);
		h->fn(h->ctx, b->recs, b->n, b->bytes);
		b->n = 0;
		b->nbytes = 0;
		pthread_mutex_lock(&h->mu);
		h->free_[h->nfree++] = b;
		pthread_cond_broadcast(&h->cv);
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

static void batches_free(struct handoff *h)
{
	for (int i = 0; i < NBATCH; i++) {
		free(h->b[i].recs);
		free(h->b[i].bytes);
	}
}

struct handoff *handoff_start(size_t rec_size, handoff_fn fn, void *ctx)
{
	struct handoff *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	size_t recs = BATCH_BYTES / (rec_size ? rec_size : 1);
	if (recs > BATCH_RECS)
		recs = BATCH_RECS;
	*h = (struct handoff){ .rec_size = rec_size, .batch_recs = recs ? recs : 1, .fn = fn,
			       .ctx = ctx };
	for (int i = 0; i < NBATCH; i++) {
		h->b[i].recs = malloc(rec_size * h->batch_recs);
		if (!h->b[i].recs) {
			batches_free(h);
			free(h);
			return NULL;
		}
	}
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	h->fill = &h->b[0];
	h->free_[0] = &h->b[1];
	h->free_[1] = &h->b[2];
	h->nfree = 2;
	if (pthread_create(&h->thread, NULL, writer, h) != 0) {
		pthread_mutex_destroy(&h->mu);
		pthread_cond_destroy(&h->cv);
		batches_free(h);
		free(h);
		return NULL;
	}
	return h;
}

/* Give the full batch to the writer and take an empty one. */
static void pass_on(struct handoff *h)
{
	pthread_mutex_lock(&h->mu);
	while (h->ready || !h->nfree)
		pthread_cond_wait(&h->cv, &h->mu);
	h->ready = h->fill;
	h->fill = h->free_[--h->nfree];
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

void *handoff_next(struct handoff *h, size_t nbytes, char **bytes, uint32_t *off)
{
	if (h->fill->n == h->batch_recs || h->fill->nbytes + nbytes > UINT32_MAX)
		pass_on(h);
	struct batch *b = h->fill;
	if (!b->bytes || b->nbytes + nbytes > b->cap) { /* never NULL, even for 0 bytes */
		size_t cap = b->cap ? b->cap : 65536;
		while (cap < b->nbytes + nbytes)
			cap *= 2;
		char *p = realloc(b->bytes, cap);
		if (!p)
			return NULL;
		b->bytes = p;
		b->cap = cap;
	}
	*bytes = b->bytes + b->nbytes;
	*off = (uint32_t)b->nbytes;
	b->nbytes += nbytes;
	return b->recs + h->rec_size * b->n++;
}

void handoff_finish(struct handoff *h)
{
	if (!h)
		return;
	if (h->fill->n)
		pass_on(h);
	pthread_mutex_lock(&h->mu);
	h->done = true;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	pthread_join(h->thread, NULL);
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->cv);
	batches_free(h);
	free(h);
}
