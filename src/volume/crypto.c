/* SPDX-License-Identifier: MIT */
/*
 * Key derivation and sector ciphers of encrypted volumes, over OpenSSL
 * (EVP) and libargon2. The formats are cryptsetup's and dm-crypt's:
 *
 *   AF merge   (cryptsetup lib/luks1/af.c, the LUKS1 spec section 2.4)
 *              d = 0; for stripes 0..n-2: d = H(d ^ s_i); key = d ^ s_{n-1}
 *              where H hashes each digest-sized block j of d as
 *              hash(be32(j) || block) (the last block truncated).
 *   IVs        (dm-crypt, drivers/md/dm-crypt.c) plain64: the sector number
 *              as 16 bytes little-endian; plain: its low 32 bits; essiv:
 *              AES-ECB of plain64 under hash(key). LUKS counts the sector
 *              in 512-byte units even for 4096-byte sectors (no
 *              iv_large_sectors), so sector k of 4096 bytes has IV 8k.
 *
 * Every intermediate buffer holding key material is wiped before free.
 */
#include <argon2.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "volume/crypto.h"

#include "base/cursor.h"

static const EVP_MD *md_of(const char *hash)
{
	if (!hash || !*hash)
		return NULL;
	return EVP_get_digestbyname(hash);
}

size_t bi_hash_len(const char *hash)
{
	const EVP_MD *md = md_of(hash);
	return md ? (size_t)EVP_MD_get_size(md) : 0;
}

int bi_pbkdf2(const char *hash, const void *pass, size_t plen, const uint8_t *salt, size_t slen,
	      uint32_t iter, uint8_t *out, size_t olen)
{
	const EVP_MD *md = md_of(hash);
	if (!md)
		return -EOPNOTSUPP;
	if (plen > INT32_MAX || slen > INT32_MAX || olen > INT32_MAX || iter == 0 ||
	    iter > INT32_MAX)
		return -EINVAL;
	static const char empty[1];
	if (!PKCS5_PBKDF2_HMAC(plen ? pass : empty, (int)plen, salt, (int)slen, (int)iter, md,
			       (int)olen, out))
		return -ENOMEM;
	return 0;
}

int bi_argon2(bool id, uint32_t t, uint32_t m_kib, uint32_t p, const void *pass, size_t plen,
	      const uint8_t *salt, size_t slen, uint8_t *out, size_t olen)
{
	static const char empty[1];
	int rc = argon2_hash(t, m_kib, p, plen ? pass : empty, plen, salt, slen, out, olen, NULL, 0,
			     id ? Argon2_id : Argon2_i, ARGON2_VERSION_13);
	if (rc == ARGON2_OK)
		return 0;
	return rc == ARGON2_MEMORY_ALLOCATION_ERROR ? -ENOMEM : -EINVAL;
}

/* ---------------------------------------------------------------- */
/* Calibration: a run long enough for the clock (at least 2 ms of CPU),
 * doubled from a small start, so a fast or slow machine both measure in
 * well under 50 ms. The thread's CPU time, not the wall clock: seven other
 * processes on the machine do not make the estimate refuse a real volume. */

#define CAL_MIN_S 0.002

static double cpu_now(void)
{
	struct timespec t;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0)
		clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int bi_pbkdf2_rate(const char *hash, double *per_s)
{
	static const uint8_t salt[32];
	uint8_t out[64];
	for (uint32_t n = 1024;; n *= 2) {
		double t0 = cpu_now();
		int rc = bi_pbkdf2(hash, "calibrate", 9, salt, sizeof(salt), n, out, 32);
		double dt = cpu_now() - t0;
		if (rc < 0)
			return rc;
		if (dt >= CAL_MIN_S || n >= (1u << 22)) {
			*per_s = n / (dt > 1e-9 ? dt : 1e-9);
			return 0;
		}
	}
}

int bi_argon2_rate(double *per_s)
{
	static const uint8_t salt[32];
	uint8_t out[32];
	for (uint32_t m = 256;; m *= 2) {
		double t0 = cpu_now();
		int rc = bi_argon2(false, 1, m, 1, "calibrate", 9, salt, sizeof(salt), out,
				   sizeof(out));
		double dt = cpu_now() - t0;
		if (rc < 0)
			return rc;
		if (dt >= CAL_MIN_S || m >= (1u << 16)) {
			*per_s = m / (dt > 1e-9 ? dt : 1e-9);
			return 0;
		}
	}
}

/* dst[0..len) = H(be32(j) || src block j) per digest-sized block j. */
static int diffuse(const EVP_MD *md, EVP_MD_CTX *ctx, uint8_t *buf, size_t len)
{
	size_t ds = (size_t)EVP_MD_get_size(md);
	uint8_t d[EVP_MAX_MD_SIZE];
	for (size_t off = 0, j = 0; off < len; off += ds, j++) {
		size_t n = len - off < ds ? len - off : ds;
		uint8_t iv[4] = { (uint8_t)(j >> 24), (uint8_t)(j >> 16), (uint8_t)(j >> 8),
				  (uint8_t)j };
		if (!EVP_DigestInit_ex(ctx, md, NULL) || !EVP_DigestUpdate(ctx, iv, 4) ||
		    !EVP_DigestUpdate(ctx, buf + off, n) || !EVP_DigestFinal_ex(ctx, d, NULL))
			return -ENOMEM;
		memcpy(buf + off, d, n);
	}
	OPENSSL_cleanse(d, sizeof(d));
	return 0;
}

int bi_af_merge(const char *hash, const uint8_t *src, size_t keylen, uint32_t stripes, uint8_t *key)
{
	const EVP_MD *md = md_of(hash);
	if (!md)
		return -EOPNOTSUPP;
	if (stripes == 0 || keylen == 0)
		return -EINVAL;
	uint8_t *d = calloc(1, keylen);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int rc = (!d || !ctx) ? -ENOMEM : 0;
	for (uint32_t i = 0; rc == 0 && i + 1 < stripes; i++) {
		const uint8_t *s = src + (size_t)i * keylen;
		for (size_t k = 0; k < keylen; k++)
			d[k] ^= s[k];
		rc = diffuse(md, ctx, d, keylen);
	}
	if (rc == 0) {
		const uint8_t *s = src + (size_t)(stripes - 1) * keylen;
		for (size_t k = 0; k < keylen; k++)
			key[k] = d[k] ^ s[k];
	}
	if (d)
		OPENSSL_cleanse(d, keylen);
	free(d);
	EVP_MD_CTX_free(ctx);
	return rc;
}

/* ---------------------------------------------------------------- */
/* Sector ciphers */

enum iv_kind { IV_PLAIN64, IV_PLAIN, IV_ESSIV };

struct bi_cipher {
	EVP_CIPHER_CTX *dec, *enc; /* the data cipher, keyed once each way */
	EVP_CIPHER_CTX *essiv;	   /* ESSIV: AES-ECB under hash(key) */
	enum iv_kind iv;
};

static const EVP_CIPHER *aes_of(bool xts, size_t keylen)
{
	if (xts)
		return keylen == 32 ? EVP_aes_128_xts() : keylen == 64 ? EVP_aes_256_xts() : NULL;
	switch (keylen) {
	case 16:
		return EVP_aes_128_cbc();
	case 24:
		return EVP_aes_192_cbc();
	case 32:
		return EVP_aes_256_cbc();
	default:
		return NULL;
	}
}

static EVP_CIPHER_CTX *keyed(const EVP_CIPHER *c, const uint8_t *key, bool enc)
{
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	if (x && EVP_CipherInit_ex(x, c, NULL, key, NULL, enc ? 1 : 0) &&
	    EVP_CIPHER_CTX_set_padding(x, 0))
		return x;
	EVP_CIPHER_CTX_free(x);
	return NULL;
}

/* ESSIV's key: hash(key), used as an AES key of that size. */
static int essiv_init(struct bi_cipher *c, const char *hash, const uint8_t *key, size_t keylen)
{
	const EVP_MD *md = md_of(hash);
	uint8_t h[EVP_MAX_MD_SIZE];
	unsigned hl = 0;
	if (!md)
		return -EOPNOTSUPP;
	if (!EVP_Digest(key, keylen, h, &hl, md, NULL))
		return -ENOMEM;
	const EVP_CIPHER *ecb = hl == 16   ? EVP_aes_128_ecb()
				: hl == 24 ? EVP_aes_192_ecb()
				: hl == 32 ? EVP_aes_256_ecb()
					   : NULL;
	int rc = -EOPNOTSUPP;
	if (ecb) {
		c->essiv = keyed(ecb, h, true);
		rc = c->essiv ? 0 : -ENOMEM;
	}
	OPENSSL_cleanse(h, sizeof(h));
	return rc;
}

static int parse_mode(const char *mode, bool *xts, enum iv_kind *iv, const char **ivhash)
{
	*ivhash = NULL;
	if (strncmp(mode, "xts-", 4) == 0)
		*xts = true;
	else if (strncmp(mode, "cbc-", 4) == 0)
		*xts = false;
	else
		return -EOPNOTSUPP;
	const char *g = mode + 4;
	if (strcmp(g, "plain64") == 0)
		*iv = IV_PLAIN64;
	else if (strcmp(g, "plain") == 0)
		*iv = IV_PLAIN;
	else if (strncmp(g, "essiv:", 6) == 0 && !*xts) {
		*iv = IV_ESSIV;
		*ivhash = g + 6;
	} else
		return -EOPNOTSUPP;
	return 0;
}

int bi_cipher_new(const char *name, const char *mode, const uint8_t *key, size_t keylen,
		  struct bi_cipher **out, char *why, size_t whylen)
{
	bool xts;
	enum iv_kind iv;
	const char *ivhash;
	*out = NULL;
	if (strcmp(name, "aes") != 0 || parse_mode(mode, &xts, &iv, &ivhash) < 0) {
		snprintf(why, whylen,
			 "cipher %s-%s not supported (supported: aes-xts-plain64, aes-xts-plain, "
			 "aes-cbc-essiv:sha256, aes-cbc-plain64, aes-cbc-plain)",
			 name, mode);
		return -EOPNOTSUPP;
	}
	const EVP_CIPHER *ev = aes_of(xts, keylen);
	if (!ev) {
		snprintf(why, whylen, "cipher %s-%s with a %zu-bit key not supported", name, mode,
			 keylen * 8);
		return -EOPNOTSUPP;
	}
	struct bi_cipher *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->iv = iv;
	c->dec = keyed(ev, key, false);
	c->enc = keyed(ev, key, true);
	int rc = c->dec && c->enc ? 0 : -ENOMEM;
	if (rc == 0 && iv == IV_ESSIV) {
		rc = essiv_init(c, ivhash, key, keylen);
		if (rc == -EOPNOTSUPP)
			snprintf(why, whylen, "ESSIV hash '%s' not supported", ivhash);
	}
	if (rc < 0) {
		bi_cipher_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

static int make_iv(struct bi_cipher *c, uint64_t sector, uint8_t iv[16])
{
	memset(iv, 0, 16);
	if (c->iv == IV_PLAIN)
		bi_put_le32(iv, (uint32_t)sector);
	else
		bi_put_le64(iv, sector);
	if (c->iv != IV_ESSIV)
		return 0;
	int n = 0;
	if (!EVP_EncryptUpdate(c->essiv, iv, &n, iv, 16) || n != 16)
		return -EIO;
	return 0;
}

int bi_cipher_run(struct bi_cipher *c, bool enc, uint8_t *buf, size_t len, uint32_t sector_size,
		  uint64_t iv512)
{
	EVP_CIPHER_CTX *x = enc ? c->enc : c->dec;
	uint64_t step = sector_size / 512;
	for (size_t off = 0; off + sector_size <= len; off += sector_size, iv512 += step) {
		uint8_t iv[16];
		int n = 0;
		if (make_iv(c, iv512, iv) < 0 || !EVP_CipherInit_ex(x, NULL, NULL, NULL, iv, -1) ||
		    !EVP_CipherUpdate(x, buf + off, &n, buf + off, (int)sector_size) ||
		    n != (int)sector_size)
			return -EIO;
	}
	return 0;
}

void bi_cipher_free(struct bi_cipher *c)
{
	if (!c)
		return;
	EVP_CIPHER_CTX_free(c->dec);
	EVP_CIPHER_CTX_free(c->enc);
	EVP_CIPHER_CTX_free(c->essiv);
	free(c);
}
