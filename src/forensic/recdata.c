// SPDX-License-Identifier: MIT
/*
 * How far the data of a recovered version can be trusted, and its bytes.
 *
 * Trust in data. Each disk extent (bytenr B, length L, generation g) of a
 * version:
 *   - alive: today's extent tree holds EXTENT_ITEM (B, L) with generation
 *     <= the newest leaf seen referencing the extent: it has been
 *     allocated to this extent all along;
 *   - reused: not alive, and today's extent tree, or any EXTENT_DATA item
 *     found of a later generation, uses bytes of [B, B + L) for another
 *     extent; or a stale chunk maps it and today's chunks cover its
 *     device bytes. A nodatacow (hence nodatasum) extent that a later
 *     version shares may have been rewritten in place: nothing on disk
 *     tells, so such versions read what is there now, never verified;
 *   - verified: every sector matches an EXTENT_CSUM item of a csum-tree
 *     leaf (live or stale) written while B held this extent: generation in
 *     [g, newest leaf referencing it], or any generation >= g when alive.
 *     A match proves the bytes are the ones btrfs wrote for the extent;
 *     compressed extents are checked on the compressed bytes.
 * A verified extent is good even if reused; a csum mismatch, or reuse
 * without verification, makes its range bad ("csum mismatch", "reused").
 * An uncompressed extent some of whose sectors match their checksums is
 * judged sector by sector: those whose checksum differs, and (if reused)
 * those none proves, are bad, the rest good (a partial version).
 * Inline and nodatasum data are never verified.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forensic/version.h"

#include "base/csum.h"
#include "base/cursor.h"
#include "base/grow.h"
#include "base/err.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "btrfs/chunk.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"
#include "files/compress.h"
#include "files/extent.h"

/* The why of ranges whose bytes differ from their checksums: one string,
 * so the raw read tells them by address. */
static const char CSUM_MISMATCH[] = "csum mismatch";

/* ------------------------------------------------------------ reading data */

/* EXT_MIXED: an uncompressed extent judged sector by sector (some
 * sectors proven by their checksums, others not): its bad sectors are in
 * v->res->sub. */
/* EXT_MISMATCH: bad as EXT_BAD, because its bytes differ from the
 * checksums btrfs wrote: the one bad kind whose bytes on disk a raw read
 * (BTRFSIMG_FORENSIC_RAW) still gives, since they are this extent's
 * bytes, damaged or not, where reused ones belong to another file. */
enum ext_state { EXT_GOOD = 0, EXT_VERIFIED = 1, EXT_BAD = 2, EXT_MIXED = 3, EXT_MISMATCH = 4 };
enum sec_state { SEC_NONE = 0, SEC_MATCH = 1, SEC_MISS = 2 };

/* Read @len bytes at @logical: way @copy through today's chunk map, else
 * (copy 0 only) through a stale chunk item. */
static int fx_read(struct btrfsimg_forensic *f, uint64_t logical, uint8_t *buf, size_t len,
		   int copy)
{
	struct btrfsimg_fs *fs = f->fs;
	if (bi_chunk_lookup(fs->chunks, logical))
		return bi_read_copy(fs, logical, buf, len, copy);
	if (copy)
		return -EIO;
	while (len) {
		uint64_t devid, phys, room;
		bool old;
		if (bi_fx_map(f, logical, &devid, &phys, &room, &old) < 0)
			return bi_err(fs, -EIO, "recovered data: logical %" PRIu64 " is in no chunk",
				      logical);
		struct bi_dev *d = bi_dev_by_id(fs, devid);
		size_t n = room < len ? (size_t)room : len;
		if (!d || n == 0)
			return bi_err(fs, -EIO, "recovered data: logical %" PRIu64 ": device missing",
				      logical);
		int rc = bi_dev_read(fs, d, phys, buf, n);
		if (rc < 0)
			return rc;
		buf += n;
		len -= n;
		logical += n;
	}
	return 0;
}

static int fx_copies(struct btrfsimg_forensic *f, uint64_t logical)
{
	return bi_chunk_lookup(f->fs->chunks, logical) ? bi_num_copies(f->fs, logical) : 1;
}

/* The csum leaf last read: consecutive sectors mostly find their
 * checksums in one leaf, read once. */
struct bi_fx_csum_cache {
	size_t idx; /* index of the leaf in f->blocks, plus 1; 0: none */
	uint8_t leaf[];
};

struct bi_fx_csum_cache *bi_fx_csum_cache_new(uint32_t nodesize)
{
	return calloc(1, sizeof(struct bi_fx_csum_cache) + nodesize);
}

void bi_fx_csum_cache_free(struct bi_fx_csum_cache *c)
{
	free(c);
}

/* Largest span one csum item covers, for the backwards search. */
uint64_t bi_fx_csum_span(const struct bi_fx_recovered *r)
{
	uint64_t m = 0;
	for (size_t i = 0; i < r->ncsums; i++)
		if (r->csums[i].end - r->csums[i].start > m)
			m = r->csums[i].end - r->csums[i].start;
	return m;
}

struct csum_q {
	uint64_t gen_lo, gen_hi; /* leaf generations accepted */
	uint64_t span;
};

/* 1: sector at @x matches an accepted csum; 0: accepted csums exist and
 * none matches; -ENOENT: none accepted. */
static int sector_check(struct btrfsimg_forensic *f, const struct csum_q *q, uint64_t x,
			const uint8_t *data)
{
	struct bi_fx_recovered *r = f->rec;
	struct btrfsimg_fs *fs = f->fs;
	size_t a = 0, b = r->ncsums;
	while (a < b) { /* first entry starting after x */
		size_t m = a + (b - a) / 2;
		if (r->csums[m].start <= x)
			a = m + 1;
		else
			b = m;
	}
	uint8_t sum[CSUM_SIZE_MAX];
	bool have = false, any = false;
	for (size_t i = a; i-- > 0;) {
		const struct fx_csum *c = &r->csums[i];
		if (c->start + q->span <= x)
			break;
		if (x >= c->end || c->gen < q->gen_lo || c->gen > q->gen_hi)
			continue;
		if (r->csum_cache->idx != c->block + 1) {
			if (bi_fx_read_block(f, &f->blocks[c->block]) < 0)
				continue;
			memcpy(r->csum_cache->leaf, f->buf, fs->nodesize);
			r->csum_cache->idx = c->block + 1;
		}
		if (!have) {
			bi_csum(fs->csum_type, data, fs->sectorsize, sum);
			have = true;
		}
		any = true;
		size_t at = c->off + (size_t)((x - c->start) / fs->sectorsize) * fs->csum_size;
		if (memcmp(r->csum_cache->leaf + at, sum, fs->csum_size) == 0)
			return 1;
	}
	return any ? 0 : -ENOENT;
}

/* Live EXTENT_ITEMs overlapping [b, b + len): same allocation (exact
 * match of start and length, generation <= @seen), or another one. */
struct live_q {
	uint64_t b, len, seen;
	bool same, other;
};

static int live_item(void *ctx, const struct btrfsimg_key *k, const uint8_t *d, uint32_t size)
{
	struct live_q *q = ctx;
	if (k->type != KT_EXTENT_ITEM || k->objectid >= q->b + q->len ||
	    k->objectid + k->offset <= q->b)
		return 0;
	if (k->objectid == q->b && k->offset == q->len && size >= 16 && bi_le64(d + 8) <= q->seen)
		q->same = true;
	else
		q->other = true;
	return 0;
}

/* Extents do not overlap, and no block group or tree block item starts
 * inside a data extent, so an extent item reaching past @q->b starts at
 * the objectid of the last item before (b, 0, 0): the walk starts there
 * (else 128 MiB back, the largest extent). */
static void live_extent(struct btrfsimg_forensic *f, struct live_q *q)
{
	uint64_t back = (uint64_t)MAX_COMPRESSED * 1024;
	struct btrfsimg_key lo = { q->b > back ? q->b - back : 0, 0, 0 };
	struct bi_root root;
	bi_key before = { q->b ? q->b - 1 : 0, 255, UINT64_MAX }, last;
	if (q->b && bi_root_find(f->fs, OBJ_EXTENT_TREE, &root) == 0 &&
	    bi_tree_last(f->fs, &root, &before, &last) == 0)
		lo.objectid = last.objectid;
	struct btrfsimg_key hi = { q->b + q->len - 1, KT_EXTENT_ITEM, UINT64_MAX };
	if (btrfsimg_tree_walk(f->fs, OBJ_EXTENT_TREE, &lo, &hi, live_item, q) < 0)
		q->other = true; /* unknown: not trusted unverified */
}

/* Device bytes of a stale chunk that today's chunks cover again. */
static bool old_space_reused(struct btrfsimg_forensic *f, uint64_t logical, uint64_t len)
{
	if (bi_chunk_lookup(f->fs->chunks, logical))
		return false;
	uint64_t devid, phys, room;
	bool old;
	if (bi_fx_map(f, logical, &devid, &phys, &room, &old) < 0)
		return true;
	const struct bi_chunk_map *m = f->fs->chunks;
	for (size_t i = 0; i < bi_chunk_map_count(m); i++) {
		const struct bi_chunk *c = bi_chunk_map_at(m, i);
		uint64_t span = bi_chunk_stripe_span(c);
		for (uint16_t s = 0; s < c->num_stripes; s++)
			if (c->stripes[s].devid == devid && phys < c->stripes[s].offset + span &&
			    c->stripes[s].offset < phys + len)
				return true;
	}
	return false;
}

/* Another allocation of a later generation used bytes of the extent. */
static bool stale_reuse(const struct bi_fx_recovered *r, const struct bi_extent *e)
{
	uint64_t b = e->disk_bytenr, end = b + e->disk_num_bytes;
	uint64_t back = (uint64_t)MAX_COMPRESSED * 1024;
	for (size_t i = 0; i < r->ndext; i++) { /* sorted by bytenr */
		const struct fx_dext *d = &r->dext[i];
		if (d->bytenr + back < b)
			continue;
		if (d->bytenr >= end)
			break;
		if (d->bytenr + d->len <= b || d->gen <= e->generation)
			continue;
		return true;
	}
	return false;
}

static const struct fx_dext *dext_of(const struct bi_fx_recovered *r, const struct bi_extent *e)
{
	struct fx_dext key = { e->disk_bytenr, e->disk_num_bytes, e->generation, 0 };
	if (!r->ndext)
		return NULL;
	return bsearch(&key, r->dext, r->ndext, sizeof(*r->dext), dext_cmp);
}

/* Read [lo, hi) of an extent in pieces and check every sector. *match
 * and *miss count sectors that matched / had accepted csums that did not;
 * @sec (may be NULL) gets each sector's enum sec_state, of the copy that
 * did best. */
static int check_sectors(struct btrfsimg_forensic *f, const struct csum_q *q, uint64_t lo,
			 uint64_t hi, uint8_t *buf, uint64_t *match, uint64_t *miss, uint8_t *sec)
{
	uint32_t ss = f->fs->sectorsize;
	uint8_t tmp[OUT_CHUNK / 512];
	for (uint64_t x = lo; x < hi;) {
		size_t n = hi - x < OUT_CHUNK ? (size_t)(hi - x) : OUT_CHUNK;
		int copies = fx_copies(f, x), rc = -EIO;
		uint64_t best_match = 0, best_miss = UINT64_MAX;
		for (int c = 0; c < copies; c++) {
			if (fx_read(f, x, buf, n, c) < 0)
				continue;
			rc = 0;
			uint64_t m = 0, s = 0;
			for (size_t o = 0; o + ss <= n; o += ss) {
				int k = sector_check(f, q, x + o, buf + o);
				m += k == 1;
				s += k == 0;
				tmp[o / ss] = k == 1 ? SEC_MATCH : k == 0 ? SEC_MISS : SEC_NONE;
			}
			if (s < best_miss || (s == best_miss && m > best_match)) {
				best_match = m, best_miss = s;
				if (sec)
					memcpy(sec + (x - lo) / ss, tmp, n / ss);
			}
			if (s == 0)
				break;
		}
		if (rc < 0)
			return rc;
		*match += best_match;
		*miss += best_miss;
		x += n;
	}
	return 0;
}

/* Bad sectors of an extent, as runs in v->res->sub: those whose checksum
 * differs, and, in a reused extent, those no checksum proves. Returns
 * the number of bad sectors, or -ENOMEM. */
static int64_t sector_runs(struct fx_version *v, size_t ext, const uint8_t *sec, uint64_t n,
			   uint64_t lo, uint32_t ss, bool reused)
{
	int64_t bad = 0;
	for (uint64_t i = 0; i < n;) {
		const char *why = sec[i] == SEC_MISS		 ? CSUM_MISMATCH
				  : sec[i] == SEC_NONE && reused ? "reused"
								 : NULL;
		uint64_t j = i + 1;
		while (j < n && sec[j] == sec[i])
			j++;
		if (why) {
			struct fx_result *res = v->res;
			if (bi_grow((void **)&res->sub, &res->csub, res->nsub + 1, sizeof(*res->sub)))
				return -ENOMEM;
			res->sub[res->nsub++] = (struct fx_subbad){ ext, lo + i * ss, lo + j * ss, why };
			bad += (int64_t)(j - i);
		}
		i = j;
	}
	return bad;
}

static enum ext_state eval_extent(struct btrfsimg_forensic *f, struct fx_version *v, size_t idx,
				  const struct bi_extent *e, uint8_t *buf, const char **why)
{
	struct bi_fx_recovered *r = f->rec;
	uint32_t ss = f->fs->sectorsize;
	const struct fx_dext *d = dext_of(r, e);
	uint64_t seen = d && d->last_seen > v->leaf_gen ? d->last_seen : v->leaf_gen;
	struct live_q lq = { e->disk_bytenr, e->disk_num_bytes, seen, false, false };
	live_extent(f, &lq);
	bool alive = lq.same && !lq.other;
	bool reused = !alive && (lq.other || stale_reuse(r, e) ||
				 old_space_reused(f, e->disk_bytenr, e->disk_num_bytes));
	uint64_t lo = e->disk_bytenr, hi = lo + e->disk_num_bytes;
	if (e->kind == BI_EXT_DISK) {
		lo = e->disk_bytenr + (e->offset & ~(uint64_t)(ss - 1));
		uint64_t end = e->disk_bytenr + e->offset + e->num_bytes;
		end = (end + ss - 1) & ~(uint64_t)(ss - 1);
		hi = end < hi ? end : hi;
	}
	struct csum_q q = { e->generation, alive ? UINT64_MAX : seen, r->csum_span };
	uint64_t match = 0, miss = 0;
	uint64_t sectors = (hi - lo) / ss;
	uint8_t *sec = e->kind == BI_EXT_DISK && sectors ? calloc(sectors, 1) : NULL;
	if (check_sectors(f, &q, lo, hi, buf, &match, &miss, sec) < 0) {
		free(sec);
		*why = "unreadable";
		return EXT_BAD;
	}
	if (!(v->inode.flags & INODE_NODATASUM) && sectors && match == sectors) {
		free(sec);
		return EXT_VERIFIED;
	}
	/* Some sectors proven, some not: each judged on its own (an
	 * uncompressed extent's sectors are its file's bytes one for one). */
	if (sec && match && (miss || reused)) {
		size_t keep = v->res->nsub;
		int64_t bad = sector_runs(v, idx, sec, sectors, lo, ss, reused);
		free(sec);
		if (bad > 0 && (uint64_t)bad < sectors)
			return EXT_MIXED;
		v->res->nsub = keep; /* all bad, or out of memory: the whole extent */
	} else {
		free(sec);
	}
	if (miss) {
		*why = CSUM_MISMATCH;
		return EXT_MISMATCH;
	}
	if (reused) {
		*why = "reused";
		return EXT_BAD;
	}
	return EXT_GOOD;
}

/* ------------------------------------------------------------ pieces */

static int ext_cmp(const void *pa, const void *pb)
{
	const struct bi_extent *a = pa, *b = pb;
	return a->file_offset < b->file_offset ? -1 : a->file_offset > b->file_offset;
}

typedef int (*piece_fn)(void *ctx, const struct bi_piece *p, size_t ext);

/* The pieces of [0, size) in order; bytes past the last extent of an
 * incomplete version come as one piece with ext == SIZE_MAX. */
static int walk_pieces_to(const struct fx_version *v, uint64_t size, piece_fn fn, void *ctx)
{
	uint64_t pos = 0;
	for (size_t i = 0; i < v->next && pos < size; i++) {
		uint64_t next = i + 1 < v->next ? v->ext[i + 1].file_offset : UINT64_MAX;
		if (v->ext[i].end <= pos)
			continue;
		struct bi_piece out[3];
		size_t n = bi_extent_pieces(&v->ext[i], next, pos, size, out);
		for (size_t k = 0; k < n; k++) {
			int rc = fn(ctx, &out[k], out[k].kind == BI_EXT_ZERO ? SIZE_MAX - 1 : i);
			if (rc)
				return rc;
			pos = out[k].pos + out[k].len;
		}
	}
	if (pos < size) {
		struct bi_piece tail = { pos, size - pos, BI_EXT_ZERO, 0 };
		return fn(ctx, &tail, v->complete ? SIZE_MAX - 1 : SIZE_MAX);
	}
	return 0;
}

static int walk_pieces(const struct fx_version *v, piece_fn fn, void *ctx)
{
	return walk_pieces_to(v, v->inode.size, fn, ctx);
}

static int add_bad(struct fx_version *v, uint64_t off, uint64_t len, const char *why)
{
	struct fx_result *res = v->res;
	struct btrfsimg_bad_range *last = res->nbad ? &res->bad[res->nbad - 1] : NULL;
	if (last && last->offset + last->length == off && last->why == why) {
		last->length += len;
		return 0;
	}
	if (bi_grow((void **)&res->bad, &res->cbad, res->nbad + 1, sizeof(*res->bad)))
		return -ENOMEM;
	res->bad[res->nbad++] = (struct btrfsimg_bad_range){ off, len, why };
	return 0;
}

/* The parts of DISK piece @p of an EXT_MIXED extent, in order, each good
 * (@why NULL) or bad, through @fn. */
typedef int (*part_fn)(void *ctx, uint64_t pos, uint64_t src, uint64_t len, const char *why);
static int mixed_split(const struct fx_version *v, size_t ext, const struct bi_piece *p, part_fn fn,
		       void *ctx)
{
	uint64_t at = p->src, end = p->src + p->len;
	for (size_t i = 0; i < v->res->nsub && at < end; i++) {
		const struct fx_subbad *b = &v->res->sub[i];
		if (b->ext != ext || b->hi <= at || b->lo >= end)
			continue;
		int rc;
		if (b->lo > at && (rc = fn(ctx, p->pos + (at - p->src), at, b->lo - at, NULL)))
			return rc;
		uint64_t lo = b->lo > at ? b->lo : at, hi = b->hi < end ? b->hi : end;
		if ((rc = fn(ctx, p->pos + (lo - p->src), lo, hi - lo, b->why)))
			return rc;
		at = hi;
	}
	return at < end ? fn(ctx, p->pos + (at - p->src), at, end - at, NULL) : 0;
}

struct eval_ctx {
	struct fx_version *v;
	const char **whys;
	uint64_t good_data, bad_data;
};

static int eval_part(void *ctx, uint64_t pos, uint64_t src, uint64_t len, const char *why)
{
	(void)src;
	struct eval_ctx *x = ctx;
	if (!why) {
		x->good_data += len;
		return 0;
	}
	x->bad_data += len;
	return add_bad(x->v, pos, len, why);
}

static int eval_piece(void *ctx, const struct bi_piece *p, size_t ext)
{
	struct eval_ctx *x = ctx;
	if (ext == SIZE_MAX)
		return add_bad(x->v, p->pos, p->len, "items not found");
	if (ext == SIZE_MAX - 1)
		return 0;
	if (x->v->res->state[ext] == EXT_BAD || x->v->res->state[ext] == EXT_MISMATCH) {
		x->bad_data += p->len;
		return add_bad(x->v, p->pos, p->len, x->whys[ext]);
	}
	if (x->v->res->state[ext] == EXT_MIXED && p->kind == BI_EXT_DISK)
		return mixed_split(x->v, ext, p, eval_part, x);
	x->good_data += p->len;
	return 0;
}

/* The bytes the extents hold as the kernel counts them in nbytes: inline
 * ram_bytes, regular and prealloc num_bytes (holes none). */
uint64_t bi_fx_nbytes(const struct fx_version *v)
{
	uint64_t n = 0;
	for (size_t i = 0; i < v->next; i++) {
		const struct bi_extent *e = &v->ext[i];
		if (e->type == FE_TYPE_INLINE)
			n += e->ram_bytes;
		else if (e->disk_bytenr)
			n += e->num_bytes;
	}
	return n;
}

struct data_end {
	const struct fx_version *v;
	uint64_t end;
};

/* Pieces of bad extents are produced as zeros: holes, for this purpose. */
static int data_end_piece(void *ctx, const struct bi_piece *p, size_t ext)
{
	struct data_end *d = ctx;
	if (p->kind != BI_EXT_ZERO && ext < d->v->next && d->v->res->state[ext] != EXT_BAD)
		d->end = p->pos + p->len;
	return 0;
}

static const char forged_why[] = "past the data's end (or the bound) under a size beyond 16 "
				 "bytes per byte of the devices (a size that may be forged): "
				 "not produced";

/*
 * A size past bi_size_bound (extent.h: 16 bytes per byte of the devices)
 * is believed only as far as the version's data goes, and never past the
 * bound (data placed at 2^62 would make as many zeros before it): the
 * rest becomes one bad range that is never produced (v->res->out_end), and the
 * damage is said, so no reader hashes or writes years of zeros because a
 * stale leaf claims 6e18 bytes. Bad ranges past out_end are folded into
 * it. One walk over the pieces: as many as the items.
 */
static int bound_size(struct btrfsimg_forensic *f, struct fx_version *v)
{
	uint64_t size = v->inode.size, bound = bi_size_bound(f->fs);
	v->res->out_end = size;
	if (size <= bound)
		return 0;
	struct data_end d = { v, 0 };
	walk_pieces(v, data_end_piece, &d);
	uint64_t end = d.end < bound ? d.end : bound;
	size_t keep = 0;
	for (size_t i = 0; i < v->res->nbad; i++) {
		struct btrfsimg_bad_range *b = &v->res->bad[i];
		if (b->offset >= end)
			continue;
		if (b->length > end - b->offset)
			b->length = end - b->offset;
		v->res->bad[keep++] = *b;
	}
	v->res->nbad = keep;
	v->res->out_end = end;
	bi_damage(f->fs,
		  "recovered version: subvol=%" PRIu64 " inode=%" PRIu64 " (leaf generation %"
		  PRIu64 ") size=%" PRIu64 " is more than %" PRIu64
		  " (16 bytes per byte of the devices) and its data ends at byte %" PRIu64
		  ": bytes from %" PRIu64 " on are a bad range, never produced (the size may"
		  " be forged)",
		  v->subvol, v->ino, v->leaf_gen, size, bound, d.end, end);
	return add_bad(v, end, size - end, forged_why);
}

static const char disagree_why[] = "items disagree with the inode";

/* An extent item (inside i_size) of a later transaction than the inode
 * item's transid: writing an extent updates its inode in the same
 * transaction, so the two are of different states of the file. */
static bool newer_items(const struct fx_version *v)
{
	for (size_t i = 0; i < v->next; i++)
		if (v->ext[i].file_offset < v->inode.size &&
		    v->ext[i].generation > v->inode.transid)
			return true;
	return false;
}

/* Status and verified of a version from its extents' states. */
int bi_fx_evaluate(struct btrfsimg_forensic *f, struct fx_version *v, uint8_t *buf)
{
	fx_qsort(v->ext, v->next, sizeof(*v->ext), ext_cmp);
	v->res->state = calloc(v->next ? v->next : 1, 1);
	const char **whys = calloc(v->next ? v->next : 1, sizeof(*whys));
	if (!v->res->state || !whys) {
		free(whys);
		return -ENOMEM;
	}
	struct btrfsimg_recovered *rec = &v->res->rec;
	size_t disk = 0, verified = 0;
	for (size_t i = 0; i < v->next; i++) {
		const struct bi_extent *e = &v->ext[i];
		if (e->file_offset >= v->inode.size)
			continue;
		if (e->kind == BI_EXT_INLINE)
			rec->has_inline = true;
		if (e->compression)
			rec->compressed = true;
		if (e->kind < BI_EXT_DISK)
			continue;
		disk++;
		/* Larger than every device together: forged, and checking it
		 * sector by sector would take as long as its size claims. */
		if (e->disk_num_bytes > bi_devices_bytes(f->fs)) {
			v->res->state[i] = EXT_BAD;
			whys[i] = "extent larger than the devices";
			continue;
		}
		v->res->state[i] = (uint8_t)eval_extent(f, v, i, e, buf, &whys[i]);
		verified += v->res->state[i] == EXT_VERIFIED;
	}
	struct eval_ctx x = { v, whys, 0, 0 };
	int rc = walk_pieces(v, eval_piece, &x);
	free(whys);
	if (rc < 0)
		return rc;
	rec->nodatasum = (v->inode.flags & INODE_NODATASUM) != 0;
	/* A block written in the middle of a transaction can hold an inode
	 * item and extent items that were never true together (a truncate
	 * half done, a rewrite whose inode item lags): nbytes, which the
	 * kernel keeps equal to the bytes its extents hold (btrfs check's
	 * "nbytes wrong"), tells, and so does an extent item newer than the
	 * inode item. */
	if (v->inode.size && ((v->complete && bi_fx_nbytes(v) != v->inode.nbytes) ||
			      newer_items(v))) {
		v->res->nbad = 0; /* the whole file, instead of what the pieces said */
		if ((rc = add_bad(v, 0, v->inode.size, disagree_why)) < 0)
			return rc;
		/* None of its bytes are this version's: the extents at its
		 * offsets may be a later state's (the live file's). */
		x.good_data = 0;
		x.bad_data = v->inode.size;
	}
	if ((rc = bound_size(f, v)) < 0)
		return rc;
	bool any_items = v->next > 0;
	bool disagree = v->res->nbad && v->res->bad[0].why == disagree_why;
	if (v->inode.size && ((!any_items && !v->complete) || disagree))
		rec->status = BTRFSIMG_REC_METADATA_ONLY;
	else if (!v->res->nbad)
		rec->status = BTRFSIMG_REC_INTACT;
	else if (x.bad_data && !x.good_data && !rec->has_inline)
		rec->status = BTRFSIMG_REC_OVERWRITTEN;
	else
		rec->status = BTRFSIMG_REC_PARTIAL;
	rec->verified = rec->status == BTRFSIMG_REC_INTACT && disk && verified == disk &&
			!rec->has_inline && !rec->nodatasum;
	return 0;
}

struct out_ctx {
	struct btrfsimg_forensic *f;
	struct fx_version *v;
	btrfsimg_data_fn fn;
	bi_fx_hole_fn hole; /* zeros as one call, if set */
	void *ctx;
	uint8_t *buf, *dec;
	size_t dec_ext; /* extent decoded in dec (+1), 0 none */
	bool raw;	/* csum mismatch ranges as on disk, not zeros */
	int rc;
};

/* Zeros for @len bytes from @pos. */
static int emit_zeros(struct out_ctx *o, uint64_t pos, uint64_t len)
{
	if (o->hole)
		return len ? o->hole(o->ctx, pos, len) : 0;
	memset(o->buf, 0, OUT_CHUNK);
	while (len) {
		size_t n = len < OUT_CHUNK ? (size_t)len : OUT_CHUNK;
		int rc = o->fn(o->ctx, pos, o->buf, n);
		if (rc)
			return rc;
		pos += n;
		len -= n;
	}
	return 0;
}

/* Decode extent @i (inline or compressed) into o->dec (ram_bytes). */
static int decode(struct out_ctx *o, size_t i)
{
	const struct bi_extent *e = &o->v->ext[i];
	struct btrfsimg_fs *fs = o->f->fs;
	if (o->dec_ext == i + 1)
		return 0;
	free(o->dec);
	o->dec = calloc(1, e->ram_bytes ? e->ram_bytes : 1);
	uint8_t *src = NULL;
	if (!o->dec)
		return -ENOMEM;
	const uint8_t *in = e->inline_data;
	size_t inlen = e->inline_size;
	if (e->kind == BI_EXT_COMPRESSED) {
		src = malloc(e->disk_num_bytes);
		if (!src)
			return -ENOMEM;
		int rc = fx_read(o->f, e->disk_bytenr, src, e->disk_num_bytes, 0);
		if (rc < 0) {
			free(src);
			return rc;
		}
		in = src;
		inlen = e->disk_num_bytes;
	}
	int rc = 0;
	if (e->compression) {
		size_t got;
		char why[256];
		if (!o->f->rec->z && !(o->f->rec->z = bi_zctx_new()))
			rc = -ENOMEM;
		else
			rc = bi_decompress(o->f->rec->z, e->compression, in, inlen, o->dec,
					   e->ram_bytes, fs->sectorsize, &got, why, sizeof(why));
	} else {
		memcpy(o->dec, in, inlen < e->ram_bytes ? inlen : e->ram_bytes);
	}
	free(src);
	if (rc == 0)
		o->dec_ext = i + 1;
	return rc;
}

/* File bytes [pos, pos + len) from logical @src on (zeros if a bad
 * part or unreadable). */
static int out_disk(void *ctx, uint64_t pos, uint64_t src, uint64_t len, const char *why)
{
	struct out_ctx *o = ctx;
	if (why && !(o->raw && why == CSUM_MISMATCH))
		return emit_zeros(o, pos, len);
	for (uint64_t d = 0; d < len;) {
		size_t n = len - d < OUT_CHUNK ? (size_t)(len - d) : OUT_CHUNK;
		int rc = fx_read(o->f, src + d, o->buf, n, 0);
		if (rc < 0)
			return emit_zeros(o, pos + d, len - d);
		if ((rc = o->fn(o->ctx, pos + d, o->buf, n)))
			return rc;
		d += n;
	}
	return 0;
}

static int out_piece_in(struct out_ctx *o, const struct bi_piece *p, size_t ext)
{
	if (ext >= SIZE_MAX - 1 || o->v->res->state[ext] == EXT_BAD || p->kind == BI_EXT_ZERO ||
	    (o->v->res->state[ext] == EXT_MISMATCH && !o->raw))
		return emit_zeros(o, p->pos, p->len);
	if (p->kind == BI_EXT_DISK && o->v->res->state[ext] == EXT_MIXED)
		return mixed_split(o->v, ext, p, out_disk, o);
	if (p->kind == BI_EXT_DISK)
		return out_disk(o, p->pos, p->src, p->len, NULL);
	if (decode(o, ext) < 0)
		return emit_zeros(o, p->pos, p->len);
	const struct bi_extent *e = &o->v->ext[ext];
	if (p->src > e->ram_bytes || p->len > e->ram_bytes - p->src)
		return emit_zeros(o, p->pos, p->len);
	for (uint64_t d = 0; d < p->len;) {
		size_t n = p->len - d < OUT_CHUNK ? (size_t)(p->len - d) : OUT_CHUNK;
		int rc = o->fn(o->ctx, p->pos + d, o->dec + p->src + d, n);
		if (rc)
			return rc;
		d += n;
	}
	return 0;
}

/*
 * A piece as out_piece_in gives it, except that what the version's bad
 * ranges cover is zeros whatever the extents say: a range the record
 * calls untrusted never shows bytes (for "items disagree with the inode"
 * the extents at its offsets can be a later state's, the live file's).
 * A raw read (BTRFSIMG_FORENSIC_RAW) leaves "csum mismatch" ranges to
 * out_piece_in, which gives their bytes on disk. v->res->bad is in file order
 * (added by one walk over the pieces, then the whole file, or the size's
 * bound at the end).
 */
static int out_piece(void *ctx, const struct bi_piece *p, size_t ext)
{
	struct out_ctx *o = ctx;
	uint64_t at = p->pos, end = p->pos + p->len;
	for (size_t i = 0; i < o->v->res->nbad && at < end; i++) {
		const struct btrfsimg_bad_range *b = &o->v->res->bad[i];
		if (b->offset + b->length <= at || b->offset >= end ||
		    (o->raw && b->why == CSUM_MISMATCH))
			continue;
		int rc;
		if (b->offset > at) {
			struct bi_piece q = { at, b->offset - at, p->kind, p->src + (at - p->pos) };
			if ((rc = out_piece_in(o, &q, ext)))
				return rc;
			at = b->offset;
		}
		uint64_t hi = b->length < end - b->offset ? b->offset + b->length : end;
		if ((rc = emit_zeros(o, at, hi - at)))
			return rc;
		at = hi;
	}
	if (at == p->pos)
		return out_piece_in(o, p, ext);
	if (at >= end)
		return 0;
	struct bi_piece q = { at, end - at, p->kind, p->src + (at - p->pos) };
	return out_piece_in(o, &q, ext);
}

int bi_fx_out_walk_holes(struct btrfsimg_forensic *f, struct fx_version *v, bool raw,
			 btrfsimg_data_fn fn, bi_fx_hole_fn hole, void *ctx)
{
	struct out_ctx o = { f, v, fn, hole, ctx, malloc(OUT_CHUNK), NULL, 0, raw, 0 };
	if (!o.buf)
		return bi_err(f->fs, -ENOMEM, "deleted files: out of memory");
	int rc = walk_pieces_to(v, v->res->out_end, out_piece, &o);
	free(o.buf);
	free(o.dec);
	return rc;
}

int bi_fx_out_walk(struct btrfsimg_forensic *f, struct fx_version *v, bool raw,
		   btrfsimg_data_fn fn, void *ctx)
{
	return bi_fx_out_walk_holes(f, v, raw, fn, NULL, ctx);
}
