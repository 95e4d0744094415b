// SPDX-License-Identifier: MIT
#include "progress.h"

#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static int enabled = -1;	/* the CLI is single-threaded: file-local state is fine */
static bool shown;
static struct timespec last;

void progress_tick(const char *what, uint64_t done)
{
	if (enabled < 0)
		enabled = isatty(2);
	if (!enabled || (done & 255))
		return;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long ms = (now.tv_sec - last.tv_sec) * 1000 + (now.tv_nsec - last.tv_nsec) / 1000000;
	if (shown && ms < 100)
		return;
	last = now;
	shown = true;
	fprintf(stderr, "\r%s: %llu", what, (unsigned long long)done);
}

void progress_done(void)
{
	if (shown)
		fputs("\r\033[K", stderr);
	shown = false;
}
