// SPDX-License-Identifier: MIT
/*
 * btrfsimg: read btrfs filesystems straight from image files.
 * A thin layer over libbtrfsimg: find the command, let it parse its
 * options (options.c), open the filesystem, run it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common/keys.h"
#include "common/progress.h"
#include "common/suggest.h"

static const struct cmd_struct *const commands[] = {
	&cmd_struct_super, &cmd_struct_subvols, &cmd_struct_walk, &cmd_struct_cat,
	&cmd_struct_extract, &cmd_struct_bodyfile, &cmd_struct_inodes, &cmd_struct_collisions,
	&cmd_struct_partitions, &cmd_struct_mount,
	&cmd_struct_history, &cmd_struct_deleted,
	&cmd_struct_layers, &cmd_struct_verify_image,
	&cmd_struct_verify, &cmd_struct_unallocated,
	&cmd_struct_extents, &cmd_struct_owner, &cmd_struct_dfxml, &cmd_struct_diff,
	&cmd_struct_send,
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out)
{
	fprintf(out, "usage: btrfsimg COMMAND [OPTIONS] IMAGE...\n\n"
		     "Read btrfs filesystems straight from image files.\n\ncommands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-12s %s\n", commands[i]->name, commands[i]->summary);
	fprintf(out,
		"\n'btrfsimg COMMAND --help' (or 'btrfsimg help COMMAND') shows a command's\n"
		"options and examples; 'btrfsimg --version' the version.\n"
		"\nexit status: 0 success, 1 results despite damage (reported on stderr),\n"
		"2 nothing could be read, or a usage error\n");
}

static void log_damage(void *ctx, bool damage, const char *msg)
{
	const struct cli *c = ctx;
	if (c->verbose || (damage && !c->quiet))
		fprintf(stderr, "btrfsimg: %s%s\n", damage ? "warning: " : "", msg);
}

/* ------------------------------------------------------------ commands */

static const struct cmd_struct *find_command(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(commands[i]->name, name))
			return commands[i];
	return NULL;
}

/* @arg as the shell needs it: as it is, or in single quotes. */
static void put_quoted(const char *arg)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				   "0123456789_./:=@%+,-";
	if (*arg && strspn(arg, safe) == strlen(arg)) {
		fputs(arg, stderr);
		return;
	}
	fputc('\'', stderr);
	for (const char *p = arg; *p; p++) {
		if (*p == '\'')
			fputs("'\\''", stderr); /* end the quote, a quoted quote, start again */
		else
			fputc(*p, stderr);
	}
	fputc('\'', stderr);
}

/* argv[@at] is a command after options or images: the line reordered. */
static int wrong_order(int argc, char **argv, int at)
{
	fprintf(stderr, "btrfsimg: the command comes first: btrfsimg %s", argv[at]);
	for (int i = 1; i < argc; i++) {
		if (i == at)
			continue;
		fputc(' ', stderr);
		put_quoted(argv[i]);
	}
	fputc('\n', stderr);
	return EXIT_USAGE;
}

static void list_commands(void)
{
	fputs("commands:", stderr);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(stderr, " %s", commands[i]->name);
	fputs("; see 'btrfsimg --help'\n", stderr);
}

/* argv[1] is no command: a command later on, a misspelling, or neither. */
static int no_command(int argc, char **argv)
{
	for (int i = 2; i < argc && strcmp(argv[i - 1], "--") != 0; i++)
		if (find_command(argv[i]))
			return wrong_order(argc, argv, i);
	const char *names[NCOMMANDS];
	for (size_t i = 0; i < NCOMMANDS; i++)
		names[i] = commands[i]->name;
	const char *near = argv[1][0] == '-' ? NULL : closest_word(argv[1], names, NCOMMANDS);
	if (near) {
		cli_warn("unknown command '%s'; did you mean '%s'?", argv[1], near);
		return EXIT_USAGE;
	}
	if (argv[1][0] == '-')
		cli_warn("give the command first: btrfsimg COMMAND [OPTIONS] IMAGE...");
	else
		cli_warn("unknown command '%s'", argv[1]);
	list_commands();
	return EXIT_USAGE;
}

/* `btrfsimg help [COMMAND]`, `btrfsimg --help [COMMAND]`. */
static int help(int argc, char **argv)
{
	if (argc < 3) {
		usage(stdout);
		return EXIT_OK;
	}
	const struct cmd_struct *cmd = find_command(argv[2]);
	if (!cmd) {
		char *fake[] = { argv[0], argv[2] };
		return no_command(2, fake);
	}
	cli_usage(cmd, stdout);
	return EXIT_OK;
}

/* Hidden: `btrfsimg --list-options COMMAND`, what the completion and the
 * manual page are tested against. */
static int list_options(int argc, char **argv)
{
	const struct cmd_struct *cmd = argc == 3 ? find_command(argv[2]) : NULL;
	if (!cmd) {
		cli_warn("--list-options wants one command");
		return EXIT_USAGE;
	}
	cli_list_options(cmd, stdout);
	return EXIT_OK;
}

/* Hidden: `btrfsimg --list-formats`, the library's format names one a
 * line: what the completion and the manual page are tested against. */
static int list_formats(void)
{
	for (int f = BTRFSIMG_FORMAT_RAW; btrfsimg_format_name(f); f++)
		printf("%s\n", btrfsimg_format_name(f));
	return EXIT_OK;
}

/* Arguments that are not a command's: true when handled, status in *rc. */
static bool global_argument(int argc, char **argv, int *rc)
{
	const char *a = argv[1];
	if (!strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "help"))
		*rc = help(argc, argv);
	else if (!strcmp(a, "--version") && argc == 2)
		*rc = printf("btrfsimg %s\n", btrfsimg_version()) < 0 ? EXIT_FAILED : EXIT_OK;
	else if (!strcmp(a, "--list-options"))
		*rc = list_options(argc, argv);
	else if (!strcmp(a, "--list-formats") && argc == 2)
		*rc = list_formats();
	else
		return false;
	return true;
}

/* ------------------------------------------------------------ opening */

/* Why the open failed, as each step has always been said: an image by its
 * name, a partition of an image that holds btrfs by the command's. */
static int open_failed(struct cli *c, int rc)
{
	size_t image = 0;
	switch (btrfsimg_open_step(c->fs, &image)) {
	case BTRFSIMG_STEP_NONE:
		return cli_fail(c, rc, "cannot create a handle");
	case BTRFSIMG_STEP_OPTIONS: /* the library's word for a key, the volume */
		return cli_fail(c, rc, "open options");
	case BTRFSIMG_STEP_IMAGE:
		return cli_fail(c, rc, c->images[image]);
	case BTRFSIMG_STEP_PARTITION:
		return cli_fail(c, rc, c->cmd);
	default:
		return cli_fail(c, rc, "cannot open the filesystem");
	}
}

/* The device scan of a salvage open, on a terminal (progress.h); erased
 * at its end, before the open says what it rebuilt. */
static int on_scan_progress(void *ctx, uint64_t done, uint64_t total)
{
	(void)ctx;
	progress_bytes("salvage scan", done, total);
	if (done >= total)
		progress_done();
	return 0;
}

static int open_fs(struct cli *c)
{
	struct btrfsimg_open_options o = BTRFSIMG_OPEN_OPTIONS_INIT;
	struct cli_keys keys;
	if (cli_keys_options(c, &keys, &o) != EXIT_OK)
		return EXIT_FAILED;
	o.fs = c->opts;
	o.format = c->format;
	o.generation = c->generation;
	o.log = log_damage;
	o.log_ctx = c;
	o.scan_progress = on_scan_progress;
	int rc = btrfsimg_open_images(&c->fs, (const char *const *)c->images,
				      (size_t)c->nimages, &o);
	progress_done();
	cli_keys_wipe(&keys);
	if (rc < 0)
		return open_failed(c, rc);
	uint64_t gen;
	const char *how = btrfsimg_generation_root(c->fs, &gen);
	if (how && !c->quiet)
		cli_warn("reading generation %" PRIu64 ": %s", gen, how);
	return EXIT_OK;
}

/* A replayed log tree changes what every command shows: say so once,
 * with the way back to the last commit. */
static void say_log_replay(const struct cli *c)
{
	struct btrfsimg_log_info li;
	if (c->quiet || btrfsimg_log_info(c->fs, &li) < 0 || !li.replayed)
		return;
	cli_warn("replayed the log tree (changes fsync'ed after the last commit): %" PRIu64
		 " items in %" PRIu64 " subvolume%s; --no-log-replay shows the last commit",
		 li.items, li.subvols, li.subvols == 1 ? "" : "s");
}

static int run(struct cli *c)
{
	int status = c->command->no_fs ? EXIT_OK : open_fs(c);
	if (status == EXIT_OK && !c->command->no_fs)
		say_log_replay(c);
	if (status == EXIT_OK)
		status = c->command->run(c);
	if (fflush(stdout) != 0 && status == EXIT_OK) {
		cli_warn("write error on standard output");
		status = EXIT_FAILED;
	}
	btrfsimg_fs_free(c->fs);
	return status;
}

int main(int argc, char **argv)
{
	/* output runs to hundreds of MB: 1 MiB writes, not stdio's 4 KiB
	 * (glibc ignores the size unless it is given the buffer) */
	static char outbuf[1u << 20];
	if (!isatty(STDOUT_FILENO))
		setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	int status;
	if (global_argument(argc, argv, &status))
		return status;
	const struct cmd_struct *cmd = find_command(argv[1]);
	if (!cmd)
		return no_command(argc, argv);
	struct cli c = { .cmd = cmd->name, .command = cmd, .inumbits = -1,
			 .argc = argc, .argv = argv };
	btrfsimg_open_opts_init(&c.opts);
	if (cli_parse(&c, argc - 1, argv + 1) != EXIT_OK)
		return EXIT_USAGE;
	return run(&c);
}
