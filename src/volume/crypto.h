/* SPDX-License-Identifier: MIT */
/*
 * The cryptography of encrypted volumes (LUKS), as thin wrappers over
 * OpenSSL's libcrypto and libargon2: nothing here is a hand-written
 * primitive. Key derivation (PBKDF2, Argon2i/id), the LUKS anti-forensic
 * merge, and sector ciphers (dm-crypt's aes-xts-plain64, aes-cbc-essiv:
 * sha256, ...). Callers wipe what they pass in; these functions wipe every
 * intermediate they make (OPENSSL_cleanse).
 */
#ifndef BI_CRYPTO_H
#define BI_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of digest of a hash named as LUKS names it ("sha1", "sha256",
 * "sha512", "ripemd160", ...); 0 if OpenSSL does not know it. */
size_t bi_hash_len(const char *hash);

/* PBKDF2-HMAC-@hash. 0, -EOPNOTSUPP (unknown hash) or -ENOMEM. */
int bi_pbkdf2(const char *hash, const void *pass, size_t plen, const uint8_t *salt, size_t slen,
	      uint32_t iter, uint8_t *out, size_t olen);

/* Argon2 (version 0x13): @id selects Argon2id, else Argon2i; @m_kib is
 * the memory cost in KiB. 0, -EINVAL (parameters libargon2 refuses) or
 * -ENOMEM. */
int bi_argon2(bool id, uint32_t t, uint32_t m_kib, uint32_t p, const void *pass, size_t plen,
	      const uint8_t *salt, size_t slen, uint8_t *out, size_t olen);

/* How fast this machine derives keys, measured by a run of a few
 * milliseconds of CPU time of the calling thread: PBKDF2-HMAC-@hash
 * iterations per second, or Argon2i KiB x passes per second of one lane.
 * 0, -EOPNOTSUPP (unknown hash) or -ENOMEM. */
int bi_pbkdf2_rate(const char *hash, double *per_s);
int bi_argon2_rate(double *per_s);

/* LUKS anti-forensic merge: @src holds @stripes stripes of @keylen bytes,
 * @key receives the key. 0, -EOPNOTSUPP (unknown hash) or -ENOMEM. */
int bi_af_merge(const char *hash, const uint8_t *src, size_t keylen, uint32_t stripes,
		uint8_t *key);

/* A sector cipher of dm-crypt: "aes" with mode "xts-plain64",
 * "xts-plain", "cbc-essiv:sha256", "cbc-plain64" or "cbc-plain". */
struct bi_cipher;

/* Make a cipher for @name/@mode with @key (@keylen bytes: 32 or 64 for
 * XTS, 16/24/32 for CBC); the key is copied into OpenSSL's context only.
 * 0, -EOPNOTSUPP (with @why naming what is not supported) or -ENOMEM. */
int bi_cipher_new(const char *name, const char *mode, const uint8_t *key, size_t keylen,
		  struct bi_cipher **out, char *why, size_t whylen);
/* Decrypt (or encrypt, @enc) @len bytes in place: @len / @sector_size
 * whole sectors, the first with IV sector number @iv512 (counted in
 * 512-byte units, as dm-crypt does for LUKS: a 4096-byte sector advances it
 * by 8). 0 or -EIO (OpenSSL failed). */
int bi_cipher_run(struct bi_cipher *c, bool enc, uint8_t *buf, size_t len, uint32_t sector_size,
		  uint64_t iv512);
/* Accepts NULL; wipes the key schedule. */
void bi_cipher_free(struct bi_cipher *c);

#endif
