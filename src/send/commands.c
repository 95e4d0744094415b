// SPDX-License-Identifier: MIT
/* The commands of a send stream (see commands.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "send/commands.h"

#include "base/err.h"
#include "base/ondisk.h"

/* Orphan names tried for one inode before giving up (the top directory
 * would need that many names of the form o<ino>-<gen>-<k>). */
#define ORPHAN_TRIES 1000

/* ------------------------------------------------------------ paths */

/* Whether @name is taken at the top of subvolume @sv. A name that cannot
 * be looked up counts as taken: a name not known free is none to use. */
static bool top_taken(struct bi_send *s, const struct btrfsimg_subvol *sv, const char *name,
		      size_t len)
{
	struct btrfsimg_dirent e;
	return sv && btrfsimg_lookup(s->fs, sv->id, OBJ_FIRST_FREE, name, len, &e) != -ENOENT;
}

/* The kernel's send (gen_unique_name) counts the last number up until the
 * name is free at the top of both trees: a real file may bear an orphan's
 * name, and renaming over it would replace it or fail. */
int bi_send_orphan_name(struct bi_send *s, const struct btrfsimg_inode *ino,
			struct bi_bytes *out)
{
	char n[80];
	for (uint32_t k = 0; k < ORPHAN_TRIES; k++) {
		int len = snprintf(n, sizeof(n), "o%" PRIu64 "-%" PRIu64 "-%" PRIu32, ino->objectid,
				   ino->generation, k);
		if (top_taken(s, s->sv, n, (size_t)len) || top_taken(s, s->parent, n, (size_t)len))
			continue;
		out->len = 0;
		return bi_bytes_put(out, n, (size_t)len);
	}
	return bi_err(s->fs, -EEXIST, "send: inode %" PRIu64 ", orphan name, all %d tried taken "
		      "at the top", ino->objectid, ORPHAN_TRIES);
}

void bi_send_attr_path(struct bi_stream *st, enum bi_send_attr a, const struct bi_bytes *p)
{
	bi_attr(st, a, p->len ? p->p : (const uint8_t *)"", p->len);
}

/* ---------------------------------------------------------- commands */


int bi_send_subvol(struct bi_send *s)
{
	const char *name = strrchr(s->sv->path, '/');
	name = name ? name + 1 : s->sv->path;
	bi_cmd_start(&s->st, s->parent ? SEND_C_SNAPSHOT : SEND_C_SUBVOL);
	bi_attr(&s->st, SEND_A_PATH, name, strlen(name));
	bi_attr(&s->st, SEND_A_UUID, s->sv->uuid, 16);
	bi_attr_u64(&s->st, SEND_A_CTRANSID, s->sv->ctransid);
	if (s->parent) {
		bi_attr(&s->st, SEND_A_CLONE_UUID, s->parent->uuid, 16);
		bi_attr_u64(&s->st, SEND_A_CLONE_CTRANSID, s->parent->ctransid);
	}
	return bi_cmd_send(&s->st);
}

int bi_send_rename(struct bi_send *s, const struct bi_bytes *from, const struct bi_bytes *to)
{
	bi_cmd_start(&s->st, SEND_C_RENAME);
	bi_send_attr_path(&s->st, SEND_A_PATH, from);
	bi_send_attr_path(&s->st, SEND_A_PATH_TO, to);
	return bi_cmd_send(&s->st);
}

/* The userspace dev_t mknod takes (new_encode_dev) from the kernel's
 * internal one the inode item stores (major << 20 | minor). */
static uint64_t user_rdev(uint64_t stored)
{
	uint64_t major = stored >> 20, minor = stored & 0xfffff;
	return (minor & 0xff) | (major << 8) | ((minor & ~0xffull) << 12);
}

int bi_send_create(struct bi_send *s, const struct btrfsimg_inode *ino,
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
	bi_send_attr_path(&s->st, SEND_A_PATH, path);
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
	struct bi_send *s;
	const struct bi_bytes *path;
};

static int send_xattr(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *value,
		      size_t vlen)
{
	struct xattr_ctx *x = ctx;
	struct bi_stream *st = &x->s->st;
	bi_cmd_start(st, SEND_C_SET_XATTR);
	bi_send_attr_path(st, SEND_A_PATH, x->path);
	bi_attr(st, SEND_A_XATTR_NAME, name, nlen);
	bi_attr(st, SEND_A_XATTR_DATA, value, vlen);
	return bi_cmd_send(st);
}

/* A synthesized inode (a lost root directory, files/orphans.h) has no
 * owner, mode or times to send: a stream must not make them up. */
static int refuse_made_up(struct bi_send *s, const struct btrfsimg_inode *ino)
{
	return bi_err(s->fs, -EUCLEAN,
		      "send: subvolume %" PRIu64 " inode %" PRIu64 " is synthesized (its inode "
		      "item is lost): its owner, mode and times are unknown",
		      ino->subvol, ino->objectid);
}

int bi_send_owner_mode(struct bi_send *s, const struct btrfsimg_inode *ino,
			   const struct bi_bytes *path)
{
	if (ino->synthesized)
		return refuse_made_up(s, ino);
	struct xattr_ctx x = { s, path };
	int rc = btrfsimg_xattrs(s->fs, s->o->subvol, ino->objectid, send_xattr, &x);
	if (rc < 0)
		return rc;
	bi_cmd_start(&s->st, SEND_C_CHOWN);
	bi_send_attr_path(&s->st, SEND_A_PATH, path);
	bi_attr_u64(&s->st, SEND_A_UID, ino->uid);
	bi_attr_u64(&s->st, SEND_A_GID, ino->gid);
	rc = bi_cmd_send(&s->st);
	if (rc < 0 || S_ISLNK(ino->mode)) /* receive's chmod would follow it */
		return rc;
	bi_cmd_start(&s->st, SEND_C_CHMOD);
	bi_send_attr_path(&s->st, SEND_A_PATH, path);
	bi_attr_u64(&s->st, SEND_A_MODE, ino->mode & 07777);
	return bi_cmd_send(&s->st);
}

int bi_send_times(struct bi_send *s, const struct btrfsimg_inode *ino,
		      const struct bi_bytes *path)
{
	if (ino->synthesized)
		return refuse_made_up(s, ino);
	bi_cmd_start(&s->st, SEND_C_UTIMES);
	bi_send_attr_path(&s->st, SEND_A_PATH, path);
	bi_attr_time(&s->st, SEND_A_ATIME, ino->atime.sec, ino->atime.nsec);
	bi_attr_time(&s->st, SEND_A_MTIME, ino->mtime.sec, ino->mtime.nsec);
	bi_attr_time(&s->st, SEND_A_CTIME, ino->ctime.sec, ino->ctime.nsec);
	return bi_cmd_send(&s->st);
}

/* -------------------------------------------------------------- data */

int bi_send_write(struct bi_send *s, const struct btrfsimg_inode *ino,
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
		bi_send_attr_path(&s->st, SEND_A_PATH, path);
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
static const struct sent_extent *sent_before(const struct bi_send *s, uint64_t disk_bytenr,
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

static int send_clone(struct bi_send *s, const struct bi_bytes *path, uint64_t off, uint64_t len,
		      const struct sent_extent *src, uint64_t pos)
{
	bi_cmd_start(&s->st, SEND_C_CLONE);
	bi_send_attr_path(&s->st, SEND_A_PATH, path);
	bi_attr_u64(&s->st, SEND_A_FILE_OFFSET, off);
	bi_attr_u64(&s->st, SEND_A_CLONE_LEN, len);
	bi_attr(&s->st, SEND_A_CLONE_UUID, s->sv->uuid, 16);
	bi_attr_u64(&s->st, SEND_A_CLONE_CTRANSID, s->sv->ctransid);
	bi_send_attr_path(&s->st, SEND_A_CLONE_PATH, &s->paths[src->path]);
	bi_attr_u64(&s->st, SEND_A_CLONE_OFFSET, src->file_offset + (pos - src->pos));
	int rc = bi_cmd_send(&s->st);
	if (rc == 0)
		s->stats->clones++;
	return rc;
}

static int remember_path(struct bi_send *s, const struct bi_bytes *path, size_t *idx)
{
	if (s->npaths && s->paths[s->npaths - 1].len == path->len &&
	    memcmp(s->paths[s->npaths - 1].p, path->p, path->len) == 0) {
		*idx = s->npaths - 1;
		return 0;
	}
	int rc = bi_grow((void **)&s->paths, &s->pathcap, s->npaths + 1, sizeof(*s->paths));
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

static int remember_extent(struct bi_send *s, const struct btrfsimg_extent *e, uint64_t pos,
			   const struct bi_bytes *path)
{
	size_t idx;
	int rc = remember_path(s, path, &idx);
	if (rc == 0)
		rc = bi_grow((void **)&s->ext, &s->extcap, s->next + 1, sizeof(*s->ext));
	if (rc == 0)
		s->ext[s->next++] = (struct sent_extent){ e->disk_bytenr, pos, e->length,
							  e->file_offset, idx };
	return rc;
}

/* Where a clone of @len bytes from @src (at disk position @pos) to
 * @off of @path may go: both ends on sector boundaries (an unaligned
 * length is refused by the receiving kernel unless the source range ends
 * at the source's EOF and the destination's at its own, which the sizes
 * of the moment decide: its tail is written instead, as the kernel's
 * send does for the cases btrfs/189 and 322 test), and not a range of the
 * same file that overlaps it. */
static bool clonable(const struct bi_send *s, const struct bi_bytes *path, uint64_t off,
		     uint64_t len, const struct sent_extent *src, uint64_t pos)
{
	uint64_t from = src->file_offset + (pos - src->pos);
	const struct bi_bytes *sp = &s->paths[src->path];
	bool same = sp->len == path->len && memcmp(sp->p, path->p, path->len) == 0;
	return len && off % s->sectorsize == 0 && from % s->sectorsize == 0 &&
	       !(same && from < off + len && off < from + len);
}

/* The encoded-write compression of a btrfs compression type
 * (BTRFS_ENCODED_IO_COMPRESSION_*: zlib 1, zstd 2, lzo 3 + log2(sector /
 * 4 KiB)), or 0 when there is none. */
static uint32_t encoded_compression(const struct bi_send *s, int btrfs_type)
{
	uint32_t lzo = 3;
	for (uint32_t sz = 4096; sz < s->sectorsize && lzo < 7; sz <<= 1)
		lzo++;
	return btrfs_type == 1 ? 1 : btrfs_type == 3 ? 2 : btrfs_type == 2 ? lzo : 0;
}

/* A compressed extent as it is on disk (protocol 2): the receiving
 * kernel writes it without decompressing (BTRFS_IOC_ENCODED_WRITE). */
static int send_encoded(struct bi_send *s, const struct bi_bytes *path,
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
	bi_send_attr_path(&s->st, SEND_A_PATH, path);
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

struct parent_src {
	const struct bi_send *s;
	uint64_t logical, len;
	const struct btrfsimg_subvol *found;
	uint64_t objectid, offset;
};

static const struct btrfsimg_subvol *source_of(const struct bi_send *s, uint64_t subvol)
{
	for (size_t i = 0; i < s->nsources; i++)
		if (s->sources[i]->id == subvol)
			return s->sources[i];
	return NULL;
}

static int parent_owner(void *ctx, const struct btrfsimg_owner *o)
{
	struct parent_src *p = ctx;
	if (o->kind != BTRFSIMG_OWNER_FILE || !source_of(p->s, o->subvol) ||
	    o->extent_type != BTRFSIMG_EXTENT_REGULAR || o->logical > p->logical ||
	    o->logical + o->length < p->logical + p->len)
		return 0;
	p->found = source_of(p->s, o->subvol);
	p->objectid = o->objectid;
	p->offset = o->file_offset + (p->logical - o->logical);
	return 1;
}

/* Bytes the parent snapshot or a clone source already has in one of its
 * files, as the receiving side holds it: a clone from there. */
static int clone_from_parent(struct bi_send *s, const struct btrfsimg_inode *ino,
			     const struct bi_bytes *path, const struct btrfsimg_extent *e,
			     bool *done)
{
	*done = false;
	uint64_t len = e->length - e->length % s->sectorsize; /* a tail past it is written */
	if (!s->nsources || e->file_offset % s->sectorsize || !len)
		return 0;
	struct parent_src p = { s, e->logical, len, NULL, 0, 0 };
	int rc = btrfsimg_owners_logical(s->fs, e->logical, e->length, parent_owner, &p);
	if (rc < 0 || !p.found || p.offset % s->sectorsize)
		return rc < 0 ? rc : 0;
	struct bi_inode_links l = { .subvol = p.found->id };
	struct bi_bytes src = { 0 };
	rc = bi_inode_links_load(s->fs, &l, p.objectid);
	/* not past its EOF (an extent's unused end): the receiver refuses that */
	bool usable = rc == 0 && l.nlinks && p.offset + len <= l.ino.size;
	if (usable)
		rc = bi_link_path(s->fs, p.found->id, &l.links[0], &src);
	if (usable && rc == 0) {
		bi_cmd_start(&s->st, SEND_C_CLONE);
		bi_send_attr_path(&s->st, SEND_A_PATH, path);
		bi_attr_u64(&s->st, SEND_A_FILE_OFFSET, e->file_offset);
		bi_attr_u64(&s->st, SEND_A_CLONE_LEN, len);
		bi_attr(&s->st, SEND_A_CLONE_UUID, p.found->uuid, 16);
		bi_attr_u64(&s->st, SEND_A_CLONE_CTRANSID, p.found->ctransid);
		bi_send_attr_path(&s->st, SEND_A_CLONE_PATH, &src);
		bi_attr_u64(&s->st, SEND_A_CLONE_OFFSET, p.offset);
		rc = bi_cmd_send(&s->st);
		if (rc == 0 && len < e->length)
			rc = bi_send_write(s, ino, path, e->file_offset + len,
					   e->file_offset + e->length);
		*done = rc == 0;
		if (rc == 0)
			s->stats->clones++;
	}
	free(src.p);
	bi_inode_links_clear(&l);
	return rc;
}

int bi_send_extent(struct bi_send *s, const struct btrfsimg_inode *ino,
		   const struct bi_bytes *path, const struct btrfsimg_extent *e)
{
	if (e->type == BTRFSIMG_EXTENT_HOLE || e->type == BTRFSIMG_EXTENT_PREALLOC)
		return 0; /* left unwritten: a hole on the receiving side too */
	if (e->type != BTRFSIMG_EXTENT_REGULAR || e->disk_bytenr == 0)
		return bi_send_write(s, ino, path, e->file_offset, e->file_offset + e->length);
	uint64_t pos = e->extent_offset + (e->file_offset - e->item_offset);
	const struct sent_extent *src = sent_before(s, e->disk_bytenr, pos, e->length);
	uint64_t len = e->length - e->length % s->sectorsize;
	if (src && clonable(s, path, e->file_offset, len, src, pos)) {
		int rc = send_clone(s, path, e->file_offset, len, src, pos);
		if (rc == 0 && len < e->length)
			rc = bi_send_write(s, ino, path, e->file_offset + len,
					   e->file_offset + e->length);
		return rc;
	}
	bool done;
	int rc = clone_from_parent(s, ino, path, e, &done);
	if (rc < 0 || done)
		return rc;
	rc = s->enc && e->compression && encoded_compression(s, e->compression)
			 ? send_encoded(s, path, e, pos)
			 : bi_send_write(s, ino, path, e->file_offset, e->file_offset + e->length);
	return rc < 0 ? rc : remember_extent(s, e, pos, path);
}

int bi_send_survive(struct bi_send *s, int rc, const struct btrfsimg_inode *ino,
		    const struct bi_bytes *path)
{
	if (rc >= 0 || s->st.err || rc == -ENOMEM)
		return rc;
	bi_damage(s->fs, "send: %.*s (inode %" PRIu64 "): data not all in the stream, nor its "
		  "size: %s", (int)(path->len < 4096 ? path->len : 4096),
		  path->len ? (const char *)path->p : "", ino->objectid, btrfsimg_errmsg(s->fs));
	s->stats->damaged++;
	return 0;
}

int bi_send_data(struct bi_send *s, const struct btrfsimg_inode *ino,
		     const struct bi_bytes *path)
{
	btrfsimg_extents *it;
	int rc = btrfsimg_extents_open(s->fs, s->o->subvol, ino->objectid, 0, &it);
	if (rc < 0)
		return rc;
	const struct btrfsimg_extent *e;
	while ((rc = btrfsimg_extents_next(it, &e)) > 0) {
		rc = bi_send_extent(s, ino, path, e);
		if (rc < 0)
			break;
	}
	btrfsimg_extents_close(it);
	if (rc < 0)
		return rc;
	bi_cmd_start(&s->st, SEND_C_TRUNCATE);
	bi_send_attr_path(&s->st, SEND_A_PATH, path);
	bi_attr_u64(&s->st, SEND_A_SIZE, ino->size);
	return bi_cmd_send(&s->st);
}

