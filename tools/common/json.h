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
#include <string.h>

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
void jw_grow_slow(struct jw *w, size_t more);

static inline void jw_grow(struct jw *w, size_t more)
{
	if (__builtin_expect(w->len + more > w->cap, 0))
		jw_grow_slow(w, more);
}

/* Bytes as they are. Inline: with a constant length the copy is a few moves. */
static inline void jw_raw(struct jw *w, const char *s, size_t n)
{
	jw_grow(w, n);
	memcpy(w->buf + w->len, s, n);
	w->len += n;
}

/* Decimal digits of @v into @out (no NUL), two digits per division: numbers
 * are most of the output. */
extern const char jw_digit_pairs[201];
static inline size_t jw_u64_dec(uint64_t v, char out[20])
{
	char b[20];
	int i = sizeof(b);
	while (v >= 100) {
		unsigned d = (unsigned)(v % 100) * 2;
		v /= 100;
		b[--i] = jw_digit_pairs[d + 1];
		b[--i] = jw_digit_pairs[d];
	}
	if (v >= 10) {
		b[--i] = jw_digit_pairs[v * 2 + 1];
		b[--i] = jw_digit_pairs[v * 2];
	} else {
		b[--i] = (char)('0' + v);
	}
	memcpy(out, b + i, sizeof(b) - (size_t)i);
	return sizeof(b) - (size_t)i;
}

/* Integers past JW_SAFE_MAX = 2^53 - 1 (JavaScript's Number.MAX_SAFE_INTEGER:
 * what a double holds exactly; jq 1.6 and JavaScript round anything larger)
 * are written as decimal strings, "18446744073709551615", unless
 * jw_big_as_number (--json-u64 number). Set once, before any output. */
#define JW_SAFE_MAX ((UINT64_C(1) << 53) - 1)
extern bool jw_big_as_number;

/* @v as JSON into @out (no NUL): digits, or digits in quotes past
 * JW_SAFE_MAX. */
static inline size_t jw_u64_json(uint64_t v, char out[22])
{
	if (__builtin_expect(v <= JW_SAFE_MAX || jw_big_as_number, 1))
		return jw_u64_dec(v, out);
	out[0] = '"';
	size_t n = jw_u64_dec(v, out + 1);
	out[n + 1] = '"';
	return n + 2;
}

static inline void jw_num(struct jw *w, uint64_t v)
{
	jw_grow(w, 22);
	w->len += jw_u64_json(v, w->buf + w->len);
}

/* Writing in place, for hot lines whose room was reserved once with
 * jw_grow: each returns the bytes written at @p (no NUL). */

/* Four digits of @v (< 10000), zeros in front, at @q. */
static inline __attribute__((always_inline)) void jw_put4(char *q, uint32_t v)
{
	uint32_t hi = v / 100, lo = v % 100;
	memcpy(q, jw_digit_pairs + hi * 2, 2);
	memcpy(q + 2, jw_digit_pairs + lo * 2, 2);
}

/* Decimal digits of @v, right to left from a count of them taken from the
 * bit length (log10(2) ~ 1233/4096, then one compare): no temporary, no
 * copy of variable length. Eight digits at a time, as two halves of four
 * worked out side by side in 32 bits: dividing the whole number by 100 per
 * pair made one chain of 64-bit divisions, and half of a formatting
 * thread's time. */
static inline __attribute__((always_inline)) size_t jw_dec_at(char *p, uint64_t v)
{
	static const uint64_t pow10[20] = {
		1ull,
		10ull,
		100ull,
		1000ull,
		10000ull,
		100000ull,
		1000000ull,
		10000000ull,
		100000000ull,
		1000000000ull,
		10000000000ull,
		100000000000ull,
		1000000000000ull,
		10000000000000ull,
		100000000000000ull,
		1000000000000000ull,
		10000000000000000ull,
		100000000000000000ull,
		1000000000000000000ull,
		10000000000000000000ull,
	};
	unsigned bits = 64 - (unsigned)__builtin_clzll(v | 1);
	size_t n = ((bits * 1233) >> 12) + 1;
	if (n > 1 && v < pow10[n - 1])
		n--;
	char *q = p + n;
	while (v >= 100000000) {
		uint64_t hi = v / 100000000;
		uint32_t lo = (uint32_t)(v - hi * 100000000);
		q -= 8;
		jw_put4(q, lo / 10000);
		jw_put4(q + 4, lo % 10000);
		v = hi;
	}
	uint32_t x = (uint32_t)v;
	if (x >= 10000) {
		q -= 4;
		jw_put4(q, x % 10000);
		x /= 10000;
	}
	if (x >= 100) {
		unsigned d = (x % 100) * 2;
		x /= 100;
		q -= 2;
		memcpy(q, jw_digit_pairs + d, 2);
	}
	if (x >= 10) {
		q -= 2;
		memcpy(q, jw_digit_pairs + x * 2, 2);
	} else {
		*--q = (char)('0' + x);
	}
	return n;
}

/* @v as jw_u64 writes it (quoted past JW_SAFE_MAX): at most 22 bytes. */
static inline size_t jw_u64_at(char *p, uint64_t v)
{
	if (__builtin_expect(v <= JW_SAFE_MAX || jw_big_as_number, 1))
		return jw_dec_at(p, v);
	p[0] = '"';
	size_t n = jw_dec_at(p + 1, v);
	p[n + 1] = '"';
	return n + 2;
}

/* Numbers that climb by small steps (a million inodes' objectids and the
 * numbers made from them): each is written as jw_u64_at would, but the
 * digits of one whose tens and up match the last number formatted by
 * division are copied from it (a copy of fixed size, one digit changed):
 * formatting four such numbers per line was half of a formatting thread's
 * time. Zeroed, a run formats its first number by division. */
struct jw_run {
	uint64_t base;	/* the last number formatted by division */
	uint32_t room;	/* numbers base .. base + room - 1 share all but its
			 * last digit (0: none, as for a quoted one) */
	uint32_t len;	/* bytes of base */
	char digits[24];
};

size_t jw_run_new(struct jw_run *r, char *p, uint64_t v);

/* @v at @p, as jw_u64_at writes it; the caller reserved 24 bytes there. */
static inline size_t jw_run_at(struct jw_run *r, char *p, uint64_t v)
{
	uint64_t d = v - r->base;
	if (__builtin_expect(d < r->room, 1)) {
		memcpy(p, r->digits, sizeof(r->digits));
		p[r->len - 1] = (char)(r->digits[r->len - 1] + (char)d);
		return r->len;
	}
	return jw_run_new(r, p, v);
}

/* @v as jw_i64 writes it: at most 23 bytes. */
static inline size_t jw_i64_at(char *p, int64_t v)
{
	if (__builtin_expect(v >= 0, 1))
		return jw_u64_at(p, (uint64_t)v);
	uint64_t mag = (uint64_t)0 - (uint64_t)v;
	bool quote = mag > JW_SAFE_MAX && !jw_big_as_number;
	size_t n = 0;
	if (quote)
		p[n++] = '"';
	p[n++] = '-';
	n += jw_dec_at(p + n, mag);
	if (quote)
		p[n++] = '"';
	return n;
}

/* A literal at @p, advancing it. */
#define JW_PUT_LIT(p, lit) (memcpy((p), "" lit, sizeof(lit) - 1), (p) += sizeof(lit) - 1)

/* Some byte of @v is zero (may also say so for a byte after a 0x80..0xff
 * one: the caller then looks at the bytes one by one). */
static inline uint64_t jw_has_zero8(uint64_t v)
{
	const uint64_t ones = ~(uint64_t)0 / 255;
	return (v - ones) & ~v & (ones * 0x80);
}

/* Whether the eight bytes of @x (memory order) all go into a JSON string
 * as they are: none < 0x20, >= 0x7f, '"' or '\\'. false may be wrong for
 * a byte after a 0x80..0xff one: look at those bytes one by one. */
static inline bool jw_plain8(uint64_t x)
{
	const uint64_t ones = ~(uint64_t)0 / 255;
	uint64_t bad = (((x - ones * 0x20) & ~x) | x) & (ones * 0x80);
	bad |= jw_has_zero8(x ^ (ones * 0x7f)) | jw_has_zero8(x ^ (ones * '"')) |
	       jw_has_zero8(x ^ (ones * '\\'));
	return !bad;
}

/* @s[0..@n) as a JSON string, quotes included, at @p in @w's buffer, for
 * hot lines: the caller reserved room for @n + 2 bytes and @after more.
 * Plain ASCII is copied eight bytes at a time (libc's memcpy for a length
 * known only at run time cost more than the copy); from the first byte
 * that is not, the general escaper, which may move the buffer, then
 * @after bytes reserved again. Returns where the string ends. */
char *jw_str_at(struct jw *w, char *p, const char *s, size_t n, size_t after);

/* Length of the leading run of @s that a JSON string holds as it is
 * (printable ASCII but '"' and '\\'), eight bytes at a time. */
size_t jw_plain_run(const uint8_t *s, size_t n);
/* For hot loops (a million lines): lines gather in one writer kept across
 * them and go out in blocks of JW_OUT_BLOCK with write(2); through stdio
 * every byte was copied once more (a tenth of a formatting thread's time).
 * jw_flush_fd writes out and empties the buffer; the first failure's errno
 * is kept in *err and later flushes write nothing. jw_line_free at the end. */
#define JW_OUT_BLOCK (256u << 10)
void jw_flush_fd(struct jw *w, int fd, int *err);
void jw_line_free(struct jw *w);
/* A literal fragment such as ",\"size\":" (no strlen), and a bare number. */
#define jw_lit(w, lit) jw_raw((w), "" lit, sizeof(lit) - 1)

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
/* Length of the valid UTF-8 sequence at @s (1..4; overlong forms, surrogates
 * and values past U+10FFFF are invalid), or 0 if invalid. */
size_t jw_utf8_len(const uint8_t *s, size_t n);

#endif
