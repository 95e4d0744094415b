// SPDX-License-Identifier: MIT
/* Bounded cursor: reads inside the window decode little-endian values;
 * any read that does not fit (including offset/length overflow) returns 0
 * and sets the sticky flag. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/cursor.h"

static const uint8_t buf[16] = { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
				 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8 };

static void test_le_values(void **state)
{
	(void)state;
	struct bi_cur c = bi_cur_make(buf, sizeof(buf));
	assert_int_equal(bi_u8(&c, 0), 0x01);
	assert_int_equal(bi_u16(&c, 0), 0x0201);
	assert_int_equal(bi_u32(&c, 0), 0x04030201u);
	assert_true(bi_u64(&c, 0) == 0x0807060504030201ull);
	assert_true(bi_u64(&c, 8) == 0xf8f7f6f5f4f3f2f1ull);
	assert_false(c.bad);
}

static void test_out_of_bounds(void **state)
{
	(void)state;
	struct bi_cur c = bi_cur_make(buf, sizeof(buf));
	assert_true(bi_u64(&c, 9) == 0);	/* 9 + 8 > 16 */
	assert_true(c.bad);
	c = bi_cur_make(buf, sizeof(buf));
	assert_int_equal(bi_u8(&c, 16), 0);
	assert_true(c.bad);
	c = bi_cur_make(buf, sizeof(buf));
	assert_null(bi_bytes(&c, 8, SIZE_MAX));	/* length overflow */
	assert_true(c.bad);
	c = bi_cur_make(buf, sizeof(buf));
	assert_null(bi_bytes(&c, SIZE_MAX, 2));	/* offset overflow */
	assert_true(c.bad);
	c = bi_cur_make(buf, sizeof(buf));
	assert_non_null(bi_bytes(&c, 16, 0));	/* empty range at the end fits */
	assert_false(c.bad);
}

static void test_sticky_and_sub(void **state)
{
	(void)state;
	struct bi_cur c = bi_cur_make(buf, sizeof(buf));
	struct bi_cur s = bi_sub(&c, 8, 8);
	assert_false(s.bad);
	assert_int_equal(bi_u8(&s, 0), 0xf1);
	assert_int_equal(bi_u8(&s, 8), 0);	/* past the sub-window, inside the parent */
	assert_true(s.bad);
	assert_false(c.bad);
	struct bi_cur t = bi_sub(&c, 12, 8);
	assert_true(t.bad);
	assert_true(c.bad);
	uint8_t out[4] = { 9, 9, 9, 9 };
	c = bi_cur_make(buf, sizeof(buf));
	bi_copy(&c, 14, out, 4);
	assert_true(c.bad);
	assert_int_equal(out[0] | out[1] | out[2] | out[3], 0);
}

static void test_checked_arith(void **state)
{
	(void)state;
	uint64_t r;
	assert_true(bi_add_ok(1, 2, &r) && r == 3);
	assert_false(bi_add_ok(UINT64_MAX, 1, &r));
	assert_false(bi_mul_ok(1ull << 33, 1ull << 31, &r));
	assert_true(bi_fits64(100, 50, 50));
	assert_false(bi_fits64(100, 50, 51));
	assert_false(bi_fits64(100, 101, 0));
	assert_false(bi_fits64(UINT64_MAX, 1, UINT64_MAX));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_le_values),
		cmocka_unit_test(test_out_of_bounds),
		cmocka_unit_test(test_sticky_and_sub),
		cmocka_unit_test(test_checked_arith),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
