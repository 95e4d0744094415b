/* SPDX-License-Identifier: MIT */
/*
 * The one open: btrfsimg_open_images() takes every option of an open in
 * one struct and runs the stack once, in one order (the handle and its
 * options, each image, the open), so that every front end (the CLI, the
 * Python binding, the FUSE mount) opens the same way and gets the same
 * refusals. It sits above every other level because an open reaches all
 * of them: the handle (files/), keys and volumes (volume/), images
 * (image/), the older generation's root (forensic/).
 *
 * The options struct is sized by its caller (the `size` field): what a
 * caller built against an older header leaves out reads as zero, and what
 * a newer header adds must be zero for this library to accept it (as the
 * kernel's copy_struct_from_user takes extensible structs).
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "base/err.h"
#include "base/handle.h"
#include "base/sized.h"

/* The caller's @size bytes of @o into @mine, the rest zero. */
static int take_options(const struct btrfsimg_open_options *o, struct btrfsimg_open_options *mine)
{
	size_t bad;
	return bi_take_sized(o, mine, sizeof(*mine), &bad);
}

/* The keys, the volume and the limits, each with the message of its
 * refusal (the setters themselves leave none for bad values). */
static int set_keys(btrfsimg_fs *fs, const struct btrfsimg_open_options *o)
{
	if (o->volume && btrfsimg_select_volume(fs, o->volume) < 0)
		return bi_err(fs, -EINVAL, "volume '%s': expected VG/LV", o->volume);
	if (o->passphrase && btrfsimg_set_passphrase(fs, o->passphrase, o->passphrase_len) < 0)
		return bi_err(fs, -EINVAL, "passphrase: %zu bytes, expect at most 8192",
			      o->passphrase_len);
	if (o->kdf_limit_ms && btrfsimg_set_kdf_limit(fs, o->kdf_limit_ms) < 0)
		return bi_err(fs, -EINVAL, "KDF limit: %u ms, expect at most %u",
			      (unsigned)o->kdf_limit_ms, BTRFSIMG_KDF_LIMIT_MAX_MS);
	if (o->volume_key && btrfsimg_set_volume_key(fs, o->volume_key, o->volume_key_len) < 0)
		return bi_err(fs, -EINVAL, "volume key: %zu bytes, expect 1 to 64",
			      o->volume_key_len);
	if (o->passphrase_fn)
		btrfsimg_set_passphrase_fn(fs, o->passphrase_fn, o->passphrase_ctx);
	return 0;
}

static int set_options(btrfsimg_fs *fs, const struct btrfsimg_open_options *o)
{
	fs->open_step = BTRFSIMG_STEP_OPTIONS;
	btrfsimg_set_log(fs, o->log, o->log_ctx);
	btrfsimg_set_scan_progress(fs, o->scan_progress, o->scan_progress_ctx);
	if (!btrfsimg_format_name(o->format))
		return bi_err(fs, -EINVAL, "format %d: no such format", o->format);
	btrfsimg_set_generation(fs, o->generation);
	if (o->fsid && btrfsimg_set_fsid(fs, o->fsid) < 0)
		return -EINVAL; /* the setter said why */
	return set_keys(fs, o);
}

static int add_images(btrfsimg_fs *fs, const char *const *images, size_t n, int format)
{
	fs->open_step = BTRFSIMG_STEP_IMAGE;
	for (size_t i = 0; i < n; i++) {
		fs->open_image = i;
		int rc = btrfsimg_add_device_file_format(fs, images[i], format);
		if (rc < 0)
			return images[i] ? rc : bi_err(fs, -EINVAL, "image %zu: NULL", i);
	}
	fs->open_image = 0;
	return 0;
}

int btrfsimg_open_images(btrfsimg_fs **out, const char *const *images, size_t n,
			 const struct btrfsimg_open_options *o)
{
	struct btrfsimg_open_options opt;
	if (!out)
		return -EINVAL;
	*out = NULL;
	if ((!images && n) || take_options(o, &opt) < 0)
		return -EINVAL;
	int rc = btrfsimg_fs_new(out, &opt.fs);
	if (rc < 0)
		return rc;
	rc = set_options(*out, &opt);
	if (rc == 0)
		rc = add_images(*out, images, n, opt.format);
	if (rc == 0)
		rc = btrfsimg_open(*out); /* its own steps: partition, open */
	return rc;
}
