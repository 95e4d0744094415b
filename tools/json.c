/* SPDX-License-Identifier: MIT */
#include "json.h"

#include <string.h>

/* Output is hot (millions of lines): unlocked stdio and no printf. */
static void put_u64(FILE *out, uint64_t v)
{
	char b[24];
	int i = sizeof(b);
	do {
		b[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	fwrite_unlocked(b + i, 1, sizeof(b) - (size_t)i, out);
}

static void put_i64(FILE *out, int64_t v)
{
	if (v < 0) {
		putc_unlocked('-', out);
		put_u64(out, (uint64_t)0 - (uint64_t)v);
	} else {
		put_u64(out, (uint64_t)v);
	}
}

static void sep(struct jw *w)
{
	if (w->need_comma)
		putc_unlocked(',', w->out);
	w->need_comma = true;
}

static void key(struct jw *w, const char *k)
{
	sep(w);
	if (k) {
		putc_unlocked('"', w->out);
		fputs_unlocked(k, w->out); /* keys are our own ASCII names */
		fputs_unlocked("\":", w->out);
	}
}

void jw_begin(struct jw *w, FILE *out)
{
	w->out = out;
	w->need_comma = false;
	fputc('{', out);
}

void jw_end(struct jw *w)
{
	fputs("}\n", w->out);
	w->need_comma = false;
}

void jw_key(struct jw *w, const char *k)
{
	key(w, k);
}

void jw_open_obj(struct jw *w, const char *k)
{
	key(w, k);
	fputc('{', w->out);
	w->need_comma = false;
}

void jw_close_obj(struct jw *w)
{
	fputc('}', w->out);
	w->need_comma = true;
}

void jw_open_arr(struct jw *w, const char *k)
{
	key(w, k);
	fputc('[', w->out);
	w->need_comma = false;
}

void jw_close_arr(struct jw *w)
{
	fputc(']', w->out);
	w->need_comma = true;
}

void jw_u64(struct jw *w, const char *k, uint64_t v)
{
	key(w, k);
	put_u64(w->out, v);
}

void jw_i64(struct jw *w, const char *k, int64_t v)
{
	key(w, k);
	put_i64(w->out, v);
}

void jw_bool(struct jw *w, const char *k, bool v)
{
	key(w, k);
	fputs(v ? "true" : "false", w->out);
}

void jw_null(struct jw *w, const char *k)
{
	key(w, k);
	fputs("null", w->out);
}

void jw_str(struct jw *w, const char *k, const char *s)
{
	if (!s) {
		jw_null(w, k);
		return;
	}
	jw_strn(w, k, s, strlen(s));
}

void jw_strn(struct jw *w, const char *k, const void *s, size_t n)
{
	key(w, k);
	putc_unlocked('"', w->out);
	jw_escape(w->out, s, n);
	putc_unlocked('"', w->out);
}

void jw_uuid(struct jw *w, const char *k, const uint8_t u[16], bool null_if_zero)
{
	bool zero = true;
	for (int i = 0; i < 16; i++)
		zero &= u[i] == 0;
	if (zero && null_if_zero) {
		jw_null(w, k);
		return;
	}
	key(w, k);
	fprintf(w->out,
		"\"%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\"", u[0],
		u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
		u[14], u[15]);
}

void jw_time(struct jw *w, const char *k, int64_t sec, uint32_t nsec)
{
	key(w, k);
	putc_unlocked('[', w->out);
	put_i64(w->out, sec);
	putc_unlocked(',', w->out);
	put_u64(w->out, nsec);
	putc_unlocked(']', w->out);
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t utf8_len(const uint8_t *s, size_t n)
{
	uint8_t c = s[0];
	size_t len;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates and values past U+10FFFF are invalid */
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static bool plain(uint8_t c)
{
	return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}

void jw_escape(FILE *out, const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t run = 0;
		while (i + run < n && plain(s[i + run]))
			run++;
		if (run) {
			fwrite_unlocked(s + i, 1, run, out);
			i += run;
			continue;
		}
		uint8_t c = s[i];
		size_t len = utf8_len(s + i, n - i);
		if (len == 0) {
			fprintf(out, "\\udc%02x", c);
			i++;
			continue;
		}
		if (len > 1) {
			fwrite(s + i, 1, len, out);
			i += len;
			continue;
		}
		switch (c) {
		case '"': fputs("\\\"", out); break;
		case '\\': fputs("\\\\", out); break;
		case '\n': fputs("\\n", out); break;
		case '\r': fputs("\\r", out); break;
		case '\t': fputs("\\t", out); break;
		case '\b': fputs("\\b", out); break;
		case '\f': fputs("\\f", out); break;
		default:
			if (c < 0x20 || c == 0x7f)
				fprintf(out, "\\u%04x", c);
			else
				fputc(c, out);
		}
		i++;
	}
}
