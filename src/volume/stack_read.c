/* SPDX-License-Identifier: MIT */
/*
 * Reading through the volume stack, and where a device byte lies in its
 * image. A node is a window of an image (partition or whole), a
 * decrypting view (LUKS: sector by sector, IV = the 512-byte sector
 * number inside the payload, plus the header's tweak), or an LV (its
 * segments mapped onto the PV nodes by lvm.c). A device whose btrfs lies
 * under LUKS or LVM reads through its node (bi_dev.vol, bi_dev.vread).
 */
#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "volume/stack.h"
#include "volume/vol.h"

#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "image/dev.h"

int bi_vol_read_at(void *ctx, uint64_t off, void *buf, size_t len)
{
	struct bi_vol_reader *r = ctx;
	return bi_vol_read(r->fs, r->v, off, buf, len);
}

static int luks_read(struct btrfsimg_fs *fs, struct bi_vol *v, uint64_t off, uint8_t *buf,
		     size_t len)
{
	uint32_t ss = v->luks->sector_size;
	uint64_t start = off / ss * ss, end = (off + len + ss - 1) / ss * ss;
	if (end > v->size)
		return bi_err(fs, -EIO, "%s: read of %zu bytes at %" PRIu64 " past its end",
			      v->name, len, off);
	bool direct = start == off && end == off + len;
	uint8_t *tmp = direct ? buf : malloc(end - start);
	if (!tmp)
		return bi_err(fs, -ENOMEM, "%s: out of memory decrypting", v->name);
	int rc = bi_vol_read(fs, v->lower, v->luks->payload_off + start, tmp, end - start);
	if (rc == 0 && bi_cipher_run(v->cipher, false, tmp, end - start, ss,
				     start / 512 + v->luks->iv_tweak) < 0)
		rc = bi_err(fs, -EIO, "%s: decryption at %" PRIu64 " failed (OpenSSL)", v->name,
			    start);
	if (!direct) {
		if (rc == 0)
			memcpy(buf, tmp + (off - start), len);
		OPENSSL_cleanse(tmp, end - start);
		free(tmp);
	}
	return rc;
}

struct lvctx {
	struct btrfsimg_fs *fs;
	struct vg_ent *g;
};

static int lv_pv_read(void *ctx, int pv, uint64_t off, void *buf, size_t len)
{
	struct lvctx *c = ctx;
	struct bi_vol *p = c->g->pv[pv];
	if (!p)
		return -EIO;
	return bi_vol_read(c->fs, p, off, buf, len);
}

int bi_vol_read(struct btrfsimg_fs *fs, struct bi_vol *v, uint64_t off, void *buf, size_t len)
{
	if (!bi_fits64(v->size, off, len))
		return bi_err(fs, -EIO,
			      "%s: read of %zu bytes at offset %" PRIu64
			      " past its end (size %" PRIu64 ")",
			      v->name, len, off, v->size);
	if (v->kind == V_IMAGE)
		return bi_dev_read_raw(fs, v->img, v->base + off, buf, len);
	if (v->kind == V_LUKS)
		return luks_read(fs, v, off, buf, len);
	struct bi_vols *V = fs->vols;
	struct lvctx c = { fs, &V->vg[v->vg] };
	char err[300] = "";
	int rc = bi_lvm_read(&c.g->vg, v->lv, lv_pv_read, &c, off, buf, len, err, sizeof(err));
	if (rc < 0 && err[0])
		return bi_err(fs, rc, "%s", err);
	if (rc == 0 && err[0] && !v->leg_noted) { /* once per LV: not per block */
		v->leg_noted = true;
		bi_damage(fs, "%s (further failed reads of that leg not reported)", err);
	}
	return rc;
}

int bi_vol_dev_read(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t off, void *buf,
		    size_t len)
{
	if (!bi_fits64(d->size, off, len))
		return bi_err(fs, -EIO,
			      "device '%s': read of %zu bytes at offset %" PRIu64
			      " past end of device (size %" PRIu64 ") (%s)",
			      d->name, len, off, d->size, d->vol->name);
	return bi_vol_read(fs, d->vol, off, buf, len);
}

/* ------------------------------------------------------------ where a byte lies */

/* bi_lvm_read's PV reads, recorded instead of done: a one-byte read finds
 * the PV and offset the LV's segment table maps a byte to (the first leg
 * of a mirror), with the segment arithmetic kept in lvm.c alone. */
struct lvwhere {
	int pv;
	uint64_t off;
};

static int lv_where_read(void *ctx, int pv, uint64_t off, void *buf, size_t len)
{
	struct lvwhere *w = ctx;
	w->pv = pv;
	w->off = off;
	memset(buf, 0, len);
	return 0;
}

static int vol_locate(struct btrfsimg_fs *fs, const struct bi_vol *v, uint64_t off,
		      const struct bi_dev **img, uint64_t *disk, const char **why)
{
	for (int depth = 0; depth < 16; depth++) {
		if (off >= v->size) {
			*why = "past the end of its volume";
			return 1;
		}
		if (v->kind == V_IMAGE) {
			*img = v->img;
			*disk = v->base + off;
			return 0;
		}
		if (v->kind == V_LUKS) {
			*why = "encrypted (LUKS): the image holds ciphertext";
			return 1;
		}
		struct vg_ent *g = &fs->vols->vg[v->vg];
		struct lvwhere w = { -1, 0 };
		uint8_t byte;
		char err[300] = "";
		if (bi_lvm_read(&g->vg, v->lv, lv_where_read, &w, off, &byte, 1, err, sizeof(err)) <
			    0 ||
		    w.pv < 0 || !g->pv[w.pv]) {
			*why = "on an LVM physical volume not supplied";
			return 1;
		}
		v = g->pv[w.pv];
		off = w.off;
	}
	*why = "volume layers nested too deep";
	return 1;
}

int bi_vol_locate(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t off,
		  const struct bi_dev **img, uint64_t *disk, const char **why)
{
	*why = "";
	if (!d->vol) {
		*img = d;
		*disk = d->base + off;
		return 0;
	}
	return vol_locate(fs, d->vol, off, img, disk, why);
}
