// SPDX-License-Identifier: MIT
/*
 * btrfsimg bodyfile: The Sleuth Kit 3.x body format for mactime timelines:
 *   MD5|name|inode|mode_as_string|UID|GID|size|atime|mtime|ctime|crtime
 * with the inode as SUBVOL-OBJECTID (btrfs inode numbers repeat across
 * subvolumes; mactime keeps only an inode field of digits and dashes, as in
 * TSK's own "inode-type-id"), names escaped as text.h says (a line stays
 * a line, and mactime keeps them: it drops a name holding a newline) and
 * the MD5 of regular files with --hash (else 0).
 */
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include "cli.h"
#include "recovered.h"
#include "digest.h"
#include "text.h"
#include "visit.h"

static char type_char(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return 'r';
	case S_IFDIR: return 'd';
	case S_IFLNK: return 'l';
	case S_IFCHR: return 'c';
	case S_IFBLK: return 'b';
	case S_IFIFO: return 'p';
	case S_IFSOCK: return 'h';
	default: return '-';
	}
}

/* TSK's "r/rrw-r--r--": type, slash, type again and the ls-style bits. */
static void mode_string(uint32_t mode, char out[13])
{
	static const char rwx[] = "rwxrwxrwx";
	char t = type_char(mode);
	out[0] = t;
	out[1] = '/';
	out[2] = t == 'r' ? '-' : t;
	for (int i = 0; i < 9; i++)
		out[3 + i] = (mode & (0400 >> i)) ? rwx[i] : '-';
	if (mode & S_ISUID)
		out[5] = (mode & 0100) ? 's' : 'S';
	if (mode & S_ISGID)
		out[8] = (mode & 0010) ? 's' : 'S';
	if (mode & S_ISVTX)
		out[11] = (mode & 0001) ? 't' : 'T';
	out[12] = '\0';
}

/* The name escaped as in the text output (text.h), and '|' and '%' too:
 * '|' would end the field, and mactime decodes %XX in every field. */
static void put_name(const uint8_t *p, size_t n)
{
	putchar('/');
	text_name(stdout, p, n, "|%");
}

static int on_node(void *ctx, const struct visit_node *n)
{
	struct cli *c = ctx;
	const struct btrfsimg_inode *i = &n->inode;
	char md5[33] = "0", mode[13];
	if (c->hash && S_ISREG(i->mode) &&
	    digest_file(c->fs, n->subvol, n->objectid, i->size, "md5", md5) < 0) {
		cli_warn("%.*s: %s", (int)n->path_len, (const char *)n->path, btrfsimg_errmsg(c->fs));
		c->errors++;
	}
	mode_string(i->mode, mode);
	printf("%s|", md5);
	put_name(n->path, n->path_len);
	printf("|%" PRIu64 "-%" PRIu64 "|%s|%u|%u|%" PRIu64 "|%lld|%lld|%lld|%lld\n", n->subvol,
	       n->objectid, mode, i->uid, i->gid, i->size, (long long)i->atime.sec,
	       (long long)i->mtime.sec, (long long)i->ctime.sec, (long long)i->otime.sec);
	return 0;
}

static int cmd_bodyfile(struct cli *c)
{
	struct visit_opts o = { .subvol = cli_start_subvol(c), .path = c->path,
				.objectid = c->inode_objectid };
	int rc = visit_tree(c->fs, &o, on_node, c, &c->errors);
	if (rc < 0)
		return cli_fail(c, rc, "bodyfile");
	if (c->only_deleted)
		return rec_bodyfile(c);
	return cli_status(c);
}

static int bodyfile_check(struct cli *c)
{
	if (cli_need_images(c, 1, "IMAGE...") || cli_inode_alone(c) ||
	    cli_needs(c, c->opts.flags & BTRFSIMG_OPEN_NO_DATA_VERIFY, "--no-verify", c->hash,
		      "--hash"))
		return EXIT_USAGE;
	return EXIT_OK;
}

static const struct cmd_option bodyfile_options[] = {
	{ OPT_HASH, "MD5 of regular files' contents (else 0)" },
	{ OPT_SUBVOL, NULL },
	{ OPT_PATH, NULL },
	{ OPT_INODE, "start at inode S:O (subvolume S, objectid O)" },
	{ OPT_NO_VERIFY, "with --hash: do not verify data checksums" },
	{ OPT_DELETED, "add the recovered versions ('btrfsimg deleted'): names\n"
		       "end ' (deleted)', or ' (earlier version ID)' for\n"
		       "earlier versions of live files" },
	CMD_IMAGE_OPTIONS, { OPT_GENERATION, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_bodyfile = {
	.name = "bodyfile",
	.summary = "The Sleuth Kit body file for mactime timelines",
	.args = "IMAGE...",
	.about = "One line per path in The Sleuth Kit 3.x body format\n"
		 "(MD5|name|inode|mode|UID|GID|size|atime|mtime|ctime|crtime), for\n"
		 "mactime: the inode as SUBVOL-OBJECTID (what --inode takes too); in names\n"
		 "a backslash is \\\\, newline, tab, CR \\n \\t \\r, and control bytes,\n"
		 "bytes that are not UTF-8, '|' and '%' \\xNN.",
	.examples = "btrfsimg bodyfile disk.img > body.txt && mactime -y -b body.txt\n"
		    "btrfsimg bodyfile --hash --path home disk.img\n"
		    "btrfsimg bodyfile --deleted disk.img > body.txt && mactime -b body.txt",
	.options = bodyfile_options,
	.check = bodyfile_check,
	.run = cmd_bodyfile,
};
