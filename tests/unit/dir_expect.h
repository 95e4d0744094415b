/* SPDX-License-Identifier: MIT */
/*
 * Shared by test_inode.c and test_dir.c: the kernel-made image
 * testdata/dir/dir.img.zst and the kernel's answers about it,
 * testdata/dir/dir.expect (format: testdata/dir/gen_dir_record.py). The image is
 * decompressed into memory and opened with btrfsimg_add_device_mem().
 */
#ifndef DIR_EXPECT_H
#define DIR_EXPECT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "btrfs/tree_checker.h"
#include "files/dir.h"
#include "files/inode.h"

#define DX_MAXTOK 24

struct dx_tok {
	char *p;	/* NUL-terminated; names and paths already decoded */
	size_t n;
};

struct dx_rec {
	char tag;
	int ntok;
	struct dx_tok t[DX_MAXTOK];
};

struct dx {
	char *text;
	struct dx_rec *v;
	size_t n;
	uint8_t *img;
	size_t img_len;
	btrfsimg_fs *fs;
};

static inline char *dx_slurp(const char *path, size_t *len)
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

static inline int dx_hex(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decode hex in place; returns the byte count. */
static inline size_t dx_unhex(char *s, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i + 1 < n; i += 2)
		s[o++] = (char)(dx_hex(s[i]) << 4 | dx_hex(s[i + 1]));
	s[o] = '\0';
	return o;
}

/* Hex digits of @t into @out (at most @cap bytes, else fails the test). */
static inline size_t dx_hexbytes(const struct dx_tok *t, uint8_t *out, size_t cap)
{
	size_t n = 0;
	if (t->n / 2 > cap)
		fail_msg("hex field of %zu bytes, room for %zu", t->n / 2, cap);
	for (size_t i = 0; i + 1 < t->n; i += 2)
		out[n++] = (uint8_t)(dx_hex(t->p[i]) << 4 | dx_hex(t->p[i + 1]));
	return n;
}

/* A name or path field: "%hex", "%" (empty), "." (the root), or raw. */
static inline void dx_name(struct dx_tok *t)
{
	if (t->p[0] == '%') {
		t->n = dx_unhex(t->p + 1, t->n - 1);
		t->p++;
	} else if (t->n == 1 && t->p[0] == '.') {
		t->p[0] = '\0';
		t->n = 0;
	}
}

static inline void dx_decode(struct dx_rec *r)
{
	if (r->ntok > 1)
		dx_name(&r->t[1]);
	if (r->ntok > 2 && (r->tag == 'E' || r->tag == 'X' || r->tag == 'L'))
		dx_name(&r->t[2]);
}

static inline int dx_parse(struct dx *x)
{
	size_t cap = 0;
	for (char *line = x->text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (x->n == cap) {
			cap = cap ? cap * 2 : 1024;
			void *v = realloc(x->v, cap * sizeof(*x->v));
			if (!v)
				return -1;
			x->v = v;
		}
		struct dx_rec *r = &x->v[x->n++];
		r->ntok = 0;
		for (char *s = strtok(line, " "); s && r->ntok < DX_MAXTOK; s = strtok(NULL, " "))
			r->t[r->ntok++] = (struct dx_tok){ s, strlen(s) };
		r->tag = r->t[0].p[0];
		dx_decode(r);
	}
	return 0;
}

static inline int dx_load_image(struct dx *x)
{
	size_t n;
	char *z = dx_slurp(TESTDATA "/dir/dir.img.zst", &n);
	if (!z)
		return -1;
	unsigned long long size = ZSTD_getFrameContentSize(z, n);
	if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN ||
	    !(x->img = malloc(size))) {
		free(z);
		return -1;
	}
	x->img_len = ZSTD_decompress(x->img, size, z, n);
	free(z);
	return ZSTD_isError(x->img_len) ? -1 : 0;
}

static inline void dx_free(struct dx *x)
{
	if (!x)
		return;
	btrfsimg_fs_free(x->fs);
	free(x->img);
	free(x->v);
	free(x->text);
	free(x);
}

static inline struct dx *dx_open(void)
{
	struct dx *x = calloc(1, sizeof(*x));
	size_t n;
	if (!x || !(x->text = dx_slurp(TESTDATA "/dir/dir.expect", &n)) || dx_parse(x) < 0 ||
	    dx_load_image(x) < 0 || btrfsimg_fs_new(&x->fs, NULL) < 0 ||
	    btrfsimg_add_device_mem(x->fs, x->img, x->img_len, "dir.img") < 0 ||
	    btrfsimg_open(x->fs) < 0) {
		if (x && x->fs)
			fprintf(stderr, "dir.img: %s\n", btrfsimg_errmsg(x->fs));
		dx_free(x);
		return NULL;
	}
	return x;
}

static uint64_t dx_u64(const struct dx_tok *t)
{
	return strtoull(t->p, NULL, 10);
}

/* The S record of @path, or NULL. */
static inline const struct dx_rec *dx_stat(const struct dx *x, const char *path, size_t len)
{
	for (size_t i = 0; i < x->n; i++)
		if (x->v[i].tag == 'S' && x->v[i].t[1].n == len &&
		    memcmp(x->v[i].t[1].p, path, len) == 0)
			return &x->v[i];
	return NULL;
}

/* "a/b/c" -> "a/b" (a malloc'd copy); "a" -> "". */
static inline char *dx_dirname(const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, path, n);
		d[n] = '\0';
	}
	return d;
}

/* "dir" + "/" + name (or just name under the root), malloc'd. */
static inline char *dx_join(const struct dx_tok *dir, const struct dx_tok *name)
{
	char *p = malloc(dir->n + name->n + 2);
	size_t o = 0;
	if (!p)
		return NULL;
	memcpy(p, dir->p, dir->n);
	o = dir->n;
	if (o)
		p[o++] = '/';
	memcpy(p + o, name->p, name->n);
	p[o + name->n] = '\0';
	return p;
}

#endif
