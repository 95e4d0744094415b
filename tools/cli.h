/* SPDX-License-Identifier: MIT */
/* Shared state of the btrfsimg command line: parsed options, the open
 * filesystem, and the exit-status rules (0 ok, 1 results despite damage,
 * 2 nothing readable). */
#ifndef BTRFSIMG_TOOLS_CLI_H
#define BTRFSIMG_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "btrfsimg.h"

enum { EXIT_OK = 0, EXIT_DAMAGED = 1, EXIT_FAILED = 2 };

struct cli {
	const char *cmd;
	bool json, hash, verbose, quiet;
	struct btrfsimg_open_opts opts;
	bool have_subvol;
	uint64_t subvol;
	const char *path;
	const char *inode;	/* "SUBVOL:OBJECTID" */
	int inumbits;		/* -1: not given */
	bool have_mount_subvol;
	uint64_t mount_subvol;
	char **images;
	int nimages;
	const char *destdir;
	btrfsimg_fs *fs;
	uint64_t errors;	/* per-item failures that did not stop the command */
};

/* Print "btrfsimg: <msg>" on stderr. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Report a library failure with the handle's message; returns EXIT_FAILED. */
int cli_fail(struct cli *c, int rc, const char *what);
/* The exit status for a command that produced its results. */
int cli_status(const struct cli *c);

int cmd_super(struct cli *c);
int cmd_subvols(struct cli *c);
int cmd_walk(struct cli *c);
int cmd_cat(struct cli *c);
int cmd_extract(struct cli *c);
int cmd_bodyfile(struct cli *c);
int cmd_inodes(struct cli *c);
int cmd_collisions(struct cli *c);

#endif
