/* SPDX-License-Identifier: MIT */
/*
 * LUKS1 and LUKS2 headers (cryptsetup's docs/on-disk-format.pdf and
 * docs/on-disk-format-luks2.pdf), keyslot unlocking, the volume key digest.
 *
 *   LUKS1 (big-endian, 592 bytes at 0)
 *     0 "LUKS\xba\xbe"  6 version=1  8 cipher[32]  40 mode[32]  72 hash[32]
 *     104 payload offset (512-byte sectors)  108 key bytes
 *     112 mk digest[20]  132 mk salt[32]  164 mk iterations  168 uuid[40]
 *     208 8 keyslots of 48: active (0x00ac71f3), iterations, salt[32],
 *         key material sector, stripes
 *   LUKS2: two binary headers of 4096 bytes ("LUKS\xba\xbe" at 0, "SKUL\xba\xbe"
 *     at hdr_size), each followed by the JSON area (hdr_size - 4096 bytes):
 *     6 version=2  8 hdr_size  16 seqid  24 label[48]  72 csum alg[32]
 *     104 salt[64]  168 uuid[40]  208 subsystem[48]  256 hdr_offset
 *     448 csum[64] over hdr_size bytes with the csum field zeroed.
 *     The valid copy with the higher seqid is used; a damaged first copy
 *     falls back to the second (noted). The JSON (json-c) names keyslots,
 *     the crypt segment and the digest.
 *
 * Unlocking a keyslot: KDF(passphrase) -> decrypt the keyslot area with
 * the area cipher (512-byte sectors, IV from 0) -> AF merge -> compare
 * PBKDF2(volume key) with the digest. Every buffer holding a derived key,
 * key material or the volume key is wiped (OPENSSL_cleanse).
 */
#include <json-c/json.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "volume/luks.h"

#include "base/cursor.h"
#include "base/err.h"
#include "volume/crypto.h"

#define L1_HDR	    592
#define L1_SLOT_ON  0x00ac71f3u
#define L1_SLOT_OFF 0x0000deadu
#define L2_BIN	    4096
#define AREA_MAX    (64u << 20) /* key material of one keyslot */

static const uint8_t magic1[6] = { 'L', 'U', 'K', 'S', 0xba, 0xbe };
static const uint8_t magic2[6] = { 'S', 'K', 'U', 'L', 0xba, 0xbe };

bool bi_luks_magic(const uint8_t *p)
{
	return memcmp(p, magic1, 6) == 0 && (bi_be16(p + 6) == 1 || bi_be16(p + 6) == 2);
}

/* A fixed-size on-disk string field, NUL-terminated into @out. */
static void fixstr(char *out, size_t outlen, const uint8_t *p, size_t n)
{
	size_t k = 0;
	while (k < n && k + 1 < outlen && p[k])
		k++;
	memcpy(out, p, k);
	out[k] = '\0';
}

/* "aes-xts-plain64" -> "aes", "xts-plain64". */
static bool split_cipher(const char *spec, struct bi_luks *l)
{
	const char *dash = strchr(spec, '-');
	if (!dash || (size_t)(dash - spec) >= sizeof(l->cipher) ||
	    strlen(dash + 1) >= sizeof(l->mode))
		return false;
	memcpy(l->cipher, spec, (size_t)(dash - spec));
	l->cipher[dash - spec] = '\0';
	snprintf(l->mode, sizeof(l->mode), "%s", dash + 1);
	return true;
}

/* ---------------------------------------------------------------- */
/* LUKS1 */

static int l1_slot(struct bi_luks *l, const uint8_t *p, int i, uint64_t size, char *err,
		   size_t errlen)
{
	uint32_t active = bi_be32(p), off = bi_be32(p + 40), stripes = bi_be32(p + 44);
	if (active == L1_SLOT_OFF)
		return 0;
	if (active != L1_SLOT_ON)
		return bi_msg(err, errlen, -EUCLEAN,
			      "LUKS1 keyslot %d: state 0x%08x, expect 0x%08x or 0x%08x", i, active,
			      L1_SLOT_ON, L1_SLOT_OFF);
	struct bi_luks_slot *s = &l->slots[l->nslots];
	*s = (struct bi_luks_slot){ .id = i,
				    .iter = bi_be32(p + 4),
				    .salt_len = 32,
				    .area_off = (uint64_t)off * 512,
				    .stripes = stripes,
				    .key_bytes = l->key_bytes,
				    .area_key_bytes = l->key_bytes };
	snprintf(s->kdf, sizeof(s->kdf), "pbkdf2");
	snprintf(s->hash, sizeof(s->hash), "%s", l->dhash);
	snprintf(s->af_hash, sizeof(s->af_hash), "%s", l->dhash);
	snprintf(s->area_cipher, sizeof(s->area_cipher), "%s", l->cipher);
	snprintf(s->area_mode, sizeof(s->area_mode), "%s", l->mode);
	memcpy(s->salt, p + 8, 32);
	uint64_t need = (uint64_t)stripes * l->key_bytes;
	s->area_len = (need + 511) / 512 * 512;
	if (stripes == 0 || need > AREA_MAX || !bi_fits64(size, s->area_off, s->area_len))
		return bi_msg(err, errlen, -EUCLEAN,
			      "LUKS1 keyslot %d: key material at sector %u, %u stripes of %zu "
			      "bytes, does not fit the volume (size %" PRIu64 ")",
			      i, off, stripes, l->key_bytes, size);
	l->nslots++;
	return 0;
}

static int l1_parse(const uint8_t *h, uint64_t size, struct bi_luks *l, char *err, size_t errlen)
{
	char c[33], m[33];
	l->version = 1;
	fixstr(c, sizeof(c), h + 8, 32);
	fixstr(m, sizeof(m), h + 40, 32);
	fixstr(l->dhash, sizeof(l->dhash), h + 72, 32);
	fixstr(l->uuid, sizeof(l->uuid), h + 168, 40);
	snprintf(l->cipher, sizeof(l->cipher), "%s", c);
	snprintf(l->mode, sizeof(l->mode), "%s", m);
	l->payload_off = (uint64_t)bi_be32(h + 104) * 512;
	l->key_bytes = bi_be32(h + 108);
	l->sector_size = 512;
	memcpy(l->digest, h + 112, 20);
	l->digest_len = 20;
	memcpy(l->dsalt, h + 132, 32);
	l->dsalt_len = 32;
	l->diter = bi_be32(h + 164);
	if (l->key_bytes == 0 || l->key_bytes > BI_LUKS_KEY_MAX)
		return bi_msg(err, errlen, -EUCLEAN, "LUKS1 header: key of %zu bytes, expect 1..%d",
			      l->key_bytes, BI_LUKS_KEY_MAX);
	if (!bi_hash_len(l->dhash))
		return bi_msg(err, errlen, -EOPNOTSUPP, "LUKS1 header: hash '%s' not supported",
			      l->dhash);
	if (l->payload_off > size)
		return bi_msg(err, errlen, -EUCLEAN,
			      "LUKS1 header: payload at byte %" PRIu64
			      " lies past the end of the volume (size %" PRIu64 ")",
			      l->payload_off, size);
	for (int i = 0; i < 8; i++) {
		int rc = l1_slot(l, h + 208 + 48 * i, i, size, err, errlen);
		if (rc < 0)
			return rc;
	}
	return 1;
}

/* ---------------------------------------------------------------- */
/* LUKS2: binary headers */

struct l2_copy {
	bool ok;
	uint64_t hdr_size, seqid;
	char *json; /* NUL-terminated, malloc'd */
	uint8_t bin[L2_BIN];
};

static bool l2_size_ok(uint64_t s)
{
	for (uint64_t k = 16384; k <= (4u << 20); k *= 2)
		if (s == k)
			return true;
	return false;
}

/* Check the copy at @off; true = valid (c->json set), else @why says why. */
static int l2_copy_at(bi_read_at_fn rd, void *ctx, uint64_t size, uint64_t off, bool second,
		      struct l2_copy *c, char *why, size_t whylen)
{
	uint8_t *area = NULL;
	c->ok = false;
	if (!bi_fits64(size, off, L2_BIN))
		return bi_why(why, whylen, "no room for a header at byte %" PRIu64, off);
	int rc = rd(ctx, off, c->bin, L2_BIN);
	if (rc)
		return rc < 0 ? rc : -EIO;
	const uint8_t *b = c->bin;
	if (memcmp(b, second ? magic2 : magic1, 6) != 0 || bi_be16(b + 6) != 2)
		return bi_why(why, whylen, "no LUKS2 magic at byte %" PRIu64, off);
	c->hdr_size = bi_be64(b + 8);
	c->seqid = bi_be64(b + 16);
	if (!l2_size_ok(c->hdr_size) || bi_be64(b + 256) != off || !bi_fits64(size, off, c->hdr_size))
		return bi_why(why, whylen,
			      "header at byte %" PRIu64 ": size %" PRIu64 ", offset field %" PRIu64
			      " (expect a power of two 16 KiB..4 MiB, its own offset, inside the "
			      "volume)",
			      off, c->hdr_size, bi_be64(b + 256));
	char alg[33];
	fixstr(alg, sizeof(alg), b + 72, 32);
	size_t hl = bi_hash_len(alg);
	const EVP_MD *md = EVP_get_digestbyname(alg);
	if (!hl || hl > 64 || !md)
		return bi_why(why, whylen,
			      "header at byte %" PRIu64 ": checksum '%s' not supported", off, alg);
	area = malloc(c->hdr_size);
	if (!area)
		return -ENOMEM;
	memcpy(area, b, L2_BIN);
	rc = rd(ctx, off + L2_BIN, area + L2_BIN, c->hdr_size - L2_BIN);
	if (rc) {
		free(area);
		return rc < 0 ? rc : -EIO;
	}
	memset(area + 448, 0, 64);
	uint8_t got[EVP_MAX_MD_SIZE];
	unsigned gl = 0;
	if (!EVP_Digest(area, c->hdr_size, got, &gl, md, NULL) || memcmp(got, b + 448, hl) != 0) {
		free(area);
		return bi_why(why, whylen, "header at byte %" PRIu64 ": bad %s checksum", off, alg);
	}
	size_t jl = strnlen((char *)area + L2_BIN, c->hdr_size - L2_BIN);
	if (jl == c->hdr_size - L2_BIN) {
		free(area);
		return bi_why(why, whylen, "header at byte %" PRIu64 ": JSON area not terminated",
			      off);
	}
	c->json = malloc(jl + 1);
	if (c->json)
		memcpy(c->json, area + L2_BIN, jl + 1);
	free(area);
	if (!c->json)
		return -ENOMEM;
	c->ok = true;
	return 0;
}

/* ---------------------------------------------------------------- */
/* LUKS2: JSON */

static struct json_object *jget(struct json_object *o, const char *k, enum json_type t)
{
	struct json_object *v;
	if (!o || !json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, t))
		return NULL;
	return v;
}

static const char *jstr(struct json_object *o, const char *k)
{
	struct json_object *v = jget(o, k, json_type_string);
	return v ? json_object_get_string(v) : NULL;
}

/* An integer given as a JSON number (true) or as a decimal string. */
static bool jnum(struct json_object *o, const char *k, uint64_t *out)
{
	struct json_object *v;
	if (!o || !json_object_object_get_ex(o, k, &v))
		return false;
	if (json_object_is_type(v, json_type_int)) {
		int64_t x = json_object_get_int64(v);
		if (x < 0)
			return false;
		*out = (uint64_t)x;
		return true;
	}
	if (!json_object_is_type(v, json_type_string))
		return false;
	const char *s = json_object_get_string(v);
	if (!*s || strlen(s) > 20)
		return false;
	uint64_t x = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || x > (UINT64_MAX - 9) / 10)
			return false;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*out = x;
	return true;
}

static bool jnum32(struct json_object *o, const char *k, uint32_t *out)
{
	uint64_t v;
	if (!jnum(o, k, &v) || v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* Base64 (OpenSSL's decoder) into @out; false if malformed or too long. */
/* Base64 (OpenSSL's decoder) into @out (at most @max bytes); false if
 * malformed or too long. The decoder also writes the bytes of the '='
 * padding, so it decodes into a buffer with room for them. */
static bool b64(const char *s, uint8_t *out, size_t max, size_t *len)
{
	uint8_t tmp[3 * 48];
	if (!s)
		return false;
	size_t n = strlen(s);
	if (n == 0 || n % 4 || n / 4 * 3 > sizeof(tmp))
		return false;
	int r = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)n);
	size_t pad = (s[n - 1] == '=') + (n > 1 && s[n - 2] == '=');
	if (r < 0 || (size_t)r < pad || (size_t)r - pad > max)
		return false;
	*len = (size_t)r - pad;
	memcpy(out, tmp, *len);
	return true;
}

static bool jhash(struct json_object *o, const char *k, char *out, size_t len)
{
	const char *h = jstr(o, k);
	if (!h || strlen(h) >= len || !bi_hash_len(h))
		return false;
	snprintf(out, len, "%s", h);
	return true;
}

/* "0" .. "31" */
static int slot_id(const char *k)
{
	if (!k[0] || strlen(k) > 2)
		return -1;
	int v = 0;
	for (; *k; k++) {
		if (*k < '0' || *k > '9')
			return -1;
		v = v * 10 + (*k - '0');
	}
	return v < BI_LUKS_SLOTS ? v : -1;
}

static int l2_kdf(struct json_object *kdf, struct bi_luks_slot *s)
{
	const char *t = jstr(kdf, "type");
	if (!t || strlen(t) >= sizeof(s->kdf))
		return -EUCLEAN;
	snprintf(s->kdf, sizeof(s->kdf), "%s", t);
	if (!b64(jstr(kdf, "salt"), s->salt, sizeof(s->salt), &s->salt_len))
		return -EUCLEAN;
	if (strcmp(t, "pbkdf2") == 0)
		return jhash(kdf, "hash", s->hash, sizeof(s->hash)) &&
				       jnum32(kdf, "iterations", &s->iter)
			       ? 0
			       : -EUCLEAN;
	if (strcmp(t, "argon2i") == 0 || strcmp(t, "argon2id") == 0)
		return jnum32(kdf, "time", &s->iter) && jnum32(kdf, "memory", &s->mem_kib) &&
				       jnum32(kdf, "cpus", &s->par)
			       ? 0
			       : -EUCLEAN;
	return -EOPNOTSUPP;
}

static int l2_slot(struct bi_luks *l, const char *key, struct json_object *o, uint64_t size,
		   char *err, size_t errlen)
{
	int id = slot_id(key);
	const char *type = jstr(o, "type");
	if (id < 0 || !type)
		return bi_msg(err, errlen, -EUCLEAN, "LUKS2 keyslot '%s': bad name or no type",
			      key);
	if (strcmp(type, "luks2") != 0)
		return 0; /* reencryption and other kinds hold no volume key we use */
	struct bi_luks_slot *s = &l->slots[l->nslots];
	*s = (struct bi_luks_slot){ .id = id };
	struct json_object *af = jget(o, "af", json_type_object),
			   *area = jget(o, "area", json_type_object),
			   *kdf = jget(o, "kdf", json_type_object);
	uint64_t ks = 0, aks = 0;
	const char *enc = jstr(area, "encryption"), *aft = jstr(af, "type");
	struct bi_luks tmp = { 0 };
	if (!af || !area || !kdf || !jnum(o, "key_size", &ks) || ks == 0 || ks > BI_LUKS_KEY_MAX ||
	    !aft || strcmp(aft, "luks1") != 0 || !jnum32(af, "stripes", &s->stripes) ||
	    s->stripes == 0 || !jhash(af, "hash", s->af_hash, sizeof(s->af_hash)) || !enc ||
	    !split_cipher(enc, &tmp) || !jnum(area, "key_size", &aks) || aks == 0 ||
	    aks > BI_LUKS_KEY_MAX || !jnum(area, "offset", &s->area_off) ||
	    !jnum(area, "size", &s->area_len))
		return bi_msg(err, errlen, -EUCLEAN,
			      "LUKS2 keyslot %d: missing or bad key_size, af or area", id);
	int rc = l2_kdf(kdf, s);
	if (rc < 0)
		return bi_msg(err, errlen, rc, "LUKS2 keyslot %d: %s KDF '%s'", id,
			      rc == -EOPNOTSUPP ? "unsupported" : "bad", s->kdf);
	s->key_bytes = ks;
	s->area_key_bytes = aks;
	snprintf(s->area_cipher, sizeof(s->area_cipher), "%s", tmp.cipher);
	snprintf(s->area_mode, sizeof(s->area_mode), "%s", tmp.mode);
	uint64_t need = (uint64_t)s->stripes * ks;
	if (need > AREA_MAX || need > s->area_len || !bi_fits64(size, s->area_off, s->area_len))
		return bi_msg(err, errlen, -EUCLEAN,
			      "LUKS2 keyslot %d: area at byte %" PRIu64 " (%" PRIu64
			      " bytes) cannot hold %u stripes of %" PRIu64
			      " bytes inside the volume (size %" PRIu64 ")",
			      id, s->area_off, s->area_len, s->stripes, ks, size);
	s->area_len = (need + 511) / 512 * 512;
	l->nslots++;
	return 0;
}

static int l2_segment(struct bi_luks *l, struct json_object *segs, uint64_t size, char *err,
		      size_t errlen)
{
	if (json_object_object_length(segs) != 1)
		return bi_msg(err, errlen, -EOPNOTSUPP,
			      "LUKS2: %d data segments (a reencryption in progress?); only one is "
			      "supported",
			      json_object_object_length(segs));
	struct json_object *s = jget(segs, "0", json_type_object);
	const char *t = jstr(s, "type"), *enc = jstr(s, "encryption"), *sz = jstr(s, "size");
	uint32_t ss = 0;
	if (!t || strcmp(t, "crypt") != 0 || !enc || !sz || !jnum(s, "offset", &l->payload_off) ||
	    !jnum32(s, "sector_size", &ss))
		return bi_msg(err, errlen, -EUCLEAN,
			      "LUKS2 segment 0: missing type crypt, encryption, offset, size or "
			      "sector_size");
	if (!split_cipher(enc, l))
		return bi_msg(err, errlen, -EUCLEAN, "LUKS2 segment 0: encryption '%s'", enc);
	if (ss != 512 && ss != 1024 && ss != 2048 && ss != 4096)
		return bi_msg(err, errlen, -EUCLEAN,
			      "LUKS2 segment 0: sector_size %u, expect 512, 1024, 2048 or 4096",
			      ss);
	l->sector_size = ss;
	if (strcmp(sz, "dynamic") != 0 && !jnum(s, "size", &l->payload_size))
		return bi_msg(err, errlen, -EUCLEAN, "LUKS2 segment 0: size '%s'", sz);
	if (jget(s, "iv_tweak", json_type_string) && !jnum(s, "iv_tweak", &l->iv_tweak))
		return bi_msg(err, errlen, -EUCLEAN, "LUKS2 segment 0: bad iv_tweak");
	if (l->payload_off % ss || l->payload_size % ss || l->payload_off > size ||
	    l->payload_size > size - l->payload_off)
		return bi_msg(err, errlen, -EUCLEAN,
			      "LUKS2 segment 0: offset %" PRIu64 ", size %" PRIu64
			      " do not fit a volume of %" PRIu64 " bytes in %u-byte sectors",
			      l->payload_off, l->payload_size, size, ss);
	return 0;
}

/* The digest of segment 0; *slots gets a bitmap of its keyslots. */
static int l2_digest(struct bi_luks *l, struct json_object *digs, uint32_t *slots, char *err,
		     size_t errlen)
{
	json_object_object_foreach(digs, k, d)
	{
		struct json_object *segs = jget(d, "segments", json_type_array),
				   *ks = jget(d, "keyslots", json_type_array);
		bool seg0 = false;
		for (size_t i = 0; segs && i < json_object_array_length(segs); i++) {
			const char *s = json_object_get_string(json_object_array_get_idx(segs, i));
			seg0 |= s && strcmp(s, "0") == 0;
		}
		if (!seg0)
			continue;
		const char *t = jstr(d, "type");
		if (!t || strcmp(t, "pbkdf2") != 0 || !ks ||
		    !jhash(d, "hash", l->dhash, sizeof(l->dhash)) ||
		    !jnum32(d, "iterations", &l->diter) ||
		    !b64(jstr(d, "salt"), l->dsalt, sizeof(l->dsalt), &l->dsalt_len) ||
		    !b64(jstr(d, "digest"), l->digest, sizeof(l->digest), &l->digest_len))
			return bi_msg(err, errlen, -EUCLEAN, "LUKS2 digest '%s': bad fields", k);
		*slots = 0;
		for (size_t i = 0; i < json_object_array_length(ks); i++) {
			const char *s = json_object_get_string(json_object_array_get_idx(ks, i));
			int id = s ? slot_id(s) : -1;
			if (id >= 0)
				*slots |= 1u << id;
		}
		return 0;
	}
	return bi_msg(err, errlen, -EUCLEAN, "LUKS2: no digest for segment 0");
}

static int l2_json(struct bi_luks *l, const char *text, uint64_t size, char *err, size_t errlen)
{
	struct json_object *root = json_tokener_parse(text);
	int rc = 0;
	struct json_object *ks = jget(root, "keyslots", json_type_object),
			   *segs = jget(root, "segments", json_type_object),
			   *digs = jget(root, "digests", json_type_object);
	if (!ks || !segs || !digs) {
		rc = bi_msg(err, errlen, -EUCLEAN, "LUKS2 JSON: %s",
			    root ? "no keyslots, segments or digests object" : "does not parse");
		goto out;
	}
	uint32_t mine = 0;
	rc = l2_segment(l, segs, size, err, errlen);
	if (rc == 0)
		rc = l2_digest(l, digs, &mine, err, errlen);
	json_object_object_foreach(ks, k, o)
	{
		if (rc < 0)
			break;
		int id = slot_id(k);
		if (id < 0 || !(mine & (1u << id)) || !json_object_is_type(o, json_type_object))
			continue;
		rc = l2_slot(l, k, o, size, err, errlen);
	}
	for (int i = 0; rc == 0 && i < l->nslots; i++)
		for (int j = i + 1; j < l->nslots; j++)
			if (l->slots[j].id < l->slots[i].id) {
				struct bi_luks_slot t = l->slots[i];
				l->slots[i] = l->slots[j];
				l->slots[j] = t;
			}
	for (int i = 0; rc == 0 && i < l->nslots; i++)
		if (l->slots[i].key_bytes != l->slots[0].key_bytes)
			rc = bi_msg(err, errlen, -EUCLEAN,
				    "LUKS2: keyslots of different key sizes");
	l->key_bytes = l->nslots ? l->slots[0].key_bytes : 0;
out:
	json_object_put(root);
	return rc;
}

static int l2_parse(bi_read_at_fn rd, void *ctx, uint64_t size, struct bi_luks *l, char *err,
		    size_t errlen)
{
	struct l2_copy c[2] = { 0 };
	char why[2][200] = { "", "" };
	int rc = l2_copy_at(rd, ctx, size, 0, false, &c[0], why[0], sizeof(why[0]));
	if (rc < 0 && rc != -EUCLEAN)
		goto out;
	/* the second copy sits right after the first: at hdr_size, which a
	 * damaged first copy cannot tell, so try every size LUKS2 allows */
	for (uint64_t off = 16384; off <= (4u << 20) && !c[1].ok; off *= 2) {
		if (c[0].ok && off != c[0].hdr_size)
			continue;
		rc = l2_copy_at(rd, ctx, size, off, true, &c[1], why[1], sizeof(why[1]));
		if (rc < 0 && rc != -EUCLEAN)
			goto out;
	}
	int use = c[0].ok && (!c[1].ok || c[0].seqid >= c[1].seqid) ? 0 : c[1].ok ? 1 : -1;
	if (use < 0) {
		rc = bi_msg(err, errlen, -EUCLEAN,
			    "LUKS2: no valid header copy: first: %s; second: %s", why[0],
			    why[1][0] ? why[1] : "not found");
		goto out;
	}
	if (use == 1)
		snprintf(l->note, sizeof(l->note),
			 "LUKS2 first header copy %.150s; used the second",
			 c[0].ok ? "older" : why[0]);
	l->version = 2;
	l->seqid = c[use].seqid;
	fixstr(l->label, sizeof(l->label), c[use].bin + 24, 48);
	fixstr(l->uuid, sizeof(l->uuid), c[use].bin + 168, 40);
	rc = l2_json(l, c[use].json, size, err, errlen);
	if (rc == 0)
		rc = 1;
out:
	free(c[0].json);
	free(c[1].json);
	return rc;
}

int bi_luks_parse(bi_read_at_fn rd, void *ctx, uint64_t size, struct bi_luks *out, char *err,
		  size_t errlen)
{
	uint8_t h[L1_HDR];
	memset(out, 0, sizeof(*out));
	if (err && errlen)
		err[0] = '\0';
	if (size < L1_HDR)
		return 0;
	int rc = rd(ctx, 0, h, sizeof(h));
	if (rc)
		return rc < 0 ? rc : -EIO;
	if (!bi_luks_magic(h))
		return 0;
	rc = bi_be16(h + 6) == 1 ? l1_parse(h, size, out, err, errlen)
			      : l2_parse(rd, ctx, size, out, err, errlen);
	if (rc > 0 && (out->payload_off == 0 || out->key_bytes == 0))
		rc = bi_msg(err, errlen, -EUCLEAN, "LUKS%d header: %s", out->version,
			    out->key_bytes ? "payload at offset 0 overlaps the header"
					   : "no active keyslot for the data segment");
	return rc;
}

/* ---------------------------------------------------------------- */
/* The cost of key derivation, estimated before any runs (STYLE rule 15):
 * a hostile header's PBKDF2 iteration counts and Argon2 costs are all
 * within the per-parameter caps above yet would take hours. */

void bi_kdf_budget_init(struct bi_kdf_budget *b, uint32_t keyslot_ms)
{
	memset(b, 0, sizeof(*b));
	b->keyslot = (keyslot_ms ? keyslot_ms : BI_KDF_KEYSLOT_DEFAULT_MS) / 1000.0;
	b->total = b->keyslot * BI_KDF_TOTAL_FACTOR;
}

/* Estimated seconds of PBKDF2-@hash with @iter iterations. */
static int pbkdf2_secs(struct bi_kdf_budget *b, const char *hash, uint32_t iter, double *secs)
{
	double rate = b->pbkdf2_fixed;
	for (int i = 0; rate <= 0 && i < b->npbkdf2; i++)
		if (strcmp(b->pbkdf2[i].hash, hash) == 0)
			rate = b->pbkdf2[i].rate;
	if (rate <= 0) {
		int rc = bi_pbkdf2_rate(hash, &rate);
		if (rc < 0)
			return rc;
		int i = b->npbkdf2 < BI_KDF_RATES ? b->npbkdf2++ : BI_KDF_RATES - 1;
		snprintf(b->pbkdf2[i].hash, sizeof(b->pbkdf2[i].hash), "%s", hash);
		b->pbkdf2[i].rate = rate;
	}
	*secs = iter / rate;
	return 0;
}

/* Argon2 fills m KiB t times; libargon2 runs its p lanes in threads. */
static int argon2_secs(struct bi_kdf_budget *b, const struct bi_luks_slot *s, double *secs)
{
	if (b->argon2_rate <= 0) {
		int rc = bi_argon2_rate(&b->argon2_rate);
		if (rc < 0)
			return rc;
	}
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	double lanes = s->par ? s->par : 1;
	if (cpus > 0 && lanes > (double)cpus)
		lanes = (double)cpus;
	*secs = (double)s->iter * s->mem_kib / b->argon2_rate / lanes;
	return 0;
}

static void fmt_secs(double secs, char *out, size_t len)
{
	snprintf(out, len, secs < 10 ? "%.3g s" : "%.0f s", secs);
}

/* Charge @secs of work named @what to @b: 0, or -E2BIG with @why saying
 * the estimate and the limit it is over. */
static int charge(struct bi_kdf_budget *b, double secs, const char *what, char *why, size_t whylen)
{
	char need[32], spent[32];
	fmt_secs(secs, need, sizeof(need));
	fmt_secs(b->spent, spent, sizeof(spent));
	if (secs > b->keyslot)
		return bi_msg(why, whylen, -E2BIG,
			      "%s would need about %s of key derivation on this machine; over the "
			      "limit of %g s per keyslot (--kdf-limit SECONDS raises it)",
			      what, need, b->keyslot);
	if (b->spent + secs > b->total)
		return bi_msg(why, whylen, -E2BIG,
			      "%s would need about %s of key derivation on this machine; over the "
			      "limit of %g s for all keyslots of an open, %s already spent "
			      "(--kdf-limit SECONDS raises it)",
			      what, need, b->total, spent);
	b->spent += secs;
	return 0;
}

/* The digest check alone: one PBKDF2 run per keyslot tried or key given. */
static int digest_secs(const struct bi_luks *l, struct bi_kdf_budget *b, double *secs, char *what,
		       size_t wlen)
{
	snprintf(what, wlen, "the volume key digest check (pbkdf2-%s %u iterations)", l->dhash,
		 l->diter);
	return pbkdf2_secs(b, l->dhash, l->diter, secs);
}

/* Does the digest check fit one keyslot's limit at all? */
static int digest_fits(const struct bi_luks *l, struct bi_kdf_budget *b, char *err, size_t errlen)
{
	char what[96];
	double d;
	if (l->diter == 0 || l->digest_len > 64)
		return bi_msg(err, errlen, -EUCLEAN, "LUKS digest: %u iterations, %zu bytes",
			      l->diter, l->digest_len);
	int rc = digest_secs(l, b, &d, what, sizeof(what));
	if (rc < 0)
		return bi_msg(err, errlen, rc, "%s: cannot estimate its cost", what);
	if (d <= b->keyslot)
		return 0;
	struct bi_kdf_budget probe = *b; /* only for the message: nothing is charged */
	return charge(&probe, d, what, err, errlen);
}

/* Charge keyslot @s with the digest check after it, or say why not. */
static int charge_slot(const struct bi_luks *l, const struct bi_luks_slot *s,
		       struct bi_kdf_budget *b, char *why, size_t whylen)
{
	char k[96], what[200], dw[96];
	double ks, d;
	int rc = strcmp(s->kdf, "pbkdf2") == 0 ? pbkdf2_secs(b, s->hash, s->iter, &ks)
					       : argon2_secs(b, s, &ks);
	if (rc == 0)
		rc = digest_secs(l, b, &d, dw, sizeof(dw));
	if (rc < 0)
		return bi_msg(why, whylen, rc, "keyslot %d: cannot estimate the cost of its KDF",
			      s->id);
	bi_luks_slot_kdf(s, k, sizeof(k));
	snprintf(what, sizeof(what), "keyslot %d (%s, then the digest check)", s->id, k);
	return charge(b, ks + d, what, why, whylen);
}

/* ---------------------------------------------------------------- */
/* Unlocking */

int bi_luks_check_key(const struct bi_luks *l, const uint8_t *vk, size_t len,
		      struct bi_kdf_budget *b, char *err, size_t errlen)
{
	uint8_t d[64];
	if (len != l->key_bytes)
		return bi_msg(err, errlen, -EKEYREJECTED,
			      "volume key of %zu bytes given, the LUKS header wants %zu", len,
			      l->key_bytes);
	if (l->diter == 0 || l->diter > BI_LUKS_PBKDF2_MAX_ITER || l->digest_len > sizeof(d))
		return bi_msg(err, errlen, -E2BIG,
			      "LUKS digest: %u iterations refused (limit 1..%u)", l->diter,
			      BI_LUKS_PBKDF2_MAX_ITER);
	if (b) {
		char what[96];
		double secs;
		int rc = digest_secs(l, b, &secs, what, sizeof(what));
		if (rc == 0)
			rc = charge(b, secs, what, err, errlen);
		if (rc < 0)
			return rc;
	}
	int rc = bi_pbkdf2(l->dhash, vk, len, l->dsalt, l->dsalt_len, l->diter, d, l->digest_len);
	if (rc == 0 && CRYPTO_memcmp(d, l->digest, l->digest_len) != 0)
		rc = -EKEYREJECTED;
	OPENSSL_cleanse(d, sizeof(d));
	if (rc == -EKEYREJECTED)
		bi_msg(err, errlen, rc, "the volume key does not match the LUKS header's digest");
	return rc;
}

static int kdf_cost_ok(const struct bi_luks_slot *s, char *err, size_t errlen)
{
	bool argon = strncmp(s->kdf, "argon2", 6) == 0;
	if (!argon && (s->iter == 0 || s->iter > BI_LUKS_PBKDF2_MAX_ITER))
		return bi_msg(err, errlen, -E2BIG,
			      "keyslot %d: PBKDF2 with %u iterations refused (limit %u)", s->id,
			      s->iter, BI_LUKS_PBKDF2_MAX_ITER);
	if (argon && (s->mem_kib > BI_LUKS_ARGON2_MAX_KIB || s->iter > BI_LUKS_ARGON2_MAX_T ||
		      s->par > BI_LUKS_ARGON2_MAX_P))
		return bi_msg(err, errlen, -E2BIG,
			      "keyslot %d: %s with memory %u KiB, time %u, %u threads refused "
			      "(limits %u KiB, %u, %u)",
			      s->id, s->kdf, s->mem_kib, s->iter, s->par, BI_LUKS_ARGON2_MAX_KIB,
			      BI_LUKS_ARGON2_MAX_T, BI_LUKS_ARGON2_MAX_P);
	return 0;
}

static int derive(const struct bi_luks_slot *s, const void *pass, size_t plen, uint8_t *out,
		  char *err, size_t errlen)
{
	if (strcmp(s->kdf, "pbkdf2") == 0) {
		int rc = bi_pbkdf2(s->hash, pass, plen, s->salt, s->salt_len, s->iter, out,
				   s->area_key_bytes);
		return rc < 0 ? bi_msg(err, errlen, rc, "keyslot %d: PBKDF2-%s failed", s->id,
				       s->hash)
			      : 0;
	}
	int rc = bi_argon2(strcmp(s->kdf, "argon2id") == 0, s->iter, s->mem_kib, s->par, pass, plen,
			   s->salt, s->salt_len, out, s->area_key_bytes);
	if (rc == -ENOMEM)
		return bi_msg(err, errlen, rc,
			      "keyslot %d: %s could not get its %u KiB of memory (out of memory)",
			      s->id, s->kdf, s->mem_kib);
	if (rc < 0)
		return bi_msg(err, errlen, rc, "keyslot %d: libargon2 refused t=%u m=%u KiB p=%u",
			      s->id, s->iter, s->mem_kib, s->par);
	return 0;
}

/* One keyslot: 0 with the key in @vk, -EKEYREJECTED, or an error (@err). */
static int try_slot(const struct bi_luks *l, const struct bi_luks_slot *s, bi_read_at_fn rd,
		    void *ctx, const void *pass, size_t plen, uint8_t *vk, char *err, size_t errlen)
{
	uint8_t dk[BI_LUKS_KEY_MAX];
	struct bi_cipher *c = NULL;
	uint8_t *m = malloc(s->area_len);
	int rc = m ? derive(s, pass, plen, dk, err, errlen)
		   : bi_msg(err, errlen, -ENOMEM, "keyslot %d: out of memory", s->id);
	if (rc == 0)
		rc = bi_cipher_new(s->area_cipher, s->area_mode, dk, s->area_key_bytes, &c, err,
				   errlen);
	if (rc == 0) {
		rc = rd(ctx, s->area_off, m, s->area_len);
		rc = rc > 0 ? -EIO : rc;
		if (rc < 0)
			bi_msg(err, errlen, rc,
			       "keyslot %d: reading its key material (%" PRIu64
			       " bytes at byte %" PRIu64 ") failed",
			       s->id, s->area_len, s->area_off);
	}
	if (rc == 0)
		rc = bi_cipher_run(c, false, m, s->area_len, 512, 0);
	if (rc == 0)
		rc = bi_af_merge(s->af_hash, m, s->key_bytes, s->stripes, vk);
	if (rc == 0)
		rc = bi_luks_check_key(l, vk, s->key_bytes, NULL, err, errlen);
	OPENSSL_cleanse(dk, sizeof(dk));
	if (m)
		OPENSSL_cleanse(m, s->area_len);
	free(m);
	bi_cipher_free(c);
	if (rc < 0)
		OPENSSL_cleanse(vk, s->key_bytes);
	return rc;
}

/* "0, 1" of the keyslots in @ids (a bitmap); "s" in @plural if several. */
static void slot_list(uint32_t ids, char *out, size_t len, const char **plural)
{
	size_t used = 0;
	int n = 0;
	out[0] = '\0';
	for (int i = 0; i < BI_LUKS_SLOTS && used < len; i++)
		if (ids & (1u << i))
			used += (size_t)snprintf(out + used, len - used, "%s%d", n++ ? ", " : "",
						 i);
	*plural = n > 1 ? "s" : "";
}

int bi_luks_unlock(const struct bi_luks *l, bi_read_at_fn rd, void *ctx, const void *pass,
		   size_t plen, struct bi_kdf_budget *b, uint8_t *vk, char *err, size_t errlen)
{
	char why[300], first[300] = "", tl[160], rl[160];
	uint32_t tried = 0, refused = 0;
	int first_rc = 0;
	int rc = digest_fits(l, b, err, errlen);
	if (rc < 0)
		return rc;
	for (int i = 0; i < l->nslots; i++) {
		const struct bi_luks_slot *s = &l->slots[i];
		why[0] = '\0';
		rc = kdf_cost_ok(s, why, sizeof(why));
		if (rc == 0)
			rc = charge_slot(l, s, b, why, sizeof(why));
		if (rc == 0)
			rc = try_slot(l, s, rd, ctx, pass, plen, vk, why, sizeof(why));
		if (rc == 0)
			return s->id;
		if (rc == -EKEYREJECTED) {
			tried |= 1u << s->id;
			continue;
		}
		if (rc != -E2BIG && rc != -ENOMEM) /* the volume is unreadable */
			return bi_msg(err, errlen, rc, "%s", why);
		if (!first_rc) {
			first_rc = rc;
			snprintf(first, sizeof(first), "%s", why);
		} else
			refused |= 1u << s->id;
	}
	const char *tp, *rp;
	slot_list(tried, tl, sizeof(tl), &tp);
	slot_list(refused, rl, sizeof(rl), &rp);
	if (!tried && first_rc)
		return bi_msg(err, errlen, first_rc, "%s%s%s%s%s", first,
			      refused ? "; also not tried: keyslot" : "", rp, refused ? " " : "",
			      rl);
	return bi_msg(err, errlen, -EKEYREJECTED,
		      "no keyslot opened with this passphrase; tried keyslot%s %s%s%s%s%s%s%s", tp,
		      tried ? tl : "(none)", first_rc ? "; not tried: " : "", first,
		      refused ? "; also not tried: keyslot" : "", rp, refused ? " " : "", rl);
}

void bi_luks_slot_kdf(const struct bi_luks_slot *s, char *out, size_t len)
{
	if (strcmp(s->kdf, "pbkdf2") == 0)
		snprintf(out, len, "pbkdf2-%s %u iterations", s->hash, s->iter);
	else
		snprintf(out, len, "%s t=%u m=%u KiB p=%u", s->kdf, s->iter, s->mem_kib, s->par);
}
