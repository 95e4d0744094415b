/* SPDX-License-Identifier: MIT */
/*
 * The volume stack between images and btrfs, and its byte map.
 *
 *   image --- partition (MBR/GPT) --- LUKS1/2 --- LVM PV ---+
 *         \-- LUKS / PV / btrfs                             |
 *   image --- ... --- LVM PV -------------------------------+-- VG --- LV --- (LUKS) --- btrfs
 *
 * Every node is a bi_vol with a size and a read function: a window of an
 * image (partition or whole), a decrypting view (LUKS: sector by sector,
 * IV = the 512-byte sector number inside the payload), or an LV (its
 * segments mapped onto the PV nodes, volume/lvm.c). A device whose btrfs
 * lies under LUKS or LVM reads through its node (bi_dev.vol); a device
 * that only holds a PV of an LV chosen for another device is absorbed (not
 * a btrfs device of its own). Without LUKS or LVM anywhere the images are
 * located exactly as before (bi_dev_locate, part.c).
 *
 * Secrets (passphrase, volume key) live only in bi_vols and OpenSSL's
 * cipher contexts; they are wiped when the handle is freed and never
 * enter a message or a layer row.
 */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "volume/vol.h"

#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "volume/crypto.h"
#include "volume/luks.h"
#include "volume/lvm.h"
#include "volume/part.h"

#define MAGIC_AT (SB_PRIMARY_OFFSET + SB_MAGIC_OFF)
#define PASS_MAX 8192
#define ROWS_MAX 100000
/* LVM metadata read in one scan, bytes. Partitions may overlap: a table
 * of 8192 entries each holding a PV whose area is 64 MiB (read in whole
 * when its text is damaged) would be 512 GiB of work for one image. A
 * real PV's text is a few KiB; past this budget the remaining PVs are
 * listed with their metadata unread, and that is said. */
#define MDA_BUDGET (1ull << 30)

enum vkind { V_IMAGE, V_LUKS, V_LV };

struct bi_vol {
	enum vkind kind;
	char name[200]; /* for messages: "disk.img partition 2 LUKS2" */
	uint64_t size;
	struct bi_dev *img; /* V_IMAGE: the image, and the window's start */
	uint64_t base;
	int img_idx;	      /* V_IMAGE: index of img in fs->devs */
	int partition;	      /* the partition it lies in (0: none) */
	struct bi_vol *lower; /* V_LUKS: the volume holding the header */
	struct bi_luks *luks;
	struct bi_cipher *cipher;
	int vg, lv; /* V_LV */
	int row;
	char lvname[260]; /* "vg/lv" of the LV on its path, or "" */
	bool leg_noted;	  /* V_LV: a failed mirror leg was reported */
	char *pnote;	  /* V_IMAGE: damage its partition table parser worked around */
};

struct pv_ent {
	struct bi_vol *v;
	struct bi_lvm_label lb;
	char *text; /* the newest valid metadata of this PV */
	char vgid[40], vgname[128];
	uint64_t seqno;
	int row;
};

struct vg_ent {
	struct bi_lvm_vg vg;
	struct bi_vol **pv; /* per vg.pvs[i]: the node found, or NULL */
	int row;
};

/* A LUKS header already unlocked (or not) in this scan, by where it lies in
 * an image: 128 GPT entries at one LUKS partition cost one derivation. */
struct luks_seen {
	const struct bi_dev *img;
	uint64_t base;
	int partition;
	int rc;	  /* luks_key's result: 1 (@vk) or 0 (locked, @err) */
	int slot; /* the keyslot that opened; -1: the volume key given */
	uint8_t vk[BI_LUKS_KEY_MAX];
	char err[400];
};

struct bi_vols {
	uint8_t *pass, *vkey;
	size_t plen, vklen;
	bool have_pass;
	uint32_t kdf_ms;	  /* btrfsimg_set_kdf_limit; 0: the default */
	struct bi_kdf_budget kdf; /* of the current scan, every layer */
	struct luks_seen *seen;
	size_t nseen;
	btrfsimg_passphrase_fn ask;
	void *ask_ctx;
	char *select; /* "vg/lv" */

	struct bi_vol **v;
	size_t nv;
	struct pv_ent *pv;
	size_t npv;
	struct vg_ent *vg;
	size_t nvg;
	struct bi_vol **btrfs;
	size_t nbtrfs;
	struct btrfsimg_layer *rows;
	size_t nrows, rows_cap;
	bool layered; /* a LUKS or LVM layer was found */
	bool strict;  /* opening: a wrong key is fatal */
	bool scanned;
	bool rows_full; /* ROWS_MAX reached: the "stopped" row was added */
	uint64_t mda_read;  /* LVM metadata area bytes this scan may have read */
	int mda_skipped;    /* PVs whose metadata the budget left unread */
	char locked[300];	    /* the first LUKS volume left locked */
	struct btrfsimg_layer sink; /* written instead of a row out of memory */
	char broken[300];	    /* the first LUKS header that did not parse */
};

/* ---------------------------------------------------------------- */
/* Handle state */

static struct bi_vols *vols_get(struct btrfsimg_fs *fs)
{
	if (!fs->vols)
		fs->vols = calloc(1, sizeof(struct bi_vols));
	return fs->vols;
}

static void wipe_free(uint8_t *p, size_t n)
{
	if (p)
		OPENSSL_cleanse(p, n);
	free(p);
}

/* Drop what a scan found (keeps the secrets and the selection). */
static void scan_free(struct bi_vols *V)
{
	for (size_t i = 0; i < V->nv; i++) {
		bi_cipher_free(V->v[i]->cipher);
		free(V->v[i]->luks);
		free(V->v[i]->pnote);
		free(V->v[i]);
	}
	if (V->seen)
		OPENSSL_cleanse(V->seen, V->nseen * sizeof(*V->seen));
	free(V->seen);
	V->seen = NULL;
	V->nseen = 0;
	for (size_t i = 0; i < V->npv; i++)
		free(V->pv[i].text);
	for (size_t i = 0; i < V->nvg; i++) {
		bi_lvm_vg_free(&V->vg[i].vg);
		free(V->vg[i].pv);
	}
	free(V->v);
	free(V->pv);
	free(V->vg);
	free(V->btrfs);
	free(V->rows);
	V->v = NULL;
	V->pv = NULL;
	V->vg = NULL;
	V->btrfs = NULL;
	V->rows = NULL;
	V->nv = V->npv = V->nvg = V->nbtrfs = V->nrows = V->rows_cap = 0;
	V->layered = V->scanned = V->rows_full = false;
	V->mda_read = 0;
	V->mda_skipped = 0;
	V->locked[0] = V->broken[0] = '\0';
}

void bi_vols_free(struct btrfsimg_fs *fs)
{
	struct bi_vols *V = fs->vols;
	if (!V)
		return;
	scan_free(V);
	wipe_free(V->pass, V->plen);
	wipe_free(V->vkey, V->vklen);
	free(V->select);
	free(V);
	fs->vols = NULL;
}

static int set_secret(btrfsimg_fs *fs, uint8_t **dst, size_t *dlen, const void *p, size_t len)
{
	if (!fs || (!p && len) || len > PASS_MAX || fs->opened)
		return -EINVAL;
	struct bi_vols *V = vols_get(fs);
	uint8_t *c = malloc(len ? len : 1);
	if (!V || !c) {
		free(c);
		return bi_err(fs, -ENOMEM, "out of memory keeping a key");
	}
	if (len)
		memcpy(c, p, len);
	wipe_free(*dst, *dlen);
	*dst = c;
	*dlen = len;
	return 0;
}

int btrfsimg_set_passphrase(btrfsimg_fs *fs, const void *pass, size_t len)
{
	if (!fs || (!pass && len) || len > PASS_MAX || fs->opened || !vols_get(fs))
		return -EINVAL;
	int rc = set_secret(fs, &fs->vols->pass, &fs->vols->plen, pass, len);
	if (rc == 0)
		fs->vols->have_pass = true;
	return rc;
}

int btrfsimg_set_volume_key(btrfsimg_fs *fs, const void *key, size_t len)
{
	if (!fs || !key || len == 0 || len > BI_LUKS_KEY_MAX || fs->opened || !vols_get(fs))
		return -EINVAL;
	return set_secret(fs, &fs->vols->vkey, &fs->vols->vklen, key, len);
}

int btrfsimg_set_passphrase_fn(btrfsimg_fs *fs, btrfsimg_passphrase_fn fn, void *ctx)
{
	if (!fs || fs->opened || !vols_get(fs))
		return -EINVAL;
	fs->vols->ask = fn;
	fs->vols->ask_ctx = ctx;
	return 0;
}

int btrfsimg_set_kdf_limit(btrfsimg_fs *fs, uint32_t ms)
{
	if (!fs || fs->opened || ms > BTRFSIMG_KDF_LIMIT_MAX_MS || !vols_get(fs))
		return -EINVAL;
	fs->vols->kdf_ms = ms;
	return 0;
}

int btrfsimg_select_volume(btrfsimg_fs *fs, const char *name)
{
	if (!fs || fs->opened || !vols_get(fs) || (name && !strchr(name, '/')))
		return -EINVAL;
	char *c = name ? strdup(name) : NULL;
	if (name && !c)
		return -ENOMEM;
	free(fs->vols->select);
	fs->vols->select = c;
	return 0;
}

/* ---------------------------------------------------------------- */
/* Reading through the stack */

static int vol_read(struct btrfsimg_fs *fs, struct bi_vol *v, uint64_t off, void *buf, size_t len);

struct vrd {
	struct btrfsimg_fs *fs;
	struct bi_vol *v;
};

static int vrd_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	struct vrd *r = ctx;
	return vol_read(r->fs, r->v, off, buf, len);
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
	int rc = vol_read(fs, v->lower, v->luks->payload_off + start, tmp, end - start);
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
	return vol_read(c->fs, p, off, buf, len);
}

static int vol_read(struct btrfsimg_fs *fs, struct bi_vol *v, uint64_t off, void *buf, size_t len)
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

static int vol_dev_read(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t off, void *buf,
			size_t len)
{
	if (!bi_fits64(d->size, off, len))
		return bi_err(fs, -EIO,
			      "device '%s': read of %zu bytes at offset %" PRIu64
			      " past end of device (size %" PRIu64 ") (%s)",
			      d->name, len, off, d->size, d->vol->name);
	return vol_read(fs, d->vol, off, buf, len);
}

/* ---------------------------------------------------------------- */
/* Where a device byte lies in its image */

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
		if (bi_lvm_read(&g->vg, v->lv, lv_where_read, &w, off, &byte, 1, err,
				sizeof(err)) < 0 || w.pv < 0 || !g->pv[w.pv]) {
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

/* ---------------------------------------------------------------- */
/* Layer rows */

/* One more row, or -1 (out of memory, or the listing full). The last
 * row ROWS_MAX leaves says that rows were left out; scan() reports it. */
static int add_row(struct bi_vols *V, int parent, const char *kind, const char *name, uint64_t off,
		   uint64_t size)
{
	if (V->rows_full)
		return -1;
	if (V->nrows == V->rows_cap) {
		size_t cap = V->rows_cap ? 2 * V->rows_cap : 64;
		cap = cap > ROWS_MAX ? ROWS_MAX : cap;
		struct btrfsimg_layer *r = realloc(V->rows, cap * sizeof(*r));
		if (!r)
			return -1;
		V->rows = r;
		V->rows_cap = cap;
	}
	if (V->nrows == ROWS_MAX - 1) {
		V->rows_full = true;
		parent = -1;
		kind = "stopped";
		name = "";
		off = size = 0;
	}
	struct btrfsimg_layer *r = &V->rows[V->nrows];
	memset(r, 0, sizeof(*r));
	r->parent = parent;
	r->depth = parent >= 0 ? V->rows[parent].depth + 1 : 0;
	snprintf(r->kind, sizeof(r->kind), "%s", kind);
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->offset = off;
	r->size = size;
	if (V->rows_full) {
		snprintf(r->detail, sizeof(r->detail),
			 "listing stopped: more than %d layers; the rest are not listed",
			 ROWS_MAX - 1);
		V->nrows++;
		return -1;
	}
	return (int)V->nrows++;
}

static struct btrfsimg_layer *row(struct bi_vols *V, int i)
{
	if (i < 0 || (size_t)i >= V->nrows) { /* a row that could not be added */
		memset(&V->sink, 0, sizeof(V->sink));
		return &V->sink;
	}
	return &V->rows[i];
}

static void row_note(struct bi_vols *V, int i, const char *fmt, const char *s)
{
	struct btrfsimg_layer *r = row(V, i);
	size_t used = strlen(r->detail);
	snprintf(r->detail + used, sizeof(r->detail) - used, fmt, s);
}

/* ---------------------------------------------------------------- */
/* Scanning */

static struct bi_vol *vol_new(struct bi_vols *V, enum vkind k, const char *name)
{
	struct bi_vol **a = realloc(V->v, (V->nv + 1) * sizeof(*a));
	if (!a)
		return NULL;
	V->v = a;
	struct bi_vol *v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	V->v[V->nv++] = v;
	v->kind = k;
	v->row = -1;
	snprintf(v->name, sizeof(v->name), "%s", name);
	return v;
}

static int probe_vol(struct btrfsimg_fs *fs, struct bi_vol *v, int parent);

static int found_btrfs(struct btrfsimg_fs *fs, struct bi_vol *v, int parent)
{
	struct bi_vols *V = fs->vols;
	uint8_t sb[0x12b + 256];
	char uuid[37] = "", label[257] = "";
	if (vol_read(fs, v, SB_PRIMARY_OFFSET, sb, sizeof(sb)) == 0) {
		bi_uuid_str(sb + 0x20, uuid);
		memcpy(label, sb + 0x12b, 256);
		label[256] = '\0';
	}
	int r = add_row(V, parent, "btrfs", label, 0, v->size);
	snprintf(row(V, r)->uuid, sizeof(row(V, r)->uuid), "%s", uuid);
	struct bi_vol **b = realloc(V->btrfs, (V->nbtrfs + 1) * sizeof(*b));
	if (!b)
		return bi_err(fs, -ENOMEM, "out of memory listing volumes");
	V->btrfs = b;
	V->btrfs[V->nbtrfs++] = v;
	v->row = r >= 0 ? r : v->row;
	return 0;
}

/* The passphrase: given, or asked for once through the callback. */
static bool have_pass(struct btrfsimg_fs *fs, const char *what)
{
	struct bi_vols *V = fs->vols;
	if (V->have_pass || !V->ask)
		return V->have_pass;
	uint8_t *buf = malloc(PASS_MAX);
	if (!buf)
		return false;
	int n = V->ask(V->ask_ctx, what, buf, PASS_MAX);
	if (n >= 0 && (size_t)n <= PASS_MAX) {
		V->pass = buf;
		V->plen = (size_t)n;
		V->have_pass = true;
		return true;
	}
	wipe_free(buf, PASS_MAX);
	V->ask = NULL; /* asked once; the user declined */
	return false;
}

/* The header at the start of @v, if an image window already probed: the
 * same bytes, so the same outcome. */
static struct luks_seen *seen_find(struct bi_vols *V, const struct bi_vol *v)
{
	for (size_t i = 0; v->kind == V_IMAGE && i < V->nseen; i++)
		if (V->seen[i].img == v->img && V->seen[i].base == v->base)
			return &V->seen[i];
	return NULL;
}

static void seen_add(struct bi_vols *V, const struct bi_vol *v, int rc, int slot, const uint8_t *vk,
		     size_t vklen, const char *err)
{
	struct luks_seen *a;
	if (v->kind != V_IMAGE || V->nseen >= ROWS_MAX ||
	    !(a = realloc(V->seen, (V->nseen + 1) * sizeof(*a))))
		return; /* not remembered: probed again, within the KDF budget */
	V->seen = a;
	a = &V->seen[V->nseen++];
	*a = (struct luks_seen){
		.img = v->img, .base = v->base, .partition = v->partition, .rc = rc, .slot = slot
	};
	if (rc > 0)
		memcpy(a->vk, vk, vklen);
	snprintf(a->err, sizeof(a->err), "%s", err);
}

/* A LUKS header seen before at the same place (another partition entry
 * pointing there): its outcome, without deriving a key again. */
static int luks_key_seen(struct btrfsimg_fs *fs, const struct luks_seen *h, const char *what, int r,
			 uint8_t *vk)
{
	struct bi_vols *V = fs->vols;
	char same[80] = "";
	if (h->partition)
		snprintf(same, sizeof(same), " (the header of partition %d: not derived again)",
			 h->partition);
	char note[560];
	if (h->rc > 0 && h->slot >= 0)
		snprintf(note, sizeof(note), "; opened with keyslot %d%s", h->slot, same);
	else if (h->rc > 0)
		snprintf(note, sizeof(note), "; opened with the volume key%s", same);
	else
		snprintf(note, sizeof(note), "; locked%s: %s", same, h->err);
	row_note(V, r, "%s", note);
	if (h->rc > 0) {
		memcpy(vk, h->vk, sizeof(h->vk));
		return 1;
	}
	if (!V->locked[0])
		snprintf(V->locked, sizeof(V->locked), "%.120s (%.170s)", what, h->err);
	return 0;
}

/* Get the volume key of @l: 1 unlocked (@vk), 0 left locked, < 0 fatal. */
static int luks_key(struct btrfsimg_fs *fs, struct bi_vol *v, const struct bi_luks *l, int r,
		    uint8_t *vk)
{
	struct bi_vols *V = fs->vols;
	char err[400] = "", what[260];
	struct vrd c = { fs, v };
	int rc;
	snprintf(what, sizeof(what), "%s (LUKS%d %s)", v->name, l->version, l->uuid);
	struct luks_seen *h = (V->vkey || V->have_pass) ? seen_find(V, v) : NULL;
	if (h)
		return luks_key_seen(fs, h, what, r, vk);
	if (V->vkey) {
		rc = bi_luks_check_key(l, V->vkey, V->vklen, &V->kdf, err, sizeof(err));
		if (rc == 0)
			memcpy(vk, V->vkey, V->vklen);
	} else if (have_pass(fs, what)) {
		rc = bi_luks_unlock(l, vrd_read, &c, V->pass, V->plen, &V->kdf, vk, err,
				    sizeof(err));
		if (rc >= 0) {
			char n[16];
			snprintf(n, sizeof(n), "%d", rc);
			row_note(V, r, "; opened with keyslot %s", n);
			bi_info(fs, "%s: opened with keyslot %d", what, rc);
		}
	} else {
		if (!V->locked[0])
			snprintf(V->locked, sizeof(V->locked), "%s", what);
		row_note(V, r, "%s", "; locked (no passphrase or volume key given)");
		return 0;
	}
	if (rc < 0 && !err[0]) /* a read failed: its message is on the handle */
		snprintf(err, sizeof(err), "%.390s", fs->err);
	if (!V->strict || rc >= 0)
		seen_add(V, v, rc >= 0, V->vkey ? -1 : rc, vk, l->key_bytes, err);
	if (rc >= 0)
		return 1;
	if (V->strict)
		return bi_err(fs, rc == -E2BIG ? -EOPNOTSUPP : rc, "%s: %s", what, err);
	row_note(V, r, "; locked: %s", err);
	if (!V->locked[0])
		snprintf(V->locked, sizeof(V->locked), "%s (%s)", what, err);
	return 0;
}

/* The LUKS fields of row @r; detail keeps what happened (a header note,
 * then opened or locked: row_note appends with "; "). */
static void luks_detail(struct bi_vols *V, int r, const struct bi_luks *l)
{
	struct btrfsimg_layer *w = row(V, r);
	snprintf(w->uuid, sizeof(w->uuid), "%s", l->uuid);
	snprintf(w->cipher, sizeof(w->cipher), "%.15s-%.31s", l->cipher, l->mode);
	w->key_bits = (unsigned)(l->key_bytes * 8);
	w->sector_size = l->sector_size;
	w->payload = l->payload_off;
	for (int i = 0; i < l->nslots; i++) {
		char k[96];
		bi_luks_slot_kdf(&l->slots[i], k, sizeof(k));
		size_t used = strlen(w->kdf);
		snprintf(w->kdf + used, sizeof(w->kdf) - used, "%s%d: %s", used ? "; " : "",
			 l->slots[i].id, k);
	}
	snprintf(w->detail, sizeof(w->detail), "LUKS%d%s%s", l->version, l->note[0] ? "; " : "",
		 l->note);
}

static int probe_luks(struct btrfsimg_fs *fs, struct bi_vol *v, int parent)
{
	struct bi_vols *V = fs->vols;
	struct vrd c = { fs, v };
	char err[400] = "";
	struct bi_luks *l = calloc(1, sizeof(*l));
	if (!l)
		return bi_err(fs, -ENOMEM, "out of memory reading a LUKS header");
	int rc = bi_luks_parse(vrd_read, &c, v->size, l, err, sizeof(err));
	if (rc < 0 && !err[0]) /* the read failed: its message is on the handle */
		snprintf(err, sizeof(err), "%.250s", fs->err);
	V->layered = true;
	if (rc <= 0) {
		free(l);
		if (rc == 0)
			return 0;
		int r = add_row(V, parent, "luks", "", 0, v->size);
		row_note(V, r, "unreadable: %s", err);
		bi_damage(fs, "%s: %s", v->name, err);
		if (!V->broken[0])
			snprintf(V->broken, sizeof(V->broken), "%.120s: %.170s", v->name, err);
		return 0;
	}
	if (l->note[0])
		bi_damage(fs, "%s: %s", v->name, l->note);
	int r = add_row(V, parent, l->version == 1 ? "luks1" : "luks2", l->label, 0, v->size);
	luks_detail(V, r, l);
	uint8_t vk[BI_LUKS_KEY_MAX];
	rc = luks_key(fs, v, l, r, vk);
	char why[200];
	struct bi_vol *in = NULL;
	if (rc > 0) {
		char name[200];
		snprintf(name, sizeof(name), "%.180s LUKS%d", v->name, l->version);
		in = vol_new(V, V_LUKS, name);
		rc = in ? bi_cipher_new(l->cipher, l->mode, vk, l->key_bytes, &in->cipher, why,
					sizeof(why))
			: -ENOMEM;
		if (rc == -EOPNOTSUPP)
			rc = bi_err(fs, rc, "%s: %s", v->name, why);
		rc = rc == 0 ? 1 : rc;
	}
	OPENSSL_cleanse(vk, sizeof(vk));
	if (rc <= 0 || !in) {
		free(l);
		return rc < 0 ? (fs->err[0] ? rc : bi_err(fs, rc, "%s: LUKS setup failed", v->name))
			      : 0;
	}
	uint64_t room = v->size - l->payload_off;
	uint64_t size = l->payload_size ? l->payload_size : room;
	in->size = size / l->sector_size * l->sector_size;
	in->luks = l;
	in->lower = v;
	in->partition = v->partition;
	in->img_idx = v->img_idx;
	snprintf(in->lvname, sizeof(in->lvname), "%s", v->lvname);
	in->row = r;
	return probe_vol(fs, in, r);
}

static int probe_pv(struct btrfsimg_fs *fs, struct bi_vol *v, int parent,
		    const struct bi_lvm_label *lb)
{
	struct bi_vols *V = fs->vols;
	struct vrd c = { fs, v };
	struct pv_ent e = { .v = v, .lb = *lb };
	char err[300] = "";
	V->layered = true;
	for (int i = 0; i < lb->nmda; i++) {
		char *t = NULL;
		struct bi_lvm_vg g;
		/* Checked before each area, charged what it cost: its text (a
		 * few KiB on a real PV), or the whole ring searched when the
		 * text is damaged. One PV overshoots by at most two areas. */
		if (V->mda_read >= MDA_BUDGET) {
			snprintf(err, sizeof(err),
				 "not read: the scan read %" PRIu64 " MiB of LVM metadata areas "
				 "already (at most %llu MiB)",
				 V->mda_read >> 20, MDA_BUDGET >> 20);
			V->mda_skipped += !e.text && i == lb->nmda - 1;
			continue;
		}
		uint64_t area = lb->mda_size[i] < BI_LVM_TEXT_MAX ? lb->mda_size[i]
								  : BI_LVM_TEXT_MAX;
		int rc = bi_lvm_mda_text(vrd_read, &c, v->size, lb, i, &t, err, sizeof(err));
		V->mda_read += t ? strlen(t) : area; /* a text read, then its crc failed */
		if (rc == -EUCLEAN) {
			V->mda_read += area;
			if (bi_lvm_mda_scan(vrd_read, &c, v->size, lb, i, &t) == 0) {
				bi_damage(fs, "%s: %s; using the newest older copy in its ring buffer",
					  v->name, err);
				rc = 0;
			}
		}
		if (rc == 0)
			rc = bi_lvm_parse(t, strlen(t), &g, err, sizeof(err));
		if (rc < 0) {
			free(t);
			bi_damage(fs, "%s: LVM metadata area %d: %s", v->name, i, err);
			continue;
		}
		if (!e.text || g.seqno > e.seqno) {
			free(e.text);
			e.text = t;
			e.seqno = g.seqno;
			snprintf(e.vgid, sizeof(e.vgid), "%s", g.id);
			snprintf(e.vgname, sizeof(e.vgname), "%s", g.name);
		} else
			free(t);
		bi_lvm_vg_free(&g);
	}
	int r = add_row(V, parent, "lvm-pv", e.text ? e.vgname : "", 0, v->size);
	const char *u = lb->pv_id; /* LVM prints 6-4-4-4-4-4-6 */
	snprintf(row(V, r)->uuid, sizeof(row(V, r)->uuid), "%.6s-%.4s-%.4s-%.4s-%.4s-%.4s-%.6s", u,
		 u + 6, u + 10, u + 14, u + 18, u + 22, u + 26);
	if (!e.text) {
		row_note(V, r, "no valid metadata: %s", err);
		return 0;
	}
	char s[200];
	snprintf(s, sizeof(s), "VG %s, metadata seqno %" PRIu64, e.vgname, e.seqno);
	row_note(V, r, "%s", s);
	e.row = r;
	struct pv_ent *a = realloc(V->pv, (V->npv + 1) * sizeof(*a));
	if (!a) {
		free(e.text);
		return bi_err(fs, -ENOMEM, "out of memory listing PVs");
	}
	V->pv = a;
	V->pv[V->npv++] = e;
	return 0;
}

static int probe_vol(struct btrfsimg_fs *fs, struct bi_vol *v, int parent)
{
	uint8_t m[8];
	struct vrd c = { fs, v };
	if (v->size >= SB_PRIMARY_OFFSET + SB_SIZE && vol_read(fs, v, MAGIC_AT, m, 8) == 0 &&
	    bi_le64(m) == SB_MAGIC)
		return found_btrfs(fs, v, parent);
	uint8_t h[8];
	if (v->size >= 4096 && vol_read(fs, v, 0, h, 8) == 0 && bi_luks_magic(h))
		return probe_luks(fs, v, parent);
	struct bi_lvm_label lb;
	char err[200] = "";
	int rc = bi_lvm_label(vrd_read, &c, v->size, &lb, err, sizeof(err));
	if (rc > 0)
		return probe_pv(fs, v, parent, &lb);
	if (rc < 0) /* a damaged label (@err) or the volume unreadable there */
		bi_damage(fs, "%s: %s", v->name,
			  rc == -EUCLEAN || rc == -EOPNOTSUPP ? err : fs->err);
	return 0;
}

static int probe_image(struct btrfsimg_fs *fs, int k)
{
	struct bi_vols *V = fs->vols;
	struct bi_dev *d = &fs->devs[k];
	struct bi_vol *v = vol_new(V, V_IMAGE, d->name);
	if (!v)
		return bi_err(fs, -ENOMEM, "out of memory listing volumes");
	v->img = d;
	v->img_idx = k;
	v->size = d->raw_size;
	int r = add_row(V, -1, "image", d->name, 0, d->raw_size);
	v->row = r;
	size_t before = V->nrows;
	int rc = probe_vol(fs, v, r);
	if (rc < 0 || V->nrows != before)
		return rc;
	/* nothing at the start: a partition table? */
	struct btrfsimg_partition *p = NULL;
	char note[512] = "";
	int n = bi_part_parse(vrd_read, &(struct vrd){ fs, v }, v->size, NULL, 0, note,
			      sizeof(note));
	if (n > 0)
		p = calloc((size_t)n, sizeof(*p));
	if (n > 0 && p)
		n = bi_part_parse(vrd_read, &(struct vrd){ fs, v }, v->size, p, (size_t)n, note,
				  sizeof(note));
	if (n > 0 && note[0]) { /* said by scan(): once, whichever layer lies inside */
		v->pnote = strdup(note);
		row_note(V, r, "partition table: %s", note);
	}
	for (int i = 0; p && i < n && rc == 0; i++) {
		char name[200], num[16];
		snprintf(num, sizeof(num), "%d", p[i].number);
		int pr = add_row(V, r, "partition", num, p[i].offset, p[i].size);
		row_note(V, pr, "%s", p[i].gpt ? "gpt" : "mbr");
		if (p[i].offset >= d->raw_size ||
		    (V->strict && fs->opts.partition && p[i].number != (int)fs->opts.partition))
			continue; /* opening partition N: the others are not unlocked */
		snprintf(name, sizeof(name), "image '%s' partition %d", d->name, p[i].number);
		struct bi_vol *pv = vol_new(V, V_IMAGE, name);
		if (!pv) {
			rc = -ENOMEM;
			break;
		}
		pv->img = d;
		pv->img_idx = k;
		pv->base = p[i].offset;
		pv->size = d->raw_size - p[i].offset < p[i].size ? d->raw_size - p[i].offset
								 : p[i].size;
		pv->partition = p[i].number;
		pv->row = pr;
		rc = probe_vol(fs, pv, pr);
	}
	free(p);
	return rc;
}

/* ---------------------------------------------------------------- */
/* Volume groups */

static int lv_vol(struct btrfsimg_fs *fs, int g, int lv, int parent)
{
	struct bi_vols *V = fs->vols;
	struct bi_lvm_vg *vg = &V->vg[g].vg;
	const struct bi_lvm_lv *l = &vg->lvs[lv];
	char name[260], why[200] = "";
	snprintf(name, sizeof(name), "%s/%s", vg->name, l->name);
	int r = add_row(V, parent, "lvm-lv", name, 0, bi_lvm_lv_size(vg, lv));
	snprintf(row(V, r)->uuid, sizeof(row(V, r)->uuid), "%s", l->id);
	const struct bi_lvm_seg *s0 = l->nseg ? &l->segs[0] : NULL;
	char d[160];
	snprintf(d, sizeof(d), "%s, %d segment%s", s0 ? s0->type : "empty", l->nseg,
		 l->nseg == 1 ? "" : "s");
	if (s0 && s0->kind == BI_LVM_STRIPED && s0->narea == 1 && !strcmp(s0->type, "striped"))
		snprintf(d, sizeof(d), "linear, %d segment%s", l->nseg, l->nseg == 1 ? "" : "s");
	else if (s0 && s0->kind == BI_LVM_STRIPED)
		snprintf(d, sizeof(d), "striped, %d stripes of %" PRIu64 " KiB, %d segment%s",
			 s0->narea, s0->stripe_bytes / 1024, l->nseg, l->nseg == 1 ? "" : "s");
	else if (s0 && s0->kind == BI_LVM_MIRROR)
		snprintf(d, sizeof(d), "%s, %d legs", s0->type, s0->narea);
	row_note(V, r, "%s", d);
	if (!bi_lvm_lv_complete(vg, lv, why, sizeof(why))) {
		row_note(V, r, "; unreadable: %s", why);
		bi_info(fs, "LV %s: %s", name, why);
		return 0;
	}
	char vname[200];
	snprintf(vname, sizeof(vname), "LV %.190s", name);
	struct bi_vol *v = vol_new(V, V_LV, vname);
	if (!v)
		return bi_err(fs, -ENOMEM, "out of memory listing volumes");
	v->size = bi_lvm_lv_size(vg, lv);
	v->vg = g;
	v->lv = lv;
	v->row = r;
	snprintf(v->lvname, sizeof(v->lvname), "%s", name);
	v->img_idx = INT32_MAX;
	for (int i = 0; i < vg->npv; i++)
		if (V->vg[g].pv[i] && V->vg[g].pv[i]->img_idx < v->img_idx) {
			v->img_idx = V->vg[g].pv[i]->img_idx;
			v->partition = V->vg[g].pv[i]->partition;
		}
	return probe_vol(fs, v, r);
}

static int vg_add(struct bi_vols *V, struct pv_ent *e, char *err, size_t errlen)
{
	for (size_t i = 0; i < V->nvg; i++)
		if (strcmp(V->vg[i].vg.id, e->vgid) == 0) {
			if (e->seqno <= V->vg[i].vg.seqno)
				return 0;
			bi_lvm_vg_free(&V->vg[i].vg);
			return bi_lvm_parse(e->text, strlen(e->text), &V->vg[i].vg, err, errlen);
		}
	struct vg_ent *a = realloc(V->vg, (V->nvg + 1) * sizeof(*a));
	if (!a)
		return -ENOMEM;
	V->vg = a;
	memset(&V->vg[V->nvg], 0, sizeof(*a));
	int rc = bi_lvm_parse(e->text, strlen(e->text), &V->vg[V->nvg].vg, err, errlen);
	if (rc == 0)
		V->nvg++;
	return rc;
}

static int vg_link(struct btrfsimg_fs *fs, size_t g)
{
	struct bi_vols *V = fs->vols;
	struct vg_ent *e = &V->vg[g];
	e->pv = calloc((size_t)e->vg.npv + 1, sizeof(*e->pv));
	if (!e->pv)
		return bi_err(fs, -ENOMEM, "out of memory linking PVs");
	int missing = 0, first = -1;
	for (int i = 0; i < e->vg.npv; i++) {
		for (size_t k = 0; k < V->npv && !e->pv[i]; k++)
			if (strcmp(V->pv[k].vgid, e->vg.id) == 0 &&
			    bi_lvm_same_id(V->pv[k].lb.pv_id, e->vg.pvs[i].id)) {
				e->pv[i] = V->pv[k].v;
				e->vg.pvs[i].dev = (int)k;
				first = first < 0 ? V->pv[k].row : first;
			}
		if (!e->pv[i]) {
			missing++;
			bi_damage(fs, "LVM VG %s: PV %s (%s) is missing", e->vg.name,
				  e->vg.pvs[i].name, e->vg.pvs[i].id);
		}
	}
	e->row = first;
	if (e->vg.npv > 1 || first < 0) {
		e->row = add_row(V, -1, "lvm-vg", e->vg.name, 0, (uint64_t)0);
		char d[200];
		snprintf(d, sizeof(d),
			 "%d PVs, %d missing, %" PRIu64 " KiB extents, seqno %" PRIu64, e->vg.npv,
			 missing, e->vg.extent_bytes / 1024, e->vg.seqno);
		row_note(V, e->row, "%s", d);
		snprintf(row(V, e->row)->uuid, sizeof(row(V, e->row)->uuid), "%s", e->vg.id);
	}
	return 0;
}

static int assemble_vgs(struct btrfsimg_fs *fs)
{
	struct bi_vols *V = fs->vols;
	char err[300];
	for (size_t i = 0; i < V->npv; i++) {
		err[0] = 0;
		int rc = vg_add(V, &V->pv[i], err, sizeof(err));
		if (rc < 0 && !err[0])
			snprintf(err, sizeof(err), "%.250s", fs->err);
		if (rc == -ENOMEM)
			return bi_err(fs, rc, "out of memory reading LVM metadata");
		if (rc < 0)
			bi_damage(fs, "%s: LVM metadata: %s", V->pv[i].v->name, err);
	}
	/* LVs are probed after every VG is linked: LV nodes refer to V->vg */
	for (size_t g = 0; g < V->nvg; g++) {
		int rc = vg_link(fs, g);
		if (rc < 0)
			return rc;
	}
	for (size_t g = 0; g < V->nvg; g++)
		for (int lv = 0; lv < V->vg[g].vg.nlv; lv++) {
			if (!V->vg[g].vg.lvs[lv].visible)
				continue;
			int rc = lv_vol(fs, (int)g, lv, V->vg[g].row);
			if (rc < 0)
				return rc;
		}
	return 0;
}

static int scan(struct btrfsimg_fs *fs, bool strict)
{
	struct bi_vols *V = vols_get(fs);
	if (!V)
		return bi_err(fs, -ENOMEM, "out of memory scanning volumes");
	scan_free(V);
	bi_kdf_budget_init(&V->kdf, V->kdf_ms);
	V->strict = strict;
	V->scanned = true;
	for (size_t k = 0; k < fs->ndevs; k++) {
		int rc = probe_image(fs, (int)k);
		if (rc < 0)
			return rc;
	}
	int rc = assemble_vgs(fs);
	/* Opening an image without LUKS or LVM locates btrfs with
	 * bi_dev_locate(), which says the partition table's notes itself. */
	for (size_t i = 0; rc == 0 && (!strict || V->layered) && i < V->nv; i++)
		if (V->v[i]->pnote)
			bi_damage(fs, "image '%s': %s", V->v[i]->img->name, V->v[i]->pnote);
	if (V->rows_full)
		bi_damage(fs, "volume layers: listing stopped after %d layers; the rest of the "
			      "images' layers are not listed", ROWS_MAX - 1);
	if (V->mda_skipped) {
		int r = add_row(V, -1, "stopped", "", 0, 0);
		char d[300];
		snprintf(d, sizeof(d),
			 "probing stopped: the LVM metadata of %d PVs not read, past %llu MiB "
			 "of metadata areas read in this scan (overlapping partitions?)",
			 V->mda_skipped, MDA_BUDGET >> 20);
		row_note(V, r, "%s", d);
		bi_damage(fs, "volume layers: %s", d);
	}
	return rc;
}

int btrfsimg_probe(btrfsimg_fs *fs)
{
	if (!fs || fs->opened)
		return -EINVAL;
	fs->err[0] = '\0';
	return scan(fs, false);
}

/* ---------------------------------------------------------------- */
/* Choosing the btrfs volume of every device */

static uint64_t roots(struct bi_vols *V, const struct bi_vol *v, int depth)
{
	if (depth > 16)
		return 0;
	if (v->kind == V_IMAGE)
		return v->img_idx < 64 ? 1ull << v->img_idx : 0;
	if (v->kind == V_LUKS)
		return roots(V, v->lower, depth + 1);
	uint64_t m = 0;
	const struct vg_ent *g = &V->vg[v->vg];
	for (int i = 0; i < g->vg.npv; i++)
		if (g->pv[i])
			m |= roots(V, g->pv[i], depth + 1);
	return m;
}

static bool wanted(struct btrfsimg_fs *fs, const struct bi_vol *v)
{
	struct bi_vols *V = fs->vols;
	if (V->select)
		return strcmp(v->lvname, V->select) == 0;
	if (fs->opts.partition)
		return (unsigned)v->partition == fs->opts.partition;
	return true;
}

static void mark_in_use(struct bi_vols *V, int r)
{
	for (int i = 0; r >= 0 && (size_t)r < V->nrows && i < 64; i++) {
		V->rows[r].in_use = true;
		r = V->rows[r].parent;
	}
}

static void use_vol(struct btrfsimg_fs *fs, struct bi_dev *d, struct bi_vol *v)
{
	struct bi_vols *V = fs->vols;
	/* base: where the stack starts in this image (its partition, or 0),
	 * down through LUKS and the LV's first PV on this image */
	const struct bi_vol *w = v;
	for (int hops = 0; w && w->kind != V_IMAGE && hops < 16; hops++) {
		const struct vg_ent *g = w->kind == V_LV ? &V->vg[w->vg] : NULL;
		const struct bi_vol *next = w->kind == V_LUKS ? w->lower : NULL;
		for (int i = 0; g && i < g->vg.npv; i++)
			if (g->pv[i] && (!next || g->pv[i]->img == d))
				next = g->pv[i];
		w = next;
	}
	d->partition = v->partition;
	d->size = v->size;
	d->base = w && w->kind == V_IMAGE && w->img == d ? w->base : 0;
	if (v->kind != V_IMAGE) {
		d->vol = v;
		d->vread = vol_dev_read;
	}
	mark_in_use(V, v->row);
	for (const struct bi_vol *u = v; u; u = u->kind == V_LUKS ? u->lower : NULL)
		if (u->kind == V_LV) /* and the PVs of a VG printed apart */
			for (size_t k = 0; k < V->npv; k++)
				if (strcmp(V->pv[k].vgid, V->vg[u->vg].vg.id) == 0)
					mark_in_use(V, V->pv[k].row);
	bi_info(fs, "image '%s': using %s (%" PRIu64 " bytes)", d->name, v->name, v->size);
}

static int none_found(struct btrfsimg_fs *fs, const struct bi_dev *d)
{
	struct bi_vols *V = fs->vols;
	if (V->broken[0] && !V->locked[0])
		return bi_err(fs, -EUCLEAN, "no btrfs found in image '%s': the LUKS header of %s",
			      d->name, V->broken);
	if (V->locked[0])
		return bi_err(
			fs, -EKEYREJECTED,
			"no btrfs found in image '%s': %s is encrypted and stays locked; give "
			"--passphrase-file FILE or --volume-key-file FILE",
			d->name, V->locked);
	if (V->select)
		return bi_err(fs, -ENOENT, "image '%s': no logical volume '%s' holding btrfs",
			      d->name, V->select);
	if (fs->opts.partition)
		return bi_err(fs, -ENOENT, "image '%s': partition %u holds no btrfs (in any layer)",
			      d->name, fs->opts.partition);
	return bi_err(fs, -EUCLEAN,
		      "no btrfs superblock found in image '%s' nor in any partition, LUKS volume "
		      "or logical volume of it",
		      d->name);
}

static int choose(struct btrfsimg_fs *fs)
{
	struct bi_vols *V = fs->vols;
	uint64_t used = 0;
	int rc = 0;
	for (size_t k = 0; k < fs->ndevs && rc == 0; k++) {
		struct bi_vol *pick = NULL;
		int hits = 0;
		char list[512] = "";
		size_t n = 0;
		for (size_t i = 0; i < V->nbtrfs; i++) {
			struct bi_vol *v = V->btrfs[i];
			uint64_t m = roots(V, v, 0);
			if (!m || (size_t)__builtin_ctzll(m) != k || !wanted(fs, v))
				continue;
			hits++;
			pick = v;
			if (n < sizeof(list))
				n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s",
						      n ? "; " : "", v->name);
		}
		if (hits > 1)
			rc = bi_err(fs, -EINVAL,
				    "image '%s' holds %d btrfs volumes (%s): choose one with "
				    "--partition N or --partition VG/LV",
				    fs->devs[k].name, hits, list);
		else if (hits == 1) {
			use_vol(fs, &fs->devs[k], pick);
			used |= roots(V, pick, 0);
		}
	}
	for (size_t k = 0; k < fs->ndevs && rc == 0; k++) {
		struct bi_dev *d = &fs->devs[k];
		if (d->vol || d->size != d->raw_size || d->base || d->partition)
			continue; /* given a volume above */
		bool self = false;
		for (size_t i = 0; i < V->nbtrfs; i++)
			self |= V->btrfs[i]->kind == V_IMAGE && V->btrfs[i]->img == d &&
				V->btrfs[i]->base == 0 && wanted(fs, V->btrfs[i]);
		if (self)
			continue;
		if (k < 64 && (used & (1ull << k))) {
			d->absorbed = true;
			bi_info(fs,
				"image '%s' holds a PV of a logical volume read as another device",
				d->name);
			continue;
		}
		rc = none_found(fs, d);
	}
	return rc;
}

int bi_vol_assemble(struct btrfsimg_fs *fs)
{
	if (fs->ndevs == 0)
		return bi_err(fs, -EINVAL, "no device image given");
	bool plain = (fs->opts.flags & BTRFSIMG_OPEN_OFFSET) != 0;
	if (!plain) {
		int rc = scan(fs, true);
		if (rc < 0)
			return rc;
		plain = !fs->vols->layered;
		fs->err[0] = '\0';
	}
	if (plain) {
		if (fs->vols && fs->vols->select)
			return bi_err(fs, -ENOENT, "no LVM logical volume '%s': no image holds LVM",
				      fs->vols->select);
		for (size_t i = 0; i < fs->ndevs; i++) {
			int rc = bi_dev_locate(fs, &fs->devs[i]);
			if (rc < 0)
				return rc;
		}
		if (fs->vols) /* the rows: what bi_dev_locate chose */
			for (size_t i = 0; i < fs->vols->nbtrfs; i++) {
				struct bi_vol *v = fs->vols->btrfs[i];
				if (v->kind == V_IMAGE && v->img->base == v->base)
					mark_in_use(fs->vols, v->row);
			}
		return 0;
	}
	return choose(fs);
}

/* ---------------------------------------------------------------- */
/* Listing */

/* Children in row order: kid[i] the first child of row i, sib[i] the next
 * one after it (-1: none); roots hang off kid[nrows]. Built in one pass so
 * a listing of many rows costs rows, not rows squared. */
struct tree {
	const struct bi_vols *V;
	int *kid, *sib;
	struct btrfsimg_layer *out;
	size_t max, n;
};

static void dfs(struct tree *T, int first, int out_parent, unsigned depth)
{
	for (int i = first; i >= 0; i = T->sib[i]) {
		size_t me = T->n++;
		if (me < T->max) {
			T->out[me] = T->V->rows[i];
			T->out[me].parent = out_parent;
			T->out[me].depth = depth;
		}
		if (depth < 32)
			dfs(T, T->kid[i], (int)me, depth + 1);
	}
}

int btrfsimg_layers(btrfsimg_fs *fs, struct btrfsimg_layer *out, size_t max, size_t *n)
{
	if (!fs || !n || (max && !out))
		return -EINVAL;
	*n = 0;
	if (!fs->vols || !fs->vols->scanned)
		return bi_err(fs, -EINVAL,
			      "btrfsimg_layers: call btrfsimg_probe() or "
			      "btrfsimg_open() first");
	const struct bi_vols *V = fs->vols;
	struct tree T = { V, malloc((V->nrows + 1) * sizeof(int)),
			  malloc((V->nrows + 1) * sizeof(int)), out, max, 0 };
	if (!T.kid || !T.sib) {
		free(T.kid);
		free(T.sib);
		return bi_err(fs, -ENOMEM, "btrfsimg_layers: out of memory for %zu rows",
			      V->nrows);
	}
	for (size_t i = 0; i <= V->nrows; i++)
		T.kid[i] = -1;
	for (size_t i = V->nrows; i-- > 0;) { /* prepend: children end up in row order */
		int p = V->rows[i].parent;
		size_t at = p >= 0 && (size_t)p < i ? (size_t)p : V->nrows;
		T.sib[i] = T.kid[at];
		T.kid[at] = (int)i;
	}
	dfs(&T, T.kid[V->nrows], -1, 0);
	*n = T.n;
	free(T.kid);
	free(T.sib);
	return 0;
}
