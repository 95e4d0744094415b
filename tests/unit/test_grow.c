// SPDX-License-Identifier: MIT
/* The growth helper (base/grow.h): doubling, the limit, the overflow
 * checks, and an array left as it was when growth is refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/grow.h"

static void test_first_and_doubling(void **state)
{
	(void)state;
	uint32_t *a = NULL;
	size_t cap = 0;
	assert_int_equal(bi_grow((void **)&a, &cap, 1, sizeof(*a)), 0);
	assert_non_null(a);
	assert_int_equal(cap, BI_GROW_FIRST);
	for (size_t i = 0; i < cap; i++)
		a[i] = (uint32_t)i;
	assert_int_equal(bi_grow((void **)&a, &cap, BI_GROW_FIRST + 1, sizeof(*a)), 0);
	assert_int_equal(cap, 2 * BI_GROW_FIRST);
	for (size_t i = 0; i < BI_GROW_FIRST; i++) /* the elements survive */
		assert_int_equal(a[i], i);
	/* far past double: doubled until it holds what is needed */
	assert_int_equal(bi_grow((void **)&a, &cap, 1000, sizeof(*a)), 0);
	assert_int_equal(cap, 1024);
	a[999] = 7;
	free(a);
}

static void test_room_enough(void **state)
{
	(void)state;
	size_t cap = 40;
	void *a = malloc(40);
	void *was = a;
	assert_int_equal(bi_grow(&a, &cap, 40, 1), 0);
	assert_int_equal(bi_grow(&a, &cap, 0, 1), 0);
	assert_ptr_equal(a, was);
	assert_int_equal(cap, 40);
	free(a);
}

static void test_most(void **state)
{
	(void)state;
	void *a = NULL;
	size_t cap = 0;
	assert_int_equal(bi_grow_most(&a, &cap, 20, 4, 40), 0);
	assert_int_equal(cap, 32);
	assert_int_equal(bi_grow_most(&a, &cap, 33, 4, 40), 0);
	assert_int_equal(cap, 40); /* clipped, not 64 */
	void *was = a;
	assert_int_equal(bi_grow_most(&a, &cap, 41, 4, 40), -EOVERFLOW);
	assert_ptr_equal(a, was);
	assert_int_equal(cap, 40);
	free(a);
	/* a limit below the first capacity */
	a = NULL;
	cap = 0;
	assert_int_equal(bi_grow_most(&a, &cap, 2, 8, 3), 0);
	assert_int_equal(cap, 3);
	free(a);
}

static void test_overflow(void **state)
{
	(void)state;
	uint64_t *a = malloc(BI_GROW_FIRST * sizeof(*a));
	uint64_t *was = a;
	size_t cap = BI_GROW_FIRST;
	/* need * elem past SIZE_MAX: refused before any multiplication */
	assert_int_equal(bi_grow((void **)&a, &cap, SIZE_MAX / sizeof(*a) + 1, sizeof(*a)),
			 -EOVERFLOW);
	assert_int_equal(bi_grow((void **)&a, &cap, SIZE_MAX, sizeof(*a)), -EOVERFLOW);
	assert_ptr_equal(a, was);
	assert_int_equal(cap, BI_GROW_FIRST);
	free(a);
	/* elements so large that three overflow: nothing allocated */
	void *b = NULL;
	size_t bcap = 0;
	assert_int_equal(bi_grow(&b, &bcap, 3, SIZE_MAX / 2), -EOVERFLOW);
	assert_null(b);
	assert_int_equal(bcap, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_and_doubling),
		cmocka_unit_test(test_room_enough),
		cmocka_unit_test(test_most),
		cmocka_unit_test(test_overflow),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
