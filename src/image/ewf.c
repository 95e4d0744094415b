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
 *
 * A missing or truncated segment. libewf (20140813) numbers chunks by the
 * order of the tables it reads, one segment after another: a set opened
 * past a gap (or past a truncated segment, whose last tables are lost)
 * would put the later segments' chunks where the lost ones were. It also
 * insists that the segments it is given be numbered 1, 2, 3, ... So:
 *
 *   - the segments up to the first missing or truncated one (the "first
 *     run") are opened, and how many chunks they hold (k1) is found by
 *     asking libewf for chunks (libewf_handle_read_chunk fails for one no
 *     table placed, saying the list element is not set);
 *   - if the set's last segments (the "last run": each ending in "next",
 *     the last in "done", EWF's own proof that none is cut short) are
 *     there, they are handed to libewf after the first run through a
 *     libbfio pool, each under the number that follows on (the file
 *     header's segment number, bytes 9-10, read as the next one: the spec,
 *     section 2.1.1), and counted again (k2). Their chunks are the last
 *     k2 - k1 of the disk (the volume section says how many chunks the
 *     disk has, n): chunk c >= n - (k2 - k1) is libewf's chunk c - (n - k2).
 *
 *     disk chunks  [0, k1)        [k1, n - k2 + k1)      [n - k2 + k1, n)
 *                  first run      lost: the gap          last run
 *     libewf's     [0, k1)        -                      [k1, k2)
 *
 *   - a read of the gap fails naming the segments it lies in and the
 *     offset; segments between two gaps cannot be placed and are named.
 */
#include <errno.h>
#include <isa-l/igzip_lib.h>
#include <inttypes.h>
#include <fcntl.h>
#define HAVE_LIBBFIO 1 /* libewf.h: declare the libbfio pool functions */
#include <libewf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/grow.h"

#include "image/container.h"

/* A chunk's stored bytes and an inflater: the caller's (in struct ewf)
 * and the background reader's (with its own handle), each its own. */
struct ewf_inflater {
	libewf_handle_t *h; /* the background reader's; NULL in struct ewf */
	uint8_t *raw;
	size_t rawcap;
	struct inflate_state *inf;
};

/* A libewf handle on (some of) the set's segments. */
struct ewf_src {
	libewf_handle_t *h;
	libbfio_pool_t *pool; /* the segments, when opened through a pool */
	uint32_t crc_errors;  /* libewf's count so far */
	/* byte ranges of chunks known to fail their checksum, sorted: libewf
	 * counts a chunk once, and its later reads must fail too */
	uint64_t (*bad)[2];
};

struct ewf {
	struct ewf_src a; /* the set; with a gap, its first run */
	struct ewf_src b; /* with a gap, its last run (see the top) */
	uint64_t b_base;  /* libewf's chunk (through b) of the last run's first */
	uint32_t chunk;	  /* bytes per chunk */
	/* the fast path (ewf_chunk_fast): a chunk's stored bytes, inflated
	 * by ISA-L (2-3x zlib's speed); NULL when the chunk size is absurd */
	struct ewf_inflater x;
	/* a set with a segment missing or truncated (see the top): disk
	 * chunks [gap_lo, gap_hi) unreadable, [gap_hi, ...) libewf's chunk
	 * minus (gap_hi - gap_lo); gap_hi == n: nothing read past the gap */
	bool gap;
	uint64_t gap_lo, gap_hi;
	char gap_what[320]; /* "segment 'ev.E02', which is missing" */
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
	const char *why;
	int fd = bi_ctr_open_regular(name, &why); /* a FIFO must not block */
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

/* ---------------------------------------------------------------- */
/* The set: which segments are there, which missing or truncated */

#define EWF_SCAN_GAP	 64	/* missing numbers in a row looked past */
#define EWF_MAX_SEGMENTS 14971u /* .E01-.E99, then .EAA-.ZZZ */

/* Segment number i + 1 of the set. */
struct seg_state {
	char *name;
	bool present;
	bool intact; /* ends in a "next" or "done" section */
	bool done;   /* ends in "done": the set's last segment */
};

static void segs_free(struct seg_state *s, size_t n)
{
	for (size_t i = 0; s && i < n; i++)
		free(s[i].name);
	free(s);
}

/* The set whose first @n segments libewf_glob found (@names): those, and
 * past a missing one the later ones there, up to the one ending in
 * "done" (or EWF_SCAN_GAP missing numbers in a row). Trailing missing
 * numbers are dropped but the one a "next" says follows. */
static int scan_set(char **names, int n, struct seg_state **out, size_t *count)
{
	size_t k = 0, cap = (size_t)n + EWF_SCAN_GAP + 2;
	struct seg_state *s = calloc(cap, sizeof(*s));
	unsigned miss_run = 0;
	for (unsigned num = 1; s && num <= EWF_MAX_SEGMENTS; num++) {
		if (k == cap) {
			size_t was = cap;
			if (bi_grow((void **)&s, &cap, k + 1, sizeof(*s)))
				break;
			memset(s + was, 0, (cap - was) * sizeof(*s));
		}
		bool given = num <= (unsigned)n;
		struct seg_state *g = &s[k];
		g->name = given ? strdup(names[num - 1]) : next_name(names[0], num);
		if (!g->name)
			break;
		k++;
		g->present = given || file_exists(g->name);
		if (g->present) {
			char t[17];
			tail_type(g->name, t);
			g->done = !strcmp(t, "done");
			g->intact = g->done || !strcmp(t, "next");
			miss_run = 0;
			if (g->done)
				break;
		} else if (++miss_run > EWF_SCAN_GAP) {
			break;
		}
	}
	if (!s || k == 0 || !s[k - 1].name) {
		segs_free(s, k);
		return -ENOMEM;
	}
	size_t last = k; /* keep up to the last present one */
	while (last > 0 && !s[last - 1].present)
		last--;
	if (last > 0 && last < k && s[last - 1].intact && !s[last - 1].done)
		last++; /* the one its "next" says follows */
	for (size_t i = last; i < k; i++)
		free(s[i].name);
	*out = s;
	*count = last;
	return 0;
}

/* Every segment there after the first (the file given) a regular file:
 * libewf opens them by name, and a FIFO would block it. */
static int segs_regular(const struct bi_ctr *c, const struct seg_state *s, size_t n, char *err,
			size_t errlen)
{
	for (size_t i = 1; i < n; i++) {
		const char *why;
		int rc = s[i].present ? bi_ctr_check_regular(s[i].name, &why) : 0;
		if (rc < 0) {
			snprintf(err, errlen,
				 "EWF image '%s': segment '%s' %s: refused (only a regular file is "
				 "read)",
				 c->path, s[i].name, why);
			return rc;
		}
	}
	return 0;
}

/* Record the segments in @c (every number, missing ones too). */
static int record_segments(struct bi_ctr *c, const struct seg_state *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int rc = bi_ctr_add_seg(c, s[i].name, s[i].present);
		if (rc < 0)
			return rc;
		if (!c->lost && (!s[i].present || !s[i].intact) && !(c->lost = strdup(s[i].name)))
			return -ENOMEM;
	}
	return 0;
}

/* "segment 'x.E02', which is missing", "segments 'x.E02' to 'x.E05'
 * (missing, truncated or not placed)" for s[lo, hi). */
static void describe(char *out, size_t len, const struct seg_state *s, size_t lo, size_t hi)
{
	if (hi == lo + 1)
		snprintf(out, len, "segment '%s', which is %s", s[lo].name,
			 s[lo].present ? "truncated" : "missing");
	else
		snprintf(out, len,
			 "segments '%s' to '%s' (missing, truncated, or not placed: the "
			 "segments between two missing ones)",
			 s[lo].name, s[hi - 1].name);
}

/* ---------------------------------------------------------------- */
/* Segment files under another number, for libewf (see the top) */

struct renum {
	char *name;
	int fd;
	uint16_t num; /* the segment number libewf is to read */
	bool ewf1;    /* an EWF1 header: only there are bytes 9-10 the number */
	off64_t pos;
};

static int renum_free(intptr_t **io, libbfio_error_t **e)
{
	(void)e;
	struct renum *r = (struct renum *)*io;
	if (r) {
		if (r->fd >= 0)
			close(r->fd);
		free(r->name);
		free(r);
	}
	*io = NULL;
	return 1;
}

static struct renum *renum_new(const char *name, uint16_t num)
{
	struct renum *r = calloc(1, sizeof(*r));
	if (r && !(r->name = strdup(name))) {
		free(r);
		return NULL;
	}
	if (r) {
		r->fd = -1;
		r->num = num;
	}
	return r;
}

static int renum_clone(intptr_t **dst, intptr_t *src, libbfio_error_t **e)
{
	(void)e;
	const struct renum *r = (const struct renum *)src;
	*dst = (intptr_t *)renum_new(r->name, r->num);
	return *dst ? 1 : -1;
}

static int renum_open(intptr_t *io, int flags, libbfio_error_t **e)
{
	(void)e;
	struct renum *r = (struct renum *)io;
	if (flags & LIBBFIO_ACCESS_FLAG_WRITE)
		return -1;
	const char *why;
	/* the first is the file given; the others found by name beside it */
	if (r->fd < 0)
		r->fd = r->num == 1 ? open(r->name, O_RDONLY | O_CLOEXEC)
				    : bi_ctr_open_regular(r->name, &why);
	if (r->fd < 0)
		r->fd = -1;
	r->pos = 0;
	uint8_t sig[8];
	r->ewf1 = r->fd >= 0 && pread(r->fd, sig, 8, 0) == 8 &&
		  (memcmp(sig, "EVF\x09\x0d\x0a\xff\x00", 8) == 0 ||
		   memcmp(sig, "LVF\x09\x0d\x0a\xff\x00", 8) == 0);
	return r->fd >= 0 ? 1 : -1;
}

static int renum_close(intptr_t *io, libbfio_error_t **e)
{
	(void)e;
	struct renum *r = (struct renum *)io;
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	return 0;
}

/* The file's bytes, but the segment number (bytes 9-10, little-endian,
 * after the EWF1 signature and the fields-start byte 0x01); an EWF2 file
 * keeps other fields there and is passed through as it is. */
static ssize_t renum_read(intptr_t *io, uint8_t *buf, size_t n, libbfio_error_t **e)
{
	(void)e;
	struct renum *r = (struct renum *)io;
	if (r->fd < 0 || r->pos < 0)
		return -1;
	ssize_t got;
	do
		got = pread(r->fd, buf, n, r->pos);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return -1;
	for (off64_t at = 9; r->ewf1 && at <= 10; at++)
		if (at >= r->pos && at < r->pos + got)
			buf[at - r->pos] = (uint8_t)(at == 9 ? r->num & 0xff : r->num >> 8);
	r->pos += got;
	return got;
}

static ssize_t renum_write(intptr_t *io, const uint8_t *buf, size_t n, libbfio_error_t **e)
{
	(void)io, (void)buf, (void)n, (void)e;
	return -1;
}

static int renum_size(intptr_t *io, size64_t *size, libbfio_error_t **e)
{
	(void)e;
	struct renum *r = (struct renum *)io;
	struct stat st;
	if ((r->fd >= 0 ? fstat(r->fd, &st) : stat(r->name, &st)) != 0 || st.st_size < 0)
		return -1;
	*size = (size64_t)st.st_size;
	return 1;
}

static off64_t renum_seek(intptr_t *io, off64_t off, int whence, libbfio_error_t **e)
{
	struct renum *r = (struct renum *)io;
	size64_t size = 0;
	off64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? r->pos : -1;
	if (whence == SEEK_END && renum_size(io, &size, e) == 1)
		base = (off64_t)size;
	if (base < 0 || (off > 0 && base > INT64_MAX - off) || base + off < 0)
		return -1;
	r->pos = base + off;
	return r->pos;
}

static int renum_exists(intptr_t *io, libbfio_error_t **e)
{
	(void)e;
	return access(((struct renum *)io)->name, R_OK) == 0 ? 1 : 0;
}

static int renum_is_open(intptr_t *io, libbfio_error_t **e)
{
	(void)e;
	return ((struct renum *)io)->fd >= 0 ? 1 : 0;
}

/* A pool of @files, numbered 1, 2, ... as libewf is to read them. */
static libbfio_pool_t *renum_pool(const struct seg_state *const *files, size_t n)
{
	libbfio_pool_t *pool = NULL;
	if (n > UINT16_MAX || libbfio_pool_initialize(&pool, 0, 0, NULL) != 1)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		struct renum *r = renum_new(files[i]->name, (uint16_t)(i + 1));
		libbfio_handle_t *h = NULL;
		int entry;
		if (!r ||
		    libbfio_handle_initialize(&h, (intptr_t *)r, renum_free, renum_clone,
					      renum_open, renum_close, renum_read, renum_write,
					      renum_seek, renum_exists, renum_is_open, renum_size,
					      LIBBFIO_FLAG_IO_HANDLE_MANAGED |
						      LIBBFIO_FLAG_IO_HANDLE_CLONE_BY_FUNCTION,
					      NULL) != 1) {
			intptr_t *io = (intptr_t *)r;
			renum_free(&io, NULL);
			break;
		}
		if (libbfio_pool_append_handle(pool, &entry, h, LIBBFIO_OPEN_READ, NULL) != 1) {
			libbfio_handle_free(&h, NULL);
			break;
		}
		if (i + 1 == n)
			return pool;
	}
	libbfio_pool_close_all(pool, NULL);
	libbfio_pool_free(&pool, NULL);
	return NULL;
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
	if (libewf_handle_get_number_of_header_values(w->a.h, &nv, NULL) != 1)
		nv = 0;
	for (uint32_t i = 0; i < nv && i < 64; i++) {
		uint8_t id[64], val[1024];
		if (libewf_handle_get_header_value_identifier(w->a.h, i, id, sizeof(id), NULL) != 1)
			continue;
		if (libewf_handle_get_utf8_header_value(w->a.h, id, strlen((char *)id), val,
							sizeof(val), NULL) != 1)
			continue;
		int rc = bi_ctr_add_meta(c, (char *)id, (char *)val);
		if (rc < 0)
			return rc;
	}
	/* The hash and digest sections are in the last segment: with a gap,
	 * that is the last run's handle (w->b), not the first run's. */
	libewf_handle_t *hs[2] = { w->a.h, w->b.h };
	for (size_t k = 0; k < 2 && hs[k]; k++) {
		if (!c->has_md5)
			c->has_md5 = libewf_handle_get_md5_hash(hs[k], c->md5, sizeof(c->md5),
								NULL) == 1;
		uint8_t hex[64];
		if (!c->has_sha1 &&
		    libewf_handle_get_utf8_hash_value(hs[k], (const uint8_t *)"SHA1", 4, hex,
						      sizeof(hex), NULL) == 1)
			hexstr_to((char *)hex, c->sha1, sizeof(c->sha1), &c->has_sha1);
	}
	return 0;
}

/* Close @h and free it, then the pool it read through (libewf leaves a
 * pool it did not make to its maker). */
static void handle_drop(libewf_handle_t **h, libbfio_pool_t **pool)
{
	if (*h) {
		libewf_handle_close(*h, NULL);
		libewf_handle_free(h, NULL);
	}
	if (*pool) {
		libbfio_pool_close_all(*pool, NULL);
		libbfio_pool_free(pool, NULL);
	}
}

static void ewf_close(struct bi_ctr *c)
{
	struct ewf *w = c->h;
	handle_drop(&w->a.h, &w->a.pool);
	handle_drop(&w->b.h, &w->b.pool);
	free(w->a.bad);
	free(w->b.bad);
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

/* ---------------------------------------------------------------- */
/* A set with a gap (see the top) */

/* 1: chunk @k's stored bytes read through @h; 0: libewf placed no chunk
 * @k (no table gave it: its list element is not set); -1: another
 * failure. */
static int chunk_placed(libewf_handle_t *h, uint32_t chunk, uint64_t k, uint8_t *buf, size_t cap)
{
	libewf_error_t *e = NULL;
	int8_t comp = 0, have = 0;
	uint32_t sum = 0;
	uint8_t sb[4];
	ssize_t r = -1;
	if (libewf_handle_seek_offset(h, (off64_t)(k * chunk), SEEK_SET, &e) >= 0)
		r = libewf_handle_read_chunk(h, buf, cap, &comp, sb, &sum, &have, &e);
	if (r > 0)
		return 1;
	char bt[2048] = "";
	if (e) {
		libewf_error_backtrace_sprint(e, bt, sizeof(bt));
		libewf_error_free(&e);
	}
	/* libewf 20140813: "libmfdata_list_get_element_value_by_index:
	 * unable to determine if list element: K is a group." */
	return strstr(bt, "is a group") ? 0 : -1;
}

/* How many chunks of the disk's @n libewf placed through @h (the first
 * *@k are, the rest not): 0, or -EIO when its answers do not draw that
 * line (a chunk that fails for another reason than not being placed). */
static int count_chunks(libewf_handle_t *h, uint32_t chunk, uint64_t n, uint64_t *k)
{
	size_t cap = (size_t)chunk * 2 + 4096;
	uint8_t *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	uint64_t lo = 0, hi = n;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (chunk_placed(h, chunk, mid, buf, cap) == 1)
			lo = mid + 1;
		else
			hi = mid;
	}
	int rc = 0;
	if ((lo > 0 && chunk_placed(h, chunk, lo - 1, buf, cap) != 1) ||
	    (lo < n && chunk_placed(h, chunk, lo, buf, cap) != 0))
		rc = -EIO;
	free(buf);
	*k = lo;
	return rc;
}

/* Open @files (numbered 1, 2, ... for libewf, whatever their names say)
 * into *@h, through the pool *@pool. */
static int open_files(const struct seg_state *const *files, size_t n, libewf_handle_t **h,
		      libbfio_pool_t **pool, char *why, size_t whylen)
{
	libewf_error_t *e = NULL;
	*h = NULL;
	*pool = renum_pool(files, n);
	if (!*pool) {
		snprintf(why, whylen, "cannot set up its segment files");
		return -ENOMEM;
	}
	if (libewf_handle_initialize(h, &e) != 1 ||
	    libewf_handle_open_file_io_pool(*h, *pool, LIBEWF_OPEN_READ, &e) != 1) {
		ewf_why(&e, why, whylen);
		if (*h)
			libewf_handle_free(h, NULL);
		libbfio_pool_close_all(*pool, NULL);
		libbfio_pool_free(pool, NULL);
		return -EIO;
	}
	return 0;
}

/* The last run s[r0, ns), placed: opened as w->b after the first run's
 * files (@first[0, p), w->a's) but a truncated last one, under the
 * numbers that follow on. libewf holds its chunks there from w->b_base on
 * (how many chunks those first files hold: w->gap_lo, or without a
 * truncated one counted through a handle on them alone), and they are the
 * disk's (@n chunks, @size bytes) last ones. Whether it is placed. */
static bool place_last_run(struct ewf *w, const struct seg_state *const *first, size_t p,
			   const struct seg_state *s, size_t r0, size_t ns, uint64_t size,
			   uint64_t n)
{
	size_t q = p > 0 && !first[p - 1]->intact ? p - 1 : p;
	uint64_t base = w->gap_lo, k2 = 0;
	struct ewf_src t = { 0 };
	char why[512];
	if (q == 0) /* segment 1 holds the volume section */
		return false;
	if (q < p) {
		bool ok = open_files(first, q, &t.h, &t.pool, why, sizeof(why)) == 0 &&
			  count_chunks(t.h, w->chunk, n, &base) == 0;
		handle_drop(&t.h, &t.pool);
		if (!ok || base > w->gap_lo)
			return false;
	}
	const struct seg_state **files = calloc(q + ns - r0, sizeof(*files));
	if (!files)
		return false;
	memcpy(files, first, q * sizeof(*files));
	for (size_t i = r0; i < ns; i++)
		files[q + i - r0] = &s[i];
	size64_t size2 = 0;
	bool ok = open_files(files, q + ns - r0, &t.h, &t.pool, why, sizeof(why)) == 0;
	free(files);
	ok = ok && libewf_handle_get_media_size(t.h, &size2, NULL) == 1 && size2 == size &&
	     count_chunks(t.h, w->chunk, n, &k2) == 0 && k2 > base && k2 <= n &&
	     n - (k2 - base) >= w->gap_lo;
	if (!ok) {
		handle_drop(&t.h, &t.pool);
		return false;
	}
	w->b = t;
	w->b_base = base;
	w->gap_hi = n - (k2 - base);
	return true;
}

/* A set with a segment missing or truncated (s[bad]): the first run
 * opened, the gap found, the last run placed after it when it can be. */
static int open_damaged(struct bi_ctr *c, struct ewf *w, const struct seg_state *s, size_t ns,
			size_t bad, char *err, size_t errlen)
{
	char why[512];
	const struct seg_state **first = calloc(ns, sizeof(*first));
	if (!first)
		return -ENOMEM;
	size_t p = s[bad].present ? bad + 1 : bad; /* a truncated one's tables, in part */
	for (size_t i = 0; i < p; i++)
		first[i] = &s[i];
	int rc = open_files(first, p, &w->a.h, &w->a.pool, why, sizeof(why));
	if (rc < 0 && p > 1 && p > bad) /* the truncated one unreadable to libewf */
		rc = open_files(first, --p, &w->a.h, &w->a.pool, why, sizeof(why));
	size64_t size = 0;
	if (rc == 0 && (libewf_handle_get_media_size(w->a.h, &size, NULL) != 1 ||
			libewf_handle_get_chunk_size(w->a.h, &w->chunk, NULL) != 1))
		rc = -EIO;
	if (rc < 0) {
		snprintf(err, errlen, "EWF image '%s': cannot open: %s", c->path, why);
		free(first);
		return rc;
	}
	uint64_t n = w->chunk ? (size + w->chunk - 1) / w->chunk : 0;
	size_t r0 = ns; /* the last run: [r0, ns), all intact, ending in "done" */
	while (s[ns - 1].done && r0 > p && s[r0 - 1].present && s[r0 - 1].intact)
		r0--;
	bool later = false, placed = false;
	for (size_t i = p; i < ns; i++)
		later |= s[i].present;
	char what[320];
	describe(what, sizeof(what), s, bad, r0 < ns ? r0 : ns);
	if (w->chunk >= 512 && w->chunk <= (64u << 20) &&
	    count_chunks(w->a.h, w->chunk, n, &w->gap_lo) == 0) {
		w->gap = true;
		w->gap_hi = n;
		placed = r0 < ns && place_last_run(w, first, p, s, r0, ns, size, n);
		snprintf(w->gap_what, sizeof(w->gap_what), "%s", what);
		if (w->gap_lo == w->gap_hi)
			bi_ctr_note(c, "EWF image '%s': %s; no chunk of the disk is lost", c->path,
				    what);
		else
			bi_ctr_note(
				c,
				"EWF image '%s': %s: disk bytes %" PRIu64 "-%" PRIu64
				" (chunks %" PRIu64 "-%" PRIu64 ") cannot be read%s",
				c->path, what, w->gap_lo * w->chunk,
				(w->gap_hi * w->chunk < size ? w->gap_hi * w->chunk : size) - 1,
				w->gap_lo, w->gap_hi - 1,
				placed	? "; the segments after it are read"
				: later ? "; the segments after it cannot be placed and are not read"
					: "");
	} else {
		bi_ctr_note(c, "EWF image '%s': %s; where its chunks start is not known%s", c->path,
			    what, later ? ", and the segments after it are not read" : "");
	}
	c->size = size;
	free(first);
	return 0;
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
	struct seg_state *s = NULL;
	size_t ns = 0, bad = 0;
	int rc = scan_set(names, n, &s, &ns);
	if (rc == 0)
		rc = segs_regular(c, s, ns, err, errlen);
	if (rc == 0)
		rc = record_segments(c, s, ns);
	while (rc == 0 && bad < ns && s[bad].present && s[bad].intact)
		bad++;
	if (rc == 0 && bad < ns) {
		rc = open_damaged(c, w, s, ns, bad, err, errlen);
	} else if (rc == 0 && (libewf_handle_initialize(&w->a.h, &e) != 1 ||
			       libewf_handle_open(w->a.h, names, n, LIBEWF_OPEN_READ, &e) != 1)) {
		ewf_why(&e, why, sizeof(why));
		snprintf(err, errlen, "EWF image '%s': cannot open: %s", c->path, why);
		rc = -EIO;
	}
	segs_free(s, ns);
	libewf_glob_free(names, n, NULL);
	size64_t size = 0;
	if (rc == 0 && (libewf_handle_get_media_size(w->a.h, &size, &e) != 1 ||
			libewf_handle_get_chunk_size(w->a.h, &w->chunk, &e) != 1)) {
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

/* Refresh src->bad from libewf's list when its count changed. */
static void bad_refresh(struct ewf_src *src)
{
	uint32_t now = 0;
	if (libewf_handle_get_number_of_checksum_errors(src->h, &now, NULL) != 1 ||
	    now == src->crc_errors)
		return;
	uint64_t(*n)[2] = realloc(src->bad, (size_t)now * sizeof(*n));
	if (!n)
		return;
	src->bad = n;
	uint32_t k = 0;
	for (uint32_t i = 0; i < now; i++) {
		uint64_t start = 0, count = 0;
		if (libewf_handle_get_checksum_error(src->h, i, &start, &count, NULL) != 1 ||
		    start > UINT64_MAX / 512 || count > UINT64_MAX / 512 - start)
			continue;
		n[k][0] = start * 512;
		n[k][1] = (start + count) * 512;
		k++;
	}
	src->crc_errors = k; /* libewf keeps them sorted and merged */
}

/* A read of libewf's [off, off+len) (the disk's, @shift bytes on) that
 * touches a chunk failing its checksum. */
static int crc_failed(struct bi_ctr *c, struct ewf *w, struct ewf_src *src, uint64_t off,
		      size_t len, uint64_t shift, char *err, size_t errlen)
{
	bad_refresh(src);
	size_t lo = 0, hi = src->crc_errors;
	while (lo < hi) { /* first range ending after off */
		size_t mid = lo + (hi - lo) / 2;
		if (src->bad[mid][1] <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == src->crc_errors || src->bad[lo][0] >= off + len)
		return 0;
	uint64_t at = (src->bad[lo][0] > off ? src->bad[lo][0] : off) + shift;
	uint64_t chunk = w->chunk ? at / w->chunk : 0;
	if (c->lost && !w->gap) /* libewf's zeros for a chunk it has no table for */
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

/* The whole chunks at the start of [off, off+len) of the disk (libewf's
 * @shift bytes before) through the fast path; how many bytes were read. */
static size_t ewf_fast(struct bi_ctr *c, struct ewf *w, struct ewf_src *src, uint64_t off,
		       uint64_t shift, uint8_t *p, size_t len)
{
	size_t done = 0;
	while (w->x.raw && len - done > 0 && (off + done) % w->chunk == 0) {
		uint64_t k = (off + done - shift) / w->chunk;
		uint64_t n = c->size - (off + done) < w->chunk ? c->size - (off + done) : w->chunk;
		if (n > len - done || chunk_fast(src->h, w->chunk, &w->x, k, p + done, (size_t)n))
			break;
		done += (size_t)n;
	}
	return done;
}

/* [off, off+len) of the disk, read through @src at @shift bytes less. */
static int read_span(struct bi_ctr *c, struct ewf *w, struct ewf_src *src, uint64_t off,
		     uint64_t shift, uint8_t *p, size_t len, char *err, size_t errlen)
{
	libewf_error_t *e = NULL;
	while (len > 0) {
		size_t fast = ewf_fast(c, w, src, off, shift, p, len);
		p += fast;
		off += fast;
		len -= fast;
		if (len == 0)
			break;
		/* one chunk (or what is left) through libewf */
		size_t n = w->chunk && len > w->chunk - off % w->chunk ? w->chunk - off % w->chunk
								       : len;
		ssize_t r = libewf_handle_read_random(src->h, p, n, (off64_t)(off - shift), &e);
		if (r <= 0) {
			char why[512];
			ewf_why(&e, why, sizeof(why));
			int rc = crc_failed(c, w, src, off - shift, n, shift, err, errlen);
			/* with the gap known, its reads never get here */
			bool lost = c->lost && !w->gap;
			if (rc == 0)
				snprintf(err, errlen,
					 "EWF read of %zu bytes at offset %" PRIu64 " failed: %s%s",
					 n, off, lost ? "segment missing or truncated: " : "",
					 lost ? c->lost : why);
			return -EIO;
		}
		int rc = crc_failed(c, w, src, off - shift, (size_t)r, shift, err, errlen);
		if (rc < 0)
			return rc;
		p += r;
		off += (uint64_t)r;
		len -= (size_t)r;
	}
	return 0;
}

static int ewf_read(struct bi_ctr *c, uint64_t off, void *buf, size_t len, char *err, size_t errlen)
{
	struct ewf *w = c->h;
	uint8_t *p = buf;
	while (len > 0) {
		uint64_t k = w->gap ? off / w->chunk : 0, shift = 0;
		size_t n = len;
		if (w->gap && k >= w->gap_lo && k < w->gap_hi) {
			uint64_t end =
				w->gap_hi * w->chunk < c->size ? w->gap_hi * w->chunk : c->size;
			snprintf(err, errlen,
				 "offset %" PRIu64 " (EWF chunk %" PRIu64
				 ") lies in the part of the disk held by %s (disk bytes %" PRIu64
				 "-%" PRIu64 ")",
				 off, k, w->gap_what, w->gap_lo * w->chunk, end - 1);
			return -EIO;
		}
		struct ewf_src *src = &w->a;
		if (w->gap && k < w->gap_lo && w->gap_lo * w->chunk - off < n) {
			n = (size_t)(w->gap_lo * w->chunk - off);
		} else if (w->gap && k >= w->gap_hi) {
			src = &w->b;
			shift = (w->gap_hi - w->b_base) * w->chunk;
		}
		int rc = read_span(c, w, src, off, shift, p, n, err, errlen);
		if (rc < 0)
			return rc;
		p += n;
		off += n;
		len -= n;
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
	if (w->gap || w->a.pool) /* a damaged set: the caller's reads only */
		return NULL;
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
