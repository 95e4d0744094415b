// SPDX-License-Identifier: MIT
/*
 * The forensic layer (src/forensic/) on the kernel-made images of
 * testdata/forensic (testdata/gen-forensic.sh, gen_forensic*.py), through
 * the public btrfsimg_forensic.h and, for the read pieces, block_scan.h.
 * Truth is what the kernel wrote, never btrfsimg's earlier output:
 *  - block_scan: every indexed block, read again from the image file at
 *    the place the index gives, has the header the entry claims and a
 *    valid checksum; the superblock's root and chunk root (the kernel's
 *    primary superblock, read here byte by byte) are indexed; small read
 *    pieces and plain reads index the same blocks; a valid leaf copied
 *    where no chunk maps counts as unmapped and adds nothing; a byte
 *    flipped in fs-tree blocks makes each one a bad checksum, never used;
 *  - history: generations strictly increasing; those said to come from a
 *    superblock are the primary's or a backup root's (and their root
 *    tree block is the one it names); the primary's own generation has
 *    every tree found;
 *  - recovered versions against *.truth.json (the sha256 of every version
 *    the generator gave the kernel to write, and its fate): no record
 *    claimed intact or verified holds bytes never written; its path and
 *    kind are the truth's; untrusted ranges read as zeros (raw: only the
 *    checksum-mismatch ranges differ); a file unlinked while open (orphan)
 *    and one whose extent items fill several leaves (span) are whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <json-c/json.h>
#include <openssl/evp.h>

#include "btrfsimg.h"
#include "btrfsimg_forensic.h"
#include "base/csum.h"
#include "forensic/block_scan.h"
#include "unpack.h"

#define FX TESTDATA "/forensic/"

/* ------------------------------------------------------------ the kernel's bytes */

/* Little-endian fields of the image file, read here without the library:
 * the superblock (struct btrfs_super_block) and tree block headers
 * (struct btrfs_header), offsets as the kernel's ctree.h lays them out. */
static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#define SUPER_AT	 0x10000
#define SB_FSID		 0x20
#define SB_GENERATION	 0x48
#define SB_ROOT		 0x50
#define SB_CHUNK_ROOT	 0x58
#define SB_NODESIZE	 0x94
#define SB_CHUNK_GEN	 0xa4
#define SB_INCOMPAT	 0xbc
#define SB_CSUM_TYPE	 0xc4
#define SB_ROOT_LEVEL	 0xc6
#define SB_CHUNK_LEVEL	 0xc7
#define SB_METADATA_UUID 0x23b
#define SB_BACKUPS	 0xb2b /* four struct btrfs_root_backup of 168 bytes */
#define INCOMPAT_METADATA_UUID (1ull << 10)

#define HDR_CSUM     0
#define HDR_FSID     32
#define HDR_BYTENR   48
#define HDR_GEN	     80
#define HDR_OWNER    88
#define HDR_NRITEMS  96
#define HDR_LEVEL    100
#define HDR_SIZE     101
#define ROOT_TREE_ID 1
#define CHUNK_TREE_ID 3
#define FS_TREE_ID   5

struct kernel_super {
	uint8_t fsid[16]; /* what tree block headers carry */
	uint64_t generation, root, chunk_root, chunk_gen;
	uint32_t nodesize;
	int csum_type;
	uint8_t root_level, chunk_level;
	uint64_t backup_root[4], backup_gen[4];
};

static struct kernel_super read_super(const char *img)
{
	uint8_t sb[4096];
	int fd = open(img, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, sb, sizeof(sb), SUPER_AT), (ssize_t)sizeof(sb));
	close(fd);
	assert_memory_equal(sb + 0x40, "_BHRfS_M", 8);
	struct kernel_super k = { 0 };
	bool meta_uuid = le64(sb + SB_INCOMPAT) & INCOMPAT_METADATA_UUID;
	memcpy(k.fsid, sb + (meta_uuid ? SB_METADATA_UUID : SB_FSID), 16);
	k.generation = le64(sb + SB_GENERATION);
	k.root = le64(sb + SB_ROOT);
	k.chunk_root = le64(sb + SB_CHUNK_ROOT);
	k.chunk_gen = le64(sb + SB_CHUNK_GEN);
	k.nodesize = le32(sb + SB_NODESIZE);
	k.csum_type = sb[SB_CSUM_TYPE] | sb[SB_CSUM_TYPE + 1] << 8;
	k.root_level = sb[SB_ROOT_LEVEL];
	k.chunk_level = sb[SB_CHUNK_LEVEL];
	for (int i = 0; i < 4; i++) {
		k.backup_root[i] = le64(sb + SB_BACKUPS + 168 * i);
		k.backup_gen[i] = le64(sb + SB_BACKUPS + 168 * i + 8);
	}
	return k;
}

/* ------------------------------------------------------------ opening */

struct fxfs {
	btrfsimg_fs *fs;
	btrfsimg_forensic *f;
};

static void quiet(void *ctx, bool damage, const char *msg)
{
	(void)ctx, (void)damage, (void)msg;
}

static btrfsimg_fs *open_devices(char **imgs, size_t n)
{
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, NULL), 0);
	btrfsimg_set_log(fs, quiet, NULL);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(btrfsimg_add_device_file(fs, imgs[i]), 0);
	assert_int_equal(btrfsimg_open(fs), 0);
	return fs;
}

static struct fxfs scan_devices(char **imgs, size_t n)
{
	struct fxfs x = { open_devices(imgs, n), NULL };
	assert_int_equal(btrfsimg_forensic_scan(x.fs, NULL, NULL, &x.f), 0);
	return x;
}

static void fx_close(struct fxfs *x)
{
	btrfsimg_forensic_free(x->f);
	btrfsimg_fs_free(x->fs);
}

static void drop(char *img)
{
	unlink(img);
	free(img);
}

/* ------------------------------------------------------------ the index */

struct blocks {
	struct btrfsimg_tree_block *v;
	size_t n, cap;
};

static int collect_block(void *ctx, const struct btrfsimg_tree_block *b)
{
	struct blocks *s = ctx;
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 1024;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		assert_non_null(s->v);
	}
	s->v[s->n++] = *b;
	return 0;
}

static struct blocks all_blocks(btrfsimg_forensic *f)
{
	struct blocks s = { 0 };
	assert_int_equal(btrfsimg_forensic_blocks(f, collect_block, &s), 0);
	return s;
}

static int key_cmp(const struct btrfsimg_key *a, const struct btrfsimg_key *b)
{
	if (a->objectid != b->objectid)
		return a->objectid < b->objectid ? -1 : 1;
	if (a->type != b->type)
		return a->type < b->type ? -1 : 1;
	return a->offset < b->offset ? -1 : a->offset > b->offset;
}

/* The documented order: owner, generation, level, first key. */
static bool block_before(const struct btrfsimg_tree_block *a, const struct btrfsimg_tree_block *b)
{
	if (a->owner != b->owner)
		return a->owner < b->owner;
	if (a->generation != b->generation)
		return a->generation < b->generation;
	if (a->level != b->level)
		return a->level < b->level;
	return key_cmp(&a->first, &b->first) <= 0;
}

/* Field by field: the structs have padding. */
static void assert_same_blocks(const struct blocks *a, const struct blocks *b)
{
	assert_int_equal(a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		const struct btrfsimg_tree_block *x = &a->v[i], *y = &b->v[i];
		assert_int_equal(x->bytenr, y->bytenr);
		assert_int_equal(x->generation, y->generation);
		assert_int_equal(x->owner, y->owner);
		assert_int_equal(x->level, y->level);
		assert_int_equal(x->nritems, y->nritems);
		assert_int_equal(x->devid, y->devid);
		assert_int_equal(x->physical, y->physical);
		assert_int_equal(key_cmp(&x->first, &y->first), 0);
		assert_int_equal(key_cmp(&x->last, &y->last), 0);
	}
}

static const struct btrfsimg_tree_block *find_block(const struct blocks *s, uint64_t bytenr,
						    uint64_t generation)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].bytenr == bytenr && s->v[i].generation == generation)
			return &s->v[i];
	return NULL;
}

/* Each entry against the block the image file holds where it says. */
static void check_against_image(const struct blocks *s, const char *img,
				const struct kernel_super *k)
{
	int fd = open(img, O_RDONLY);
	assert_true(fd >= 0);
	uint8_t *buf = malloc(k->nodesize), csum[CSUM_SIZE_MAX];
	assert_non_null(buf);
	for (size_t i = 0; i < s->n; i++) {
		const struct btrfsimg_tree_block *b = &s->v[i];
		assert_int_equal(b->devid, 1);
		assert_int_equal(pread(fd, buf, k->nodesize, (off_t)b->physical), (ssize_t)k->nodesize);
		assert_memory_equal(buf + HDR_FSID, k->fsid, 16);
		assert_int_equal(le64(buf + HDR_BYTENR), b->bytenr);
		assert_int_equal(le64(buf + HDR_GEN), b->generation);
		assert_int_equal(le64(buf + HDR_OWNER), b->owner);
		assert_int_equal(le32(buf + HDR_NRITEMS), b->nritems);
		assert_int_equal(buf[HDR_LEVEL], b->level);
		assert_true(b->generation <= k->generation);
		assert_int_equal(bi_csum(k->csum_type, buf + HDR_FSID, k->nodesize - HDR_FSID, csum),
				 0);
		assert_memory_equal(buf + HDR_CSUM, csum, bi_csum_size(k->csum_type));
		if (i > 0)
			assert_true(block_before(&s->v[i - 1], b));
		if (b->nritems > 0)
			assert_true(key_cmp(&b->first, &b->last) <= 0);
	}
	free(buf);
	close(fd);
}

struct progress {
	uint64_t calls, done, total;
};

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct progress *p = ctx;
	assert_true(done >= p->done && done <= total);
	p->calls++;
	p->done = done;
	p->total = total;
}

static void test_block_scan(void **state)
{
	(void)state;
	char *img = unpack_zst(FX "single.img.zst", NULL);
	struct kernel_super k = read_super(img);
	struct stat st;
	assert_int_equal(stat(img, &st), 0);
	btrfsimg_fs *fs = open_devices(&img, 1);
	btrfsimg_forensic *f;
	struct progress p = { 0 };
	assert_int_equal(btrfsimg_forensic_scan(fs, on_progress, &p, &f), 0);
	assert_true(p.calls > 0);
	assert_int_equal(p.done, p.total);

	struct btrfsimg_scan_stats ss;
	assert_int_equal(btrfsimg_forensic_stats(f, &ss), 0);
	assert_int_equal(ss.devices, 1);
	assert_int_equal(ss.bytes, (uint64_t)st.st_size);
	assert_int_equal(p.total, ss.bytes);
	assert_true(ss.candidates >= ss.blocks + ss.copies + ss.bad_csum + ss.bad_block +
					      ss.unmapped);

	struct blocks s = all_blocks(f);
	assert_int_equal(s.n, ss.blocks);
	check_against_image(&s, img, &k);
	/* the trees the kernel's last superblock names */
	const struct btrfsimg_tree_block *root = find_block(&s, k.root, k.generation);
	assert_non_null(root);
	assert_int_equal(root->owner, ROOT_TREE_ID);
	assert_int_equal(root->level, k.root_level);
	const struct btrfsimg_tree_block *chunk = find_block(&s, k.chunk_root, k.chunk_gen);
	assert_non_null(chunk);
	assert_int_equal(chunk->owner, CHUNK_TREE_ID);
	assert_int_equal(chunk->level, k.chunk_level);

	/* blocks across read-piece boundaries, and the plain read path */
	static const struct {
		size_t piece;
		unsigned depth;
	} ways[] = { { 64 << 10, 2 }, { 4096 * 3, 16 }, { 1 << 20, 0 } };
	for (size_t w = 0; w < sizeof(ways) / sizeof(ways[0]); w++) {
		btrfsimg_forensic *g;
		assert_int_equal(bi_fx_scan(fs, ways[w].piece, ways[w].depth, NULL, NULL, &g), 0);
		struct blocks t = all_blocks(g);
		assert_same_blocks(&t, &s);
		free(t.v);
		btrfsimg_forensic_free(g);
	}
	free(s.v);
	btrfsimg_forensic_free(f);
	btrfsimg_fs_free(fs);
	drop(img);
}

static int stop_at_third(void *ctx, const struct btrfsimg_tree_block *b)
{
	(void)b;
	return ++*(int *)ctx == 3 ? 42 : 0;
}

static void test_block_walk_stops(void **state)
{
	(void)state;
	char *img = unpack_zst(FX "orphan.img.zst", NULL);
	struct fxfs x = scan_devices(&img, 1);
	int n = 0;
	assert_int_equal(btrfsimg_forensic_blocks(x.f, stop_at_third, &n), 42);
	assert_int_equal(n, 3);
	fx_close(&x);
	btrfsimg_forensic_free(NULL);
	drop(img);
}

/* Image offsets of the leaves of tree @owner, by scanning the file's
 * headers (not the index). */
static size_t leaves_of(const char *img, const struct kernel_super *k, uint64_t owner,
			off_t *out, size_t max)
{
	int fd = open(img, O_RDONLY);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	uint8_t hdr[HDR_SIZE];
	size_t n = 0;
	for (off_t o = 0; o + k->nodesize <= st.st_size && n < max; o += 4096) {
		if (pread(fd, hdr, sizeof(hdr), o) != (ssize_t)sizeof(hdr))
			break;
		if (!memcmp(hdr + HDR_FSID, k->fsid, 16) && le64(hdr + HDR_OWNER) == owner &&
		    hdr[HDR_LEVEL] == 0)
			out[n++] = o;
	}
	close(fd);
	return n;
}

static struct btrfsimg_scan_stats stats_of(const char *img, struct blocks *s)
{
	char *imgs[] = { (char *)img };
	struct fxfs x = scan_devices(imgs, 1);
	struct btrfsimg_scan_stats ss;
	assert_int_equal(btrfsimg_forensic_stats(x.f, &ss), 0);
	*s = all_blocks(x.f);
	fx_close(&x);
	return ss;
}

/* Stale blocks are taken only where a chunk map puts them and only whole:
 * a valid leaf copied outside every chunk (the image's last 64 KiB), and
 * fs-tree blocks with a byte flipped in their items. */
static void test_block_scan_hostile(void **state)
{
	(void)state;
	char *img = unpack_zst(FX "single.img.zst", NULL);
	struct kernel_super k = read_super(img);
	struct blocks before;
	struct btrfsimg_scan_stats s0 = stats_of(img, &before);
	off_t leaves[64];
	size_t nleaves = leaves_of(img, &k, FS_TREE_ID, leaves, 64);
	assert_true(nleaves >= 2);
	struct stat st;
	assert_int_equal(stat(img, &st), 0);
	uint8_t *leaf = malloc(k.nodesize), *keep = malloc(65536);
	assert_true(leaf && keep);

	int fd = open(img, O_RDWR);
	assert_true(fd >= 0);
	off_t planted = st.st_size - 65536;
	assert_int_equal(pread(fd, keep, 65536, planted), 65536);
	assert_int_equal(pread(fd, leaf, k.nodesize, leaves[0]), (ssize_t)k.nodesize);
	assert_int_equal(pwrite(fd, leaf, k.nodesize, planted), (ssize_t)k.nodesize);
	struct blocks after;
	struct btrfsimg_scan_stats s1 = stats_of(img, &after);
	assert_int_equal(s1.unmapped, s0.unmapped + 1);
	assert_int_equal(s1.blocks, s0.blocks);
	assert_same_blocks(&after, &before);
	free(after.v);
	assert_int_equal(pwrite(fd, keep, 65536, planted), 65536);

	size_t flipped = 0;
	for (size_t i = 0; i < nleaves; i += 2, flipped++) {
		uint8_t b;
		assert_int_equal(pread(fd, &b, 1, leaves[i] + 2000), 1);
		b ^= 0x40;
		assert_int_equal(pwrite(fd, &b, 1, leaves[i] + 2000), 1);
	}
	close(fd);
	struct btrfsimg_scan_stats s2 = stats_of(img, &after);
	assert_int_equal(s2.bad_csum, s0.bad_csum + flipped);
	for (size_t j = 0; j < after.n; j++)
		for (size_t i = 0; i < nleaves; i += 2)
			assert_false(after.v[j].physical == (uint64_t)leaves[i]);
	free(after.v);
	free(before.v);
	free(leaf);
	free(keep);
	drop(img);
}

/* ------------------------------------------------------------ history */

struct hist {
	const struct kernel_super *k;
	const struct blocks *s;
	uint64_t last, n, super_gens;
	bool primary_seen;
};

static bool is_backup_root(const struct kernel_super *k, uint64_t gen, uint64_t bytenr)
{
	for (int i = 0; i < 4; i++)
		if (k->backup_gen[i] == gen && k->backup_root[i] == bytenr)
			return true;
	return false;
}

static int check_generation(void *ctx, const struct btrfsimg_generation *g)
{
	struct hist *h = ctx;
	assert_true(h->n == 0 || g->transid > h->last);
	assert_true(g->transid <= h->k->generation);
	h->last = g->transid;
	h->n++;
	for (size_t i = 0; i < g->ntrees; i++) {
		const struct btrfsimg_history_tree *t = &g->trees[i];
		assert_true(t->generation <= g->transid);
		assert_int_equal(t->found, find_block(h->s, t->bytenr, t->generation) != NULL);
	}
	if (!g->superblock)
		return 0;
	h->super_gens++;
	bool primary = g->transid == h->k->generation && g->root_tree_bytenr == h->k->root;
	assert_true(primary || is_backup_root(h->k, g->transid, g->root_tree_bytenr));
	if (primary) {
		h->primary_seen = true;
		assert_true(g->ntrees > 0);
		for (size_t i = 0; i < g->ntrees; i++)
			assert_true(g->trees[i].found);
	}
	return 0;
}

static void test_history(void **state)
{
	(void)state;
	char *img = unpack_zst(FX "single.img.zst", NULL);
	struct kernel_super k = read_super(img);
	struct fxfs x = scan_devices(&img, 1);
	struct blocks s = all_blocks(x.f);
	struct hist h = { .k = &k, .s = &s };
	assert_int_equal(btrfsimg_forensic_history(x.f, check_generation, &h), 0);
	assert_true(h.primary_seen);
	assert_true(h.n >= h.super_gens && h.super_gens >= 1);
	free(s.v);
	fx_close(&x);
	drop(img);
}

/* ------------------------------------------------------------ recovered versions */

struct truth_version {
	char sha[65];
	const char *path, *fate, *kind;
	uint64_t size;
};

struct truth {
	json_object *root;
	struct truth_version *v;
	size_t n;
};

static const char *jstr(json_object *o, const char *k)
{
	json_object *x;
	assert_true(json_object_object_get_ex(o, k, &x));
	return json_object_get_string(x);
}

static struct truth read_truth(const char *path)
{
	struct truth t = { json_object_from_file(path), NULL, 0 };
	assert_non_null(t.root);
	json_object *vs;
	assert_true(json_object_object_get_ex(t.root, "versions", &vs));
	t.n = json_object_array_length(vs);
	t.v = calloc(t.n, sizeof(*t.v));
	assert_non_null(t.v);
	for (size_t i = 0; i < t.n; i++) {
		json_object *o = json_object_array_get_idx(vs, i), *sz;
		snprintf(t.v[i].sha, sizeof(t.v[i].sha), "%s", jstr(o, "sha256"));
		t.v[i].path = jstr(o, "path");
		t.v[i].fate = jstr(o, "fate");
		t.v[i].kind = jstr(o, "kind");
		assert_true(json_object_object_get_ex(o, "size", &sz));
		t.v[i].size = (uint64_t)json_object_get_int64(sz);
	}
	return t;
}

static void truth_free(struct truth *t)
{
	free(t->v);
	json_object_put(t->root);
}

/* A version's bytes as btrfsimg_forensic_read streams them. */
struct content {
	EVP_MD_CTX *md;
	uint64_t len;
	uint8_t *bytes; /* kept when asked */
	size_t cap;
	bool keep;
};

static int take(void *ctx, uint64_t offset, const void *data, size_t len)
{
	struct content *c = ctx;
	assert_int_equal(offset, c->len); /* in order, no gap */
	assert_true(len <= 1u << 20);
	assert_int_equal(EVP_DigestUpdate(c->md, data, len), 1);
	if (c->keep) {
		if (c->len + len > c->cap) {
			c->cap = (c->len + len) * 2;
			c->bytes = realloc(c->bytes, c->cap);
			assert_non_null(c->bytes);
		}
		memcpy(c->bytes + c->len, data, len);
	}
	c->len += len;
	return 0;
}

/* Read version @id: the return value, its hex sha256 in @sha, its bytes
 * (malloc'ed, or NULL when empty) in *@bytes if asked. */
static int read_version(btrfsimg_forensic *f, const char *id, unsigned flags, char sha[65],
			uint8_t **bytes, uint64_t *len)
{
	struct content c = { EVP_MD_CTX_new(), 0, NULL, 0, bytes != NULL };
	assert_non_null(c.md);
	assert_int_equal(EVP_DigestInit_ex(c.md, EVP_sha256(), NULL), 1);
	int rc = btrfsimg_forensic_read_flags(f, id, flags, take, &c);
	uint8_t d[32];
	assert_int_equal(EVP_DigestFinal_ex(c.md, d, NULL), 1);
	EVP_MD_CTX_free(c.md);
	for (int i = 0; i < 32; i++)
		snprintf(sha + 2 * i, 3, "%02x", d[i]);
	if (bytes)
		*bytes = c.bytes;
	else
		free(c.bytes);
	*len = c.len;
	return rc;
}

static bool written(const struct truth *t, const char *sha)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->v[i].sha, sha))
			return true;
	return false;
}

static bool written_at(const struct truth *t, const char *sha, const char *path)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->v[i].sha, sha) && !strcmp(t->v[i].path, path))
			return true;
	return false;
}

/* The fate of the lost (not live, not empty) version with these bytes. */
static const char *fate_of(const struct truth *t, const char *sha)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->v[i].sha, sha) && strcmp(t->v[i].fate, "live") &&
		    strcmp(t->v[i].kind, "empty"))
			return t->v[i].fate;
	return NULL;
}

#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define MAX_RECS  4096

struct rec {
	char id[96], path[512], sha[65];
	enum btrfsimg_recovered_kind kind;
	enum btrfsimg_recovered_status status;
	uint64_t subvol, objectid, size, generation;
	uint32_t mode, nlink;
	bool verified;
	struct btrfsimg_bad_range *bad; /* a copy */
	size_t nbad;
};

struct recs {
	struct rec *v;
	size_t n;
};

static int collect_rec(void *ctx, const struct btrfsimg_recovered *r)
{
	struct recs *s = ctx;
	assert_true(s->n < MAX_RECS);
	struct rec *o = &s->v[s->n++];
	snprintf(o->id, sizeof(o->id), "%s", r->id);
	snprintf(o->path, sizeof(o->path), "%s", r->path);
	o->kind = r->kind;
	o->status = r->status;
	o->subvol = r->subvol;
	o->objectid = r->objectid;
	o->size = r->inode.size;
	o->generation = r->generation;
	o->mode = r->inode.mode;
	o->nlink = r->inode.nlink;
	o->verified = r->verified;
	o->nbad = r->nbad;
	o->bad = r->nbad ? malloc(r->nbad * sizeof(*o->bad)) : NULL;
	assert_true(o->bad || !r->nbad);
	if (r->nbad)
		memcpy(o->bad, r->bad, r->nbad * sizeof(*o->bad));
	return 0;
}

static struct recs all_recs(btrfsimg_forensic *f)
{
	struct recs s = { calloc(MAX_RECS, sizeof(struct rec)), 0 };
	assert_non_null(s.v);
	assert_int_equal(btrfsimg_forensic_recovered(f, collect_rec, &s), 0);
	return s;
}

static void recs_free(struct recs *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].bad);
	free(s->v);
}

static bool is_dir(const struct rec *r)
{
	return S_ISDIR(r->mode);
}

/* Untrusted ranges are zeros; with RAW only the "csum mismatch" ones may
 * differ from them. */
static void check_ranges(btrfsimg_forensic *f, struct rec *r)
{
	uint8_t *zeros, *raw;
	uint64_t n, m;
	char sha[65];
	assert_int_equal(read_version(f, r->id, 0, sha, &zeros, &n), 1);
	assert_int_equal(read_version(f, r->id, BTRFSIMG_FORENSIC_RAW, sha, &raw, &m), 1);
	assert_int_equal(n, r->size);
	assert_int_equal(m, r->size);
	for (size_t b = 0; b < r->nbad; b++) {
		const struct btrfsimg_bad_range *x = &r->bad[b];
		assert_true(x->offset + x->length <= r->size);
		for (uint64_t i = x->offset; i < x->offset + x->length; i++)
			assert_int_equal(zeros[i], 0);
	}
	for (uint64_t i = 0; i < n; i++) {
		if (raw[i] == zeros[i])
			continue;
		bool inside = false;
		for (size_t b = 0; b < r->nbad && !inside; b++)
			inside = !strcmp(r->bad[b].why, "csum mismatch") && i >= r->bad[b].offset &&
				 i - r->bad[b].offset < r->bad[b].length;
		assert_true(inside);
	}
	free(zeros);
	free(raw);
}

/* What claims() of tests/images/test_forensic.py holds the CLI to, here
 * on the library: returns how many lost versions were recovered whole. */
static size_t check_claims(btrfsimg_forensic *f, struct recs *s, const struct truth *t)
{
	size_t whole = 0;
	assert_true(s->n > 0);
	for (size_t i = 0; i < s->n; i++) {
		struct rec *r = &s->v[i];
		char sha[65];
		uint64_t len;
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(s->v[j].id, r->id);
		if (is_dir(r)) {
			assert_false(r->verified);
			assert_true(r->status == BTRFSIMG_REC_INTACT ||
				    r->status == BTRFSIMG_REC_METADATA_ONLY);
			assert_int_equal(read_version(f, r->id, 0, sha, NULL, &len), -EISDIR);
			continue;
		}
		if (r->status == BTRFSIMG_REC_PARTIAL || r->status == BTRFSIMG_REC_OVERWRITTEN) {
			assert_true(r->nbad > 0);
			check_ranges(f, r);
		}
		if (r->status != BTRFSIMG_REC_INTACT && !r->verified)
			continue;
		assert_int_equal(read_version(f, r->id, 0, sha, NULL, &len), 0);
		assert_int_equal(len, r->size);
		snprintf(r->sha, sizeof(r->sha), "%s", sha);
		if (!written(t, sha))
			fail_msg("%s (%s): claimed %s%s, bytes never written (sha256 %s)", r->id,
				 r->path, btrfsimg_recovered_status_name(r->status),
				 r->verified ? ", verified" : "", sha);
		if (strcmp(sha, EMPTY_SHA) && !written_at(t, sha, r->path))
			fail_msg("%s: path %s, not where these bytes were written", r->id, r->path);
		const char *fate = fate_of(t, sha);
		if (fate) {
			assert_string_equal(btrfsimg_recovered_kind_name(r->kind), fate);
			whole++;
		}
	}
	return whole;
}

static void test_recovered_single(void **state)
{
	(void)state;
	char *img = unpack_zst(FX "single.img.zst", NULL);
	struct truth t = read_truth(FX "single.truth.json");
	struct fxfs x = scan_devices(&img, 1);
	struct recs s = all_recs(x.f);
	size_t whole = check_claims(x.f, &s, &t);
	/* every fate the generator gave some version is recovered whole at
	 * least once */
	for (size_t i = 0; i < t.n; i++) {
		if (!strcmp(t.v[i].fate, "live") || !strcmp(t.v[i].kind, "empty"))
			continue;
		bool seen = false;
		for (size_t j = 0; j < s.n && !seen; j++)
			seen = s.v[j].sha[0] && !strcmp(btrfsimg_recovered_kind_name(s.v[j].kind),
							t.v[i].fate);
		if (!seen)
			fail_msg("no %s version recovered whole", t.v[i].fate);
	}
	print_message("single: %zu records, %zu lost versions recovered whole\n", s.n, whole);
	/* the second call reuses the first's work: the same records */
	struct recs again = all_recs(x.f);
	assert_int_equal(again.n, s.n);
	for (size_t i = 0; i < s.n; i++)
		assert_string_equal(again.v[i].id, s.v[i].id);
	char sha[65];
	uint64_t len;
	assert_int_equal(read_version(x.f, "5-999999-1-nosuch", 0, sha, NULL, &len), -ENOENT);
	assert_int_equal(read_version(x.f, s.v[0].id, 1u << 7, sha, NULL, &len), -EINVAL);
	recs_free(&again);
	recs_free(&s);
	fx_close(&x);
	truth_free(&t);
	drop(img);
}

/* A file unlinked while open, the image copied before the close: one
 * orphan, whole, link count 0. */
static void test_recovered_orphan(void **state)
{
	(void)state;
	char *img = unpack_zst(FX "orphan.img.zst", NULL);
	json_object *root = json_object_from_file(FX "orphan.truth.json"), *want, *o;
	assert_non_null(root);
	assert_true(json_object_object_get_ex(root, "orphan", &want));
	struct fxfs x = scan_devices(&img, 1);
	struct recs s = all_recs(x.f);
	size_t orphans = 0;
	for (size_t i = 0; i < s.n; i++) {
		struct rec *r = &s.v[i];
		if (r->kind != BTRFSIMG_REC_ORPHAN)
			continue;
		orphans++;
		char sha[65];
		uint64_t len;
		assert_true(json_object_object_get_ex(want, "ino", &o));
		assert_int_equal(r->objectid, (uint64_t)json_object_get_int64(o));
		assert_int_equal(r->status, BTRFSIMG_REC_INTACT);
		assert_int_equal(r->nlink, 0);
		assert_string_equal(r->path, jstr(want, "path"));
		assert_int_equal(read_version(x.f, r->id, 0, sha, NULL, &len), 0);
		assert_string_equal(sha, jstr(want, "sha256"));
		assert_true(json_object_object_get_ex(want, "size", &o));
		assert_int_equal(len, (uint64_t)json_object_get_int64(o));
	}
	assert_int_equal(orphans, 1);
	recs_free(&s);
	fx_close(&x);
	json_object_put(root);
	drop(img);
}

/* A deleted file whose extent items fill several leaves: whole, verified. */
static void test_recovered_span(void **state)
{
	(void)state;
	char *img = unpack_zst(FX "span.img.zst", NULL);
	json_object *root = json_object_from_file(FX "span.truth.json"), *want, *o;
	assert_non_null(root);
	assert_true(json_object_object_get_ex(root, "span", &want));
	assert_true(json_object_object_get_ex(want, "size", &o));
	uint64_t size = (uint64_t)json_object_get_int64(o);
	struct fxfs x = scan_devices(&img, 1);
	struct recs s = all_recs(x.f);
	size_t n = 0;
	for (size_t i = 0; i < s.n; i++) {
		struct rec *r = &s.v[i];
		if (r->size != size || is_dir(r))
			continue;
		n++;
		char sha[65];
		uint64_t len;
		assert_int_equal(r->status, BTRFSIMG_REC_INTACT);
		assert_true(r->verified);
		assert_string_equal(r->path, jstr(want, "path"));
		assert_int_equal(read_version(x.f, r->id, 0, sha, NULL, &len), 0);
		assert_string_equal(sha, jstr(want, "sha256"));
	}
	assert_int_equal(n, 1);
	recs_free(&s);
	fx_close(&x);
	json_object_put(root);
	drop(img);
}

/* Two devices: no false claim either. */
static void test_recovered_two_devices(void **state)
{
	(void)state;
	char *imgs[2] = { unpack_zst(FX "multi.1.img.zst", NULL),
			  unpack_zst(FX "multi.2.img.zst", NULL) };
	struct truth t = read_truth(FX "multi.truth.json");
	struct fxfs x = scan_devices(imgs, 2);
	struct btrfsimg_scan_stats ss;
	assert_int_equal(btrfsimg_forensic_stats(x.f, &ss), 0);
	assert_int_equal(ss.devices, 2);
	struct recs s = all_recs(x.f);
	size_t whole = check_claims(x.f, &s, &t);
	assert_true(whole > 0);
	print_message("two devices: %zu records, %zu lost versions recovered whole\n", s.n, whole);
	recs_free(&s);
	fx_close(&x);
	truth_free(&t);
	drop(imgs[0]);
	drop(imgs[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_block_scan),
		cmocka_unit_test(test_block_walk_stops),
		cmocka_unit_test(test_block_scan_hostile),
		cmocka_unit_test(test_history),
		cmocka_unit_test(test_recovered_single),
		cmocka_unit_test(test_recovered_orphan),
		cmocka_unit_test(test_recovered_span),
		cmocka_unit_test(test_recovered_two_devices),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
