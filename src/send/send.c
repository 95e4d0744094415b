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
#include "send/paths.h"
#include "send/stream.h"

struct sent_extent {
	uint64_t disk_bytenr;
	uint64_t pos, len;	/* bytes [pos, pos + len) of the disk extent's data */
	uint64_t file_offset;	/* where they are in the file sent */
	size_t path;		/* index in send::paths */
};

struct send {
	btrfsimg_fs *fs;
	const struct btrfsimg_send_opts *o;
	struct bi_stream st;
	const struct btrfsimg_subvol *sv;
	struct btrfsimg_inode *inodes;
	size_t ninodes, cap;
	struct sent_extent *ext;
	size_t next, extcap;
	struct bi_bytes *paths;	/* the files clone sources are read from */
	size_t npaths, pathcap;
	uint32_t sectorsize;
	uint8_t *buf;
	uint8_t *enc;		/* a compressed extent's bytes (--compressed-data) */
	struct btrfsimg_send_stats *stats;
};

/* ------------------------------------------------------------ paths */

static int orphan_name(const struct btrfsimg_inode *ino, struct bi_bytes *out)
{
	char n[64];
	int len = snprintf(n, sizeof(n), "o%" PRIu64 "-%" PRIu64 "-0", ino->objectid,
			   ino->generation);
	out->len = 0;
	return bi_bytes_put(out, n, (size_t)len);
}

static void attr_path(struct bi_stream *st, enum bi_send_attr a, const struct bi_bytes *p)
{
	bi_attr(st, a, p->len ? p->p : (const uint8_t *)"", p->len);
}

/* ---------------------------------------------------------- commands */


static int send_subvol(struct send *s)
{
	const char *name = strrchr(s->sv->path, '/');
	name = name ? name + 1 : s->sv->path;
	bi_cmd_start(&s->st, SEND_C_SUBVOL);
	bi_attr(&s->st, SEND_A_PATH, name, strlen(name));
	bi_attr(&s->st, SEND_A_UUID, s->sv->uuid, 16);
	bi_attr_u64(&s->st, SEND_A_CTRANSID, s->sv->ctransid);
	return bi_cmd_send(&s->st);
}

static int send_rename(struct send *s, const struct bi_bytes *from, const struct bi_bytes *to)
{
	bi_cmd_start(&s->st, SEND_C_RENAME);
	attr_path(&s->st, SEND_A_PATH, from);
	attr_path(&s->st, SEND_A_PATH_TO, to);
	return bi_cmd_send(&s->st);
}

/* The userspace dev_t mknod takes (new_encode_dev) from the kernel's
 * internal one the inode item stores (major << 20 | minor). */
static uint64_t user_rdev(uint64_t stored)
{
	uint64_t major = stored >> 20, minor = stored & 0xfffff;
	return (minor & 0xff) | (major << 8) | ((minor & ~0xffull) << 12);
}

static int send_create(struct send *s, const struct btrfsimg_inode *ino,
		       const struct bi_bytes *path)
{
	uint32_t type = ino->mode & S_IFMT;
	enum bi_send_cmd cmd = type == S_IFREG ? SEND_C_MKFILE : type == S_IFDIR ? SEND_C_MKDIR
			       : type == S_IFLNK ? SEND_C_SYMLINK : type == S_IFIFO ? SEND_C_MKFIFO
			       : type == S_IFSOCK ? SEND_C_MKSOCK : SEND_C_MKNOD;
	uint8_t *target = NULL;
	size_t tlen = 0;
	if (cmd == SEND_C_SYMLINK) {
		int rc = btrfsimg_readlink(s->fs, s->o->subvol, ino->objectid, &target, &tlen);
		if (rc < 0)
			return rc;
	}
	bi_cmd_start(&s->st, cmd);
	attr_path(&s->st, SEND_A_PATH, path);
	bi_attr_u64(&s->st, SEND_A_INO, ino->objectid);
	if (cmd == SEND_C_SYMLINK)
		bi_attr(&s->st, SEND_A_PATH_LINK, target, tlen);
	if (cmd == SEND_C_MKNOD || cmd == SEND_C_MKFIFO || cmd == SEND_C_MKSOCK) {
		bi_attr_u64(&s->st, SEND_A_MODE, ino->mode);
		bi_attr_u64(&s->st, SEND_A_RDEV, user_rdev(ino->rdev));
	}
	free(target);
	return bi_cmd_send(&s->st);
}

struct xattr_ctx {
	struct send *s;
	const struct bi_bytes *path;
};

static int send_xattr(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *value,
		      size_t vlen)
{
	struct xattr_ctx *x = ctx;
	struct bi_stream *st = &x->s->st;
	bi_cmd_start(st, SEND_C_SET_XATTR);
	attr_path(st, SEND_A_PATH, x->path);
	bi_attr(st, SEND_A_XATTR_NAME, name, nlen);
	bi_attr(st, SEND_A_XATTR_DATA, value, vlen);
	return bi_cmd_send(st);
}

static int send_owner_mode(struct send *s, const struct btrfsimg_inode *ino,
			   const struct bi_bytes *path)
{
	struct xattr_ctx x = { s, path };
	int rc = btrfsimg_xattrs(s->fs, s->o->subvol, ino->objectid, send_xattr, &x);
	if (rc < 0)
		return rc;
	bi_cmd_start(&s->st, SEND_C_CHOWN);
	attr_path(&s->st, SEND_A_PATH, path);
	bi_attr_u64(&s->st, SEND_A_UID, ino->uid);
	bi_attr_u64(&s->st, SEND_A_GID, ino->gid);
	rc = bi_cmd_send(&s->st);
	if (rc < 0 || S_ISLNK(ino->mode)) /* receive's chmod would follow it */
		return rc;
	bi_cmd_start(&s->st, SEND_C_CHMOD);
	attr_path(&s->st, SEND_A_PATH, path);
	bi_attr_u64(&s->st, SEND_A_MODE, ino->mode & 07777);
	return bi_cmd_send(&s->st);
}

static int send_times(struct send *s, const struct btrfsimg_inode *ino,
		      const struct bi_bytes *path)
{
	bi_cmd_start(&s->st, SEND_C_UTIMES);
	attr_path(&s->st, SEND_A_PATH, path);
	bi_attr_time(&s->st, SEND_A_ATIME, ino->atime.sec, ino->atime.nsec);
	bi_attr_time(&s->st, SEND_A_MTIME, ino->mtime.sec, ino->mtime.nsec);
	bi_attr_time(&s->st, SEND_A_CTIME, ino->ctime.sec, ino->ctime.nsec);
	return bi_cmd_send(&s->st);
}

/* -------------------------------------------------------------- data */

static int send_write(struct send *s, const struct btrfsimg_inode *ino,
		      const struct bi_bytes *path, uint64_t start, uint64_t end)
{
	for (uint64_t off = start; off < end;) {
		size_t want = end - off < SEND_WRITE_PIECE ? (size_t)(end - off) : SEND_WRITE_PIECE;
		size_t got = 0;
		int rc = btrfsimg_file_read(s->fs, s->o->subvol, ino->objectid, off, s->buf, want,
					    &got);
		if (rc < 0)
			return rc;
		if (got == 0)
			break;
		bi_cmd_start(&s->st, SEND_C_WRITE);
		attr_path(&s->st, SEND_A_PATH, path);
		bi_attr_u64(&s->st, SEND_A_FILE_OFFSET, off);
		bi_attr_data(&s->st, s->buf, got);
		rc = bi_cmd_send(&s->st);
		if (rc < 0)
			return rc;
		s->stats->data_bytes += got;
		off += got;
	}
	return 0;
}

/* A range of this extent already sent, as a whole: where, or NULL. */
static const struct sent_extent *sent_before(const struct send *s, uint64_t disk_bytenr,
					     uint64_t pos, uint64_t len)
{
	for (size_t i = s->next; i-- > 0;) {
		const struct sent_extent *e = &s->ext[i];
		if (e->disk_bytenr == disk_bytenr && pos >= e->pos && pos - e->pos <= e->len &&
		    len <= e->len - (pos - e->pos))
			return e;
	}
	return NULL;
}

static int send_clone(struct send *s, const struct bi_bytes *path, uint64_t off, uint64_t len,
		      const struct sent_extent *src, uint64_t pos)
{
	bi_cmd_start(&s->st, SEND_C_CLONE);
	attr_path(&s->st, SEND_A_PATH, path);
	bi_attr_u64(&s->st, SEND_A_FILE_OFFSET, off);
	bi_attr_u64(&s->st, SEND_A_CLONE_LEN, len);
	bi_attr(&s->st, SEND_A_CLONE_UUID, s->sv->uuid, 16);
	bi_attr_u64(&s->st, SEND_A_CLONE_CTRANSID, s->sv->ctransid);
	attr_path(&s->st, SEND_A_CLONE_PATH, &s->paths[src->path]);
	bi_attr_u64(&s->st, SEND_A_CLONE_OFFSET, src->file_offset + (pos - src->pos));
	int rc = bi_cmd_send(&s->st);
	if (rc == 0)
		s->stats->clones++;
	return rc;
}

static int remember_path(struct send *s, const struct bi_bytes *path, size_t *idx)
{
	if (s->npaths && s->paths[s->npaths - 1].len == path->len &&
	    memcmp(s->paths[s->npaths - 1].p, path->p, path->len) == 0) {
		*idx = s->npaths - 1;
		return 0;
	}
	int rc = bi_send_grow((void **)&s->paths, &s->pathcap, s->npaths + 1, sizeof(*s->paths));
	if (rc < 0)
		return rc;
	struct bi_bytes *p = &s->paths[s->npaths];
	*p = (struct bi_bytes){ 0 };
	rc = bi_bytes_put(p, path->p, path->len);
	if (rc < 0)
		return rc;
	*idx = s->npaths++;
	return 0;
}

static int remember_extent(struct send *s, const struct btrfsimg_extent *e, uint64_t pos,
			   const struct bi_bytes *path)
{
	size_t idx;
	int rc = remember_path(s, path, &idx);
	if (rc == 0)
		rc = bi_send_grow((void **)&s->ext, &s->extcap, s->next + 1, sizeof(*s->ext));
	if (rc == 0)
		s->ext[s->next++] = (struct sent_extent){ e->disk_bytenr, pos, e->length,
							  e->file_offset, idx };
	return rc;
}

/* Clonable: whole sectors, or the file's last bytes. */
static bool clonable(const struct send *s, const struct btrfsimg_inode *ino,
		     const struct btrfsimg_extent *e)
{
	return e->file_offset % s->sectorsize == 0 &&
	       (e->length % s->sectorsize == 0 || e->file_offset + e->length == ino->size);
}

/* The encoded-write compression of a btrfs compression type
 * (BTRFS_ENCODED_IO_COMPRESSION_*: zlib 1, zstd 2, lzo 3 + log2(sector /
 * 4 KiB)), or 0 when there is none. */
static uint32_t encoded_compression(const struct send *s, int btrfs_type)
{
	uint32_t lzo = 3;
	for (uint32_t sz = 4096; sz < s->sectorsize && lzo < 7; sz <<= 1)
		lzo++;
	return btrfs_type == 1 ? 1 : btrfs_type == 3 ? 2 : btrfs_type == 2 ? lzo : 0;
}

/* A compressed extent as it is on disk (protocol 2): the receiving
 * kernel writes it without decompressing (BTRFS_IOC_ENCODED_WRITE). */
static int send_encoded(struct send *s, const struct bi_bytes *path,
			const struct btrfsimg_extent *e, uint64_t pos)
{
	if (e->disk_length > SEND_ENCODED_MAX)
		return bi_err(s->fs, -EUCLEAN,
			      "send: compressed extent at logical %" PRIu64 " holds %" PRIu64
			      " bytes on disk, more than a compressed extent can (%u)",
			      e->logical, e->disk_length, SEND_ENCODED_MAX);
	int rc = btrfsimg_read_logical(s->fs, e->logical, s->enc, (size_t)e->disk_length);
	if (rc < 0)
		return rc;
	bi_cmd_start(&s->st, SEND_C_ENCODED_WRITE);
	attr_path(&s->st, SEND_A_PATH, path);
	bi_attr_u64(&s->st, SEND_A_FILE_OFFSET, e->file_offset);
	bi_attr_u64(&s->st, SEND_A_UNENCODED_FILE_LEN, e->length);
	bi_attr_u64(&s->st, SEND_A_UNENCODED_LEN, e->ram_bytes);
	bi_attr_u64(&s->st, SEND_A_UNENCODED_OFFSET, pos);
	bi_attr_u32(&s->st, SEND_A_COMPRESSION, encoded_compression(s, e->compression));
	bi_attr_u32(&s->st, SEND_A_ENCRYPTION, 0);
	bi_attr_data(&s->st, s->enc, (size_t)e->disk_length);
	rc = bi_cmd_send(&s->st);
	if (rc == 0)
		s->stats->encoded_bytes += e->disk_length;
	return rc;
}

static int send_extent(struct send *s, const struct btrfsimg_inode *ino,
		       const struct bi_bytes *path, const struct btrfsimg_extent *e)
{
	if (e->type == BTRFSIMG_EXTENT_HOLE || e->type == BTRFSIMG_EXTENT_PREALLOC)
		return 0; /* left unwritten: a hole on the receiving side too */
	if (e->type != BTRFSIMG_EXTENT_REGULAR || e->disk_bytenr == 0)
		return send_write(s, ino, path, e->file_offset, e->file_offset + e->length);
	uint64_t pos = e->extent_offset + (e->file_offset - e->item_offset);
	const struct sent_extent *src = sent_before(s, e->disk_bytenr, pos, e->length);
	if (src && clonable(s, ino, e) && src->file_offset % s->sectorsize == 0)
		return send_clone(s, path, e->file_offset, e->length, src, pos);
	int rc = s->enc && e->compression && encoded_compression(s, e->compression)
			 ? send_encoded(s, path, e, pos)
			 : send_write(s, ino, path, e->file_offset, e->file_offset + e->length);
	return rc < 0 ? rc : remember_extent(s, e, pos, path);
}

static int send_data(struct send *s, const struct btrfsimg_inode *ino,
		     const struct bi_bytes *path)
{
	btrfsimg_extents *it;
	int rc = btrfsimg_extents_open(s->fs, s->o->subvol, ino->objectid, 0, &it);
	if (rc < 0)
		return rc;
	const struct btrfsimg_extent *e;
	while ((rc = btrfsimg_extents_next(it, &e)) > 0) {
		rc = send_extent(s, ino, path, e);
		if (rc < 0)
			break;
	}
	btrfsimg_extents_close(it);
	if (rc < 0)
		return rc;
	bi_cmd_start(&s->st, SEND_C_TRUNCATE);
	attr_path(&s->st, SEND_A_PATH, path);
	bi_attr_u64(&s->st, SEND_A_SIZE, ino->size);
	return bi_cmd_send(&s->st);
}

/* ------------------------------------------------------------ inodes */

static int collect_inode(void *ctx, const struct btrfsimg_inode_entry *e)
{
	struct send *s = ctx;
	int rc = bi_send_grow((void **)&s->inodes, &s->cap, s->ninodes + 1, sizeof(*s->inodes));
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
static int send_dirs(struct send *s)
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
		if (rc == 0) {
			v[n].depth = depth_of(&v[n].path);
			v[n++].i = i;
			rc = orphan_name(ino, &tmp);
		}
		if (rc == 0)
			rc = send_create(s, ino, &tmp);
	}
	qsort(v, n, sizeof(*v), by_depth);
	for (size_t k = 0; rc == 0 && k < n; k++) {
		rc = orphan_name(&s->inodes[v[k].i], &tmp);
		if (rc == 0)
			rc = send_rename(s, &tmp, &v[k].path);
	}
	for (size_t k = 0; k < n; k++)
		free(v[k].path.p);
	free(v);
	free(tmp.p);
	return rc;
}

static int send_file(struct send *s, const struct btrfsimg_inode *ino)
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
		rc = send_create(s, ino, &first);
	for (size_t k = 1; rc == 0 && k < l.nlinks; k++) {
		rc = bi_link_path(s->fs, s->o->subvol, &l.links[k], &other);
		if (rc == 0) {
			bi_cmd_start(&s->st, SEND_C_LINK);
			attr_path(&s->st, SEND_A_PATH, &other);
			attr_path(&s->st, SEND_A_PATH_LINK, &first);
			rc = bi_cmd_send(&s->st);
		}
	}
	if (rc == 0 && S_ISREG(ino->mode))
		rc = send_data(s, ino, &first);
	if (rc == 0)
		rc = send_owner_mode(s, ino, &first);
	if (rc == 0)
		rc = send_times(s, ino, &first);
	free(first.p);
	free(other.p);
	bi_inode_links_clear(&l);
	return rc;
}

/* Directories' own attributes, once everything inside them is made. */
static int send_dir_attrs(struct send *s, bool times)
{
	struct bi_bytes path = { 0 };
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < s->ninodes; i++) {
		const struct btrfsimg_inode *ino = &s->inodes[i];
		if (!S_ISDIR(ino->mode))
			continue;
		rc = bi_dir_path(s->fs, s->o->subvol, ino->objectid, &path);
		if (rc == 0)
			rc = times ? send_times(s, ino, &path) : send_owner_mode(s, ino, &path);
	}
	free(path.p);
	return rc;
}

static int full_send(struct send *s)
{
	int rc = btrfsimg_inodes(s->fs, s->o->subvol, collect_inode, s);
	if (rc == 0)
		rc = send_subvol(s);
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

static int find_subvol(struct send *s, struct btrfsimg_subvol *v, size_t n, uint64_t id,
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
	struct btrfsimg_send_stats dummy;
	struct send s = { .fs = fs, .o = o, .stats = stats ? stats : &dummy };
	memset(s.stats, 0, sizeof(*s.stats));
	uint32_t proto = o->proto ? o->proto : 1;
	if (proto > 2)
		return bi_err(fs, -EINVAL, "send: protocol %u: 1 and 2 are written", proto);
	if (o->parent)
		return bi_err(fs, -EOPNOTSUPP, "send: --parent: incremental streams are not written yet");
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
	s.buf = malloc(SEND_WRITE_PIECE);
	if (o->flags & BTRFSIMG_SEND_COMPRESSED_DATA)
		s.enc = malloc(SEND_ENCODED_MAX);
	if (rc == 0 && (!s.buf || (!s.enc && (o->flags & BTRFSIMG_SEND_COMPRESSED_DATA))))
		rc = -ENOMEM;
	if (rc == 0)
		rc = bi_stream_begin(&s.st, proto, write, ctx);
	if (rc == 0)
		rc = full_send(&s);
	s.stats->bytes = s.st.bytes;
	bi_stream_free(&s.st);
	for (size_t i = 0; i < s.npaths; i++)
		free(s.paths[i].p);
	free(s.paths);
	free(s.ext);
	free(s.inodes);
	free(s.buf);
	free(s.enc);
	btrfsimg_subvols_free(v, n);
	return rc;
}
