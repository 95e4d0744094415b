// SPDX-License-Identifier: MIT
/* Damaged names (base/name.h): which names cannot be a path component,
 * their one safe form, and the way back from it. Vectors worked by hand
 * from the rule in the man page (DAMAGED NAMES). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/name.h"
#include "btrfsimg.h"

#define N(s) (const uint8_t *)(s), sizeof(s) - 1

static void test_problem(void **state)
{
	(void)state;
	assert_null(bi_name_problem(N("a")));
	assert_null(bi_name_problem(N("...")));
	assert_null(bi_name_problem(N(".a")));
	assert_null(bi_name_problem(N("%2F")));
	assert_null(bi_name_problem(N("\\x2f")));
	assert_string_equal(bi_name_problem(N("")), "empty name");
	assert_string_equal(bi_name_problem(N(".")), "name is \".\"");
	assert_string_equal(bi_name_problem(N("..")), "name is \"..\"");
	assert_string_equal(bi_name_problem(N("a/b")), "name holds a '/'");
	assert_string_equal(bi_name_problem(N("a\0b")), "name holds a NUL byte");
	assert_string_equal(bi_name_problem(N("/\0")), "name holds a NUL byte");
}

static void safe_is(const uint8_t *name, size_t len, const char *want)
{
	char out[64];
	assert_int_equal(bi_name_safe(name, len, out, sizeof(out)), strlen(want));
	assert_string_equal(out, want);
	/* and back, for damaged names only */
	uint8_t raw[64];
	size_t n = 99;
	int rc = bi_name_raw(out, strlen(out), raw, sizeof(raw), &n);
	if (bi_name_problem(name, len)) {
		assert_int_equal(rc, 0);
		assert_int_equal(n, len);
		assert_memory_equal(raw, name, len);
	} else {
		assert_int_equal(rc, -EINVAL);
	}
}

static void test_safe_vectors(void **state)
{
	(void)state;
	safe_is(N("plain"), "plain");
	safe_is(N("50%"), "50%");		/* valid: '%' stays */
	safe_is(N("l/g1"), "l%2Fg1");
	safe_is(N("/a/b"), "%2Fa%2Fb");
	safe_is(N("l\0g2"), "l%00g2");
	safe_is(N("."), "%2E");
	safe_is(N(".."), "%2E%2E");
	safe_is(N(""), "%");
	safe_is(N("5%/x"), "5%25%2Fx");		/* damaged: its '%' escaped too */
	safe_is(N("\xff/\n"), "\xff%2F\n");	/* other bytes as they are */
}

static void test_raw_refuses(void **state)
{
	(void)state;
	uint8_t raw[16];
	size_t n;
	/* not the safe form of a damaged name: stands for itself */
	assert_int_equal(bi_name_raw("abc", 3, raw, sizeof(raw), &n), -EINVAL);
	assert_int_equal(bi_name_raw("%41", 3, raw, sizeof(raw), &n), -EINVAL);  /* "A" valid */
	assert_int_equal(bi_name_raw("%2f", 3, raw, sizeof(raw), &n), -EINVAL);  /* lowercase */
	assert_int_equal(bi_name_raw("a%2", 3, raw, sizeof(raw), &n), -EINVAL);  /* cut */
	assert_int_equal(bi_name_raw("%%2F", 4, raw, sizeof(raw), &n), -EINVAL);
	assert_int_equal(bi_name_raw("%2E.", 4, raw, sizeof(raw), &n), -EINVAL); /* ".." spelled once */
	assert_int_equal(bi_name_raw("%2F%", 4, raw, sizeof(raw), &n), -EINVAL);
	assert_int_equal(bi_name_raw("%2F%2F", 6, raw, 1, &n), -EINVAL);	  /* no room */
	assert_int_equal(bi_name_raw("%", 1, raw, sizeof(raw), &n), 0);	  /* the empty name */
	assert_int_equal(n, 0);
}

static void test_cut_to_fit(void **state)
{
	(void)state;
	char out[4];
	assert_int_equal(bi_name_safe(N("a/b"), out, sizeof(out)), 5);
	assert_string_equal(out, "a");	/* whole escapes only, NUL-terminated */
	assert_int_equal(bi_name_safe(N("a/b"), NULL, 0), 5);
}

static void test_damage_message(void **state)
{
	(void)state;
	char m[256];
	struct btrfsimg_dirent e = { .name = (const uint8_t *)"l/g1", .name_len = 4, .index = 3 };
	size_t n = btrfsimg_name_damage(258, 256, &e, m, sizeof(m));
	assert_int_equal(n, strlen(m));
	assert_string_equal(m, "damaged name: subvolume 258 directory 256 DIR_INDEX (256 96 3), "
			       "name holds a '/': shown as 'l%2Fg1'");
	e.name = (const uint8_t *)"log1";
	assert_int_equal(btrfsimg_name_damage(258, 256, &e, m, sizeof(m)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_problem),		cmocka_unit_test(test_safe_vectors),
		cmocka_unit_test(test_raw_refuses),	cmocka_unit_test(test_cut_to_fit),
		cmocka_unit_test(test_damage_message),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
