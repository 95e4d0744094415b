// SPDX-License-Identifier: MIT
/*
 * LUKS1 and LUKS2 headers and keyslot unlocking (src/volume/luks.c,
 * crypto.c). Input: the first bytes of a volume (zeros past them, volume
 * size 64 MiB). Invariants on success: version 1 or 2, a key of 1..64
 * bytes, 1..32 keyslots with distinct ids whose areas lie inside the
 * volume, a payload inside the volume at a multiple of the sector size,
 * a sector size of 512..4096. Then the passphrase "fuzz" is tried (when
 * every keyslot's key material is <= 1 MiB) under the library's own KDF
 * budget, made small and deterministic: fixed rates (10^6 PBKDF2
 * iterations or Argon2 KiB x passes per second) and 3 ms per keyslot, so
 * the seeds made by cryptsetup (1000 iterations; 32 KiB x 4) are derived
 * and hostile costs (fuzz/gen_luks_cost_seeds.py: hours of Argon2 or
 * PBKDF2, a digest of 2^32-1 iterations, 32 costly keyslots) must be
 * refused from the estimate: the budget is never overspent, and unlocking
 * either fails with a message (the keyslots tried, or the estimate over
 * the limit) or yields a key that passes the digest check again. The
 * callback aborts if any read leaves the volume.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cursor.h"
#include "volume/luks.h"

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

static bool small_areas(const struct bi_luks *l)
{
	for (int i = 0; i < l->nslots; i++)
		if (l->slots[i].area_len > (1u << 20))
			return false;
	return true;
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
	if (!small_areas(&l))
		return 0;
	uint8_t vk[BI_LUKS_KEY_MAX];
	struct bi_kdf_budget b;
	bi_kdf_budget_init(&b, 3);
	b.pbkdf2_fixed = 1e6;
	b.argon2_rate = 1e6;
	rc = bi_luks_unlock(&l, vread, &m, "fuzz", 4, &b, vk, err, sizeof(err));
	CHECK(b.spent <= b.total);
	if (rc == -E2BIG)
		CHECK(strstr(err, "would need about") || strstr(err, "refused"));
	if (rc >= 0)
		CHECK(bi_luks_check_key(&l, vk, l.key_bytes, NULL, err, sizeof(err)) == 0);
	else
		CHECK(err[0]);
	return 0;
}
