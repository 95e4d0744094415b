// SPDX-License-Identifier: MIT
/*
 * LVM2 labels, metadata areas and text, and the LV byte map
 * (src/volume/lvm.c). Input: the first bytes of a physical volume (zeros
 * past them, size 64 MiB). The label is looked for; each metadata area's
 * text is read and parsed; the input is also parsed as metadata text
 * itself (so the fuzzer reaches the parser without building a CRC). On a
 * parsed VG: every PV counts as present (backed by the same input), and
 * each LV that is complete is read at its first, middle and last bytes:
 * a read succeeds or fails with a message, and never leaves the PV (the
 * callback aborts if it does).
 */
#include <stdlib.h>
#include <string.h>

#include "base/cursor.h"
#include "volume/lvm.h"

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			abort();                                                                   \
	} while (0)
#define VSIZE (64ull << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct vimg {
	const uint8_t *data;
	size_t len;
};

static int vread(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct vimg *m = ctx;
	CHECK(bi_fits64(VSIZE, off, len));
	memset(buf, 0, len);
	if (off < m->len) {
		size_t n = m->len - off < len ? m->len - off : len;
		memcpy(buf, m->data + off, n);
	}
	return 0;
}

static int pvread(void *ctx, int pv, uint64_t off, void *buf, size_t len)
{
	(void)pv;
	if (!bi_fits64(VSIZE, off, len))
		return -5; /* the map names extents past a small PV: -EIO */
	return vread(ctx, off, buf, len);
}

static void read_lvs(struct vimg *m, struct bi_lvm_vg *vg)
{
	for (int i = 0; i < vg->npv; i++)
		vg->pvs[i].dev = i;
	for (int lv = 0; lv < vg->nlv; lv++) {
		char why[256], err[256];
		uint8_t b[512];
		uint64_t size = bi_lvm_lv_size(vg, lv);
		if (!bi_lvm_lv_complete(vg, lv, why, sizeof(why)) || size < sizeof(b))
			continue;
		uint64_t at[3] = { 0, size / 2, size - sizeof(b) };
		for (int k = 0; k < 3; k++) {
			int rc = bi_lvm_read(vg, lv, pvread, m, at[k], b, sizeof(b), err,
					     sizeof(err));
			CHECK(rc == 0 || rc < 0);
		}
		CHECK(bi_lvm_read(vg, lv, pvread, m, size, b, 1, err, sizeof(err)) < 0);
	}
}

static void parse_text(struct vimg *m, const char *t, size_t len)
{
	struct bi_lvm_vg vg;
	char err[256];
	if (bi_lvm_parse(t, len, &vg, err, sizeof(err)) == 0) {
		CHECK(vg.extent_bytes > 0);
		read_lvs(m, &vg);
		bi_lvm_vg_free(&vg);
	} else
		CHECK(err[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vimg m = { data, size };
	struct bi_lvm_label lb;
	char err[256];
	parse_text(&m, (const char *)data, size);
	if (bi_lvm_label(vread, &m, VSIZE, &lb, err, sizeof(err)) <= 0)
		return 0;
	CHECK(lb.nmda >= 0 && lb.nmda <= BI_LVM_MDAS);
	for (int i = 0; i < lb.nmda; i++) {
		char *t = NULL;
		if (bi_lvm_mda_text(vread, &m, VSIZE, &lb, i, &t, err, sizeof(err)) == 0) {
			parse_text(&m, t, strlen(t));
			free(t);
		}
	}
	return 0;
}
