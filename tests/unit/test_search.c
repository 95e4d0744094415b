// SPDX-License-Identifier: MIT
/* Binary search (base/search.h) against a linear scan: every value
 * around the elements of sorted arrays with runs of equal values, over
 * plain uint64_t arrays and a field of an array of structs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/search.h"

struct rec {
	uint8_t pad;
	uint64_t key;
	uint32_t other;
};

static size_t linear(const uint64_t *v, size_t n, uint64_t x)
{
	size_t i = 0;
	while (i < n && v[i] < x)
		i++;
	return i;
}

static void test_against_linear(void **state)
{
	(void)state;
	uint64_t v[64], seed = 1;
	struct rec r[64];
	for (size_t n = 0; n <= 64; n++) {
		uint64_t at = 0;
		for (size_t i = 0; i < n; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			at += (seed >> 60) % 3; /* steps of 0, 1 or 2: runs and gaps */
			v[i] = at;
			r[i] = (struct rec){ (uint8_t)i, at, (uint32_t)~i };
		}
		for (uint64_t x = 0; x <= at + 2; x++) {
			size_t want = linear(v, n, x);
			assert_int_equal(bi_lower_bound(v, n, x), want);
			assert_int_equal(bi_lower_bound_field(r, n, sizeof(*r),
							      offsetof(struct rec, key), x), want);
		}
	}
	/* the largest value and an empty array given as NULL */
	uint64_t big[] = { 1, UINT64_MAX };
	assert_int_equal(bi_lower_bound(big, 2, UINT64_MAX), 1);
	assert_int_equal(bi_lower_bound_field(NULL, 0, sizeof(struct rec), 8, 5), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_linear),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
