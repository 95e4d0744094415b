// SPDX-License-Identifier: MIT
/* btrfsimg verify: an offline, read-only scrub (btrfsimg_scrub). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "btrfsimg_forensic.h"
#include "cli.h"
#include "common/json.h"
#include "common/progress.h"

#define DEFAULT_EXAMPLES 20

static int on_progress(void *ctx, uint64_t done, uint64_t total)
{
	(void)ctx;
	progress_bytes("verify", done, total);
	return 0;
}

/* Tree blocks read through a bad copy are reported by the library each
 * time a chunk's extents are loaded: say each message once. */
struct once_log {
	const struct cli *c;
	uint64_t seen[256];
	size_t n;
};

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

static void log_once(void *ctx, bool damage, const char *msg)
{
	struct once_log *l = ctx;
	if (!l->c->verbose && (!damage || l->c->quiet))
		return;
	uint64_t h = fnv1a(msg);
	for (size_t i = 0; i < l->n; i++)
		if (l->seen[i] == h)
			return;
	if (l->n < sizeof(l->seen) / sizeof(l->seen[0]))
		l->seen[l->n++] = h;
	fprintf(stderr, "btrfsimg: %s%s\n", damage ? "warning: " : "", msg);
}

static uint64_t errors_of(const struct btrfsimg_scrub_dev *d)
{
	return d->read_errors + d->csum_errors + d->verify_errors + d->parity_errors +
	       d->super_errors;
}

static void dev_json(const struct btrfsimg_scrub_dev *d)
{
	struct jw w;
	jw_begin(&w, stdout);
	jw_str(&w, "type", "device");
	jw_u64(&w, "devid", d->devid);
	if (d->name)
		jw_str(&w, "image", d->name);
	else
		jw_null(&w, "image");
	jw_bool(&w, "missing", d->missing);
	jw_u64(&w, "data_bytes_scrubbed", d->data_bytes_scrubbed);
	jw_u64(&w, "tree_bytes_scrubbed", d->tree_bytes_scrubbed);
	jw_u64(&w, "tree_blocks", d->tree_blocks);
	jw_u64(&w, "read_errors", d->read_errors);
	jw_u64(&w, "csum_errors", d->csum_errors);
	jw_u64(&w, "verify_errors", d->verify_errors);
	jw_u64(&w, "no_csum", d->no_csum);
	jw_u64(&w, "parity_bytes", d->parity_bytes);
	jw_u64(&w, "parity_errors", d->parity_errors);
	jw_u64(&w, "super_errors", d->super_errors);
	jw_u64(&w, "uncorrectable_errors", d->uncorrectable_errors);
	jw_u64(&w, "bytes_read", d->bytes_read);
	jw_u64(&w, "unchecked_bytes", d->unchecked_bytes);
	jw_u64(&w, "rebuilt_bytes", d->rebuilt_bytes);
	jw_u64(&w, "parity_unchecked_bytes", d->parity_unchecked_bytes);
	jw_end(&w);
}

static void err_json(const struct btrfsimg_scrub_error *e)
{
	struct jw w;
	jw_begin(&w, stdout);
	jw_str(&w, "type", "damage");
	jw_str(&w, "kind", btrfsimg_scrub_kind_name(e->kind));
	jw_u64(&w, "logical", e->logical);
	jw_u64(&w, "devid", e->devid);
	jw_u64(&w, "physical", e->physical);
	jw_u64(&w, "length", e->length);
	jw_i64(&w, "mirror", e->mirror);
	jw_bool(&w, "correctable", e->correctable);
	jw_str(&w, "detail", e->detail);
	jw_end(&w);
}

/* What the scrub could not check: stripe bytes (every one of a missing
 * device's), parity whose row could not be read, and of the missing
 * devices' bytes those rebuilt from parity and checked. */
struct gaps {
	uint64_t missing, unchecked, parity, rebuilt;
};

static struct gaps gaps_of(const struct btrfsimg_scrub_report *r)
{
	struct gaps g = { 0 };
	for (size_t i = 0; i < r->ndevs; i++) {
		g.missing += r->devs[i].missing;
		g.unchecked += r->devs[i].unchecked_bytes;
		g.parity += r->devs[i].parity_unchecked_bytes;
		g.rebuilt += r->devs[i].rebuilt_bytes;
	}
	return g;
}

static void summary_json(const struct btrfsimg_scrub_report *r, uint64_t errors)
{
	struct gaps g = gaps_of(r);
	struct jw w;
	jw_begin(&w, stdout);
	jw_str(&w, "type", "summary");
	jw_u64(&w, "errors", errors);
	jw_u64(&w, "damaged_ranges", r->total_errors);
	jw_u64(&w, "listed", r->nerrors);
	jw_u64(&w, "missing_devices", g.missing);
	jw_u64(&w, "unchecked_bytes", g.unchecked);
	jw_u64(&w, "parity_unchecked_bytes", g.parity);
	jw_u64(&w, "rebuilt_bytes", g.rebuilt);
	jw_bool(&w, "complete", !g.unchecked && !g.parity);
	jw_end(&w);
}

static void dev_text(const struct btrfsimg_scrub_dev *d)
{
	if (d->missing) {
		printf("device %" PRIu64 ": missing: its %" PRIu64 " bytes of chunk stripes not "
		       "read; of them %" PRIu64 " bytes of tree blocks and data in use rebuilt "
		       "from parity and checked (%" PRIu64 " sectors with a bad checksum, %" PRIu64
		       " failed tree sectors)\n",
		       d->devid, d->unchecked_bytes, d->rebuilt_bytes, d->csum_errors,
		       d->verify_errors);
		return;
	}
	printf("device %" PRIu64 " (%s)\n", d->devid, d->name);
	printf("  tree:  %" PRIu64 " bytes in %" PRIu64 " blocks, %" PRIu64
	       " sectors failed (verify_errors)\n",
	       d->tree_bytes_scrubbed, d->tree_blocks, d->verify_errors);
	printf("  data:  %" PRIu64 " bytes, %" PRIu64 " sectors with a bad checksum, %" PRIu64
	       " without a checksum (unverified)\n",
	       d->data_bytes_scrubbed, d->csum_errors, d->no_csum);
	if (d->parity_bytes || d->parity_errors)
		printf("  parity: %" PRIu64 " bytes, %" PRIu64 " sectors differ\n", d->parity_bytes,
		       d->parity_errors);
	if (d->unchecked_bytes)
		printf("  unchecked: %" PRIu64 " bytes of chunk stripes (their trees unreadable)\n",
		       d->unchecked_bytes);
	if (d->parity_unchecked_bytes)
		printf("  unchecked: %" PRIu64 " bytes of parity (a device of the row missing)\n",
		       d->parity_unchecked_bytes);
	printf("  read errors %" PRIu64 ", superblock errors %" PRIu64 ", uncorrectable %" PRIu64
	       " sectors; %" PRIu64 " bytes read\n",
	       d->read_errors, d->super_errors, d->uncorrectable_errors, d->bytes_read);
}

static void err_text(const struct btrfsimg_scrub_error *e)
{
	printf("  %-11s logical %" PRIu64 " device %" PRIu64 " physical %" PRIu64
	       " mirror %d, %" PRIu32 " bytes, %s: %s\n",
	       btrfsimg_scrub_kind_name(e->kind), e->logical, e->devid, e->physical, e->mirror,
	       e->length, e->correctable ? "correctable" : "uncorrectable", e->detail);
}

static void report(const struct cli *c, const struct btrfsimg_scrub_report *r)
{
	uint64_t errors = 0;
	for (size_t i = 0; i < r->ndevs; i++)
		errors += errors_of(&r->devs[i]);
	if (c->json) {
		for (size_t i = 0; i < r->ndevs; i++)
			dev_json(&r->devs[i]);
		for (size_t i = 0; i < r->nerrors; i++)
			err_json(&r->errors[i]);
		summary_json(r, errors);
		return;
	}
	for (size_t i = 0; i < r->ndevs; i++)
		dev_text(&r->devs[i]);
	struct gaps g = gaps_of(r);
	if (g.unchecked || g.parity)
		printf("not checked: %" PRIu64 " bytes of chunk stripes (all of the %" PRIu64
		       " missing devices', and those of chunks whose trees could not be read), %"
		       PRIu64 " bytes of parity (a device of its row missing); of the missing "
		       "devices' tree blocks and data, %" PRIu64
		       " bytes rebuilt from parity and checked\n",
		       g.unchecked, g.missing, g.parity, g.rebuilt);
	if (!r->total_errors) {
		printf(g.unchecked || g.parity ? "no damage found in what could be checked\n"
					       : "no damage found\n");
		return;
	}
	printf("damage: %" PRIu64 " ranges", r->total_errors);
	if (r->nerrors < r->total_errors)
		printf(", the first %zu (--examples N, 0 for every one)", r->nerrors);
	printf("\n");
	for (size_t i = 0; i < r->nerrors; i++)
		err_text(&r->errors[i]);
}

static int cmd_verify(struct cli *c)
{
	struct btrfsimg_scrub_opts o = {
		.max_errors = c->have_examples ? c->examples : DEFAULT_EXAMPLES,
		.progress = on_progress,
	};
	struct btrfsimg_scrub_report *r;
	struct once_log l = { .c = c };
	btrfsimg_set_log(c->fs, log_once, &l);
	int rc = btrfsimg_scrub(c->fs, &o, &r);
	progress_done();
	if (rc < 0)
		return cli_fail(c, rc, "verify");
	report(c, r);
	bool damaged = r->total_errors > 0;
	for (size_t i = 0; i < r->ndevs; i++)
		damaged |= r->devs[i].missing;
	btrfsimg_scrub_report_free(r);
	return damaged ? EXIT_DAMAGED : cli_status(c);
}

static const struct cmd_option verify_options[] = {
	{ OPT_JSON, "JSON lines: each device, each damaged range, a summary" },
	{ OPT_EXAMPLES, "list the first N damaged ranges (default 20; 0: all)" },
	CMD_IMAGE_OPTIONS,
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_verify = {
	.name = "verify",
	.summary = "offline scrub: every copy of every block against its checksum",
	.args = "IMAGE...",
	.about = "Read every device from start to end and check every copy of every tree\n"
		 "block and data sector the extent tree says is in use, as `btrfs scrub`\n"
		 "does, but offline and read-only: tree blocks by header checksum, bytenr,\n"
		 "fsid and generation; data sectors by the csum tree (sectors without a\n"
		 "checksum, nodatasum, are counted as unverified); RAID5/6 parity against\n"
		 "its row; superblock copies. Prints per device the kernel's counters\n"
		 "(btrfs scrub start -R -d: data and tree bytes, csum, verify, read and\n"
		 "super errors, no_csum, uncorrectable) and the first damaged ranges: kind,\n"
		 "logical address, device, physical offset, mirror, and whether another\n"
		 "copy holds them right. A progress line shows on a terminal. Exit status\n"
		 "1 when damage was found (or a device is missing), 0 when all is clean.",
	.examples = "btrfsimg verify disk.img\n"
		    "btrfsimg verify --json --examples 0 dev1.img dev2.img",
	.options = verify_options,
	.run = cmd_verify,
};
