/* SPDX-License-Identifier: MIT */
/*
 * LVM2: the PV label, the text metadata of the volume group, and the map
 * from a logical volume's bytes to its physical volumes. Pure: reads go
 * through callbacks, so the fuzz target and the tests drive it from memory.
 */
#ifndef BI_LVM_H
#define BI_LVM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "volume/part.h"

#define BI_LVM_MDAS 2
/* A metadata text, or the ring searched for an older copy, is never
 * longer: reading one metadata area costs at most this. */
#define BI_LVM_TEXT_MAX (64u << 20)

/* What the label of a physical volume says. */
struct bi_lvm_label {
	char pv_id[33];	   /* 32 characters, no dashes */
	uint64_t dev_size; /* bytes */
	uint64_t mda_off[BI_LVM_MDAS], mda_size[BI_LVM_MDAS];
	int nmda;
};

/* Find the label in the first four sectors: 1 found, 0 none, < 0 damaged
 * (-EUCLEAN with @err) or @rd's error. */
int bi_lvm_label(bi_read_at_fn rd, void *ctx, uint64_t size, struct bi_lvm_label *out, char *err,
		 size_t errlen);

/* The current metadata text of metadata area @i (checked against its
 * CRC; a ring buffer that wraps is put together). *text is malloc'd and
 * NUL-terminated. 0, -EUCLEAN (@err) or @rd's error. */
int bi_lvm_mda_text(bi_read_at_fn rd, void *ctx, uint64_t size, const struct bi_lvm_label *lb,
		    int i, char **text, char *err, size_t errlen);

/* When the current text of metadata area @i is damaged: the newest older
 * copy still in its ring buffer (each copy is the text up to a NUL; the
 * current one, at raw_locn[0], is left out; of the others the one that
 * parses with the highest seqno wins, its CRC being unknown).
 * 0 with *text (malloc'd), -ENOENT (none parses) or @rd's error. */
int bi_lvm_mda_scan(bi_read_at_fn rd, void *ctx, uint64_t size, const struct bi_lvm_label *lb,
		    int i, char **text);

struct bi_lvm_area {
	int pv;		/* index into vg->pvs, or -1 */
	int lv;		/* a sub-LV (mirror/raid leg), or -1 */
	uint64_t start; /* extent on the PV, or in the sub-LV */
};

enum bi_lvm_seg_kind { BI_LVM_STRIPED, BI_LVM_MIRROR };

struct bi_lvm_seg {
	uint64_t start, count;	   /* logical extents */
	enum bi_lvm_seg_kind kind; /* striped (1 stripe: linear), or legs */
	uint64_t stripe_bytes;
	int narea;
	struct bi_lvm_area *areas;
	char type[24];
};

struct bi_lvm_lv {
	char name[128];
	char id[40];
	bool visible;
	char refused[48]; /* a segment type not supported ("thin", ...), or "" */
	int nseg;
	struct bi_lvm_seg *segs;
	uint64_t extents;
};

struct bi_lvm_pv {
	char name[64];	   /* "pv0": the metadata's key */
	char id[40];	   /* with dashes, as written */
	uint64_t pe_start; /* bytes */
	uint64_t pe_count;
	int dev; /* the caller's index of the PV found, or -1: missing */
};

struct bi_lvm_vg {
	char name[128];
	char id[40];
	uint64_t seqno;
	uint64_t extent_bytes;
	int npv, nlv;
	struct bi_lvm_pv *pvs;
	struct bi_lvm_lv *lvs;
};

/* Parse metadata text into @vg (to release with bi_lvm_vg_free). 0 or
 * -EUCLEAN / -ENOMEM with @err. */
int bi_lvm_parse(const char *text, size_t len, struct bi_lvm_vg *vg, char *err, size_t errlen);
void bi_lvm_vg_free(struct bi_lvm_vg *vg);

/* Compare PV ids ignoring dashes. */
bool bi_lvm_same_id(const char *a, const char *b);

/* Bytes of LV @lv. */
uint64_t bi_lvm_lv_size(const struct bi_lvm_vg *vg, int lv);

/* Can every byte of LV @lv be read (all PVs it needs present, or one
 * whole leg of each mirror)? If not, @why names what is missing. */
bool bi_lvm_lv_complete(const struct bi_lvm_vg *vg, int lv, char *why, size_t whylen);

/* Read from a PV: @pv indexes vg->pvs, @off counts from the PV's start. */
typedef int (*bi_lvm_pv_read_fn)(void *ctx, int pv, uint64_t off, void *buf, size_t len);

/* Read [off, off+len) of LV @lv; a mirror leg that fails is retried on
 * the next. 0 (@err empty, or naming a leg that failed and the one that
 * served the read), -EIO (@err says where) or the callback's error. */
int bi_lvm_read(const struct bi_lvm_vg *vg, int lv, bi_lvm_pv_read_fn rd, void *ctx, uint64_t off,
		void *buf, size_t len, char *err, size_t errlen);

#endif
