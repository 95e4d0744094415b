// SPDX-License-Identifier: MIT
/* btrfsimg partitions: the partition table of whole-disk images. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "json.h"

#define PART_MAX 128

static void part_json(const char *image, const struct btrfsimg_partition *p)
{
	struct jw w;
	jw_begin(&w, stdout);
	jw_str(&w, "image", image);
	jw_i64(&w, "number", p->number);
	jw_u64(&w, "offset", p->offset);
	jw_u64(&w, "size", p->size);
	jw_str(&w, "table", p->gpt ? "gpt" : "mbr");
	jw_bool(&w, "btrfs", p->is_btrfs);
	jw_end(&w);
}

static void part_text(const struct btrfsimg_partition *p)
{
	printf("  %3d  offset %14" PRIu64 "  size %14" PRIu64 "  %s%s\n", p->number, p->offset,
	       p->size, p->gpt ? "gpt" : "mbr", p->is_btrfs ? "  btrfs" : "");
}

/* One image's table; EXIT_OK or EXIT_FAILED (said). */
static int list_one(const struct cli *c, const char *image)
{
	struct btrfsimg_partition p[PART_MAX];
	char err[512] = "";
	int n = btrfsimg_list_partitions(image, p, PART_MAX, err, sizeof(err));
	if (n < 0) {
		cli_warn("%s: %s", image, *err ? err : strerror(-n));
		return EXIT_FAILED;
	}
	if (!c->json)
		printf("%s: %s\n", image, n ? "" : "no partition table");
	for (int k = 0; k < n && k < PART_MAX; k++) {
		if (c->json)
			part_json(image, &p[k]);
		else
			part_text(&p[k]);
	}
	return EXIT_OK;
}

static int cmd_partitions(struct cli *c)
{
	int status = EXIT_OK;
	for (int i = 0; i < c->nimages; i++)
		if (list_one(c, c->images[i]) != EXIT_OK)
			status = EXIT_FAILED;
	return status;
}

static const struct cmd_option partitions_options[] = {
	{ OPT_JSON, "one JSON object per partition" },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_partitions = {
	.name = "partitions",
	.summary = "the partition table of a whole-disk image",
	.args = "IMAGE...",
	.about = "The MBR or GPT partition table of each whole-disk image: number, byte\n"
		 "offset, size, table type, and whether the partition holds btrfs (choose\n"
		 "one for the other commands with --partition N or --offset BYTES). No\n"
		 "filesystem is opened.",
	.examples = "btrfsimg partitions disk.img\n"
		    "btrfsimg partitions --json disk.img",
	.options = partitions_options,
	.run = cmd_partitions,
	.no_fs = true,
};
