/* SPDX-License-Identifier: MIT */
/*
 * The walk iterator (btrfsimg_walk_*) against the kernel's view of
 * committed images: testdata/files/NAME.view.jsonl, recorded by
 * testdata/gen_kview.py on a fresh mount (one JSON object per path,
 * depth-first in getdents64 order; stubs with "subvol": null). Every
 * record must be the view's next line: path bytes, st_ino, subvolume,
 * mode, nlink, uid, gid, size, d_ino. Then, with the view as the truth
 * still: a start below the root (the view's subtree), a depth limit (the
 * view's top level, one "not descending" error per directory cut off),
 * skipping directories (their subtrees left out, nothing else) and
 * directories reported again after their children (POST_DIRS). And
 * btrfsimg_file_digest of every regular file equals the view's sha256 of
 * the kernel's bytes, and its btrfsimg_file_data ranges leave out only
 * bytes that read as zeros; unknown digests and short buffers are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

#include "btrfsimg.h"

struct vrec {
	char *path; /* as json-c decodes the view's string */
	uint64_t ino, subvol, mode, nlink, uid, gid, size, d_ino;
	bool stub, start;
	char sha256[65]; /* the kernel's bytes' digest; "" for non-files */
};

struct view {
	struct vrec *v;
	size_t n;
	uint8_t *img;
	btrfsimg_fs *fs;
};

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *p = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
		free(p);
		p = NULL;
	}
	fclose(f);
	if (p) {
		p[n] = '\0';
		*len = (size_t)n;
	}
	return p;
}

static uint64_t num(json_object *o, const char *k, bool *null)
{
	json_object *v = NULL;
	json_object_object_get_ex(o, k, &v);
	if (null)
		*null = v == NULL || json_object_is_type(v, json_type_null);
	return v ? (uint64_t)json_object_get_int64(v) : 0;
}

static struct view *view_open(const char *name)
{
	char p[512];
	size_t n;
	struct view *w = calloc(1, sizeof(*w));
	assert_non_null(w);
	snprintf(p, sizeof(p), TESTDATA "/files/%s.view.jsonl", name);
	char *text = slurp(p, &n);
	assert_non_null(text);
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		for (char *u = line; (u = strstr(u, "\\udc")) != NULL; u += 6)
			memcpy(u + 2, "f7", 2); /* see escaped() */
		json_object *o = json_tokener_parse(line);
		assert_non_null(o);
		w->v = realloc(w->v, (w->n + 1) * sizeof(*w->v));
		assert_non_null(w->v);
		struct vrec *r = &w->v[w->n++];
		memset(r, 0, sizeof(*r));
		json_object *path = NULL;
		json_object_object_get_ex(o, "path", &path);
		r->path = strdup(json_object_get_string(path));
		r->ino = num(o, "ino", NULL);
		r->subvol = num(o, "subvol", &r->stub);
		r->mode = num(o, "mode", NULL);
		r->nlink = num(o, "nlink", NULL);
		r->uid = num(o, "uid", NULL);
		r->gid = num(o, "gid", NULL);
		r->size = num(o, "size", NULL);
		r->d_ino = num(o, "d_ino", &r->start);
		json_object *sha = NULL;
		if (json_object_object_get_ex(o, "sha256", &sha) &&
		    json_object_is_type(sha, json_type_string))
			snprintf(r->sha256, sizeof(r->sha256), "%s", json_object_get_string(sha));
		json_object_put(o);
	}
	free(text);

	snprintf(p, sizeof(p), TESTDATA "/files/%s.img.zst", name);
	char *z = slurp(p, &n);
	assert_non_null(z);
	unsigned long long size = ZSTD_getFrameContentSize(z, n);
	assert_true(size != ZSTD_CONTENTSIZE_ERROR && size != ZSTD_CONTENTSIZE_UNKNOWN);
	w->img = malloc(size);
	assert_non_null(w->img);
	size_t got = ZSTD_decompress(w->img, size, z, n);
	free(z);
	assert_false(ZSTD_isError(got));
	assert_int_equal(btrfsimg_fs_new(&w->fs, NULL), 0);
	assert_int_equal(btrfsimg_add_device_mem(w->fs, w->img, got, name), 0);
	if (btrfsimg_open(w->fs) < 0)
		fail_msg("%s: %s", name, btrfsimg_errmsg(w->fs));
	return w;
}

static void view_free(struct view *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->v[i].path);
	free(w->v);
	btrfsimg_fs_free(w->fs);
	free(w->img);
	free(w);
}

/* @p bytes as the view writes names: UTF-8 kept, every other byte B as
 * U+DC00+B (Python's surrogateescape). json-c turns a lone surrogate into
 * U+FFFD, so view_open() moves them to U+F700+B (private use) first, and
 * so does this. */
static void escaped(const uint8_t *b, size_t n, char *out, size_t max)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o + 4 < max;) {
		size_t len = b[i] < 0x80	     ? 1
			     : (b[i] & 0xe0) == 0xc0 ? 2
			     : (b[i] & 0xf0) == 0xe0 ? 3
			     : (b[i] & 0xf8) == 0xf0 ? 4
						     : 0;
		bool ok = len && i + len <= n && !(len == 2 && b[i] < 0xc2);
		for (size_t k = 1; ok && k < len; k++)
			ok = (b[i + k] & 0xc0) == 0x80;
		if (ok && len == 3) { /* overlong, or a surrogate */
			uint32_t c = (b[i] & 15u) << 12 | (b[i + 1] & 63u) << 6 | (b[i + 2] & 63u);
			ok = c >= 0x800 && (c < 0xd800 || c > 0xdfff);
		}
		if (ok && len == 4) {
			uint32_t c = (b[i] & 7u) << 18 | (b[i + 1] & 63u) << 12 |
				     (b[i + 2] & 63u) << 6 | (b[i + 3] & 63u);
			ok = c >= 0x10000 && c <= 0x10ffff;
		}
		if (ok) {
			memcpy(out + o, b + i, len);
			o += len;
			i += len;
			continue;
		}
		uint32_t c = 0xf700u + b[i++];
		out[o++] = (char)(0xe0 | c >> 12);
		out[o++] = (char)(0x80 | ((c >> 6) & 63));
		out[o++] = (char)(0x80 | (c & 63));
	}
	out[o] = '\0';
}

/* The record agrees with view line @r, whose path has @skip leading bytes
 * (the start's path and '/') not in the record's. */
static void expect_rec(const struct btrfsimg_walk_entry *e, const struct vrec *r, size_t skip)
{
	char path[4096 * 3];
	escaped(e->path, e->path_len, path, sizeof(path));
	if (strcmp(path, r->path + skip) != 0)
		fail_msg("path '%s', the view has '%s'", path, r->path + skip);
	assert_int_equal(e->kind, BTRFSIMG_WALK_PATH);
	assert_int_equal(e->objectid, r->ino);
	assert_int_equal(e->stub, r->stub);
	if (!r->stub)
		assert_int_equal(e->subvol, r->subvol);
	assert_int_equal(e->inode.mode, r->mode);
	assert_int_equal(e->inode.nlink, r->nlink);
	assert_int_equal(e->inode.uid, r->uid);
	assert_int_equal(e->inode.gid, r->gid);
	assert_int_equal(e->inode.size, r->size);
	if (!e->is_start)
		assert_int_equal(e->ent.location_objectid, r->d_ino);
}

static size_t slashes(const uint8_t *p, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += p[i] == '/';
	return k;
}

/* btrfsimg_file_data's ranges of a file: in order, apart (adjacent ones
 * joined), inside i_size, and every byte outside them reads as zero;
 * btrfsimg_file_length keeps the size (no size in these images is past
 * the bound). Returns the bytes in holes. */
static uint64_t check_ranges(btrfsimg_fs *fs, const struct btrfsimg_walk_entry *e)
{
	static uint8_t buf[1 << 16];
	uint64_t size = e->inode.size, pos = 0, s, t, len, dend, holes = 0;
	assert_int_equal(btrfsimg_file_length(fs, e->subvol, e->objectid, &len, &dend), 0);
	assert_true(len == size && dend == size);
	for (;;) {
		int rc = btrfsimg_file_data(fs, e->subvol, e->objectid, pos, &s, &t);
		if (rc == -ENXIO) {
			s = t = size;
		} else {
			assert_int_equal(rc, 0);
			assert_true(s >= pos && s < t && t <= size && (pos == 0 || s > pos));
		}
		for (uint64_t o = pos; o < s;) { /* the hole before: zeros */
			size_t got = 0, want = s - o < sizeof(buf) ? (size_t)(s - o) : sizeof(buf);
			assert_int_equal(btrfsimg_file_read(fs, e->subvol, e->objectid, o, buf, want,
							    &got), 0);
			assert_int_equal(got, want);
			for (size_t k = 0; k < got; k++)
				assert_int_equal(buf[k], 0);
			o += got;
		}
		holes += s - pos;
		if (rc == -ENXIO)
			return holes;
		pos = t;
	}
}

/* Every path of the view, in order, nothing else. */
static void whole(const char *name)
{
	struct view *w = view_open(name);
	struct btrfsimg_walk_opts o = { .subvol = 5 };
	btrfsimg_walk *it;
	assert_int_equal(btrfsimg_walk_open(w->fs, &o, &it), 0);
	const struct btrfsimg_walk_entry *e;
	size_t i = 0, digests = 0;
	uint64_t holes = 0;
	int rc;
	while ((rc = btrfsimg_walk_next(it, &e)) > 0) {
		if (i >= w->n)
			fail_msg("%s: more records than the view's %zu", name, w->n);
		expect_rec(e, &w->v[i], 0);
		assert_int_equal(e->is_start, i == 0);
		assert_int_equal(e->depth, e->path_len ? 1 + slashes(e->path, e->path_len) : 0);
		if (i && !e->stub) /* the parent's inode, as the handle needs */
			assert_non_null(e->dir_inode);
		if (w->v[i].sha256[0]) { /* btrfsimg_file_digest against the kernel's bytes */
			char hex[129];
			if (btrfsimg_file_digest(w->fs, e->subvol, e->objectid, UINT64_MAX,
						 "sha256", hex, sizeof(hex)) < 0)
				fail_msg("%s: %s", w->v[i].path, btrfsimg_errmsg(w->fs));
			assert_string_equal(hex, w->v[i].sha256);
			digests++;
			holes += check_ranges(w->fs, e);
		}
		i++;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(i, w->n);
	assert_true(digests > 0);
	assert_true(holes > 0 || strcmp(name, "extents") != 0);
	assert_int_equal(btrfsimg_walk_next(it, &e), 0); /* stays at the end */
	btrfsimg_walk_close(it);
	view_free(w);
}

static void test_view_subvols(void **state)
{
	(void)state;
	whole("subvols");
}

static void test_view_names(void **state)
{
	(void)state;
	whole("names");
}

static void test_view_special(void **state)
{
	(void)state;
	whole("special");
}

/* Sparse files, prealloc, punched holes, reflinks: the data ranges. */
static void test_view_extents(void **state)
{
	(void)state;
	whole("extents");
}

/* Start at "sv1/nested" of the top level: the view's lines below it. */
static void test_start_path(void **state)
{
	(void)state;
	struct view *w = view_open("subvols");
	const char *start = "sv1/nested";
	size_t sl = strlen(start);
	struct btrfsimg_walk_opts o = { .subvol = 5, .path = start };
	btrfsimg_walk *it;
	assert_int_equal(btrfsimg_walk_open(w->fs, &o, &it), 0);
	const struct btrfsimg_walk_entry *e;
	size_t i = 0, seen = 0;
	while (i < w->n && strcmp(w->v[i].path, start) != 0)
		i++;
	assert_true(i < w->n);
	while (btrfsimg_walk_next(it, &e) > 0) {
		assert_true(i < w->n);
		const struct vrec *r = &w->v[i];
		bool under =
			strncmp(r->path, start, sl) == 0 && (!r->path[sl] || r->path[sl] == '/');
		assert_true(under);
		if (seen == 0) {
			assert_true(e->is_start);
			assert_int_equal(e->path_len, 0);
			assert_int_equal(e->objectid, r->ino);
			assert_int_equal(e->subvol, r->subvol);
		} else {
			expect_rec(e, r, sl + 1);
		}
		i++;
		seen++;
	}
	/* the view's next line is outside the subtree */
	assert_true(i == w->n || strncmp(w->v[i].path, "sv1/nested/", sl + 1) != 0);
	assert_true(seen >= 4);
	btrfsimg_walk_close(it);
	/* a start that does not exist fails the open, with a message */
	o.path = "sv1/no-such";
	assert_int_equal(btrfsimg_walk_open(w->fs, &o, &it), -ENOENT);
	assert_null(it);
	assert_true(btrfsimg_errmsg(w->fs)[0] != '\0');
	view_free(w);
}

/* max_depth 1: the top level, and for each directory in it one error
 * record "not descending" (-ELOOP, op NULL) right after it. */
static void test_depth_limit(void **state)
{
	(void)state;
	struct view *w = view_open("subvols");
	struct btrfsimg_walk_opts o = { .subvol = 5, .max_depth = 1 };
	btrfsimg_walk *it;
	assert_int_equal(btrfsimg_walk_open(w->fs, &o, &it), 0);
	const struct btrfsimg_walk_entry *e;
	size_t i = 0;
	bool expect_stop = false;
	while (btrfsimg_walk_next(it, &e) > 0) {
		if (e->kind == BTRFSIMG_WALK_ERROR) {
			assert_true(expect_stop);
			assert_int_equal(e->error, -ELOOP);
			assert_null(e->op);
			assert_non_null(strstr(btrfsimg_errmsg(w->fs), "not descending"));
			expect_stop = false;
			continue;
		}
		assert_false(expect_stop);
		while (i < w->n && strchr(w->v[i].path, '/'))
			i++; /* below the limit */
		assert_true(i < w->n);
		expect_rec(e, &w->v[i], 0);
		expect_stop = e->depth == 1 && S_ISDIR(e->inode.mode) && !e->stub;
		i++;
	}
	assert_false(expect_stop);
	while (i < w->n && strchr(w->v[i].path, '/'))
		i++;
	assert_int_equal(i, w->n);
	btrfsimg_walk_close(it);
	view_free(w);
}

/* Skip every directory named "nested" or "dir"; POST_DIRS: each directory
 * again after its children, path and ids as before, nesting balanced. */
static void test_skip_and_post(void **state)
{
	(void)state;
	struct view *w = view_open("subvols");
	struct btrfsimg_walk_opts o = { .subvol = 5, .flags = BTRFSIMG_WALK_POST_DIRS };
	btrfsimg_walk *it;
	assert_int_equal(btrfsimg_walk_open(w->fs, &o, &it), 0);
	const struct btrfsimg_walk_entry *e;
	struct {
		char path[1024];
		uint64_t subvol, objectid;
	} open[64];
	size_t nopen = 0, i = 0, skipped = 0, posts = 0;
	const char *skip_prefix = NULL;
	char skipbuf[1024];
	while (btrfsimg_walk_next(it, &e) > 0) {
		assert_int_not_equal(e->kind, BTRFSIMG_WALK_ERROR);
		if (e->kind == BTRFSIMG_WALK_POST) {
			assert_true(nopen > 0);
			nopen--;
			assert_int_equal(e->path_len, strlen(open[nopen].path));
			assert_memory_equal(e->path, open[nopen].path, e->path_len);
			assert_int_equal(e->subvol, open[nopen].subvol);
			assert_int_equal(e->objectid, open[nopen].objectid);
			assert_int_equal(e->depth, nopen);
			posts++;
			continue;
		}
		/* the view's next line not under a skipped directory */
		while (i < w->n && skip_prefix &&
		       strncmp(w->v[i].path, skip_prefix, strlen(skip_prefix)) == 0) {
			i++;
			skipped++;
		}
		assert_true(i < w->n);
		expect_rec(e, &w->v[i], 0);
		i++;
		assert_int_equal(e->depth, nopen);
		if (!S_ISDIR(e->inode.mode) || e->stub)
			continue;
		const uint8_t *base = e->path + e->path_len;
		while (base > e->path && base[-1] != '/')
			base--;
		size_t blen = e->path_len - (size_t)(base - e->path);
		if ((blen == 6 && !memcmp(base, "nested", 6)) ||
		    (blen == 3 && !memcmp(base, "dir", 3))) {
			btrfsimg_walk_skip(it);
			snprintf(skipbuf, sizeof(skipbuf), "%.*s/", (int)e->path_len, e->path);
			skip_prefix = skipbuf;
			continue;
		}
		assert_true(nopen < 64);
		snprintf(open[nopen].path, sizeof(open[nopen].path), "%.*s", (int)e->path_len,
			 e->path);
		open[nopen].subvol = e->subvol;
		open[nopen].objectid = e->objectid;
		nopen++;
	}
	while (i < w->n && skip_prefix &&
	       strncmp(w->v[i].path, skip_prefix, strlen(skip_prefix)) == 0) {
		i++;
		skipped++;
	}
	assert_int_equal(i, w->n);
	assert_int_equal(nopen, 0);
	assert_true(skipped > 0);
	assert_true(posts > 5);
	btrfsimg_walk_close(it);
	view_free(w);
}

static void test_digest_args(void **state)
{
	(void)state;
	struct view *w = view_open("special");
	char hex[129];
	size_t i = 0;
	while (i < w->n && !w->v[i].sha256[0])
		i++;
	assert_true(i < w->n);
	uint64_t sv = w->v[i].subvol, ino = w->v[i].ino;
	assert_int_equal(btrfsimg_file_digest(w->fs, sv, ino, UINT64_MAX, "no-such", hex, 129),
			 -EINVAL);
	assert_int_equal(btrfsimg_file_digest(w->fs, sv, ino, UINT64_MAX, "sha256", hex, 64),
			 -EINVAL);
	/* len 0: the digest of nothing */
	assert_int_equal(btrfsimg_file_digest(w->fs, sv, ino, 0, "sha256", hex, 65), 0);
	assert_string_equal(hex,
			    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	view_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_view_subvols), cmocka_unit_test(test_view_names),
		cmocka_unit_test(test_view_special), cmocka_unit_test(test_view_extents),
		cmocka_unit_test(test_start_path),
		cmocka_unit_test(test_depth_limit),  cmocka_unit_test(test_skip_and_post),
		cmocka_unit_test(test_digest_args),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
