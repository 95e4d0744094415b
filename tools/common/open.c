// SPDX-License-Identifier: MIT
/* The command line's one open (open.h): btrfsimg_open_images with the
 * options parsed from the command line, its failures said step by step. */
#include <inttypes.h>
#include <stdio.h>

#include "common/open.h"

#include "common/keys.h"
#include "common/progress.h"

static void log_damage(void *ctx, bool damage, const char *msg)
{
	const struct cli *c = ctx;
	if (c->verbose || (damage && !c->quiet))
		fprintf(stderr, "btrfsimg: %s%s\n", damage ? "warning: " : "", msg);
}

/* Why the open failed, as each step has always been said: an image by its
 * name, a partition of an image that holds btrfs by the command's. */
static int open_failed(const struct cli *c, btrfsimg_fs *fs, int rc)
{
	size_t image = 0;
	switch (btrfsimg_open_step(fs, &image)) {
	case BTRFSIMG_STEP_NONE:
		return cli_fail_on(fs, rc, "cannot create a handle");
	case BTRFSIMG_STEP_OPTIONS: /* the library's word for a key, the volume */
		return cli_fail_on(fs, rc, "open options");
	case BTRFSIMG_STEP_IMAGE:
		return cli_fail_on(fs, rc, c->images[image]);
	case BTRFSIMG_STEP_PARTITION:
		return cli_fail_on(fs, rc, c->cmd);
	default:
		return cli_fail_on(fs, rc, "cannot open the filesystem");
	}
}

/* The device scan of a salvage open, on a terminal (progress.h); erased
 * at its end, before the open says what it rebuilt. */
static int on_scan_progress(void *ctx, uint64_t done, uint64_t total)
{
	(void)ctx;
	progress_bytes("salvage scan", done, total);
	if (done >= total)
		progress_done();
	return 0;
}

int cli_open_at(struct cli *c, uint64_t generation, btrfsimg_fs **out)
{
	struct btrfsimg_open_options o = BTRFSIMG_OPEN_OPTIONS_INIT;
	struct cli_keys keys;
	*out = NULL;
	if (cli_keys_options(c, &keys, &o) != EXIT_OK)
		return EXIT_FAILED;
	o.fs = c->opts;
	o.format = c->format;
	o.generation = generation;
	o.fsid = c->fsid;
	o.log = log_damage;
	o.log_ctx = c;
	o.scan_progress = on_scan_progress;
	btrfsimg_fs *fs = NULL;
	int rc = btrfsimg_open_images(&fs, (const char *const *)c->images, (size_t)c->nimages,
				      &o);
	progress_done();
	cli_keys_wipe(&keys);
	if (rc < 0) {
		open_failed(c, fs, rc);
		btrfsimg_fs_free(fs);
		return EXIT_FAILED;
	}
	uint64_t gen;
	const char *how = btrfsimg_generation_root(fs, &gen);
	if (how && !c->quiet)
		cli_warn("reading generation %" PRIu64 ": %s", gen, how);
	*out = fs;
	return EXIT_OK;
}
