/* SPDX-License-Identifier: MIT */
/*
 * A small buffered JSON Lines writer for the CLI. Strings are bytes: valid
 * UTF-8 passes through, every byte that is not part of valid UTF-8 is
 * written as a lone surrogate escape \udc80-\udcff (Python's
 * "surrogateescape"), so readers can restore the exact bytes.
 */
#ifndef BTRFSIMG_TOOLS_JSON_H
#define BTRFSIMG_TOOLS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One line is built in memory and written with one fwrite at jw_end():
 * output is hot (millions of lines) and stdio per field dominated. */
struct jw {
	FILE *out;
	bool need_comma;
	char *buf;
	size_t len, cap;
};

void jw_begin(struct jw *w, FILE *out);	/* starts an object: "{" */
void jw_end(struct jw *w);			/* "}\n", written out; frees the line */
void jw_raw(struct jw *w, const char *s, size_t n);	/* bytes as they are */
void jw_key(struct jw *w, const char *key);
void jw_open_obj(struct jw *w, const char *key);	/* key may be NULL in arrays */
void jw_close_obj(struct jw *w);
void jw_open_arr(struct jw *w, const char *key);
void jw_close_arr(struct jw *w);
void jw_u64(struct jw *w, const char *key, uint64_t v);
void jw_i64(struct jw *w, const char *key, int64_t v);
void jw_bool(struct jw *w, const char *key, bool v);
void jw_null(struct jw *w, const char *key);
void jw_str(struct jw *w, const char *key, const char *s);	/* NULL -> null */
void jw_strn(struct jw *w, const char *key, const void *s, size_t n);
void jw_uuid(struct jw *w, const char *key, const uint8_t u[16], bool null_if_zero);
void jw_time(struct jw *w, const char *key, int64_t sec, uint32_t nsec);
/* Append bytes as a JSON string body (no quotes). */
void jw_escape(struct jw *w, const uint8_t *s, size_t n);

#endif
