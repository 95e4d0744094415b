/* SPDX-License-Identifier: MIT */
/*
 * The filesystem handle: creation, the open sequence, error messages and
 * damage reporting.
 *
 * Open sequence: locate every device (whole image or partition), read the
 * superblocks and match devices (super.c), bootstrap the chunk map from the
 * sys_chunk_array, then read the chunk tree (chunk.c), then check that the
 * root tree is readable (tree.c). Each step leaves a message on failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define DEFAULT_CACHE_BYTES (64ull << 20)

void btrfsimg_open_opts_init(struct btrfsimg_open_opts *o)
{
	memset(o, 0, sizeof(*o));
}

int btrfsimg_fs_new(btrfsimg_fs **out, const struct btrfsimg_open_opts *opts)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	struct btrfsimg_fs *fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	if (opts)
		fs->opts = *opts;
	else
		btrfsimg_open_opts_init(&fs->opts);
	const unsigned known = BTRFSIMG_OPEN_NO_DATA_VERIFY | BTRFSIMG_OPEN_NO_LOG_REPLAY |
			       BTRFSIMG_OPEN_SUPER_MIRROR | BTRFSIMG_OPEN_OFFSET;
	if ((fs->opts.flags & ~known) || fs->opts.super_mirror >= SB_MIRROR_MAX ||
	    fs->opts.offset > INT64_MAX) {
		free(fs);
		return -EINVAL;
	}
	*out = fs;
	return 0;
}

void btrfsimg_fs_free(btrfsimg_fs *fs)
{
	if (!fs)
		return;
	bi_devs_close(fs);
	bi_overlays_free(fs);
	bi_chunk_map_free(fs->chunks);
	bi_cache_free(fs->cache);
	free(fs);
}

const char *btrfsimg_errmsg(const btrfsimg_fs *fs)
{
	return fs ? fs->err : "no handle";
}

void btrfsimg_set_log(btrfsimg_fs *fs, btrfsimg_log_fn fn, void *ctx)
{
	if (!fs)
		return;
	fs->log = fn;
	fs->log_ctx = ctx;
}

uint64_t btrfsimg_damage_count(const btrfsimg_fs *fs)
{
	return fs ? fs->damage : 0;
}

uint64_t btrfsimg_missing_devices(const btrfsimg_fs *fs)
{
	return fs ? fs->missing_devs : 0;
}

const char *btrfsimg_version(void)
{
	return "0.1.0";
}

int bi_err(struct btrfsimg_fs *fs, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(fs->err, sizeof(fs->err), fmt, ap);
	va_end(ap);
	return code;
}

int bi_why(char *why, size_t whylen, const char *fmt, ...)
{
	if (why && whylen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return -EUCLEAN;
}

static void bi_log(struct btrfsimg_fs *fs, bool damage, const char *fmt, va_list ap)
{
	if (!fs->log)
		return;
	char msg[1024];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	fs->log(fs->log_ctx, damage, msg);
}

void bi_damage(struct btrfsimg_fs *fs, const char *fmt, ...)
{
	fs->damage++;
	va_list ap;
	va_start(ap, fmt);
	bi_log(fs, true, fmt, ap);
	va_end(ap);
}

void bi_info(struct btrfsimg_fs *fs, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	bi_log(fs, false, fmt, ap);
	va_end(ap);
}

void bi_uuid_str(const uint8_t u[16], char out[37])
{
	snprintf(out, 37,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
		 u[12], u[13], u[14], u[15]);
}

bool bi_uuid_is_zero(const uint8_t u[16])
{
	for (int i = 0; i < 16; i++)
		if (u[i])
			return false;
	return true;
}

static int open_locate_devices(struct btrfsimg_fs *fs)
{
	if (fs->ndevs == 0)
		return bi_err(fs, -EINVAL, "no device image given");
	for (size_t i = 0; i < fs->ndevs; i++) {
		int rc = bi_dev_locate(fs, &fs->devs[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int open_chunks(struct btrfsimg_fs *fs)
{
	fs->chunks = bi_chunk_map_new();
	fs->cache = bi_cache_new(fs->opts.cache_bytes ? fs->opts.cache_bytes
						      : DEFAULT_CACHE_BYTES);
	if (!fs->chunks || !fs->cache)
		return bi_err(fs, -ENOMEM, "out of memory creating the chunk map");
	int rc = bi_chunk_load_sys_array(fs);
	if (rc < 0)
		return rc;
	return bi_chunk_load_tree(fs);
}

static int open_root_tree(struct btrfsimg_fs *fs)
{
	struct bi_expect e = { .owner = OBJ_ROOT_TREE,
			       .generation = fs->root_tree.generation,
			       .level = fs->root_tree.level };
	struct bi_block *b;
	int rc = bi_block_read(fs, fs->root_tree.bytenr, &e, &b);
	if (rc < 0)
		return rc;
	bi_block_put(fs, b);
	return 0;
}

int btrfsimg_open(btrfsimg_fs *fs)
{
	if (!fs)
		return -EINVAL;
	if (fs->opened)
		return bi_err(fs, -EINVAL, "btrfsimg_open: already open");
	int rc = open_locate_devices(fs);
	if (rc == 0)
		rc = bi_super_load(fs);
	if (rc < 0)
		return rc;
	fs->root_tree = (struct bi_root){ OBJ_ROOT_TREE, fs->sb.info.root, fs->sb.info.generation,
					  fs->sb.info.root_level };
	fs->chunk_tree = (struct bi_root){ OBJ_CHUNK_TREE, fs->sb.info.chunk_root,
					   fs->sb.chunk_root_generation,
					   fs->sb.info.chunk_root_level };
	rc = open_chunks(fs);
	if (rc == 0)
		rc = open_root_tree(fs);
	if (rc == 0)
		rc = bi_log_replay(fs);
	if (rc < 0)
		return rc;
	fs->opened = true;
	fs->err[0] = '\0';
	return 0;
}
