/* SPDX-License-Identifier: MIT */
/* A progress line on stderr, only when stderr is a terminal, at most ten
 * updates a second: "paths: 120000, 42% of about 285000 inodes, 0:13 left".
 * The total is what the library can give cheaply: for every subvolume
 * walked, its highest inode number less 255 (btrfsimg_highest_objectid),
 * an upper bound of its inodes that is exact when none was deleted.
 * Without a total only the count is shown. */
#ifndef BTRFSIMG_TOOLS_PROGRESS_H
#define BTRFSIMG_TOOLS_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "btrfsimg.h"

/* Set the total to the inodes of subvolume @subvol (0: every subvolume,
 * deleted ones included, as btrfsimg_inodes() lists them) and, with
 * @nested, of the reachable subvolumes below it (what a walk from its root
 * reaches); start the clock. Does nothing when stderr is no terminal. */
void progress_inodes_total(btrfsimg_fs *fs, uint64_t subvol, bool nested);

/* @count things so far (the number shown) and @done inodes' worth of the
 * total (a walk adds 1/nlink per path: hard links add up to one inode). */
void progress_tick(const char *what, uint64_t count, double done);
/* For a pass in subvolume-id then objectid order: done is the position. */
void progress_tick_at(const char *what, uint64_t count, uint64_t subvol, uint64_t objectid);
/* Bytes: "verify: 120 of 512 MiB, 23%, 95 MiB/s, 0:13 left" (a device
 * scan). */
void progress_bytes(const char *what, uint64_t done, uint64_t all);
void progress_done(void);

#endif
