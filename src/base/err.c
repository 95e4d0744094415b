/* SPDX-License-Identifier: MIT */
/*
 * Messages: the handle's error message, damage and information reports
 * through the log callback, and the formats every layer shares (uuids).
 * The bottom of the library: it calls nothing else in it, so any layer
 * can report through it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/handle.h"

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

/* Formatted aside first: callers may pass fs->err itself as an argument, to
 * wrap the message a lower layer left. */
int bi_err(struct btrfsimg_fs *fs, int code, const char *fmt, ...)
{
	char msg[sizeof(fs->err)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	memcpy(fs->err, msg, sizeof(msg));
	return code;
}

static void format_into(char *buf, size_t len, const char *fmt, va_list ap)
{
	if (buf && len)
		vsnprintf(buf, len, fmt, ap);
}

int bi_msg(char *buf, size_t len, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	format_into(buf, len, fmt, ap);
	va_end(ap);
	return code;
}

int bi_why(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	format_into(why, whylen, fmt, ap);
	va_end(ap);
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

int bi_item_err(struct btrfsimg_fs *fs, int code, const char *kind, uint64_t root,
		uint64_t block, uint32_t slot, const char *fmt, ...)
{
	char reason[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	return bi_err(fs, code, "corrupt %s: root=%" PRIu64 " block=%" PRIu64 " slot=%u, %s", kind,
		      root, block, slot, reason);
}

bool bi_opened(struct btrfsimg_fs *fs, const char *fn)
{
	if (!fs->opened)
		bi_err(fs, -EINVAL, "%s: filesystem not open", fn);
	return fs->opened;
}
