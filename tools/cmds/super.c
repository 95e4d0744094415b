// SPDX-License-Identifier: MIT
/* btrfsimg super: the superblock in use and every copy's state. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/json.h"

static const char *const mirror_state[] = {
	"absent", "valid", "bad magic", "bad bytenr", "bad checksum", "bad fields",
	"other filesystem", "I/O error",
};

/* The name of feature bit @bit, or "unknown bit N" in @buf. */
static const char *feature(enum btrfsimg_feature_kind kind, unsigned bit, char buf[24])
{
	const char *name = btrfsimg_feature_name(kind, bit);
	if (name)
		return name;
	snprintf(buf, 24, "unknown bit %u", bit);
	return buf;
}

static void features_json(struct jw *w, const char *key, enum btrfsimg_feature_kind kind,
			  uint64_t flags)
{
	char buf[24];
	jw_open_arr(w, key);
	for (unsigned bit = 0; bit < 64; bit++)
		if (flags >> bit & 1)
			jw_str(w, NULL, feature(kind, bit, buf));
	jw_close_arr(w);
}

static void facts_json(struct jw *w, const struct btrfsimg_fs_facts *f)
{
	jw_open_arr(w, "devices");
	for (size_t i = 0; i < f->ndevices; i++) {
		const struct btrfsimg_device *d = &f->devices[i];
		jw_open_obj(w, NULL);
		jw_u64(w, "devid", d->devid);
		jw_uuid(w, "uuid", d->uuid, false);
		jw_u64(w, "total_bytes", d->total_bytes);
		jw_bool(w, "missing", d->missing);
		jw_str(w, "image", d->missing ? NULL : d->image);
		if (d->missing) {
			jw_null(w, "partition");
			jw_null(w, "offset");
			jw_null(w, "image_bytes");
			jw_null(w, "layers");
		} else {
			if (d->partition)
				jw_u64(w, "partition", (uint64_t)d->partition);
			else
				jw_null(w, "partition");
			jw_u64(w, "offset", d->offset);
			jw_u64(w, "image_bytes", d->size);
			jw_str(w, "layers", f->where ? f->where[i].chain : NULL);
		}
		jw_close_obj(w);
	}
	jw_close_arr(w);
	jw_open_arr(w, "profiles");
	for (size_t i = 0; i < f->nprofiles; i++) {
		const struct btrfsimg_profile_use *p = &f->profiles[i];
		jw_open_obj(w, NULL);
		jw_str(w, "type", btrfsimg_bg_type_name(p->type));
		jw_str(w, "profile", p->profile);
		jw_u64(w, "chunks", p->chunks);
		jw_u64(w, "bytes", p->bytes);
		jw_u64(w, "tolerates", p->tolerates);
		jw_close_obj(w);
	}
	jw_close_arr(w);
	if (f->have_log) {
		jw_open_obj(w, "log_tree");
		jw_bool(w, "present", f->log.present);
		jw_bool(w, "replayed", f->log.replayed);
		jw_u64(w, "items", f->log.items);
		jw_u64(w, "subvols", f->log.subvols);
		jw_close_obj(w);
	}
}

static void super_json(const struct btrfsimg_super_info *s, const struct btrfsimg_fs_facts *f)
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
	features_json(&w, "incompat_features", BTRFSIMG_FEATURE_INCOMPAT, s->incompat_flags);
	features_json(&w, "compat_ro_features", BTRFSIMG_FEATURE_COMPAT_RO, s->compat_ro_flags);
	facts_json(&w, f);
	jw_end(&w);
}

static void print_uuid(const char *name, const uint8_t u[16])
{
	printf("%-22s", name);
	for (int i = 0; i < 16; i++)
		printf("%s%02x", (i == 4 || i == 6 || i == 8 || i == 10) ? "-" : "", u[i]);
	printf("\n");
}

/* "0x3e1" and the names of the bits set, wrapped under the value. */
static void print_flags(const char *name, enum btrfsimg_feature_kind kind, uint64_t flags)
{
	char buf[24];
	int col = printf("%-22s0x%" PRIx64, name, flags);
	bool first = true;
	for (unsigned bit = 0; bit < 64; bit++) {
		if (!(flags >> bit & 1))
			continue;
		const char *n = feature(kind, bit, buf);
		if (first || col + 1 + (int)strlen(n) > 78) {
			col = printf("\n%-22s%s", "", n) - 1;
			first = false;
		} else {
			col += printf(" %s", n);
		}
	}
	printf("\n");
}

/* Where the image holding a device was opened: "disk.img, partition 1 at
 * offset 1048576 > luks2 UUID > lvm-lv vg/lv", "disk.img at offset N", or
 * the image. */
static void print_where(const struct btrfsimg_device *d, const struct btrfsimg_device_where *w)
{
	if (d->missing) {
		printf("missing\n");
		return;
	}
	printf("%s", d->image ? d->image : "?");
	if (w && w->chain[0])
		printf(", %s", w->chain);
	else if (d->partition)
		printf(", partition %d at offset %" PRIu64, d->partition, d->offset);
	else if (d->offset)
		printf(" at offset %" PRIu64, d->offset);
	printf("\n");
}

static void facts_text(const struct btrfsimg_fs_facts *f)
{
	size_t missing = 0;
	for (size_t i = 0; i < f->ndevices; i++)
		missing += f->devices[i].missing;
	printf("%-22s%zu", "devices", f->ndevices);
	if (missing)
		printf(", %zu missing", missing);
	printf("\n  %5s  %-36s  %13s  %s\n", "devid", "uuid", "bytes", "image");
	for (size_t i = 0; i < f->ndevices; i++) {
		const struct btrfsimg_device *d = &f->devices[i];
		printf("  %5" PRIu64 "  ", d->devid);
		for (int k = 0; k < 16; k++)
			printf("%s%02x", (k == 4 || k == 6 || k == 8 || k == 10) ? "-" : "",
			       d->uuid[k]);
		printf("  %13" PRIu64 "  ", d->total_bytes);
		print_where(d, f->where ? &f->where[i] : NULL);
	}
	printf("profiles\n");
	for (size_t i = 0; i < f->nprofiles; i++) {
		const struct btrfsimg_profile_use *p = &f->profiles[i];
		printf("  %-13s %-7s %4" PRIu64 " chunk%s %13" PRIu64 " bytes, tolerates %u "
		       "missing device%s\n",
		       btrfsimg_bg_type_name(p->type), p->profile, p->chunks,
		       p->chunks == 1 ? " " : "s", p->bytes, p->tolerates,
		       p->tolerates == 1 ? "" : "s");
	}
}

static void super_text(const struct btrfsimg_super_info *s, const struct btrfsimg_fs_facts *f)
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
	print_flags("incompat_flags", BTRFSIMG_FEATURE_INCOMPAT, s->incompat_flags);
	print_flags("compat_ro_flags", BTRFSIMG_FEATURE_COMPAT_RO, s->compat_ro_flags);
	printf("copy in use           %d (devid %" PRIu64 ")\n", s->mirror_used, s->devid);
	for (int i = 0; i < 3; i++) {
		const struct btrfsimg_super_mirror *m = &s->mirrors[i];
		printf("  copy %d at %-14" PRIu64 " %s", i, m->bytenr, mirror_state[m->state]);
		if (m->generation)
			printf(", generation %" PRIu64, m->generation);
		printf("\n");
	}
	facts_text(f);
}

static int cmd_super(struct cli *c)
{
	struct btrfsimg_fs_facts *f;
	int rc = btrfsimg_fs_facts(c->fs, &f);
	if (rc < 0)
		return cli_fail(c, rc, "super");
	if (c->json)
		super_json(&f->super, f);
	else
		super_text(&f->super, f);
	btrfsimg_fs_facts_free(f);
	return cli_status(c);
}

static const struct cmd_option super_options[] = {
	{ OPT_JSON, "one JSON object" },
	{ OPT_FORMAT, NULL },
	{ OPT_PARTITION, NULL },
	{ OPT_OFFSET, NULL },
	{ OPT_SUPER_MIRROR, NULL },
	{ OPT_GENERATION, NULL },
	{ OPT_FSID, NULL },
	{ OPT_NO_LOG_REPLAY, "do not replay the log tree (the same output; a damaged\n"
			     "log tree is then not reported)" },
	{ OPT_PASSPHRASE_FILE, NULL },
	{ OPT_VOLUME_KEY_FILE, NULL },
	{ OPT_KDF_LIMIT, NULL },
	{ OPT_VERBOSE, NULL },
	{ OPT_QUIET, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_super = {
	.name = "super",
	.summary = "the superblock in use and the state of every copy",
	.args = "IMAGE...",
	.about = "The superblock in use (fsid, label, generation, tree roots, checksum type,\n"
		 "sizes, the incompat and compat_ro flags by name), the copy it came from,\n"
		 "the state of the three copies of the first image given, every device\n"
		 "(devid, uuid, size, the image and partition or offset it was read from,\n"
		 "or missing) and the profiles in use with how many devices each may lose.",
	.examples = "btrfsimg super disk.img\n"
		    "btrfsimg super dev1.img dev3.img\n"
		    "btrfsimg super --json --super-mirror 1 disk.img\n"
		    "btrfsimg super --partition 2 whole-disk.img",
	.options = super_options,
	.run = cmd_super,
};
