/* SPDX-License-Identifier: MIT */
/*
 * EWF (Expert Witness Format: EnCase .E01, FTK, ewfacquire; SMART .s01)
 * through libewf. libewf_glob finds the segments as libewf's own tools do
 * (ev.E01, ev.E02, ... ev.E99, ev.EAA, ...); it stops at the first gap.
 *
 * Whether the set goes on past the last segment found is on disk: every
 * segment file ends with a 76-byte section descriptor whose type is "next"
 * (another segment follows) or "done" (the last one) (EWF specification,
 * Joachim Metz, "Expert Witness Compression Format", section 3.3). A
 * "next" at the end of the last file found means the following one is
 * missing; neither means the file is truncated.
 *
 * Every chunk carries an Adler-32 checksum; libewf counts chunks that fail
 * it (libewf_handle_get_number_of_checksum_errors) and a read that adds
 * one fails here, naming the chunk.
 */
#include <errno.h>
#include <isa-l/igzip_lib.h>
#include <inttypes.h>
#include <fcntl.h>
#include <libewf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "1-image/container.h"

/* A chunk's stored bytes and an inflater: the caller's (in struct ewf)
 * and the background reader's (with its own handle), each its own. */
struct ewf_inflater {
	libewf_handle_t *h; /* the background reader's; NULL in struct ewf */
	uint8_t *raw;
	size_t rawcap;
	struct inflate_state *inf;
};

struct ewf {
	libewf_handle_t *h;
	uint32_t chunk;	     /* bytes per chunk */
	uint32_t crc_errors; /* libewf's count so far */
	/* byte ranges of chunks known to fail their checksum, sorted: libewf
	 * counts a chunk once, and its later reads must fail too */
	uint64_t (*bad)[2];
	/* the fast path (ewf_chunk_fast): a chunk's stored bytes, inflated
	 * by ISA-L (2-3x zlib's speed); NULL when the chunk size is absurd */
	struct ewf_inflater x;
};

static void ewf_why(libewf_error_t **e, char *why, size_t len)
{
	why[0] = '\0';
	if (e && *e) {
		libewf_error_sprint(*e, why, len);
		libewf_error_free(e);
	}
	for (char *p = why; *p; p++)
		if (*p == '\n')
			*p = *(p + 1) ? ';' : '\0';
}

/* The type of the section descriptor at the end of @name: "next",
 * "done", or "" (none: truncated). */
static void tail_type(const char *name, char out[17])
{
	out[0] = '\0';
	int fd = open(name, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return;
	uint8_t d[76];
	if (fstat(fd, &st) == 0 && st.st_size >= 76 + 13 &&
	    pread(fd, d, sizeof(d), st.st_size - 76) == (ssize_t)sizeof(d)) {
		memcpy(out, d, 16);
		out[16] = '\0';
	}
	close(fd);
}

/* The name of segment @num of the set whose segment @num - 1 is @prev. */
static char *next_name(const char *prev, unsigned num)
{
	size_t n = strlen(prev);
	char *s = strdup(prev);
	if (!s || n < 3)
		return s;
	char *ext = s + n - 3;
	bool lower = ext[0] >= 'a';
	if (num < 100) {
		snprintf(ext + 1, 3, "%02u", num);
		return s;
	}
	unsigned m = num - 100;
	char base = lower ? 'a' : 'A';
	char first = (char)(((ext[0] == 's' || ext[0] == 'S')	? 'S'
			     : (ext[0] == 'L' || ext[0] == 'l') ? 'L'
								: 'E') +
			    m / (26 * 26));
	ext[0] = lower ? (char)(first - 'A' + 'a') : first;
	ext[1] = (char)(base + (m / 26) % 26);
	ext[2] = (char)(base + m % 26);
	return s;
}

static bool file_exists(const char *p)
{
	struct stat st;
	return p && stat(p, &st) == 0;
}

/* Record the segments and what is missing past them. */
static int ewf_segments(struct bi_ctr *c, char **names, int n)
{
	for (int i = 0; i < n; i++) {
		int rc = bi_ctr_add_seg(c, names[i], true);
		if (rc < 0)
			return rc;
		char t[17];
		tail_type(names[i], t);
		if (strcmp(t, "next") && strcmp(t, "done") && !c->lost)
			c->lost = strdup(names[i]);
		if (strcmp(t, "next") && strcmp(t, "done"))
			bi_ctr_note(c,
				    "EWF image '%s': segment '%s' is truncated or damaged (it does "
				    "not end in a 'next' or 'done' section)",
				    c->path, names[i]);
		if (i + 1 < n || strcmp(t, "next"))
			continue;
		char *miss = next_name(names[i], (unsigned)i + 2);
		/* later segments beyond the gap, to say how much is lost */
		unsigned later = 0;
		for (unsigned k = (unsigned)i + 3; k < (unsigned)i + 67; k++) {
			char *s = next_name(names[i], k);
			later += file_exists(s);
			free(s);
		}
		bi_ctr_note(c,
			    "EWF image '%s': segment '%s' is missing (segment '%s' says one "
			    "follows%s)",
			    c->path, miss ? miss : "?", names[i],
			    later ? "; later segments exist but cannot be read past the gap" : "");
		rc = miss ? bi_ctr_add_seg(c, miss, false) : -ENOMEM;
		if (!c->lost)
			c->lost = miss;
		else
			free(miss);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void hexstr_to(const char *hex, uint8_t *out, size_t n, bool *ok)
{
	*ok = strlen(hex) == 2 * n;
	for (size_t i = 0; *ok && i < n; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			*ok = false;
		out[i] = (uint8_t)v;
	}
}

static int ewf_meta(struct bi_ctr *c, struct ewf *w)
{
	uint32_t nv = 0;
	if (libewf_handle_get_number_of_header_values(w->h, &nv, NULL) != 1)
		nv = 0;
	for (uint32_t i = 0; i < nv && i < 64; i++) {
		uint8_t id[64], val[1024];
		if (libewf_handle_get_header_value_identifier(w->h, i, id, sizeof(id), NULL) != 1)
			continue;
		if (libewf_handle_get_utf8_header_value(w->h, id, strlen((char *)id), val,
							sizeof(val), NULL) != 1)
			continue;
		int rc = bi_ctr_add_meta(c, (char *)id, (char *)val);
		if (rc < 0)
			return rc;
	}
	c->has_md5 = libewf_handle_get_md5_hash(w->h, c->md5, sizeof(c->md5), NULL) == 1;
	uint8_t hex[64];
	if (libewf_handle_get_utf8_hash_value(w->h, (const uint8_t *)"SHA1", 4, hex, sizeof(hex),
					      NULL) == 1)
		hexstr_to((char *)hex, c->sha1, sizeof(c->sha1), &c->has_sha1);
	return 0;
}

static void ewf_close(struct bi_ctr *c)
{
	struct ewf *w = c->h;
	if (w->h) {
		libewf_handle_close(w->h, NULL);
		libewf_handle_free(&w->h, NULL);
	}
	free(w->bad);
	free(w->x.raw);
	free(w->x.inf);
	free(w);
	c->h = NULL;
}

static int inflater_init(struct ewf_inflater *x, uint32_t chunk)
{
	x->rawcap = (size_t)chunk * 2 + 4096;
	x->raw = malloc(x->rawcap);
	x->inf = malloc(sizeof(*x->inf));
	return x->raw && x->inf ? 0 : -ENOMEM;
}

static void inflater_free(struct ewf_inflater *x)
{
	free(x->raw);
	free(x->inf);
	x->raw = NULL;
	x->inf = NULL;
}

static int ewf_open(struct bi_ctr *c, char *err, size_t errlen)
{
	libewf_error_t *e = NULL;
	char **names = NULL;
	int n = 0;
	char why[512];
	struct ewf *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	c->h = w;
	if (libewf_glob(c->path, strlen(c->path), LIBEWF_FORMAT_UNKNOWN, &names, &n, &e) != 1 ||
	    n < 1) {
		ewf_why(&e, why, sizeof(why));
		snprintf(err, errlen, "EWF image '%s': cannot find its segments: %s", c->path, why);
		return -EIO;
	}
	int rc = ewf_segments(c, names, n);
	if (rc == 0 && (libewf_handle_initialize(&w->h, &e) != 1 ||
			libewf_handle_open(w->h, names, n, LIBEWF_OPEN_READ, &e) != 1)) {
		ewf_why(&e, why, sizeof(why));
		snprintf(err, errlen, "EWF image '%s': cannot open: %s", c->path, why);
		rc = -EIO;
	}
	libewf_glob_free(names, n, NULL);
	size64_t size = 0;
	if (rc == 0 && (libewf_handle_get_media_size(w->h, &size, &e) != 1 ||
			libewf_handle_get_chunk_size(w->h, &w->chunk, &e) != 1)) {
		ewf_why(&e, why, sizeof(why));
		snprintf(err, errlen, "EWF image '%s': no media size: %s", c->path, why);
		rc = -EIO;
	}
	if (rc == 0)
		rc = ewf_meta(c, w);
	/* the fast path for chunks of sane size (libewf itself allows up to
	 * 2^31 sectors of up to 2^32 bytes; real ones are 32 KiB - 16 MiB) */
	if (rc == 0 && w->chunk >= 512 && w->chunk <= (64u << 20)) {
		if (inflater_init(&w->x, w->chunk) < 0)
			inflater_free(&w->x);
	}
	c->size = size;
	c->detail = "";
	return rc;
}

/* Refresh w->bad from libewf's list when its count changed. */
static void bad_refresh(struct ewf *w)
{
	uint32_t now = 0;
	if (libewf_handle_get_number_of_checksum_errors(w->h, &now, NULL) != 1 ||
	    now == w->crc_errors)
		return;
	uint64_t(*n)[2] = realloc(w->bad, (size_t)now * sizeof(*n));
	if (!n)
		return;
	w->bad = n;
	uint32_t k = 0;
	for (uint32_t i = 0; i < now; i++) {
		uint64_t start = 0, count = 0;
		if (libewf_handle_get_checksum_error(w->h, i, &start, &count, NULL) != 1 ||
		    start > UINT64_MAX / 512 || count > UINT64_MAX / 512 - start)
			continue;
		n[k][0] = start * 512;
		n[k][1] = (start + count) * 512;
		k++;
	}
	w->crc_errors = k; /* libewf keeps them sorted and merged */
}

/* A read of [off, off+len) that touches a chunk failing its checksum. */
static int crc_failed(struct bi_ctr *c, struct ewf *w, uint64_t off, size_t len, char *err,
		      size_t errlen)
{
	bad_refresh(w);
	size_t lo = 0, hi = w->crc_errors;
	while (lo < hi) { /* first range ending after off */
		size_t mid = lo + (hi - lo) / 2;
		if (w->bad[mid][1] <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == w->crc_errors || w->bad[lo][0] >= off + len)
		return 0;
	uint64_t at = w->bad[lo][0] > off ? w->bad[lo][0] : off;
	uint64_t chunk = w->chunk ? at / w->chunk : 0;
	if (c->lost)
		snprintf(err, errlen,
			 "EWF chunk %" PRIu64 " (disk bytes %" PRIu64 "-%" PRIu64
			 ") unreadable: segment '%s' is %s",
			 chunk, chunk * w->chunk, (chunk + 1) * w->chunk - 1, c->lost,
			 c->segs[c->nsegs - 1].present ? "truncated" : "missing");
	else
		snprintf(err, errlen,
			 "EWF chunk %" PRIu64 " (disk bytes %" PRIu64 "-%" PRIu64
			 ") fails its stored checksum",
			 chunk, chunk * w->chunk, (chunk + 1) * w->chunk - 1);
	return -EIO;
}

/* Chunk @k, whole (@n bytes: the chunk size, less for the last one), into
 * @out through the fast path: its stored bytes (libewf_handle_read_chunk
 * through @h), a
 * compressed one inflated by ISA-L with the zlib stream's Adler-32
 * checked. 0, or 1 when the fast path does not apply (an uncompressed
 * chunk, an error, a checksum mismatch): the caller reads the chunk through
 * libewf, which checks and records it as ever. */
static int chunk_fast(libewf_handle_t *h, uint32_t chunk, struct ewf_inflater *x, uint64_t k,
		      uint8_t *out, size_t n)
{
	int8_t comp = 0, have_sum = 0;
	uint32_t sum = 0;
	uint8_t sumbuf[4];
	ssize_t r = -1;
	if (!x->raw)
		return 1;
	if (libewf_handle_seek_offset(h, (off64_t)(k * chunk), SEEK_SET, NULL) >= 0)
		r = libewf_handle_read_chunk(h, x->raw, x->rawcap, &comp, sumbuf, &sum, &have_sum,
					     NULL);
	if (r <= 0 || !comp || (size_t)r >= x->rawcap)
		return 1;
	struct inflate_state *st = x->inf;
	isal_inflate_init(st);
	st->crc_flag = ISAL_ZLIB;
	st->next_in = x->raw;
	st->avail_in = (uint32_t)r;
	st->next_out = out;
	st->avail_out = (uint32_t)n;
	if (isal_inflate_stateless(st) != ISAL_DECOMP_OK || st->total_out != n)
		return 1;
	return 0;
}

static int ewf_chunk_fast(struct ewf *w, uint64_t k, uint8_t *out, size_t n)
{
	return chunk_fast(w->h, w->chunk, &w->x, k, out, n);
}

/* The whole chunks at the start of [off, off+len) through the fast path;
 * how many bytes were read. */
static size_t ewf_fast(struct bi_ctr *c, struct ewf *w, uint64_t off, uint8_t *p, size_t len)
{
	size_t done = 0;
	while (w->x.raw && len - done > 0 && (off + done) % w->chunk == 0) {
		uint64_t k = (off + done) / w->chunk;
		uint64_t n = c->size - (off + done) < w->chunk ? c->size - (off + done) : w->chunk;
		if (n > len - done || ewf_chunk_fast(w, k, p + done, (size_t)n) != 0)
			break;
		done += (size_t)n;
	}
	return done;
}

static int ewf_read(struct bi_ctr *c, uint64_t off, void *buf, size_t len, char *err, size_t errlen)
{
	struct ewf *w = c->h;
	libewf_error_t *e = NULL;
	uint8_t *p = buf;
	while (len > 0) {
		size_t fast = ewf_fast(c, w, off, p, len);
		p += fast;
		off += fast;
		len -= fast;
		if (len == 0)
			break;
		/* one chunk (or what is left) through libewf */
		size_t n = w->chunk && len > w->chunk - off % w->chunk ? w->chunk - off % w->chunk
								       : len;
		ssize_t r = libewf_handle_read_random(w->h, p, n, (off64_t)off, &e);
		if (r <= 0) {
			char why[512];
			ewf_why(&e, why, sizeof(why));
			int rc = crc_failed(c, w, off, n, err, errlen);
			if (rc == 0)
				snprintf(err, errlen,
					 "EWF read of %zu bytes at offset %" PRIu64 " failed: %s%s",
					 n, off, c->lost ? "segment missing or truncated: " : "",
					 c->lost ? c->lost : why);
			return -EIO;
		}
		int rc = crc_failed(c, w, off, (size_t)r, err, errlen);
		if (rc < 0)
			return rc;
		p += r;
		off += (uint64_t)r;
		len -= (size_t)r;
	}
	return 0;
}

/* The background reader (container.c): whole chunks through the fast
 * path, with its own libewf handle on the same segment files (a handle is
 * not shared between threads) and its own buffers. A block that is not
 * whole chunks all inflating cleanly is left to the caller's read, which
 * checks and reports it. */
static void ewf_ahead_free(void *st)
{
	struct ewf_inflater *x = st;
	if (x->h) {
		libewf_handle_close(x->h, NULL);
		libewf_handle_free(&x->h, NULL);
	}
	inflater_free(x);
	free(x);
}

static void *ewf_ahead_new(struct bi_ctr *c)
{
	struct ewf *w = c->h;
	struct ewf_inflater *x = calloc(1, sizeof(*x));
	char **names = calloc(c->nsegs + 1, sizeof(*names));
	int n = 0;
	for (size_t i = 0; names && i < c->nsegs; i++)
		if (c->segs[i].present)
			names[n++] = c->segs[i].name;
	bool ok = w->x.raw && x && names && n > 0 && inflater_init(x, w->chunk) == 0 &&
		  libewf_handle_initialize(&x->h, NULL) == 1;
	if (ok && libewf_handle_open(x->h, names, n, LIBEWF_OPEN_READ, NULL) != 1) {
		libewf_handle_free(&x->h, NULL);
		ok = false;
	}
	free(names);
	if (!ok && x) {
		ewf_ahead_free(x);
		x = NULL;
	}
	return x;
}

static int ewf_ahead_read(struct bi_ctr *c, void *st, uint64_t off, uint8_t *buf, size_t len)
{
	struct ewf *w = c->h; /* only its chunk size, fixed since open */
	struct ewf_inflater *x = st;
	for (size_t done = 0; done < len;) {
		uint64_t at = off + done;
		uint64_t n = c->size - at < w->chunk ? c->size - at : w->chunk;
		if (at % w->chunk || n > len - done ||
		    chunk_fast(x->h, w->chunk, x, at / w->chunk, buf + done, (size_t)n))
			return 1;
		done += (size_t)n;
	}
	return 0;
}

const struct bi_ctr_ops bi_ctr_ewf_ops = {
	.format = BTRFSIMG_FORMAT_EWF,
	.cached = true,
	.open = ewf_open,
	.read = ewf_read,
	.close = ewf_close,
	.ahead_new = ewf_ahead_new,
	.ahead_read = ewf_ahead_read,
	.ahead_free = ewf_ahead_free,
};
