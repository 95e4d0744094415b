// SPDX-License-Identifier: MIT
/* btrfsimg owner: which files own (or which structure holds) a byte range
 * of the logical address space, of a btrfs device or of an image: a
 * carving hit or an unallocated range back to its files (TSK's ifind). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "btrfsimg_forensic.h"
#include "cli.h"
#include "common/json.h"
#include "common/recovered.h"

#define MAX_RANGES 65536	/* logical ranges asked of the forensic scan */

struct owner_run {
	struct cli *c;
	uint64_t n;
	/* --deleted: the logical ranges the live answer covered */
	uint64_t (*ranges)[2];
	size_t nranges, cap;
	bool cut;
};

static void owner_json(const struct btrfsimg_owner *o)
{
	struct jw w;
	jw_begin(&w, stdout);
	jw_str(&w, "kind", btrfsimg_owner_kind_name(o->kind));
	jw_u64(&w, "logical", o->logical);
	jw_u64(&w, "length", o->length);
	if (o->has_device) {
		jw_u64(&w, "devid", o->devid);
		jw_u64(&w, "physical", o->physical);
	}
	if (o->kind <= BTRFSIMG_OWNER_TREE_BLOCK) {
		jw_u64(&w, "extent_bytenr", o->extent_bytenr);
		jw_u64(&w, "extent_bytes", o->extent_bytes);
		jw_u64(&w, "extent_generation", o->extent_generation);
	}
	if (o->kind == BTRFSIMG_OWNER_TREE_BLOCK)
		jw_u64(&w, "tree_root", o->tree_root);
	if (o->kind == BTRFSIMG_OWNER_FILE || o->kind == BTRFSIMG_OWNER_EXTENT) {
		jw_u64(&w, "subvol", o->subvol);
		jw_u64(&w, "objectid", o->objectid);
		jw_u64(&w, "file_offset", o->file_offset);
	}
	if (o->kind == BTRFSIMG_OWNER_RECOVERED) {
		jw_str(&w, "version_id", o->version_id);
		/* the version's, as deleted --json and the text line give it */
		jw_u64(&w, "generation", o->extent_generation);
		jw_u64(&w, "subvol", o->subvol);
		jw_u64(&w, "objectid", o->objectid);
		jw_u64(&w, "file_offset", o->file_offset);
	}
	if (o->kind == BTRFSIMG_OWNER_FILE || o->kind == BTRFSIMG_OWNER_RECOVERED) {
		jw_u64(&w, "file_length", o->file_length);
		jw_bool(&w, "prealloc", o->extent_type == BTRFSIMG_EXTENT_PREALLOC);
		/* named as extents --json names it, so the two maps join */
		static const char *const comp[] = { "none", "zlib", "lzo", "zstd" };
		jw_str(&w, "compression", o->compression >= 0 && o->compression < 4
						  ? comp[o->compression] : "unknown");
		jw_u64(&w, "item_generation", o->item_generation);
		jw_str(&w, "path", o->path);
	}
	jw_end(&w);
}

static void owner_text(const struct btrfsimg_owner *o)
{
	printf("%-10s %14" PRIu64 " %10" PRIu64, btrfsimg_owner_kind_name(o->kind), o->logical,
	       o->length);
	if (o->has_device)
		printf("  dev %" PRIu64 ":%" PRIu64, o->devid, o->physical);
	switch (o->kind) {
	case BTRFSIMG_OWNER_FILE:
		printf("  %" PRIu64 ":%" PRIu64 " offset %" PRIu64 "+%" PRIu64 " gen %" PRIu64
		       "  %s", o->subvol, o->objectid, o->file_offset, o->file_length,
		       o->item_generation, o->path);
		break;
	case BTRFSIMG_OWNER_RECOVERED:
		printf("  %s offset %" PRIu64 "+%" PRIu64 " gen %" PRIu64 "  %s", o->version_id,
		       o->file_offset, o->file_length, o->extent_generation, o->path);
		break;
	case BTRFSIMG_OWNER_EXTENT:
		printf("  extent %" PRIu64 " ref root %" PRIu64 " inode %" PRIu64 " offset %" PRIu64
		       " (no file item found)", o->extent_bytenr, o->subvol, o->objectid,
		       o->file_offset);
		break;
	case BTRFSIMG_OWNER_TREE_BLOCK:
		printf("  block %" PRIu64 " of tree %" PRIu64 " gen %" PRIu64, o->extent_bytenr,
		       o->tree_root, o->extent_generation);
		break;
	default:
		break;
	}
	printf("\n");
}

static int on_owner(void *ctx, const struct btrfsimg_owner *o)
{
	struct owner_run *r = ctx;
	bool keep = o->kind != BTRFSIMG_OWNER_UNMAPPED && o->kind != BTRFSIMG_OWNER_PARITY &&
		    o->kind != BTRFSIMG_OWNER_RECOVERED;
	if (r->c->only_deleted && keep && !(r->nranges && r->ranges[r->nranges - 1][0] == o->logical)) {
		if (r->nranges == r->cap && r->cap < MAX_RANGES) {
			size_t cap = r->cap ? r->cap * 2 : 64;
			void *v = realloc(r->ranges, cap * sizeof(*r->ranges));
			if (v) {
				r->ranges = v;
				r->cap = cap;
			}
		}
		if (r->nranges < r->cap) {
			r->ranges[r->nranges][0] = o->logical;
			r->ranges[r->nranges++][1] = o->length;
		} else {
			r->cut = true;
		}
	}
	if (!r->c->json && r->n == 0) /* the header only above records: none for a refusal */
		printf("%-10s %14s %10s  owner\n", "kind", "logical", "length");
	if (r->c->json)
		owner_json(o);
	else
		owner_text(o);
	r->n++;
	return 0;
}

/* --deleted: the recovered versions over each logical range the live
 * answer covered (the forensic scan reads every device once). */
static int recovered_owners(struct cli *c, struct owner_run *r)
{
	btrfsimg_forensic *f;
	int st = rec_scan(c, &f);
	if (st)
		return -EIO;
	if (r->cut)
		cli_warn("owner: --deleted: only the first %d logical ranges asked", MAX_RANGES);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < r->nranges; i++)
		rc = btrfsimg_forensic_owners(f, r->ranges[i][0], r->ranges[i][1], on_owner, r);
	btrfsimg_forensic_free(f);
	return rc;
}

static int cmd_owner(struct cli *c)
{
	struct owner_run r = { c, 0, NULL, 0, 0, false };
	uint64_t len = c->have_length ? c->length : 1;
	int rc;
	if (c->have_logical)
		rc = btrfsimg_owners_logical(c->fs, c->logical, len, on_owner, &r);
	else if (c->have_devid)
		rc = btrfsimg_owners_device(c->fs, c->devid, c->physical, len, on_owner, &r);
	else
		rc = btrfsimg_owners_image(c->fs, c->nimages == 1 ? NULL : c->images[0],
					   c->image_offset, len, on_owner, &r);
	if (rc >= 0 && c->only_deleted)
		rc = recovered_owners(c, &r);
	free(r.ranges);
	if (rc < 0 && r.n == 0)
		return cli_fail(c, rc, "owner");
	if (rc < 0) {
		cli_warn("owner: stopped after %" PRIu64 " records: %s", r.n,
			 btrfsimg_errmsg(c->fs));
		return EXIT_DAMAGED;
	}
	return cli_status(c);
}

static int owner_check(struct cli *c)
{
	if (cli_need_images(c, 1, "IMAGE..."))
		return EXIT_USAGE;
	int ways = c->have_logical + c->have_devid + c->have_image_offset;
	if (ways != 1) {
		cli_warn("owner: give one of --logical L, --devid N --physical BYTES, or "
			 "--image-offset X");
		return EXIT_USAGE;
	}
	if (c->have_devid != c->have_physical) {
		cli_warn("owner: --devid and --physical go together");
		return EXIT_USAGE;
	}
	if (c->have_image_offset && c->nimages != 1) {
		cli_warn("owner: --image-offset X counts in the first IMAGE given, and %d were"
			 " given: ask by --devid N --physical BYTES instead", c->nimages);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static const struct cmd_option owner_options[] = {
	{ OPT_LOGICAL, NULL },
	{ OPT_DEVID, NULL },
	{ OPT_PHYSICAL, NULL },
	{ OPT_IMAGE_OFFSET, NULL },
	{ OPT_LENGTH, NULL },
	{ OPT_DELETED, "also the recovered versions whose data covered it\n"
		       "(reads every device: see 'btrfsimg deleted')" },
	{ OPT_JSON, NULL },
	CMD_IMAGE_OPTIONS, { OPT_GENERATION, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_owner = {
	.name = "owner",
	.summary = "which files own a byte range (logical, device or image offset)",
	.args = "IMAGE...",
	.about = "What holds a byte range: the files (in every subvolume and snapshot) whose\n"
		 "extents cover it, with their paths and file offsets, as logical-resolve\n"
		 "finds them; or a tree block, free space in a chunk, RAID parity, or space\n"
		 "in no chunk. One line per part and owner.",
	.examples = "btrfsimg owner --logical 13631488 disk.img\n"
		    "btrfsimg owner --devid 2 --physical 22020096 --length 4096 d1.img d2.img\n"
		    "btrfsimg owner --image-offset 1048576000 --json disk.img\n"
		    "btrfsimg owner --deleted --logical 13631488 --length 4096 disk.img",
	.options = owner_options,
	.check = owner_check,
	.run = cmd_owner,
};
