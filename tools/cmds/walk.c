// SPDX-License-Identifier: MIT
/*
 * btrfsimg walk: every path under the start, depth-first, with what the
 * kernel reports for it (stat/statx, readdir d_ino, name_to_handle_at),
 * optionally content and xattr digests and the inode-number schemes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btrfsimg_inum.h"
#include "cli.h"
#include "common/digest.h"
#include "common/handoff.h"
#include "common/json.h"
#include "common/nest.h"
#include "common/text.h"
#include "common/visit.h"

/* What one JSON line needs, gathered on the walking thread (everything that
 * reads the image happens there) and formatted on a second thread, as
 * inodes does: formatting took about a third of a walk's CPU time. The
 * record's bytes hold the path, then the symlink target, then the --hash
 * fields as JSON. */
struct wrow {
	struct btrfsimg_inode inode;
	uint64_t ino, subvol, d_ino;
	uint64_t scheme_ino, nfs_fileid, scheme_d_ino, nfs_d_fileid;
	/* [0]: btrfs mounted plainly, [1]: mounted inumbits=N (composed) */
	uint64_t nfs4_d_fileid[2], nfs_fileid_n, nfs_d_fileid_n;
	uint32_t bytes_off, path_len, target_len, hashes_len;
	uint64_t dir_subvol, dir_objectid, dir_generation; /* for encode_handles */
	uint32_t handle_type[2];
	int8_t handle_len[2];	/* -1: none (null) */
	bool encode_handles;	/* handles not taken yet: encode from the inodes */
	int8_t dev;		/* numdevs2_dev, -1: null */
	bool stub, is_start, symlink, target_ok, schemes;
	uint8_t handle[2][40];
	const char *name_damage; /* btrfsimg_name_problem of a damaged name, or NULL */
	uint64_t as_of;		/* btrfsimg_walk_entry.as_of_generation */
	bool lost_found;
	bool dir_synth;		/* the directory holding it is synthesized */
};

struct walk_ctx {
	struct cli *c;
	struct nest nest;
	bool have_nest;
	struct handoff *h;
	struct jw scratch;	/* a record's bytes, on the walking thread */
	bool head_done;		/* text: the header is out (with the first line) */
	/* What follows is the formatting thread's. */
	_Alignas(128) struct jw w;	/* JSON lines not yet written out */
	int write_errno;	/* the first failed write(2), or 0 */
};

static void set_handle_len(struct wrow *r, int k, int len)
{
	r->handle_len[k] = (int8_t)(len < 0 || len > 40 ? -1 : len);
}

/* Children of a directory are encoded from the inodes the walk holds (two
 * lookups fewer per path), on the formatting thread (encode_handles: the
 * encoder is pure); the start and stubs through btrfsimg_walk_handle, on
 * this one, as it looks them up. */
static void take_handles(struct walk_ctx *wc, const struct visit_node *n, struct wrow *r)
{
	r->encode_handles = n->dir_inode && !n->stub;
	r->dir_synth = n->dir_inode && n->dir_inode->synthesized;
	if (r->encode_handles) {
		r->dir_subvol = n->dir_subvol;
		r->dir_objectid = n->dir_objectid;
		r->dir_generation = n->dir_inode->generation;
		return;
	}
	for (int k = 0; k < 2; k++)
		set_handle_len(r, k,
			       btrfsimg_walk_handle(wc->c->fs, n->entry, k == 1,
						    &r->handle_type[k], r->handle[k]));
}

static void take_target(struct walk_ctx *wc, const struct visit_node *n, struct wrow *r)
{
	r->symlink = S_ISLNK(n->inode.mode);
	if (!r->symlink)
		return;
	uint8_t *t = NULL;
	size_t len = 0;
	if (btrfsimg_readlink(wc->c->fs, n->subvol, n->objectid, &t, &len) == 0 &&
	    len <= UINT32_MAX) {
		jw_raw(&wc->scratch, (const char *)t, len);
		r->target_ok = true;
		r->target_len = (uint32_t)len;
	} else {
		wc->c->errors++;
	}
	free(t);
}

static int xattr_digest(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *value,
			size_t vlen)
{
	struct jw *w = ctx;
	char hex[65];
	digest_hex("sha256", value, vlen, hex);
	/* the name is the key: write it through the escaper */
	jw_strn(w, NULL, name, nlen);
	jw_raw(w, ":\"", 2);
	jw_raw(w, hex, 64);
	jw_raw(w, "\"", 1);
	return 0;
}

/* ,"sha256":...,"xattrs":{...} into the record's bytes. */
static void take_hashes(struct walk_ctx *wc, const struct visit_node *n, struct wrow *r)
{
	struct cli *c = wc->c;
	struct jw *w = &wc->scratch;
	size_t before = w->len;
	w->need_comma = true;
	if (S_ISREG(n->inode.mode)) {
		char hex[65];
		if (digest_file(c->fs, n->subvol, n->objectid, n->inode.size, "sha256", hex) == 0)
			jw_str(w, "sha256", hex);
		else {
			fprintf(stderr, "btrfsimg: %.*s: %s\n", (int)n->path_len,
				(const char *)n->path, btrfsimg_errmsg(c->fs));
			jw_null(w, "sha256");
			c->errors++;
		}
	}
	if (n->inode.synthesized) { /* its xattr items went with its inode item */
		jw_null(w, "xattrs");
		r->hashes_len = (uint32_t)(w->len - before);
		return;
	}
	jw_open_obj(w, "xattrs");
	if (!n->stub && btrfsimg_xattrs(c->fs, n->subvol, n->objectid, xattr_digest, w) < 0)
		c->errors++;
	jw_close_obj(w);
	r->hashes_len = (uint32_t)(w->len - before);
}

static void take_schemes(struct walk_ctx *wc, const struct visit_node *n, struct wrow *r)
{
	struct btrfsimg_walk_numbers num;
	btrfsimg_walk_numbers(n->entry, (unsigned)wc->c->inumbits, wc->nest.t, &num);
	r->schemes = true;
	r->scheme_ino = num.ino;
	r->nfs_fileid = num.nfs_fileid;
	r->scheme_d_ino = num.d_ino;
	r->nfs_d_fileid = num.nfs_d_fileid;
	r->nfs_fileid_n = num.nfs_fileid_inumbits;
	r->nfs_d_fileid_n = num.nfs_d_fileid_inumbits;
	r->nfs4_d_fileid[0] = num.nfs4_d_fileid;
	r->nfs4_d_fileid[1] = num.nfs4_d_fileid_inumbits;
	r->dev = (int8_t)num.numdevs2_dev;
}

/* ,"csum":"full" (btrfsimg_file_csum_cover) for a regular file, after the
 * hashes: only when asked, as it reads each file's extent and csum items. */
static void take_csum(struct walk_ctx *wc, const struct visit_node *n, struct wrow *r)
{
	if (n->stub || !S_ISREG(n->inode.mode))
		return;
	struct jw *w = &wc->scratch;
	size_t before = w->len;
	w->need_comma = true;
	int cover = btrfsimg_file_csum_cover(wc->c->fs, n->subvol, n->objectid, NULL, NULL);
	if (cover >= 0) {
		jw_str(w, "csum", btrfsimg_csum_cover_name(cover));
	} else {
		fprintf(stderr, "btrfsimg: %.*s: %s\n", (int)n->path_len, (const char *)n->path,
			btrfsimg_errmsg(wc->c->fs));
		jw_null(w, "csum");
		wc->c->errors++;
	}
	r->hashes_len += (uint32_t)(w->len - before);
}

/* The record's bytes into wc->scratch (path, symlink target, --hash
 * fields), their lengths into @r. */
static void bytes_of(struct walk_ctx *wc, const struct visit_node *n, struct wrow *r)
{
	struct jw *s = &wc->scratch;
	s->len = 0;
	jw_grow(s, n->path_len + 1); /* a buffer even for the start's empty path */
	jw_raw(s, (const char *)n->path, n->path_len);
	r->path_len = (uint32_t)n->path_len;
	r->target_ok = false;
	r->target_len = r->hashes_len = 0;
	take_target(wc, n, r);
	if (wc->c->hash)
		take_hashes(wc, n, r);
	if (wc->c->csum)
		take_csum(wc, n, r);
}

/* The rest of the line into @r, field by field (the record is in the
 * handoff's batch: zeroing it whole and copying it in took a tenth of the
 * walking thread). */
static void row_of(struct walk_ctx *wc, const struct visit_node *n, struct wrow *r)
{
	r->inode = n->inode;
	r->ino = n->objectid;
	r->subvol = n->subvol;
	r->d_ino = n->ent.location_objectid;
	r->stub = n->stub;
	r->is_start = n->is_start;
	r->name_damage = n->is_start ? NULL : btrfsimg_name_problem(n->ent.name, n->ent.name_len);
	r->dev = -1;
	r->schemes = false;
	r->as_of = n->entry ? n->entry->as_of_generation : 0;
	r->lost_found = n->entry && n->entry->lost_found;
	take_handles(wc, n, r);
	if (wc->c->inumbits >= 0)
		take_schemes(wc, n, r);
}

/* ---------------------------------------------- the formatting thread */

static void put_schemes(struct jw *w, const struct wrow *r)
{
	jw_u64(w, "scheme_ino", r->scheme_ino);
	jw_u64(w, "nfs_fileid", r->nfs_fileid);
	if (r->is_start) {
		jw_null(w, "scheme_d_ino");
		jw_null(w, "nfs_d_fileid");
		jw_null(w, "nfs4_d_fileid");
	} else {
		jw_u64(w, "scheme_d_ino", r->scheme_d_ino);
		jw_u64(w, "nfs_d_fileid", r->nfs_d_fileid);
		jw_u64(w, "nfs4_d_fileid", r->nfs4_d_fileid[0]);
	}
	jw_u64(w, "nfs_fileid_inumbits", r->nfs_fileid_n);
	if (r->is_start) {
		jw_null(w, "nfs_d_fileid_inumbits");
		jw_null(w, "nfs4_d_fileid_inumbits");
	} else {
		jw_u64(w, "nfs_d_fileid_inumbits", r->nfs_d_fileid_n);
		jw_u64(w, "nfs4_d_fileid_inumbits", r->nfs4_d_fileid[1]);
	}
	if (r->dev < 0)
		jw_null(w, "numdevs2_dev");
	else
		jw_u64(w, "numdevs2_dev", (uint64_t)r->dev);
}

/* Handle @k as {"type":N,"hex":"..."} (or null) at @p: as taken on the
 * walking thread, or encoded here. */
static char *put_handle(char *p, const struct wrow *r, int k)
{
	uint32_t type;
	uint8_t enc[40];
	const uint8_t *h = enc;
	int len;
	if (r->inode.synthesized || (k == 1 && r->dir_synth))
		return JW_PUT_LIT(p, "null"); /* a made-up inode's generation is unknown */
	if (r->encode_handles) {
		len = btrfsimg_file_handle_encode(r->subvol, r->ino, r->inode.generation,
						  r->inode.mode, r->dir_subvol, r->dir_objectid,
						  r->dir_generation, k == 1, &type, enc);
	} else {
		type = r->handle_type[k];
		h = r->handle[k];
		len = r->handle_len[k];
	}
	if (len < 0 || len > 40)
		return JW_PUT_LIT(p, "null");
	JW_PUT_LIT(p, "{\"type\":");
	p += jw_u64_at(p, type);
	JW_PUT_LIT(p, ",\"hex\":\"");
	btrfsimg_hex(h, (size_t)len, p, 2 * 40 + 1);
	p += 2 * len;
	return JW_PUT_LIT(p, "\"}");
}

static char *put_time(char *p, const struct btrfsimg_timespec *t)
{
	*p++ = '[';
	p += jw_i64_at(p, t->sec);
	*p++ = ',';
	p += jw_u64_at(p, t->nsec);
	*p++ = ']';
	return p;
}

/* uid through btime of an inode read */
static char *put_known(char *p, const struct btrfsimg_inode *i)
{
	JW_PUT_LIT(p, ",\"uid\":");
	p += jw_u64_at(p, i->uid);
	JW_PUT_LIT(p, ",\"gid\":");
	p += jw_u64_at(p, i->gid);
	JW_PUT_LIT(p, ",\"size\":");
	p += jw_u64_at(p, i->size);
	/* major:minor, as the kernel splits a btrfs rdev */
	JW_PUT_LIT(p, ",\"rdev\":\"");
	p += jw_dec_at(p, i->rdev >> 20);
	*p++ = ':';
	p += jw_dec_at(p, i->rdev & 0xfffff);
	JW_PUT_LIT(p, "\",\"atime\":");
	p = put_time(p, &i->atime);
	JW_PUT_LIT(p, ",\"mtime\":");
	p = put_time(p, &i->mtime);
	JW_PUT_LIT(p, ",\"ctime\":");
	p = put_time(p, &i->ctime);
	JW_PUT_LIT(p, ",\"btime\":");
	return put_time(p, &i->otime);
}

/* The same of a synthesized directory: none is known (a directory has no
 * device number: rdev 0:0 as every directory's) */
static char *put_unknown(char *p)
{
	return JW_PUT_LIT(p, ",\"uid\":null,\"gid\":null,\"size\":null,\"rdev\":\"0:0\","
			     "\"atime\":null,\"mtime\":null,\"ctime\":null,\"btime\":null");
}

/* The most a line takes besides its path, target and --hash fields: keys
 * and punctuation (under 300 bytes), 15 numbers of at most 23 bytes, two
 * handles of 40 bytes in hex. */
#define LINE_FIXED_MAX 1024

/* The line, written in place into room reserved once (the fields through
 * jw_* calls took a third more time). */
static void put_json(struct walk_ctx *wc, const struct wrow *r, const char *bytes)
{
	const struct btrfsimg_inode *i = &r->inode;
	const char *target = bytes + r->path_len, *hashes = target + r->target_len;
	struct jw *w = &wc->w;
	jw_grow(w, LINE_FIXED_MAX + (size_t)r->path_len + r->target_len);
	char *p = w->buf + w->len;
	JW_PUT_LIT(p, "{\"path\":");
	p = jw_str_at(w, p, bytes, r->path_len, LINE_FIXED_MAX + r->target_len);
	JW_PUT_LIT(p, ",\"ino\":");
	p += jw_u64_at(p, r->ino);
	JW_PUT_LIT(p, ",\"subvol\":");
	if (r->stub)
		JW_PUT_LIT(p, "null");
	else
		p += jw_u64_at(p, r->subvol);
	JW_PUT_LIT(p, ",\"mode\":");
	p += jw_u64_at(p, i->mode);
	JW_PUT_LIT(p, ",\"nlink\":");
	p += jw_u64_at(p, i->nlink);
	if (i->synthesized)
		p = put_unknown(p);
	else
		p = put_known(p, i);
	if (r->symlink) {
		JW_PUT_LIT(p, ",\"target\":");
		if (r->target_ok)
			p = jw_str_at(w, p, target, r->target_len, LINE_FIXED_MAX);
		else
			JW_PUT_LIT(p, "null");
	}
	JW_PUT_LIT(p, ",\"d_ino\":");
	if (r->is_start)
		JW_PUT_LIT(p, "null");
	else
		p += jw_u64_at(p, r->d_ino);
	JW_PUT_LIT(p, ",\"handle\":");
	p = put_handle(p, r, 0);
	JW_PUT_LIT(p, ",\"handle_conn\":");
	p = put_handle(p, r, 1);
	w->len = (size_t)(p - w->buf);
	w->need_comma = true;
	if (r->name_damage) /* the path shows the name's safe form */
		jw_str(w, "name_damage", r->name_damage);
	if (r->as_of) { /* salvage: known live only as of an older generation */
		jw_str(w, "evidence", "scan");
		jw_u64(w, "as_of_generation", r->as_of);
	}
	if (r->lost_found)
		jw_bool(w, "lost_found", true);
	if (r->inode.synthesized) /* made up for a lost root directory */
		jw_bool(w, "synthesized", true);
	jw_raw(w, hashes, r->hashes_len);
	if (r->schemes)
		put_schemes(w, r);
	jw_lit(w, "}\n");
	if (w->len >= JW_OUT_BLOCK)
		jw_flush_fd(w, STDOUT_FILENO, &wc->write_errno);
}

static void put_text_head(const struct cli *c)
{
	printf("%-18s %6s %5s %10s %10s %12s  %-*s  ", "subvol:objectid", "mode", "nlink", "uid",
	       "gid", "size", TEXT_TIME_WIDTH, "mtime (UTC)");
	if (c->hash)
		printf("%-64s  ", "sha256");
	printf("path\n");
}

/* A text line as put_text prints it, into the line buffer (the record's
 * bytes: the path, the target, the --hash column). */
static void put_text_row(struct walk_ctx *wc, const struct wrow *r, const char *bytes)
{
	struct jw *w = &wc->w;
	if (!wc->head_done) { /* with the first line: none on a failure */
		fflush(stdout);
		put_text_head(wc->c);
		fflush(stdout);
		wc->head_done = true;
	}
	const struct btrfsimg_inode *i = &r->inode;
	const char *target = bytes + r->path_len, *hash = target + r->target_len;
	/* three 64-bit numbers (at most 20 digits each), four 32-bit ones (at
	 * most 11, octal), the time, the hash column, the separators */
	jw_grow(w, 3 * 20 + 4 * 11 + TEXT_TIME_MAX + 64 + 32);
	char *p = w->buf + w->len;
	p = text_dec(p, r->stub ? 0 : r->subvol, 7);
	*p++ = ':';
	p = text_dec_left(p, r->ino, 10);
	*p++ = ' ';
	p = text_oct0(p, i->mode, 6);
	*p++ = ' ';
	p = text_dec(p, i->nlink, 5);
	*p++ = ' ';
	p = text_dec(p, i->uid, 10);
	*p++ = ' ';
	p = text_dec(p, i->gid, 10);
	*p++ = ' ';
	p = text_dec(p, i->size, 12);
	JW_PUT_LIT(p, "  ");
	char t[TEXT_TIME_MAX];
	p = text_left(p, t, text_time_at(t, i->mtime.sec, i->mtime.nsec), TEXT_TIME_WIDTH);
	JW_PUT_LIT(p, "  ");
	if (wc->c->hash) {
		p = text_left(p, hash, r->hashes_len, 64);
		JW_PUT_LIT(p, "  ");
	}
	w->len = (size_t)(p - w->buf);
	if (r->path_len)
		text_name_jw(w, (const uint8_t *)bytes, r->path_len, NULL);
	else
		jw_lit(w, ".");
	if (r->symlink) {
		jw_lit(w, " -> ");
		if (r->target_ok)
			text_name_jw(w, (const uint8_t *)target, r->target_len, NULL);
		else
			jw_lit(w, "?");
	}
	if (r->stub)
		jw_lit(w, "  [stub]\n");
	else
		jw_lit(w, "\n");
	if (w->len >= JW_OUT_BLOCK)
		jw_flush_fd(w, STDOUT_FILENO, &wc->write_errno);
}

static void put_batch(void *ctx, const void *recs, size_t n, const char *bytes)
{
	struct walk_ctx *wc = ctx;
	const struct wrow *r = recs;
	if (wc->c->json) {
		for (size_t k = 0; k < n; k++)
			put_json(wc, &r[k], bytes + r[k].bytes_off);
	} else {
		for (size_t k = 0; k < n; k++)
			put_text_row(wc, &r[k], bytes + r[k].bytes_off);
	}
}

/* ------------------------------------------------ the walking thread */

static void on_json(struct walk_ctx *wc, const struct visit_node *n)
{
	struct wrow b, *r = &b;
	bytes_of(wc, n, &b);
	char *bytes = NULL;
	uint32_t off = 0;
	if (wc->h) {
		r = handoff_next(wc->h, wc->scratch.len, &bytes, &off);
		if (!r) {
			fputs("btrfsimg: out of memory queueing output\n", stderr);
			exit(2);
		}
		r->path_len = b.path_len;
		r->symlink = b.symlink;
		r->target_ok = b.target_ok;
		r->target_len = b.target_len;
		r->hashes_len = b.hashes_len;
		r->bytes_off = off;
		if (wc->scratch.len)
			memcpy(bytes, wc->scratch.buf, wc->scratch.len);
	}
	row_of(wc, n, r);
	if (!wc->h)
		put_json(wc, r, wc->scratch.buf);
}

/* --hash in text: the sha256 of regular files ("-" for others, "?" when
 * unreadable, the error on stderr) before the path. */
static void put_text_hash(struct walk_ctx *wc, const struct visit_node *n)
{
	struct cli *c = wc->c;
	char hex[65] = "-";
	if (S_ISREG(n->inode.mode) &&
	    digest_file(c->fs, n->subvol, n->objectid, n->inode.size, "sha256", hex) < 0) {
		fprintf(stderr, "btrfsimg: %.*s: %s\n", (int)n->path_len, (const char *)n->path,
			btrfsimg_errmsg(c->fs));
		snprintf(hex, sizeof(hex), "?");
		c->errors++;
	}
	printf("%-64s  ", hex);
}

/* " -> target" of a symlink, escaped ("?" when unreadable, the error on
 * stderr). */
static void put_text_target(struct walk_ctx *wc, const struct visit_node *n)
{
	struct cli *c = wc->c;
	uint8_t *t = NULL;
	size_t len = 0;
	fputs(" -> ", stdout);
	if (btrfsimg_readlink(c->fs, n->subvol, n->objectid, &t, &len) == 0) {
		text_name(stdout, t, len, NULL);
	} else {
		fprintf(stderr, "btrfsimg: %.*s: %s\n", (int)n->path_len, (const char *)n->path,
			btrfsimg_errmsg(c->fs));
		putchar('?');
		c->errors++;
	}
	free(t);
}

static void put_text(struct walk_ctx *wc, const struct visit_node *n)
{
	const struct btrfsimg_inode *i = &n->inode;
	char mtime[TEXT_TIME_MAX];
	if (!wc->head_done)
		put_text_head(wc->c);
	wc->head_done = true;
	text_time(mtime, i->mtime.sec, i->mtime.nsec);
	printf("%7" PRIu64 ":%-10" PRIu64 " %06o %5u %10u %10u %12" PRIu64 "  %-*s  ",
	       n->stub ? 0 : n->subvol, n->objectid, i->mode, i->nlink, i->uid, i->gid, i->size,
	       TEXT_TIME_WIDTH, mtime);
	if (wc->c->hash)
		put_text_hash(wc, n);
	if (n->path_len)
		text_name(stdout, n->path, n->path_len, NULL);
	else
		putchar('.');
	if (S_ISLNK(i->mode))
		put_text_target(wc, n);
	puts(n->stub ? "  [stub]" : "");
}

/* A text line's record for the formatting thread: the symlink's target
 * and the --hash column are read here (the handle is this thread's), and
 * their failures said here, as put_text says them. */
static void on_text(struct walk_ctx *wc, const struct visit_node *n)
{
	struct cli *c = wc->c;
	struct jw *s = &wc->scratch;
	s->len = 0;
	jw_grow(s, n->path_len + 1);
	jw_raw(s, (const char *)n->path, n->path_len);
	uint32_t target_len = 0;
	bool symlink = S_ISLNK(n->inode.mode), target_ok = false;
	if (symlink) {
		uint8_t *t = NULL;
		size_t len = 0;
		if (btrfsimg_readlink(c->fs, n->subvol, n->objectid, &t, &len) == 0 &&
		    len <= UINT32_MAX) {
			jw_raw(s, (const char *)t, len);
			target_ok = true;
			target_len = (uint32_t)len;
		} else {
			fprintf(stderr, "btrfsimg: %.*s: %s\n", (int)n->path_len,
				(const char *)n->path, btrfsimg_errmsg(c->fs));
			c->errors++;
		}
		free(t);
	}
	uint32_t hash_len = 0;
	if (c->hash) {
		char hex[65] = "-";
		if (S_ISREG(n->inode.mode) &&
		    digest_file(c->fs, n->subvol, n->objectid, n->inode.size, "sha256", hex) < 0) {
			fprintf(stderr, "btrfsimg: %.*s: %s\n", (int)n->path_len,
				(const char *)n->path, btrfsimg_errmsg(c->fs));
			snprintf(hex, sizeof(hex), "?");
			c->errors++;
		}
		hash_len = (uint32_t)strlen(hex);
		jw_raw(s, hex, hash_len);
	}
	char *bytes;
	uint32_t off;
	struct wrow *r = handoff_next(wc->h, s->len, &bytes, &off);
	if (!r) {
		fputs("btrfsimg: out of memory queueing output\n", stderr);
		exit(2);
	}
	r->inode = n->inode;
	r->ino = n->objectid;
	r->subvol = n->subvol;
	r->stub = n->stub;
	r->bytes_off = off;
	r->path_len = (uint32_t)n->path_len;
	r->symlink = symlink;
	r->target_ok = target_ok;
	r->target_len = target_len;
	r->hashes_len = hash_len;
	memcpy(bytes, s->buf, s->len);
}

static int on_node(void *ctx, const struct visit_node *n)
{
	struct walk_ctx *wc = ctx;
	if (wc->c->json)
		on_json(wc, n);
	else if (wc->h)
		on_text(wc, n);
	else
		put_text(wc, n);
	return 0;
}

static int cmd_walk(struct cli *c)
{
	struct walk_ctx wc = { .c = c };
	if (c->inumbits >= 0) {
		int rc = nest_load(c->fs, c->have_mount_subvol ? c->mount_subvol : 0, &wc.nest);
		if (rc < 0)
			return cli_fail(c, rc, "walk");
		wc.have_nest = true;
	}
	/* lines are formatted on a second thread, and bypass stdio; text for
	 * a terminal is printed as it is found, in step with the progress line */
	if (c->json || !isatty(STDOUT_FILENO)) {
		fflush(stdout);
		wc.h = handoff_start(sizeof(struct wrow), put_batch, &wc);
	}
	struct visit_opts o = { .subvol = cli_start_subvol(c), .path = c->path,
				.objectid = c->inode_objectid };
	int rc = visit_tree(c->fs, &o, on_node, &wc, &c->errors);
	handoff_finish(wc.h);
	jw_flush_fd(&wc.w, STDOUT_FILENO, &wc.write_errno);
	jw_line_free(&wc.w);
	jw_line_free(&wc.scratch);
	if (wc.have_nest)
		nest_free(&wc.nest);
	if (rc < 0)
		return cli_fail(c, rc, "walk");
	if (wc.write_errno) {
		cli_warn("write error on standard output: %s", strerror(wc.write_errno));
		return EXIT_FAILED;
	}
	return cli_status(c);
}

static int walk_check(struct cli *c)
{
	if (cli_need_images(c, 1, "IMAGE...") || cli_inode_alone(c) ||
	    cli_needs(c, c->inumbits >= 0, "--inumbits", c->json, "--json") ||
	    cli_needs(c, c->csum, "--csum", c->json, "--json") ||
	    cli_needs(c, c->have_mount_subvol, "--mount-subvol", c->inumbits >= 0, "--inumbits") ||
	    cli_needs(c, c->opts.flags & BTRFSIMG_OPEN_NO_DATA_VERIFY, "--no-verify", c->hash,
		      "--hash"))
		return EXIT_USAGE;
	return EXIT_OK;
}

static const struct cmd_option walk_options[] = {
	{ OPT_JSON, "one JSON object per path: stat/statx fields, d_ino,\n"
		    "file handles" },
	{ OPT_HASH, "sha256 of regular files' contents (and, with --json,\n"
		    "of xattrs)" },
	{ OPT_SUBVOL, NULL },
	{ OPT_PATH, NULL },
	{ OPT_INODE, "start at inode S:O (subvolume S, objectid O): a\n"
		     "directory's tree, or that one object" },
	{ OPT_INUMBITS, "with --json, add each path's number under inumbits=N,\n"
			"the nfsd uniquifier and numdevs=2 (0 or 32..64)" },
	{ OPT_MOUNT_SUBVOL, "with --inumbits: the mounted subvolume for numdevs=2\n"
			    "(default: the default subvolume)" },
	{ OPT_NO_VERIFY, "with --hash: do not verify data checksums" },
	{ OPT_CSUM, NULL },
	CMD_IMAGE_OPTIONS, { OPT_GENERATION, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_walk = {
	.name = "walk",
	.summary = "every path with what stat, readdir and name_to_handle_at show",
	.args = "IMAGE...",
	.about = "Every path under the start (the top level, --subvol, --path or --inode),\n"
		 "depth-first in readdir order, crossing into subvolumes, with what\n"
		 "stat/statx, readdir and name_to_handle_at show for it. Text: a header,\n"
		 "then id, mode, nlink, uid, gid, size, mtime (ISO 8601, UTC, ns) and the\n"
		 "path, escaped (\\\\, \\n, \\t, \\r, \\xNN), \"-> target\" for symlinks;\n"
		 "--json has every field.",
	.examples = "btrfsimg walk disk.img\n"
		    "btrfsimg walk --json --hash --subvol 256 disk.img\n"
		    "btrfsimg walk --json --inode 256:257 disk.img",
	.options = walk_options,
	.check = walk_check,
	.run = cmd_walk,
};
