// SPDX-License-Identifier: MIT
#include "common/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "btrfsimg_inum.h"

struct sv_total {
	uint64_t id, before, inodes;
};

/* The CLI is single-threaded where it reports progress: file-local state. */
static int enabled = -1;
static bool shown;
static struct timespec start, last;
static double total;			/* 0: unknown */
static struct sv_total *subvols;	/* for progress_tick_at, id order */
static size_t nsubvols, cursor;

static bool wanted(void)
{
	if (enabled < 0)
		enabled = isatty(2);
	return enabled;
}

static double since(const struct timespec *t, const struct timespec *now)
{
	return (double)(now->tv_sec - t->tv_sec) + (double)(now->tv_nsec - t->tv_nsec) / 1e9;
}

void progress_inodes_total(btrfsimg_fs *fs, uint64_t subvol, bool nested)
{
	struct btrfsimg_subvol *v;
	size_t n;
	if (!wanted() || btrfsimg_subvols(fs, &v, &n) < 0)
		return;
	free(subvols);
	subvols = calloc(n + 1, sizeof(*subvols));
	nsubvols = cursor = 0;
	total = 0;
	for (size_t i = 0; subvols && i < n; i++) {
		bool in = subvol == 0 || v[i].id == subvol;
		if (!in && nested && v[i].path && !v[i].deleted)
			in = btrfsimg_subvol_depth(v, n, subvol, v[i].id) > 0;
		uint64_t high;
		if (!in || btrfsimg_highest_objectid(fs, v[i].id, &high) < 0)
			continue;
		subvols[nsubvols++] = (struct sv_total){ v[i].id, (uint64_t)total, high - 255 };
		total += (double)(high - 255);
	}
	btrfsimg_subvols_free(v, n);
	clock_gettime(CLOCK_MONOTONIC, &start);
}

/* "0:13", "1:02:03". */
static void put_time(double s)
{
	unsigned long t = (unsigned long)(s + 0.5);
	if (t >= 3600)
		fprintf(stderr, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
	else
		fprintf(stderr, "%lu:%02lu", t / 60, t % 60);
}

void progress_tick(const char *what, uint64_t count, double done)
{
	if (!wanted() || (count & 255))
		return;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (shown && since(&last, &now) < 0.1)
		return;
	if (!shown && !total)
		start = now;
	last = now;
	shown = true;
	fprintf(stderr, "\r%s: %llu", what, (unsigned long long)count);
	if (total > 0) {
		double f = done / total;
		if (f > 0.99)
			f = 0.99; /* an estimate: 100% is when it ends */
		fprintf(stderr, ", %d%% of about %.0f inodes", (int)(f * 100), total);
		double t = since(&start, &now);
		if (t >= 1 && f >= 0.005) {
			fputs(", ", stderr);
			put_time(t * (1 - f) / f);
			fputs(" left", stderr);
		}
	}
	fputs("\033[K", stderr);
}

void progress_tick_at(const char *what, uint64_t count, uint64_t subvol, uint64_t objectid)
{
	if (!wanted() || (count & 255))
		return;
	while (cursor < nsubvols && subvols[cursor].id < subvol)
		cursor++;
	double done = 0;
	if (cursor < nsubvols && subvols[cursor].id == subvol) {
		uint64_t in = objectid > 255 ? objectid - 255 : 0;
		if (in > subvols[cursor].inodes)
			in = subvols[cursor].inodes;
		done = (double)(subvols[cursor].before + in);
	} else if (cursor > 0) {
		done = (double)(subvols[cursor - 1].before + subvols[cursor - 1].inodes);
	}
	progress_tick(what, count, done);
}

void progress_bytes(const char *what, uint64_t done, uint64_t all)
{
	if (!wanted())
		return;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (!shown)
		start = now;
	else if (since(&last, &now) < 0.1 && done < all)
		return;
	last = now;
	shown = true;
	double f = all ? (double)done / (double)all : 0, t = since(&start, &now);
	if (!all) {
		fprintf(stderr, "\r%s: %.0f MiB\033[K", what, (double)done / 1048576.0);
		return;
	}
	fprintf(stderr, "\r%s: %.0f of %.0f MiB, %d%%", what, (double)done / 1048576.0,
		(double)all / 1048576.0, (int)(f * 100));
	if (t >= 1)
		fprintf(stderr, ", %.0f MiB/s", (double)done / 1048576.0 / t);
	if (t >= 1 && f >= 0.005 && f < 1) {
		fputs(", ", stderr);
		put_time(t * (1 - f) / f);
		fputs(" left", stderr);
	}
	fputs("\033[K", stderr);
}

void progress_done(void)
{
	if (shown)
		fputs("\r\033[K", stderr);
	shown = false;
	free(subvols);
	subvols = NULL;
	nsubvols = cursor = 0;
	total = 0;
}
