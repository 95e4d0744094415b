// SPDX-License-Identifier: MIT
/*
 * The CLI's JSON writer (tools/common/json.c): the word-at-a-time scan for bytes
 * a JSON string holds as they are against the byte-by-byte definition, on
 * every string of a small alphabet holding each class's edges; numbers
 * written in place against printf on the edges of their digit counts, of
 * 2^53 and of the 64-bit range.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"

/* The definition: printable ASCII but '"' and '\\'. */
static size_t plain_run_ref(const uint8_t *s, size_t n)
{
	size_t i = 0;
	while (i < n && s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' && s[i] != '\\')
		i++;
	return i;
}

/* Every class edge, and a byte after which borrows in a word's lanes could
 * hide one (0x80, 0xff next to 0x00 and 0x20). */
static const uint8_t alphabet[] = { 0x00, 0x01, 0x1f, 0x20, 0x21, '"',	0x23, 0x5b,
				    '\\', 0x5d, 'a',  0x7e, 0x7f, 0x80, 0xc3, 0xff };

static void test_plain_run(void **state)
{
	(void)state;
	uint8_t buf[40];
	/* one odd byte at every place in runs of every length up to 2 words
	 * and more, on every alignment */
	for (size_t len = 0; len <= 24; len++)
		for (size_t at = 0; at <= len; at++)
			for (size_t a = 0; a < sizeof(alphabet); a++)
				for (size_t off = 0; off < 8; off++) {
					memset(buf, 'x', sizeof(buf));
					if (at < len)
						buf[off + at] = alphabet[a];
					assert_int_equal(jw_plain_run(buf + off, len),
							 plain_run_ref(buf + off, len));
				}
	/* random strings over the alphabet, two odd bytes and more */
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (int k = 0; k < 200000; k++) {
		size_t len = (size_t)(k % 33);
		for (size_t i = 0; i < len; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			buf[i] = (x & 3) ? (uint8_t)('A' + (x >> 8) % 26) : alphabet[(x >> 8) % 16];
		}
		assert_int_equal(jw_plain_run(buf, len), plain_run_ref(buf, len));
	}
}

static void test_escape(void **state)
{
	(void)state;
	static const struct {
		const char *in, *out;
	} v[] = {
		{ "plain/ascii name.txt", "plain/ascii name.txt" },
		{ "quote\"back\\slash", "quote\\\"back\\\\slash" },
		{ "tab\there\nnl\r\b\f", "tab\\there\\nnl\\r\\b\\f" },
		{ "\x01\x1f\x7f", "\\u0001\\u001f\\u007f" },
		{ "caf\xc3\xa9 \xe2\x82\xac", "caf\xc3\xa9 \xe2\x82\xac" },
		{ "bad \xff\xc3(", "bad \\udcff\\udcc3(" },
		{ "eight by\"", "eight by\\\"" },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct jw w = { 0 };
		jw_escape(&w, (const uint8_t *)v[i].in, strlen(v[i].in));
		assert_int_equal(w.len, strlen(v[i].out));
		assert_memory_equal(w.buf, v[i].out, w.len);
		jw_line_free(&w);
		/* in place, as hot lines write it: the same bytes in quotes,
		 * and the room asked for after it still there */
		size_t n = strlen(v[i].in);
		jw_grow(&w, 5 + n + 2 + 16);
		memcpy(w.buf, "{\"a\":", 5);
		char *p = jw_str_at(&w, w.buf + 5, v[i].in, n, 16);
		assert_true(p + 16 <= w.buf + w.cap);
		assert_int_equal((size_t)(p - w.buf), 5 + strlen(v[i].out) + 2);
		assert_memory_equal(w.buf + 6, v[i].out, strlen(v[i].out));
		assert_int_equal(w.buf[5], '"');
		assert_int_equal(p[-1], '"');
		jw_line_free(&w);
	}
}

static void check_u64(uint64_t v)
{
	char want[32], have[32];
	int n = v <= JW_SAFE_MAX ? snprintf(want, sizeof(want), "%" PRIu64, v)
				 : snprintf(want, sizeof(want), "\"%" PRIu64 "\"", v);
	size_t k = jw_u64_at(have, v);
	assert_int_equal(k, (size_t)n);
	assert_memory_equal(have, want, k);
	n = snprintf(want, sizeof(want), "%" PRIu64, v);
	k = jw_dec_at(have, v);
	assert_int_equal(k, (size_t)n);
	assert_memory_equal(have, want, k);
}

static void check_i64(int64_t v)
{
	char want[32], have[32];
	uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	int n = mag <= JW_SAFE_MAX ? snprintf(want, sizeof(want), "%" PRId64, v)
				   : snprintf(want, sizeof(want), "\"%" PRId64 "\"", v);
	size_t k = jw_i64_at(have, v);
	assert_int_equal(k, (size_t)n);
	assert_memory_equal(have, want, k);
}

static void test_numbers(void **state)
{
	(void)state;
	uint64_t p = 1;
	for (int d = 0; d < 20; d++, p *= 10) {
		check_u64(p - 1);
		check_u64(p);
		check_u64(p + 1);
		check_i64(-(int64_t)p);
		check_i64((int64_t)p - 1);
	}
	for (int b = 0; b < 64; b++) {
		uint64_t v = (uint64_t)1 << b;
		check_u64(v - 1);
		check_u64(v);
		check_u64(v + 1);
		check_i64(-(int64_t)(v >> 1) - 1);
	}
	check_u64(JW_SAFE_MAX);
	check_u64(JW_SAFE_MAX + 1);
	check_u64(UINT64_MAX);
	check_i64(-(int64_t)JW_SAFE_MAX);
	check_i64(-(int64_t)JW_SAFE_MAX - 1);
	check_i64(INT64_MIN);
	check_i64(INT64_MAX);
	check_i64(0);
	/* every digit count, many values each (xorshift, then cut down) */
	uint64_t x = 88172645463325252ull;
	for (int i = 0; i < 200000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		check_u64(x >> (i % 64));
		check_i64((int64_t)(x >> (i % 64)) * (i % 2 ? -1 : 1));
	}
}

/* A run's numbers against snprintf: climbing by steps of 0 to 11 across
 * tens, powers of ten and the quoting limit, falling, and jumping. */
static void check_run(struct jw_run *r, uint64_t v)
{
	char want[32], have[32];
	int n = v <= JW_SAFE_MAX || jw_big_as_number
			? snprintf(want, sizeof(want), "%" PRIu64, v)
			: snprintf(want, sizeof(want), "\"%" PRIu64 "\"", v);
	size_t k = jw_run_at(r, have, v);
	assert_int_equal(k, (size_t)n);
	assert_memory_equal(have, want, k);
}

static void test_runs(void **state)
{
	(void)state;
	const uint64_t starts[] = { 0, 5, 95, 999990, JW_SAFE_MAX - 40, UINT64_MAX - 40,
				    (UINT64_C(1) << 40) + 250 };
	uint64_t x = 88172645463325252ull;
	for (size_t s = 0; s < 2 * sizeof(starts) / sizeof(starts[0]); s++) {
		/* each start with big numbers quoted, then bare */
		jw_big_as_number = s >= sizeof(starts) / sizeof(starts[0]);
		struct jw_run r = { 0 };
		uint64_t v = starts[s % (sizeof(starts) / sizeof(starts[0]))];
		for (int i = 0; i < 2000 && v <= UINT64_MAX - 12; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			check_run(&r, v);
			check_run(&r, v); /* the same again */
			if (x % 50 == 0 && v > 7)
				check_run(&r, v - 7); /* below the run's base */
			v += x % 12;
		}
		check_run(&r, x);
		check_run(&r, UINT64_MAX);
		check_run(&r, 0);
	}
	jw_big_as_number = false;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_run),
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_runs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
