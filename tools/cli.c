// SPDX-License-Identifier: MIT
/*
 * What every command shares: messages on stderr and the exit-status rules
 * (cli.h). Kept apart from btrfsimg.c, the dispatcher, so that the
 * commands and the option parser depend on it and not on main().
 */
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
	const char *msg = c->fs ? btrfsimg_errmsg(c->fs) : "";
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
