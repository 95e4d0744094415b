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

#include "image/dev.h"

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

/* ------------------------------------------------------------ scattered
 *
 * Scattered blocks of plain image files (a tree's leaves), many reads in
 * flight. No thread: the caller submits and reaps. Through the page cache
 * by io_uring where there is one and the caller asks for it: any block,
 * cached or not, may be submitted, and what is read stays cached. Else
 * with O_DIRECT (Linux native AIO), for blocks not in the page cache
 * already. A block that is not a plain file's (or, with O_DIRECT, not
 * aligned to ALIGN), or whose read the kernel refuses, is the caller's to
 * read through bi_dev_read. */
struct bi_aio;

/* Room for @depth reads in flight (1 to 1024), or NULL (no memory). Reads
 * go through the page cache (io_uring) if @through_cache and the kernel
 * allows it; else with O_DIRECT by native AIO. */
struct bi_aio *bi_aio_open(unsigned depth, bool through_cache);
/* Whether reads go through the page cache: then a block may be submitted
 * whether it is cached or not, at any offset and length. */
bool bi_aio_buffered(const struct bi_aio *a);
/* Wait for the reads in flight, close the descriptors, free. NULL is fine. */
void bi_aio_close(struct bi_aio *a);
/* Whether [off, off + len) of @d (relative to its base) is all in the page
 * cache: 1 yes, 0 no, < 0 unknown (not a plain file, no map, or a
 * kernel that would not say: mincore() tells only a file's owner or
 * someone who may write it). */
int bi_aio_cached(struct bi_aio *a, const struct bi_dev *d, uint64_t off, size_t len);
/* A descriptor from which [off, off + len) of @d (a block bi_aio_cached
 * found in the page cache) may be read with pread(2) at *@at, on any
 * thread: the copy out of the cache then costs that thread, not the
 * caller. < 0 when there is none (not a plain file, out of range). Valid
 * until bi_aio_close. */
int bi_aio_cached_fd(struct bi_aio *a, const struct bi_dev *d, uint64_t off, size_t len,
		     uint64_t *at);
/* Start reading [off, off + len) of @d into @buf (aligned to 4096, as
 * off + base and len must be), to be reported by bi_aio_reap with @tag.
 * 0, or a negative errno (nothing started: -EINVAL not a plain file or not
 * aligned, -EAGAIN no room). */
int bi_aio_submit(struct bi_aio *a, const struct bi_dev *d, uint64_t off, void *buf, size_t len,
		  uint64_t tag);
/* Start the reads submitted since the last flush (bi_aio_submit gathers
 * them, to start many with one system call; bi_aio_reap flushes before it
 * waits). */
void bi_aio_flush(struct bi_aio *a);
/* Reads finished (at least one if @wait and some are in flight), at most
 * @max: their tags, and the bytes read (fewer than asked at the file's
 * end) or a negative errno each. */
unsigned bi_aio_reap(struct bi_aio *a, bool wait, uint64_t *tags, int *res, unsigned max);
/* Reads in flight. */
unsigned bi_aio_inflight(const struct bi_aio *a);

#endif
