/* SPDX-License-Identifier: MIT */
/*
 * Reading a whole device once, in large pieces, around the page cache
 * (O_DIRECT): for passes that read every allocated byte of a device
 * (offline scrub) and would otherwise run at the page cache's pace and
 * evict everything else from it.
 */
#ifndef BI_DIRECT_H
#define BI_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include "1-image/dev.h"

struct bi_direct;

/* A direct reader of device @d for reads of at most @maxlen bytes, or
 * NULL when there is none to have (not a plain image file, a container or
 * volume layer in between, O_DIRECT refused, no memory): read through
 * bi_dev_read then. */
struct bi_direct *bi_direct_open(const struct bi_dev *d, size_t maxlen);
void bi_direct_close(struct bi_direct *r);
/* Read [off, off + len) of the device (relative to its base, len <=
 * maxlen); *data points at the bytes, inside the reader's buffer, until
 * the next call. 0, or a negative errno (short, failed or out of range):
 * the caller then reads through bi_dev_read, which says why. */
int bi_direct_read(struct bi_direct *r, uint64_t off, size_t len, const uint8_t **data);
/* Start reading [off, off + len) in the background (POSIX AIO) into the
 * buffer the last read did not return, so the next bi_direct_read of
 * exactly that range waits only for what is left of it. A hint: does
 * nothing when a read is already under way or the range is out of bounds. */
void bi_direct_ahead(struct bi_direct *r, uint64_t off, size_t len);

#endif
