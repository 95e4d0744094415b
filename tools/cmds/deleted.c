// SPDX-License-Identifier: MIT
/*
 * btrfsimg deleted: what no live path shows any more, from every tree
 * block on the devices (btrfsimg_forensic.h): deleted files, earlier
 * versions of live ones, files of dropped subvolumes, orphans. One record
 * per version, newest first within a file; the id goes to cat --deleted.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "common/digest.h"
#include "common/json.h"
#include "common/recovered.h"
#include "common/text.h"

struct del_ctx {
	struct cli *c;
	btrfsimg_forensic *f;
	uint64_t n, partial;
};

static int on_record(void *ctx, const struct btrfsimg_recovered *r)
{
	struct del_ctx *d = ctx;
	char sha[65] = "";
	bool have_sha = false;
	if (d->c->hash && r->status == BTRFSIMG_REC_INTACT && !S_ISDIR(r->inode.mode)) {
		int rc = btrfsimg_forensic_digest(d->f, r->id, "sha256", sha, sizeof(sha));
		have_sha = rc == 0;
		if (rc < 0) {
			cli_warn("deleted: %s: %s", r->id, btrfsimg_errmsg(d->c->fs));
			d->c->errors++;
		}
	}
	rec_name_damage(d->c, r);
	d->n++;
	d->partial += r->status != BTRFSIMG_REC_INTACT;
	if (d->c->json) {
		struct jw w;
		jw_begin(&w, stdout);
		rec_json(&w, r, have_sha ? sha : NULL);
		jw_end(&w);
		return 0;
	}
	printf("%-28s %-17s %-13s %-8s %10" PRIu64 " ", r->id,
	       btrfsimg_recovered_kind_name(r->kind), btrfsimg_recovered_status_name(r->status),
	       r->verified ? "verified" : "-", r->inode.size);
	if (d->c->hash)
		printf("%-64s ", have_sha ? sha : "-");
	text_name(stdout, (const uint8_t *)r->path, strlen(r->path), NULL);
	putchar('\n');
	return 0;
}

static int cmd_deleted(struct cli *c)
{
	struct del_ctx d = { .c = c };
	int st = rec_scan(c, &d.f);
	if (st)
		return st;
	if (!c->json) {
		printf("%-28s %-17s %-13s %-8s %10s ", "ID", "KIND", "STATUS", "VERIFIED", "SIZE");
		if (c->hash)
			printf("%-64s ", "SHA256");
		printf("PATH\n");
	}
	int rc = btrfsimg_forensic_recovered(d.f, on_record, &d);
	btrfsimg_forensic_free(d.f);
	if (rc < 0)
		return cli_fail(c, rc, "deleted");
	return cli_status(c);
}

static const struct cmd_option deleted_options[] = {
	{ OPT_JSON, NULL },
	{ OPT_HASH, "sha256 of every version that could be read whole" },
	CMD_IMAGE_OPTIONS,
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_deleted = {
	.name = "deleted",
	.summary = "deleted files and earlier versions, from every tree block found",
	.args = "IMAGE...",
	.about = "Read every device whole, find every tree block of the filesystem that\n"
		 "ever was (checksum, checks and chunk map as for live blocks), and list\n"
		 "each version of a regular file or symlink, and each directory, that no\n"
		 "live path shows any more: kind deleted, previous-version,\n"
		 "dropped-subvolume or orphan; status intact, partial (bad_ranges say\n"
		 "which bytes and why, read as zeros), overwritten, metadata-only or\n"
		 "artefact (a size lagging a later state's times); verified when every\n"
		 "data sector matched a checksum btrfs wrote for that extent (never for\n"
		 "inline or nodatasum data). Directories have no contents: intact when all\n"
		 "their items were found, else metadata-only. Paths come from old names;\n"
		 "unknown parts read <SUBVOL:OBJECTID>. Newest version of a file first;\n"
		 "identical versions once. The id goes to cat --deleted.",
	.examples = "btrfsimg deleted disk.img\n"
		    "btrfsimg deleted --json --hash disk.img | jq 'select(.verified)'\n"
		    "btrfsimg cat --deleted 5-260-12-0a1b2c3d disk.img > old.txt",
	.options = deleted_options,
	.run = cmd_deleted,
};
