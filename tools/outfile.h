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

#endif
