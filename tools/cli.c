// SPDX-License-Identifier: MIT
/*
 * What every command shares: messages on stderr and the exit-status rules
 * (cli.h). Kept apart from btrfsimg.c, the dispatcher, so that the
 * commands and the option parser depend on it and not on main().
 */
#include <stdlib.h>
#include <inttypes.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

void cli_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("btrfsimg: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

int cli_fail(struct cli *c, int rc, const char *what)
{
	return cli_fail_on(c->fs, rc, what);
}

int cli_fail_on(btrfsimg_fs *fs, int rc, const char *what)
{
	const char *msg = fs ? btrfsimg_errmsg(fs) : "";
	if (!*msg)
		msg = strerror(-rc);
	cli_warn("%s: %s", what, msg);
	return EXIT_FAILED;
}

int cli_status(const struct cli *c)
{
	if (c->errors || btrfsimg_damage_count(c->fs))
		return EXIT_DAMAGED;
	return EXIT_OK;
}

/* A subvolume named by id, or by the path of its root from the top level
 * (diff --from/--to, send --subvol/--parent/--clone-src). 0, or an exit
 * status with the reason said. */
int cli_subvol_arg(struct cli *c, const char *opt, const char *arg, uint64_t *id)
{
	return cli_subvol_arg_in(c, c->fs, opt, arg, id);
}

int cli_subvol_arg_in(struct cli *c, btrfsimg_fs *fs, const char *opt, const char *arg,
		      uint64_t *id)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(arg, &end, 10);
	if (*arg >= '0' && *arg <= '9' && !*end && !errno) {
		*id = v;
		return 0;
	}
	struct btrfsimg_dirent d;
	int rc = btrfsimg_path_lookup(fs, 5, arg, &d);
	if (rc < 0)
		return cli_fail_on(fs, rc, opt);
	if (d.target_objectid != 256) {
		cli_warn("%s: %s %s: not a subvolume (inode %" PRIu64 " of subvolume %" PRIu64 ")",
			 c->cmd, opt, arg, d.target_objectid, d.target_subvol);
		return EXIT_USAGE;
	}
	*id = d.target_subvol;
	return 0;
}
