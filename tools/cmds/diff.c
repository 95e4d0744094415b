// SPDX-License-Identifier: MIT
/* btrfsimg diff: what changed between two snapshots of one subvolume, or
 * one subvolume at two generations, one row per change (added, deleted,
 * renamed, modified) with the fields that differ; the trees are compared
 * through the blocks they share. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg.h"
#include "cli.h"
#include "common/json.h"
#include "common/open.h"
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

/* The --from side's handle: the one open, or, with --from-generation, a
 * second open of the same images at that generation. */
static int from_handle(struct cli *c, btrfsimg_fs **out)
{
	if (!c->diff_from_gen) {
		*out = c->fs;
		return EXIT_OK;
	}
	return cli_open_at(c, c->diff_from_gen, out);
}

static int diff_ids(struct cli *c, btrfsimg_fs *from_fs, uint64_t *from, uint64_t *to)
{
	const char *a = c->send_subvol ? c->send_subvol : c->diff_from;
	const char *b = c->send_subvol ? c->send_subvol : c->diff_to;
	int st = cli_subvol_arg_in(c, from_fs, c->send_subvol ? "--subvol" : "--from", a, from);
	return st ? st : cli_subvol_arg(c, c->send_subvol ? "--subvol" : "--to", b, to);
}

static int cmd_diff(struct cli *c)
{
	btrfsimg_fs *from_fs;
	int st = from_handle(c, &from_fs);
	if (st)
		return st;
	uint64_t from, to;
	st = diff_ids(c, from_fs, &from, &to);
	struct btrfsimg_diff_stats stats;
	int rc = st ? 0 : btrfsimg_diff_between(from_fs, from, c->fs, to,
					  c->json ? on_change_json : on_change_text, NULL, &stats);
	bool from_damaged = from_fs != c->fs && btrfsimg_damage_count(from_fs);
	if (from_fs != c->fs)
		btrfsimg_fs_free(from_fs);
	if (st)
		return st;
	if (rc < 0)
		return cli_fail(c, rc, "diff");
	if (c->verbose)
		cli_warn("diff: %" PRIu64 " inodes compared; %" PRIu64
			 " tree blocks read, %" PRIu64 " subtrees shared and skipped",
			 stats.inodes_compared, stats.blocks_read, stats.subtrees_shared);
	return from_damaged ? EXIT_DAMAGED : cli_status(c);
}

/* Two snapshots (--from, --to), or one subvolume (--subvol) at two
 * generations; --generation is the --to side's, as --to-generation. */
static int diff_check(struct cli *c)
{
	if (cli_need_images(c, 1, "IMAGE..."))
		return EXIT_USAGE;
	if (c->diff_to_gen && c->generation) {
		cli_warn("diff: give --to-generation or --generation, not both");
		return EXIT_USAGE;
	}
	if (c->diff_to_gen)
		c->generation = c->diff_to_gen;
	if (c->send_subvol && (c->diff_from || c->diff_to)) {
		cli_warn("diff: --subvol names both sides: give it, or --from and --to");
		return EXIT_USAGE;
	}
	if (c->send_subvol && !c->diff_from_gen) {
		cli_warn("diff: --subvol compares one subvolume at two generations: give "
			 "--from-generation");
		return EXIT_USAGE;
	}
	if (!c->send_subvol && (!c->diff_from || !c->diff_to)) {
		cli_warn("diff: give both --from and --to (a subvolume id or path), or --subvol "
			 "with --from-generation");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static const struct cmd_option diff_options[] = {
	{ OPT_FROM, NULL },
	{ OPT_TO, NULL },
	{ OPT_SEND_SUBVOL, "the subvolume compared at two generations: its id,\n"
			   "or its path from the top level (both sides)" },
	{ OPT_FROM_GENERATION, NULL },
	{ OPT_TO_GENERATION, NULL },
	{ OPT_JSON, NULL },
	CMD_IMAGE_OPTIONS, { OPT_GENERATION, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_diff = {
	.name = "diff",
	.summary = "what changed between two snapshots, or two generations, of a subvolume",
	.args = "IMAGE...",
	.about = "One row per change from --from to --to: added, deleted, renamed (with the\n"
		 "old path) or modified, with the fields that differ among content, size,\n"
		 "mode, uid, gid, mtime, xattrs, target and rdev. A moved directory is one\n"
		 "row; what lies below it appears only if it changed itself. content means\n"
		 "the bytes differ: where extents differ the data are compared. Only the\n"
		 "parts of the two trees that are not shared are read. --subvol with\n"
		 "--from-generation compares one subvolume as an older transaction left\n"
		 "it with the newest (or --to-generation). What cannot be read (an older\n"
		 "generation's blocks written over since) is named on stderr with the\n"
		 "inodes left out, and the exit status is 1; 2 if the root is unreadable.",
	.examples = "btrfsimg diff --from 257 --to 258 disk.img\n"
		    "btrfsimg diff --from snap/monday --to snap/tuesday --json disk.img\n"
		    "btrfsimg diff --subvol home --from-generation 1841 disk.img",
	.options = diff_options,
	.check = diff_check,
	.run = cmd_diff,
};
