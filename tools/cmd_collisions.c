// SPDX-License-Identifier: MIT
#include "cli.h"
int cmd_collisions(struct cli *c) { (void)c; cli_warn("collisions: not yet"); return EXIT_FAILED; }
