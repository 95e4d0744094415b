/* SPDX-License-Identifier: MIT */
/*
 * qcow2 bounds, checked before libqcow reads: libqcow 20201213 copies a
 * whole cluster out of a buffer that holds only what the file had, so a
 * cluster that the L2 table places past the end of the file (a truncated
 * or hostile image) overflows its heap (found by fuzz_container). Here
 * every cluster a read touches is looked up in the image's own L1/L2
 * tables (QEMU docs/interop/qcow2.txt) and must lie inside the file; the
 * header's table sizes are bounded before anything is allocated.
 * This checks; libqcow still does the reading.
 */
#ifndef BI_QCHECK_H
#define BI_QCHECK_H

#include <stddef.h>
#include <stdint.h>

struct bi_qcheck;

/* Read the header and the L1 table of @path (fd @fd, borrowed). 0, or a
 * negative errno with the reason in @err (-EOPNOTSUPP for version 1). */
int bi_qcheck_open(struct bi_qcheck **out, int fd, const char *path, char *err, size_t errlen);
void bi_qcheck_free(struct bi_qcheck *q);
/* Every cluster of [off, off+len) that the image holds lies inside its
 * file; else -EIO naming the cluster, its table entry and the file's size. */
int bi_qcheck_range(struct bi_qcheck *q, uint64_t off, uint64_t len, char *err, size_t errlen);

/* The fast path for [off, off+len) of an image without a backing file
 * (a part of a cluster through a one-cluster bounce buffer): compressed clusters inflated by ISA-L
 * (raw deflate, as QEMU writes them), others read straight from the file, unallocated and zero
 * clusters as zeros. 0 when served; 1 when the caller should read through libqcow (an incompatible
 * feature, an inflate error: libqcow then reports it). Call bi_qcheck_range first. */
int bi_qcheck_fast(struct bi_qcheck *q, uint64_t off, uint8_t *buf, size_t len);

#endif
