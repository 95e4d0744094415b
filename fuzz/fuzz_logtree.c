// SPDX-License-Identifier: MIT
/*
 * Log tree replay (bi_lr_replay), the pure computation: a base fs tree
 * (subvolume 5), its log tree, a csum tree and an extent tree, all built
 * from the input, then replayed. Input:
 *
 *   byte 0   flags: bit 0 NO_HOLES, bit 1 EXTENDED_IREF
 *   records to the end, each:
 *     u8  list: low 2 bits: 0 fs tree, 1 log, 2 csum tree, 3 extent tree
 *     u8  objectid: < 240: 256 + v; 240 ORPHAN (-5), 241 log fixup (-7),
 *         242 EXTENT_CSUM (-10), 243 5, 244..254: 256 * (v - 243),
 *         255: a u64 follows
 *     u8  key type
 *     u8  n (0..8), then n bytes of the key offset (little-endian)
 *     u16 item size (capped to what is left), then the item
 *
 * Keys are sorted, duplicates dropped (first wins). Memory is capped at
 * 64 bytes per input byte (+64 KiB) and work at 200000 item operations.
 * Invariants: on failure a message and a known errno; on success every
 * overlay is for root 5 or 7, its puts strictly ascending with data, its
 * deletions sorted single keys, no fixup or orphan item left behind,
 * checksum items whole checksums, total put bytes within the cap; and a
 * second run gives the same overlays (no dependence on stale memory).
 * Seeds (fuzz/corpus/logtree/) come from testdata/logtree/gen_logtree_seeds.py.
 */
#include <stdlib.h>
#include <string.h>

#include "base/cursor.h"
#include "base/err.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/tree.h"
#include "logreplay/replay.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)
#define MAX_ITEMS 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct list {
	struct bi_lr_item v[MAX_ITEMS];
	size_t n;
};

struct input {
	struct list l[4];
	bool no_holes, ext_iref;
};

static bool take(const uint8_t **p, const uint8_t *end, size_t n)
{
	if ((size_t)(end - *p) < n)
		return false;
	*p += n;
	return true;
}

static uint64_t objectid(uint8_t v, const uint8_t **p, const uint8_t *end, bool *ok)
{
	static const uint64_t special[] = { (uint64_t)-5, (uint64_t)-7, (uint64_t)-10, 5 };
	if (v < 240)
		return 256 + v;
	if (v < 244)
		return special[v - 240];
	if (v < 255)
		return 256ull * (v - 243);
	const uint8_t *q = *p;
	*ok = take(p, end, 8);
	return *ok ? bi_le64(q) : 0;
}

struct tagged {
	struct bi_lr_item it;
	size_t idx;
};

static int tagged_cmp(const void *a, const void *b)
{
	const struct tagged *x = a, *y = b;
	int c = bi_key_cmp(&x->it.key, &y->it.key);
	return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Sort by key; of equal keys the first in the input stays. */
static void sort_unique(struct list *l)
{
	static struct tagged t[MAX_ITEMS];
	for (size_t i = 0; i < l->n; i++)
		t[i] = (struct tagged){ l->v[i], i };
	qsort(t, l->n, sizeof(t[0]), tagged_cmp);
	size_t k = 0;
	for (size_t i = 0; i < l->n; i++)
		if (k == 0 || bi_key_cmp(&l->v[k - 1].key, &t[i].it.key) != 0)
			l->v[k++] = t[i].it;
	l->n = k;
}

static void parse(const uint8_t *p, const uint8_t *end, struct input *in)
{
	in->no_holes = p[0] & 1;
	in->ext_iref = p[0] & 2;
	p++;
	while (end - p >= 4) {
		uint8_t which = p[0] & 3, ov = p[1];
		p += 2;
		bool ok = true;
		bi_key k = { objectid(ov, &p, end, &ok), 0, 0 };
		if (!ok || end - p < 2)
			break;
		k.type = *p++;
		uint8_t n = *p++ % 9;
		for (uint8_t i = 0; i < n && p < end; i++)
			k.offset |= (uint64_t)*p++ << (8 * i);
		if (end - p < 2)
			break;
		size_t len = bi_le16(p);
		p += 2;
		if (len > (size_t)(end - p))
			len = (size_t)(end - p);
		struct list *l = &in->l[which];
		if (l->n < MAX_ITEMS)
			l->v[l->n++] = (struct bi_lr_item){ k, p, (uint32_t)len };
		p += len;
	}
	for (int i = 0; i < 4; i++)
		sort_unique(&in->l[i]);
}

static void check_overlay(const struct bi_log_overlay *o, uint64_t *bytes)
{
	CHECK(o->root == OBJ_FS_TREE || o->root == OBJ_CSUM_TREE);
	for (size_t i = 0; i < o->nputs; i++) {
		const struct bi_ovl_put *p = &o->puts[i];
		CHECK(p->data);
		CHECK(i == 0 || bi_key_cmp(&o->puts[i - 1].key, &p->key) < 0);
		CHECK(p->key.objectid != (uint64_t)-7);
		CHECK(!(p->key.objectid == OBJ_ORPHAN && p->key.type == KT_ORPHAN_ITEM));
		if (o->root == OBJ_CSUM_TREE)
			CHECK(p->key.objectid == OBJ_EXTENT_CSUM && p->key.type == KT_EXTENT_CSUM &&
			      p->size && p->size % 4 == 0);
		*bytes += p->size;
	}
	for (size_t i = 0; i < o->ndels; i++) {
		CHECK(bi_key_cmp(&o->dels[i].start, &o->dels[i].end) == 0);
		CHECK(i == 0 || bi_key_cmp(&o->dels[i - 1].end, &o->dels[i].start) < 0);
	}
}

static bool same(const struct bi_log_overlay *a, const struct bi_log_overlay *b)
{
	for (; a && b; a = a->next, b = b->next) {
		if (a->root != b->root || a->nputs != b->nputs || a->ndels != b->ndels)
			return false;
		for (size_t i = 0; i < a->nputs; i++)
			if (bi_key_cmp(&a->puts[i].key, &b->puts[i].key) ||
			    a->puts[i].size != b->puts[i].size ||
			    memcmp(a->puts[i].data, b->puts[i].data, a->puts[i].size))
				return false;
		for (size_t i = 0; i < a->ndels; i++)	/* not memcmp: keys have padding */
			if (bi_key_cmp(&a->dels[i].start, &b->dels[i].start) ||
			    bi_key_cmp(&a->dels[i].end, &b->dels[i].end))
				return false;
	}
	return !a && !b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > (1u << 20))
		return 0;
	static struct input in;
	memset(&in, 0, sizeof(in));
	parse(data, data + size, &in);
	struct bi_lr_array arr[4];
	for (int i = 0; i < 4; i++)
		arr[i] = (struct bi_lr_array){ in.l[i].v, in.l[i].n };
	struct bi_lr_log log = { OBJ_FS_TREE, in.l[1].v, in.l[1].n, { 0 } };
	bi_lr_src_array(&log.base, &arr[0]);
	struct bi_lr_trees trees;
	bi_lr_src_array(&trees.csum, &arr[2]);
	bi_lr_src_array(&trees.extent, &arr[3]);
	struct bi_lr_params p = { 8, 4096, 16384, 4, in.no_holes, in.ext_iref,
				  64 * (uint64_t)size + 65536, 200000 };
	struct bi_log_overlay *a = NULL, *b = NULL;
	char why[512], why2[512];
	int rc = bi_lr_replay(&p, &log, 1, &trees, &a, why, sizeof(why));
	if (rc) {
		CHECK(rc == -EUCLEAN || rc == -ENOMEM || rc == -E2BIG);
		CHECK(why[0] && !a);
		return 0;
	}
	uint64_t bytes = 0;
	for (const struct bi_log_overlay *o = a; o; o = o->next)
		check_overlay(o, &bytes);
	CHECK(bytes <= p.max_bytes);
	CHECK(bi_lr_replay(&p, &log, 1, &trees, &b, why2, sizeof(why2)) == 0);
	CHECK(same(a, b));
	bi_lr_overlays_free(a);
	bi_lr_overlays_free(b);
	return 0;
}
