/* SPDX-License-Identifier: MIT */
/* Files and directories the command line creates: extract's tree,
 * extract --deleted's versions and manifest, unallocated's OUT, and the
 * outputs still to come (send -f's stream, DFXML) go through here, so one
 * rule holds for all of them (STYLE.md rule 15):
 *   - a file is created new, O_CREAT|O_EXCL|O_NOFOLLOW: whatever is at its
 *     name already (a file, a directory, a link, a dangling link) makes
 *     the creation fail with -EEXIST; nothing is truncated or followed;
 *   - names are resolved one component at a time, relative to a directory
 *     descriptor, each opened O_DIRECTORY|O_NOFOLLOW: no link, whether
 *     extracted a moment ago or planted in the destination beforehand, can
 *     send a later write outside it.
 * Only the destination the user named (DESTDIR, OUT) is taken as given,
 * links in it included: it is theirs to point where they like. */
#ifndef BTRFSIMG_TOOLS_OUTFILE_H
#define BTRFSIMG_TOOLS_OUTFILE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "btrfsimg.h"

/* Create the new file @name for writing with @mode (less the umask):
 * one component under @dirfd, or, with AT_FDCWD, a path the user named.
 * Returns the descriptor (the caller closes it), or -errno. */
int out_create(int dirfd, const char *name, mode_t mode);

/* out_create as a stdio stream ("wb", the caller fcloses it); NULL with
 * errno set. */
FILE *out_fcreate(int dirfd, const char *name, mode_t mode);

/* Directory @name (one component) under @dirfd, opened O_NOFOLLOW: created
 * with @mode when @create (then one already there is -EEXIST unless
 * @may_exist), else only opened. Returns the descriptor, or -errno
 * (-ELOOP or -ENOTDIR for a link or a file there). */
int out_dir(int dirfd, const char *name, mode_t mode, bool create, bool may_exist);

/* The directory holding @rel ("a/b/leaf", relative, no empty, "." or
 * ".." components) under @root, each component through out_dir (created,
 * mode 0755 less the umask, when @create; existing ones used). Returns
 * its descriptor (the caller closes it) with *leaf at @rel's last
 * component, or -errno. */
int out_parent(int root, const char *rel, bool create, const char **leaf);

/* The destination directory the user named: created (0755 less the
 * umask) if need be, then opened. Returns the descriptor, or -errno. */
int out_destdir(const char *path);

/* Whether creating failed because the place is taken in the destination
 * (a file, a directory or a link there already: EEXIST; a link or file
 * where a directory goes: ELOOP, ENOTDIR): not damage in the image, a
 * clash, which extract says (OUT_CLASH_SAID after the error) and exits 2
 * for, having written the rest. */
#define OUT_CLASH_SAID " (its place in DESTDIR is taken: not overwritten; not damage in the image)"
bool out_clash(int err);

/* An inode's metadata on what the command just created, the way extract
 * restores it (and extract --deleted, from a version's inode item): owner
 * (only when @as_root: else the user's own) and permission bits, then
 * (after the contents and any xattrs, which would change them) atime and
 * mtime. out_owner_mode returns 0, or -errno when the owner could not be
 * set; a mode or time that cannot be set leaves the file as created. */
int out_owner_mode(int fd, const struct btrfsimg_inode *i, bool as_root);
void out_times(int fd, const struct btrfsimg_inode *i);
/* A btrfsimg_xattr_fn: the xattr on the file whose descriptor @ctx (an
 * int *) points to, best effort (a namespace, such as trusted. for a
 * user, may be refused); always 0. */
int out_xattr(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen);
/* The same for the symlink @name under @dirfd (owner and times of the link
 * itself, never of what it points to; a link has no mode of its own). */
void out_link_meta(int dirfd, const char *name, const struct btrfsimg_inode *i, bool as_root);

#endif
