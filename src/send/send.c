// SPDX-License-Identifier: MIT
/*
 * Send streams from an image (btrfsimg_send): what `btrfs send` writes,
 * for `btrfs receive` to apply, without the kernel.
 *
 * A full stream is built in an order receive can always follow, whatever
 * the objectids: every directory is made under a temporary name at the
 * top ("o<ino>-<gen>-0", the kernel's orphan names), then moved to its
 * path shallowest first, so each one's parent is in place when it
 * arrives; then every other inode at its first name, its other names as
 * links, its data (only the ranges that hold data: holes stay holes, the
 * size set last), xattrs, owner, mode and times; directories' times go
 * last, when nothing more is made inside them. A data extent already sent
 * for an earlier file goes out as a clone of those bytes, as the kernel
 * does for shared extents.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "btrfsimg.h"

#include "base/err.h"
#include "base/ondisk.h"
#include "base/sized.h"
#include "send/commands.h"
#include "send/incremental.h"
#include "send/paths.h"
#include "send/stream.h"

/* ------------------------------------------------------------ inodes */

static int collect_inode(void *ctx, const struct btrfsimg_inode_entry *e)
{
	struct bi_send *s = ctx;
	int rc = bi_grow((void **)&s->inodes, &s->cap, s->ninodes + 1, sizeof(*s->inodes));
	if (rc == 0)
		s->inodes[s->ninodes++] = e->inode;
	return rc;
}

struct placed {
	size_t depth;
	size_t i;		/* index in send::inodes */
	struct bi_bytes path;
};

static int by_depth(const void *a, const void *b)
{
	const struct placed *x = a, *y = b;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static size_t depth_of(const struct bi_bytes *p)
{
	size_t d = 1;
	for (size_t i = 0; i < p->len; i++)
		d += p->p[i] == '/';
	return d;
}

/* Every directory but the root made under its orphan name, then moved to
 * its path, shallowest first. */
static int send_dirs(struct bi_send *s)
{
	struct placed *v = calloc(s->ninodes ? s->ninodes : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	size_t n = 0;
	int rc = 0;
	struct bi_bytes tmp = { 0 };
	for (size_t i = 0; rc == 0 && i < s->ninodes; i++) {
		const struct btrfsimg_inode *ino = &s->inodes[i];
		if (!S_ISDIR(ino->mode) || ino->objectid == OBJ_FIRST_FREE)
			continue;
		rc = bi_dir_path(s->fs, s->o->subvol, ino->objectid, &v[n].path);
		if (rc < 0) {
			free(v[n].path.p);
			v[n].path = (struct bi_bytes){ 0 };
		}
		if (rc == 0) {
			v[n].depth = depth_of(&v[n].path);
			v[n++].i = i;
			rc = bi_send_orphan_name(s, ino, &tmp);
		}
		if (rc == 0)
			rc = bi_send_create(s, ino, &tmp);
	}
	qsort(v, n, sizeof(*v), by_depth);
	for (size_t k = 0; rc == 0 && k < n; k++) {
		rc = bi_send_orphan_name(s, &s->inodes[v[k].i], &tmp);
		if (rc == 0)
			rc = bi_send_rename(s, &tmp, &v[k].path);
	}
	for (size_t k = 0; k < n; k++)
		free(v[k].path.p);
	free(v);
	free(tmp.p);
	return rc;
}

static int send_file(struct bi_send *s, const struct btrfsimg_inode *ino)
{
	struct bi_inode_links l = { .subvol = s->o->subvol };
	int rc = bi_inode_links_load(s->fs, &l, ino->objectid);
	if (rc < 0 || l.nlinks == 0) { /* an orphan: no name to give it */
		bi_inode_links_clear(&l);
		return rc;
	}
	struct bi_bytes first = { 0 }, other = { 0 };
	rc = bi_link_path(s->fs, s->o->subvol, &l.links[0], &first);
	if (rc == 0)
		rc = bi_send_create(s, ino, &first);
	for (size_t k = 1; rc == 0 && k < l.nlinks; k++) {
		rc = bi_link_path(s->fs, s->o->subvol, &l.links[k], &other);
		if (rc == 0) {
			bi_cmd_start(&s->st, SEND_C_LINK);
			bi_send_attr_path(&s->st, SEND_A_PATH, &other);
			bi_send_attr_path(&s->st, SEND_A_PATH_LINK, &first);
			rc = bi_cmd_send(&s->st);
		}
	}
	if (rc == 0 && S_ISREG(ino->mode))
		rc = bi_send_survive(s, bi_send_data(s, ino, &first), ino, &first);
	if (rc == 0)
		rc = bi_send_owner_mode(s, ino, &first);
	if (rc == 0)
		rc = bi_send_times(s, ino, &first);
	free(first.p);
	free(other.p);
	bi_inode_links_clear(&l);
	return rc;
}

/* Directories' own attributes, once everything inside them is made. */
static int send_dir_attrs(struct bi_send *s, bool times)
{
	struct bi_bytes path = { 0 };
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < s->ninodes; i++) {
		const struct btrfsimg_inode *ino = &s->inodes[i];
		if (!S_ISDIR(ino->mode))
			continue;
		rc = bi_dir_path(s->fs, s->o->subvol, ino->objectid, &path);
		if (rc == 0)
			rc = times ? bi_send_times(s, ino, &path) : bi_send_owner_mode(s, ino, &path);
	}
	free(path.p);
	return rc;
}

static int full_send(struct bi_send *s)
{
	int rc = btrfsimg_inodes(s->fs, s->o->subvol, collect_inode, s);
	if (rc == 0)
		rc = bi_send_subvol(s);
	if (rc == 0)
		rc = send_dirs(s);
	for (size_t i = 0; rc == 0 && i < s->ninodes; i++)
		if (!S_ISDIR(s->inodes[i].mode)) {
			rc = send_file(s, &s->inodes[i]);
			s->stats->inodes++;
		}
	if (rc == 0)
		rc = send_dir_attrs(s, false);
	if (rc == 0)
		rc = send_dir_attrs(s, true);
	if (rc == 0) {
		bi_cmd_start(&s->st, SEND_C_END);
		rc = bi_cmd_send(&s->st);
	}
	return rc;
}

/* ---------------------------------------------------------------- API */

static int find_subvol(struct bi_send *s, struct btrfsimg_subvol *v, size_t n, uint64_t id,
		       const struct btrfsimg_subvol **out)
{
	*out = btrfsimg_subvol_find(v, n, id);
	if (!*out)
		return bi_err(s->fs, -ENOENT, "send: subvolume %" PRIu64 " not found", id);
	if (!(*out)->path)
		return bi_err(s->fs, -ENOENT,
			      "send: subvolume %" PRIu64 " has no path from the top level", id);
	return 0;
}

int btrfsimg_send(btrfsimg_fs *fs, const struct btrfsimg_send_opts *o, btrfsimg_write_fn write,
		  void *ctx, struct btrfsimg_send_stats *stats)
{
	if (!o || !write)
		return bi_err(fs, -EINVAL, "send: no options or no writer given");
	struct btrfsimg_send_opts mine;
	size_t bad = 0;
	if (bi_take_sized(o, &mine, sizeof(mine), &bad) < 0 && bad == o->size)
		return bi_err(fs, -EINVAL,
			      "send: options size %zu, expect at least %zu (start from "
			      "BTRFSIMG_SEND_OPTS_INIT)",
			      o->size, sizeof(o->size));
	if (bad)
		return bi_err(fs, -EINVAL,
			      "send: options of %zu bytes have byte %zu set, past the %zu this "
			      "library knows",
			      o->size, bad, sizeof(mine));
	o = &mine;
	struct btrfsimg_send_stats dummy;
	struct bi_send s = { .fs = fs, .o = o, .stats = stats ? stats : &dummy };
	memset(s.stats, 0, sizeof(*s.stats));
	uint32_t proto = o->proto ? o->proto : 1;
	if (proto > 2)
		return bi_err(fs, -EINVAL, "send: protocol %u: 1 and 2 are written", proto);
	if ((o->flags & BTRFSIMG_SEND_COMPRESSED_DATA) && proto < 2)
		return bi_err(fs, -EINVAL, "send: compressed data needs protocol 2");
	struct btrfsimg_super_info si;
	int rc = btrfsimg_super(fs, &si);
	if (rc < 0)
		return rc;
	s.sectorsize = si.sectorsize ? si.sectorsize : 4096;
	struct btrfsimg_subvol *v;
	size_t n;
	rc = btrfsimg_subvols(fs, &v, &n);
	if (rc < 0)
		return rc;
	rc = find_subvol(&s, v, n, o->subvol, &s.sv);
	if (rc == 0 && o->parent)
		rc = find_subvol(&s, v, n, o->parent, &s.parent);
	s.sources = calloc(o->nclone_sources + 1, sizeof(*s.sources));
	if (rc == 0 && !s.sources)
		rc = -ENOMEM;
	if (rc == 0 && s.parent)
		s.sources[s.nsources++] = s.parent;
	for (size_t i = 0; rc == 0 && i < o->nclone_sources; i++)
		rc = find_subvol(&s, v, n, o->clone_sources[i], &s.sources[s.nsources++]);
	s.buf = malloc(SEND_WRITE_PIECE);
	if (o->flags & BTRFSIMG_SEND_COMPRESSED_DATA)
		s.enc = malloc(SEND_ENCODED_MAX);
	if (rc == 0 && (!s.buf || (!s.enc && (o->flags & BTRFSIMG_SEND_COMPRESSED_DATA))))
		rc = -ENOMEM;
	if (rc == 0)
		rc = bi_stream_begin(&s.st, proto, write, ctx);
	if (rc == 0)
		rc = o->parent ? bi_send_incremental(&s) : full_send(&s);
	s.stats->bytes = s.st.bytes;
	bi_stream_free(&s.st);
	for (size_t i = 0; i < s.npaths; i++)
		free(s.paths[i].p);
	free(s.paths);
	free(s.ext);
	free(s.inodes);
	free(s.buf);
	free(s.enc);
	free(s.sources);
	btrfsimg_subvols_free(v, n);
	return rc;
}
