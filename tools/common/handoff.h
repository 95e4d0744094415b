/* SPDX-License-Identifier: MIT */
/*
 * Hand records from the thread that reads the image to a second thread that
 * formats and writes them, in batches, in order. For commands whose output
 * is as costly as the reading (inodes: a million JSON lines), so both cores
 * work. Records are fixed-size structs plus bytes of variable length (paths)
 * kept in the batch's arena and addressed by offset.
 */
#ifndef BTRFSIMG_TOOLS_HANDOFF_H
#define BTRFSIMG_TOOLS_HANDOFF_H

#include <stddef.h>
#include <stdint.h>

struct handoff;

/* Called on the second thread with each full batch, in order. */
typedef void (*handoff_fn)(void *ctx, const void *recs, size_t n, const char *bytes);

/* NULL when out of memory or no thread can be started: the caller then
 * formats inline. */
struct handoff *handoff_start(size_t rec_size, handoff_fn fn, void *ctx);
/* Room for one record and @nbytes of its variable part (written at
 * *bytes, addressed later as offset *off into the batch's bytes). NULL
 * when out of memory. */
void *handoff_next(struct handoff *h, size_t nbytes, char **bytes, uint32_t *off);
/* Flush the last batch, wait for the second thread, free everything. */
void handoff_finish(struct handoff *h);

#endif
