// SPDX-License-Identifier: MIT
/* btrfsimg extents: where one file's bytes lie (as TSK's istat lists a
 * file's blocks): file offset, length, type, compression, logical
 * address, every copy's device, physical and image offset, and whether
 * btrfs checksums cover it. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "btrfsimg_forensic.h"
#include "cli.h"
#include "common/json.h"
#include "common/recovered.h"

static const char *type_name(int t)
{
	static const char *const names[] = { "inline", "regular", "prealloc", "hole" };
	return t >= 0 && t < 4 ? names[t] : "?";
}

static const char *comp_name(int c)
{
	static const char *const names[] = { "none", "zlib", "lzo", "zstd" };
	return c >= 0 && c < 4 ? names[c] : "?";
}

static void copy_json(struct jw *w, const struct btrfsimg_extent_copy *k)
{
	jw_open_obj(w, NULL);
	jw_u64(w, "devid", k->devid);
	jw_str(w, "device", k->device);
	jw_u64(w, "physical", k->physical);
	if (k->has_disk_offset)
		jw_u64(w, "disk_offset", k->disk_offset);
	else
		jw_null(w, "disk_offset");
	if (k->has_image_offset)
		jw_u64(w, "image_offset", k->image_offset);
	else
		jw_null(w, "image_offset");
	jw_str(w, "note", k->note[0] ? k->note : NULL);
	jw_close_obj(w);
}

static void extent_json(uint64_t subvol, uint64_t obj, const struct btrfsimg_extent *e)
{
	struct jw w;
	jw_begin(&w, stdout);
	if (obj) { /* a recovered version's records carry no live ids */
		jw_u64(&w, "subvol", subvol);
		jw_u64(&w, "objectid", obj);
	}
	jw_u64(&w, "file_offset", e->file_offset);
	jw_u64(&w, "length", e->length);
	jw_str(&w, "type", type_name(e->type));
	jw_str(&w, "compression", comp_name(e->compression));
	jw_u64(&w, "item_offset", e->item_offset);
	jw_u64(&w, "generation", e->generation);
	jw_u64(&w, "ram_bytes", e->ram_bytes);
	jw_u64(&w, "disk_bytenr", e->disk_bytenr);
	jw_u64(&w, "disk_num_bytes", e->disk_num_bytes);
	jw_u64(&w, "extent_offset", e->extent_offset);
	jw_u64(&w, "logical", e->logical);
	jw_u64(&w, "disk_length", e->disk_length);
	jw_str(&w, "csum", btrfsimg_csum_cover_name(e->csum));
	jw_u64(&w, "csum_bytes", e->csum_bytes);
	jw_open_arr(&w, "copies");
	for (size_t i = 0; i < e->ncopies; i++)
		copy_json(&w, &e->copies[i]);
	jw_close_arr(&w);
	jw_end(&w);
}

static void extent_text(const struct btrfsimg_extent *e)
{
	printf("%14" PRIu64 " %12" PRIu64 "  %-8s %-4s %14" PRIu64 " %10" PRIu64 "  %-9s", e->file_offset,
	       e->length, type_name(e->type), comp_name(e->compression), e->logical, e->disk_length,
	       btrfsimg_csum_cover_name(e->csum));
	for (size_t i = 0; i < e->ncopies; i++) {
		const struct btrfsimg_extent_copy *k = &e->copies[i];
		printf(" %" PRIu64 ":%" PRIu64, k->devid, k->physical);
		if (k->has_image_offset)
			printf("@%" PRIu64, k->image_offset);
		else if (k->has_disk_offset)
			printf("@disk:%" PRIu64, k->disk_offset);
		else
			printf("@-");
	}
	printf("\n");
}

/* Each copy whose place in the image is unknown, said once per note. */
static void notes(const struct btrfsimg_extent *e, const char **said)
{
	for (size_t i = 0; i < e->ncopies; i++) {
		const char *n = e->copies[i].note;
		if (n[0] && *said != n) {
			cli_warn("extents: devid %" PRIu64 " (%s): %s", e->copies[i].devid,
				 e->copies[i].device ? e->copies[i].device : "missing", n);
			*said = n;
		}
	}
}

struct ver_run {
	struct cli *c;
	const char *said;
	uint64_t n;
};

static int on_version_extent(void *ctx, const struct btrfsimg_extent *e)
{
	struct ver_run *r = ctx;
	if (!r->c->json && r->n == 0) /* the header only above records: none for a bad id */
		printf("%14s %12s  %-8s %-4s %14s %10s  %-9s copies (devid:physical@image_offset)\n",
		       "file_offset", "length", "type", "comp", "logical", "disk_len", "csum");
	if (r->c->json)
		extent_json(0, 0, e);
	else
		extent_text(e);
	notes(e, &r->said);
	r->n++;
	return 0;
}

/* --deleted ID: the recovered version's items, from the forensic scan. */
static int version_extents(struct cli *c)
{
	btrfsimg_forensic *f;
	int st = rec_scan(c, &f);
	if (st)
		return st;
	struct ver_run r = { c, NULL, 0 };
	int rc = btrfsimg_forensic_extents(f, c->deleted_id, on_version_extent, &r);
	btrfsimg_forensic_free(f);
	if (rc < 0 && r.n == 0)
		return cli_fail(c, rc, "extents");
	if (rc < 0) {
		cli_warn("extents: stopped after %" PRIu64 " records: %s", r.n,
			 btrfsimg_errmsg(c->fs));
		return EXIT_DAMAGED;
	}
	return cli_status(c);
}

static int cmd_extents(struct cli *c)
{
	if (c->deleted_id)
		return version_extents(c);
	uint64_t subvol = c->inode_subvol, obj = c->inode_objectid;
	int rc = 0;
	if (!c->inode) {
		struct btrfsimg_dirent d;
		rc = btrfsimg_path_lookup(c->fs, c->have_subvol ? c->subvol : 5, c->path, &d);
		subvol = d.target_subvol;
		obj = d.target_objectid;
	}
	btrfsimg_extents *it = NULL;
	if (rc == 0)
		rc = btrfsimg_extents_open(c->fs, subvol, obj, BTRFSIMG_EXTENTS_CSUM, &it);
	if (rc < 0)
		return cli_fail(c, rc, "extents");
	if (!c->json)
		printf("%14s %12s  %-8s %-4s %14s %10s  %-9s copies (devid:physical@image_offset)\n",
		       "file_offset", "length", "type", "comp", "logical", "disk_len", "csum");
	const struct btrfsimg_extent *e;
	const char *said = NULL;
	uint64_t n = 0;
	while ((rc = btrfsimg_extents_next(it, &e)) > 0) {
		if (c->json)
			extent_json(subvol, obj, e);
		else
			extent_text(e);
		notes(e, &said);
		n++;
	}
	btrfsimg_extents_close(it);
	if (rc < 0) {
		cli_warn("extents: stopped after %" PRIu64 " records: %s", n,
			 btrfsimg_errmsg(c->fs));
		return n ? EXIT_DAMAGED : EXIT_FAILED;
	}
	return cli_status(c);
}

static int extents_check(struct cli *c)
{
	if (cli_need_images(c, 1, "IMAGE...") || cli_inode_alone(c))
		return EXIT_USAGE;
	if (c->deleted_id && (c->path || c->inode || c->have_subvol)) {
		cli_warn("extents: --deleted ID names the version by itself: give it alone");
		return EXIT_USAGE;
	}
	if (!c->path && !c->inode && !c->deleted_id) {
		cli_warn("extents: give --path P, --inode SUBVOL:OBJECTID or --deleted ID");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static const struct cmd_option extents_options[] = {
	{ OPT_SUBVOL, "resolve --path in subvolume ID (default 5)" },
	{ OPT_PATH, "the file at path P" },
	{ OPT_INODE, "the file of objectid O in subvolume S" },
	{ OPT_DELETED_ID, "a recovered version (its id from 'btrfsimg deleted'):\n"
			  "the extents it had" },
	{ OPT_JSON, NULL },
	CMD_IMAGE_OPTIONS, { OPT_GENERATION, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_extents = {
	.name = "extents",
	.summary = "where a file's bytes lie: logical, device and image offsets",
	.args = "IMAGE...",
	.about = "One file's extents in file order, covering its size: file offset, length,\n"
		 "type (inline, regular, prealloc, hole), compression, logical address,\n"
		 "checksum coverage (full, partial, none, nodatasum, inline, zeros), and\n"
		 "each copy's devid, physical offset and offset in the image file.",
	.examples = "btrfsimg extents --path etc/fstab disk.img\n"
		    "btrfsimg extents --inode 256:260 --json disk.img\n"
		    "btrfsimg extents --deleted 5-260-7-24f34ba0 disk.img",
	.options = extents_options,
	.check = extents_check,
	.run = cmd_extents,
};
