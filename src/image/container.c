/* SPDX-License-Identifier: MIT */
/*
 * Evidence containers: the table of formats, detection by signature, and
 * the read path every format shares (see container.h).
 *
 * Signatures (each format's own specification):
 *   EWF1   "EVF\x09\x0d\x0a\xff\x00" at 0 (E01 and the SMART s01 variant;
 *          libewf's ewf_file_signature)
 *   qcow   "QFI\xfb" at 0 (versions 1-3)
 *   VMDK   "KDMV" (sparse extent, streamOptimized too) or "COWD" at 0, or a
 *          text descriptor starting "# Disk DescriptorFile"
 *   VHDX   "vhdxfile" at 0
 *   VHD    "conectix" in the footer: the last 512 bytes (fixed), and a copy
 *          at 0 (dynamic, differencing)
 *   split  by name: NAME.001 (or .000) with NAME.002 (.001) beside it
 *
 * The cache: decoded 64 KiB blocks, direct-mapped; a run of misses on
 * consecutive blocks reads the next BI_CTR_AHEAD blocks in one call, so a
 * sequential walk pays the library's per-call cost once per 512 KiB.
 * Large reads (a whole extent) go straight to the library. A block that
 * fails to read is never cached.
 *
 * Decoding ahead (EWF, qcow2: formats with ops->ahead_read): once reads
 * go sequentially through the blocks (the next block, or one inside the
 * window), a background thread per container decodes the next
 * BI_CTR_DEPTH blocks not yet cached, one at a time into its own 64 KiB
 * buffer, and puts each in its slot; the caller's thread meanwhile does
 * the filesystem's work, and on reaching a block still in flight waits
 * for it rather than decoding it twice. Large reads then take the cached
 * blocks and read the rest whole-block by whole-block straight into the
 * caller's buffer. The thread reads only through its own state (its own
 * libewf handle, its own qcow2 tables and buffers) and serves only what
 * verified cleanly: a block it cannot read is left to the caller's read,
 * which reports it as ever. It stops and is joined in bi_ctr_free.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/container.h"

#include "base/cursor.h"

/* The formats this build reads (their names: bi_format, ctrbase.c). */
static const struct bi_ctr_ops *const formats[] = {
	&bi_ctr_raw_ops,  &bi_ctr_split_ops,
#ifdef BI_HAVE_EWF
	&bi_ctr_ewf_ops,
#endif
#ifdef BI_HAVE_QCOW
	&bi_ctr_qcow_ops,
#endif
#ifdef BI_HAVE_VMDK
	&bi_ctr_vmdk_ops,
#endif
#ifdef BI_HAVE_VHDI
	&bi_ctr_vhd_ops,  &bi_ctr_vhdx_ops,
#endif
};

static const struct bi_ctr_ops *ops_of(int format)
{
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		if (formats[i]->format == format)
			return formats[i];
	return NULL;
}

bool bi_ctr_supported(int format)
{
	return ops_of(format) != NULL;
}

bool btrfsimg_format_supported(int format)
{
	return format == BTRFSIMG_FORMAT_AUTO || bi_ctr_supported(format);
}

/* ---------------------------------------------------------------- */
/* Detection */

static bool has(const uint8_t *b, size_t n, const char *sig, size_t len)
{
	return n >= len && memcmp(b, sig, len) == 0;
}

static int sig_format(const uint8_t *head, size_t n)
{
	if (has(head, n, "EVF\x09\x0d\x0a\xff\x00", 8))
		return BTRFSIMG_FORMAT_EWF;
	if (has(head, n, "QFI\xfb", 4))
		return BTRFSIMG_FORMAT_QCOW2;
	if (has(head, n, "KDMV", 4) || has(head, n, "COWD", 4) ||
	    has(head, n, "# Disk DescriptorFile", 21))
		return BTRFSIMG_FORMAT_VMDK;
	if (has(head, n, "vhdxfile", 8))
		return BTRFSIMG_FORMAT_VHDX;
	if (has(head, n, "conectix", 8))
		return BTRFSIMG_FORMAT_VHD;
	return BTRFSIMG_FORMAT_RAW;
}

static int read_at(int fd, uint64_t off, uint8_t *buf, size_t len, size_t *got)
{
	*got = 0;
	while (*got < len) {
		ssize_t r = pread(fd, buf + *got, len - *got, (off_t)(off + *got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		*got += (size_t)r;
	}
	return 0;
}

/* The number at the end of @path ("disk.001" -> 1, width 3) after a dot. */
static bool numbered(const char *path, size_t *digits_at, unsigned *width, unsigned long *num)
{
	size_t n = strlen(path), i = n;
	while (i > 0 && path[i - 1] >= '0' && path[i - 1] <= '9')
		i--;
	if (n - i < 2 || n - i > 6 || i == 0 || path[i - 1] != '.')
		return false;
	*digits_at = i;
	*width = (unsigned)(n - i);
	*num = strtoul(path + i, NULL, 10);
	return true;
}

/* @path with its number replaced by @num (same width). */
static char *renumber(const char *path, size_t at, unsigned width, unsigned long num)
{
	char *s = malloc(at + 32);
	if (s)
		snprintf(s, at + 32, "%.*s%0*lu", (int)at, path, (int)width, num);
	return s;
}

static bool exists(const char *path)
{
	struct stat st;
	return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A split set's first segment: numbered 0 or 1, and the next one exists
 * and does not start a disk of its own (no btrfs magic at 64 KiB, no
 * container signature): two devices named dev.01 and dev.02 stay two. */
static bool split_first(const char *path)
{
	size_t at;
	unsigned w;
	unsigned long num;
	if (!numbered(path, &at, &w, &num) || num > 1)
		return false;
	char *next = renumber(path, at, w, num + 1);
	bool yes = exists(next);
	if (yes) {
		int fd = open(next, O_RDONLY | O_CLOEXEC);
		uint8_t head[512], magic[8];
		size_t got = 0, mg = 0;
		if (fd >= 0) {
			(void)read_at(fd, 0, head, sizeof(head), &got);
			(void)read_at(fd, 65536 + 64, magic, sizeof(magic), &mg);
			close(fd);
		}
		if (sig_format(head, got) != BTRFSIMG_FORMAT_RAW ||
		    (mg == 8 && memcmp(magic, "_BHRfS_M", 8) == 0))
			yes = false;
	}
	free(next);
	return yes;
}

int bi_ctr_detect(const char *path, int fd, int *format)
{
	uint8_t head[512];
	size_t got;
	int rc = read_at(fd, 0, head, sizeof(head), &got);
	if (rc < 0)
		return rc;
	*format = sig_format(head, got);
	if (*format != BTRFSIMG_FORMAT_RAW)
		return 0;
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 512) {
		rc = read_at(fd, (uint64_t)st.st_size - 512, head, sizeof(head), &got);
		if (rc < 0)
			return rc;
		if (has(head, got, "conectix", 8)) {
			*format = BTRFSIMG_FORMAT_VHD;
			return 0;
		}
	}
	if (split_first(path))
		*format = BTRFSIMG_FORMAT_SPLIT;
	return 0;
}

/* EWF segment names: E01..E99, then EAA..EZZ, FAA, ... (libewf's
 * libewf_filename_set_extension); the first letter and its case kept. */
static bool ewf_numbered(const char *path, size_t *at)
{
	size_t n = strlen(path);
	if (n < 4 || path[n - 4] != '.')
		return false;
	char l = path[n - 3];
	if (!strchr("EeSsLl", l))
		return false;
	*at = n - 3;
	return true;
}

/* The first segment of the EWF set @path (at: where its extension
 * starts) is a part of: ev.E07 -> ev.E01; ev.EAB -> ev.E01. */
static char *ewf_first(const char *path, size_t at)
{
	const char *ext = path + at;
	bool digits = ext[1] >= '0' && ext[1] <= '9' && ext[2] >= '0' && ext[2] <= '9';
	if (digits && ext[1] == '0' && ext[2] == '1')
		return NULL;
	static const char *const firsts[] = { "E01", "e01", "s01", "S01", "L01", "l01" };
	for (size_t i = 0; i < sizeof(firsts) / sizeof(firsts[0]); i++) {
		if (digits && firsts[i][0] != ext[0])
			continue;
		char *f = strdup(path);
		if (!f)
			return NULL;
		memcpy(f + at, firsts[i], 3);
		if (exists(f))
			return f;
		free(f);
	}
	return NULL;
}

char *bi_ctr_first_segment(const char *path)
{
	size_t at;
	unsigned w;
	unsigned long num;
	if (ewf_numbered(path, &at))
		return ewf_first(path, at);
	if (!numbered(path, &at, &w, &num) || num < 2)
		return NULL;
	for (unsigned long first = 1; first + 1 > 0; first--) {
		char *f = renumber(path, at, w, first);
		if (f && exists(f))
			return f;
		free(f);
	}
	return NULL;
}

/* ---------------------------------------------------------------- */
/* Opening */

bool bi_ctr_holds(const struct bi_ctr *c, dev_t dev, ino_t ino)
{
	for (size_t i = 0; i < c->nsegs; i++)
		if (c->segs[i].present && c->segs[i].dev == dev && c->segs[i].ino == ino)
			return true;
	return false;
}

int bi_ctr_open(struct bi_ctr **out, const char *path, int format, char *err, size_t errlen)
{
	*out = NULL;
	const struct bi_ctr_ops *ops = ops_of(format);
	if (!ops) {
		const char *name = btrfsimg_format_name(format);
		if (!name || format == BTRFSIMG_FORMAT_AUTO) {
			snprintf(err, errlen, "'%s': format %d is not a container", path, format);
			return -EINVAL;
		}
		snprintf(
			err, errlen,
			"'%s' is an image in %s format, and this build of btrfsimg was made without %s",
			path, name, bi_format(format)->lib);
		return -EOPNOTSUPP;
	}
	struct bi_ctr *c = calloc(1, sizeof(*c));
	if (!c || !(c->path = strdup(path))) {
		free(c);
		snprintf(err, errlen, "'%s': out of memory", path);
		return -ENOMEM;
	}
	c->ops = ops;
	c->detail = "";
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->cmu, NULL);
	pthread_cond_init(&c->wake, NULL);
	pthread_cond_init(&c->done, NULL);
	int rc = ops->open(c, err, errlen);
	if (rc == 0 && c->size > BI_CTR_MAX_SIZE) {
		/* the libraries take offsets as off64_t: a larger disk is no
		 * disk any of them can read, only a forged header */
		snprintf(err, errlen,
			 "%s image '%s': virtual size %" PRIu64 " bytes, expect at most %" PRIu64
			 " (2^63 - 1): refused",
			 btrfsimg_format_name(format), path, c->size, (uint64_t)BI_CTR_MAX_SIZE);
		rc = -EUCLEAN;
	}
	if (rc == 0 && ops->cached) {
		c->cache = malloc((size_t)BI_CTR_SLOTS * BI_CTR_BLOCK);
		c->tags = calloc(BI_CTR_SLOTS, sizeof(*c->tags));
		if (!c->cache || !c->tags) {
			snprintf(err, errlen, "'%s': out of memory for its cache", path);
			rc = -ENOMEM;
		}
	}
	if (rc < 0) {
		bi_ctr_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void bi_ctr_free(struct bi_ctr *c)
{
	if (!c)
		return;
	if (c->ahead_on) {
		pthread_mutex_lock(&c->cmu);
		c->stop = true;
		pthread_cond_signal(&c->wake);
		pthread_mutex_unlock(&c->cmu);
		pthread_join(c->ahead, NULL);
	}
	if (c->ahead_st)
		c->ops->ahead_free(c->ahead_st);
	free(c->ahead_buf);
	if (c->h && c->ops->close)
		c->ops->close(c);
	for (size_t i = 0; i < c->nsegs; i++)
		free(c->segs[i].name);
	for (size_t i = 0; i < c->nmeta; i++) {
		free(c->meta[i].key);
		free(c->meta[i].value);
	}
	for (size_t i = 0; i < c->nnotes; i++)
		free(c->notes[i]);
	free(c->lost);
	free(c->segs);
	free(c->meta);
	free(c->cache);
	free(c->tags);
	free(c->path);
	pthread_cond_destroy(&c->wake);
	pthread_cond_destroy(&c->done);
	pthread_mutex_destroy(&c->cmu);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* ---------------------------------------------------------------- */
/* Reading */

/* Locks: mu (held by bi_ctr_read: one caller at a time uses the format's
 * handle) and, inside it, cmu (the cache's tags and slots, the window,
 * the background reader's state; held briefly, never across a read by
 * the caller). The background reader takes only cmu: its reads go
 * through its own state (ops->ahead_new), never the caller's handle. */

/* Fill the cache slots of blocks [b, b + n) (all inside the disk) with one
 * call to the format; on failure retry block by block, so a bad chunk
 * fails only its own block. The slots are reserved meanwhile (the
 * background reader does not write them). Called with mu, not cmu. */
/* The disk's blocks, the last one partial: counted without rounding the
 * size up first, which wraps for a size within a block of 2^64. */
static uint64_t nblocks_of(const struct bi_ctr *c)
{
	return c->size / BI_CTR_BLOCK + (c->size % BI_CTR_BLOCK != 0);
}

static int fill(struct bi_ctr *c, uint64_t b, unsigned n, char *err, size_t errlen)
{
	uint64_t nblocks = nblocks_of(c);
	if (b + n > nblocks)
		n = (unsigned)(nblocks - b);
	/* slots of consecutive blocks are consecutive, unless they wrap */
	unsigned s = (unsigned)(b % BI_CTR_SLOTS);
	if (s + n > BI_CTR_SLOTS)
		n = BI_CTR_SLOTS - s;
	uint64_t off = b * BI_CTR_BLOCK;
	uint64_t len = (uint64_t)n * BI_CTR_BLOCK;
	if (off + len > c->size)
		len = c->size - off;
	pthread_mutex_lock(&c->cmu);
	for (unsigned i = 0; i < n; i++)
		c->tags[s + i] = 0;
	c->resv_lo = s;
	c->resv_n = n;
	pthread_mutex_unlock(&c->cmu);
	int rc =
		c->ops->read(c, off, c->cache + (size_t)s * BI_CTR_BLOCK, (size_t)len, err, errlen);
	pthread_mutex_lock(&c->cmu);
	c->resv_n = 0;
	for (unsigned i = 0; rc == 0 && i < n; i++)
		c->tags[s + i] = b + i + 1;
	pthread_mutex_unlock(&c->cmu);
	if (rc < 0 && n > 1)
		return fill(c, b, 1, err, errlen);
	return rc;
}

/* The background reader: while the window [want_lo, want_hi) holds a
 * block not in the cache, read it (cmu released) into ahead_buf and put it
 * in its slot. A block that fails is skipped: the caller's own read meets
 * it and reports it. */
static void *ahead_main(void *arg)
{
	struct bi_ctr *c = arg;
	uint64_t nblocks = nblocks_of(c);
	pthread_mutex_lock(&c->cmu);
	while (!c->stop) {
		uint64_t b = c->want_lo;
		while (b < c->want_hi && b < nblocks && c->tags[b % BI_CTR_SLOTS] == b + 1)
			b++;
		if (b >= c->want_hi || b >= nblocks) {
			c->want_lo = c->want_hi;
			pthread_cond_wait(&c->wake, &c->cmu);
			continue;
		}
		c->want_lo = b + 1;
		c->busy = b + 1;
		pthread_mutex_unlock(&c->cmu);
		uint64_t off = b * BI_CTR_BLOCK;
		size_t len = c->size - off < BI_CTR_BLOCK ? (size_t)(c->size - off) : BI_CTR_BLOCK;
		int rc = c->ops->ahead_read(c, c->ahead_st, off, c->ahead_buf, len);
		pthread_mutex_lock(&c->cmu);
		unsigned s = (unsigned)(b % BI_CTR_SLOTS);
		bool reserved = c->resv_n && s >= c->resv_lo && s < c->resv_lo + c->resv_n;
		if (rc == 0 && !reserved && c->tags[s] != b + 1) {
			memcpy(c->cache + (size_t)s * BI_CTR_BLOCK, c->ahead_buf, len);
			c->tags[s] = b + 1;
		}
		c->busy = 0;
		pthread_cond_broadcast(&c->done);
	}
	pthread_mutex_unlock(&c->cmu);
	return NULL;
}

/* An access to block @b (cmu held): when it continues a sequential stream
 * (the next block, or inside the window read ahead), move the window past
 * it, starting the background reader the first time. Whether it runs. */
static bool ahead_want(struct bi_ctr *c, uint64_t b)
{
	if (c->ahead_off)
		return false;
	bool seq = b == c->last_b + 1 ||
		   (c->want_hi >= BI_CTR_DEPTH && b >= c->want_hi - BI_CTR_DEPTH && b < c->want_hi);
	c->last_b = b;
	if (!seq)
		return c->ahead_on;
	if (!c->ahead_on) {
		c->ahead_off = true; /* unless it starts */
		if (!c->ops->ahead_new || !(c->ahead_st = c->ops->ahead_new(c)))
			return false;
		c->ahead_buf = malloc(BI_CTR_BLOCK);
		if (!c->ahead_buf || pthread_create(&c->ahead, NULL, ahead_main, c) != 0)
			return false;
		c->ahead_on = true;
		c->ahead_off = false;
	}
	if (b + 1 + BI_CTR_DEPTH > c->want_hi) {
		if (c->want_lo < b + 1 || c->want_lo > b + 1 + BI_CTR_DEPTH)
			c->want_lo = b + 1;
		c->want_hi = b + 1 + BI_CTR_DEPTH;
		pthread_cond_signal(&c->wake);
	}
	return true;
}

/* Copy [in, in+n) of block @b to @buf if it is cached (cmu held). */
static bool hit(struct bi_ctr *c, uint64_t b, size_t in, uint8_t *buf, size_t n)
{
	unsigned s = (unsigned)(b % BI_CTR_SLOTS);
	if (c->tags[s] != b + 1)
		return false;
	memcpy(buf, c->cache + (size_t)s * BI_CTR_BLOCK + in, n);
	return true;
}

static int cached_read(struct bi_ctr *c, uint64_t off, uint8_t *buf, size_t len, char *err,
		       size_t errlen)
{
	bool big = len >= 4 * BI_CTR_BLOCK; /* whole blocks missed skip the cache */
	while (len > 0) {
		uint64_t b = off / BI_CTR_BLOCK;
		size_t in = (size_t)(off % BI_CTR_BLOCK);
		size_t n = BI_CTR_BLOCK - in < len ? BI_CTR_BLOCK - in : len;
		pthread_mutex_lock(&c->cmu);
		bool bg = ahead_want(c, b);
		while (c->busy == b + 1) /* being read ahead: wait for it */
			pthread_cond_wait(&c->done, &c->cmu);
		bool done = hit(c, b, in, buf, n);
		unsigned ahead = !bg && c->last_miss == b ? BI_CTR_AHEAD : 1;
		if (!done)
			c->last_miss = b + ahead;
		pthread_mutex_unlock(&c->cmu);
		if (!done && big && in == 0 && n == BI_CTR_BLOCK) {
			int rc = c->ops->read(c, off, buf, n, err, errlen);
			if (rc < 0)
				return rc;
		} else if (!done) {
			if (fill(c, b, ahead, err, errlen) == 0) {
				pthread_mutex_lock(&c->cmu);
				done = hit(c, b, in, buf, n);
				pthread_mutex_unlock(&c->cmu);
			}
			/* not filled (the part wanted may still read: a block
			 * across the edge of a missing extent; if not, its error
			 * names the byte wanted), or filled and then replaced */
			if (!done) {
				int rc = c->ops->read(c, off, buf, n, err, errlen);
				if (rc < 0)
					return rc;
			}
		}
		buf += n;
		off += n;
		len -= n;
	}
	return 0;
}

int bi_ctr_read(struct bi_ctr *c, uint64_t off, void *buf, size_t len, char *err, size_t errlen)
{
	if (!bi_fits64(c->size, off, len)) {
		snprintf(err, errlen,
			 "read of %zu bytes at offset %" PRIu64
			 " is past the end of the disk (%" PRIu64 " bytes)",
			 len, off, c->size);
		return -EIO;
	}
	if (len == 0)
		return 0;
	pthread_mutex_lock(&c->mu);
	int rc;
	if (!c->cache || (len >= 4 * BI_CTR_BLOCK && c->ahead_off))
		rc = c->ops->read(c, off, buf, len, err, errlen);
	else
		rc = cached_read(c, off, buf, len, err, errlen);
	pthread_mutex_unlock(&c->mu);
	return rc;
}
