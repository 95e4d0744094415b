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

#include "cli.h"
#include "digest.h"
#include "json.h"
#include "nest.h"
#include "visit.h"

struct walk_ctx {
	struct cli *c;
	struct nest nest;
	bool have_nest;
};

/* Children of a directory are encoded from the inodes the walk holds (two
 * lookups fewer per path); the start and stubs go through the library's
 * lookup, which knows the stub's rules. */
static void put_handle(struct jw *w, struct walk_ctx *wc, const struct visit_node *n,
		       const char *key, bool conn)
{
	uint32_t type = 0;
	uint8_t buf[40];
	int len;
	if (n->dir_inode && !n->stub)
		len = btrfsimg_file_handle_encode(n->subvol, n->objectid, n->inode.generation,
						  n->inode.mode, n->dir_subvol, n->dir_objectid,
						  n->dir_inode->generation, conn, &type, buf);
	else
		len = btrfsimg_file_handle(wc->c->fs, n->subvol, n->objectid, n->dir_subvol,
					   n->dir_objectid, conn, &type, buf);
	if (len < 0) {
		jw_null(w, key);
		return;
	}
	jw_open_obj(w, key);
	jw_u64(w, "type", type);
	char hex[81];
	hex_of(buf, (size_t)len, hex);
	jw_strn(w, "hex", hex, 2 * (size_t)len);
	jw_close_obj(w);
}

static void put_target(struct jw *w, struct walk_ctx *wc, const struct visit_node *n)
{
	if (!S_ISLNK(n->inode.mode))
		return;
	uint8_t *t = NULL;
	size_t len = 0;
	if (btrfsimg_readlink(wc->c->fs, n->subvol, n->objectid, &t, &len) == 0)
		jw_strn(w, "target", t, len);
	else {
		jw_null(w, "target");
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

static void put_hashes(struct jw *w, struct walk_ctx *wc, const struct visit_node *n)
{
	struct cli *c = wc->c;
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
	jw_open_obj(w, "xattrs");
	if (!n->stub && btrfsimg_xattrs(c->fs, n->subvol, n->objectid, xattr_digest, w) < 0)
		c->errors++;
	jw_close_obj(w);
}

static void put_schemes(struct jw *w, struct walk_ctx *wc, const struct visit_node *n)
{
	unsigned bits = (unsigned)wc->c->inumbits;
	uint64_t st_ino = n->objectid;
	uint64_t ino = n->stub ? st_ino : btrfsimg_presented(st_ino, btrfsimg_overlay(n->subvol, bits));
	uint64_t fid = n->stub ? st_ino : btrfsimg_presented(st_ino, btrfsimg_uniquifier(n->subvol));
	jw_u64(w, "scheme_ino", ino);
	jw_u64(w, "nfs_fileid", fid);
	if (n->is_start) {
		jw_null(w, "scheme_d_ino");
		jw_null(w, "nfs_d_fileid");
	} else {
		uint64_t loc = n->ent.location_objectid, dir = n->dir_tree_subvol;
		jw_u64(w, "scheme_d_ino", btrfsimg_presented(loc, btrfsimg_overlay(dir, bits)));
		jw_u64(w, "nfs_d_fileid", btrfsimg_presented(loc, btrfsimg_uniquifier(dir)));
	}
	int dev = n->stub ? 0 : nest_dev(&wc->nest, n->subvol);
	if (dev < 0)
		jw_null(w, "numdevs2_dev");
	else
		jw_u64(w, "numdevs2_dev", (uint64_t)dev);
}

static void put_json(struct walk_ctx *wc, const struct visit_node *n)
{
	const struct btrfsimg_inode *i = &n->inode;
	struct jw w;
	jw_begin(&w, stdout);
	jw_strn(&w, "path", n->path, n->path_len);
	jw_u64(&w, "ino", n->objectid);
	if (n->stub)
		jw_null(&w, "subvol");
	else
		jw_u64(&w, "subvol", n->subvol);
	jw_u64(&w, "mode", i->mode);
	jw_u64(&w, "nlink", i->nlink);
	jw_u64(&w, "uid", i->uid);
	jw_u64(&w, "gid", i->gid);
	jw_u64(&w, "size", i->size);
	char rdev[41]; /* major:minor, as the kernel splits a btrfs rdev */
	size_t k = jw_u64_dec(i->rdev >> 20, rdev);
	rdev[k++] = ':';
	k += jw_u64_dec(i->rdev & 0xfffff, rdev + k);
	jw_strn(&w, "rdev", rdev, k);
	jw_time(&w, "atime", i->atime.sec, i->atime.nsec);
	jw_time(&w, "mtime", i->mtime.sec, i->mtime.nsec);
	jw_time(&w, "ctime", i->ctime.sec, i->ctime.nsec);
	jw_time(&w, "btime", i->otime.sec, i->otime.nsec);
	put_target(&w, wc, n);
	if (n->is_start)
		jw_null(&w, "d_ino");
	else
		jw_u64(&w, "d_ino", n->ent.location_objectid);
	put_handle(&w, wc, n, "handle", false);
	put_handle(&w, wc, n, "handle_conn", true);
	if (wc->c->hash)
		put_hashes(&w, wc, n);
	if (wc->c->inumbits >= 0)
		put_schemes(&w, wc, n);
	jw_end(&w);
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

static void put_text(struct walk_ctx *wc, const struct visit_node *n)
{
	const struct btrfsimg_inode *i = &n->inode;
	printf("%7" PRIu64 ":%-10" PRIu64 " %06o %4u %5u %5u %12" PRIu64 "  ",
	       n->stub ? 0 : n->subvol, n->objectid, i->mode, i->nlink, i->uid, i->gid, i->size);
	if (wc->c->hash)
		put_text_hash(wc, n);
	printf("%.*s%s\n", (int)(n->path_len ? n->path_len : 1),
	       n->path_len ? (const char *)n->path : ".", n->stub ? "  [stub]" : "");
}

static int on_node(void *ctx, const struct visit_node *n)
{
	struct walk_ctx *wc = ctx;
	if (wc->c->json)
		put_json(wc, n);
	else
		put_text(wc, n);
	return 0;
}

int cmd_walk(struct cli *c)
{
	struct walk_ctx wc = { .c = c };
	if (c->inumbits >= 0) {
		int rc = nest_load(c->fs, c->have_mount_subvol ? c->mount_subvol : 0, &wc.nest);
		if (rc < 0)
			return cli_fail(c, rc, "walk");
		wc.have_nest = true;
	}
	struct visit_opts o = { .subvol = c->have_subvol ? c->subvol : 5, .path = c->path };
	int rc = visit_tree(c->fs, &o, on_node, &wc, &c->errors);
	if (wc.have_nest)
		nest_free(&wc.nest);
	if (rc < 0)
		return cli_fail(c, rc, "walk");
	return cli_status(c);
}
