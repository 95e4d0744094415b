// SPDX-License-Identifier: MIT
/* The volume layer's formulas against published vectors and brute force:
 * PBKDF2 (RFC 6070, RFC 7914 section 11, the common SHA-512 vector),
 * Argon2 (RFC 9106 section 5 through libargon2's full interface, and the
 * reference implementation's vectors through our wrapper), AES-XTS (IEEE
 * 1619-2007 vectors 2, 4 and 10, the IV as dm-crypt's plain64), ESSIV and
 * the LUKS AF merge against straightforward re-computations, and the LVM
 * text metadata: raid1 and mirror legs read from the other leg when one is
 * missing or fails, a striped map against a brute-force formula, thin
 * refused by name, and damaged text refused with a line number. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <argon2.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "volume/crypto.h"
#include "volume/luks.h"
#include "volume/lvm.h"

static void unhex(const char *h, uint8_t *out)
{
	for (size_t i = 0; h[2 * i]; i++)
		sscanf(h + 2 * i, "%2hhx", &out[i]);
}

static void assert_hex(const uint8_t *got, const char *want)
{
	uint8_t w[128];
	size_t n = strlen(want) / 2;
	unhex(want, w);
	assert_memory_equal(got, w, n);
}

static void test_pbkdf2_vectors(void **state)
{
	(void)state;
	uint8_t out[64];
	/* RFC 6070 */
	assert_int_equal(bi_pbkdf2("sha1", "password", 8, (const uint8_t *)"salt", 4, 1, out, 20),
			 0);
	assert_hex(out, "0c60c80f961f0e71f3a9b524af6012062fe037a6");
	assert_int_equal(
		bi_pbkdf2("sha1", "password", 8, (const uint8_t *)"salt", 4, 4096, out, 20), 0);
	assert_hex(out, "4b007901b765489abead49d926f721d065a429c1");
	/* RFC 7914 section 11 */
	assert_int_equal(bi_pbkdf2("sha256", "passwd", 6, (const uint8_t *)"salt", 4, 1, out, 64),
			 0);
	assert_hex(out, "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc"
			"49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783");
	assert_int_equal(bi_pbkdf2("sha512", "password", 8, (const uint8_t *)"salt", 4, 1, out, 64),
			 0);
	assert_hex(out, "867f70cf1ade02cff3752599a3a53dc4af34c7a669815ae5d513554e1c8cf252"
			"c02d470a285a0501bad999bfe943c08f050235d7d68b1da55e63f73b60a57fce");
	assert_int_equal(bi_pbkdf2("nohash", "p", 1, (const uint8_t *)"s", 1, 1, out, 8),
			 -EOPNOTSUPP);
	assert_int_equal(bi_hash_len("sha256"), 32);
	assert_int_equal(bi_hash_len("nohash"), 0);
}

/* RFC 9106 section 5.2/5.3: secret and associated data need argon2_ctx. */
static void rfc9106(argon2_type type, const char *tag)
{
	uint8_t pwd[32], salt[16], secret[8], ad[12], out[32];
	memset(pwd, 1, sizeof(pwd));
	memset(salt, 2, sizeof(salt));
	memset(secret, 3, sizeof(secret));
	memset(ad, 4, sizeof(ad));
	argon2_context c = { .out = out,
			     .outlen = 32,
			     .pwd = pwd,
			     .pwdlen = 32,
			     .salt = salt,
			     .saltlen = 16,
			     .secret = secret,
			     .secretlen = 8,
			     .ad = ad,
			     .adlen = 12,
			     .t_cost = 3,
			     .m_cost = 32,
			     .lanes = 4,
			     .threads = 4,
			     .version = ARGON2_VERSION_13 };
	assert_int_equal(argon2_ctx(&c, type), ARGON2_OK);
	assert_hex(out, tag);
}

static void test_argon2_vectors(void **state)
{
	(void)state;
	rfc9106(Argon2_i, "c814d9d1dc7f37aa13f0d77f2494bda1c8de6b016dd388d29952a4c4672b6ce8");
	rfc9106(Argon2_id, "0d640df58d78766c08c037a34a8b53c9d01ef0452d75b65eb52520e96b01e659");
	/* the reference implementation's test.c, through our wrapper */
	uint8_t out[32];
	assert_int_equal(bi_argon2(false, 2, 1 << 16, 1, "password", 8, (const uint8_t *)"somesalt",
				   8, out, 32),
			 0);
	assert_hex(out, "c1628832147d9720c5bd1cfd61367078729f6dfb6f8fea9ff98158e0d7816ed0");
	assert_int_equal(bi_argon2(true, 2, 1 << 16, 1, "password", 8, (const uint8_t *)"somesalt",
				   8, out, 32),
			 0);
	assert_hex(out, "09316115d5cf24ed5a15a31a3ba326e5cf32edc24702987c02b6566f61913cf7");
	/* parameters libargon2 refuses: a salt shorter than 8 bytes */
	assert_int_equal(bi_argon2(true, 1, 8, 1, "p", 1, (const uint8_t *)"s", 1, out, 32),
			 -EINVAL);
}

static void xts_vector(const char *key, uint64_t seq, const uint8_t *ptx, size_t len,
		       const char *ctx_prefix)
{
	uint8_t k[64], buf[512];
	size_t kl = strlen(key) / 2;
	struct bi_cipher *c;
	char why[128];
	unhex(key, k);
	assert_int_equal(bi_cipher_new("aes", "xts-plain64", k, kl, &c, why, sizeof(why)), 0);
	memcpy(buf, ptx, len);
	/* one data unit of @len bytes whose IV is @seq */
	assert_int_equal(bi_cipher_run(c, true, buf, len, (uint32_t)len, seq), 0);
	assert_hex(buf, ctx_prefix);
	assert_int_equal(bi_cipher_run(c, false, buf, len, (uint32_t)len, seq), 0);
	assert_memory_equal(buf, ptx, len);
	bi_cipher_free(c);
}

static void test_xts_vectors(void **state)
{
	(void)state;
	uint8_t p[512];
	memset(p, 0x44, 32); /* IEEE 1619 vector 2 */
	xts_vector("1111111111111111111111111111111122222222222222222222222222222222",
		   0x3333333333ull, p, 32,
		   "c454185e6a16936e39334038acef838bfb186fff7480adc4289382ecd6d394f0");
	for (int i = 0; i < 512; i++)
		p[i] = (uint8_t)i;
	/* vector 4 (AES-128) and 10 (AES-256): 512-byte units; their first
	 * 32 bytes depend only on the first two blocks */
	xts_vector("2718281828459045235360287471352631415926535897932384626433832795", 0, p, 512,
		   "27a7479befa1d476489f308cd4cfa6e2a96e4bbe3208ff25287dd3819616e89c");
	xts_vector("27182818284590452353602874713526624977572470936999595749669676273141592653"
		   "589793238462643383279502884197169399375105820974944592",
		   0xff, p, 512,
		   "1c3b3a102f770386e4836c99e370cf9bea00803f5e482357a4ae12d414a3e63b");
}

/* A 4096-byte sector advances the IV by 8 (512-byte units): sector k of a
 * run equals a one-sector run with IV 8k. */
static void test_xts_large_sectors(void **state)
{
	(void)state;
	uint8_t k[64], a[8192], b[4096];
	for (int i = 0; i < 64; i++)
		k[i] = (uint8_t)(i * 7 + 1);
	for (int i = 0; i < 8192; i++)
		a[i] = (uint8_t)(i * 13);
	memcpy(b, a + 4096, 4096);
	struct bi_cipher *c;
	char why[128];
	assert_int_equal(bi_cipher_new("aes", "xts-plain64", k, 64, &c, why, sizeof(why)), 0);
	assert_int_equal(bi_cipher_run(c, true, a, 8192, 4096, 16), 0);
	assert_int_equal(bi_cipher_run(c, true, b, 4096, 4096, 24), 0);
	assert_memory_equal(a + 4096, b, 4096);
	bi_cipher_free(c);
	assert_int_equal(bi_cipher_new("serpent", "xts-plain64", k, 64, &c, why, sizeof(why)),
			 -EOPNOTSUPP);
	assert_non_null(strstr(why, "serpent"));
	assert_int_equal(bi_cipher_new("aes", "xts-plain64", k, 48, &c, why, sizeof(why)),
			 -EOPNOTSUPP);
}

/* aes-cbc-essiv:sha256: IV = AES-256-ECB_{sha256(key)}(le64(sector)),
 * recomputed here with plain EVP calls. */
static void test_essiv(void **state)
{
	(void)state;
	uint8_t key[32], h[32], iv[16] = { 0 }, pt[1024], got[1024], want[1024];
	unsigned hl;
	int n;
	for (int i = 0; i < 32; i++)
		key[i] = (uint8_t)(0xa0 + i);
	for (int i = 0; i < 1024; i++)
		pt[i] = (uint8_t)(i ^ 0x5a);
	EVP_Digest(key, 32, h, &hl, EVP_sha256(), NULL);
	for (int s = 0; s < 2; s++) {
		uint64_t sector = 77 + (uint64_t)s;
		memset(iv, 0, 16);
		for (int i = 0; i < 8; i++)
			iv[i] = (uint8_t)(sector >> (8 * i));
		EVP_CIPHER_CTX *e = EVP_CIPHER_CTX_new();
		EVP_EncryptInit_ex(e, EVP_aes_256_ecb(), NULL, h, NULL);
		EVP_CIPHER_CTX_set_padding(e, 0);
		EVP_EncryptUpdate(e, iv, &n, iv, 16);
		EVP_EncryptInit_ex(e, EVP_aes_256_cbc(), NULL, key, iv);
		EVP_CIPHER_CTX_set_padding(e, 0);
		EVP_EncryptUpdate(e, want + 512 * s, &n, pt + 512 * s, 512);
		EVP_CIPHER_CTX_free(e);
	}
	struct bi_cipher *c;
	char why[128];
	assert_int_equal(bi_cipher_new("aes", "cbc-essiv:sha256", key, 32, &c, why, sizeof(why)),
			 0);
	memcpy(got, want, sizeof(got));
	assert_int_equal(bi_cipher_run(c, false, got, 1024, 512, 77), 0);
	assert_memory_equal(got, pt, 1024);
	bi_cipher_free(c);
}

/* AF merge as the LUKS1 spec writes it, with a 20-byte hash and a key of
 * 64 bytes (so the last diffuse block is partial: 64 = 3 * 20 + 4). */
static void af_reference(const uint8_t *src, size_t kl, uint32_t stripes, uint8_t *key)
{
	uint8_t d[64] = { 0 };
	for (uint32_t i = 0; i + 1 < stripes; i++) {
		for (size_t k = 0; k < kl; k++)
			d[k] ^= src[i * kl + k];
		for (size_t j = 0; j * 20 < kl; j++) {
			uint8_t in[24], md[20];
			size_t blk = kl - j * 20 < 20 ? kl - j * 20 : 20;
			in[0] = (uint8_t)(j >> 24);
			in[1] = (uint8_t)(j >> 16);
			in[2] = (uint8_t)(j >> 8);
			in[3] = (uint8_t)j;
			memcpy(in + 4, d + j * 20, blk);
			EVP_Digest(in, 4 + blk, md, NULL, EVP_sha1(), NULL);
			memcpy(d + j * 20, md, blk);
		}
	}
	for (size_t k = 0; k < kl; k++)
		key[k] = d[k] ^ src[(stripes - 1) * kl + k];
}

static void test_af_merge(void **state)
{
	(void)state;
	enum { KL = 64, ST = 50 };
	uint8_t src[KL * ST], got[KL], want[KL];
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 31 + 7);
	af_reference(src, KL, ST, want);
	assert_int_equal(bi_af_merge("sha1", src, KL, ST, got), 0);
	assert_memory_equal(got, want, KL);
	assert_int_equal(bi_af_merge("sha1", src, KL, 1, got), 0);
	assert_memory_equal(got, src, KL); /* one stripe: the key itself */
}

/* ---------------------------------------------------------------- */
/* LVM */

static char *load_text(size_t *len)
{
	FILE *f = fopen(TESTDATA "/../tests/support/lvm-raid1.txt", "rb");
	assert_non_null(f);
	static char buf[16384];
	*len = fread(buf, 1, sizeof(buf) - 1, f);
	buf[*len] = '\0';
	fclose(f);
	return buf;
}

/* Two PVs of 256 KiB; byte x of pv p is (x * 7 + p * 101) mod 251. */
struct pvs {
	int fail; /* this PV's reads fail (-EIO); -1: none */
	int calls[2];
};

static uint8_t pv_byte(int p, uint64_t x)
{
	return (uint8_t)((x * 7 + (uint64_t)p * 101) % 251);
}

static int pv_read(void *ctx, int pv, uint64_t off, void *buf, size_t len)
{
	struct pvs *s = ctx;
	assert_true(pv == 0 || pv == 1);
	assert_true(off + len <= 256 * 1024);
	s->calls[pv]++;
	if (pv == s->fail)
		return -EIO;
	for (size_t i = 0; i < len; i++)
		((uint8_t *)buf)[i] = pv_byte(pv, off + i);
	return 0;
}

static int lv_index(const struct bi_lvm_vg *vg, const char *name)
{
	for (int i = 0; i < vg->nlv; i++)
		if (strcmp(vg->lvs[i].name, name) == 0)
			return i;
	fail_msg("no LV %s", name);
	return -1;
}

static void expect_leg(const struct bi_lvm_vg *vg, int lv, struct pvs *s, int pv, uint64_t pv_base)
{
	uint8_t b[3000];
	char err[200];
	assert_int_equal(bi_lvm_read(vg, lv, pv_read, s, 1000, b, sizeof(b), err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(b); i++)
		assert_int_equal(b[i], pv_byte(pv, pv_base + 1000 + i));
}

/* ---------------------------------------------------------------- */
/* The KDF budget (issue 26): costs are estimated and refused before any
 * derivation, at fixed rates here (10^6 PBKDF2 iterations or Argon2 KiB x
 * passes per second) so the verdicts do not depend on this machine. The
 * header is built in memory. no_read fails the test if a keyslot's key
 * material is read (it is only after a derivation); zeros reads it as
 * zeros, which then do not match the digest. */

static int no_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	(void)ctx, (void)off, (void)buf, (void)len;
	fail_msg("a keyslot was derived: its key material read");
	return -EIO;
}

static int zeros(void *ctx, uint64_t off, void *buf, size_t len)
{
	(void)ctx, (void)off;
	memset(buf, 0, len);
	return 0;
}

static void hostile(struct bi_luks *l, int nslots, const char *kdf, uint32_t iter, uint32_t mem,
		    uint32_t diter)
{
	memset(l, 0, sizeof(*l));
	l->version = 2;
	l->key_bytes = 64;
	snprintf(l->dhash, sizeof(l->dhash), "sha256");
	l->diter = diter;
	l->digest_len = l->dsalt_len = 32;
	l->nslots = nslots;
	for (int i = 0; i < nslots; i++) {
		struct bi_luks_slot *s = &l->slots[i];
		s->id = i;
		snprintf(s->kdf, sizeof(s->kdf), "%s", kdf);
		snprintf(s->hash, sizeof(s->hash), "sha512");
		snprintf(s->af_hash, sizeof(s->af_hash), "sha256");
		snprintf(s->area_cipher, sizeof(s->area_cipher), "aes");
		snprintf(s->area_mode, sizeof(s->area_mode), "xts-plain64");
		s->iter = iter;
		s->mem_kib = mem;
		s->par = 4;
		s->salt_len = 32;
		s->area_off = 32768;
		s->area_len = 4000 * 64;
		s->stripes = 4000;
		s->key_bytes = s->area_key_bytes = 64;
	}
}

static int unlock(const struct bi_luks *l, bi_read_at_fn rd, uint32_t ms, char *err, size_t len,
		  struct bi_kdf_budget *b)
{
	uint8_t vk[BI_LUKS_KEY_MAX];
	bi_kdf_budget_init(b, ms);
	b->pbkdf2_fixed = 1e6;
	b->argon2_rate = 1e6;
	err[0] = '\0';
	return bi_luks_unlock(l, rd, NULL, "pass", 4, b, vk, err, len);
}

static void test_kdf_refused(void **state)
{
	(void)state;
	struct bi_luks l;
	struct bi_kdf_budget b;
	char err[600];
	/* PBKDF2-sha512 10^8: 100 s at 10^6/s, over 10 s */
	hostile(&l, 1, "pbkdf2", 100000000, 0, 1000);
	assert_int_equal(unlock(&l, no_read, 0, err, sizeof(err), &b), -E2BIG);
	assert_non_null(strstr(err, "keyslot 0 (pbkdf2-sha512 100000000 iterations"));
	assert_non_null(strstr(err, "would need about 100 s"));
	assert_non_null(strstr(err, "over the limit of 10 s per keyslot"));
	assert_true(b.spent == 0);
	/* Argon2id 1 GiB x 4096 passes: refused whatever the CPUs */
	hostile(&l, 1, "argon2id", 4096, 1u << 20, 1000);
	assert_int_equal(unlock(&l, no_read, 0, err, sizeof(err), &b), -E2BIG);
	assert_non_null(strstr(err, "keyslot 0 (argon2id t=4096 m=1048576 KiB p=4"));
	/* 32 such keyslots: every one refused, the first with its reason */
	hostile(&l, 32, "pbkdf2", 100000000, 0, 1000);
	assert_int_equal(unlock(&l, no_read, 0, err, sizeof(err), &b), -E2BIG);
	assert_non_null(strstr(err, "also not tried: keyslots 1, 2, 3"));
	/* a digest of 2^32-1 iterations: refused before any keyslot (LUKS1
	 * read "tried keyslot (none)") */
	hostile(&l, 1, "pbkdf2", 1000, 0, UINT32_MAX);
	assert_int_equal(unlock(&l, no_read, 0, err, sizeof(err), &b), -E2BIG);
	assert_non_null(strstr(err, "digest check (pbkdf2-sha256 4294967295 iterations)"));
	assert_null(strstr(err, "(none)"));
}

static void test_kdf_limit_and_total(void **state)
{
	(void)state;
	struct bi_luks l;
	struct bi_kdf_budget b;
	char err[600];
	/* 3000 + 1000 iterations: 4 ms, over a limit of 3 ms, under 5 ms */
	hostile(&l, 1, "pbkdf2", 3000, 0, 1000);
	assert_int_equal(unlock(&l, no_read, 3, err, sizeof(err), &b), -E2BIG);
	assert_non_null(strstr(err, "over the limit of 0.003 s per keyslot"));
	assert_int_equal(unlock(&l, zeros, 5, err, sizeof(err), &b), -EKEYREJECTED);
	assert_non_null(strstr(err, "tried keyslot 0"));
	assert_true(b.spent > 0.0039 && b.spent < 0.0041);
	/* 8 keyslots of 4 ms under 5 ms each, 15 ms an open: 3 tried */
	hostile(&l, 8, "pbkdf2", 3000, 0, 1000);
	assert_int_equal(unlock(&l, zeros, 5, err, sizeof(err), &b), -EKEYREJECTED);
	assert_non_null(strstr(err, "tried keyslots 0, 1, 2; not tried: keyslot 3"));
	assert_non_null(strstr(err, "over the limit of 0.015 s for all keyslots of an open"));
	assert_non_null(strstr(err, "also not tried: keyslots 4, 5, 6, 7"));
	assert_true(b.spent <= b.total);
}

static void test_lvm_legs(void **state)
{
	(void)state;
	size_t len;
	char *t = load_text(&len), err[256], why[200];
	struct bi_lvm_vg vg;
	assert_int_equal(bi_lvm_parse(t, len, &vg, err, sizeof(err)), 0);
	assert_string_equal(vg.name, "vgr");
	assert_int_equal(vg.npv, 2);
	assert_int_equal(vg.extent_bytes, 4096);
	for (int i = 0; i < vg.npv; i++)
		vg.pvs[i].dev = i;
	int r1 = lv_index(&vg, "r1"), m1 = lv_index(&vg, "m1"), th = lv_index(&vg, "th");
	assert_true(vg.lvs[r1].visible && !vg.lvs[lv_index(&vg, "r1_rimage_0")].visible);
	assert_int_equal(bi_lvm_lv_size(&vg, r1), 4 * 4096);
	struct pvs s = { .fail = -1 };
	/* raid1: rimage_0 at pv0 extent 1, rimage_1 at pv1 extent 1 (pe_start 4 KiB) */
	expect_leg(&vg, r1, &s, 0, 4096 + 4096);
	s.fail = 0; /* leg 0 fails: leg 1 */
	expect_leg(&vg, r1, &s, 1, 4096 + 4096);
	s.fail = -1;
	vg.pvs[0].dev = -1; /* pv0 missing: still complete through leg 1 */
	assert_true(bi_lvm_lv_complete(&vg, r1, why, sizeof(why)));
	expect_leg(&vg, r1, &s, 1, 4096 + 4096);
	expect_leg(&vg, m1, &s, 1, 4096 + 10 * 4096);
	vg.pvs[0].dev = 0;
	expect_leg(&vg, m1, &s, 0, 4096 + 10 * 4096);
	/* both legs failing is an error */
	vg.pvs[0].dev = -1;
	vg.pvs[1].dev = -1;
	assert_false(bi_lvm_lv_complete(&vg, r1, why, sizeof(why)));
	vg.pvs[1].dev = 1;
	/* thin is refused by name, and an old-style snapshot's store */
	assert_false(bi_lvm_lv_complete(&vg, th, why, sizeof(why)));
	assert_non_null(strstr(why, "thin"));
	assert_false(bi_lvm_lv_complete(&vg, lv_index(&vg, "snap"), why, sizeof(why)));
	assert_non_null(strstr(why, "snapshot"));
	assert_false(bi_lvm_lv_complete(&vg, lv_index(&vg, "snapshot0"), why, sizeof(why)));
	bi_lvm_vg_free(&vg);
}

static void test_lvm_striped(void **state)
{
	(void)state;
	size_t len;
	char *t = load_text(&len), err[256];
	struct bi_lvm_vg vg;
	assert_int_equal(bi_lvm_parse(t, len, &vg, err, sizeof(err)), 0);
	for (int i = 0; i < vg.npv; i++)
		vg.pvs[i].dev = i;
	int s2 = lv_index(&vg, "s2");
	uint64_t size = bi_lvm_lv_size(&vg, s2);
	assert_int_equal(size, 4 * 4096);
	uint8_t *b = malloc(size);
	struct pvs s = { .fail = -1 };
	/* one read across every stripe boundary, odd start */
	assert_int_equal(bi_lvm_read(&vg, s2, pv_read, &s, 3, b, size - 3, err, sizeof(err)), 0);
	for (uint64_t o = 3; o < size; o++) {
		uint64_t chunk = o / 1024, stripe = chunk % 2, row = chunk / 2;
		uint64_t phys = 4096 + 30 * 4096 + row * 1024 + o % 1024;
		assert_int_equal(b[o - 3], pv_byte((int)stripe, phys));
	}
	assert_int_equal(bi_lvm_read(&vg, s2, pv_read, &s, size - 1, b, 2, err, sizeof(err)), -EIO);
	free(b);
	bi_lvm_vg_free(&vg);
}

static void test_lvm_bad_text(void **state)
{
	(void)state;
	static const char *bad[] = {
		"vg { id = \"x\" seqno = 1 extent_size = 8 physical_volumes { pv0 { id = \"a\" "
		"pe_start = 8 pe_count = 4 } } logical_volumes { l { status = [\"VISIBLE\"] "
		"segment_count = 1 segment1 { start_extent = 0 extent_count = 9 type = \"striped\" stripe_count = 1 "
		"stripes = [\"pv0\", 0] } } } }", /* extents past the PV */
		"vg { id = \"x\" seqno = 1 extent_size = 8 physical_volumes { } ", /* no '}' */
		"vg { id = \"x\" seqno = 1 extent_size = 8 physical_volumes { pv0 { id = \"a\" "
		"pe_start = 8 pe_count = 4 } } logical_volumes { l { segment_count = 1 "
		"segment1 { start_extent = 1 "
		"extent_count = 1 type = \"striped\" stripe_count = 1 stripes = [\"pv0\", 0] } } } }",
		"vg { id = \"x\" seqno = 1 extent_size = 8 physical_volumes { pv0 { id = \"a\" "
		"pe_start = 8 pe_count = 4 } } logical_volumes { l { segment_count = 1 "
		"segment1 { start_extent = 0 "
		"extent_count = 1 type = \"striped\" stripe_count = 1 stripes = [\"pv9\", 0] } } } }",
		"vg { id = \"unterminated }",
		"vg { seqno = 99999999999999999999999 }",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct bi_lvm_vg vg;
		char err[256] = "";
		assert_int_equal(bi_lvm_parse(bad[i], strlen(bad[i]), &vg, err, sizeof(err)),
				 -EUCLEAN);
		assert_true(err[0] != '\0');
	}
}

/* A count the text states about itself that disagrees with what it lists,
 * or is negative or past 32 bits: refused, naming the LV (or PV), the
 * field, have and expect. The same text with the count as it was parses. */
static void test_lvm_counts(void **state)
{
	(void)state;
	static const struct {
		const char *from, *to, *words;
	} cases[] = {
		{ "segment_count = 1\n\nsegment1 {\nstart_extent = 0\nextent_count = 4\ntype = \"raid1\"",
		  "segment_count = 0\n\nsegment1 {\nstart_extent = 0\nextent_count = 4\ntype = \"raid1\"",
		  "LV 'r1': segment_count have 0 expect 1" },
		{ "segment_count = 1\n\nsegment1 {\nstart_extent = 0\nextent_count = 4\ntype = \"raid1\"",
		  "segment_count = -1\n\nsegment1 {\nstart_extent = 0\nextent_count = 4\ntype = \"raid1\"",
		  "LV 'r1': segment_count have -1 expect 0..4294967295" },
		{ "device_count = 2", "device_count = 3", "device_count have 3 expect 2" },
		{ "mirror_count = 2", "mirror_count = 99999999999", "mirror_count have 99999999999" },
		{ "extent_count = 4 type = \"striped\" stripe_count = 1 stripes = [\"pv0\", 1]",
		  "extent_count = -4 type = \"striped\" stripe_count = 1 stripes = [\"pv0\", 1]",
		  "extent_count have -4 expect 1..4294967295" },
		{ "stripe_count = 1 stripes = [\"pv0\", 1]", "stripe_count = 2 stripes = [\"pv0\", 1]",
		  "LV 'r1_rimage_0' segment1: no stripe_size" },
		{ "stripe_count = 1 stripes = [\"pv0\", 1]", "stripe_count = 2 stripe_size = 8 stripes = [\"pv0\", 1]",
		  "stripe_count have 2 expect 1 (the stripes listed)" },
		{ "pe_count = 60", "pe_count = -60", "PV 'pv0': pe_count have -60" },
	};
	size_t len;
	const char *t = load_text(&len);
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		const char *at = strstr(t, cases[i].from);
		assert_non_null(at);
		size_t pre = (size_t)(at - t), fl = strlen(cases[i].from), tl = strlen(cases[i].to);
		char *m = malloc(len - fl + tl + 1);
		assert_non_null(m);
		memcpy(m, t, pre);
		memcpy(m + pre, cases[i].to, tl);
		memcpy(m + pre + tl, at + fl, len - pre - fl + 1);
		struct bi_lvm_vg vg;
		char err[300] = "";
		assert_int_equal(bi_lvm_parse(m, strlen(m), &vg, err, sizeof(err)), -EUCLEAN);
		if (!strstr(err, cases[i].words))
			fail_msg("case %zu: \"%s\" not in \"%s\"", i, cases[i].words, err);
		free(m);
	}
	struct bi_lvm_vg vg;
	char err[300] = "";
	assert_int_equal(bi_lvm_parse(t, len, &vg, err, sizeof(err)), 0);
	bi_lvm_vg_free(&vg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pbkdf2_vectors), cmocka_unit_test(test_argon2_vectors),
		cmocka_unit_test(test_xts_vectors),    cmocka_unit_test(test_xts_large_sectors),
		cmocka_unit_test(test_essiv),	       cmocka_unit_test(test_af_merge),
		cmocka_unit_test(test_lvm_legs),       cmocka_unit_test(test_lvm_striped),
		cmocka_unit_test(test_lvm_bad_text),   cmocka_unit_test(test_lvm_counts),
		cmocka_unit_test(test_kdf_refused),
		cmocka_unit_test(test_kdf_limit_and_total),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
