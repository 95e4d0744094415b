/* SPDX-License-Identifier: MIT */
/*
 * qcow2 bounds before libqcow reads (see qcow_bounds.h). The layout, from QEMU
 * docs/interop/qcow2.txt (all big-endian):
 *
 *   header  0 magic "QFI\xfb"   4 version (2, 3)    20 cluster_bits
 *          24 size (virtual)   36 l1_size          40 l1_table_offset
 *   the L1 table maps l1_size << (2 * cluster_bits - 3) bytes >= size
 *   virtual cluster c:  L1[c >> (cluster_bits - 3)] -> L2 table offset
 *                       L2[c & (2^(cluster_bits-3) - 1)] -> cluster
 *   L1/L2 entry bits 9..55: offset; L2 bit 62: compressed, then
 *   x = 62 - (cluster_bits - 8): bits 0..x-1 the byte offset of the data,
 *   bits x..61 the number of 512-byte sectors it spans, less one.
 */
#include <errno.h>
#include <isa-l/igzip_lib.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cursor.h"
#include "image/qcow_bounds.h"

/* L1 tables above this are refused (QEMU's own limit: QCOW_MAX_L1_SIZE). */
#define QC_MAX_L1_BYTES (32u << 20)
#define QC_OFF_MASK	0x00fffffffffffe00ull

struct bi_qcheck {
	int fd;
	const char *path;
	uint64_t fsize;
	unsigned cbits;
	uint64_t csize;
	uint64_t *l1;
	uint32_t l1n;
	uint64_t *l2;  /* the L2 table last read, csize / 8 entries */
	uint64_t l2at; /* its file offset; 0: none */
	/* version 2, or 3 with no incompatible feature but the dirty and
	 * corrupt bits: bi_qcheck_fast applies */
	bool fast;
	uint8_t *cbuf;	/* a compressed cluster's bytes */
	uint8_t *tmp;	/* one cluster, for reads of part of one */
	uint64_t tmp_c; /* which (cluster number + 1; 0: none) */
	struct inflate_state *inf;
};

static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t r = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		done += (size_t)r;
	}
	return 0;
}

static int header(struct bi_qcheck *q, uint64_t *l1off, char *err, size_t errlen)
{
	uint8_t h[72];
	if (q->fsize < sizeof(h) || pread_all(q->fd, h, sizeof(h), 0) < 0) {
		snprintf(err, errlen,
			 "qcow image '%s': header unreadable (file of %" PRIu64 " bytes)", q->path,
			 q->fsize);
		return -EIO;
	}
	uint32_t version = bi_be32(h + 4);
	q->cbits = bi_be32(h + 20);
	q->l1n = bi_be32(h + 36);
	*l1off = bi_be64(h + 40);
	if (version != 2 && version != 3) {
		snprintf(err, errlen,
			 "qcow image '%s': version %" PRIu32 " not supported (2 and 3 are)",
			 q->path, version);
		return -EOPNOTSUPP;
	}
	if (q->cbits < 9 || q->cbits > 21) {
		snprintf(err, errlen,
			 "qcow image '%s': cluster_bits %u, expect 9..21 (header byte 20)", q->path,
			 q->cbits);
		return -EUCLEAN;
	}
	q->csize = 1ull << q->cbits;
	/* incompatible features (version 3, byte 72) */
	uint8_t f8[8];
	q->fast = version == 2 ||
		  (pread_all(q->fd, f8, sizeof(f8), 72) == 0 && (bi_be64(f8) & ~3ull) == 0);
	uint64_t l1bytes = (uint64_t)q->l1n * 8;
	if (l1bytes > QC_MAX_L1_BYTES || *l1off > q->fsize || l1bytes > q->fsize - *l1off) {
		snprintf(err, errlen,
			 "qcow image '%s': L1 table of %" PRIu32 " entries at offset %" PRIu64
			 " does not fit in the file (%" PRIu64 " bytes; at most %u entries)",
			 q->path, q->l1n, *l1off, q->fsize, QC_MAX_L1_BYTES / 8);
		return -EUCLEAN;
	}
	/* Each L1 entry maps csize / 8 clusters; QEMU refuses an image whose
	 * L1 table cannot map its virtual size ("L1 table is too small"),
	 * and so is it here: a size no table maps is a forged one, and
	 * would drive unbounded work (verify-image hashes every byte). At
	 * most 2^22 entries of 2^39 bytes: no overflow. */
	uint64_t vsize = bi_be64(h + 24);
	uint64_t maps = (uint64_t)q->l1n << (2 * q->cbits - 3);
	if (vsize > maps) {
		snprintf(err, errlen,
			 "qcow image '%s': virtual size %" PRIu64 " (header byte 24) is more than "
			 "its L1 table maps: %" PRIu32 " entries of %" PRIu64 " bytes = %" PRIu64,
			 q->path, vsize, q->l1n, (uint64_t)1 << (2 * q->cbits - 3), maps);
		return -EUCLEAN;
	}
	return 0;
}

int bi_qcheck_open(struct bi_qcheck **out, int fd, const char *path, char *err, size_t errlen)
{
	*out = NULL;
	struct bi_qcheck *q = calloc(1, sizeof(*q));
	struct stat st;
	if (!q)
		return -ENOMEM;
	q->fd = fd;
	q->path = path;
	q->fsize = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	uint64_t l1off;
	int rc = header(q, &l1off, err, errlen);
	uint8_t *raw = NULL;
	if (rc == 0) {
		raw = malloc((size_t)q->l1n * 8 + 1);
		q->l1 = malloc((size_t)q->l1n * 8 + 1);
		q->l2 = malloc((size_t)q->csize);
		rc = raw && q->l1 && q->l2 ? 0 : -ENOMEM;
	}
	if (rc == 0 && pread_all(fd, raw, (size_t)q->l1n * 8, l1off) < 0) {
		snprintf(err, errlen, "qcow image '%s': L1 table at %" PRIu64 " unreadable", path,
			 l1off);
		rc = -EIO;
	}
	for (uint32_t i = 0; rc == 0 && i < q->l1n; i++)
		q->l1[i] = bi_be64(raw + 8 * (size_t)i) & QC_OFF_MASK;
	free(raw);
	if (rc < 0) {
		bi_qcheck_free(q);
		return rc;
	}
	*out = q;
	return 0;
}

void bi_qcheck_free(struct bi_qcheck *q)
{
	if (!q)
		return;
	free(q->l1);
	free(q->l2);
	free(q->cbuf);
	free(q->tmp);
	free(q->inf);
	free(q);
}

/* The L2 entry of virtual cluster @c (0: not allocated here). */
static int l2_entry(struct bi_qcheck *q, uint64_t c, uint64_t *e, char *err, size_t errlen)
{
	unsigned l2bits = q->cbits - 3;
	uint64_t l1i = c >> l2bits;
	*e = 0;
	if (l1i >= q->l1n || q->l1[l1i] == 0)
		return 0;
	uint64_t at = q->l1[l1i];
	if (at > q->fsize || q->csize > q->fsize - at) {
		snprintf(err, errlen,
			 "qcow image '%s': L1 entry %" PRIu64 " points at an L2 table at %" PRIu64
			 ", past the end of the file (%" PRIu64 " bytes)",
			 q->path, l1i, at, q->fsize);
		return -EIO;
	}
	if (q->l2at != at) {
		q->l2at = 0;
		if (pread_all(q->fd, q->l2, (size_t)q->csize, at) < 0) {
			snprintf(err, errlen, "qcow image '%s': L2 table at %" PRIu64 " unreadable",
				 q->path, at);
			return -EIO;
		}
		q->l2at = at;
	}
	*e = bi_be64((const uint8_t *)&q->l2[c & ((1ull << l2bits) - 1)]);
	return 0;
}

int bi_qcheck_range(struct bi_qcheck *q, uint64_t off, uint64_t len, char *err, size_t errlen)
{
	if (len == 0)
		return 0;
	for (uint64_t c = off >> q->cbits; c <= (off + len - 1) >> q->cbits; c++) {
		uint64_t e;
		int rc = l2_entry(q, c, &e, err, errlen);
		if (rc < 0)
			return rc;
		uint64_t start, end;
		if (e & (1ull << 62)) {
			unsigned x = 62 - (q->cbits - 8);
			start = e & ((1ull << x) - 1);
			uint64_t sectors = ((e >> x) & ((1ull << (q->cbits - 8)) - 1)) + 1;
			end = (start & ~511ull) + sectors * 512; /* may pass the end by < 512 */
			if (start < q->fsize && end <= q->fsize + 511)
				continue;
		} else {
			start = e & QC_OFF_MASK;
			if (start == 0)
				continue;
			end = start + q->csize;
			if (end > start && end <= q->fsize)
				continue;
		}
		snprintf(err, errlen,
			 "qcow image '%s': cluster %" PRIu64 " (disk offset %" PRIu64
			 ") lies at file bytes %" PRIu64 "-%" PRIu64
			 ", past the end of the file (%" PRIu64 " bytes; truncated?)",
			 q->path, c, c << q->cbits, start, end - 1, q->fsize);
		return -EIO;
	}
	return 0;
}

/* Cluster @c (its L2 entry @e) into @out; 0, or 1: not served. */
static int fast_cluster(struct bi_qcheck *q, uint64_t e, uint8_t *out)
{
	size_t cs = (size_t)q->csize;
	if (!(e & (1ull << 62))) {
		uint64_t at = e & QC_OFF_MASK;
		if (at == 0 || (e & 1)) {
			memset(out, 0, cs); /* unallocated (no backing file) or zero */
			return 0;
		}
		return pread_all(q->fd, out, cs, at) == 0 ? 0 : 1;
	}
	unsigned x = 62 - (q->cbits - 8);
	uint64_t start = e & ((1ull << x) - 1);
	uint64_t sectors = ((e >> x) & ((1ull << (q->cbits - 8)) - 1)) + 1;
	uint64_t n = (start & ~511ull) + sectors * 512 - start;
	if (start >= q->fsize)
		return 1;
	if (n > q->fsize - start)
		n = q->fsize - start; /* the last one may end with the file */
	if (n > 2 * q->csize + 512)
		return 1;
	if (!q->cbuf && !(q->cbuf = malloc(2 * cs + 512)))
		return 1;
	if (!q->inf && !(q->inf = malloc(sizeof(*q->inf))))
		return 1;
	if (pread_all(q->fd, q->cbuf, (size_t)n, start) != 0)
		return 1;
	struct inflate_state *st = q->inf;
	isal_inflate_init(st);
	st->crc_flag = ISAL_DEFLATE;
	st->next_in = q->cbuf;
	st->avail_in = (uint32_t)n;
	st->next_out = out;
	st->avail_out = (uint32_t)cs;
	int rc = isal_inflate(st);
	return rc == ISAL_DECOMP_OK && st->total_out == cs ? 0 : 1;
}

int bi_qcheck_fast(struct bi_qcheck *q, uint64_t off, uint8_t *buf, size_t len)
{
	if (!q->fast)
		return 1;
	size_t cs = (size_t)q->csize;
	for (size_t done = 0; done < len;) {
		uint64_t at = off + done, c = at >> q->cbits, e;
		size_t in = (size_t)(at & (q->csize - 1));
		size_t n = cs - in < len - done ? cs - in : len - done;
		char err[8];
		if (l2_entry(q, c, &e, err, sizeof(err)) < 0)
			return 1;
		if (in == 0 && n == cs) {
			if (fast_cluster(q, e, buf + done))
				return 1;
		} else { /* part of a cluster: through a bounce buffer */
			if (!q->tmp && !(q->tmp = malloc(cs)))
				return 1;
			if (q->tmp_c != c + 1) {
				q->tmp_c = 0;
				if (fast_cluster(q, e, q->tmp))
					return 1;
				q->tmp_c = c + 1;
			}
			memcpy(buf + done, q->tmp + in, n);
		}
		done += n;
	}
	return 0;
}
