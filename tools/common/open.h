/* SPDX-License-Identifier: MIT */
/* The command line's one open: what main() opens before a command runs,
 * and what a command that reads a second generation of the same images
 * (diff --from-generation) opens beside it, through the same steps. */
#ifndef BTRFSIMG_TOOLS_OPEN_H
#define BTRFSIMG_TOOLS_OPEN_H

#include <stdint.h>

#include "cli.h"

/* Open @c's images with @c's options (keys, volume, format, flags, log)
 * at @generation (0: the superblock's). EXIT_OK with *@out the open handle
 * (the caller frees it), or EXIT_FAILED with the reason said and *@out
 * NULL. Says on stderr which root an older generation is read from. */
int cli_open_at(struct cli *c, uint64_t generation, btrfsimg_fs **out);

#endif
