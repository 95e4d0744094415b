// SPDX-License-Identifier: MIT
/* btrfsimg diff: what changed between two snapshots of one subvolume, one
 * row per change (added, deleted, renamed, modified) with the fields that
 * differ; the trees are compared through the blocks they share. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg.h"
#include "cli.h"
#include "common/json.h"
#include "common/text.h"

static void fields_json(struct jw *w, unsigned fields)
{
	jw_open_arr(w, "fields");
	for (unsigned bit = 1; bit && bit <= fields; bit <<= 1)
		if (fields & bit)
			jw_str(w, NULL, btrfsimg_diff_field_name(bit));
	jw_close_arr(w);
}

static void fields_text(unsigned fields)
{
	const char *sep = "  [";
	for (unsigned bit = 1; bit && bit <= fields; bit <<= 1)
		if (fields & bit) {
			printf("%s%s", sep, btrfsimg_diff_field_name(bit));
			sep = ",";
		}
	if (fields)
		printf("]");
}

static int on_change_json(void *ctx, const struct btrfsimg_change *ch)
{
	(void)ctx;
	struct jw w;
	jw_begin(&w, stdout);
	jw_str(&w, "change", btrfsimg_change_name(ch->kind));
	jw_strn(&w, "path", ch->path, ch->path_len);
	if (ch->old_path)
		jw_strn(&w, "old_path", ch->old_path, ch->old_path_len);
	jw_u64(&w, "objectid", ch->objectid);
	fields_json(&w, ch->fields);
	jw_end(&w);
	return 0;
}

static void name_or_root(const uint8_t *p, size_t n)
{
	if (n)
		text_name(stdout, p, n, NULL);
	else
		fputs(".", stdout);
}

static int on_change_text(void *ctx, const struct btrfsimg_change *ch)
{
	(void)ctx;
	printf("%-8s ", btrfsimg_change_name(ch->kind));
	if (ch->old_path) {
		name_or_root(ch->old_path, ch->old_path_len);
		fputs(" -> ", stdout);
	}
	name_or_root(ch->path, ch->path_len);
	fields_text(ch->fields);
	putchar('\n');
	return 0;
}

static int cmd_diff(struct cli *c)
{
	uint64_t from, to;
	int st = cli_subvol_arg(c, "--from", c->diff_from, &from);
	if (!st)
		st = cli_subvol_arg(c, "--to", c->diff_to, &to);
	if (st)
		return st;
	struct btrfsimg_diff_stats stats;
	int rc = btrfsimg_diff(c->fs, from, to, c->json ? on_change_json : on_change_text, NULL,
			       &stats);
	if (rc < 0)
		return cli_fail(c, rc, "diff");
	if (c->verbose)
		cli_warn("diff: %" PRIu64 " inodes compared; %" PRIu64
			 " tree blocks read, %" PRIu64 " subtrees shared and skipped",
			 stats.inodes_compared, stats.blocks_read, stats.subtrees_shared);
	return cli_status(c);
}

static int diff_check(struct cli *c)
{
	if (cli_need_images(c, 1, "IMAGE..."))
		return EXIT_USAGE;
	if (!c->diff_from || !c->diff_to) {
		cli_warn("diff: give both --from and --to (a subvolume id or path)");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static const struct cmd_option diff_options[] = {
	{ OPT_FROM, NULL },
	{ OPT_TO, NULL },
	{ OPT_JSON, NULL },
	CMD_IMAGE_OPTIONS, { OPT_GENERATION, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_diff = {
	.name = "diff",
	.summary = "what changed between two snapshots of one subvolume",
	.args = "IMAGE...",
	.about = "One row per change from --from to --to: added, deleted, renamed (with the\n"
		 "old path) or modified, with the fields that differ among content, size,\n"
		 "mode, uid, gid, mtime, xattrs, target and rdev. A moved directory is one\n"
		 "row; what lies below it appears only if it changed itself. content means\n"
		 "the bytes differ: where extents differ the data are compared. Only the\n"
		 "parts of the two trees that are not shared are read.",
	.examples = "btrfsimg diff --from 257 --to 258 disk.img\n"
		    "btrfsimg diff --from snap/monday --to snap/tuesday --json disk.img",
	.options = diff_options,
	.check = diff_check,
	.run = cmd_diff,
};
