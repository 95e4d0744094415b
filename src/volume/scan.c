/* SPDX-License-Identifier: MIT */
/*
 * Building the volume stack: every image probed for btrfs, a LUKS header,
 * an LVM PV label or a partition table, and each layer found probed in
 * turn; then the VGs assembled from their PVs' newest metadata and their
 * LVs probed. Every node met is a row of the listing (layers.c).
 *
 *   image --- partition (MBR/GPT) --- LUKS1/2 --- LVM PV ---+
 *         \-- LUKS / PV / btrfs                             |
 *   image --- ... --- LVM PV -------------------------------+-- VG --- LV --- (LUKS) --- btrfs
 *
 * Work is bounded before it is done: rows (ROWS_MAX), LVM metadata read
 * (MDA_BUDGET), key derivations (the KDF budget, unlock.c).
 */
#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "volume/stack.h"

#include "base/cursor.h"
#include "base/err.h"
#include "base/grow.h"
#include "base/handle.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "volume/fsfind.h"
#include "volume/part.h"

static struct bi_vol *vol_new(struct bi_vols *V, enum vkind k, const char *name)
{
	if (bi_grow((void **)&V->v, &V->v_cap, V->nv + 1, sizeof(*V->v)))
		return NULL;
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
	if (bi_vol_read(fs, v, SB_PRIMARY_OFFSET, sb, sizeof(sb)) == 0) {
		bi_uuid_str(sb + 0x20, uuid);
		memcpy(label, sb + 0x12b, 256);
		label[256] = '\0';
	}
	int r = bi_vols_row_add(V, parent, "btrfs", label, 0, v->size);
	snprintf(bi_vols_row(V, r)->uuid, sizeof(bi_vols_row(V, r)->uuid), "%s", uuid);
	if (bi_grow((void **)&V->btrfs, &V->btrfs_cap, V->nbtrfs + 1, sizeof(*V->btrfs)))
		return bi_err(fs, -ENOMEM, "out of memory listing volumes");
	V->btrfs[V->nbtrfs++] = v;
	v->row = r >= 0 ? r : v->row;
	return 0;
}

/* The LUKS fields of row @r; detail keeps what happened (a header note,
 * then opened or locked: row_note appends with "; "). */
static void luks_detail(struct bi_vols *V, int r, const struct bi_luks *l)
{
	struct btrfsimg_layer *w = bi_vols_row(V, r);
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
	struct bi_vol_reader c = { fs, v };
	char err[400] = "";
	struct bi_luks *l = calloc(1, sizeof(*l));
	if (!l)
		return bi_err(fs, -ENOMEM, "out of memory reading a LUKS header");
	int rc = bi_luks_parse(bi_vol_read_at, &c, v->size, l, err, sizeof(err));
	if (rc < 0 && !err[0]) /* the read failed: its message is on the handle */
		snprintf(err, sizeof(err), "%.250s", fs->err);
	V->layered = true;
	if (rc <= 0) {
		free(l);
		if (rc == 0)
			return 0;
		int r = bi_vols_row_add(V, parent, "luks", "", 0, v->size);
		bi_vols_row_note(V, r, "unreadable: %s", err);
		bi_damage(fs, "%s: %s", v->name, err);
		if (!V->broken[0])
			snprintf(V->broken, sizeof(V->broken), "%.120s: %.170s", v->name, err);
		return 0;
	}
	if (l->note[0])
		bi_damage(fs, "%s: %s", v->name, l->note);
	int r = bi_vols_row_add(V, parent, l->version == 1 ? "luks1" : "luks2", l->label, 0,
				v->size);
	luks_detail(V, r, l);
	uint8_t vk[BI_LUKS_KEY_MAX];
	rc = bi_vols_luks_key(fs, v, l, r, vk);
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
	struct bi_vol_reader c = { fs, v };
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
		uint64_t area =
			lb->mda_size[i] < BI_LVM_TEXT_MAX ? lb->mda_size[i] : BI_LVM_TEXT_MAX;
		int rc = bi_lvm_mda_text(bi_vol_read_at, &c, v->size, lb, i, &t, err, sizeof(err));
		V->mda_read += t ? strlen(t) : area; /* a text read, then its crc failed */
		if (rc == -EUCLEAN) {
			V->mda_read += area;
			if (bi_lvm_mda_scan(bi_vol_read_at, &c, v->size, lb, i, &t) == 0) {
				bi_damage(fs,
					  "%s: %s; using the newest older copy in its ring buffer",
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
	int r = bi_vols_row_add(V, parent, "lvm-pv", e.text ? e.vgname : "", 0, v->size);
	const char *u = lb->pv_id; /* LVM prints 6-4-4-4-4-4-6 */
	snprintf(bi_vols_row(V, r)->uuid, sizeof(bi_vols_row(V, r)->uuid),
		 "%.6s-%.4s-%.4s-%.4s-%.4s-%.4s-%.6s", u, u + 6, u + 10, u + 14, u + 18, u + 22,
		 u + 26);
	if (!e.text) {
		bi_vols_row_note(V, r, "no valid metadata: %s", err);
		return 0;
	}
	char s[200];
	snprintf(s, sizeof(s), "VG %s, metadata seqno %" PRIu64, e.vgname, e.seqno);
	bi_vols_row_note(V, r, "%s", s);
	e.row = r;
	if (bi_grow((void **)&V->pv, &V->pv_cap, V->npv + 1, sizeof(*V->pv))) {
		free(e.text);
		return bi_err(fs, -ENOMEM, "out of memory listing PVs");
	}
	V->pv[V->npv++] = e;
	return 0;
}

static int probe_vol(struct btrfsimg_fs *fs, struct bi_vol *v, int parent)
{
	uint8_t m[8];
	struct bi_vol_reader c = { fs, v };
	if (v->size >= SB_PRIMARY_OFFSET + SB_SIZE && bi_vol_read(fs, v, MAGIC_AT, m, 8) == 0 &&
	    bi_le64(m) == SB_MAGIC)
		return found_btrfs(fs, v, parent);
	uint8_t h[8];
	if (v->size >= 4096 && bi_vol_read(fs, v, 0, h, 8) == 0 && bi_luks_magic(h))
		return probe_luks(fs, v, parent);
	struct bi_lvm_label lb;
	char err[200] = "";
	int rc = bi_lvm_label(bi_vol_read_at, &c, v->size, &lb, err, sizeof(err));
	if (rc > 0)
		return probe_pv(fs, v, parent, &lb);
	if (rc < 0) /* a damaged label (@err) or the volume unreadable there */
		bi_damage(fs, "%s: %s", v->name,
			  rc == -EUCLEAN || rc == -EOPNOTSUPP ? err : fs->err);
	return 0;
}

/* Whether a row other than a partition was added since row @before. */
static bool found_below(const struct bi_vols *V, size_t before)
{
	for (size_t i = before; i < V->nrows; i++)
		if (strcmp(V->rows[i].kind, "partition") != 0)
			return true;
	return false;
}

/* Nothing in image @v, nor in its partitions (if any, @n): btrfs found by
 * the superblock scan (fsfind.c) is a row saying how, and a volume. */
static int scan_for_btrfs(struct btrfsimg_fs *fs, struct bi_vol *v, int r, int n)
{
	struct bi_vols *V = fs->vols;
	const struct bi_found *f;
	int rc = bi_fsfind(fs, v->img, &f);
	if (rc < 0 || !f->found)
		return rc;
	char name[200], how[1000];
	snprintf(name, sizeof(name), "image '%.150s' at byte %" PRIu64, v->img->name, f->start);
	struct bi_vol *b = vol_new(V, V_IMAGE, name);
	if (!b)
		return bi_err(fs, -ENOMEM, "out of memory listing volumes");
	b->img = v->img;
	b->img_idx = v->img_idx;
	b->base = f->start;
	b->size = f->size;
	int br = bi_vols_row_add(V, r, "btrfs", f->label, f->start, f->size);
	bi_uuid_str(f->fsid, bi_vols_row(V, br)->uuid);
	bi_vols_row_note(V, br, "found by scanning: %s", f->how);
	b->row = br;
	if (bi_grow((void **)&V->btrfs, &V->btrfs_cap, V->nbtrfs + 1, sizeof(*V->btrfs)))
		return bi_err(fs, -ENOMEM, "out of memory listing volumes");
	V->btrfs[V->nbtrfs++] = b;
	/* said once by bi_vols_scan(), after what the table parser noted */
	snprintf(how, sizeof(how), "%s%s%s: btrfs found by its %s%s%s", v->pnote ? v->pnote : "",
		 v->pnote ? "; " : "",
		 n ? "none of its partitions holds btrfs" : "no partition table", f->how,
		 f->others[0] ? "; set aside: " : "", f->others);
	free(v->pnote);
	v->pnote = strdup(how);
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
	int r = bi_vols_row_add(V, -1, "image", d->name, 0, d->raw_size);
	v->row = r;
	size_t before = V->nrows;
	int rc = probe_vol(fs, v, r);
	if (rc < 0 || V->nrows != before)
		return rc;
	/* nothing at the start: a partition table? */
	struct btrfsimg_partition *p = NULL;
	char note[512] = "";
	int n = bi_part_parse(bi_vol_read_at, &(struct bi_vol_reader){ fs, v }, v->size, NULL, 0,
			      note, sizeof(note));
	if (n > 0)
		p = calloc((size_t)n, sizeof(*p));
	if (n > 0 && p)
		n = bi_part_parse(bi_vol_read_at, &(struct bi_vol_reader){ fs, v }, v->size, p,
				  (size_t)n, note, sizeof(note));
	if (n > 0 && note[0]) { /* said by bi_vols_scan(): once, whichever layer lies inside */
		v->pnote = strdup(note);
		bi_vols_row_note(V, r, "partition table: %s", note);
	}
	for (int i = 0; p && i < n && rc == 0; i++) {
		char name[200], num[16];
		snprintf(num, sizeof(num), "%d", p[i].number);
		int pr = bi_vols_row_add(V, r, "partition", num, p[i].offset, p[i].size);
		bi_vols_row_note(V, pr, "%s", p[i].gpt ? "gpt" : "mbr");
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
	if (rc == 0 && !found_below(V, before) && !(V->strict && fs->opts.partition))
		rc = scan_for_btrfs(fs, v, r, n > 0 ? n : 0);
	return rc;
}

/* ------------------------------------------------------------ volume groups */

static int lv_vol(struct btrfsimg_fs *fs, int g, int lv, int parent)
{
	struct bi_vols *V = fs->vols;
	struct bi_lvm_vg *vg = &V->vg[g].vg;
	const struct bi_lvm_lv *l = &vg->lvs[lv];
	char name[260], why[200] = "";
	snprintf(name, sizeof(name), "%s/%s", vg->name, l->name);
	int r = bi_vols_row_add(V, parent, "lvm-lv", name, 0, bi_lvm_lv_size(vg, lv));
	snprintf(bi_vols_row(V, r)->uuid, sizeof(bi_vols_row(V, r)->uuid), "%s", l->id);
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
	bi_vols_row_note(V, r, "%s", d);
	if (!bi_lvm_lv_complete(vg, lv, why, sizeof(why))) {
		bi_vols_row_note(V, r, "; unreadable: %s", why);
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
	if (bi_grow((void **)&V->vg, &V->vg_cap, V->nvg + 1, sizeof(*V->vg)))
		return -ENOMEM;
	memset(&V->vg[V->nvg], 0, sizeof(*V->vg));
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
		e->row = bi_vols_row_add(V, -1, "lvm-vg", e->vg.name, 0, (uint64_t)0);
		char d[200];
		snprintf(d, sizeof(d),
			 "%d PVs, %d missing, %" PRIu64 " KiB extents, seqno %" PRIu64, e->vg.npv,
			 missing, e->vg.extent_bytes / 1024, e->vg.seqno);
		bi_vols_row_note(V, e->row, "%s", d);
		snprintf(bi_vols_row(V, e->row)->uuid, sizeof(bi_vols_row(V, e->row)->uuid), "%s",
			 e->vg.id);
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

int bi_vols_scan(struct btrfsimg_fs *fs, bool strict)
{
	struct bi_vols *V = bi_vols_get(fs);
	if (!V)
		return bi_err(fs, -ENOMEM, "out of memory scanning volumes");
	bi_vols_reset(V);
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
		bi_damage(fs,
			  "volume layers: listing stopped after %d layers; the rest of the "
			  "images' layers are not listed",
			  ROWS_MAX - 1);
	if (V->mda_skipped) {
		int r = bi_vols_row_add(V, -1, "stopped", "", 0, 0);
		char d[300];
		snprintf(d, sizeof(d),
			 "probing stopped: the LVM metadata of %d PVs not read, past %llu MiB "
			 "of metadata areas read in this scan (overlapping partitions?)",
			 V->mda_skipped, MDA_BUDGET >> 20);
		bi_vols_row_note(V, r, "%s", d);
		bi_damage(fs, "volume layers: %s", d);
	}
	return rc;
}

int btrfsimg_probe(btrfsimg_fs *fs)
{
	if (!fs || fs->opened)
		return -EINVAL;
	fs->err[0] = '\0';
	return bi_vols_scan(fs, false);
}
