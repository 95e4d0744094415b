/* SPDX-License-Identifier: MIT */
/*
 * Offline scrub: every copy of every tree block and data sector the
 * extent tree says is in use, checked as the kernel's scrub checks it
 * (fs/btrfs/scrub.c, scrub_verify_one_metadata and
 * scrub_verify_one_sector), read-only.
 *
 * Order of reads: device by device, each from its lowest chunk stripe to
 * its highest (scrub_map.c lists them), in windows of WINDOW bytes of one
 * stripe. Of a window only [first used byte, last used byte) is read, in
 * one read, around the page cache, by a reading thread that keeps the
 * next windows in flight while one is checked (image/ring.h), so a
 * dense device is read at its sequential rate and empty space is skipped
 * (a container or volume is read window by window through bi_dev_read,
 * the next one hinted to the kernel). The
 * extents and data checksums of a chunk are loaded once per stripe
 * (scrub_map.c: bi_smap_chunk_load), from the trees as bi_block_read verifies
 * them (any good copy).
 *
 * Checks, in the kernel's order and units:
 *   tree block  header bytenr == logical, fsid == the metadata fsid,
 *               chunk_tree_uuid == the chunk root's, checksum of bytes
 *               32..nodesize, generation == the extent item's; a failure
 *               counts nodesize / sectorsize verify_errors
 *   data        each sector's checksum against the csum tree's; a sector
 *               without one counts as no_csum (nodatasum), one that
 *               differs as a csum_error
 *   parity      RAID5/6 P (xor) and Q (Reed-Solomon, raid.c's field) of
 *               every row holding data in use, from the row's data stripes
 *   supers      every copy the device's dev_item size holds: valid, this
 *               filesystem, the generation in use (as scrub_supers)
 * A damaged range is then read through every other copy
 * (bi_read_copy: mirrors, RAID5/6 rebuilds); when one checks out, the
 * damage is correctable, else it counts in uncorrectable_errors.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg_forensic.h"

#include "base/grow.h"
#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "image/ring.h"
#include "forensic/scrub.h"
#include "btrfs/chunk.h"
#include "btrfs/tree.h"
#include "forensic/scrub_map.h"

/* Bytes of one stripe per window, a multiple of 64 KiB (what a window
 * reads is [first used byte, last used byte) of it: bytes_read). Windows
 * whose bytes follow one another are read together, up to REQ bytes per
 * read, DEPTH reads per device at once (see scrub_devext); at most AHEAD
 * windows are worked out ahead. 8 MiB reads are as fast as dd's
 * (bs=8M iflag=direct) here; 1 MiB ones, one at a time, were not. */
#define WINDOW (1u << 20)
#define REQ    (8u << 20)
#define DEPTH  4u
#define AHEAD  64u
#define UNIT   4096u /* read-failure granularity inside a window */

struct scrub {
	struct btrfsimg_fs *fs;
	struct btrfsimg_scrub_opts o;
	struct btrfsimg_scrub_report *r;
	size_t errcap;
	struct bi_smap_chunk k;
	bool k_valid;
	uint32_t win;		 /* window size: WINDOW, others in tests */
	unsigned depth;		 /* ring buffers per device */
	uint8_t *buf;		 /* win bytes: the window read */
	uint8_t bad[REQ / UNIT]; /* units of buf that could not be read */
	uint64_t buf_pos;	 /* physical offset the window starts at */
	const uint8_t *winp;	 /* the bytes read, from physical offset win_lo on */
	uint64_t win_lo;
	struct bi_ring *ring; /* the device read ahead around the page cache, or NULL */
	uint8_t *blk, *alt;   /* nodesize scratch (out-of-window, other copies) */
	uint8_t *rowbuf;      /* RAID5/6: data of a row, stripe_len per data stripe */
	size_t rowcap;
	uint8_t ctu[16]; /* the chunk tree's uuid */
	bool have_ctu;
	uint64_t done, total;
};

const char *btrfsimg_scrub_kind_name(enum btrfsimg_scrub_kind k)
{
	switch (k) {
	case BTRFSIMG_SCRUB_DATA_CSUM:
		return "data-csum";
	case BTRFSIMG_SCRUB_TREE_CSUM:
		return "tree-csum";
	case BTRFSIMG_SCRUB_TREE_HEADER:
		return "tree-header";
	case BTRFSIMG_SCRUB_READ:
		return "read";
	case BTRFSIMG_SCRUB_PARITY:
		return "parity";
	case BTRFSIMG_SCRUB_SUPER:
		return "super";
	case BTRFSIMG_SCRUB_UNCHECKED:
		return "unchecked";
	}
	return "unknown";
}

/* ------------------------------------------------------------ errors */

static int add_error(struct scrub *s, const struct btrfsimg_scrub_error *e)
{
	struct btrfsimg_scrub_report *r = s->r;
	r->total_errors++;
	if (s->o.max_errors && r->nerrors >= s->o.max_errors)
		return 0;
	if (bi_grow((void **)&r->errors, &s->errcap, r->nerrors + 1, sizeof(*r->errors)))
		return bi_err(s->fs, -ENOMEM, "out of memory listing scrub errors");
	r->errors[r->nerrors++] = *e;
	return 0;
}

/* ------------------------------------------------------------ checks */

/* 0 if the block is right, else the kind, with the reason in @why. */
static int tree_verify(struct scrub *s, const uint8_t *b, uint64_t logical, uint64_t gen, char *why,
		       size_t whylen)
{
	struct btrfsimg_fs *fs = s->fs;
	uint64_t have = bi_le64(b + HDR_BYTENR);
	if (have != logical) {
		snprintf(why, whylen, "header bytenr have %" PRIu64 " expect %" PRIu64, have,
			 logical);
		return BTRFSIMG_SCRUB_TREE_HEADER;
	}
	if (memcmp(b + HDR_FSID, fs->meta_fsid, 16) != 0) {
		snprintf(why, whylen, "header fsid is not this filesystem's");
		return BTRFSIMG_SCRUB_TREE_HEADER;
	}
	if (s->have_ctu && memcmp(b + HDR_CHUNK_TREE_UUID, s->ctu, 16) != 0) {
		snprintf(why, whylen, "header chunk_tree_uuid is not this filesystem's");
		return BTRFSIMG_SCRUB_TREE_HEADER;
	}
	uint8_t sum[CSUM_SIZE_MAX];
	bi_csum(fs->csum_type, b + HDR_FSID, fs->nodesize - HDR_FSID, sum);
	if (memcmp(sum, b, fs->csum_size) != 0) {
		uint64_t h = 0, w = 0;
		memcpy(&h, b, fs->csum_size < 8 ? fs->csum_size : 8);
		memcpy(&w, sum, fs->csum_size < 8 ? fs->csum_size : 8);
		snprintf(why, whylen, "%s checksum have 0x%" PRIx64 " expect 0x%" PRIx64,
			 btrfsimg_csum_name(fs->csum_type), h, w);
		return BTRFSIMG_SCRUB_TREE_CSUM;
	}
	have = bi_le64(b + HDR_GENERATION);
	if (gen && have != gen) {
		snprintf(why, whylen,
			 "header generation have %" PRIu64 " expect %" PRIu64 " (extent item)",
			 have, gen);
		return BTRFSIMG_SCRUB_TREE_HEADER;
	}
	return 0;
}

static bool sector_ok(struct scrub *s, const uint8_t *data, const uint8_t *want, char *why,
		      size_t whylen)
{
	struct btrfsimg_fs *fs = s->fs;
	uint8_t sum[CSUM_SIZE_MAX];
	bi_csum(fs->csum_type, data, fs->sectorsize, sum);
	if (memcmp(sum, want, fs->csum_size) == 0)
		return true;
	if (why) {
		uint64_t h = 0, w = 0;
		memcpy(&h, sum, fs->csum_size < 8 ? fs->csum_size : 8);
		memcpy(&w, want, fs->csum_size < 8 ? fs->csum_size : 8);
		snprintf(why, whylen, "%s checksum have 0x%" PRIx64 " expect 0x%" PRIx64,
			 btrfsimg_csum_name(fs->csum_type), h, w);
	}
	return false;
}

/* Whether a copy other than @bad of [logical, +len) checks out: a tree
 * block (@tree), a data sector with checksum @want, or one without
 * (@want NULL: any copy that can be read will do, as a repair would). */
static bool other_copy_ok(struct scrub *s, uint64_t logical, uint32_t len, int bad, bool tree,
			  uint64_t gen, const uint8_t *want)
{
	int n = bi_num_copies(s->fs, logical);
	char why[8];
	for (int c = 0; c < n; c++) {
		if (c == bad || bi_read_copy(s->fs, logical, s->alt, len, c) < 0)
			continue;
		if (tree ? tree_verify(s, s->alt, logical, gen, why, sizeof(why)) == 0
			 : !want || sector_ok(s, s->alt, want, NULL, 0))
			return true;
	}
	return false;
}

/* ------------------------------------------------------------ one window */

/* Whether [off, off + len) of the window buffer was read. */
static bool buf_ok(const struct scrub *s, uint64_t off, uint64_t len)
{
	for (uint64_t u = off / UNIT; u * UNIT < off + len; u++)
		if (s->bad[u])
			return false;
	return true;
}

/* The byte at physical offset @phys of the window (inside what was read). */
static const uint8_t *wp(const struct scrub *s, uint64_t phys)
{
	return s->winp + (phys - s->win_lo);
}

struct place {
	struct btrfsimg_scrub_dev *sd;
	const struct bi_smap_piece *p;
	uint64_t ph;   /* physical offset of the piece */
	uint64_t plen; /* its length inside the window */
};

static int damage(struct scrub *s, const struct place *at, int kind, uint64_t logical, uint32_t len,
		  bool correctable, const char *why)
{
	struct btrfsimg_scrub_error e = {
		.kind = kind,
		.logical = logical,
		.devid = at->sd->devid,
		.physical = at->ph + (logical - at->p->logical),
		.length = len,
		.mirror = at->p->copy + 1,
		.correctable = correctable,
	};
	snprintf(e.detail, sizeof(e.detail), "%s", why);
	if (!correctable)
		at->sd->uncorrectable_errors += len / s->fs->sectorsize;
	return add_error(s, &e);
}

static int check_tree(struct scrub *s, const struct place *at, const struct bi_smap_ext *e)
{
	struct btrfsimg_fs *fs = s->fs;
	const struct bi_smap_piece *p = at->p;
	uint32_t ns = fs->nodesize, sectors = ns / fs->sectorsize;
	if (e->start < p->logical)
		return 0; /* began in an earlier piece, counted there */
	at->sd->tree_bytes_scrubbed += ns;
	at->sd->tree_blocks++;
	const uint8_t *b = NULL;
	uint64_t off = at->ph - s->buf_pos + (e->start - p->logical);
	if (e->start + ns <= p->logical + at->plen) {
		if (buf_ok(s, off, ns))
			b = wp(s, s->buf_pos + off);
	} else if (bi_read_copy(fs, e->start, s->blk, ns, p->copy) == 0) {
		b = s->blk; /* crosses the window or the stripe: read it whole */
	}
	char why[128];
	int kind = BTRFSIMG_SCRUB_READ;
	if (!b) {
		at->sd->read_errors += sectors;
		snprintf(why, sizeof(why), "tree block unreadable");
	} else if ((kind = tree_verify(s, b, e->start, e->gen, why, sizeof(why))) == 0) {
		return 0;
	} else {
		at->sd->verify_errors += sectors;
	}
	bool ok = other_copy_ok(s, e->start, ns, p->copy, true, e->gen, NULL);
	return damage(s, at, kind, e->start, ns, ok, why);
}

static int check_data(struct scrub *s, const struct place *at, const struct bi_smap_ext *e,
		      size_t *hint)
{
	struct btrfsimg_fs *fs = s->fs;
	const struct bi_smap_piece *p = at->p;
	const uint32_t ss = fs->sectorsize;
	uint64_t lo = e->start > p->logical ? e->start : p->logical;
	uint64_t hi = e->start + e->len < p->logical + at->plen ? e->start + e->len
								: p->logical + at->plen;
	if (lo % ss)
		lo += ss - lo % ss;
	for (uint64_t l = lo; l < hi && hi - l >= ss; l += ss) {
		int rc = 0;
		char why[128];
		uint64_t off = at->ph - s->buf_pos + (l - p->logical);
		const uint8_t *want = bi_smap_csum_find(&s->k, l, fs->csum_size, ss, hint);
		at->sd->data_bytes_scrubbed += ss;
		if (!buf_ok(s, off, ss)) {
			at->sd->read_errors++;
			snprintf(why, sizeof(why), "data sector unreadable");
			bool ok = other_copy_ok(s, l, ss, p->copy, false, 0, want);
			rc = damage(s, at, BTRFSIMG_SCRUB_READ, l, ss, ok, why);
		} else if (!want) {
			at->sd->no_csum++;
		} else if (!sector_ok(s, wp(s, s->buf_pos + off), want, why, sizeof(why))) {
			at->sd->csum_errors++;
			bool ok = other_copy_ok(s, l, ss, p->copy, false, 0, want);
			rc = damage(s, at, BTRFSIMG_SCRUB_DATA_CSUM, l, ss, ok, why);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ------------------------------------------------------------ RAID5/6 parity */

/* Q = sum g^i D_i over GF(2^8) mod 0x11d (see btrfs/raid.c), by Horner. */
static void gen_q(const uint8_t *rows, uint32_t d, size_t stride, size_t len, uint8_t *q)
{
	memcpy(q, rows + (size_t)(d - 1) * stride, len);
	for (uint32_t i = d - 1; i-- > 0;)
		for (size_t j = 0; j < len; j++) {
			uint8_t v = q[j];
			q[j] = (uint8_t)(((v << 1) ^ (v & 0x80 ? 0x1d : 0)) ^ rows[i * stride + j]);
		}
}

/* Read the row's data stripes at the parity piece's offset. */
static int read_row(struct scrub *s, const struct bi_chunk *c, uint64_t logical, uint64_t len)
{
	uint32_t d = bi_chunk_data_stripes(c);
	for (uint32_t pos = 0; pos < d; pos++) {
		struct bi_phys ph;
		struct bi_dev *dev;
		if (bi_chunk_map_row(c, logical, pos, &ph) < 0 ||
		    !(dev = bi_dev_by_id(s->fs, ph.devid)) ||
		    bi_dev_read(s->fs, dev, ph.physical, s->rowbuf + (size_t)pos * c->stripe_len,
				(size_t)len) < 0)
			return -EIO;
	}
	return 0;
}

static int check_parity(struct scrub *s, const struct place *at)
{
	const struct bi_smap_piece *p = at->p;
	const struct bi_chunk *c = s->k.c;
	uint32_t d = bi_chunk_data_stripes(c), ss = s->fs->sectorsize;
	uint64_t logical = p->logical + p->unit, off = at->ph - s->buf_pos;
	size_t len = (size_t)at->plen;
	size_t need = (size_t)(d + 1) * c->stripe_len;
	if (need > s->rowcap) {
		uint8_t *nb = realloc(s->rowbuf, need);
		if (!nb)
			return bi_err(s->fs, -ENOMEM, "out of memory checking parity");
		s->rowbuf = nb;
		s->rowcap = need;
	}
	if (!buf_ok(s, off, len) || read_row(s, c, logical, len) < 0) {
		/* a device missing or short: this parity stays unchecked */
		at->sd->parity_unchecked_bytes += len;
		return 0;
	}
	uint8_t *calc = s->rowbuf + (size_t)d * c->stripe_len;
	if (p->pos == d) {
		memcpy(calc, s->rowbuf, len);
		for (uint32_t i = 1; i < d; i++)
			for (size_t j = 0; j < len; j++)
				calc[j] ^= s->rowbuf[(size_t)i * c->stripe_len + j];
	} else {
		gen_q(s->rowbuf, d, c->stripe_len, len, calc);
	}
	at->sd->parity_bytes += len;
	for (size_t j = 0; j + ss <= len; j += ss) {
		if (memcmp(calc + j, wp(s, at->ph + j), ss) == 0)
			continue;
		at->sd->parity_errors++;
		struct btrfsimg_scrub_error e = {
			.kind = BTRFSIMG_SCRUB_PARITY,
			.logical = p->logical,
			.devid = at->sd->devid,
			.physical = at->ph + j,
			.length = ss,
			.correctable = true,
		};
		snprintf(e.detail, sizeof(e.detail), "%s differs from the row's data (offset %zu)",
			 p->pos == d ? "P" : "Q", j);
		int rc = add_error(s, &e);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ------------------------------------------------------------ windows */

static bool row_used(const struct bi_smap_chunk *k, const struct bi_smap_piece *p)
{
	uint64_t row = (uint64_t)bi_chunk_data_stripes(k->c) * k->c->stripe_len;
	size_t i = bi_smap_ext_first(k, p->logical);
	return i < k->n && k->ext[i].start < p->logical + row;
}

/* The piece at @ph clipped to @wend; false when nothing lies there. */
static bool piece(const struct bi_smap_devext *x, uint64_t ph, uint64_t wend,
		  struct bi_smap_piece *p)
{
	bi_smap_piece_at(x, ph, p);
	if (p->len == 0 || p->len > wend - ph)
		p->len = wend - ph;
	return p->mapped;
}

/* [*lo, *hi): the physical bytes of the window something in use lies on. */
static void window_need(struct scrub *s, const struct bi_smap_devext *x, uint64_t pos,
			uint64_t wend, uint64_t *lo, uint64_t *hi)
{
	*lo = UINT64_MAX;
	*hi = 0;
	struct bi_smap_piece p;
	for (uint64_t ph = pos; ph < wend; ph += p.len) {
		if (!piece(x, ph, wend, &p))
			continue;
		uint64_t a = UINT64_MAX, b = 0, pend = p.logical + p.len;
		if (p.parity) {
			if (row_used(&s->k, &p))
				a = ph, b = ph + p.len;
		} else {
			for (size_t i = bi_smap_ext_first(&s->k, p.logical);
			     i < s->k.n && s->k.ext[i].start < pend; i++) {
				const struct bi_smap_ext *e = &s->k.ext[i];
				uint64_t st = e->start > p.logical ? e->start : p.logical;
				uint64_t en = e->start + e->len < pend ? e->start + e->len : pend;
				if (a == UINT64_MAX)
					a = ph + (st - p.logical);
				b = ph + (en - p.logical);
			}
		}
		if (a < *lo)
			*lo = a;
		if (b > *hi)
			*hi = b;
	}
}

/* The window's bytes: @got (read by the ring), else through bi_dev_read. */
static void window_read(struct scrub *s, struct bi_dev *d, struct btrfsimg_scrub_dev *sd,
			uint64_t pos, uint64_t lo, uint64_t hi, const uint8_t *got)
{
	memset(s->bad, 0, s->win / UNIT);
	s->buf_pos = pos;
	s->win_lo = lo;
	sd->bytes_read += hi - lo;
	if (got) {
		s->winp = got;
		return;
	}
	s->winp = s->buf + (lo - pos);
	if (bi_dev_read(s->fs, d, lo, s->buf + (lo - pos), (size_t)(hi - lo)) == 0)
		return;
	/* find which units fail (past the image's end) */
	for (uint64_t u = (lo - pos) / UNIT; u * UNIT < hi - pos; u++) {
		uint64_t a = pos + u * UNIT, b = a + UNIT;
		if (bi_dev_read(s->fs, d, a, s->buf + u * UNIT, (size_t)(b - a)) < 0)
			s->bad[u] = 1;
	}
}

/* A missing device's window (@d NULL): the data pieces of [lo, hi)
 * rebuilt from the rest of their rows (bi_read_copy, copy 0: the row's
 * other data and parity), so window_check checks them as if read; its
 * parity pieces are left unread (units bad: check_parity counts them
 * unchecked), there is nothing of them to compare. */
static void window_rebuild(struct scrub *s, const struct bi_smap_devext *x, uint64_t pos,
			   uint64_t lo, uint64_t hi)
{
	memset(s->bad, 0, s->win / UNIT);
	s->buf_pos = pos;
	s->win_lo = lo;
	s->winp = s->buf + (lo - pos);
	struct bi_smap_piece p;
	for (uint64_t ph = lo; ph < hi; ph += p.len) {
		bool mapped = piece(x, ph, hi, &p);
		if (mapped && !p.parity &&
		    bi_read_copy(s->fs, p.logical, s->buf + (ph - pos), (size_t)p.len, 0) == 0)
			continue;
		for (uint64_t u = (ph - pos) / UNIT; u * UNIT < ph + p.len - pos; u++)
			s->bad[u] = 1;
	}
}

static int window_check(struct scrub *s, const struct bi_smap_devext *x,
			struct btrfsimg_scrub_dev *sd, uint64_t pos, uint64_t wend)
{
	struct bi_smap_piece p;
	size_t hint = 0;
	int rc = 0;
	for (uint64_t ph = pos; ph < wend && rc >= 0; ph += p.len) {
		if (!piece(x, ph, wend, &p))
			continue;
		struct place at = { sd, &p, ph, p.len };
		if (p.parity) {
			if (row_used(&s->k, &p))
				rc = check_parity(s, &at);
			continue;
		}
		for (size_t i = bi_smap_ext_first(&s->k, p.logical);
		     rc >= 0 && i < s->k.n && s->k.ext[i].start < p.logical + p.len; i++)
			rc = s->k.ext[i].tree ? check_tree(s, &at, &s->k.ext[i])
					      : check_data(s, &at, &s->k.ext[i], &hint);
	}
	return rc;
}

static int progress(struct scrub *s, uint64_t bytes)
{
	s->done += bytes;
	if (s->o.progress && s->o.progress(s->o.progress_ctx, s->done, s->total))
		return bi_err(s->fs, -ECANCELED, "scrub stopped by its caller");
	return 0;
}

/* The trees that say what a chunk holds could not be read (a bad copy
 * and the other one on a missing device): its stripe is left unchecked,
 * which is damage too; the scrub goes on with the next one. */
static int unchecked(struct scrub *s, struct btrfsimg_scrub_dev *sd, const struct bi_smap_devext *x)
{
	struct btrfsimg_scrub_error e = {
		.kind = BTRFSIMG_SCRUB_UNCHECKED,
		.logical = x->c->logical,
		.devid = sd->devid,
		.physical = x->physical,
		.length = x->span < UINT32_MAX ? (uint32_t)x->span : UINT32_MAX,
	};
	snprintf(e.detail, sizeof(e.detail), "chunk at logical %" PRIu64 " not checked: %.100s",
		 x->c->logical, btrfsimg_errmsg(s->fs));
	sd->unchecked_bytes += x->span;
	int rc = add_error(s, &e);
	return rc < 0 ? rc : progress(s, x->span);
}

/* One window: [pos, end) of a stripe, and the bytes of it to read. */
struct win {
	uint64_t pos, end, lo, hi;
};

/* A window worked out ahead. Once queued on the ring, glo is where the
 * read holding its bytes starts, and first says it is that read's first
 * window. */
struct qwin {
	struct win w;
	uint64_t glo;
	bool first;
};

struct queue {
	struct qwin q[AHEAD];
	unsigned h, n, sub; /* head, count, how many from the head are queued */
};

static struct qwin *qat(struct queue *q, unsigned i)
{
	return &q->q[(q->h + i) % AHEAD];
}

/* Queue on the ring the reads of the windows not queued yet: runs of
 * windows whose bytes follow one another, up to REQ bytes. A run that
 * could still grow (the last window worked out so far, more to come)
 * waits unless @force. */
static void queue_reads(struct scrub *s, struct queue *q, bool more, bool force)
{
	while (q->sub < q->n) {
		struct qwin *e = qat(q, q->sub);
		if (!s->ring || e->w.lo >= e->w.hi) {
			q->sub++;
			continue;
		}
		uint64_t lo = e->w.lo, hi = e->w.hi;
		unsigned j = q->sub + 1;
		for (; j < q->n; j++) {
			const struct win *w = &qat(q, j)->w;
			if (w->lo >= w->hi || w->lo != hi || w->hi - lo > REQ)
				break;
			hi = w->hi;
		}
		bool closed = j < q->n || !more || hi - lo + s->win > REQ;
		if ((!closed && !force) || !bi_ring_room(s->ring))
			return;
		bi_ring_submit(s->ring, lo, (size_t)(hi - lo));
		for (unsigned i = q->sub; i < j; i++) {
			qat(q, i)->glo = lo;
			qat(q, i)->first = i == q->sub;
		}
		q->sub = j;
		force = false;
	}
}

/* Mirrored profiles map a stripe straight onto the chunk: skip to the
 * window of the next extent, so empty space (or a stripe reaching far past
 * a truncated image) costs nothing. */
static uint64_t skip_empty(const struct scrub *s, const struct bi_smap_devext *x, uint64_t base,
			   uint64_t xend, uint64_t pos)
{
	const struct bi_chunk *c = x->c;
	if (bi_chunk_profile(c) & (BG_RAID0 | BG_RAID10 | BG_RAID5 | BG_RAID6) || pos >= xend)
		return pos;
	size_t i = bi_smap_ext_first(&s->k, c->logical + (pos - base));
	if (i >= s->k.n || s->k.ext[i].start - c->logical >= xend - base)
		return xend;
	uint64_t np = base + (s->k.ext[i].start - c->logical);
	np = base + (np - base) / s->win * s->win;
	return np > pos ? np : pos;
}

static void window_at(struct scrub *s, const struct bi_smap_devext *x, uint64_t base, uint64_t xend,
		      uint64_t pos, struct win *w)
{
	pos = skip_empty(s, x, base, xend, pos);
	w->pos = pos;
	w->end = base + ((pos - base) / s->win + 1) * s->win;
	if (w->end > xend)
		w->end = xend;
	w->lo = w->hi = 0;
	if (pos < xend)
		window_need(s, x, pos, w->end, &w->lo, &w->hi);
}

static int scrub_devext(struct scrub *s, struct bi_dev *d, struct btrfsimg_scrub_dev *sd,
			const struct bi_smap_devext *x)
{
	int rc;
	if (!s->k_valid || s->k.c != x->c) {
		s->k_valid = false;
		if ((rc = bi_smap_chunk_load(s->fs, x->c, true, &s->k)) < 0)
			return rc == -ENOMEM ? rc : unchecked(s, sd, x);
		s->k_valid = true;
	}
	uint64_t base = x->c->stripes[x->stripe].offset, end = x->physical + x->span;
	/* Windows are worked out ahead (up to AHEAD) and their reads queued
	 * on the ring, which reads them in order while the oldest window is
	 * checked. Without a ring, one window at a time, the next one hinted
	 * to the kernel. */
	struct queue q = { .n = 0 };
	unsigned cap = s->ring ? AHEAD : 1;
	uint64_t next = x->physical, counted = x->physical;
	const uint8_t *gdata = NULL; /* the bytes of the ring's read being checked */
	for (;;) {
		while (q.n < cap && next < end) {
			struct win *w = &qat(&q, q.n)->w;
			window_at(s, x, base, end, next, w);
			if (w->pos >= end) {
				next = end;
				break;
			}
			next = w->end;
			q.n++;
		}
		queue_reads(s, &q, next < end, false);
		if (q.n == 0)
			break;
		if (q.sub == 0)
			queue_reads(s, &q, next < end, true);
		struct qwin e = *qat(&q, 0);
		q.h = (q.h + 1) % AHEAD;
		q.n--;
		if (q.sub)
			q.sub--;
		const struct win *w = &e.w;
		if (w->lo < w->hi) {
			const uint8_t *got = NULL;
			if (s->ring && e.first && bi_ring_next(s->ring, &gdata) < 0)
				gdata = NULL;
			if (s->ring && gdata)
				got = gdata + (w->lo - e.glo);
			if (!d)
				window_rebuild(s, x, w->pos, w->lo, w->hi);
			else if (!s->ring)
				bi_dev_prefetch(d, w->end, s->win);
			if (d)
				window_read(s, d, sd, w->pos, w->lo, w->hi, got);
			if ((rc = window_check(s, x, sd, w->pos, w->end)) < 0)
				return rc;
		}
		if ((rc = progress(s, w->end - counted)) < 0)
			return rc;
		counted = w->end;
	}
	if (s->ring)
		bi_ring_release(s->ring);
	return counted < end ? progress(s, end - counted) : 0;
}

/* ------------------------------------------------------------ devices */

static int check_supers(struct scrub *s, struct bi_dev *d, struct btrfsimg_scrub_dev *sd)
{
	for (int i = 0; i < SB_MIRROR_MAX; i++) {
		const struct btrfsimg_super_mirror *m = &d->mirrors[i];
		if (m->bytenr + SB_SIZE > d->total_bytes || m->state == BTRFSIMG_MIRROR_ABSENT)
			break; /* as scrub_supers: only copies the device's size holds */
		if (m->state == BTRFSIMG_MIRROR_VALID && m->generation == s->fs->sb.info.generation)
			continue;
		sd->super_errors++;
		struct btrfsimg_scrub_error e = { .kind = BTRFSIMG_SCRUB_SUPER,
						  .devid = sd->devid,
						  .physical = m->bytenr,
						  .length = SB_SIZE,
						  .mirror = i + 1,
						  .correctable = true };
		if (m->state == BTRFSIMG_MIRROR_VALID)
			snprintf(e.detail, sizeof(e.detail),
				 "superblock copy %d generation have %" PRIu64 " expect %" PRIu64,
				 i, m->generation, s->fs->sb.info.generation);
		else
			snprintf(e.detail, sizeof(e.detail),
				 "superblock copy %d invalid (state %d)", i, (int)m->state);
		int rc = add_error(s, &e);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int scrub_device(struct scrub *s, struct bi_dev *d, struct btrfsimg_scrub_dev *sd,
			struct bi_smap_devext *v, size_t n)
{
	int rc = check_supers(s, d, sd);
	s->ring = bi_ring_open(d, REQ, s->depth, false);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = scrub_devext(s, d, sd, &v[i]);
	bi_ring_close(s->ring);
	s->ring = NULL;
	return rc;
}

/* Whether the chunk's stripes on missing devices can all be rebuilt:
 * RAID5/6 with no more of them missing than it has parity. */
static bool rebuildable(struct btrfsimg_fs *fs, const struct bi_chunk *c)
{
	if (!(bi_chunk_profile(c) & (BG_RAID5 | BG_RAID6)))
		return false;
	uint32_t lost = 0;
	for (uint16_t i = 0; i < c->num_stripes; i++)
		lost += !bi_dev_by_id(fs, c->stripes[i].devid);
	return lost <= bi_chunk_nparity(c);
}

/* A missing device: nothing on it can be read, so every stripe byte on it
 * is unchecked; the tree blocks and data in use of its RAID5/6 stripes
 * that parity can rebuild are rebuilt and checked (rebuilt_bytes), as
 * scrub_devext does for a present device. Its mirrored copies are not: the
 * other copies are checked on their own devices. */
static int scrub_missing(struct scrub *s, struct btrfsimg_scrub_dev *sd, struct bi_smap_devext *v,
			 size_t n)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		sd->unchecked_bytes += v[i].span;
		if (!rebuildable(s->fs, v[i].c)) {
			rc = progress(s, v[i].span);
			continue;
		}
		uint64_t before = sd->data_bytes_scrubbed + sd->tree_bytes_scrubbed;
		rc = scrub_devext(s, NULL, sd, &v[i]);
		sd->rebuilt_bytes += sd->data_bytes_scrubbed + sd->tree_bytes_scrubbed - before;
	}
	return rc;
}

static void load_ctu(struct scrub *s)
{
	struct bi_expect e = { .owner = OBJ_CHUNK_TREE, .level = -1 };
	struct bi_block *b;
	if (bi_block_read(s->fs, s->fs->chunk_tree.bytenr, &e, &b) < 0)
		return;
	memcpy(s->ctu, b->data + HDR_CHUNK_TREE_UUID, 16);
	s->have_ctu = true;
	bi_block_put(s->fs, b);
}

/* Devices in devid order: the chunk tree's DEV_ITEMs (missing ones too). */
static int report_devs(struct scrub *s)
{
	struct btrfsimg_fs *fs = s->fs;
	size_t n = fs->ndevitems;
	s->r->devs = calloc(n ? n : 1, sizeof(*s->r->devs));
	if (!s->r->devs)
		return bi_err(fs, -ENOMEM, "out of memory for the scrub report");
	s->r->ndevs = n;
	for (size_t i = 0; i < n; i++) {
		struct bi_dev *d = bi_dev_by_id(fs, fs->devitems[i].devid);
		s->r->devs[i].devid = fs->devitems[i].devid;
		s->r->devs[i].missing = !d;
		s->r->devs[i].name = d ? d->name : NULL;
	}
	return 0;
}

static int scrub_all(struct scrub *s)
{
	struct btrfsimg_fs *fs = s->fs;
	size_t ndev = s->r->ndevs;
	struct bi_smap_devext **v = calloc(ndev ? ndev : 1, sizeof(*v));
	size_t *nv = calloc(ndev ? ndev : 1, sizeof(*nv));
	int rc = v && nv ? 0 : bi_err(fs, -ENOMEM, "out of memory for the scrub");
	for (size_t i = 0; rc == 0 && i < ndev; i++) {
		struct bi_dev *d = bi_dev_by_id(fs, s->r->devs[i].devid);
		/* up to the device's size in its dev_item: allocated bytes past
		 * the end of a truncated image are read errors, not skipped */
		/* a missing device: up to its dev_item's size, as a present one */
		uint64_t limit = d ? (d->total_bytes > d->size ? d->total_bytes : d->size)
				   : fs->devitems[i].total_bytes;
		if ((rc = bi_smap_dev_extents(fs, s->r->devs[i].devid, limit, &v[i], &nv[i])) == 0)
			for (size_t j = 0; j < nv[i]; j++)
				s->total += v[i][j].span;
	}
	for (size_t i = 0; rc == 0 && i < ndev; i++) {
		struct bi_dev *d = bi_dev_by_id(fs, s->r->devs[i].devid);
		rc = d ? scrub_device(s, d, &s->r->devs[i], v[i], nv[i])
		       : scrub_missing(s, &s->r->devs[i], v[i], nv[i]);
	}
	for (size_t i = 0; v && i < ndev; i++)
		free(v[i]);
	free(v);
	free(nv);
	return rc;
}

int bi_scrub_run(btrfsimg_fs *fs, const struct btrfsimg_scrub_opts *opts, uint32_t window,
		 unsigned depth, struct btrfsimg_scrub_report **out)
{
	if (!out || !bi_opened(fs, "btrfsimg_scrub"))
		return -EINVAL;
	*out = NULL;
	if (window == 0 || window % (64u << 10) || window > REQ)
		return bi_err(fs, -EINVAL, "scrub: window of %" PRIu32 " bytes", window);
	struct scrub s = { .fs = fs, .win = window, .depth = depth };
	if (opts)
		s.o = *opts;
	int rc;
	s.r = calloc(1, sizeof(*s.r));
	s.buf = malloc(window);
	s.blk = malloc(fs->nodesize);
	s.alt = malloc(fs->nodesize > fs->sectorsize ? fs->nodesize : fs->sectorsize);
	if (!s.r || !s.buf || !s.blk || !s.alt) {
		rc = bi_err(fs, -ENOMEM, "out of memory for the scrub");
		goto out;
	}
	load_ctu(&s);
	if ((rc = report_devs(&s)) == 0)
		rc = scrub_all(&s);
out:
	bi_smap_chunk_free(&s.k);
	free(s.buf);
	free(s.blk);
	free(s.alt);
	free(s.rowbuf);
	if (rc < 0) {
		btrfsimg_scrub_report_free(s.r);
		return rc;
	}
	*out = s.r;
	return 0;
}

int btrfsimg_scrub(btrfsimg_fs *fs, const struct btrfsimg_scrub_opts *opts,
		   struct btrfsimg_scrub_report **out)
{
	return bi_scrub_run(fs, opts, WINDOW, DEPTH, out);
}

void btrfsimg_scrub_report_free(struct btrfsimg_scrub_report *r)
{
	if (!r)
		return;
	free(r->devs);
	free(r->errors);
	free(r);
}
