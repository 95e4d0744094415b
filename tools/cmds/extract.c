// SPDX-License-Identifier: MIT
/*
 * btrfsimg extract: restore a tree into DESTDIR.
 *
 * Safety: every object is created relative to a directory file descriptor
 * this command created itself, through outfile.h (new files only,
 * O_CREAT|O_EXCL|O_NOFOLLOW; directories opened O_NOFOLLOW; a hard link's
 * first name reached one component at a time, O_NOFOLLOW) or with calls
 * that never follow a link at the new name (symlinkat, mknodat, linkat,
 * and *at(AT_SYMLINK_NOFOLLOW) for owners, modes and times), and a name
 * from the image that cannot be a component (empty, "." or "..", a '/' or
 * NUL in it) is written under its safe form (btrfsimg_name_safe), as walk
 * shows it: nothing is ever written outside DESTDIR, whatever the image
 * says or DESTDIR held before, and an existing file is never overwritten.
 *
 * Contents are written extent by extent with holes where the file has
 * none or reads zeros (whole 4 KiB blocks), hard links become hard links, and modes, owners (as root),
 * xattrs and times are applied after the contents (directories' after
 * their children, so creating children does not disturb their mtime).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cli.h"
#include "common/outfile.h"
#include "common/recovered.h"
#include "common/visit.h"

#define CHUNK (1u << 20)
#define DEPTH_MAX 4097

struct link_rec {
	uint64_t subvol, objectid;
	char *relpath;
};

struct ex_ctx {
	struct cli *c;
	int *dirfd;		/* per depth: the directory created for that level */
	bool as_root;
	uint8_t *buf;
	struct link_rec *links;
	size_t nlinks, caplinks;
	char start_name[256];	/* a start that is not a directory: its name */
	uint64_t entries, bytes;	/* created, for the summary */
	uint64_t clashes;	/* entries whose place in DESTDIR was taken */
};

static void ex_warn(struct ex_ctx *x, const struct visit_node *n, const char *what, int err)
{
	bool clash = out_clash(err);
	const char *why = clash ? OUT_CLASH_SAID : "";
	if (n->depth == 0)
		cli_warn("extract: %s: %s: %s%s", x->start_name, what, strerror(err), why);
	else
		cli_warn("extract: %.*s: %s: %s%s", (int)n->path_len, (const char *)n->path, what,
			 strerror(err), why);
	if (clash)
		x->clashes++;
	else
		x->c->errors++;
}

static bool safe_name(const uint8_t *name, size_t len)
{
	if (len == 0 || memchr(name, '/', len) || memchr(name, '\0', len))
		return false;
	return !(len == 1 && name[0] == '.') && !(len == 2 && name[0] == '.' && name[1] == '.');
}

static void apply_times(int dirfd, const char *name, const struct btrfsimg_inode *i)
{
	struct timespec ts[2] = { { i->atime.sec, i->atime.nsec }, { i->mtime.sec, i->mtime.nsec } };
	utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW);
}

static void apply_meta(struct ex_ctx *x, int fd, const struct btrfsimg_inode *i, bool xattrs,
		       uint64_t subvol, uint64_t objectid)
{
	if (out_owner_mode(fd, i, x->as_root) < 0)
		x->c->errors++;
	if (xattrs)
		btrfsimg_xattrs(x->c->fs, subvol, objectid, out_xattr, &fd);
	out_times(fd, i);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/* File bytes [start, end), which extents give, 1 MiB at a time; whole
 * 4 KiB blocks of zeros among them are left as holes. */
static int write_range(struct ex_ctx *x, int fd, const struct visit_node *n, uint64_t start,
		       uint64_t end)
{
	for (uint64_t off = start; off < end;) {
		size_t got = 0, want = end - off < CHUNK ? (size_t)(end - off) : CHUNK;
		int rc = btrfsimg_file_read(x->c->fs, n->subvol, n->objectid, off, x->buf, want,
					    &got);
		if (rc < 0)
			return rc;
		if (got == 0)
			break;
		for (size_t b = 0; b < got; b += 4096) {
			size_t len = got - b < 4096 ? got - b : 4096;
			if (all_zero(x->buf + b, len))
				continue; /* leave a hole */
			if (pwrite(fd, x->buf + b, len, (off_t)(off + b)) != (ssize_t)len)
				return -errno;
		}
		off += got;
	}
	return 0;
}

/*
 * Contents extent by extent, as SEEK_DATA would find them: holes are never
 * read, each is stepped over at once, and ftruncate sets the length, so a
 * sparse file costs its data, not its size. A size past the bound (16
 * bytes per byte of the devices, btrfsimg_file_size_bound) is cut at the
 * end of the data, at most the bound, and reported: an inode claiming
 * 2^62 bytes over a 5-byte inline extent is not made a 4 EiB file. *length is the
 * length given to the file.
 */
static int write_contents(struct ex_ctx *x, int fd, const struct visit_node *n,
			  uint64_t *length)
{
	uint64_t stop, data_end, off = 0, start, end;
	int rc = btrfsimg_file_length(x->c->fs, n->subvol, n->objectid, &stop, &data_end);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		cli_warn("extract: %.*s: subvol=%" PRIu64 " inode=%" PRIu64 " size=%" PRIu64
			 " is more than %" PRIu64 " (16 bytes per byte of the devices) and its"
			 " data ends at byte %" PRIu64 ": written up to byte %" PRIu64 "; the"
			 " rest, under a size that may be forged, left out",
			 (int)(n->depth ? n->path_len : strlen(x->start_name)),
			 n->depth ? (const char *)n->path : x->start_name, n->subvol, n->objectid,
			 n->inode.size, btrfsimg_file_size_bound(x->c->fs), data_end, stop);
		x->c->errors++;
	}
	while (off < stop && (rc = btrfsimg_file_data(x->c->fs, n->subvol, n->objectid, off,
						      &start, &end)) == 0 && start < stop) {
		if ((rc = write_range(x, fd, n, start, end < stop ? end : stop)) < 0)
			return rc;
		off = end;
	}
	if (rc < 0 && rc != -ENXIO)
		return rc;
	*length = stop;
	return ftruncate(fd, (off_t)*length) < 0 ? -errno : 0;
}

static const struct link_rec *find_link(struct ex_ctx *x, uint64_t subvol, uint64_t obj)
{
	for (size_t i = 0; i < x->nlinks; i++)
		if (x->links[i].subvol == subvol && x->links[i].objectid == obj)
			return &x->links[i];
	return NULL;
}

static void remember_link(struct ex_ctx *x, const struct visit_node *n)
{
	if (x->nlinks == x->caplinks) {
		size_t cap = x->caplinks ? x->caplinks * 2 : 64;
		void *v = realloc(x->links, cap * sizeof(*x->links));
		if (!v)
			return;
		x->links = v;
		x->caplinks = cap;
	}
	char *p = strndup((const char *)n->path, n->path_len);
	if (p)
		x->links[x->nlinks++] = (struct link_rec){ n->subvol, n->objectid, p };
}

static int make_file(struct ex_ctx *x, const struct visit_node *n, int dirfd, const char *name)
{
	const struct link_rec *l = n->inode.nlink > 1 ? find_link(x, n->subvol, n->objectid) : NULL;
	if (l) {
		const char *leaf;
		int from = out_parent(x->dirfd[0], l->relpath, false, &leaf);
		if (from < 0 || linkat(from, leaf, dirfd, name, 0) < 0)
			ex_warn(x, n, "link", from < 0 ? -from : errno);
		else
			x->entries++;
		if (from >= 0)
			close(from);
		return 0;
	}
	int fd = out_create(dirfd, name, 0600);
	if (fd < 0) {
		ex_warn(x, n, "create", -fd);
		return 0;
	}
	x->entries++;
	uint64_t length = 0;
	int rc = write_contents(x, fd, n, &length);
	if (rc < 0) {
		cli_warn("extract: %.*s: %s", (int)(n->depth ? n->path_len : strlen(x->start_name)),
			 n->depth ? (const char *)n->path : x->start_name, btrfsimg_errmsg(x->c->fs));
		x->c->errors++;
	} else {
		x->bytes += length;
	}
	apply_meta(x, fd, &n->inode, true, n->subvol, n->objectid);
	close(fd);
	if (n->inode.nlink > 1 && n->depth > 0)
		remember_link(x, n);
	return 0;
}

static int make_symlink(struct ex_ctx *x, const struct visit_node *n, int dirfd, const char *name)
{
	uint8_t *t = NULL;
	size_t len = 0;
	if (btrfsimg_readlink(x->c->fs, n->subvol, n->objectid, &t, &len) < 0) {
		ex_warn(x, n, "readlink", EIO);
		return 0;
	}
	char *target = strndup((const char *)t, len);
	free(t);
	if (!target || symlinkat(target, dirfd, name) < 0) {
		ex_warn(x, n, "symlink", errno);
	} else {
		x->entries++;
		out_link_meta(dirfd, name, &n->inode, x->as_root); /* ours only, not what was there */
	}
	free(target);
	return 0;
}

static int make_special(struct ex_ctx *x, const struct visit_node *n, int dirfd, const char *name)
{
	const struct btrfsimg_inode *i = &n->inode;
	dev_t dev = makedev((unsigned)(i->rdev >> 20), (unsigned)(i->rdev & 0xfffff));
	if (mknodat(dirfd, name, (i->mode & S_IFMT) | 0600, dev) < 0) {
		ex_warn(x, n, "mknod", errno);
		return 0;
	}
	x->entries++;
	if (x->as_root)
		fchownat(dirfd, name, i->uid, i->gid, AT_SYMLINK_NOFOLLOW);
	fchmodat(dirfd, name, i->mode & 07777, AT_SYMLINK_NOFOLLOW);
	apply_times(dirfd, name, i);
	return 0;
}

static int make_dir(struct ex_ctx *x, const struct visit_node *n, int dirfd, const char *name)
{
	int fd = out_dir(dirfd, name, 0700, true, false);
	if (fd < 0) {
		ex_warn(x, n, "mkdir", -fd);
		return 1; /* do not descend */
	}
	x->entries++;
	if (n->stub) {
		/* empty, and visit_tree does not descend into it: finish it now */
		apply_meta(x, fd, &n->inode, false, n->subvol, n->objectid);
		close(fd);
		return 1;
	}
	x->dirfd[n->depth] = fd;
	return 0;
}

static int make_entry(struct ex_ctx *x, const struct visit_node *n, int dirfd, const char *name)
{
	switch (n->inode.mode & S_IFMT) {
	case S_IFDIR: return make_dir(x, n, dirfd, name);
	case S_IFREG: return make_file(x, n, dirfd, name);
	case S_IFLNK: return make_symlink(x, n, dirfd, name);
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK: return make_special(x, n, dirfd, name);
	default: ex_warn(x, n, "unknown file type", EINVAL); return 0;
	}
}

static int first_name(void *ctx, uint64_t parent, uint64_t index, const uint8_t *name,
		      size_t len)
{
	char *out = ctx;
	(void)parent;
	(void)index;
	btrfsimg_name_safe(name, len, out, 256); /* cut at 255, never a '/' */
	return 1;
}

/* The name a start that is not a directory gets in DESTDIR: the last
 * component of --path, or the inode's first name (--inode). */
static void name_start(struct ex_ctx *x, const struct visit_node *n)
{
	const char *path = x->c->path;
	if (path) {
		size_t len = strlen(path);
		while (len > 1 && path[len - 1] == '/')
			len--;
		size_t at = len;
		while (at > 0 && path[at - 1] != '/')
			at--;
		snprintf(x->start_name, sizeof(x->start_name), "%.*s", (int)(len - at), path + at);
		return;
	}
	x->start_name[0] = '\0';
	btrfsimg_inode_names(x->c->fs, n->subvol, n->objectid, first_name, x->start_name);
	if (!x->start_name[0])
		snprintf(x->start_name, sizeof(x->start_name), "%" PRIu64 ":%" PRIu64, n->subvol,
			 n->objectid);
}

/* A file, symlink or special file as the start: that one entry. */
static int make_start(struct ex_ctx *x, const struct visit_node *n)
{
	name_start(x, n);
	if (!safe_name((const uint8_t *)x->start_name, strlen(x->start_name))) {
		ex_warn(x, n, "unsafe name refused", EINVAL);
		return 1;
	}
	make_entry(x, n, x->dirfd[0], x->start_name);
	return 1;
}

static int on_node(void *ctx, const struct visit_node *n)
{
	struct ex_ctx *x = ctx;
	if (n->depth == 0)
		return S_ISDIR(n->inode.mode) ? 0 : make_start(x, n);
	if (n->depth >= DEPTH_MAX)
		return 1;
	/* a damaged name (visit_tree said so) under its safe form, the one
	 * its path shows: one level, inside its directory */
	char name[3 * 255 + 2];
	if (btrfsimg_name_safe(n->ent.name, n->ent.name_len, name, sizeof(name)) >= sizeof(name) ||
	    !safe_name((const uint8_t *)name, strlen(name))) {
		ex_warn(x, n, "unsafe name refused", EINVAL);
		return 1;
	}
	return make_entry(x, n, x->dirfd[n->depth - 1], name);
}

static int after_dir(void *ctx, const struct visit_node *n)
{
	struct ex_ctx *x = ctx;
	/* DESTDIR stands for the start directory: its mode, owner, xattrs
	 * and times too, last (as rsync -a SRC/ DEST/ does) */
	if (n->depth == 0 && x->dirfd[0] >= 0 && S_ISDIR(n->inode.mode)) {
		apply_meta(x, x->dirfd[0], &n->inode, !n->stub, n->subvol, n->objectid);
		return 0;
	}
	if (n->depth == 0 || n->depth >= DEPTH_MAX || x->dirfd[n->depth] < 0)
		return 0;
	int fd = x->dirfd[n->depth];
	apply_meta(x, fd, &n->inode, !n->stub, n->subvol, n->objectid);
	close(fd);
	x->dirfd[n->depth] = -1;
	return 0;
}

static void summary(const struct ex_ctx *x, int status)
{
	uint64_t errors = x->c->errors + (status == EXIT_FAILED && !x->c->errors && !x->clashes);
	char clash[96] = "";
	if (x->clashes)
		snprintf(clash, sizeof(clash),
			 ", %" PRIu64 " not written: their place in DESTDIR taken (not damage)",
			 x->clashes);
	cli_warn("extract: %" PRIu64 " %s (%" PRIu64 " bytes of file contents) into '%s', %"
		 PRIu64 " %s%s", x->entries, x->entries == 1 ? "entry" : "entries", x->bytes,
		 x->c->destdir, errors, errors == 1 ? "error" : "errors", clash);
}

static int cmd_extract(struct cli *c)
{
	if (c->only_deleted)
		return rec_extract(c);
	struct ex_ctx x = { .c = c, .as_root = geteuid() == 0 };
	x.dirfd = malloc(DEPTH_MAX * sizeof(int));
	x.buf = malloc(CHUNK);
	if (!x.dirfd || !x.buf) {
		free(x.dirfd);
		free(x.buf);
		return cli_fail(c, -ENOMEM, "extract");
	}
	for (int i = 0; i < DEPTH_MAX; i++)
		x.dirfd[i] = -1;
	x.dirfd[0] = out_destdir(c->destdir);
	int rc = 0;
	if (x.dirfd[0] < 0) {
		cli_warn("extract: %s: %s", c->destdir, strerror(-x.dirfd[0]));
		rc = x.dirfd[0];
	} else {
		struct visit_opts o = { .subvol = cli_start_subvol(c), .path = c->path,
					.objectid = c->inode_objectid, .post_dirs = true,
					.post = after_dir };
		rc = visit_tree(c->fs, &o, on_node, &x, &c->errors);
		close(x.dirfd[0]);
	}
	for (size_t i = 0; i < x.nlinks; i++)
		free(x.links[i].relpath);
	free(x.links);
	free(x.dirfd);
	free(x.buf);
	/* a taken place is the destination's doing, not the image's: refused */
	int status = x.clashes ? EXIT_FAILED : cli_status(c);
	if (rc < 0)
		status = *btrfsimg_errmsg(c->fs) ? cli_fail(c, rc, "extract") : EXIT_FAILED;
	summary(&x, status);
	return status;
}

static int extract_check(struct cli *c)
{
	if (c->nimages < 2) {
		cli_warn("extract: give IMAGE... DESTDIR (the last argument is the directory to "
			 "extract into)");
		return EXIT_USAGE;
	}
	c->destdir = c->images[--c->nimages];
	struct stat st;
	if (stat(c->destdir, &st) == 0 && !S_ISDIR(st.st_mode)) {
		cli_warn("extract: DESTDIR '%s' is not a directory (the last argument is the "
			 "directory to extract into)", c->destdir);
		return EXIT_USAGE;
	}
	if (c->only_deleted && (c->path || c->inode || c->have_subvol)) {
		cli_warn("extract: --deleted takes every recovered version: give it without "
			 "--path, --inode or --subvol");
		return EXIT_USAGE;
	}
	if (c->intact_only && !c->only_deleted) {
		cli_warn("extract: --intact-only chooses among recovered versions: give it with "
			 "--deleted");
		return EXIT_USAGE;
	}
	if (c->only_deleted && rec_extract_check(c))
		return EXIT_FAILED;
	return cli_inode_alone(c);
}

static const struct cmd_option extract_options[] = {
	{ OPT_SUBVOL, NULL },
	{ OPT_PATH, "extract path P: a directory's tree into DESTDIR, or\n"
		    "that one file, symlink or special file" },
	{ OPT_INODE, "extract inode S:O (subvolume S, objectid O): a\n"
		     "directory's tree, or that one object (its first name)" },
	{ OPT_NO_VERIFY, "do not verify data checksums; with --deleted: ranges\n"
			 "whose checksums fail written as on disk, not zeros" },
	{ OPT_DELETED, "every recovered version ('btrfsimg deleted') at its\n"
		       "path under DESTDIR (the best of a path there, the\n"
		       "others PATH.~ID~: see the man page), and a\n"
		       "JSON-lines manifest DESTDIR/" REC_MANIFEST "\n"
		       "(refused if there already; a version of that name\n"
		       "goes to NAME.~ID~)" },
	{ OPT_INTACT_ONLY, "with --deleted: only the versions whose every byte\n"
			   "was read (intact, verified or not)" },
	CMD_IMAGE_OPTIONS, { OPT_GENERATION, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_extract = {
	.name = "extract",
	.summary = "restore a tree into a directory: IMAGE... DESTDIR",
	.args = "IMAGE... DESTDIR",
	.about = "Restore a tree (the top level, --subvol, --path or --inode) into DESTDIR,\n"
		 "the last argument (created if need be): contents with holes, hard links,\n"
		 "symlinks, special files, modes, owners (as root), xattrs, times. Nothing\n"
		 "is written outside DESTDIR, no link found in it is followed and no\n"
		 "existing file is overwritten. Ends with a summary on stderr: entries\n"
		 "created, bytes of file contents, errors.",
	.examples = "btrfsimg extract disk.img /tmp/restore\n"
		    "btrfsimg extract --subvol 256 --path home/alice disk.img /tmp/alice\n"
		    "btrfsimg extract --path etc/fstab disk.img /tmp/out\n"
		    "btrfsimg extract --inode 256:257 disk.img /tmp/out\n"
		    "btrfsimg extract --deleted disk.img /tmp/recovered",
	.options = extract_options,
	.check = extract_check,
	.run = cmd_extract,
};
