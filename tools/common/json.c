/* SPDX-License-Identifier: MIT */
#include "common/json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void jw_grow_slow(struct jw *w, size_t more)
{
	size_t cap = w->cap ? w->cap : 512;
	while (cap < w->len + more)
		cap *= 2;
	char *b = realloc(w->buf, cap);
	if (!b) {
		fputs("btrfsimg: out of memory formatting output\n", stderr);
		exit(2);
	}
	w->buf = b;
	w->cap = cap;
}

#define grow jw_grow

static void put_c(struct jw *w, char c)
{
	grow(w, 1);
	w->buf[w->len++] = c;
}

const char jw_digit_pairs[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

bool jw_big_as_number;

static void put_u64(struct jw *w, uint64_t v)
{
	jw_num(w, v);
}

static void put_i64(struct jw *w, int64_t v)
{
	jw_grow(w, 23);
	w->len += jw_i64_at(w->buf + w->len, v);
}

static void sep(struct jw *w)
{
	if (w->need_comma)
		put_c(w, ',');
	w->need_comma = true;
}

static void key(struct jw *w, const char *k)
{
	sep(w);
	if (k) {
		put_c(w, '"');
		jw_raw(w, k, strlen(k)); /* keys are our own ASCII names */
		jw_raw(w, "\":", 2);
	}
}

void jw_begin(struct jw *w, FILE *out)
{
	*w = (struct jw){ .out = out };
	grow(w, 1024); /* most lines fit: one allocation per line */
	put_c(w, '{');
}

void jw_end(struct jw *w)
{
	jw_raw(w, "}\n", 2);
	fwrite_unlocked(w->buf, 1, w->len, w->out);
	free(w->buf);
	*w = (struct jw){ .out = w->out };
}

size_t jw_run_new(struct jw_run *r, char *p, uint64_t v)
{
	size_t n = jw_u64_at(r->digits, v);
	memcpy(p, r->digits, sizeof(r->digits));
	/* bare digits only, and none whose run would cross into quotes or
	 * wrap past UINT64_MAX */
	uint64_t top = jw_big_as_number ? UINT64_MAX - 9 : JW_SAFE_MAX - 9;
	r->base = v;
	r->len = (uint32_t)n;
	r->room = v <= top ? 10 - (uint32_t)(v % 10) : 0;
	return n;
}

void jw_flush_fd(struct jw *w, int fd, int *err)
{
	size_t done = 0;
	while (done < w->len && !*err) {
		ssize_t n = write(fd, w->buf + done, w->len - done);
		if (n > 0)
			done += (size_t)n;
		else if (n == 0)
			*err = EIO;
		else if (errno != EINTR)
			*err = errno;
	}
	w->len = 0;
}

void jw_line_free(struct jw *w)
{
	free(w->buf);
	*w = (struct jw){ .out = w->out };
}

void jw_key(struct jw *w, const char *k)
{
	key(w, k);
}

void jw_open_obj(struct jw *w, const char *k)
{
	key(w, k);
	put_c(w, '{');
	w->need_comma = false;
}

void jw_close_obj(struct jw *w)
{
	put_c(w, '}');
	w->need_comma = true;
}

void jw_open_arr(struct jw *w, const char *k)
{
	key(w, k);
	put_c(w, '[');
	w->need_comma = false;
}

void jw_close_arr(struct jw *w)
{
	put_c(w, ']');
	w->need_comma = true;
}

void jw_u64(struct jw *w, const char *k, uint64_t v)
{
	key(w, k);
	put_u64(w, v);
}

void jw_i64(struct jw *w, const char *k, int64_t v)
{
	key(w, k);
	put_i64(w, v);
}

void jw_bool(struct jw *w, const char *k, bool v)
{
	key(w, k);
	v ? jw_raw(w, "true", 4) : jw_raw(w, "false", 5);
}

void jw_null(struct jw *w, const char *k)
{
	key(w, k);
	jw_raw(w, "null", 4);
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
	put_c(w, '"');
	jw_escape(w, s, n);
	put_c(w, '"');
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
	char b[40];
	snprintf(b, sizeof(b),
		 "\"%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\"", u[0],
		 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
		 u[14], u[15]);
	jw_raw(w, b, 38);
}

void jw_time(struct jw *w, const char *k, int64_t sec, uint32_t nsec)
{
	key(w, k);
	jw_grow(w, 48);
	char *p = w->buf + w->len;
	*p++ = '[';
	p += jw_i64_at(p, sec);
	*p++ = ',';
	p += jw_u64_at(p, nsec);
	*p++ = ']';
	w->len = (size_t)(p - w->buf);
}

size_t jw_utf8_len(const uint8_t *s, size_t n)
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

size_t jw_plain_run(const uint8_t *s, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t x;
		memcpy(&x, s + i, 8);
		if (!jw_plain8(x))
			break;
	}
	while (i < n && plain(s[i]))
		i++;
	return i;
}

char *jw_str_at(struct jw *w, char *p, const char *s, size_t n, size_t after)
{
	*p++ = '"';
	size_t k = 0;
	for (; k + 8 <= n; k += 8) {
		uint64_t v;
		memcpy(&v, s + k, 8);
		if (!jw_plain8(v))
			break;
		memcpy(p, &v, 8);
		p += 8;
	}
	for (; k < n && plain((uint8_t)s[k]); k++)
		*p++ = s[k];
	if (k < n) {
		w->len = (size_t)(p - w->buf);
		jw_escape(w, (const uint8_t *)s + k, n - k);
		jw_grow(w, after + 1);
		p = w->buf + w->len;
	}
	*p++ = '"';
	return p;
}

void jw_escape(struct jw *w, const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t run = jw_plain_run(s + i, n - i);
		if (run) {
			jw_raw(w, (const char *)s + i, run);
			i += run;
			continue;
		}
		uint8_t c = s[i];
		size_t len = jw_utf8_len(s + i, n - i);
		if (len == 0) {
			{ char e[8]; snprintf(e, sizeof(e), "\\udc%02x", c); jw_raw(w, e, 6); }
			i++;
			continue;
		}
		if (len > 1) {
			jw_raw(w, (const char *)s + i, len);
			i += len;
			continue;
		}
		switch (c) {
		case '"': jw_raw(w, "\\\"", 2); break;
		case '\\': jw_raw(w, "\\\\", 2); break;
		case '\n': jw_raw(w, "\\n", 2); break;
		case '\r': jw_raw(w, "\\r", 2); break;
		case '\t': jw_raw(w, "\\t", 2); break;
		case '\b': jw_raw(w, "\\b", 2); break;
		case '\f': jw_raw(w, "\\f", 2); break;
		default:
			if (c < 0x20 || c == 0x7f) {
				char e[8];
				snprintf(e, sizeof(e), "\\u%04x", c);
				jw_raw(w, e, 6);
			} else {
				put_c(w, (char)c);
			}
		}
		i++;
	}
}
