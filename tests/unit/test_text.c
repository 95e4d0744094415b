// SPDX-License-Identifier: MIT
/*
 * The text output's times and names (tools/common/text.c), built from its source.
 *
 * Times: text_time_at formats most times itself; every one must equal what
 * the C library's gmtime_r and strftime give (written out here, not taken
 * from text.c): a day at a time across 1000-9999 around the month and leap
 * year edges, the ends of the range and past them, negative times, and
 * 400,000 random ones, with random nanoseconds (and some past 10^9).
 * Names: every byte value alone, then random byte strings, against an
 * escaper written here from text.h's rules; text_name (a FILE) and
 * text_name_jw (a buffer) write the same bytes.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "json.h"
#include "text.h"

static void want_time(char *out, int64_t sec, uint32_t nsec)
{
	struct tm tm;
	time_t t = (time_t)sec;
	size_t n = 0;
	if (gmtime_r(&t, &tm) && tm.tm_year >= -1900 && tm.tm_year <= 9999 - 1900)
		n = strftime(out, 64, "%Y-%m-%dT%H:%M:%S", &tm);
	if (n)
		snprintf(out + n, 64 - n, ".%09" PRIu32 "Z", nsec);
	else
		snprintf(out, 64, "@%" PRId64 ".%09" PRIu32, sec, nsec);
}

static void check_time(int64_t sec, uint32_t nsec)
{
	char want[64], have[TEXT_TIME_MAX + 1], via[TEXT_TIME_MAX];
	want_time(want, sec, nsec);
	size_t n = text_time_at(have, sec, nsec);
	have[n] = '\0';
	if (strcmp(have, want) != 0)
		fail_msg("%" PRId64 ".%u: have %s want %s", sec, nsec, have, want);
	text_time(via, sec, nsec);
	assert_string_equal(via, want);
}

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void test_times(void **state)
{
	(void)state;
	/* 0001-01-01 .. 9999-12-31 UTC and a little past either end */
	const int64_t lo = -62135596800LL, hi = 253402300799LL;
	for (int64_t s = lo - 86400 * 3; s <= hi + 86400 * 3; s += 86400 * 7 + 3599)
		check_time(s, (uint32_t)(s & 0x3fffffff) % 1000000000u);
	for (int64_t s = -86400 * 800; s <= 86400 * 800; s += 86400 - 1)
		check_time(s, 123456789);
	const int64_t edges[] = { 0, -1, 1, 86399, 86400, -86400, -86401, 951782400 /* 2000-02-29 */,
				  4107542400LL /* 2100-03-01 */, -30610224000LL /* 1000-01-01 */,
				  -30610224001LL, hi, hi + 1, lo, lo - 1, INT64_MIN, INT64_MAX };
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
		check_time(edges[i], 0);
		check_time(edges[i], 999999999);
		check_time(edges[i], 1000000000);
		check_time(edges[i], UINT32_MAX);
	}
	uint64_t x = 0x2545f4914f6cdd1dull;
	for (int i = 0; i < 400000; i++) {
		int64_t s = (int64_t)(rnd(&x) % (uint64_t)(hi - lo + 200000)) + lo - 100000;
		uint32_t ns = (uint32_t)(rnd(&x) % (i % 100 ? 1000000000u : 4000000000u));
		check_time(s, ns);
	}
}

/* text.h's rules, one byte or character at a time. */
static size_t utf8_len(const uint8_t *s, size_t n)
{
	uint8_t c = s[0];
	size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
	if (c >= 0xf5 || len == 0 || len > n)
		return 0;
	uint32_t cp = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || (len == 2 && cp < 0xa0))
		return 0;
	return len;
}

static size_t want_name(char *out, const uint8_t *s, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		uint8_t c = s[i];
		size_t len = c >= 0x80 ? utf8_len(s + i, n - i) : 0;
		if (len) {
			memcpy(out + o, s + i, len);
			o += len;
			i += len;
		} else if (c >= 0x20 && c < 0x7f && c != '\\') {
			out[o++] = (char)c;
			i++;
		} else {
			const char *e = c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\t' ? "\\t"
				      : c == '\r' ? "\\r" : NULL;
			if (e) {
				memcpy(out + o, e, 2);
				o += 2;
			} else {
				o += (size_t)sprintf(out + o, "\\x%02x", c);
			}
			i++;
		}
	}
	return o;
}

static void check_name(const uint8_t *s, size_t n)
{
	char want[4 * 64 + 1];
	size_t wn = want_name(want, s, n);
	struct jw w = { 0 };
	text_name_jw(&w, s, n, NULL);
	assert_int_equal(w.len, wn);
	assert_memory_equal(w.buf, want, wn);
	jw_line_free(&w);
	char *mem = NULL;
	size_t mlen = 0;
	FILE *f = open_memstream(&mem, &mlen);
	assert_non_null(f);
	text_name(f, s, n, NULL);
	fclose(f);
	assert_int_equal(mlen, wn);
	assert_memory_equal(mem, want, wn);
	free(mem);
}

static void test_names(void **state)
{
	(void)state;
	for (int c = 0; c < 256; c++) {
		uint8_t b = (uint8_t)c;
		check_name(&b, 1);
	}
	uint64_t x = 88172645463325252ull;
	for (int i = 0; i < 100000; i++) {
		uint8_t s[64];
		size_t n = rnd(&x) % 64;
		for (size_t k = 0; k < n; k++) /* mostly ASCII, some of everything */
			s[k] = (uint8_t)(rnd(&x) % 4 ? 0x20 + rnd(&x) % 95 : rnd(&x) % 256);
		check_name(s, n);
	}
	/* the bodyfile's separator, asked for */
	struct jw w = { 0 };
	text_name_jw(&w, (const uint8_t *)"a|b", 3, "|");
	assert_int_equal(w.len, 6);
	assert_memory_equal(w.buf, "a\\x7cb", 6);
	jw_line_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_times),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
