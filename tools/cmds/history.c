// SPDX-License-Identifier: MIT
/*
 * btrfsimg history: every generation the tree blocks on the devices still
 * show (btrfsimg_forensic_history), oldest first: the root tree's block,
 * how many blocks were written in it, the trees its root items name and
 * whether their root blocks survive, and the newest time known for it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "cli.h"
#include "common/json.h"
#include "common/recovered.h"

static void iso_time(const struct btrfsimg_timespec *t, char *out, size_t len)
{
	time_t s = (time_t)t->sec;
	struct tm tm;
	if (!gmtime_r(&s, &tm) || !strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(out, len, "%lld", (long long)t->sec);
}

static int on_gen(void *ctx, const struct btrfsimg_generation *g)
{
	struct cli *c = ctx;
	if (c->json) {
		struct jw w;
		jw_begin(&w, stdout);
		jw_u64(&w, "transid", g->transid);
		jw_bool(&w, "superblock", g->superblock);
		jw_u64(&w, "root_tree", g->root_tree_bytenr);
		jw_u64(&w, "blocks", g->blocks);
		if (g->has_time)
			jw_time(&w, "time", g->time.sec, g->time.nsec);
		else
			jw_null(&w, "time");
		jw_open_arr(&w, "trees");
		for (size_t i = 0; i < g->ntrees; i++) {
			jw_open_obj(&w, NULL);
			jw_u64(&w, "id", g->trees[i].id);
			jw_u64(&w, "bytenr", g->trees[i].bytenr);
			jw_u64(&w, "generation", g->trees[i].generation);
			jw_bool(&w, "found", g->trees[i].found);
			jw_close_obj(&w);
		}
		jw_close_arr(&w);
		jw_end(&w);
		return 0;
	}
	char t[32] = "-";
	if (g->has_time)
		iso_time(&g->time, t, sizeof(t));
	size_t found = 0;
	for (size_t i = 0; i < g->ntrees; i++)
		found += g->trees[i].found;
	printf("%10" PRIu64 " %-5s %14" PRIu64 " %8" PRIu64 " %5zu/%-5zu %s\n", g->transid,
	       g->superblock ? "super" : "-", g->root_tree_bytenr, g->blocks, found, g->ntrees, t);
	return 0;
}

static int cmd_history(struct cli *c)
{
	btrfsimg_forensic *f;
	int st = rec_scan(c, &f);
	if (st)
		return st;
	if (!c->json)
		printf("%10s %-5s %14s %8s %11s %s\n", "TRANSID", "SUPER", "ROOT_TREE", "BLOCKS",
		       "TREES", "TIME");
	int rc = btrfsimg_forensic_history(f, on_gen, c);
	btrfsimg_forensic_free(f);
	if (rc < 0)
		return cli_fail(c, rc, "history");
	return cli_status(c);
}

static const struct cmd_option history_options[] = {
	{ OPT_JSON, NULL },
	CMD_IMAGE_OPTIONS,
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_history = {
	.name = "history",
	.summary = "every generation the tree blocks on the devices still show",
	.args = "IMAGE...",
	.about = "Read every device whole and list, oldest first, every generation for\n"
		 "which a root-tree block was found or a superblock copy (or its backup\n"
		 "roots) names one: the root tree's block, the blocks written in it, the\n"
		 "trees its root items name (found: their root block survives / all), and\n"
		 "the newest time known (root items' ctime/otime, inode ctimes).",
	.examples = "btrfsimg history disk.img\n"
		    "btrfsimg history --json disk.img | jq -c '{transid, time}'",
	.options = history_options,
	.run = cmd_history,
};
