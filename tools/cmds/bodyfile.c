// SPDX-License-Identifier: MIT
/*
 * btrfsimg bodyfile: The Sleuth Kit 3.x body format for mactime timelines:
 *   MD5|name|inode|mode_as_string|UID|GID|size|atime|mtime|ctime|crtime
 * with the inode as SUBVOL-OBJECTID (btrfs inode numbers repeat across
 * subvolumes; mactime keeps only an inode field of digits and dashes, as in
 * TSK's own "inode-type-id"), names escaped as text.h says (a line stays
 * a line, and mactime keeps them: it drops a name holding a newline) and
 * the MD5 of regular files with --hash (else 0).
 *
 * --deleted adds the recovered versions and the creation of each
 * subvolume and snapshot as events, under the same start and prefix as the
 * live paths: recovered paths are from the top level, so the start's own
 * path from there is cut off them, and versions outside it are left out.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "common/recovered.h"
#include "common/digest.h"
#include "common/text.h"
#include "common/visit.h"

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
 * '|' would end the field, and mactime decodes %XX in every field. It
 * begins with --mount-point's DIR (its trailing slashes cut), as fls -m's. */
static void put_name(const struct cli *c, const uint8_t *p, size_t n)
{
	const char *m = c->mount_point ? c->mount_point : "";
	size_t mn = strlen(m);
	while (mn && m[mn - 1] == '/')
		mn--;
	text_name(stdout, (const uint8_t *)m, mn, "|%");
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
	put_name(c, n->path, n->path_len);
	printf("|%" PRIu64 "-%" PRIu64 "|%s|%u|%u|%" PRIu64 "|%lld|%lld|%lld|%lld\n", n->subvol,
	       n->objectid, mode, i->uid, i->gid, i->size, (long long)i->atime.sec,
	       (long long)i->mtime.sec, (long long)i->ctime.sec, (long long)i->otime.sec);
	return 0;
}

/* ------------------------------------------------------------ --deleted */

struct body {
	struct cli *c;
	btrfsimg_forensic *f;
	char *base; /* the start's path from the top level, no '/' at its ends */
	size_t base_len;
};

/* @top (a path from the top level) relative to the start, or NULL when it
 * is not under it. */
static const char *under_base(const struct body *b, const char *top)
{
	if (!b->base_len)
		return top;
	if (strncmp(top, b->base, b->base_len))
		return NULL;
	if (top[b->base_len] == '\0')
		return top + b->base_len;
	return top[b->base_len] == '/' ? top + b->base_len + 1 : NULL;
}

/* The start's path from the top level: --subvol's path there, then
 * --path. 0, or EXIT_FAILED (said) for a subvolume no path reaches. */
static int start_base(struct body *b, const struct btrfsimg_subvol *sv, size_t nsv)
{
	const struct cli *c = b->c;
	uint64_t id = cli_start_subvol(c);
	const struct btrfsimg_subvol *s = id == 5 ? NULL : btrfsimg_subvol_find(sv, nsv, id);
	if (id != 5 && (!s || !s->path)) {
		cli_warn("bodyfile: --deleted: subvolume %" PRIu64 " has no path from the top "
			 "level, so recovered versions cannot be placed under it",
			 id);
		return EXIT_FAILED;
	}
	const char *sp = s ? s->path : "", *pp = c->path ? c->path : "";
	size_t n = strlen(sp) + strlen(pp) + 2;
	if (!(b->base = malloc(n)))
		return cli_fail(b->c, -ENOMEM, "bodyfile");
	snprintf(b->base, n, "%s/%s", sp, pp);
	/* no '/' at either end, none doubled: as the recovered paths are */
	size_t k = 0;
	for (const char *p = b->base; *p; p++)
		if (*p != '/' || (k && b->base[k - 1] != '/'))
			b->base[k++] = *p;
	while (k && b->base[k - 1] == '/')
		k--;
	b->base[k] = '\0';
	b->base_len = k;
	return 0;
}

/* Every version's name carries its kind and id: two versions of one
 * inode are two names, and a dropped subvolume's say so (TSK's own
 * marker, " (deleted)", begins each but earlier versions'). */
static void put_kind(const struct btrfsimg_recovered *r)
{
	switch (r->kind) {
	case BTRFSIMG_REC_PREVIOUS_VERSION:
		printf(" (earlier version %s)", r->id);
		break;
	case BTRFSIMG_REC_DROPPED_SUBVOLUME:
		printf(" (deleted with subvolume %" PRIu64 ", %s)", r->subvol, r->id);
		break;
	case BTRFSIMG_REC_ORPHAN:
		printf(" (deleted, orphan %s)", r->id);
		break;
	default:
		printf(" (deleted %s)", r->id);
	}
}

static int body_one(void *ctx, const struct btrfsimg_recovered *r)
{
	struct body *b = ctx;
	const char *name = under_base(b, r->path);
	if (!name)
		return 0;
	if (r->status == BTRFSIMG_REC_ARTEFACT)
		return 0; /* its times are a later state's: no event of its own */
	rec_name_damage(b->c, r);
	const struct btrfsimg_inode *i = &r->inode;
	char md5[33] = "0", mode[13];
	if (b->c->hash && r->status == BTRFSIMG_REC_INTACT && !S_ISDIR(i->mode) &&
	    btrfsimg_forensic_digest(b->f, r->id, "md5", md5, sizeof(md5)) != 0)
		snprintf(md5, sizeof(md5), "0");
	mode_string(i->mode, mode);
	printf("%s|", md5);
	put_name(b->c, (const uint8_t *)name, strlen(name));
	put_kind(r);
	printf("|%" PRIu64 "-%" PRIu64 "|%s|%u|%u|%" PRIu64 "|%lld|%lld|%lld|%lld\n", r->subvol,
	       r->objectid, mode, i->uid, i->gid, i->size, (long long)i->atime.sec,
	       (long long)i->mtime.sec, (long long)i->ctime.sec, (long long)i->otime.sec);
	return 0;
}

/* A subvolume's or snapshot's creation (its root item's otime) as an event
 * of its own, all four times that moment: mactime shows a time 0 as an
 * event of its own in 1970 (or 0000-00-00), not as no event. */
static void subvol_events(const struct body *b, const struct btrfsimg_subvol *sv, size_t nsv)
{
	for (size_t k = 0; k < nsv; k++) {
		const struct btrfsimg_subvol *s = &sv[k];
		const char *name =
			s->id != 5 && s->path && s->otime_sec ? under_base(b, s->path) : NULL;
		if (!name)
			continue;
		printf("0|");
		put_name(b->c, (const uint8_t *)name, strlen(name));
		if (s->snapshot && s->snapshot_of)
			printf(" (snapshot %" PRIu64 " of subvolume %" PRIu64 " created)", s->id,
			       s->snapshot_of);
		else
			printf(" (%s %" PRIu64 " created)", s->snapshot ? "snapshot" : "subvolume",
			       s->id);
		long long t = (long long)s->otime_sec;
		printf("|%" PRIu64 "-256|d/d---------|0|0|0|%lld|%lld|%lld|%lld\n", s->id, t, t, t,
		       t);
	}
}

static int body_deleted(struct cli *c)
{
	struct body b = { .c = c };
	struct btrfsimg_subvol *sv = NULL;
	size_t nsv = 0;
	int rc = btrfsimg_subvols(c->fs, &sv, &nsv);
	if (rc < 0)
		return cli_fail(c, rc, "bodyfile");
	int st = start_base(&b, sv, nsv);
	if (!st)
		st = rec_scan(c, &b.f);
	if (!st) {
		subvol_events(&b, sv, nsv);
		rc = btrfsimg_forensic_recovered(b.f, body_one, &b);
		btrfsimg_forensic_free(b.f);
		st = rc < 0 ? cli_fail(c, rc, "bodyfile") : cli_status(c);
	}
	btrfsimg_subvols_free(sv, nsv);
	free(b.base);
	return st;
}

static int cmd_bodyfile(struct cli *c)
{
	struct visit_opts o = { .subvol = cli_start_subvol(c), .path = c->path,
				.objectid = c->inode_objectid };
	int rc = visit_tree(c->fs, &o, on_node, c, &c->errors);
	if (rc < 0)
		return cli_fail(c, rc, "bodyfile");
	if (c->only_deleted)
		return body_deleted(c);
	return cli_status(c);
}

static int bodyfile_check(struct cli *c)
{
	if (cli_need_images(c, 1, "IMAGE...") || cli_inode_alone(c) ||
	    cli_needs(c, c->opts.flags & BTRFSIMG_OPEN_NO_DATA_VERIFY, "--no-verify", c->hash,
		      "--hash"))
		return EXIT_USAGE;
	/* recovered versions have paths, not inodes to start under */
	if (c->only_deleted && c->inode) {
		cli_warn("bodyfile: --deleted starts at --subvol and --path, not --inode");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static const struct cmd_option bodyfile_options[] = {
	{ OPT_HASH, "MD5 of regular files' contents (else 0)" },
	{ OPT_SUBVOL, NULL },
	{ OPT_PATH, NULL },
	{ OPT_INODE, "start at inode S:O (subvolume S, objectid O)" },
	{ OPT_NO_VERIFY, "with --hash: do not verify data checksums" },
	{ OPT_DELETED, "add the recovered versions ('btrfsimg deleted')\n"
		       "under the start: names end ' (deleted ID)'\n"
		       "(' (deleted with subvolume S, ID)', ' (deleted,\n"
		       "orphan ID)', or ' (earlier version ID)' for earlier\n"
		       "versions of live files); and each subvolume's\n"
		       "creation as an event" },
	{ OPT_MOUNT_POINT, NULL },
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
		    "btrfsimg bodyfile --deleted --mount-point C: disk.img > body.txt",
	.options = bodyfile_options,
	.check = bodyfile_check,
	.run = cmd_bodyfile,
};
