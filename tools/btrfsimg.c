// SPDX-License-Identifier: MIT
/*
 * btrfsimg: read btrfs filesystems straight from image files.
 * A thin layer over libbtrfsimg: parse options, open, run one command.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

struct command {
	const char *name;
	int (*run)(struct cli *c);
	const char *help;
};

static const struct command commands[] = {
	{ "super", cmd_super, "the superblock in use and the state of every copy" },
	{ "subvols", cmd_subvols, "every subvolume and snapshot" },
	{ "walk", cmd_walk, "every path with what stat, readdir and name_to_handle_at show" },
	{ "cat", cmd_cat, "one file's contents (--path P or --inode SUBVOL:OBJECTID)" },
	{ "extract", cmd_extract, "restore a tree into a directory: IMAGE... DESTDIR" },
	{ "bodyfile", cmd_bodyfile, "The Sleuth Kit body file for mactime timelines" },
	{ "inodes", cmd_inodes, "every inode with today's and each proposal's numbers" },
	{ "collisions", cmd_collisions, "inode-number collisions under every scheme" },
	{ "partitions", NULL, "the partition table of a whole-disk image" },
};

static void usage(FILE *out)
{
	fprintf(out, "usage: btrfsimg COMMAND [OPTIONS] IMAGE...\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].help);
	fprintf(out,
		"\noptions:\n"
		"  --json              JSON Lines output (one object per line)\n"
		"  --super-mirror N    use superblock copy N (0, 1, 2) instead of the newest\n"
		"  --partition N       the Nth partition of a whole-disk image\n"
		"  --offset BYTES      the filesystem starts at BYTES in every image\n"
		"  --no-verify         do not verify data checksums\n"
		"  --no-log-replay     show the last committed state (ignore the log tree)\n"
		"  --subvol ID         start in subvolume ID (walk, cat, extract, bodyfile, inodes)\n"
		"  --path P            start at path P inside it\n"
		"  --inode S:O         cat: subvolume S, objectid O\n"
		"  --hash              walk: sha256 of contents and xattrs; bodyfile: md5\n"
		"  --inumbits N        inumbits for inodes/walk (0 or 32..64; default 56)\n"
		"  --mount-subvol ID   the mounted subvolume for numdevs=2 (default: default subvolume)\n"
		"  -v, --verbose       report damage that was worked around\n"
		"  -h, --help          this text\n"
		"\nexit status: 0 success, 1 results despite damage, 2 nothing readable\n");
}

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

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-')
		return false;
	*out = v;
	return true;
}

static void log_damage(void *ctx, bool damage, const char *msg)
{
	const struct cli *c = ctx;
	if (c->verbose || (damage && !c->quiet))
		fprintf(stderr, "btrfsimg: %s%s\n", damage ? "warning: " : "", msg);
}

enum {
	OPT_JSON = 256, OPT_MIRROR, OPT_PARTITION, OPT_OFFSET, OPT_NO_VERIFY, OPT_NO_LOG,
	OPT_HASH, OPT_SUBVOL, OPT_PATH, OPT_INODE, OPT_INUMBITS, OPT_MOUNT_SUBVOL,
};

static const struct option long_opts[] = {
	{ "json", no_argument, NULL, OPT_JSON },
	{ "super-mirror", required_argument, NULL, OPT_MIRROR },
	{ "partition", required_argument, NULL, OPT_PARTITION },
	{ "offset", required_argument, NULL, OPT_OFFSET },
	{ "no-verify", no_argument, NULL, OPT_NO_VERIFY },
	{ "no-log-replay", no_argument, NULL, OPT_NO_LOG },
	{ "hash", no_argument, NULL, OPT_HASH },
	{ "subvol", required_argument, NULL, OPT_SUBVOL },
	{ "path", required_argument, NULL, OPT_PATH },
	{ "inode", required_argument, NULL, OPT_INODE },
	{ "inumbits", required_argument, NULL, OPT_INUMBITS },
	{ "mount-subvol", required_argument, NULL, OPT_MOUNT_SUBVOL },
	{ "verbose", no_argument, NULL, 'v' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int bad_value(const char *opt, const char *v)
{
	cli_warn("invalid value for %s: '%s'", opt, v);
	return -1;
}

static int parse_one(struct cli *c, int o, const char *arg)
{
	uint64_t v;
	switch (o) {
	case OPT_JSON: c->json = true; return 0;
	case OPT_HASH: c->hash = true; return 0;
	case OPT_NO_VERIFY: c->opts.flags |= BTRFSIMG_OPEN_NO_DATA_VERIFY; return 0;
	case OPT_NO_LOG: c->opts.flags |= BTRFSIMG_OPEN_NO_LOG_REPLAY; return 0;
	case 'v': c->verbose = true; return 0;
	case 'q': c->quiet = true; return 0;
	case OPT_PATH: c->path = arg; return 0;
	case OPT_INODE: c->inode = arg; return 0;
	case OPT_MIRROR:
		if (!parse_u64(arg, &v) || v > 2)
			return bad_value("--super-mirror", arg);
		c->opts.super_mirror = (unsigned)v;
		c->opts.flags |= BTRFSIMG_OPEN_SUPER_MIRROR;
		return 0;
	case OPT_PARTITION:
		if (!parse_u64(arg, &v) || v == 0 || v > 1024)
			return bad_value("--partition", arg);
		c->opts.partition = (unsigned)v;
		return 0;
	case OPT_OFFSET:
		if (!parse_u64(arg, &v) || v > INT64_MAX)
			return bad_value("--offset", arg);
		c->opts.offset = v;
		c->opts.flags |= BTRFSIMG_OPEN_OFFSET;
		return 0;
	case OPT_SUBVOL:
		if (!parse_u64(arg, &c->subvol))
			return bad_value("--subvol", arg);
		c->have_subvol = true;
		return 0;
	case OPT_MOUNT_SUBVOL:
		if (!parse_u64(arg, &c->mount_subvol))
			return bad_value("--mount-subvol", arg);
		c->have_mount_subvol = true;
		return 0;
	case OPT_INUMBITS:
		if (!parse_u64(arg, &v) || (v != 0 && (v < 32 || v > 64)))
			return bad_value("--inumbits (0 or 32..64)", arg);
		c->inumbits = (int)v;
		return 0;
	default:
		return -1;
	}
}

static int parse_args(struct cli *c, int argc, char **argv)
{
	int o;
	while ((o = getopt_long(argc, argv, "vqh", long_opts, NULL)) != -1) {
		if (o == 'h') {
			usage(stdout);
			exit(EXIT_OK);
		}
		if (parse_one(c, o, optarg) < 0)
			return -1;
	}
	c->images = argv + optind;
	c->nimages = argc - optind;
	if (!strcmp(c->cmd, "extract")) {
		if (c->nimages < 2) {
			cli_warn("extract: give IMAGE... DESTDIR");
			return -1;
		}
		c->destdir = c->images[--c->nimages];
	}
	if (c->nimages < 1) {
		cli_warn("%s: no image given", c->cmd);
		return -1;
	}
	return 0;
}

static int open_fs(struct cli *c)
{
	int rc = btrfsimg_fs_new(&c->fs, &c->opts);
	if (rc < 0)
		return cli_fail(c, rc, "cannot create a handle");
	btrfsimg_set_log(c->fs, log_damage, c);
	for (int i = 0; i < c->nimages; i++) {
		rc = btrfsimg_add_device_file(c->fs, c->images[i]);
		if (rc < 0)
			return cli_fail(c, rc, c->images[i]);
	}
	rc = btrfsimg_open(c->fs);
	if (rc < 0)
		return cli_fail(c, rc, "cannot open the filesystem");
	return EXIT_OK;
}

static int cmd_partitions(struct cli *c)
{
	int status = EXIT_OK;
	for (int i = 0; i < c->nimages; i++) {
		struct btrfsimg_partition p[128];
		char err[512] = "";
		int n = btrfsimg_list_partitions(c->images[i], p, 128, err, sizeof(err));
		if (n < 0) {
			cli_warn("%s: %s", c->images[i], *err ? err : strerror(-n));
			status = EXIT_FAILED;
			continue;
		}
		if (!c->json)
			printf("%s: %s\n", c->images[i], n ? "" : "no partition table");
		for (int k = 0; k < n && k < 128; k++) {
			if (c->json)
				printf("{\"image\":\"%s\",\"number\":%d,\"offset\":%" PRIu64
				       ",\"size\":%" PRIu64 ",\"table\":\"%s\",\"btrfs\":%s}\n",
				       c->images[i], p[k].number, p[k].offset, p[k].size,
				       p[k].gpt ? "gpt" : "mbr", p[k].is_btrfs ? "true" : "false");
			else
				printf("  %3d  offset %14" PRIu64 "  size %14" PRIu64 "  %s%s\n",
				       p[k].number, p[k].offset, p[k].size, p[k].gpt ? "gpt" : "mbr",
				       p[k].is_btrfs ? "  btrfs" : "");
		}
	}
	return status;
}

int main(int argc, char **argv)
{
	/* output runs to hundreds of MB: 1 MiB writes, not stdio's 4 KiB
	 * (glibc ignores the size unless it is given the buffer) */
	static char outbuf[1u << 20];
	if (!isatty(STDOUT_FILENO))
		setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_FAILED : EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("btrfsimg %s\n", btrfsimg_version());
		return EXIT_OK;
	}
	struct cli c = { .cmd = argv[1], .inumbits = -1 };
	btrfsimg_open_opts_init(&c.opts);
	const struct command *cmd = NULL;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(commands[i].name, argv[1]))
			cmd = &commands[i];
	if (!cmd) {
		cli_warn("unknown command '%s'", argv[1]);
		usage(stderr);
		return EXIT_FAILED;
	}
	if (parse_args(&c, argc - 1, argv + 1) < 0)
		return EXIT_FAILED;
	if (!cmd->run)
		return cmd_partitions(&c);
	int status = open_fs(&c);
	if (status == EXIT_OK)
		status = cmd->run(&c);
	if (fflush(stdout) != 0 && status == EXIT_OK) {
		cli_warn("write error on standard output");
		status = EXIT_FAILED;
	}
	btrfsimg_fs_free(c.fs);
	return status;
}
