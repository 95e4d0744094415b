// SPDX-License-Identifier: MIT
/*
 * LUKS1 and LUKS2 headers and keyslot unlocking (src/2-volume/luks.c,
 * crypto.c). Input: the first bytes of a volume (zeros past them, volume
 * size 64 MiB). Invariants on success: version 1 or 2, a key of 1..64
 * bytes, 1..32 keyslots with distinct ids whose areas lie inside the
 * volume, a payload inside the volume at a multiple of the sector size,
 * a sector size of 512..4096. Then the passphrase "fuzz" is tried on every
 * keyslot whose KDF is cheap (PBKDF2 <= 1000 iterations, Argon2 <= 64 KiB
 * and t <= 4, key material <= 1 MiB: seeds are made so; costlier ones are
 * left out, as the
 * library itself refuses only absurd costs): unlocking either fails with
 * a message naming the keyslots tried or yields a key that passes the
 * digest check again. The callback aborts if any read leaves the volume.
 */
#include <stdlib.h>
#include <string.h>

#include "0-base/cursor.h"
#include "2-volume/luks.h"

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			abort();                                                                   \
	} while (0)
#define VSIZE (64ull << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct vimg {
	const uint8_t *data;
	size_t len;
};

static int vread(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct vimg *m = ctx;
	CHECK(bi_fits64(VSIZE, off, len));
	memset(buf, 0, len);
	if (off < m->len) {
		size_t n = m->len - off < len ? m->len - off : len;
		memcpy(buf, m->data + off, n);
	}
	return 0;
}

static bool cheap(const struct bi_luks *l)
{
	for (int i = 0; i < l->nslots; i++) {
		const struct bi_luks_slot *s = &l->slots[i];
		bool argon = strncmp(s->kdf, "argon2", 6) == 0;
		if (argon ? (s->mem_kib > 64 || s->iter > 4 || s->par > 4) : s->iter > 1000)
			return false;
		if (s->area_len > (1u << 20))
			return false;
	}
	return l->diter <= 1000;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vimg m = { data, size };
	struct bi_luks l;
	char err[512];
	int rc = bi_luks_parse(vread, &m, VSIZE, &l, err, sizeof(err));
	if (rc <= 0) {
		CHECK(rc == 0 || err[0]);
		return 0;
	}
	CHECK(l.version == 1 || l.version == 2);
	CHECK(l.key_bytes >= 1 && l.key_bytes <= BI_LUKS_KEY_MAX);
	CHECK(l.nslots >= 1 && l.nslots <= BI_LUKS_SLOTS);
	CHECK(l.sector_size >= 512 && l.sector_size <= 4096);
	CHECK(l.payload_off > 0 && l.payload_off <= VSIZE && l.payload_off % l.sector_size == 0);
	for (int i = 0; i < l.nslots; i++) {
		CHECK(bi_fits64(VSIZE, l.slots[i].area_off, l.slots[i].area_len));
		for (int j = 0; j < i; j++)
			CHECK(l.slots[i].id != l.slots[j].id);
	}
	if (!cheap(&l))
		return 0;
	uint8_t vk[BI_LUKS_KEY_MAX];
	struct bi_kdf_budget b;
	bi_kdf_budget_init(&b, 0);
	rc = bi_luks_unlock(&l, vread, &m, "fuzz", 4, &b, vk, err, sizeof(err));
	CHECK(b.spent <= b.total);
	if (rc >= 0)
		CHECK(bi_luks_check_key(&l, vk, l.key_bytes, NULL, err, sizeof(err)) == 0);
	else
		CHECK(err[0]);
	return 0;
}
