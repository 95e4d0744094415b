// SPDX-License-Identifier: MIT
/*
 * Superblock decoding against btrfs-progs: testdata/super/<type>.bin are
 * primary superblocks written by the kernel (one per checksum type) and
 * <type>.dump.txt is what `btrfs inspect-internal dump-super -f` printed
 * for each. Every field we decode must equal the dump. Then each check is
 * exercised by damaging one field (and re-checksumming where the damage
 * must get past the checksum).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/ondisk.h"
#include "btrfs/super.h"

static const char *const types[] = { "crc32c", "xxhash64", "sha256", "blake2b" };

static void load_bin(const char *name, uint8_t *buf)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/super/%s.bin", TESTDATA, name);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fread(buf, 1, SB_SIZE, f), SB_SIZE);
	fclose(f);
}

/* The value dump-super printed for @key (first token after the key). */
static void dump_value(const char *name, const char *key, char *out, size_t outlen)
{
	char path[512], line[512];
	snprintf(path, sizeof(path), "%s/super/%s.dump.txt", TESTDATA, name);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	out[0] = '\0';
	size_t klen = strlen(key);
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) || (line[klen] != '\t' && line[klen] != ' '))
			continue;
		char *v = line + klen;
		v += strspn(v, " \t");
		v[strcspn(v, " \t\n")] = '\0';
		snprintf(out, outlen, "%s", v);
		break;
	}
	fclose(f);
	if (!out[0] && strcmp(key, "label"))
		fail_msg("%s: no '%s' in dump", name, key);
}

static uint64_t dump_u64(const char *name, const char *key)
{
	char v[128];
	dump_value(name, key, v, sizeof(v));
	return strtoull(v, NULL, 0);
}

static void expect_uuid(const char *name, const char *key, const uint8_t u[16])
{
	char want[128], have[37];
	dump_value(name, key, want, sizeof(want));
	bi_uuid_str(u, have);
	assert_string_equal(have, want);
}

static void test_matches_dump_super(void **state)
{
	(void)state;
	for (size_t t = 0; t < 4; t++) {
		uint8_t buf[SB_SIZE];
		struct bi_super s;
		char why[256];
		load_bin(types[t], buf);
		assert_int_equal(bi_super_parse(buf, SB_SIZE, 65536, &s, why, sizeof(why)),
				 BTRFSIMG_MIRROR_VALID);
		const char *n = types[t];
		const struct btrfsimg_super_info *i = &s.info;
		assert_int_equal(i->csum_type, dump_u64(n, "csum_type"));
		assert_int_equal(i->csum_type, t);
		assert_true(i->generation == dump_u64(n, "generation"));
		assert_true(i->root == dump_u64(n, "root"));
		assert_true(i->chunk_root == dump_u64(n, "chunk_root"));
		assert_true(i->log_root == dump_u64(n, "log_root"));
		assert_true(i->total_bytes == dump_u64(n, "total_bytes"));
		assert_true(i->bytes_used == dump_u64(n, "bytes_used"));
		assert_true(i->sectorsize == dump_u64(n, "sectorsize"));
		assert_true(i->nodesize == dump_u64(n, "nodesize"));
		assert_true(i->stripesize == dump_u64(n, "stripesize"));
		assert_true(i->num_devices == dump_u64(n, "num_devices"));
		assert_true(i->root_level == dump_u64(n, "root_level"));
		assert_true(i->chunk_root_level == dump_u64(n, "chunk_root_level"));
		assert_true(i->compat_ro_flags == dump_u64(n, "compat_ro_flags"));
		assert_true(i->incompat_flags == dump_u64(n, "incompat_flags"));
		assert_true(i->uuid_tree_generation == dump_u64(n, "uuid_tree_generation"));
		assert_true(s.sys_array_size == dump_u64(n, "sys_array_size"));
		assert_true(s.chunk_root_generation == dump_u64(n, "chunk_root_generation"));
		assert_true(s.devid == dump_u64(n, "dev_item.devid"));
		assert_true(s.dev_total_bytes == dump_u64(n, "dev_item.total_bytes"));
		expect_uuid(n, "fsid", i->fsid);
		expect_uuid(n, "metadata_uuid", i->metadata_uuid);
		expect_uuid(n, "dev_item.uuid", s.dev_uuid);
		assert_string_equal(btrfsimg_csum_name(t), types[t]);
	}
}

static void resum(uint8_t *buf)
{
	uint8_t sum[CSUM_SIZE_MAX];
	int type = buf[SB_CSUM_TYPE];
	bi_csum(type, buf + SB_CSUM_START, SB_SIZE - SB_CSUM_START, sum);
	memcpy(buf, sum, CSUM_SIZE_MAX);
}

static int parse(const uint8_t *buf, uint64_t bytenr, char *why)
{
	struct bi_super s;
	return bi_super_parse(buf, SB_SIZE, bytenr, &s, why, 256);
}

static void expect_state(const uint8_t *buf, int state, const char *msg)
{
	char why[256] = "";
	assert_int_equal(parse(buf, 65536, why), state);
	if (!strstr(why, msg))
		fail_msg("message '%s' lacks '%s'", why, msg);
}

static void test_damage(void **state)
{
	(void)state;
	for (size_t t = 0; t < 4; t++) {
		uint8_t good[SB_SIZE], b[SB_SIZE];
		char why[256];
		load_bin(types[t], good);

		memcpy(b, good, SB_SIZE);
		b[SB_MAGIC_OFF] ^= 0x20;
		expect_state(b, BTRFSIMG_MIRROR_BAD_MAGIC, "bad magic");
		assert_int_equal(parse(good, 64ull << 20, why), BTRFSIMG_MIRROR_BAD_BYTENR);

		memcpy(b, good, SB_SIZE);
		b[SB_GENERATION] ^= 1; /* any covered byte breaks the checksum */
		expect_state(b, BTRFSIMG_MIRROR_BAD_CSUM, "checksum mismatch");
		memcpy(b, good, SB_SIZE);
		b[SB_SIZE - 1] ^= 1; /* the last covered byte too */
		expect_state(b, BTRFSIMG_MIRROR_BAD_CSUM, "checksum mismatch");
		memcpy(b, good, SB_SIZE);
		b[31] ^= 1; /* padding of the csum field past the digest is not covered */
		assert_int_equal(parse(b, 65536, why),
				 bi_csum_size((int)t) == 32 ? BTRFSIMG_MIRROR_BAD_CSUM
							    : BTRFSIMG_MIRROR_VALID);

		memcpy(b, good, SB_SIZE);
		bi_put_le32(b + SB_SECTORSIZE, 3000);
		resum(b);
		expect_state(b, BTRFSIMG_MIRROR_BAD_FIELDS, "bad sectorsize, have 3000");
		memcpy(b, good, SB_SIZE);
		bi_put_le32(b + SB_NODESIZE, 131072);
		resum(b);
		expect_state(b, BTRFSIMG_MIRROR_BAD_FIELDS, "bad nodesize, have 131072");
		memcpy(b, good, SB_SIZE);
		b[SB_ROOT_LEVEL] = 8;
		resum(b);
		expect_state(b, BTRFSIMG_MIRROR_BAD_FIELDS, "bad root level, have 8");
		memcpy(b, good, SB_SIZE);
		bi_put_le64(b + SB_CHUNK_ROOT, 22036481);
		resum(b);
		expect_state(b, BTRFSIMG_MIRROR_BAD_FIELDS, "chunk_root 22036481 not aligned");
		memcpy(b, good, SB_SIZE);
		bi_put_le32(b + SB_SYS_CHUNK_ARRAY_SIZE, 2049);
		resum(b);
		expect_state(b, BTRFSIMG_MIRROR_BAD_FIELDS, "bad sys_chunk_array_size, have 2049");
		memcpy(b, good, SB_SIZE);
		bi_put_le64(b + SB_NUM_DEVICES, 0);
		resum(b);
		expect_state(b, BTRFSIMG_MIRROR_BAD_FIELDS, "bad num_devices, have 0");
		memcpy(b, good, SB_SIZE);
		b[SB_DEV_ITEM + DEV_FSID] ^= 1;
		resum(b);
		expect_state(b, BTRFSIMG_MIRROR_BAD_FIELDS, "dev_item fsid does not match");
		memcpy(b, good, SB_SIZE);
		b[SB_CSUM_TYPE] = 9;
		expect_state(b, BTRFSIMG_MIRROR_BAD_FIELDS, "unknown csum_type 9");
	}
}

static void test_mirror_offsets(void **state)
{
	(void)state;
	assert_true(bi_super_offset(0) == 65536ull);
	assert_true(bi_super_offset(1) == 64ull << 20);
	assert_true(bi_super_offset(2) == 256ull << 30);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matches_dump_super),
		cmocka_unit_test(test_damage),
		cmocka_unit_test(test_mirror_offsets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
