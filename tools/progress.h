/* SPDX-License-Identifier: MIT */
/* A progress line on stderr, only when stderr is a terminal, at most ten
 * updates a second. */
#ifndef BTRFSIMG_TOOLS_PROGRESS_H
#define BTRFSIMG_TOOLS_PROGRESS_H

#include <stdint.h>

void progress_tick(const char *what, uint64_t done);
void progress_done(void);

#endif
