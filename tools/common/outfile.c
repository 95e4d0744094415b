// SPDX-License-Identifier: MIT
/*
 * Creating output safely (outfile.h): new files only, no link followed
 * below the destination the user named.
 */
#include "common/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

int out_create(int dirfd, const char *name, mode_t mode)
{
	/* O_EXCL alone already refuses a link, even a dangling one (POSIX
	 * open: "If O_CREAT and O_EXCL are set ... symbolic link ... fail");
	 * O_NOFOLLOW says so to the reader and holds without O_EXCL. */
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	return fd < 0 ? -errno : fd;
}

FILE *out_fcreate(int dirfd, const char *name, mode_t mode)
{
	int fd = out_create(dirfd, name, mode);
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	FILE *f = fdopen(fd, "wb");
	if (!f) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return f;
}

int out_dir(int dirfd, const char *name, mode_t mode, bool create, bool may_exist)
{
	if (create && mkdirat(dirfd, name, mode) < 0 && (errno != EEXIST || !may_exist))
		return -errno;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* A component that names the directory itself or leaves it. */
static bool bad_component(const char *p, size_t len)
{
	return len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.');
}

int out_parent(int root, const char *rel, bool create, const char **leaf)
{
	int dir = dup(root);
	if (dir < 0)
		return -errno;
	const char *p = rel;
	for (const char *slash; (slash = strchr(p, '/')); p = slash + 1) {
		char name[NAME_MAX + 1];
		size_t len = (size_t)(slash - p);
		if (bad_component(p, len) || len > NAME_MAX) {
			close(dir);
			return len > NAME_MAX ? -ENAMETOOLONG : -EINVAL;
		}
		memcpy(name, p, len);
		name[len] = '\0';
		int next = out_dir(dir, name, 0755, create, true);
		close(dir);
		if (next < 0)
			return next;
		dir = next;
	}
	if (bad_component(p, strlen(p))) {
		close(dir);
		return -EINVAL;
	}
	*leaf = p;
	return dir;
}

int out_destdir(const char *path)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int out_owner_mode(int fd, const struct btrfsimg_inode *i, bool as_root)
{
	int rc = 0;
	if (as_root && fchown(fd, i->uid, i->gid) < 0)
		rc = -errno;
	fchmod(fd, i->mode & 07777);
	return rc;
}

void out_times(int fd, const struct btrfsimg_inode *i)
{
	struct timespec ts[2] = { { i->atime.sec, i->atime.nsec }, { i->mtime.sec, i->mtime.nsec } };
	futimens(fd, ts);
}

void out_link_meta(int dirfd, const char *name, const struct btrfsimg_inode *i, bool as_root)
{
	if (as_root)
		fchownat(dirfd, name, i->uid, i->gid, AT_SYMLINK_NOFOLLOW);
	struct timespec ts[2] = { { i->atime.sec, i->atime.nsec }, { i->mtime.sec, i->mtime.nsec } };
	utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW);
}

bool out_clash(int err)
{
	return err == EEXIST || err == ELOOP || err == ENOTDIR;
}

int out_xattr(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen)
{
	int fd = *(int *)ctx;
	char n[256];
	if (nlen >= sizeof(n))
		return 0;
	memcpy(n, name, nlen);
	n[nlen] = '\0';
	fsetxattr(fd, n, value, vlen, 0);
	return 0;
}
