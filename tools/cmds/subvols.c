// SPDX-License-Identifier: MIT
/*
 * btrfsimg subvols: every subvolume and snapshot from the root tree, with
 * what each is: a snapshot (and of which subvolume), read-only, deleted,
 * the default. Filters as btrfs subvolume list's -s, -r and -d.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/json.h"
#include "common/text.h"

static bool zero_uuid(const uint8_t u[16])
{
	static const uint8_t zero[16];
	return memcmp(u, zero, 16) == 0;
}

/* ------------------------------------------------------------ output */

static void subvol_json(const struct btrfsimg_subvol *s, bool def)
{
	struct jw w;
	jw_begin(&w, stdout);
	jw_u64(&w, "id", s->id);
	if (s->id == 5 || !s->parent_id)
		jw_null(&w, "parent_id");
	else
		jw_u64(&w, "parent_id", s->parent_id);
	jw_str(&w, "path", s->path);
	jw_uuid(&w, "uuid", s->uuid, true);
	jw_uuid(&w, "parent_uuid", s->parent_uuid, true);
	jw_uuid(&w, "received_uuid", s->received_uuid, true);
	jw_u64(&w, "generation", s->generation);
	jw_u64(&w, "cgen", s->cgen);
	jw_time(&w, "otime", s->otime_sec, s->otime_nsec);
	jw_bool(&w, "readonly", s->readonly);
	jw_bool(&w, "deleted", s->deleted);
	jw_bool(&w, "snapshot", s->snapshot);
	if (s->snapshot_of)
		jw_u64(&w, "snapshot_of", s->snapshot_of);
	else
		jw_null(&w, "snapshot_of");
	jw_bool(&w, "default", def);
	jw_end(&w);
}

static void put_path(const struct btrfsimg_subvol *s)
{
	if (!s->path)
		printf("<unreachable>");
	else if (!*s->path)
		printf("<top level>");
	else
		text_name(stdout, (const uint8_t *)s->path, strlen(s->path), NULL);
}

static void put_uuid(const uint8_t u[16])
{
	for (int i = 0; i < 16; i++)
		printf("%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", u[i]);
}

/* "[snapshot of PATH]"; "ID N" for a source without a path, its uuid when
 * no subvolume here has it. */
static void put_snapshot(const struct btrfsimg_subvol *s, const struct btrfsimg_subvol *source)
{
	printf("  [snapshot");
	if (source && source->path) {
		printf(" of ");
		put_path(source);
	} else if (source) {
		printf(" of ID %" PRIu64, source->id);
	} else if (!zero_uuid(s->parent_uuid)) {
		printf(" of ");
		put_uuid(s->parent_uuid);
		printf(" (gone)");
	}
	putchar(']');
}

static void subvol_text(const struct btrfsimg_subvol *s, const struct btrfsimg_subvol *source,
			bool def)
{
	char otime[TEXT_TIME_MAX];
	text_time(otime, s->otime_sec, s->otime_nsec);
	printf("ID %-6" PRIu64 " gen %-8" PRIu64 " cgen %-8" PRIu64 " parent %-6" PRIu64
	       " otime %s  ",
	       s->id, s->generation, s->cgen, s->parent_id, otime);
	put_path(s);
	if (s->snapshot || source)
		put_snapshot(s, source);
	printf("%s%s%s\n", s->readonly ? "  [readonly]" : "", s->deleted ? "  [deleted]" : "",
	       def ? "  [default]" : "");
}

/* --snapshots, --readonly, --deleted: each given one must hold. */
static bool wanted(const struct cli *c, const struct btrfsimg_subvol *s)
{
	return (!c->only_snapshots || s->snapshot) && (!c->only_readonly || s->readonly) &&
	       (!c->only_deleted || s->deleted);
}

static int cmd_subvols(struct cli *c)
{
	struct btrfsimg_subvol *v;
	size_t n;
	int rc = btrfsimg_subvols(c->fs, &v, &n);
	if (rc < 0)
		return cli_fail(c, rc, "subvols");
	uint64_t def = 5;
	if (btrfsimg_default_subvol(c->fs, &def) < 0)
		c->errors++;
	for (size_t i = 0; i < n; i++) {
		if (!wanted(c, &v[i]))
			continue;
		if (c->json)
			subvol_json(&v[i], v[i].id == def);
		else
			subvol_text(&v[i], btrfsimg_subvol_find(v, n, v[i].snapshot_of),
				    v[i].id == def);
	}
	btrfsimg_subvols_free(v, n);
	return cli_status(c);
}

static const struct cmd_option subvols_options[] = {
	{ OPT_JSON, "one JSON object per subvolume" },
	{ OPT_SNAPSHOTS, "only snapshots (btrfs subvolume list -s)" },
	{ OPT_READONLY, "only read-only subvolumes (-r)" },
	{ OPT_DELETED, "only deleted subvolumes not yet cleaned (-d)" },
	CMD_IMAGE_OPTIONS, { OPT_GENERATION, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_subvols = {
	.name = "subvols",
	.summary = "every subvolume and snapshot",
	.args = "IMAGE...",
	.about = "Every subvolume and snapshot: id, generation, creation generation, parent,\n"
		 "otime (ISO 8601, UTC, ns), path (escaped as walk's), then what it is:\n"
		 "[snapshot of SOURCE] (the subvolume whose uuid is its parent uuid),\n"
		 "[readonly], [deleted] (not yet cleaned), [default]. Filters, all of\n"
		 "which must hold: -s, -r, -d as in btrfs subvolume list.",
	.examples = "btrfsimg subvols disk.img\n"
		    "btrfsimg subvols --snapshots --readonly disk.img\n"
		    "btrfsimg subvols --json dev1.img dev2.img",
	.options = subvols_options,
	.run = cmd_subvols,
};
