/* SPDX-License-Identifier: MIT */
/*
 * Reading a whole device once, in order, in large pieces, around the page
 * cache (O_DIRECT), with reads kept in flight ahead of the caller: for the
 * passes that read every byte of a device (the forensic scan, offline
 * scrub). They would otherwise run at the page cache's pace, wait for
 * each read before checking it, and evict everything else from the cache.
 *
 * Two reading threads fill a ring of buffers with the ranges the caller
 * asked for, in the order asked, while the caller checks the oldest.
 * Only a plain image file is read this way (nothing between the file and
 * the filesystem but a byte offset); a container, a volume layer, memory
 * or a callback is read by the caller through bi_dev_read, as is any range
 * the ring could not read (bi_dev_read then says why, naming the device
 * and the range). Nothing is ever written.
 */
#ifndef BI_DIRECT_H
#define BI_DIRECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "1-image/dev.h"

struct bi_ring;

/* A ring of @depth buffers (2 to 16) of @maxlen bytes (at most 256 MiB)
 * reading device @d, or NULL when there is none to have (not a plain image
 * file, no memory, no thread): read through bi_dev_read then. The file is
 * opened again with O_DIRECT; where that is refused (a filesystem without
 * it) or @cached, the ring reads the open file through the page cache. */
struct bi_ring *bi_ring_open(const struct bi_dev *d, size_t maxlen, unsigned depth, bool cached);
/* Stop the thread (waiting for the read under way) and free. NULL is fine. */
void bi_ring_close(struct bi_ring *r);
/* Whether another range may be submitted (fewer than depth outstanding,
 * counting the one the caller holds). */
bool bi_ring_room(const struct bi_ring *r);
/* Queue [off, off + len) of the device (relative to its base) to be read.
 * 0, -EAGAIN when there is no room, -EINVAL when len > maxlen. A range
 * outside the device is queued too and then fails in bi_ring_next. */
int bi_ring_submit(struct bi_ring *r, uint64_t off, size_t len);
/* The oldest range submitted (the one the caller held before is given
 * back first): 0 with *data pointing at its len bytes, valid until the
 * next bi_ring_next or bi_ring_close; or a negative errno when it could
 * not be read whole (the caller then reads it through bi_dev_read, which
 * says why); -ENOENT when nothing is queued. */
int bi_ring_next(struct bi_ring *r, const uint8_t **data);
/* Give back the range bi_ring_next last returned (its bytes are gone), so
 * that its slot can be submitted again; bi_ring_next does it too. */
void bi_ring_release(struct bi_ring *r);
/* Whether the ring reads with O_DIRECT (for tests and benches). */
bool bi_ring_direct(const struct bi_ring *r);

#endif
