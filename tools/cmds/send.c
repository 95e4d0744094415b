// SPDX-License-Identifier: MIT
/* btrfsimg send: the send stream of a subvolume or snapshot, for `btrfs
 * receive`, from the image: no mount, no kernel. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "btrfsimg.h"
#include "cli.h"
#include "common/outfile.h"

struct sink {
	int fd;
	const char *name;
};

static int write_all(void *ctx, const void *buf, size_t len)
{
	struct sink *k = ctx;
	const char *p = buf;
	while (len) {
		ssize_t n = write(k->fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int cmd_send(struct cli *c)
{
	uint64_t sources[sizeof(c->clone_srcs) / sizeof(c->clone_srcs[0])];
	struct btrfsimg_send_opts o = BTRFSIMG_SEND_OPTS_INIT;
	o.proto = c->send_proto;
	o.flags = c->send_flags;
	o.clone_sources = sources;
	o.nclone_sources = c->nclone_srcs;
	int st = cli_subvol_arg(c, "--subvol", c->send_subvol, &o.subvol);
	if (!st && c->send_parent)
		st = cli_subvol_arg(c, "--parent", c->send_parent, &o.parent);
	for (size_t i = 0; !st && i < c->nclone_srcs; i++)
		st = cli_subvol_arg(c, "--clone-src", c->clone_srcs[i], &sources[i]);
	if (st)
		return st;
	struct sink k = { STDOUT_FILENO, "standard output" };
	if (c->output) {
		k.fd = out_create(AT_FDCWD, c->output, 0600);
		if (k.fd < 0) {
			cli_warn("send: cannot create '%s': %s (the output is created new, never "
				 "over an existing file or through a link)", c->output, strerror(-k.fd));
			return EXIT_FAILED;
		}
		k.name = c->output;
	}
	struct btrfsimg_send_stats stats;
	int rc = btrfsimg_send(c->fs, &o, write_all, &k, &stats);
	if (c->output && close(k.fd) < 0 && rc == 0)
		rc = -errno;
	if (rc < 0) {
		cli_fail(c, rc, "send");
		cli_warn("send: the stream on %s is not complete (%" PRIu64 " bytes, no end)",
			 k.name, stats.bytes);
		return EXIT_FAILED;
	}
	if (c->verbose)
		cli_warn("send: %" PRIu64 " bytes; %" PRIu64 " files, %" PRIu64
			 " bytes of data written, %" PRIu64 " ranges cloned, %" PRIu64
			 " compressed bytes sent as they are",
			 stats.bytes, stats.inodes, stats.data_bytes, stats.clones,
			 stats.encoded_bytes);
	return cli_status(c);
}

static int send_check(struct cli *c)
{
	if (cli_need_images(c, 1, "IMAGE..."))
		return EXIT_USAGE;
	if (!c->send_subvol) {
		cli_warn("send: give --subvol ID|PATH, the subvolume or snapshot to send");
		return EXIT_USAGE;
	}
	if ((c->send_flags & BTRFSIMG_SEND_COMPRESSED_DATA) && c->send_proto != 2) {
		cli_warn("send: --compressed-data needs --proto 2 (encoded writes)");
		return EXIT_USAGE;
	}
	if (!c->output && isatty(STDOUT_FILENO)) {
		cli_warn("send: not writing a binary stream to a terminal: give -f FILE, or a pipe");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static const struct cmd_option send_options[] = {
	{ OPT_SEND_SUBVOL, NULL },
	{ OPT_PARENT, NULL },
	{ OPT_CLONE_SRC, NULL },
	{ OPT_PROTO, NULL },
	{ OPT_COMPRESSED_DATA, NULL },
	{ OPT_OUTPUT, "write the stream to FILE, created new (an existing\n"
		      "file or link there is refused); else standard output" },
	CMD_IMAGE_OPTIONS, { OPT_GENERATION, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_send = {
	.name = "send",
	.summary = "a send stream of a subvolume, for btrfs receive",
	.args = "IMAGE...",
	.about = "The stream `btrfs send` writes for --subvol, which `btrfs receive` applies\n"
		 "to make the same subvolume: contents (holes stay holes), hard links,\n"
		 "symlinks, special files, xattrs, owners, modes, atime and mtime, and the\n"
		 "subvolume's uuid and ctransid. With --parent, only what changed since\n"
		 "that snapshot (which the receiving side holds). Extents shared within it,\n"
		 "with --parent or with a --clone-src go out as clones. Standard output\n"
		 "must not be a terminal.",
	.examples = "btrfsimg send --subvol snap/monday disk.img | btrfs receive /mnt/backup\n"
		    "btrfsimg send --subvol snap/tuesday --parent snap/monday disk.img > tue.stream\n"
		    "btrfsimg send --subvol 257 --proto 2 --compressed-data -f mon.stream d.E01",
	.options = send_options,
	.check = send_check,
	.run = cmd_send,
};
