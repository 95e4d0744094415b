// SPDX-License-Identifier: MIT
/* btrfsimg_file_digest: a file's contents through an OpenSSL digest, read
 * in 1 MiB pieces (never the whole file at once). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/handle.h"
#include "image/dev.h"
#include "files/extent.h"

#define CHUNK (1u << 20)

static bool all_zero(const uint8_t *p, size_t n)
{
	return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/* Whether the holes of [0, len) alone pass @max, found extent by extent
 * before anything is hashed: a forged size then costs its items, not
 * 16 bytes of SHA per byte of the devices. *at: where they pass it
 * (UINT64_MAX: they do not). */
static int holes_past(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t ino, uint64_t len,
		      uint64_t max, uint64_t *at)
{
	struct bi_file *f;
	*at = UINT64_MAX;
	int rc = bi_file_open(fs, subvol, ino, &f);
	if (rc < 0)
		return rc;
	uint64_t end = len < bi_file_size(f) ? len : bi_file_size(f), pos = 0, holes = 0;
	while (rc == 0 && pos < end) {
		uint64_t s, e;
		rc = bi_file_next_data(f, pos, &s, &e);
		if (rc == -ENXIO) {
			s = e = end;
			rc = 0;
		}
		if (rc < 0)
			break;
		s = s < end ? s : end;
		holes += s - pos;
		if (holes > max) {
			*at = s - (holes - max);
			break;
		}
		pos = e < end ? e : end;
	}
	bi_file_close(f);
	return rc;
}

static int too_many_zeros(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t ino,
			  uint64_t len, uint64_t max, uint64_t off)
{
	return bi_err(fs, -EFBIG,
		      "file digest: subvol=%" PRIu64 " inode=%" PRIu64 " size=%" PRIu64
		      ": more than %" PRIu64 " bytes of zeros (holes) by offset %" PRIu64
		      ", 16 per byte of the devices; left unhashed, as a size no extent"
		      " backs may be forged",
		      subvol, ino, len, max, off);
}

int btrfsimg_file_digest(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid, uint64_t len,
			 const char *alg, char *hex, size_t hexlen)
{
	const EVP_MD *md = alg ? EVP_get_digestbyname(alg) : NULL;
	if (!md || !hex || hexlen < 2 * (size_t)EVP_MD_size(md) + 1)
		return bi_err(fs, -EINVAL, "file digest: %s '%s'",
			      md ? "no room for the hex of" : "unknown digest", alg ? alg : "");
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint8_t *buf = malloc(CHUNK);
	int rc = (ctx && buf) ? 0 : -ENOMEM;
	uint64_t zeros = 0, zeros_max = bi_size_bound(fs); /* extent.h: why */
	if (rc == 0 && !EVP_DigestInit_ex(ctx, md, NULL))
		rc = -EINVAL;
	uint64_t at = UINT64_MAX;
	if (rc == 0 && len > zeros_max &&
	    (rc = holes_past(fs, subvol, objectid, len, zeros_max, &at)) == 0 && at != UINT64_MAX)
		rc = too_many_zeros(fs, subvol, objectid, len, zeros_max, at);
	for (uint64_t off = 0; rc == 0 && off < len;) {
		size_t got = 0, want = len - off < CHUNK ? (size_t)(len - off) : CHUNK;
		rc = btrfsimg_file_read(fs, subvol, objectid, off, buf, want, &got);
		if (rc == 0 && got == 0)
			break;
		if (rc == 0 && all_zero(buf, got) && (zeros += got) > zeros_max)
			rc = too_many_zeros(fs, subvol, objectid, len, zeros_max, off);
		if (rc == 0)
			EVP_DigestUpdate(ctx, buf, got);
		off += got;
	}
	if (rc == 0) {
		unsigned char out[EVP_MAX_MD_SIZE];
		unsigned n = 0;
		EVP_DigestFinal_ex(ctx, out, &n);
		btrfsimg_hex(out, n, hex, hexlen);
	}
	EVP_MD_CTX_free(ctx);
	free(buf);
	return rc;
}
