// SPDX-License-Identifier: MIT
/* btrfsimg subvols: every subvolume and snapshot from the root tree. */
#include <inttypes.h>
#include <stdio.h>

#include "cli.h"
#include "json.h"

static void subvol_json(const struct btrfsimg_subvol *s)
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
	jw_end(&w);
}

static void subvol_text(const struct btrfsimg_subvol *s, uint64_t def)
{
	printf("ID %-6" PRIu64 " gen %-8" PRIu64 " cgen %-8" PRIu64 " parent %-6" PRIu64
	       " %s%s%s%s\n",
	       s->id, s->generation, s->cgen, s->parent_id,
	       s->path ? (*s->path ? s->path : "<top level>") : "<unreachable>",
	       s->readonly ? "  [readonly]" : "", s->deleted ? "  [deleted]" : "",
	       s->id == def ? "  [default]" : "");
}

static int cmd_subvols(struct cli *c)
{
	struct btrfsimg_subvol *v;
	size_t n;
	int rc = btrfsimg_subvols(c->fs, &v, &n);
	if (rc < 0)
		return cli_fail(c, rc, "subvols");
	uint64_t def = 5;
	if (!c->json && btrfsimg_default_subvol(c->fs, &def) < 0)
		c->errors++;
	for (size_t i = 0; i < n; i++) {
		if (c->json)
			subvol_json(&v[i]);
		else
			subvol_text(&v[i], def);
	}
	btrfsimg_subvols_free(v, n);
	return cli_status(c);
}

static const struct cmd_option subvols_options[] = {
	{ OPT_JSON, "one JSON object per subvolume" },
	CMD_IMAGE_OPTIONS,
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_subvols = {
	.name = "subvols",
	.summary = "every subvolume and snapshot",
	.args = "IMAGE...",
	.about = "Every subvolume and snapshot: id, parent, path, uuids, generations, otime,\n"
		 "read-only, deleted; the default subvolume is marked.",
	.examples = "btrfsimg subvols disk.img\n"
		    "btrfsimg subvols --json dev1.img dev2.img",
	.options = subvols_options,
	.run = cmd_subvols,
};
