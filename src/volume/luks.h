/* SPDX-License-Identifier: MIT */
/*
 * LUKS1 and LUKS2 headers, keyslot unlocking and the volume key check.
 * Pure: every read goes through a bi_read_at_fn over the volume that holds
 * the header (so the fuzz target and the tests drive it from memory).
 */
#ifndef BI_LUKS_H
#define BI_LUKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "volume/part.h"

#define BI_LUKS_SLOTS	32
#define BI_LUKS_KEY_MAX 64 /* bytes: aes-xts with two 256-bit keys */

/* Refused as a hostile header's denial of service (cryptsetup itself makes
 * at most 4 GiB of Argon2 memory and a few million PBKDF2 iterations). */
#define BI_LUKS_ARGON2_MAX_KIB	(4u << 20)
#define BI_LUKS_ARGON2_MAX_T	4096u
#define BI_LUKS_ARGON2_MAX_P	64u
#define BI_LUKS_PBKDF2_MAX_ITER 100000000u

/* The key derivation one open may do, in seconds estimated for this
 * machine before any derivation starts: a keyslot's KDF and the digest
 * check that follows it at most @keyslot, all keyslots tried (every LUKS
 * volume of the open, and volume key checks) at most @total. The rates
 * are measured on first use by a few milliseconds of each KDF (CPU time of
 * the calling thread, so a busy machine does not skew them); Argon2's
 * threads divide its work by min(p, online CPUs). cryptsetup calibrates a
 * keyslot to 2 s and its digest to 1/8 s on the machine that made it, so
 * the default leaves room for a reader five times slower. */
#define BI_KDF_KEYSLOT_DEFAULT_MS 10000u
#define BI_KDF_TOTAL_FACTOR	  3 /* @total = 3 x @keyslot */
#define BI_KDF_RATES		  8

struct bi_kdf_budget {
	double keyslot, total, spent; /* seconds */
	double argon2_rate;	      /* KiB x passes per second; 0: not measured yet */
	double pbkdf2_fixed;	      /* > 0: iterations per second of every hash (fuzz) */
	struct {
		char hash[16];
		double rate; /* PBKDF2 iterations per second */
	} pbkdf2[BI_KDF_RATES];
	int npbkdf2;
};

/* A budget of @keyslot_ms per keyslot (0: the default), nothing spent. */
void bi_kdf_budget_init(struct bi_kdf_budget *b, uint32_t keyslot_ms);

struct bi_luks_slot {
	int id;
	char kdf[16];	       /* "pbkdf2", "argon2i", "argon2id" */
	char hash[16];	       /* PBKDF2's hash */
	uint32_t iter;	       /* PBKDF2 iterations or Argon2 time cost */
	uint32_t mem_kib, par; /* Argon2 */
	uint8_t salt[64];
	size_t salt_len;
	uint64_t area_off, area_len; /* bytes from the start of the header */
	uint32_t stripes;
	char af_hash[16];
	size_t key_bytes; /* the volume key it holds */
	char area_cipher[40], area_mode[40];
	size_t area_key_bytes;
};

struct bi_luks {
	int version; /* 1 or 2 */
	char uuid[40], label[48];
	char cipher[40], mode[40]; /* "aes", "xts-plain64" */
	size_t key_bytes;
	uint32_t sector_size;  /* encryption sector: 512 (LUKS1) .. 4096 */
	uint64_t iv_tweak;     /* added to the 512-byte IV sector number */
	uint64_t payload_off;  /* bytes */
	uint64_t payload_size; /* bytes; 0: to the end of the volume */
	/* the digest of the volume key */
	char dhash[16];
	uint32_t diter;
	uint8_t dsalt[64], digest[64];
	size_t dsalt_len, digest_len;
	struct bi_luks_slot slots[BI_LUKS_SLOTS];
	int nslots;	/* active keyslots of the data segment */
	uint64_t seqid; /* LUKS2: the header copy used */
	char note[200]; /* LUKS2: why the first copy was not used */
};

/* Does @p (at least 8 bytes) start with a LUKS header magic? */
bool bi_luks_magic(const uint8_t *p);

/* Parse the header of the volume [0, @size) read through @rd. 1: a LUKS
 * header, filled into @out; 0: no LUKS magic; < 0: -EUCLEAN (corrupt, the
 * reason in @err), -EOPNOTSUPP (a feature named in @err) or @rd's error. */
int bi_luks_parse(bi_read_at_fn rd, void *ctx, uint64_t size, struct bi_luks *out, char *err,
		  size_t errlen);

/* Try the passphrase on every keyslot (in order) whose estimated cost
 * fits what is left of @b (charged for each keyslot tried); on success the
 * volume key (@l->key_bytes) is in @vk and the keyslot number is returned.
 * -EKEYREJECTED when no keyslot opened (@err lists the keyslots tried and
 * why others were not), -E2BIG when no keyslot was tried because each
 * would cost more than the limits (the estimate and the limit in @err),
 * -ENOMEM when Argon2 could not get its memory, else another negative
 * errno (said in @err). */
int bi_luks_unlock(const struct bi_luks *l, bi_read_at_fn rd, void *ctx, const void *pass,
		   size_t plen, struct bi_kdf_budget *b, uint8_t *vk, char *err, size_t errlen);

/* Check a volume key against the header's digest: 0, -EKEYREJECTED, or
 * -E2BIG when the digest's PBKDF2 would cost more than what is left of @b
 * (NULL: only the per-parameter cap above; charged otherwise). */
int bi_luks_check_key(const struct bi_luks *l, const uint8_t *vk, size_t len,
		      struct bi_kdf_budget *b, char *err, size_t errlen);

/* "argon2id t=4 m=32768 KiB p=1" or "pbkdf2-sha256 1000 iterations". */
void bi_luks_slot_kdf(const struct bi_luks_slot *s, char *out, size_t len);

#endif
