// SPDX-License-Identifier: MIT
/* Damaged names and their safe form (see name.h). */
#include "base/name.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>

#include "btrfsimg.h"

const char *bi_name_problem(const uint8_t *name, size_t len)
{
	if (len == 0)
		return "empty name";
	/* one pass for both bytes, inline: names are short, and two calls of
	 * libc's memchr per name (its vector variant chosen at run time) were
	 * 8% of an inodes run over a million of them; a NUL still comes first */
	bool slash = false;
	for (size_t i = 0; i < len; i++) {
		if (name[i] == '\0')
			return "name holds a NUL byte";
		slash |= name[i] == '/';
	}
	if (slash)
		return "name holds a '/'";
	if (len == 1 && name[0] == '.')
		return "name is \".\"";
	if (len == 2 && name[0] == '.' && name[1] == '.')
		return "name is \"..\"";
	return NULL;
}

/* Where a safe form goes: @cap bytes at @out, @at the length so far,
 * @end what was written (a piece that does not fit ends the writing, so
 * a cut form is a prefix of whole pieces). */
struct sink {
	char *out;
	size_t cap, at, end;
};

static void put(struct sink *k, const char *s, size_t n)
{
	if (k->end == k->at && k->cap > k->at && n < k->cap - k->at) {
		memcpy(k->out + k->at, s, n);
		k->end += n;
	}
	k->at += n;
}

size_t bi_name_safe(const uint8_t *name, size_t len, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	struct sink k = { out, cap, 0, 0 };
	if (!bi_name_problem(name, len)) {
		put(&k, (const char *)name, len);
	} else if (len == 0) {
		put(&k, "%", 1);
	} else {
		bool dots = len <= 2 && name[0] == '.' && name[len - 1] == '.';
		for (size_t i = 0; i < len; i++) {
			uint8_t c = name[i];
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };
			if (c == '\0' || c == '/' || c == '%' || dots)
				put(&k, e, 3);
			else
				put(&k, (const char *)&name[i], 1);
		}
	}
	if (cap)
		out[k.end] = '\0';
	return k.at;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1; /* lowercase is not the safe form: one spelling per name */
}

int bi_name_raw(const char *safe, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
	size_t n = 0;
	if (!memchr(safe, '%', len))
		return -EINVAL; /* every safe form of a damaged name holds one */
	for (size_t i = 0; i < len && !(len == 1);) { /* "%" alone: the empty name */
		if (n >= cap)
			return -EINVAL;
		if (safe[i] != '%') {
			out[n++] = (uint8_t)safe[i++];
			continue;
		}
		int hi = len - i >= 3 ? hexval(safe[i + 1]) : -1;
		int lo = len - i >= 3 ? hexval(safe[i + 2]) : -1;
		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[n++] = (uint8_t)(hi << 4 | lo);
		i += 3;
	}
	/* only the one spelling bi_name_safe writes, and only of damage */
	char again[BI_NAME_SAFE_MAX(255)];
	if (n > 255 || !bi_name_problem(out, n) ||
	    bi_name_safe(out, n, again, sizeof(again)) != len || memcmp(again, safe, len) != 0)
		return -EINVAL;
	*out_len = n;
	return 0;
}

const char *btrfsimg_name_problem(const void *name, size_t len)
{
	return name || !len ? bi_name_problem(name, len) : "no name";
}

size_t btrfsimg_name_safe(const void *name, size_t len, char *out, size_t cap)
{
	return bi_name_safe(name, len, out, cap);
}

int btrfsimg_name_raw(const char *safe, size_t len, void *out, size_t cap, size_t *out_len)
{
	if (!safe || !out || !out_len)
		return -EINVAL;
	return bi_name_raw(safe, len, out, cap, out_len);
}

size_t btrfsimg_name_damage(uint64_t subvol, uint64_t dir, const struct btrfsimg_dirent *e,
			    char *buf, size_t cap)
{
	const char *why = e ? btrfsimg_name_problem(e->name, e->name_len) : NULL;
	if (!why || !cap)
		return 0;
	char safe[BI_NAME_SAFE_MAX(255)];
	bi_name_safe(e->name, e->name_len, safe, sizeof(safe));
	int n = snprintf(buf, cap,
			 "damaged name: subvolume %" PRIu64 " directory %" PRIu64
			 " DIR_INDEX (%" PRIu64 " 96 %" PRIu64 "), %s: shown as '%s'",
			 subvol, dir, dir, e->index, why, safe);
	return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}
