/* SPDX-License-Identifier: MIT */
/*
 * The report of every scheme (btrfsimg_collide_all): the schemes, in the
 * order btrfsimg_inum.h gives them, counted by the engine (collide.c) on
 * two threads, and the summary of the inumbits range. Apart from the
 * engine because it is a driver: the threads share nothing but the next
 * scheme to take, and each writes its own result.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "btrfsimg_inum.h"
#include "inum/collide.h"

#include "base/err.h"
#include "inum/schemes.h"
#include "inum/trie.h"

void btrfsimg_collide_report_free(struct btrfsimg_collide_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; r->results && i < r->nresults; i++)
		btrfsimg_collide_result_clear(&r->results[i]);
	free(r->results);
	free(r);
}

/* The i-th scheme of a report (see btrfsimg_collide_report). */
static struct btrfsimg_scheme report_scheme(size_t i)
{
	if (i == 0)
		return (struct btrfsimg_scheme){ 0, false, BTRFSIMG_NUMDEVS_1 };
	if (i == 1)
		return (struct btrfsimg_scheme){ 0, true, BTRFSIMG_NUMDEVS_1 };
	if (i < 2 + 33)
		return (struct btrfsimg_scheme){ (unsigned)(32 + i - 2), false,
						 BTRFSIMG_NUMDEVS_1 };
	if (i < 2 + 66)
		return (struct btrfsimg_scheme){ (unsigned)(32 + i - 35), false,
						 BTRFSIMG_NUMDEVS_2 };
	return (struct btrfsimg_scheme){ 0, false, BTRFSIMG_NUMDEVS_MANY };
}

static void summarise(struct btrfsimg_collide_report *r)
{
	for (size_t i = 2; i < 2 + 66; i++) {
		const struct btrfsimg_collide_result *x = &r->results[i];
		bool two = x->scheme.numdevs == BTRFSIMG_NUMDEVS_2;
		unsigned *fr = two ? &r->min_free_n2 : &r->min_free_n1;
		unsigned *pr = two ? &r->min_proven_n2 : &r->min_proven_n1;
		if (!x->groups && !*fr)
			*fr = x->scheme.inumbits;
		if (x->proven && !*pr)
			*pr = x->scheme.inumbits;
	}
}

/* The schemes of a report, shared out between threads: each takes the
 * next scheme not taken yet; they read the input only and write their own
 * result. The first error is kept. */
struct all_job {
	const struct btrfsimg_collide_input *in;
	const struct btrfsimg_collide_opts *o;
	const struct bi_collide_stats *st;
	struct btrfsimg_collide_report *r;
	pthread_mutex_t mu;
	size_t next;
	int rc;
};

static void *all_worker(void *arg)
{
	struct all_job *j = arg;
	for (;;) {
		pthread_mutex_lock(&j->mu);
		size_t i = j->rc ? BTRFSIMG_COLLIDE_SCHEMES : j->next++;
		pthread_mutex_unlock(&j->mu);
		if (i >= BTRFSIMG_COLLIDE_SCHEMES)
			return NULL;
		struct btrfsimg_scheme s = report_scheme(i);
		int rc = bi_collide_run(j->in, &s, j->o, j->st, &j->r->results[i], NULL, NULL);
		if (rc) {
			pthread_mutex_lock(&j->mu);
			if (!j->rc)
				j->rc = rc;
			pthread_mutex_unlock(&j->mu);
		}
	}
}

/* Two threads (the schemes are independent; a few of them hold nearly all
 * the work on snapshot-heavy images), or one where a second cannot start. */
#define COLLIDE_THREADS 2

int btrfsimg_collide_all(const struct btrfsimg_collide_input *in,
			 const struct btrfsimg_collide_opts *o,
			 struct btrfsimg_collide_report **out, char *err, size_t errlen)
{
	struct btrfsimg_collide_report *r = NULL;
	struct bi_collide_stats st;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	rc = bi_collide_input_ok(in, BI_COLLIDE_MAX_SUBVOLS, &st, err, errlen);
	if (rc)
		return rc;
	rc = -ENOMEM;
	r = calloc(1, sizeof(*r));
	if (!r || !(r->results = calloc(BTRFSIMG_COLLIDE_SCHEMES, sizeof(*r->results))))
		goto out;
	for (size_t i = 0; i < BTRFSIMG_COLLIDE_SCHEMES; i++)
		r->results[i].scheme = report_scheme(i);
	r->nresults = BTRFSIMG_COLLIDE_SCHEMES;
	struct all_job j = { .in = in, .o = o, .st = &st, .r = r };
	pthread_t t[COLLIDE_THREADS - 1];
	size_t nt = 0;
	pthread_mutex_init(&j.mu, NULL);
	while (nt < COLLIDE_THREADS - 1 && pthread_create(&t[nt], NULL, all_worker, &j) == 0)
		nt++;
	all_worker(&j);
	for (size_t i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	pthread_mutex_destroy(&j.mu);
	rc = j.rc;
	if (rc)
		goto out;
	summarise(r);
	*out = r;
	r = NULL;
out:
	if (rc == -ENOMEM)
		bi_msg(err, errlen, -ENOMEM, "out of memory counting collisions");
	btrfsimg_collide_report_free(r);
	return rc;
}
