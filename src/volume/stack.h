/* SPDX-License-Identifier: MIT */
/*
 * The volume stack's model, shared by the files that build, read and list
 * it: a node (bi_vol) per image window, LUKS view or LV; the PVs and VGs a
 * scan found; the listing's rows; and what the caller set on the handle
 * (secrets, selection), all in bi_vols hanging off the handle.
 *
 *   secrets.c     what the caller sets before opening, and the state's life
 *   stack_read.c  reading through a node, and where a device byte lies
 *   layers.c      the rows of btrfsimg_layers and the listing
 *   unlock.c      the volume key of a LUKS header
 *   scan.c        probing images into the stack; VG assembly
 *   vol.c         choosing each device's btrfs volume (bi_vol_assemble)
 */
#ifndef BI_STACK_H
#define BI_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btrfsimg.h"
#include "base/ondisk.h"
#include "volume/crypto.h"
#include "volume/luks.h"
#include "volume/lvm.h"

struct btrfsimg_fs;
struct bi_dev;
struct bi_found;

#define MAGIC_AT (SB_PRIMARY_OFFSET + SB_MAGIC_OFF)
#define PASS_MAX 8192
#define ROWS_MAX 100000
/* LVM metadata read in one scan, bytes. Partitions may overlap: a table
 * of 8192 entries each holding a PV whose area is 64 MiB (read in whole
 * when its text is damaged) would be 512 GiB of work for one image. A
 * real PV's text is a few KiB; past this budget the remaining PVs are
 * listed with their metadata unread, and that is said. */
#define MDA_BUDGET (1ull << 30)
/* One superblock scan's answer per image (fsfind.h), kept across scans */
#define BI_FOUND_MAX 64

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
	size_t nseen, seen_cap;
	btrfsimg_passphrase_fn ask;
	void *ask_ctx;
	char *select; /* "vg/lv" */

	struct bi_vol **v;
	size_t nv, v_cap;
	struct pv_ent *pv;
	size_t npv, pv_cap;
	struct vg_ent *vg;
	size_t nvg, vg_cap;
	struct bi_vol **btrfs;
	size_t nbtrfs, btrfs_cap;
	struct btrfsimg_layer *rows;
	size_t nrows, rows_cap;
	bool layered; /* a LUKS or LVM layer was found */
	bool strict;  /* opening: a wrong key is fatal */
	bool scanned;
	bool rows_full;		    /* ROWS_MAX reached: the "stopped" row was added */
	uint64_t mda_read;	    /* LVM metadata area bytes this scan may have read */
	int mda_skipped;	    /* PVs whose metadata the budget left unread */
	char locked[300];	    /* the first LUKS volume left locked */
	struct btrfsimg_layer sink; /* written instead of a row out of memory */
	char broken[300];	    /* the first LUKS header that did not parse */
	struct bi_found *found[BI_FOUND_MAX]; /* per image: bi_fsfind's scan, or NULL */
};

/* secrets.c */

/* The handle's volume state, created on first use; NULL out of memory. */
struct bi_vols *bi_vols_get(struct btrfsimg_fs *fs);
/* Wipe @n bytes of @p, then free it (NULL is fine). */
void bi_vols_wipe(uint8_t *p, size_t n);
/* Drop what a scan found (keeps the secrets and the selection). */
void bi_vols_reset(struct bi_vols *V);

/* stack_read.c */

/* @len bytes at @off of node @v, through its layers. 0 or a negative
 * errno (message on @fs). */
int bi_vol_read(struct btrfsimg_fs *fs, struct bi_vol *v, uint64_t off, void *buf, size_t len);
/* A node as a read callback of the volume parsers (part.c, luks.c,
 * lvm.c): @ctx is a struct bi_vol_reader. */
struct bi_vol_reader {
	struct btrfsimg_fs *fs;
	struct bi_vol *v;
};
int bi_vol_read_at(void *ctx, uint64_t off, void *buf, size_t len);
/* bi_dev.vread of a device that reads through its node (d->vol). */
int bi_vol_dev_read(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t off, void *buf,
		    size_t len);

/* layers.c */

/* One more row, or -1 (out of memory, or the listing full). */
int bi_vols_row_add(struct bi_vols *V, int parent, const char *kind, const char *name, uint64_t off,
		    uint64_t size);
/* Row @i; a scratch row for one that could not be added (i < 0). */
struct btrfsimg_layer *bi_vols_row(struct bi_vols *V, int i);
/* Append @fmt (one %s: @s) to row @i's detail. */
void bi_vols_row_note(struct bi_vols *V, int i, const char *fmt, const char *s);

/* unlock.c */

/* Get the volume key of @l (the header at the start of @v, row @r): 1
 * unlocked (@vk), 0 left locked (said in the row), < 0 fatal. */
int bi_vols_luks_key(struct btrfsimg_fs *fs, struct bi_vol *v, const struct bi_luks *l, int r,
		     uint8_t *vk);

/* scan.c */

/* Probe every image into the stack (forgetting an earlier scan). With
 * @strict (opening), a wrong key is fatal. 0 or a negative errno. */
int bi_vols_scan(struct btrfsimg_fs *fs, bool strict);

#endif
