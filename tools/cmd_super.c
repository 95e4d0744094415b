// SPDX-License-Identifier: MIT
/* btrfsimg super: the superblock in use and every copy's state. */
#include <inttypes.h>
#include <stdio.h>

#include "cli.h"
#include "json.h"

static const char *const mirror_state[] = {
	"absent", "valid", "bad magic", "bad bytenr", "bad checksum", "bad fields",
	"other filesystem", "I/O error",
};

static void super_json(const struct btrfsimg_super_info *s)
{
	struct jw w;
	jw_begin(&w, stdout);
	jw_uuid(&w, "fsid", s->fsid, false);
	jw_uuid(&w, "metadata_uuid", s->metadata_uuid, false);
	jw_str(&w, "label", s->label);
	jw_u64(&w, "generation", s->generation);
	jw_u64(&w, "root", s->root);
	jw_u64(&w, "chunk_root", s->chunk_root);
	jw_u64(&w, "log_root", s->log_root);
	jw_str(&w, "csum_type", btrfsimg_csum_name(s->csum_type));
	jw_u64(&w, "nodesize", s->nodesize);
	jw_u64(&w, "sectorsize", s->sectorsize);
	jw_u64(&w, "num_devices", s->num_devices);
	jw_u64(&w, "total_bytes", s->total_bytes);
	jw_u64(&w, "bytes_used", s->bytes_used);
	jw_u64(&w, "incompat_flags", s->incompat_flags);
	jw_u64(&w, "compat_ro_flags", s->compat_ro_flags);
	jw_open_arr(&w, "mirrors");
	for (int i = 0; i < 3; i++) {
		const struct btrfsimg_super_mirror *m = &s->mirrors[i];
		if (m->state == BTRFSIMG_MIRROR_ABSENT)
			continue;
		jw_open_obj(&w, NULL);
		jw_u64(&w, "index", (uint64_t)m->index);
		jw_u64(&w, "bytenr", m->bytenr);
		jw_bool(&w, "valid", m->state == BTRFSIMG_MIRROR_VALID);
		jw_u64(&w, "generation", m->generation);
		jw_close_obj(&w);
	}
	jw_close_arr(&w);
	jw_end(&w);
}

static void print_uuid(const char *name, const uint8_t u[16])
{
	printf("%-22s", name);
	for (int i = 0; i < 16; i++)
		printf("%s%02x", (i == 4 || i == 6 || i == 8 || i == 10) ? "-" : "", u[i]);
	printf("\n");
}

static void super_text(const struct btrfsimg_super_info *s)
{
	print_uuid("fsid", s->fsid);
	print_uuid("metadata_uuid", s->metadata_uuid);
	printf("%-22s%s\n", "label", s->label);
	printf("%-22s%" PRIu64 "\n", "generation", s->generation);
	printf("%-22s%" PRIu64 " (level %u)\n", "root", s->root, s->root_level);
	printf("%-22s%" PRIu64 " (level %u)\n", "chunk_root", s->chunk_root, s->chunk_root_level);
	printf("%-22s%" PRIu64 " (level %u)\n", "log_root", s->log_root, s->log_root_level);
	printf("%-22s%s\n", "csum_type", btrfsimg_csum_name(s->csum_type));
	printf("%-22s%u\n%-22s%u\n", "nodesize", s->nodesize, "sectorsize", s->sectorsize);
	printf("%-22s%" PRIu64 "\n", "num_devices", s->num_devices);
	printf("%-22s%" PRIu64 "\n%-22s%" PRIu64 "\n", "total_bytes", s->total_bytes, "bytes_used",
	       s->bytes_used);
	printf("%-22s0x%" PRIx64 "\n%-22s0x%" PRIx64 "\n", "incompat_flags", s->incompat_flags,
	       "compat_ro_flags", s->compat_ro_flags);
	printf("copy in use           %d (devid %" PRIu64 ")\n", s->mirror_used, s->devid);
	for (int i = 0; i < 3; i++) {
		const struct btrfsimg_super_mirror *m = &s->mirrors[i];
		printf("  copy %d at %-14" PRIu64 " %s", i, m->bytenr, mirror_state[m->state]);
		if (m->generation)
			printf(", generation %" PRIu64, m->generation);
		printf("\n");
	}
}

static int cmd_super(struct cli *c)
{
	struct btrfsimg_super_info s;
	int rc = btrfsimg_super(c->fs, &s);
	if (rc < 0)
		return cli_fail(c, rc, "super");
	if (c->json)
		super_json(&s);
	else
		super_text(&s);
	return cli_status(c);
}

static const struct cmd_option super_options[] = {
	{ OPT_JSON, "one JSON object" },
	{ OPT_PARTITION, NULL },
	{ OPT_OFFSET, NULL },
	{ OPT_SUPER_MIRROR, NULL },
	{ OPT_NO_LOG_REPLAY, "do not replay the log tree (the same output; a damaged\n"
			     "log tree is then not reported)" },
	{ OPT_VERBOSE, NULL },
	{ OPT_QUIET, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_super = {
	.name = "super",
	.summary = "the superblock in use and the state of every copy",
	.args = "IMAGE...",
	.about = "The superblock in use (fsid, label, generation, tree roots, checksum type,\n"
		 "sizes, flags), the copy it came from, and the state of the three copies\n"
		 "of the first image given.",
	.examples = "btrfsimg super disk.img\n"
		    "btrfsimg super --json --super-mirror 1 disk.img\n"
		    "btrfsimg super --partition 2 whole-disk.img",
	.options = super_options,
	.run = cmd_super,
};
