// SPDX-License-Identifier: MIT
/*
 * Whole-image target for the forensic scan (btrfsimg_forensic.h): stale
 * tree blocks are exactly what an attacker controls, so every byte of the
 * sparse image (fuzz/sparse_image.h; with the checksum-fixing flag,
 * hostile blocks carry valid checksums) reaches the scan, the chunk items
 * of stale chunk-tree leaves (older chunk maps), the history walk and the
 * version builder with its data reads, checksum look-ups and paths.
 * Invariants: blocks come in owner, generation order, each one's key
 * range ordered; generations strictly increase; every record has an id,
 * a path, known kind and status names, bad ranges inside the file and
 * not overlapping; reading a record gives exactly its size in bytes, in
 * order, zeros wherever a bad range says (never another state's bytes),
 * and 0 only for an intact one (a size past
 * btrfsimg_file_size_bound: partial, its bytes up to where the last bad
 * range, the holes, begins, read in bounded time); the handle has a
 * message after every failure. Then the oldest generation history lists
 * is opened (btrfsimg_set_generation: the root chosen from the scan, every
 * block of its trees checked against generation N) and its subvolumes
 * listed: either the open fails with a message or it says which root it
 * read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg_forensic.h"
#include "sparse_image.h"

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			abort();                                                                   \
	} while (0)
#define MAX_READS 16

static void on_log(void *ctx, bool damage, const char *msg)
{
	(void)ctx;
	(void)damage;
	CHECK(msg && *msg);
}

struct order {
	uint64_t owner, generation, transid;
	uint64_t oldest; /* the first generation history lists */
	bool any;
};

static int key_le(const struct btrfsimg_key *a, const struct btrfsimg_key *b)
{
	if (a->objectid != b->objectid)
		return a->objectid < b->objectid;
	if (a->type != b->type)
		return a->type < b->type;
	return a->offset <= b->offset;
}

static int on_block(void *ctx, const struct btrfsimg_tree_block *b)
{
	struct order *o = ctx;
	CHECK(!o->any || b->owner > o->owner ||
	      (b->owner == o->owner && b->generation >= o->generation));
	CHECK(b->level < 8 && key_le(&b->first, &b->last));
	o->owner = b->owner;
	o->generation = b->generation;
	o->any = true;
	return 0;
}

static int on_gen(void *ctx, const struct btrfsimg_generation *g)
{
	struct order *o = ctx;
	CHECK(!o->any || g->transid > o->transid);
	CHECK(g->ntrees == 0 || g->trees);
	if (!o->any)
		o->oldest = g->transid;
	o->transid = g->transid;
	o->any = true;
	return 0;
}

struct reading {
	uint64_t next;
	const struct btrfsimg_recovered *rec;
	bool raw; /* BTRFSIMG_FORENSIC_RAW: csum mismatches as on disk */
};

/* What a bad range covers reads as zeros, whatever the extents hold
 * (raw: but csum mismatches). */
static void bad_zeros(const struct reading *rd, uint64_t off, const uint8_t *p, size_t len)
{
	const struct btrfsimg_recovered *rec = rd->rec;
	for (size_t i = 0; i < rec->nbad; i++) {
		if (rd->raw && strcmp(rec->bad[i].why, "csum mismatch") == 0)
			continue;
		uint64_t lo = rec->bad[i].offset, hi = lo + rec->bad[i].length;
		lo = lo > off ? lo : off;
		hi = hi < off + len ? hi : off + len;
		for (uint64_t x = lo; x < hi; x++)
			CHECK(p[x - off] == 0);
	}
}

static int on_data(void *ctx, uint64_t off, const void *data, size_t len)
{
	struct reading *r = ctx;
	CHECK(off == r->next && data && len > 0 && len <= (1u << 20));
	bad_zeros(r, off, data, len);
	r->next += len;
	return 0;
}

static int on_xattr(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *value,
		    size_t vlen)
{
	(void)ctx;
	CHECK((name || nlen == 0) && (value || vlen == 0));
	return 0;
}

struct recs {
	btrfsimg_forensic *f;
	uint64_t bound; /* btrfsimg_file_size_bound */
	unsigned reads;
};

static int on_rec(void *ctx, const struct btrfsimg_recovered *r)
{
	struct recs *x = ctx;
	CHECK(r->id && *r->id && r->path);
	CHECK(strcmp(btrfsimg_recovered_kind_name(r->kind), "unknown") != 0);
	CHECK(strcmp(btrfsimg_recovered_status_name(r->status), "unknown") != 0);
	CHECK(!r->verified || r->status == BTRFSIMG_REC_INTACT);
	uint64_t end = 0;
	for (size_t i = 0; i < r->nbad; i++) {
		CHECK(r->bad[i].length > 0 && r->bad[i].offset >= end && r->bad[i].why);
		CHECK(r->bad[i].offset + r->bad[i].length <= r->inode.size);
		end = r->bad[i].offset + r->bad[i].length;
	}
	bool forged = r->inode.size > x->bound;
	CHECK(!forged || (r->status != BTRFSIMG_REC_INTACT && r->nbad &&
			  r->bad[r->nbad - 1].offset + r->bad[r->nbad - 1].length == r->inode.size));
	if (x->reads++ < MAX_READS && (r->inode.size <= (64u << 20) || forged)) {
		struct reading rd = { 0, r, false };
		int rc = btrfsimg_forensic_read(x->f, r->id, on_data, &rd);
		CHECK(rc == 0 || rc == 1 || rc < 0);
		uint64_t produced = forged ? r->bad[r->nbad - 1].offset : r->inode.size;
		if (rc >= 0)
			CHECK(rd.next == produced && (rc == 0) == (r->status == BTRFSIMG_REC_INTACT));
		/* raw (csum mismatches as on disk): the same length and verdict */
		struct reading raw = { 0, r, true };
		int rr = btrfsimg_forensic_read_flags(x->f, r->id, BTRFSIMG_FORENSIC_RAW, on_data,
						      &raw);
		CHECK(rr == rc && (rr < 0 || raw.next == produced));
		CHECK(btrfsimg_forensic_read_flags(x->f, r->id, 2u, on_data, &raw) == -EINVAL);
	}
	CHECK(btrfsimg_forensic_xattrs(x->f, r->id, on_xattr, NULL) <= 0);
	return 0;
}

/* The filesystem as generation @gen committed it. */
static void open_generation(struct sparse_image *im, uint64_t gen)
{
	btrfsimg_fs *fs = NULL;
	if (btrfsimg_fs_new(&fs, NULL) < 0)
		return;
	btrfsimg_set_log(fs, on_log, NULL);
	CHECK(btrfsimg_set_generation(fs, gen) == 0);
	CHECK(btrfsimg_add_device_io(fs, sparse_read, im, im->size, "fuzz") == 0);
	if (btrfsimg_open(fs) < 0) {
		CHECK(*btrfsimg_errmsg(fs) && !btrfsimg_generation_root(fs, NULL));
		goto out;
	}
	uint64_t have = 0;
	const char *how = btrfsimg_generation_root(fs, &have);
	CHECK(how && have == gen && !strncmp(how, "root tree at logical ", 21));
	struct btrfsimg_subvol *v = NULL;
	size_t n = 0;
	if (btrfsimg_subvols(fs, &v, &n) < 0)
		CHECK(*btrfsimg_errmsg(fs));
	else
		btrfsimg_subvols_free(v, n);
out:
	btrfsimg_fs_free(fs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sparse_image im;
	if (sparse_parse(data, size, &im) < 0)
		return 0;
	if (im.fix_csums)
		sparse_fix_csums(&im);
	btrfsimg_fs *fs = NULL;
	btrfsimg_forensic *f = NULL;
	if (btrfsimg_fs_new(&fs, NULL) < 0)
		goto out;
	btrfsimg_set_log(fs, on_log, NULL);
	CHECK(btrfsimg_add_device_io(fs, sparse_read, &im, im.size, "fuzz") == 0);
	if (btrfsimg_open(fs) < 0) {
		CHECK(*btrfsimg_errmsg(fs));
		goto out;
	}
	if (btrfsimg_forensic_scan(fs, NULL, NULL, &f) < 0) {
		CHECK(*btrfsimg_errmsg(fs) && !f);
		goto out;
	}
	struct btrfsimg_scan_stats st;
	CHECK(btrfsimg_forensic_stats(f, &st) == 0 && st.blocks <= st.candidates);
	struct order o = { 0 };
	CHECK(btrfsimg_forensic_blocks(f, on_block, &o) == 0);
	o = (struct order){ 0 };
	int rc = btrfsimg_forensic_history(f, on_gen, &o);
	CHECK(rc == 0 || (rc < 0 && *btrfsimg_errmsg(fs)));
	struct recs x = { f, btrfsimg_file_size_bound(fs), 0 };
	rc = btrfsimg_forensic_recovered(f, on_rec, &x);
	CHECK(rc == 0 || (rc < 0 && *btrfsimg_errmsg(fs)));
	if (o.any)
		open_generation(&im, o.oldest);
out:
	btrfsimg_forensic_free(f);
	btrfsimg_fs_free(fs);
	sparse_free(&im);
	return 0;
}
