// SPDX-License-Identifier: MIT
/*
 * Recovered versions on the command line (recovered.h). extract --deleted
 * writes each version at DESTDIR/PATH (later versions of one path at
 * PATH.~ID~; a deleted directory is created there), through outfile.h
 * (new files only, every component opened O_NOFOLLOW relative to the one
 * before), ".", ".." and empty components written "_", so nothing lands
 * outside DESTDIR and nothing there is overwritten, whatever names a
 * stale block carries. Its manifest is DESTDIR/REC_MANIFEST, made the
 * same way.
 */
#include "common/recovered.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/outfile.h"
#include "common/progress.h"
#include "common/text.h"

/* The scan's progress line on a terminal (progress.h): bytes, rate, time
 * left. */
static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
	(void)ctx;
	progress_bytes("scan", done, total);
}

int rec_scan(struct cli *c, btrfsimg_forensic **out)
{
	int rc = btrfsimg_forensic_scan(c->fs, isatty(2) ? on_progress : NULL, NULL, out);
	progress_done();
	struct btrfsimg_scan_stats st;
	if (rc == 0 && c->verbose && btrfsimg_forensic_stats(*out, &st) == 0)
		cli_warn("scan: %" PRIu64 " devices, %" PRIu64 " bytes; %" PRIu64
			 " positions with the fsid: %" PRIu64 " bad checksum, %" PRIu64
			 " bad block, %" PRIu64 " placed by no chunk map, %" PRIu64
			 " copies; %" PRIu64 " blocks indexed; %" PRIu64
			 " chunks of older chunk maps",
			 st.devices, st.bytes, st.candidates, st.bad_csum, st.bad_block,
			 st.unmapped, st.copies, st.blocks, st.old_chunks);
	if (rc < 0)
		return cli_fail(c, rc, c->cmd);
	return EXIT_OK;
}

static int write_piece(void *ctx, uint64_t off, const void *data, size_t len)
{
	(void)off;
	return fwrite(data, 1, len, ctx) == len ? 0 : -EIO;
}

/* A regular file written through: whole 4 KiB blocks of zeros (holes,
 * untrusted ranges) are skipped and left as holes, the length set at the
 * end, so a version's holes cost no disk. Offsets count from where the
 * file stood (@base). */
struct sparse_out {
	FILE *fp;
	off_t base;
	uint64_t end;
};

static bool zero_block(const uint8_t *p, size_t n)
{
	return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

static int sparse_piece(void *ctx, uint64_t off, const void *data, size_t len)
{
	struct sparse_out *s = ctx;
	const uint8_t *p = data;
	for (size_t b = 0; b < len; b += 4096) {
		size_t n = len - b < 4096 ? len - b : 4096;
		if (zero_block(p + b, n))
			continue;
		if (fseeko(s->fp, s->base + (off_t)(off + b), SEEK_SET) < 0 ||
		    fwrite(p + b, 1, n, s->fp) != n)
			return -EIO;
	}
	s->end = off + len;
	return 0;
}

/* Sparse into a regular file opened without O_APPEND (extract --deleted,
 * or cat --deleted redirected to one), else byte by byte (a pipe). */
int rec_write(btrfsimg_forensic *f, const char *id, unsigned flags, FILE *out)
{
	struct stat st;
	int fd = fileno(out), fl = fcntl(fd, F_GETFL);
	struct sparse_out s = { out, ftello(out), 0 };
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || fl < 0 || (fl & O_APPEND) || s.base < 0)
		return btrfsimg_forensic_read_flags(f, id, flags, write_piece, out);
	int rc = btrfsimg_forensic_read_flags(f, id, flags, sparse_piece, &s);
	if (rc >= 0 && (fflush(out) != 0 || ftruncate(fd, s.base + (off_t)s.end) < 0 ||
			fseeko(out, s.base + (off_t)s.end, SEEK_SET) < 0))
		rc = -EIO;
	return rc;
}

void rec_name_damage(struct cli *c, const struct btrfsimg_recovered *r)
{
	if (!r->name_damage)
		return;
	cli_warn("%s (%s): damaged name: %s: shown by its safe form", r->path, r->id,
		 r->name_damage);
	c->errors++;
}

unsigned rec_read_flags(const struct cli *c)
{
	return c->opts.flags & BTRFSIMG_OPEN_NO_DATA_VERIFY ? BTRFSIMG_FORENSIC_RAW : 0;
}

const char *rec_bad_as(const struct btrfsimg_bad_range *b, unsigned flags)
{
	return (flags & BTRFSIMG_FORENSIC_RAW) && strcmp(b->why, "csum mismatch") == 0
		       ? "written as the bytes on disk, unverified (--no-verify)"
		       : "written as zeros";
}

void rec_json(struct jw *w, const struct btrfsimg_recovered *r, const char *sha256)
{
	const struct btrfsimg_inode *i = &r->inode;
	jw_str(w, "id", r->id);
	jw_str(w, "kind", btrfsimg_recovered_kind_name(r->kind));
	jw_u64(w, "subvol", r->subvol);
	jw_u64(w, "objectid", r->objectid);
	jw_u64(w, "generation", r->generation);
	jw_u64(w, "transid", i->transid);
	jw_str(w, "path", r->path);
	if (r->name_damage)
		jw_str(w, "name_damage", r->name_damage);
	jw_u64(w, "mode", i->mode);
	jw_u64(w, "uid", i->uid);
	jw_u64(w, "gid", i->gid);
	jw_u64(w, "size", i->size);
	jw_u64(w, "nlink", i->nlink);
	jw_time(w, "atime", i->atime.sec, i->atime.nsec);
	jw_time(w, "mtime", i->mtime.sec, i->mtime.nsec);
	jw_time(w, "ctime", i->ctime.sec, i->ctime.nsec);
	jw_time(w, "btime", i->otime.sec, i->otime.nsec);
	jw_str(w, "status", btrfsimg_recovered_status_name(r->status));
	jw_bool(w, "verified", r->verified);
	jw_bool(w, "inline", r->has_inline);
	jw_bool(w, "compressed", r->compressed);
	jw_bool(w, "nodatasum", r->nodatasum);
	jw_open_arr(w, "bad_ranges");
	for (size_t k = 0; k < r->nbad; k++) {
		jw_open_obj(w, NULL);
		jw_u64(w, "offset", r->bad[k].offset);
		jw_u64(w, "length", r->bad[k].length);
		jw_str(w, "why", r->bad[k].why);
		jw_close_obj(w);
	}
	jw_close_arr(w);
	if (sha256)
		jw_str(w, "sha256", sha256);
}

/* ------------------------------------------------------------ cat */

struct find {
	const char *id;
	unsigned flags;
	uint64_t nbad;
};

static int say_bad(void *ctx, const struct btrfsimg_recovered *r)
{
	struct find *x = ctx;
	if (strcmp(r->id, x->id) != 0)
		return 0;
	for (size_t i = 0; i < r->nbad; i++)
		cli_warn("cat: %s: bytes %" PRIu64 "..%" PRIu64 " %s (%s)", r->id,
			 r->bad[i].offset, r->bad[i].offset + r->bad[i].length, r->bad[i].why,
			 rec_bad_as(&r->bad[i], x->flags));
	x->nbad = r->nbad;
	return 1;
}

int rec_cat(struct cli *c)
{
	btrfsimg_forensic *f;
	int st = rec_scan(c, &f);
	if (st)
		return st;
	unsigned flags = rec_read_flags(c);
	int rc = rec_write(f, c->deleted_id, flags, stdout);
	if (fflush(stdout) != 0 && rc >= 0)
		rc = -EIO;
	if (rc == 1) {
		struct find x = { c->deleted_id, flags, 0 };
		btrfsimg_forensic_recovered(f, say_bad, &x);
	}
	btrfsimg_forensic_free(f);
	if (rc < 0)
		return cli_fail(c, rc, "cat");
	return rc == 1 ? EXIT_DAMAGED : cli_status(c);
}

/* ------------------------------------------------------------ extract */

struct ex {
	struct cli *c;
	btrfsimg_forensic *f;
	int root;
	FILE *manifest;
	char **paths; /* relative paths written so far */
	size_t npaths, cpaths;
	unsigned flags; /* rec_read_flags */
	bool as_root;	/* owners restored too */
	struct done_dir *dirs; /* written, finished at the end (finish_dirs) */
	size_t ndirs, cdirs;
	uint64_t written, failed, left_out;
	uint64_t clashes; /* versions whose place in DESTDIR was taken */
	uint64_t not_whole[4]; /* files and links written, by status */
};

/* A directory written, whose metadata waits until nothing more is
 * created in it. @rel is x->paths' string. */
struct done_dir {
	const char *rel;
	const struct btrfsimg_recovered *r;
};

/* A version's bytes on their way to @next, hashed: the manifest's sha256
 * is of the bytes written, not of a second read. */
struct hashed {
	EVP_MD_CTX *md;
	btrfsimg_data_fn next;
	void *ctx;
};

static int hashed_piece(void *ctx, uint64_t off, const void *data, size_t len)
{
	struct hashed *h = ctx;
	EVP_DigestUpdate(h->md, data, len);
	return h->next(h->ctx, off, data, len);
}

static bool taken(const struct ex *x, const char *rel)
{
	for (size_t i = 0; i < x->npaths; i++)
		if (strcmp(x->paths[i], rel) == 0)
			return true;
	return false;
}

/* The safe relative path of a record: components "", "." and ".." are
 * written "_". */
static char *safe_rel(const struct btrfsimg_recovered *r, const struct ex *x)
{
	size_t n = strlen(r->path);
	char *s = malloc(n + strlen(r->id) + 16);
	if (!s)
		return NULL;
	size_t o = 0;
	for (const char *p = r->path; *p;) {
		size_t len = strcspn(p, "/");
		if (o)
			s[o++] = '/';
		if (len == 0 || (len == 1 && p[0] == '.') ||
		    (len == 2 && p[0] == '.' && p[1] == '.'))
			s[o++] = '_';
		else {
			memcpy(s + o, p, len);
			o += len;
		}
		p += len + (p[len] == '/');
	}
	if (!o)
		s[o++] = '_';
	s[o] = '\0';
	if (taken(x, s))
		sprintf(s + o, ".~%s~", r->id);
	return s;
}

struct membuf {
	uint8_t *p;
	size_t len;
};

static int mem_piece(void *ctx, uint64_t off, const void *data, size_t len)
{
	(void)off;
	struct membuf *m = ctx;
	if (m->len + len > 4095)
		return -ENAMETOOLONG;
	memcpy(m->p + m->len, data, len);
	m->len += len;
	return 0;
}

/* A regular file's version at @leaf under @dir: its bytes through @h,
 * then its mode, owner and times (after the contents, whose writing
 * would change the mtime). */
static int write_file(struct ex *x, int dir, const char *leaf, const struct btrfsimg_recovered *r,
		      struct hashed *h)
{
	FILE *fp = out_fcreate(dir, leaf, 0600);
	if (!fp)
		return -errno;
	struct sparse_out s = { fp, 0, 0 };
	h->next = sparse_piece;
	h->ctx = &s;
	int rc = btrfsimg_forensic_read_flags(x->f, r->id, x->flags, hashed_piece, h);
	if ((fflush(fp) != 0 || ftruncate(fileno(fp), (off_t)s.end) < 0) && rc >= 0)
		rc = -EIO;
	if (rc >= 0) {
		int fd = fileno(fp);
		if (out_owner_mode(fd, &r->inode, x->as_root) < 0)
			x->c->errors++;
		btrfsimg_forensic_xattrs(x->f, r->id, out_xattr, &fd);
		out_times(fd, &r->inode);
	}
	if (fclose(fp) != 0 && rc >= 0)
		rc = -EIO;
	return rc;
}

/* One version at @rel: a regular file, a symlink, or a directory
 * (created, or found there already: the parent of another record), with
 * the sha256 of a file's or link's bytes in @hex ("" for a directory).
 * Returns btrfsimg_forensic_read's value or -errno. */
static int write_one(struct ex *x, const char *rel, const struct btrfsimg_recovered *r, char *hex)
{
	const char *leaf;
	int dir = out_parent(x->root, rel, true, &leaf);
	if (dir < 0)
		return dir;
	int rc = 0;
	hex[0] = '\0';
	if (S_ISDIR(r->inode.mode)) {
		int fd = out_dir(dir, leaf, 0755, true, true);
		if (fd < 0)
			rc = fd;
		else
			close(fd);
		close(dir);
		return rc;
	}
	struct hashed h = { EVP_MD_CTX_new(), NULL, NULL };
	if (!h.md || !EVP_DigestInit_ex(h.md, EVP_sha256(), NULL)) {
		rc = -ENOMEM;
	} else if (S_ISLNK(r->inode.mode)) {
		uint8_t target[4096];
		struct membuf m = { target, 0 };
		h.next = mem_piece;
		h.ctx = &m;
		rc = btrfsimg_forensic_read_flags(x->f, r->id, x->flags, hashed_piece, &h);
		target[m.len] = '\0';
		if (rc >= 0 && symlinkat((char *)target, dir, leaf) < 0)
			rc = -errno;
		else if (rc >= 0)
			out_link_meta(dir, leaf, &r->inode, x->as_root);
	} else {
		rc = write_file(x, dir, leaf, r, &h);
	}
	if (rc >= 0) {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned n = 0;
		EVP_DigestFinal_ex(h.md, md, &n);
		btrfsimg_hex(md, n, hex, 2 * (size_t)n + 1);
	}
	EVP_MD_CTX_free(h.md);
	close(dir);
	return rc;
}

/* Whether @rel or a directory on its way is a place this run wrote a
 * version at (a file where a later version's path wants a directory):
 * then a failure there is no clash with what DESTDIR held before. */
static bool ours(const struct ex *x, const char *rel)
{
	char *p = strdup(rel);
	bool hit = false;
	for (size_t i = 0; p && !hit; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		char c = p[i];
		p[i] = '\0';
		hit = taken(x, p);
		if (c == '\0')
			break;
		p[i] = c;
	}
	free(p);
	return hit;
}

/* Directories' modes, owners and times once nothing more is created in
 * them (a new child changes a directory's mtime), deepest first (a mode
 * without x would keep even the owner out of what is below); only those
 * whose inode item was found (intact: a directory known by its names alone
 * has no mode or times). */
static int remember_dir(struct ex *x, const char *rel, const struct btrfsimg_recovered *r)
{
	if (x->ndirs == x->cdirs) {
		size_t cap = x->cdirs ? x->cdirs * 2 : 16;
		struct done_dir *d = realloc(x->dirs, cap * sizeof(*d));
		if (!d)
			return -ENOMEM;
		x->dirs = d;
		x->cdirs = cap;
	}
	x->dirs[x->ndirs++] = (struct done_dir){ rel, r };
	return 0;
}

static int deeper_first(const void *pa, const void *pb)
{
	size_t a = strlen(((const struct done_dir *)pa)->rel);
	size_t b = strlen(((const struct done_dir *)pb)->rel);
	return a > b ? -1 : a < b;
}

static void finish_dirs(struct ex *x)
{
	if (x->ndirs)
		qsort(x->dirs, x->ndirs, sizeof(*x->dirs), deeper_first);
	for (size_t i = 0; i < x->ndirs; i++) {
		const char *leaf;
		int dir = out_parent(x->root, x->dirs[i].rel, false, &leaf);
		int fd = dir < 0 ? dir : out_dir(dir, leaf, 0, false, false);
		if (dir >= 0)
			close(dir);
		if (fd < 0)
			continue;
		if (out_owner_mode(fd, &x->dirs[i].r->inode, x->as_root) < 0)
			x->c->errors++;
		btrfsimg_forensic_xattrs(x->f, x->dirs[i].r->id, out_xattr, &fd);
		out_times(fd, &x->dirs[i].r->inode);
		close(fd);
	}
}

static int extract_one(void *ctx, const struct btrfsimg_recovered *r)
{
	struct ex *x = ctx;
	if (r->status == BTRFSIMG_REC_ARTEFACT)
		return 0; /* a state nobody saw: listed by deleted, not restored */
	if (x->c->intact_only && r->status != BTRFSIMG_REC_INTACT) {
		x->left_out++;
		return 0;
	}
	rec_name_damage(x->c, r);
	char *rel = safe_rel(r, x);
	if (!rel)
		return -ENOMEM;
	char hex[EVP_MAX_MD_SIZE * 2 + 1];
	int rc = write_one(x, rel, r, hex);
	if (rc < 0) {
		bool clash = out_clash(-rc) && !ours(x, rel);
		cli_warn("extract: %s (%s): %s%s", rel, r->id, strerror(-rc),
			 clash ? OUT_CLASH_SAID : "");
		*(clash ? &x->clashes : &x->failed) += 1;
		free(rel);
		return 0;
	}
	x->written++;
	if (!S_ISDIR(r->inode.mode))
		x->not_whole[r->status & 3] += r->status != BTRFSIMG_REC_INTACT;
	struct jw w;
	jw_begin(&w, x->manifest);
	jw_str(&w, "file", rel);
	rec_json(&w, r, hex[0] ? hex : NULL);
	jw_end(&w);
	if (S_ISDIR(r->inode.mode) && r->status == BTRFSIMG_REC_INTACT && remember_dir(x, rel, r)) {
		free(rel);
		return -ENOMEM;
	}
	if (x->npaths == x->cpaths) {
		size_t cap = x->cpaths ? x->cpaths * 2 : 64;
		char **p = realloc(x->paths, cap * sizeof(*p));
		if (!p) {
			free(rel);
			return -ENOMEM;
		}
		x->paths = p;
		x->cpaths = cap;
	}
	x->paths[x->npaths++] = rel;
	return 0;
}

/* ------------------------------------------------------------ order */

/* Versions sharing a path: the plain name PATH goes to the best, the
 * others to PATH.~ID~. Best: a directory (the parent of other records),
 * then an intact and verified version, intact, partial, overwritten,
 * metadata-only; among equals the newest generation, then the larger
 * size, then the library's order. rec_extract writes the versions in this
 * order, so the first of a path takes its plain name (taken()). */
static int trust_rank(const struct btrfsimg_recovered *r)
{
	if (S_ISDIR(r->inode.mode))
		return 0;
	switch (r->status) {
	case BTRFSIMG_REC_INTACT: return r->verified ? 1 : 2;
	case BTRFSIMG_REC_PARTIAL: return 3;
	case BTRFSIMG_REC_OVERWRITTEN: return 4;
	default: return 5;
	}
}

struct slot {
	struct btrfsimg_recovered r; /* its strings borrowed from the index */
	size_t idx;		     /* the library's order */
};

static int better_first(const void *pa, const void *pb)
{
	const struct slot *a = pa, *b = pb;
	int ra = trust_rank(&a->r), rb = trust_rank(&b->r);
	if (ra != rb)
		return ra < rb ? -1 : 1;
	if (a->r.generation != b->r.generation)
		return a->r.generation > b->r.generation ? -1 : 1;
	if (a->r.inode.size != b->r.inode.size)
		return a->r.inode.size > b->r.inode.size ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

struct slots {
	struct slot *v;
	size_t n, cap;
};

static int collect(void *ctx, const struct btrfsimg_recovered *r)
{
	struct slots *s = ctx;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		struct slot *v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n] = (struct slot){ *r, s->n };
	s->n++;
	return 0;
}

/* Every version, best first (better_first), through extract_one. */
static int extract_all(struct ex *x)
{
	struct slots s = { NULL, 0, 0 };
	int rc = btrfsimg_forensic_recovered(x->f, collect, &s);
	if (rc == 0 && s.n)
		qsort(s.v, s.n, sizeof(*s.v), better_first);
	for (size_t i = 0; i < s.n && rc == 0; i++)
		rc = extract_one(x, &s.v[i].r);
	if (rc == 0)
		finish_dirs(x);
	free(s.v);
	free(x->dirs);
	return rc;
}

/* The manifest's place is taken, or cannot be had: said, EXIT_FAILED. */
static int manifest_refused(const char *destdir, int err)
{
	cli_warn("extract: %s/" REC_MANIFEST ": cannot create the manifest: %s (it is created "
		 "new, never over a file or through a link: give a new or empty DESTDIR)",
		 destdir, strerror(err));
	return EXIT_FAILED;
}

int rec_extract_check(const struct cli *c)
{
	int d = open(c->destdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d < 0)
		return 0; /* not there yet: made by rec_extract */
	struct stat st;
	bool there = fstatat(d, REC_MANIFEST, &st, AT_SYMLINK_NOFOLLOW) == 0;
	close(d);
	return there ? manifest_refused(c->destdir, EEXIST) : 0;
}

/* DESTDIR, and the manifest created in it before any version, its name
 * the first path taken (a version of that name goes to NAME.~ID~). 0, or
 * EXIT_FAILED (said). */
static int open_dest(struct ex *x)
{
	const char *d = x->c->destdir;
	x->root = out_destdir(d);
	if (x->root < 0) {
		cli_warn("extract: %s: %s", d, strerror(-x->root));
		return EXIT_FAILED;
	}
	x->manifest = out_fcreate(x->root, REC_MANIFEST, 0644);
	if (!x->manifest)
		return manifest_refused(d, errno);
	x->paths = malloc(64 * sizeof(*x->paths));
	char *name = strdup(REC_MANIFEST);
	if (!x->paths || !name) {
		free(name);
		cli_warn("extract: out of memory");
		return EXIT_FAILED;
	}
	x->cpaths = 64;
	x->paths[x->npaths++] = name;
	return 0;
}

/* What was written, and what of it is not the version whole. */
static void summary(const struct ex *x, uint64_t not_whole)
{
	const char *d = x->c->destdir;
	char left[64] = "", clash[96] = "";
	if (x->c->intact_only)
		snprintf(left, sizeof(left), ", %" PRIu64 " left out (not intact: --intact-only)",
			 x->left_out);
	if (x->clashes)
		snprintf(clash, sizeof(clash),
			 ", %" PRIu64 " not written: their place in DESTDIR taken (not damage)",
			 x->clashes);
	cli_warn("extract: %" PRIu64 " recovered versions into '%s' (manifest %s/" REC_MANIFEST
		 "), %" PRIu64 " of them not whole (%" PRIu64 " partial, %" PRIu64
		 " overwritten, %" PRIu64 " metadata-only: the bytes not read written as %s)%s, %"
		 PRIu64 " errors%s",
		 x->written, d, d, not_whole, x->not_whole[BTRFSIMG_REC_PARTIAL],
		 x->not_whole[BTRFSIMG_REC_OVERWRITTEN], x->not_whole[BTRFSIMG_REC_METADATA_ONLY],
		 x->flags & BTRFSIMG_FORENSIC_RAW
			 ? "zeros, csum mismatches as the bytes on disk (--no-verify)"
			 : "zeros",
		 left, x->failed, clash);
}

int rec_extract(struct cli *c)
{
	btrfsimg_forensic *f;
	int st = rec_scan(c, &f);
	if (st)
		return st;
	struct ex x = { .c = c, .f = f, .root = -1, .flags = rec_read_flags(c),
			.as_root = geteuid() == 0 };
	st = open_dest(&x);
	int rc = st ? 0 : extract_all(&x);
	if (x.manifest && fclose(x.manifest) != 0 && rc >= 0)
		rc = -EIO;
	if (x.root >= 0)
		close(x.root);
	for (size_t i = 0; i < x.npaths; i++)
		free(x.paths[i]);
	free(x.paths);
	uint64_t not_whole = x.not_whole[BTRFSIMG_REC_PARTIAL] +
			     x.not_whole[BTRFSIMG_REC_OVERWRITTEN] +
			     x.not_whole[BTRFSIMG_REC_METADATA_ONLY];
	if (!st)
		summary(&x, not_whole);
	btrfsimg_forensic_free(f);
	if (st)
		return st;
	if (rc < 0)
		return *btrfsimg_errmsg(c->fs) ? cli_fail(c, rc, "extract") : EXIT_FAILED;
	/* a version written with bytes not read is a result despite damage;
	 * a taken place is the destination's doing: refused */
	c->errors += x.failed + not_whole;
	return x.clashes ? EXIT_FAILED : cli_status(c);
}
