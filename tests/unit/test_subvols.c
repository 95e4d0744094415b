// SPDX-License-Identifier: MIT
/*
 * What btrfsimg_subvols() decides about each subvolume beyond its root
 * item: snapshot (truth: the IDs `btrfs subvolume list -s` printed when the
 * image was made) and snapshot_of (truth: libbtrfsutil's parent_uuid and
 * uuid per tree id, recorded in subvol-info.jsonl: the source is the other
 * subvolume whose uuid is the parent uuid). btrfsimg_subvol_find() against
 * a linear search. Also btrfsimg_bg_type_name(), the other naming the CLI
 * and the Python binding share: hand-worked vectors, and the mixed image
 * (made with mkfs.btrfs --mixed, sysfs features: mixed_groups).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>

#include "btrfsimg.h"
#include "unpack.h"

#define MAXSV 256

struct truth {
	size_t n;
	uint64_t id[MAXSV];
	char uuid[MAXSV][37], parent[MAXSV][37]; /* "" for null */
	bool snap[MAXSV];			 /* listed by -s */
};

/* "KEY": "value" or "KEY": null from one JSON line of subvol-info.jsonl. */
static void json_str(const char *line, const char *key, char out[37])
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	const char *p = strstr(line, pat);
	assert_non_null(p);
	p += strlen(pat);
	out[0] = '\0';
	if (*p == '"') {
		assert_true(strlen(p) > 37 && p[37] == '"');
		memcpy(out, p + 1, 36);
		out[36] = '\0';
	}
}

static void read_truth(const char *dir, struct truth *t)
{
	char path[4200], line[8192];
	memset(t, 0, sizeof(*t));
	snprintf(path, sizeof(path), "%s/subvol-info.jsonl", dir);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		assert_true(t->n < MAXSV);
		const char *p = strstr(line, "\"treeid\": ");
		assert_non_null(p);
		t->id[t->n] = strtoull(p + 10, NULL, 10);
		json_str(line, "uuid", t->uuid[t->n]);
		json_str(line, "parent_uuid", t->parent[t->n]);
		t->n++;
	}
	fclose(f);
	snprintf(path, sizeof(path), "%s/subvol-list-s.txt", dir);
	f = fopen(path, "r");
	assert_non_null(f);
	size_t listed = 0;
	while (fgets(line, sizeof(line), f)) {
		uint64_t id;
		assert_int_equal(sscanf(line, "ID %" SCNu64, &id), 1);
		size_t i = 0;
		while (i < t->n && t->id[i] != id)
			i++;
		assert_true(i < t->n);
		t->snap[i] = true;
		listed++;
	}
	fclose(f);
	assert_true(listed > 0);
}

static void uuid_text(const uint8_t u[16], char out[37])
{
	static const uint8_t zero[16];
	out[0] = '\0';
	if (!memcmp(u, zero, 16))
		return;
	for (int i = 0, o = 0; i < 16; i++)
		o += sprintf(out + o, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "",
			     u[i]);
}

static const struct btrfsimg_subvol *linear(const struct btrfsimg_subvol *v, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].id == id)
			return &v[i];
	return NULL;
}

static void check_image(const char *name)
{
	char dir[4096], zst[4200];
	snprintf(dir, sizeof(dir), "%s/images/%s", TESTDATA, name);
	snprintf(zst, sizeof(zst), "%s/dev1.img.zst", dir);
	struct truth t;
	read_truth(dir, &t);
	char *img = unpack_zst(zst, NULL);
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, NULL), 0);
	assert_int_equal(btrfsimg_add_device_file(fs, img), 0);
	assert_int_equal(btrfsimg_open(fs), 0);
	struct btrfsimg_subvol *v;
	size_t n;
	assert_int_equal(btrfsimg_subvols(fs, &v, &n), 0);
	size_t snaps = 0, sources = 0, seen = 0;
	for (size_t k = 0; k < n; k++) {
		size_t i = 0;
		while (i < t.n && t.id[i] != v[k].id)
			i++;
		if (i == t.n) { /* btrfs subvolume list leaves out deleted ones */
			assert_true(v[k].deleted);
			continue;
		}
		seen++;
		char u[37];
		uuid_text(v[k].uuid, u);
		assert_string_equal(u, t.uuid[i]);
		if (v[k].snapshot != t.snap[i])
			fail_msg("%s: subvolume %" PRIu64
				 ": snapshot %d, btrfs subvolume list -s %s",
				 name, v[k].id, v[k].snapshot, t.snap[i] ? "lists it" : "does not");
		uint64_t want = 0;
		for (size_t j = 0; j < t.n && !want && *t.parent[i]; j++)
			if (j != i && !strcmp(t.uuid[j], t.parent[i]))
				want = t.id[j];
		assert_int_equal(v[k].snapshot_of, want);
		snaps += v[k].snapshot;
		sources += want != 0;
	}
	assert_int_equal(seen, t.n);
	assert_true(snaps > 0 && sources > 0);
	/* find: every id, and the ids around each, as a linear search says */
	assert_null(btrfsimg_subvol_find(NULL, 0, 5));
	assert_null(btrfsimg_subvol_find(v, 0, 5));
	assert_null(btrfsimg_subvol_find(v, n, UINT64_MAX));
	for (size_t i = 0; i < n; i++)
		for (uint64_t id = v[i].id - 1; id <= v[i].id + 1; id++) {
			assert_ptr_equal(btrfsimg_subvol_find(v, n, id), linear(v, n, id));
			for (size_t k = 0; k <= n; k++) /* every prefix */
				assert_ptr_equal(btrfsimg_subvol_find(v, k, id), linear(v, k, id));
		}
	btrfsimg_subvols_free(v, n);
	btrfsimg_fs_free(fs);
	unlink(img);
	free(img);
}

/* Snapshots of snapshots, a read-only snapshot, a received subvolume. */
static void test_nested(void **state)
{
	(void)state;
	check_image("nested");
}

/* 4 KiB nodes, thirty snapshots. */
static void test_node4k(void **state)
{
	(void)state;
	check_image("node4k");
}

static void test_bg_type_name(void **state)
{
	(void)state;
	assert_string_equal(btrfsimg_bg_type_name(BTRFSIMG_BG_DATA), "data");
	assert_string_equal(btrfsimg_bg_type_name(BTRFSIMG_BG_METADATA), "metadata");
	assert_string_equal(btrfsimg_bg_type_name(BTRFSIMG_BG_SYSTEM), "system");
	assert_string_equal(btrfsimg_bg_type_name(BTRFSIMG_BG_DATA | BTRFSIMG_BG_METADATA),
			    "data+metadata");
	assert_string_equal(btrfsimg_bg_type_name(0), "other");
	char *img = unpack_zst(TESTDATA "/images/mixed/dev1.img.zst", NULL);
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, NULL), 0);
	assert_int_equal(btrfsimg_add_device_file(fs, img), 0);
	assert_int_equal(btrfsimg_open(fs), 0);
	struct btrfsimg_profile_use p[16];
	size_t n = 0, mixed = 0;
	assert_int_equal(btrfsimg_profiles(fs, p, 16, &n), 0);
	for (size_t i = 0; i < n && i < 16; i++)
		mixed += !strcmp(btrfsimg_bg_type_name(p[i].type), "data+metadata");
	assert_true(mixed > 0);
	btrfsimg_fs_free(fs);
	unlink(img);
	free(img);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nested),
		cmocka_unit_test(test_node4k),
		cmocka_unit_test(test_bg_type_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
