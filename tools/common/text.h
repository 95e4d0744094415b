/* SPDX-License-Identifier: MIT */
/*
 * What the text (non-JSON) output of the CLI shares: names escaped so that
 * a line stays a line, and times a person can read.
 *
 * Names are bytes. Printable ASCII and valid UTF-8 characters pass through;
 * a backslash is written "\\", newline, tab and carriage return "\n", "\t",
 * "\r", and every other byte (control bytes, DEL, C1 controls, bytes that
 * are not valid UTF-8) "\xNN" (two lowercase hex digits). Undoing those
 * escapes gives the exact bytes back.
 */
#ifndef BTRFSIMG_TOOLS_TEXT_H
#define BTRFSIMG_TOOLS_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/json.h"

struct jw;

/* @s[0..@n) escaped onto @out; the ASCII bytes in @also (may be NULL) are
 * written "\xNN" too (bodyfile: its field separator). */
void text_name(FILE *out, const uint8_t *s, size_t n, const char *also);
/* The same, appended to @w's buffer (for lines gathered and written out in
 * blocks, json.h's jw_flush_fd). */
void text_name_jw(struct jw *w, const uint8_t *s, size_t n, const char *also);

/* ISO 8601 in UTC with nanoseconds, "2026-12-03T10:56:20.135319767Z";
 * a time the calendar cannot hold as "@SEC.NNNNNNNNN". */
#define TEXT_TIME_MAX 48
#define TEXT_TIME_WIDTH 30	/* the usual length, for columns */
void text_time(char out[TEXT_TIME_MAX], int64_t sec, uint32_t nsec);
/* The same at @p (room for TEXT_TIME_MAX bytes, no NUL): its length. */
size_t text_time_at(char *p, int64_t sec, uint32_t nsec);

/* Columns as printf pads them, written in place into a line buffer whose
 * room was reserved (jw_grow): each returns the end of what it wrote. A
 * value wider than its column is written whole, as printf does. */

/* @s[0..@len) right-aligned in @width columns ("%*s"). */
static inline char *text_right(char *p, const char *s, size_t len, size_t width)
{
	for (size_t k = len; k < width; k++)
		*p++ = ' ';
	for (size_t k = 0; k < len; k++)
		p[k] = s[k];
	return p + len;
}

/* @s[0..@len) left-aligned in @width columns ("%-*s"). */
static inline char *text_left(char *p, const char *s, size_t len, size_t width)
{
	for (size_t k = 0; k < len; k++)
		p[k] = s[k];
	p += len;
	for (size_t k = len; k < width; k++)
		*p++ = ' ';
	return p;
}

/* @v in decimal, right-aligned ("%*" PRIu64) or left-aligned ("%-*" PRIu64). */
static inline char *text_dec(char *p, uint64_t v, size_t width)
{
	char d[24];
	return text_right(p, d, jw_dec_at(d, v), width);
}

static inline char *text_dec_left(char *p, uint64_t v, size_t width)
{
	char d[24];
	return text_left(p, d, jw_dec_at(d, v), width);
}

/* "%#*" PRIx64: "0x" and lowercase hex digits (just "0" for 0). */
static inline char *text_hex_alt(char *p, uint64_t v, size_t width)
{
	static const char hex[] = "0123456789abcdef";
	char d[18];
	size_t n = 0;
	do
		d[sizeof(d) - ++n] = hex[v & 15];
	while ((v >>= 4) != 0);
	if (n > 1 || d[sizeof(d) - 1] != '0') {
		d[sizeof(d) - ++n] = 'x';
		d[sizeof(d) - ++n] = '0';
	}
	return text_right(p, d + sizeof(d) - n, n, width);
}

/* "%0*o" of a mode: octal, zeros in front up to @width. */
static inline char *text_oct0(char *p, uint32_t v, size_t width)
{
	char d[12];
	size_t n = 0;
	do
		d[sizeof(d) - ++n] = (char)('0' + (v & 7));
	while ((v >>= 3) != 0);
	for (size_t k = n; k < width; k++)
		*p++ = '0';
	return text_left(p, d + sizeof(d) - n, n, 0);
}

#endif
