// SPDX-License-Identifier: MIT
/*
 * btrfsimg mount: the filesystem of the images, read-only, through FUSE
 * (libfuse3's low-level interface), with st_ino and readdir's d_ino under
 * one inode-number scheme (--numbers) and everything else as the kernel
 * shows it.
 *
 * FUSE names an inode by a node id of our choosing and shows st_ino and
 * d_ino as we reply them, so the presented numbers can repeat (that is the
 * point of the schemes) while node ids stay unique: a node is
 * (subvolume, objectid), or a stub directory (mount.h). Replies carry long
 * timeouts and keep_cache: the images never change, so the kernel's
 * dentry, attribute and page caches stay valid for the life of the mount.
 * Files are opened by the kernel alone where it can (FUSE_NO_OPEN_SUPPORT,
 * op_open), so a small file costs one READ cold and no request warm.
 *
 * readdirplus replies hold each entry's attributes, so a walk does no
 * lookup of its own. A subvolume or stub entry's d_ino differs from the
 * st_ino of what it names (the child's id under the directory's overlay,
 * against 256 or 2), and the kernel takes d_ino from the attributes of a
 * readdirplus entry: those entries go without attributes (node id 0), and
 * the kernel looks them up on use.
 *
 * Requests are served by several threads, each taking a library handle
 * from a pool opened on the same images (mount_nodes.c); statfs is worked
 * out once, as btrfs_statfs would (mount_statfs.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#ifdef BTRFSIMG_HAVE_FUSE
#define FUSE_USE_VERSION FUSE_MAKE_VERSION(3, 12)
#include <fuse_lowlevel.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <syslog.h>
#include <time.h>

#include "mount/mount.h"

/* Handles opened on the images: FUSE serves from this many threads. */
#define HANDLES 4
/* Seconds the kernel may keep names and attributes: the image cannot change. */
#define FOREVER 1e9

/* The requests counted (-v: said at unmount), so that what reaches the
 * daemon can be seen: a warm walk should need none. */
enum req_kind {
	R_LOOKUP, R_FORGET, R_GETATTR, R_READLINK, R_OPEN, R_READ, R_RELEASE, R_OPENDIR,
	R_READDIR, R_READDIRPLUS, R_RELEASEDIR, R_STATFS, R_GETXATTR, R_LISTXATTR, R_KINDS
};
static const char *const req_names[R_KINDS] = {
	"lookup",  "forget",	"getattr",     "readlink",   "open",   "read",	   "release",
	"opendir", "readdir", "readdirplus", "releasedir", "statfs", "getxattr", "listxattr"
};

struct mnt {
	struct mount_scheme scheme;
	struct mount_pool pool;
	struct mount_nodes nodes;
	struct mount_node root; /* FUSE_ROOT_ID */
	uint32_t sectorsize;
	struct statvfs vfs;
	bool quiet;
	bool syslog; /* in the background: messages to syslog, else stderr */
	pthread_mutex_t say_lock;
	struct timespec say_start; /* the current ratelimit interval */
	unsigned said, suppressed;
	char ra_path[96]; /* the mount's read_ahead_kb in /sys ("": none) */
	atomic_flag ra_done;
	bool no_open; /* the kernel opens files without asking (op_init) */
	atomic_ulong reqs[R_KINDS];
};

/* ------------------------------------------------------------ helpers */

static void ra_once(struct mnt *m);

/* The mount of a request of kind @k, counted (the first request after
 * INIT also sets the readahead: ra_once). */
static struct mnt *mnt_of(fuse_req_t req, enum req_kind k)
{
	struct mnt *m = fuse_req_userdata(req);
	atomic_fetch_add_explicit(&m->reqs[k], 1, memory_order_relaxed);
	ra_once(m);
	return m;
}

static struct mount_node *node_of(struct mnt *m, fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? &m->root : (struct mount_node *)(uintptr_t)ino;
}

static fuse_ino_t ino_of(struct mnt *m, struct mount_node *n)
{
	return n == &m->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)n;
}

static int errno_of(int rc)
{
	return rc == -EUCLEAN ? EIO : -rc;
}

/* Messages: to stderr until the daemon goes to the background (and with
 * -f), then to syslog as "btrfsimg[PID]: ...", at most SAY_BURST in
 * SAY_INTERVAL seconds, as the kernel ratelimits its btrfs messages
 * (DEFAULT_RATELIMIT_INTERVAL, DEFAULT_RATELIMIT_BURST). */
#define SAY_INTERVAL 5
#define SAY_BURST    10

static void say(struct mnt *m, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void say(struct mnt *m, int prio, const char *fmt, ...)
{
	char msg[1536];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&m->say_lock);
	unsigned dropped = 0;
	if (m->said && now.tv_sec - m->say_start.tv_sec >= SAY_INTERVAL) {
		dropped = m->suppressed;
		m->said = m->suppressed = 0;
	}
	if (!m->said)
		m->say_start = now;
	bool out = m->said < SAY_BURST;
	if (out)
		m->said++;
	else
		m->suppressed++;
	const char *level = prio <= LOG_ERR ? "error" : "warning";
	if (dropped && m->syslog)
		syslog(LOG_WARNING, "%u messages suppressed", dropped);
	else if (dropped)
		fprintf(stderr, "btrfsimg: %u messages suppressed\n", dropped);
	if (out && m->syslog)
		syslog(prio, "%s: %s", level, msg);
	else if (out)
		fprintf(stderr, "btrfsimg: %s: %s\n", level, msg);
	pthread_mutex_unlock(&m->say_lock);
}

/* Say why a request on node @n failed with @rc (read with @fs): what it
 * was, the library's message (what and where), the errno the caller
 * gets. A name that is not there is no failure. */
static void say_failed(struct mnt *m, btrfsimg_fs *fs, int rc, const struct mount_node *n,
		       const char *what)
{
	if (rc == -ENOENT || rc == -ENODATA)
		return;
	const char *why =
		rc != -ENOMEM && fs && *btrfsimg_errmsg(fs) ? btrfsimg_errmsg(fs) : strerror(-rc);
	say(m, LOG_ERR, "%s, subvolume %" PRIu64 " inode %" PRIu64 ": %s (%s)", what, n->subvol,
	    n->objectid, why, strerror(errno_of(rc)));
}

/* struct stat of a btrfs inode as btrfs_getattr fills it. */
static void stat_of(const struct mnt *m, const struct btrfsimg_inode *i, uint64_t ino,
		    struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = i->mode;
	st->st_nlink = i->nlink;
	st->st_uid = i->uid;
	st->st_gid = i->gid;
	st->st_rdev = makedev((unsigned)(i->rdev >> 20), (unsigned)(i->rdev & 0xfffff));
	st->st_size = (off_t)i->size;
	st->st_blksize = m->sectorsize;
	uint64_t a = m->sectorsize - 1;
	st->st_blocks = (blkcnt_t)(((i->nbytes + a) & ~a) >> 9);
	st->st_atim = (struct timespec){ i->atime.sec, i->atime.nsec };
	st->st_mtim = (struct timespec){ i->mtime.sec, i->mtime.nsec };
	st->st_ctim = (struct timespec){ i->ctime.sec, i->ctime.nsec };
}

/* The attributes of node @n, read with @fs. */
static int node_stat(struct mnt *m, btrfsimg_fs *fs, const struct mount_node *n, struct stat *st)
{
	struct btrfsimg_inode i;
	bool stub = n->objectid == 2 && n->stub_child;
	int rc = 0;
	if (n->lost)
		btrfsimg_lost_dir_inode(n->subvol, n->objectid, &i);
	else
		rc = stub ? btrfsimg_stub_inode(fs, n->subvol, n->stub_dir, &i)
			  : btrfsimg_inode_get(fs, n->subvol, n->objectid, &i);
	if (rc < 0)
		return rc;
	if (stub) { /* the kernel's new_simple_dir: the time of the lookup */
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		i.mtime = i.ctime = (struct btrfsimg_timespec){ now.tv_sec, (uint32_t)now.tv_nsec };
	}
	stat_of(m, &i, mount_st_ino(&m->scheme, n->subvol, n->objectid, stub), st);
	return 0;
}

/* The node key a directory entry of @dir leads to. */
static struct mount_node key_of(struct mnt *m, const struct mount_node *dir,
				const struct btrfsimg_dirent *e)
{
	struct mount_node k = { .subvol = dir->subvol,
				.parent_ino = mount_st_ino(&m->scheme, dir->subvol, dir->objectid,
							   dir->stub_child != 0) };
	switch (e->kind) {
	case BTRFSIMG_TARGET_SUBVOL:
		k.subvol = e->target_subvol;
		k.objectid = 256;
		break;
	case BTRFSIMG_TARGET_STUB:
		k.objectid = 2;
		k.stub_dir = dir->objectid;
		k.stub_child = e->location_objectid;
		break;
	case BTRFSIMG_TARGET_LOST:
		k.objectid = e->target_objectid;
		k.lost = true;
		break;
	default:
		k.objectid = e->target_objectid;
	}
	return k;
}

static bool is_stub(const struct mount_node *n)
{
	return n->stub_child != 0;
}

/* A stub or a made-up directory: no items of its own (no xattrs, no
 * content, no target). */
static bool no_items(const struct mount_node *n)
{
	return is_stub(n) || n->lost;
}

/* Entry @name of directory @dir: a made-up directory's by the back
 * references; a real one's by lookup, and BTRFSIMG_LOST_FOUND of a
 * subvolume root where a listing shows it (damaged mode). */
static int lookup_of(btrfsimg_fs *fs, const struct mount_node *dir, const char *name,
		     struct btrfsimg_dirent *e)
{
	size_t len = strlen(name);
	if (dir->lost)
		return btrfsimg_lost_lookup(fs, dir->subvol, dir->objectid, name, len, e);
	int rc = btrfsimg_lookup(fs, dir->subvol, dir->objectid, name, len, e);
	if (rc == -ENOENT && strcmp(name, BTRFSIMG_LOST_FOUND) == 0) {
		int lf = btrfsimg_lost_found(fs, dir->subvol, dir->objectid, e);
		rc = lf > 0 ? 0 : lf < 0 ? lf : rc;
	}
	return rc;
}

/* ------------------------------------------------------------ names */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct mnt *m = userdata;
	/* a file's open and release need not reach us: the kernel then keeps
	 * its pages across opens as keep_cache does (FOPEN_KEEP_CACHE is its
	 * default for a filesystem without open, fs/fuse/file.c) */
	m->no_open = conn->capable & FUSE_CAP_NO_OPEN_SUPPORT;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	conn->want &= ~(unsigned)FUSE_CAP_READDIRPLUS_AUTO; /* always plus: walks stat */
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
}

/* Reply the entry @k (its lookup counted) with @st. */
static void reply_entry(fuse_req_t req, struct mnt *m, const struct mount_node *k,
			const struct stat *st)
{
	struct mount_node *n = mount_nodes_get(&m->nodes, k);
	if (!n) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	struct fuse_entry_param e = {
		.ino = ino_of(m, n), .attr = *st, .attr_timeout = FOREVER, .entry_timeout = FOREVER
	};
	if (fuse_reply_entry(req, &e) != 0)
		mount_nodes_forget(&m->nodes, n, 1); /* the kernel never got it */
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mnt *m = mnt_of(req, R_LOOKUP);
	struct mount_node *dir = node_of(m, parent);
	if (is_stub(dir)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	btrfsimg_fs *fs = mount_pool_get(&m->pool);
	struct btrfsimg_dirent e;
	struct stat st;
	/* finds a damaged name by its safe form too, as readdir lists it */
	int rc = lookup_of(fs, dir, name, &e);
	struct mount_node k = { 0 };
	if (rc == 0) {
		k = key_of(m, dir, &e);
		rc = node_stat(m, fs, &k, &st);
	}
	if (rc < 0)
		say_failed(m, fs, rc, dir, "lookup in a directory");
	mount_pool_put(&m->pool, fs);
	if (rc < 0) {
		/* a lookup that finds nothing may be cached as long as the rest */
		struct fuse_entry_param neg = { .entry_timeout = FOREVER };
		if (rc == -ENOENT)
			fuse_reply_entry(req, &neg);
		else
			fuse_reply_err(req, errno_of(rc));
		return;
	}
	reply_entry(req, m, &k, &st);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct mnt *m = mnt_of(req, R_FORGET);
	if (ino != FUSE_ROOT_ID)
		mount_nodes_forget(&m->nodes, node_of(m, ino), nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	struct mnt *m = mnt_of(req, R_FORGET);
	for (size_t i = 0; i < count; i++)
		if (f[i].ino != FUSE_ROOT_ID)
			mount_nodes_forget(&m->nodes, node_of(m, f[i].ino), f[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct mnt *m = mnt_of(req, R_GETATTR);
	btrfsimg_fs *fs = mount_pool_get(&m->pool);
	struct stat st;
	int rc = node_stat(m, fs, node_of(m, ino), &st);
	if (rc < 0)
		say_failed(m, fs, rc, node_of(m, ino), "getattr");
	mount_pool_put(&m->pool, fs);
	if (rc < 0)
		fuse_reply_err(req, errno_of(rc));
	else
		fuse_reply_attr(req, &st, FOREVER);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct mnt *m = mnt_of(req, R_READLINK);
	struct mount_node *n = node_of(m, ino);
	btrfsimg_fs *fs = mount_pool_get(&m->pool);
	uint8_t *t = NULL;
	size_t len = 0;
	int rc = no_items(n) ? -EINVAL : btrfsimg_readlink(fs, n->subvol, n->objectid, &t, &len);
	if (rc < 0 && !no_items(n))
		say_failed(m, fs, rc, n, "readlink");
	mount_pool_put(&m->pool, fs);
	if (rc < 0)
		fuse_reply_err(req, errno_of(rc));
	else
		fuse_reply_readlink(req, (const char *)t); /* NUL-terminated by the library */
	free(t);
}

/* ------------------------------------------------------------ directories */

/* A directory's entries (readdir order, as the kernel's readdir gives
 * them), read at the first readdir of an open: a warm walk, which the
 * kernel serves from its own readdir cache, opens directories but reads
 * none of them here. Names in one buffer. */
struct dent {
	size_t name_off;
	uint16_t name_len;
	uint8_t file_type;
	struct btrfsimg_dirent e; /* name pointers unused */
};

struct dlist {
	struct dent *v;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
	bool loaded;
	int err; /* errno of a listing that stopped early (what came before stays) */
	struct mnt *m;		 /* for the messages of a load */
	uint64_t subvol, dir;	 /* the directory loaded */
};

static int dlist_add(void *ctx, const struct btrfsimg_dirent *e)
{
	struct dlist *d = ctx;
	/* a damaged name under its safe form (btrfsimg_name_safe), as walk
	 * shows it: a '/' in a name would make the kernel refuse the whole
	 * listing, "." and ".." would be dropped or step out */
	char safe[3 * 255 + 2];
	size_t len = btrfsimg_name_safe(e->name, e->name_len, safe, sizeof(safe));
	if (len >= sizeof(safe))
		return 0; /* not from a DIR_INDEX the checks passed (<= 255 bytes) */
	char m[1024];
	if (btrfsimg_name_damage(d->subvol, d->dir, e, m, sizeof(m)))
		say(d->m, LOG_WARNING, "%s", m);
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		struct dent *v = realloc(d->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		d->v = v;
		d->cap = cap;
	}
	if (d->names_len + len + 1 > d->names_cap) {
		size_t cap = d->names_cap ? d->names_cap * 2 : 4096;
		while (cap < d->names_len + len + 1)
			cap *= 2;
		char *p = realloc(d->names, cap);
		if (!p)
			return -ENOMEM;
		d->names = p;
		d->names_cap = cap;
	}
	memcpy(d->names + d->names_len, safe, len + 1);
	d->v[d->n++] = (struct dent){ .name_off = d->names_len,
				      .name_len = (uint16_t)len,
				      .file_type = e->file_type,
				      .e = *e };
	d->names_len += len + 1;
	return 0;
}

static void dlist_free(struct dlist *d)
{
	if (!d)
		return;
	free(d->v);
	free(d->names);
	free(d);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)mnt_of(req, R_OPENDIR);
	struct dlist *d = calloc(1, sizeof(*d));
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	fi->keep_cache = 1;
	fi->cache_readdir = 1;
	if (fuse_reply_open(req, fi) != 0)
		dlist_free(d);
}

/* Read the listing of @dir into @d once (a stub is empty). */
static void dlist_load(struct mnt *m, struct dlist *d, btrfsimg_fs *fs,
		       const struct mount_node *dir)
{
	if (d->loaded)
		return;
	d->loaded = true;
	d->m = m;
	d->subvol = dir->subvol;
	d->dir = dir->objectid;
	int rc = 0;
	if (dir->lost)
		rc = btrfsimg_lost_readdir(fs, dir->subvol, dir->objectid, dlist_add, d);
	else if (!is_stub(dir))
		rc = btrfsimg_readdir(fs, dir->subvol, dir->objectid, dlist_add, d);
	d->err = rc < 0 ? errno_of(rc) : 0;
	if (rc < 0)
		say_failed(m, fs, rc, dir, "readdir");
	struct btrfsimg_dirent lf; /* as the walk lists it: after the real entries */
	if (rc != -ENOMEM && !no_items(dir) &&
	    btrfsimg_lost_found(fs, dir->subvol, dir->objectid, &lf) > 0 && dlist_add(d, &lf) < 0)
		d->err = ENOMEM;
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)mnt_of(req, R_RELEASEDIR);
	dlist_free((struct dlist *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/* S_IF* of a BTRFS_FT_* value (0 for an unknown one: DT_UNKNOWN). */
static mode_t mode_of_ft(uint8_t ft)
{
	static const mode_t m[] = { 0,	     S_IFREG, S_IFDIR,	S_IFCHR,
				    S_IFBLK, S_IFIFO, S_IFSOCK, S_IFLNK };
	return ft < sizeof(m) / sizeof(m[0]) ? m[ft] : 0;
}

struct rd {
	fuse_req_t req;
	struct mnt *m;
	struct mount_node *dir;
	btrfsimg_fs *fs;
	bool plus;
	char *buf;
	size_t size, len;
};

/* Add entry @name at position @off (the offset of the next one); false
 * when it does not fit. With plus and @k, the entry carries the
 * attributes of node @k, counted as a lookup. */
static bool rd_add(struct rd *r, const char *name, uint64_t d_ino, mode_t type,
		   const struct mount_node *k, off_t off, int *err)
{
	char *at = r->buf + r->len;
	size_t room = r->size - r->len;
	if (!r->plus) {
		struct stat st = { .st_ino = d_ino, .st_mode = type };
		size_t need = fuse_add_direntry(r->req, NULL, 0, name, NULL, 0);
		if (need > room)
			return false;
		r->len += fuse_add_direntry(r->req, at, room, name, &st, off);
		return true;
	}
	size_t need = fuse_add_direntry_plus(r->req, NULL, 0, name, NULL, 0);
	if (need > room)
		return false;
	struct fuse_entry_param e = { .attr = { .st_ino = d_ino, .st_mode = type } };
	int rc = k ? node_stat(r->m, r->fs, k, &e.attr) : 0;
	if (rc < 0) {
		/* listed without attributes, as the walk lists it: its lookup
		 * fails, not the rest of the listing */
		say_failed(r->m, r->fs, rc, k, "readdirplus: the attributes of an entry");
		if (rc == -ENOMEM) {
			*err = ENOMEM;
			return false;
		}
		e.attr = (struct stat){ .st_ino = d_ino, .st_mode = type };
	} else if (k) {
		struct mount_node *n = mount_nodes_get(&r->m->nodes, k);
		if (!n) {
			*err = ENOMEM;
			return false;
		}
		e.ino = ino_of(r->m, n);
		e.attr_timeout = e.entry_timeout = FOREVER;
	}
	r->len += fuse_add_direntry_plus(r->req, at, room, name, &e, off);
	return true;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct mnt *m = mnt_of(req, plus ? R_READDIRPLUS : R_READDIR);
	struct dlist *d = (struct dlist *)(uintptr_t)fi->fh;
	struct rd r = { .req = req, .m = m, .dir = node_of(m, ino), .plus = plus, .size = size };
	r.buf = malloc(size ? size : 1);
	if (!r.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	const struct mount_node *dir = r.dir;
	uint64_t self = mount_st_ino(&m->scheme, dir->subvol, dir->objectid, is_stub(dir));
	int err = 0;
	if (plus || !d->loaded)
		r.fs = mount_pool_get(&m->pool);
	dlist_load(m, d, r.fs, dir);
	/* positions: 0 ".", 1 "..", 2 + i the i-th entry; an entry's offset
	 * is the position after it */
	for (uint64_t pos = (uint64_t)off; pos < d->n + 2; pos++) {
		bool ok;
		if (pos == 0)
			ok = rd_add(&r, ".", self, S_IFDIR, NULL, 1, &err);
		else if (pos == 1)
			ok = rd_add(&r, "..", dir->parent_ino, S_IFDIR, NULL, 2, &err);
		else {
			const struct dent *de = &d->v[pos - 2];
			struct mount_node k = key_of(m, dir, &de->e);
			uint64_t d_ino =
				mount_d_ino(&m->scheme, dir->subvol, de->e.location_objectid);
			/* attributes only where d_ino is the target's st_ino (not
			 * where DIR_INDEX and DIR_ITEM disagree: lookup decides) */
			bool attrs = de->e.kind == BTRFSIMG_TARGET_INODE &&
				     de->e.location_objectid == de->e.target_objectid;
			ok = rd_add(&r, d->names + de->name_off, d_ino, mode_of_ft(de->file_type),
				    attrs ? &k : NULL, (off_t)pos + 1, &err);
		}
		if (!ok)
			break;
	}
	if (r.fs)
		mount_pool_put(&m->pool, r.fs);
	if (!err && r.len == 0 && (uint64_t)off < d->n + 3)
		err = d->err; /* the listing ended early: say so at its end */
	if (err && r.len == 0)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, r.buf, r.len);
	free(r.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

/* ------------------------------------------------------------ files */

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	/* ENOSYS from the first open tells a kernel with FUSE_NO_OPEN_SUPPORT
	 * to open files on its own from then on: no open or release round
	 * trip per file. A write open never gets here (the mount is "ro") */
	if (mnt_of(req, R_OPEN)->no_open) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->keep_cache = 1; /* the image cannot change under the page cache */
	fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)fi;
	struct mnt *m = mnt_of(req, R_READ);
	struct mount_node *n = node_of(m, ino);
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	btrfsimg_fs *fs = mount_pool_get(&m->pool);
	size_t got = 0;
	/* a failure fails the whole request: a short reply would end the
	 * file there; the kernel then reads page by page, so exactly the
	 * damaged pages give EIO */
	int rc = no_items(n) ? -EISDIR
			     : btrfsimg_file_read(fs, n->subvol, n->objectid, (uint64_t)off, buf,
						 size, &got);
	if (rc < 0 && rc != -EISDIR) {
		char what[64];
		snprintf(what, sizeof(what), "read of %zu bytes at %jd", size, (intmax_t)off);
		say_failed(m, fs, rc, n, what);
	}
	mount_pool_put(&m->pool, fs);
	if (rc < 0)
		fuse_reply_err(req, errno_of(rc));
	else
		fuse_reply_buf(req, buf, got);
	free(buf);
}

/* Nothing to let go (op_open keeps no state); counted. */
static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	(void)mnt_of(req, R_RELEASE);
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	fuse_reply_statfs(req, &mnt_of(req, R_STATFS)->vfs);
}

/* ------------------------------------------------------------ xattrs */

struct xget {
	const char *name;
	size_t name_len;
	char *value;
	size_t len;
	bool found;
	char *list; /* listxattr: names, each with its NUL */
	size_t list_len, list_cap;
};

static int xattr_find(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *value,
		      size_t vlen)
{
	struct xget *x = ctx;
	if (nlen != x->name_len || memcmp(name, x->name, nlen) != 0)
		return 0;
	x->value = malloc(vlen ? vlen : 1);
	if (!x->value)
		return -ENOMEM;
	memcpy(x->value, value, vlen);
	x->len = vlen;
	x->found = true;
	return 1;
}

static int xattr_name(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *value,
		      size_t vlen)
{
	(void)value;
	(void)vlen;
	struct xget *x = ctx;
	if (x->list_len + nlen + 1 > x->list_cap) {
		size_t cap = x->list_cap ? x->list_cap * 2 : 256;
		while (cap < x->list_len + nlen + 1)
			cap *= 2;
		char *p = realloc(x->list, cap);
		if (!p)
			return -ENOMEM;
		x->list = p;
		x->list_cap = cap;
	}
	memcpy(x->list + x->list_len, name, nlen);
	x->list[x->list_len + nlen] = '\0';
	x->list_len += nlen + 1;
	return 0;
}

/* A value of @len bytes for a buffer of @size (0: ask the length). */
static void reply_sized(fuse_req_t req, const char *v, size_t len, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, v, len);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct mnt *m = mnt_of(req, R_GETXATTR);
	struct mount_node *n = node_of(m, ino);
	struct xget x = { .name = name, .name_len = strlen(name) };
	int rc = 0;
	if (!no_items(n)) {
		btrfsimg_fs *fs = mount_pool_get(&m->pool);
		rc = btrfsimg_xattrs(fs, n->subvol, n->objectid, xattr_find, &x);
		if (rc < 0)
			say_failed(m, fs, rc, n, "getxattr");
		mount_pool_put(&m->pool, fs);
	}
	if (rc < 0)
		fuse_reply_err(req, errno_of(rc));
	else if (!x.found)
		fuse_reply_err(req, ENODATA);
	else
		reply_sized(req, x.value, x.len, size);
	free(x.value);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct mnt *m = mnt_of(req, R_LISTXATTR);
	struct mount_node *n = node_of(m, ino);
	struct xget x = { 0 };
	int rc = 0;
	if (!no_items(n)) {
		btrfsimg_fs *fs = mount_pool_get(&m->pool);
		rc = btrfsimg_xattrs(fs, n->subvol, n->objectid, xattr_name, &x);
		if (rc < 0)
			say_failed(m, fs, rc, n, "listxattr");
		mount_pool_put(&m->pool, fs);
	}
	if (rc < 0)
		fuse_reply_err(req, errno_of(rc));
	else
		reply_sized(req, x.list, x.list_len, size);
	free(x.list);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.readlink = op_readlink,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.statfs = op_statfs,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
};

/* ------------------------------------------------------------ setup */

/* The library's reports: damage worked around (another copy read). */
static void log_damage(void *ctx, bool damage, const char *msg)
{
	struct mnt *m = ctx;
	if (damage && !m->quiet)
		say(m, LOG_WARNING, "%s", msg);
}

/* The mount options: read-only, the kernel checks permissions, the
 * images named in /proc/mounts (',' and '\' escaped for libfuse). Mounted
 * by root, every user may use it as its modes allow, as a kernel mount;
 * otherwise only the user who mounted it (fuse.conf's user_allow_other
 * would be needed). */
static char *mount_opts(const struct cli *c)
{
	const char *img = c->images[0];
	size_t len = strlen(img);
	char *o = malloc(2 * len + 128);
	if (!o)
		return NULL;
	char *p = o + sprintf(o, "ro,default_permissions,%ssubtype=btrfsimg,fsname=",
			      geteuid() == 0 ? "allow_other," : "");
	for (size_t i = 0; i < len; i++) {
		if (img[i] == ',' || img[i] == '\\')
			*p++ = '\\';
		*p++ = img[i];
	}
	*p = '\0';
	return o;
}

/* The root: --subvol, else the default subvolume, as a plain kernel
 * mount shows it (get_default_subvol_objectid, fs/btrfs/super.c). */
static int start_root(struct cli *c, struct mnt *m)
{
	uint64_t sv = 5;
	int rc = c->have_subvol ? (sv = c->subvol, 0) : btrfsimg_default_subvol(c->fs, &sv);
	struct btrfsimg_inode i;
	if (rc == 0)
		rc = btrfsimg_inode_get(c->fs, sv, 256, &i);
	if (rc < 0) {
		const char *why = *btrfsimg_errmsg(c->fs) ? btrfsimg_errmsg(c->fs) : strerror(-rc);
		if (c->have_subvol)
			cli_warn("mount: --subvol %" PRIu64 ": %s", sv, why);
		else
			cli_warn("mount: the default subvolume (%" PRIu64
				 "): %s (--subvol 5 mounts "
				 "the top level)",
				 sv, why);
		return EXIT_FAILED;
	}
	m->root = (struct mount_node){ .subvol = sv, .objectid = 256, .nlookup = 1 };
	m->root.parent_ino = mount_st_ino(&m->scheme, sv, 256, false);
	return EXIT_OK;
}

/* @esc (a mount point as /proc/self/mountinfo escapes it: \NNN octal)
 * equals @path. */
static bool same_escaped(const char *esc, const char *path)
{
	while (*esc && *path) {
		char ch = *esc++;
		if (ch == '\\' && esc[0] >= '0' && esc[0] <= '3' && esc[1] >= '0' &&
		    esc[1] <= '7' && esc[2] >= '0' && esc[2] <= '7') {
			ch = (char)((esc[0] - '0') << 6 | (esc[1] - '0') << 3 | (esc[2] - '0'));
			esc += 3;
		}
		if (ch != *path++)
			return false;
	}
	return !*esc && !*path;
}

/* Read ahead as btrfs does: btrfs_fill_super (fs/btrfs/super.c) raises
 * its readahead to at least 4 MiB, FUSE leaves 128 KiB. The mount's
 * backing device is found in mountinfo (a stat of the mount point would
 * wait for this very daemon); its read_ahead_kb is written once FUSE's
 * INIT is through (INIT sets it back), by the first request after it
 * (ra_once). Where /sys is not writable (not root) the default stays. */
static void btrfs_readahead(struct mnt *m, const char *mountpoint)
{
	char real[4096], line[8192];
	if (!realpath(mountpoint, real))
		return;
	FILE *f = fopen("/proc/self/mountinfo", "r");
	unsigned maj = 0, min = 0;
	bool found = false;
	while (f && fgets(line, sizeof(line), f)) {
		char mnt[4096];
		unsigned a, b;
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &a, &b, mnt) == 3 &&
		    same_escaped(mnt, real)) {
			maj = a;
			min = b;
			found = true; /* the last one: mounted over any before */
		}
	}
	if (f)
		fclose(f);
	if (!found)
		return;
	snprintf(m->ra_path, sizeof(m->ra_path), "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
}

static void ra_once(struct mnt *m)
{
	if (!m->ra_path[0] || atomic_flag_test_and_set(&m->ra_done))
		return;
	FILE *ra = fopen(m->ra_path, "w");
	if (ra) {
		fputs("4096\n", ra);
		fclose(ra);
	}
}

/* -v: the requests served, by kind, once unmounted (stderr with -f, else
 * syslog). */
static void say_requests(struct mnt *m)
{
	char line[512];
	size_t len = 0;
	for (int k = 0; k < R_KINDS; k++)
		len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s %lu", k ? ", " : "",
					req_names[k], atomic_load(&m->reqs[k]));
	if (m->syslog)
		syslog(LOG_INFO, "requests served: %s", line);
	else
		fprintf(stderr, "btrfsimg: mount: requests served: %s\n", line);
}

/* Mount, go to the background once mounted (unless -f), serve until
 * unmounted. */
static int serve(struct cli *c, struct mnt *m)
{
	char *opts = mount_opts(c);
	char *argv[] = { "btrfsimg", "-o", opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct fuse_session *se = opts ? fuse_session_new(&args, &ops, sizeof(ops), m) : NULL;
	int status = EXIT_FAILED;
	if (!se) {
		cli_warn("mount: cannot start a FUSE session");
		goto out;
	}
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, c->mountpoint) != 0) {
		cli_warn("mount: cannot mount on %s (is /dev/fuse there, fusermount3 "
			 "installed, the directory empty?)",
			 c->mountpoint);
		goto out_signals;
	}
	btrfs_readahead(m, c->mountpoint);
	if (fuse_daemonize(c->foreground) != 0) {
		fuse_session_unmount(se);
		goto out_signals;
	}
	if (!c->foreground) { /* stderr is /dev/null now */
		openlog("btrfsimg", LOG_PID, LOG_DAEMON);
		m->syslog = true;
	}
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	if (cfg) {
		fuse_loop_cfg_set_max_threads(cfg, HANDLES);
		fuse_loop_cfg_set_clone_fd(cfg, 0);
	}
	int rc = cfg ? fuse_session_loop_mt(se, cfg) : fuse_session_loop(se);
	fuse_loop_cfg_destroy(cfg);
	fuse_session_unmount(se);
	if (c->verbose)
		say_requests(m);
	status = rc == 0 ? EXIT_OK : EXIT_FAILED;
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out:
	fuse_opt_free_args(&args);
	free(opts);
	return status;
}

static int cmd_mount(struct cli *c)
{
	struct mnt m = { .quiet = c->quiet, .say_lock = PTHREAD_MUTEX_INITIALIZER };
	atomic_flag_clear(&m.ra_done);
	char why[256];
	if (mount_scheme_parse(c->numbers ? c->numbers : "inumbits=56,numdevs=1", &m.scheme, why,
			       sizeof(why)) < 0) { /* checked in mount_check: cannot fail */
		cli_warn("mount: --numbers %s", why);
		return EXIT_USAGE;
	}
	int rc = mount_statfs(c->fs, &m.vfs, &m.sectorsize);
	if (rc < 0)
		return cli_fail(c, rc, "mount");
	if (start_root(c, &m) != EXIT_OK)
		return EXIT_FAILED;
	/* More handles for more threads, opened on the same device files as
	 * they are detected; not when a format was forced, nor through volume
	 * layers whose keys would be asked for or derived again (one handle
	 * then, the requests taking turns) */
	bool layered = c->format || c->volume || c->passphrase_file || c->volume_key_file ||
		       c->generation || /* the pool's handles would read today's tree */
		       c->fsid;	 /* ... or the superblock's filesystem */
	char err[512] = "";
	if (mount_pool_open(&m.pool, c->fs, layered ? 1 : HANDLES, c->images, c->nimages, &c->opts,
			    err, sizeof(err)) < HANDLES &&
	    !layered && c->verbose)
		cli_warn("mount: serving with %d handle%s: %s", m.pool.n, m.pool.n == 1 ? "" : "s",
			 err);
	for (int i = 0; i < m.pool.n; i++)
		btrfsimg_set_log(m.pool.fs[i], log_damage, &m);
	if (mount_nodes_init(&m.nodes) < 0) {
		mount_pool_close(&m.pool);
		return cli_fail(c, -ENOMEM, "mount");
	}
	int status = serve(c, &m);
	mount_nodes_free(&m.nodes);
	mount_pool_close(&m.pool);
	return status;
}

#else /* !BTRFSIMG_HAVE_FUSE */

static int cmd_mount(struct cli *c)
{
	(void)c;
	cli_warn(
		"mount: this btrfsimg was built without FUSE (libfuse3-dev; meson -Dfuse=enabled)");
	return EXIT_FAILED;
}

#endif

static int mount_check(struct cli *c)
{
	if (c->nimages < 2) {
		cli_warn("mount: give IMAGE... MOUNTPOINT");
		return EXIT_USAGE;
	}
	c->mountpoint = c->images[--c->nimages];
	struct stat st;
	if (stat(c->mountpoint, &st) != 0 || !S_ISDIR(st.st_mode)) {
		cli_warn("mount: %s: not a directory (the mount point comes last)", c->mountpoint);
		return EXIT_USAGE;
	}
#ifdef BTRFSIMG_HAVE_FUSE
	struct mount_scheme s;
	char why[256];
	if (c->numbers && mount_scheme_parse(c->numbers, &s, why, sizeof(why)) < 0) {
		cli_warn("mount: --numbers %s", why);
		return EXIT_USAGE;
	}
#endif
	return EXIT_OK;
}

static const struct cmd_option mount_options[] = {
	{ OPT_SUBVOL, "mount subvolume ID as the root (default: the\n"
		      "default subvolume, as a plain kernel mount\n"
		      "shows; 5: the top level)" },
	{ OPT_NUMBERS, NULL },
	{ OPT_FOREGROUND, NULL },
	{ OPT_NO_VERIFY, "do not verify data checksums (no EIO on damaged data)" },
	CMD_IMAGE_OPTIONS, { OPT_GENERATION, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_mount = {
	.name = "mount",
	.summary = "mount the images read-only through FUSE, under an inode-number scheme",
	.args = "IMAGE... MOUNTPOINT",
	.about = "Mount the filesystem of the images read-only on MOUNTPOINT through FUSE,\n"
		 "with every path as the kernel shows it (contents, modes, owners, times\n"
		 "with nanoseconds, links, special files, xattrs), but st_ino and\n"
		 "readdir's d_ino under one inode-number scheme (--numbers), as a kernel\n"
		 "with the 2021 patches would show them. Data that fails its checksum on\n"
		 "every copy reads as EIO. The command returns once the mount is ready\n"
		 "and serves in the background (-f: in the foreground); unmount with\n"
		 "'fusermount3 -u MOUNTPOINT'. The root is the default subvolume, as a\n"
		 "plain kernel mount shows (--subvol: another; 5, the top level). Why a\n"
		 "read failed is said on stderr with -f, else to syslog (daemon).\n"
		 "\n"
		 "FUSE gives a mount one st_dev, so only one-device schemes can be shown:\n"
		 "numdevs=2 and numdevs=many (today's kernel) are refused; inumbits=N\n"
		 "alone means inumbits=N,numdevs=1. Stub\n"
		 "directories keep inode number 2; a subvolume entry's d_ino is the\n"
		 "subvolume id under the directory's overlay (or uniquifier).",
	.examples =
		"btrfsimg mount disk.img /mnt/img\n"
		"btrfsimg mount --numbers nfsd disk.img /mnt/img\n"
		"btrfsimg mount -f --subvol 256 --numbers inumbits=48,numdevs=1 \\\n  disk.img /mnt/img\n"
		"fusermount3 -u /mnt/img",
	.options = mount_options,
	.check = mount_check,
	.run = cmd_mount,
};
