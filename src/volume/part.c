/* SPDX-License-Identifier: MIT */
/*
 * Partition tables, and where the filesystem lies inside each device.
 *
 * A device may be a whole-disk image. bi_dev_locate() decides where the
 * filesystem lies inside it (base, size); every later read is relative to
 * that window (image/dev.c).
 *
 * Partition tables (bi_part_parse):
 *   MBR  0x55AA at 510, four 16-byte entries at 446 (type +4, LBA start +8,
 *        sector count +12). Extended types 0x05/0x0f/0x85 start a chain of
 *        EBRs; logical partitions are numbered from 5 as Linux does. The
 *        chain is bounded (EBR_MAX links) and loops are refused.
 *   GPT  a protective MBR entry of type 0xEE, header "EFI PART" at LBA 1,
 *        header and entry-array CRC32s; if the primary header is bad, the
 *        backup at the last LBA. 512-byte sectors first, then 4096-byte
 *        ones (header at byte 4096: 4Kn disks). MBR LBAs are taken as
 *        512-byte sectors (the only size Linux assumes for images).
 * Numbers are the 1-based table positions Linux gives (/dev/sdaN).
 *
 * The parser reports each partition as the table states it. A partition
 * that extends past the end of the image (a truncated copy of a disk) is
 * clipped by bi_dev_locate(), which logs it as damage: what is there can
 * still be read, and a read past the end fails with a message naming it.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "volume/part.h"

#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "volume/fsfind.h"

#define MAGIC_AT (SB_PRIMARY_OFFSET + SB_MAGIC_OFF)
#define SECTOR 512u

#define MBR_SIG 510
#define MBR_TABLE 446
#define MBR_ENTRY 16
#define MBR_TYPE_GPT 0xee
#define EBR_MAX 128		/* Linux gives up after 100 links */

#define GPT_SIG "EFI PART"
#define GPT_HDR_MIN 92
#define GPT_ENTRY_MIN 128
#define GPT_ARRAY_MAX (1u << 20)
_Static_assert(BI_PART_MAX >= GPT_ARRAY_MAX / GPT_ENTRY_MIN + 4 + 4 * EBR_MAX,
	       "BI_PART_MAX bounds what bi_part_parse returns");

/* ---------------------------------------------------------------- */
/* Partition tables */

struct pt {
	bi_read_at_fn rd;
	void *ctx;
	uint64_t size;
	struct btrfsimg_partition *out;
	size_t max, n;
	char *err;
	size_t errlen;
};

static int pt_read(struct pt *t, uint64_t off, void *buf, size_t len, const char *what)
{
	if (!bi_fits64(t->size, off, len))
		return bi_msg(t->err, t->errlen, -EUCLEAN,
			      "%s at byte %" PRIu64 " (%zu bytes) lies past the end of the "
			      "image (size %" PRIu64 ")",
			      what, off, len, t->size);
	int rc = t->rd(t->ctx, off, buf, len);
	if (rc != 0)
		return bi_msg(t->err, t->errlen, rc < 0 ? rc : -EIO,
			      "reading %s at byte %" PRIu64 " (%zu bytes) failed", what, off, len);
	return 0;
}

static void pt_add(struct pt *t, int number, uint64_t off, uint64_t size, bool gpt)
{
	if (t->n < t->max)
		t->out[t->n] = (struct btrfsimg_partition){ .number = number, .offset = off,
							     .size = size, .gpt = gpt };
	t->n++;
}

static bool mbr_is_ext(uint8_t type)
{
	return type == 0x05 || type == 0x0f || type == 0x85;
}

struct mbr_ent {
	uint8_t status, type;
	uint32_t start, count;
};

static struct mbr_ent mbr_entry(const uint8_t *sec, int i)
{
	const uint8_t *e = sec + MBR_TABLE + MBR_ENTRY * i;
	return (struct mbr_ent){ e[0], e[4], bi_le32(e + 8), bi_le32(e + 12) };
}

static bool mbr_sig_ok(const uint8_t *sec)
{
	return sec[MBR_SIG] == 0x55 && sec[MBR_SIG + 1] == 0xaa;
}

/* The data partitions of one EBR; returns the next EBR (0: end of chain). */
static uint64_t ebr_entries(struct pt *t, const uint8_t *sec, uint64_t ebr, uint64_t ext_start,
			    uint64_t ext_count, int *num)
{
	uint64_t next = 0;
	for (int i = 0; i < 4; i++) {
		struct mbr_ent e = mbr_entry(sec, i);
		if (e.count == 0)
			continue;
		if (mbr_is_ext(e.type)) {
			if (!next)
				next = ext_start + e.start;
			continue;
		}
		uint64_t s = ebr + e.start;
		/* slots 3 and 4 of an EBR often hold garbage: keep them only
		 * when they lie inside the extended partition (as Linux does) */
		if (i >= 2 && (s < ext_start || s + e.count > ext_start + ext_count))
			continue;
		pt_add(t, (*num)++, s * SECTOR, (uint64_t)e.count * SECTOR, false);
	}
	return next;
}

/* Follow the EBR chain of the extended partition [start, start+count). */
static int ebr_chain(struct pt *t, int slot, uint64_t start, uint64_t count, int *num)
{
	uint64_t seen[EBR_MAX + 1];
	size_t nseen = 0;
	uint8_t sec[SECTOR];
	seen[nseen++] = 0;	/* the MBR itself */
	for (uint64_t ebr = start; ebr != 0;) {
		for (size_t i = 0; i < nseen; i++)
			if (seen[i] == ebr)
				return bi_msg(
					t->err, t->errlen, -EUCLEAN,
					"MBR: extended partition %d: EBR chain loops, link %zu "
					"points back to sector %" PRIu64,
					slot, nseen, ebr);
		if (nseen > EBR_MAX)
			return bi_msg(t->err, t->errlen, -EUCLEAN,
				      "MBR: extended partition %d: EBR chain longer than %d links",
				      slot, EBR_MAX);
		seen[nseen++] = ebr;
		int rc = pt_read(t, ebr * SECTOR, sec, SECTOR, "EBR");
		if (rc < 0)
			return rc;
		if (!mbr_sig_ok(sec))
			break;	/* end of a damaged chain; Linux stops here too */
		ebr = ebr_entries(t, sec, ebr, start, count, num);
	}
	return 0;
}

static int mbr_parse(struct pt *t, const uint8_t *mbr)
{
	int num = 5;
	for (int i = 0; i < 4; i++) {
		struct mbr_ent e = mbr_entry(mbr, i);
		if (e.count && !mbr_is_ext(e.type))
			pt_add(t, i + 1, (uint64_t)e.start * SECTOR, (uint64_t)e.count * SECTOR,
			       false);
	}
	for (int i = 0; i < 4; i++) {
		struct mbr_ent e = mbr_entry(mbr, i);
		if (e.count == 0 || !mbr_is_ext(e.type))
			continue;
		int rc = ebr_chain(t, i + 1, e.start, e.count, &num);
		if (rc < 0)
			return rc;
	}
	return 0;
}

struct gpt_hdr {
	unsigned ss;
	uint64_t lba;
	uint64_t entries_lba;
	uint32_t num, esize, ecrc;
};

/* Check a GPT header at @lba; 1 = valid, 0 = invalid (@why says why), < 0 = I/O. */
static int gpt_header(struct pt *t, unsigned ss, uint64_t lba, struct gpt_hdr *h, char *why,
		      size_t whylen)
{
	uint8_t buf[4096];
	uint64_t off = lba * ss;
	if (!bi_fits64(t->size, off, ss)) {
		snprintf(why, whylen, "no room for a header at byte %" PRIu64, off);
		return 0;
	}
	int rc = pt_read(t, off, buf, ss, "GPT header");
	if (rc < 0)
		return rc;
	if (memcmp(buf, GPT_SIG, 8) != 0) {
		snprintf(why, whylen, "no \"EFI PART\" signature at byte %" PRIu64, off);
		return 0;
	}
	uint32_t hsize = bi_le32(buf + 12), have = bi_le32(buf + 16);
	if (hsize < GPT_HDR_MIN || hsize > ss) {
		snprintf(why, whylen, "header at byte %" PRIu64 ": header size %u, expect %u..%u",
			 off, hsize, GPT_HDR_MIN, ss);
		return 0;
	}
	memset(buf + 16, 0, 4);
	uint32_t want = (uint32_t)crc32(0, buf, hsize);
	if (have != want) {
		snprintf(why, whylen,
			 "header at byte %" PRIu64 ": bad CRC32, have 0x%08x expect 0x%08x", off,
			 have, want);
		return 0;
	}
	if (bi_le64(buf + 24) != lba) {
		snprintf(why, whylen,
			 "header at byte %" PRIu64 ": my_lba %" PRIu64 ", expect %" PRIu64, off,
			 bi_le64(buf + 24), lba);
		return 0;
	}
	*h = (struct gpt_hdr){ ss, lba, bi_le64(buf + 72), bi_le32(buf + 80), bi_le32(buf + 84),
			       bi_le32(buf + 88) };
	return 1;
}

/* Bounds of the entry array; 1 = fine, 0 = invalid (@why). */
static int gpt_array_ok(struct pt *t, const struct gpt_hdr *h, uint64_t *aoff, char *why,
			size_t whylen)
{
	uint64_t off = h->lba * h->ss, asize = (uint64_t)h->num * h->esize;
	if (h->esize < GPT_ENTRY_MIN || h->esize % 8) {
		snprintf(why, whylen,
			 "header at byte %" PRIu64 ": entry size %u, expect a multiple of 8 "
			 ">= %u",
			 off, h->esize, GPT_ENTRY_MIN);
		return 0;
	}
	if (asize > GPT_ARRAY_MAX) {
		snprintf(why, whylen,
			 "header at byte %" PRIu64 ": %u entries of %u bytes, expect <= %u "
			 "bytes in all",
			 off, h->num, h->esize, GPT_ARRAY_MAX);
		return 0;
	}
	if (!bi_mul_ok(h->entries_lba, h->ss, aoff) || !bi_fits64(t->size, *aoff, asize)) {
		snprintf(why, whylen,
			 "header at byte %" PRIu64 ": entry array at LBA %" PRIu64 " (%" PRIu64
			 " bytes) "
			 "lies past the end of the image (size %" PRIu64 ")",
			 off, h->entries_lba, asize, t->size);
		return 0;
	}
	return 1;
}

static void gpt_entries(struct pt *t, const struct gpt_hdr *h, const uint8_t *a)
{
	static const uint8_t zero[16];
	for (uint32_t i = 0; i < h->num; i++) {
		const uint8_t *e = a + (size_t)i * h->esize;
		if (memcmp(e, zero, 16) == 0)
			continue;	/* unused entry */
		uint64_t first = bi_le64(e + 32), last = bi_le64(e + 40), off, end;
		/* A reversed or unaddressable entry cannot describe any disk:
		 * skipped like Linux does, keeping the others' numbers. */
		if (first > last || !bi_mul_ok(first, h->ss, &off) ||
		    !bi_mul_ok(last, h->ss, &end) || !bi_add_ok(end, h->ss, &end))
			continue;
		pt_add(t, (int)i + 1, off, end - off, true);
	}
}

/* Read the entry array of a valid header; 1 = done, 0 = invalid (@why). */
static int gpt_load(struct pt *t, const struct gpt_hdr *h, char *why, size_t whylen)
{
	uint64_t aoff;
	if (!gpt_array_ok(t, h, &aoff, why, whylen))
		return 0;
	size_t asize = (size_t)h->num * h->esize;
	uint8_t *a = malloc(asize ? asize : 1);
	if (!a)
		return bi_msg(t->err, t->errlen, -ENOMEM,
			      "out of memory for a %zu-byte GPT entry array", asize);
	int rc = pt_read(t, aoff, a, asize, "GPT entry array");
	if (rc < 0)
		goto out;
	uint32_t want = (uint32_t)crc32(0, a, (uInt)asize);
	if (want != h->ecrc) {
		snprintf(why, whylen,
			 "entry array at byte %" PRIu64 ": bad CRC32, have 0x%08x expect "
			 "0x%08x",
			 aoff, h->ecrc, want);
		goto out;
	}
	gpt_entries(t, h, a);
	rc = 1;
out:
	free(a);
	return rc;
}

/* Try one header (and its entries); 1 = used, 0 = invalid (@why), < 0 error. */
static int gpt_try(struct pt *t, unsigned ss, uint64_t lba, char *why, size_t whylen)
{
	struct gpt_hdr h;
	int rc = gpt_header(t, ss, lba, &h, why, whylen);
	if (rc <= 0)
		return rc;
	return gpt_load(t, &h, why, whylen);
}

/*
 * Primary headers first (512-byte, then 4096-byte sectors), then backups
 * at the last LBA. On success with a backup, @t->err notes why the primary
 * was not used.
 */
static int gpt_parse(struct pt *t)
{
	static const unsigned ss[2] = { SECTOR, 4096 };
	char why[4][200];
	for (int k = 0; k < 4; k++) {
		unsigned s = ss[k % 2];
		uint64_t lba = k < 2 ? 1 : t->size / s - 1;
		why[k][0] = '\0';
		if (k >= 2 && t->size / s < 3) {
			snprintf(why[k], sizeof(why[k]), "image too small for a backup");
			continue;
		}
		int rc = gpt_try(t, s, lba, why[k], sizeof(why[k]));
		if (rc < 0)
			return rc;
		if (rc == 1) {
			if (k >= 2)
				bi_msg(t->err, t->errlen, 0,
				       "primary GPT header invalid (%s); used the backup at "
				       "byte %" PRIu64,
				       why[k - 2], (lba * s));
			return 0;
		}
	}
	return bi_msg(t->err, t->errlen, -EUCLEAN,
		      "GPT: no valid header (protective MBR present): primary: %s; "
		      "backup: %s; 4096-byte sectors: %s; %s",
		      why[0], why[2], why[1], why[3]);
}

int bi_part_parse(bi_read_at_fn rd, void *ctx, uint64_t size, struct btrfsimg_partition *out,
		  size_t max, char *err, size_t errlen)
{
	struct pt t = { rd, ctx, size, out, out ? max : 0, 0, err, errlen };
	if (err && errlen)
		err[0] = '\0';
	if (!rd)
		return -EINVAL;
	uint8_t mbr[SECTOR];
	if (size < SECTOR)
		return 0;
	int rc = pt_read(&t, 0, mbr, SECTOR, "MBR");
	if (rc < 0)
		return rc;
	if (!mbr_sig_ok(mbr))
		return 0;
	bool gpt = false, boot_ok = true;
	for (int i = 0; i < 4; i++) {
		struct mbr_ent e = mbr_entry(mbr, i);
		gpt |= e.type == MBR_TYPE_GPT;
		boot_ok &= e.status == 0 || e.status == 0x80;
	}
	if (gpt)
		rc = gpt_parse(&t);
	else if (boot_ok)	/* else a boot sector (FAT, NTFS), not a table */
		rc = mbr_parse(&t, mbr);
	return rc < 0 ? rc : (int)t.n;
}

/* ---------------------------------------------------------------- */
/* Locating the filesystem inside an image */

struct dev_rd {
	struct btrfsimg_fs *fs;
	const struct bi_dev *d;
};

static int dev_rd(void *ctx, uint64_t off, void *buf, size_t len)
{
	struct dev_rd *c = ctx;
	return bi_dev_read_raw(c->fs, c->d, off, buf, len);
}

/* Is there a btrfs magic at @base + 64 KiB + 0x40, with a whole superblock
 * inside [base, base+size)? */
static int probe_magic(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t base,
		       uint64_t size, bool *found)
{
	uint8_t m[8];
	*found = false;
	if (size < SB_PRIMARY_OFFSET + SB_SIZE || !bi_fits64(d->raw_size, base, size))
		return 0;
	int rc = bi_dev_read_raw(fs, d, base + MAGIC_AT, m, sizeof(m));
	if (rc < 0)
		return rc;
	*found = bi_le64(m) == SB_MAGIC;
	return 0;
}

/* Bytes of partition @p that lie inside the image. */
static uint64_t part_avail(const struct bi_dev *d, const struct btrfsimg_partition *p)
{
	if (p->offset >= d->raw_size)
		return 0;
	uint64_t room = d->raw_size - p->offset;
	return p->size < room ? p->size : room;
}

/* Parse the table of @d and probe each partition. *out is malloc'd. */
static int parts_load(struct btrfsimg_fs *fs, const struct bi_dev *d,
		      struct btrfsimg_partition **out, char *note, size_t notelen)
{
	struct dev_rd c = { fs, d };
	struct btrfsimg_partition *p = NULL;
	*out = NULL;
	int n = bi_part_parse(dev_rd, &c, d->raw_size, NULL, 0, note, notelen);
	if (n <= 0)
		goto out;
	p = calloc((size_t)n, sizeof(*p));
	if (!p)
		return bi_err(fs, -ENOMEM, "image '%s': out of memory for %d partitions", d->name, n);
	int again = bi_part_parse(dev_rd, &c, d->raw_size, p, (size_t)n, note, notelen);
	if (again >= 0 && again != n)	/* a callback device that changes under us */
		again = bi_err(fs, -EIO, "image '%s': partition table changed while being read "
					 "(%d then %d partitions)", d->name, n, again);
	n = again;
	for (int i = 0; i < n; i++) {
		int rc = probe_magic(fs, d, p[i].offset, part_avail(d, &p[i]), &p[i].is_btrfs);
		if (rc < 0) {
			n = rc;
			break;
		}
	}
out:
	if (n < 0) {
		free(p);
		if (!fs->err[0])
			return bi_err(fs, n, "image '%s': partition table: %s", d->name, note);
		return n;
	}
	*out = p;
	return n;
}

static int use_part(struct btrfsimg_fs *fs, struct bi_dev *d, const struct btrfsimg_partition *p)
{
	uint64_t avail = part_avail(d, p);
	d->base = p->offset;
	d->size = avail;
	d->partition = p->number;
	if (avail < p->size)
		bi_damage(fs,
			  "image '%s': partition %d (at byte %" PRIu64
			  ") extends past the end of the "
			  "image: table says %" PRIu64 " bytes, image holds %" PRIu64
			  "; reading what is there",
			  d->name, p->number, p->offset, p->size, avail);
	bi_info(fs, "image '%s': using partition %d at byte %" PRIu64 " (%" PRIu64 " bytes)",
		d->name, p->number, p->offset, p->size);
	return 0;
}

static int pick_numbered(struct btrfsimg_fs *fs, struct bi_dev *d,
			 const struct btrfsimg_partition *p, int n)
{
	int want = (int)fs->opts.partition;
	for (int i = 0; i < n; i++) {
		if (p[i].number != want)
			continue;
		if (!p[i].is_btrfs)
			return bi_err(fs, -EUCLEAN,
				      "image '%s': partition %d (at byte %" PRIu64 ", %" PRIu64
				      " bytes) holds no "
				      "btrfs superblock (no magic at byte %" PRIu64 ")",
				      d->name, want, p[i].offset, p[i].size,
				      (uint64_t)(p[i].offset + MAGIC_AT));
		return use_part(fs, d, &p[i]);
	}
	return bi_err(fs, -ENOENT, "image '%s': no partition %d (%s)", d->name, want,
		      n ? "not in its partition table" : "it has no partition table");
}

static int locate_at(struct btrfsimg_fs *fs, struct bi_dev *d, uint64_t off);

/* A superblock magic at the 64 MiB or 256 GiB mirror of the whole image. */
static bool mirror_magic(struct btrfsimg_fs *fs, const struct bi_dev *d)
{
	for (int i = 1; i < SB_MIRROR_MAX; i++) {
		uint64_t at = bi_super_offset(i) + SB_MAGIC_OFF;
		uint8_t m[8];
		if (bi_fits64(d->raw_size, at, sizeof(m)) &&
		    bi_dev_read_raw(fs, d, at, m, sizeof(m)) == 0 && bi_le64(m) == SB_MAGIC)
			return true;
	}
	return false;
}

/* No table, or none of its partitions holds btrfs: the superblock scan
 * of the whole image (fsfind.c). Found, the window is where it starts,
 * and that is damage (a table was expected); not found, the device is
 * left unplaced for the salvage, which places it by its tree blocks. */
static int locate_by_scan(struct btrfsimg_fs *fs, struct bi_dev *d, int n)
{
	const struct bi_found *f;
	char table[96];
	if (n == 0)
		snprintf(table, sizeof(table), "no partition table");
	else
		snprintf(table, sizeof(table), "none of its %d partitions holds btrfs", n);
	int rc = bi_fsfind(fs, d, &f);
	if (rc < 0)
		return rc;
	if (!f->found) {
		d->unplaced = true;
		return bi_err(fs, -EUCLEAN,
			      "no btrfs superblock found: image '%s' has no magic at byte %" PRIu64
			      ", %s, and a scan of its %" PRIu64 " bytes found no superblock copy "
			      "that verifies",
			      d->name, (uint64_t)MAGIC_AT, table, f->bytes);
	}
	d->base = f->start;
	d->size = f->size;
	d->partition = 0;
	bi_damage(fs, "image '%s': %s: btrfs found by its %s%s%s", d->name, table, f->how,
		  f->others[0] ? "; set aside: " : "", f->others);
	return 0;
}

static int pick_auto(struct btrfsimg_fs *fs, struct bi_dev *d,
		     const struct btrfsimg_partition *p, int n)
{
	int hits = 0, pick = -1;
	char list[512] = "";
	size_t used = 0;
	for (int i = 0; i < n; i++) {
		if (!p[i].is_btrfs)
			continue;
		if (used < sizeof(list))
			used += (size_t)snprintf(list + used, sizeof(list) - used,
						 "%s%d at %" PRIu64, hits ? ", " : "", p[i].number,
						 p[i].offset);
		hits++;
		pick = i;
	}
	if (hits == 1)
		return use_part(fs, d, &p[pick]);
	if (hits > 1)
		return bi_err(fs, -EINVAL,
			      "image '%s' holds %d btrfs partitions (%s): choose one with "
			      "--partition N",
			      d->name, hits, list);
	if (n == 0 && mirror_magic(fs, d))
		return locate_at(fs, d, 0); /* primary destroyed, a mirror survives */
	return locate_by_scan(fs, d, n);
}

static int locate_at(struct btrfsimg_fs *fs, struct bi_dev *d, uint64_t off)
{
	if (off > d->raw_size)
		return bi_err(fs, -EINVAL,
			      "image '%s': offset %" PRIu64 " is past its end (size %" PRIu64 ")",
			      d->name, off, d->raw_size);
	d->base = off;
	d->size = d->raw_size - off;
	return 0;
}

/* An image whose own superblock magic sits at 64 KiB has no partitions to
 * choose from: reading it whole would answer another question than the
 * one asked, so the open refuses rather than ignore the number. An image
 * that cannot be read here is left to the open, which says why. */
int bi_part_applies(struct btrfsimg_fs *fs)
{
	for (size_t i = 0; fs->opts.partition && i < fs->ndevs; i++) {
		const struct bi_dev *d = &fs->devs[i];
		bool magic;
		if (probe_magic(fs, d, 0, d->raw_size, &magic) < 0) {
			fs->err[0] = '\0'; /* the open reads it again and says why */
			continue;
		}
		if (magic)
			return bi_err(fs, -EINVAL,
				      "--partition %u: image '%s' holds btrfs itself, not a "
				      "partition table; leave --partition out",
				      fs->opts.partition, d->name);
	}
	return 0;
}

int bi_dev_locate(struct btrfsimg_fs *fs, struct bi_dev *d)
{
	if (fs->opts.flags & BTRFSIMG_OPEN_OFFSET)
		return locate_at(fs, d, fs->opts.offset);
	bool magic;
	int rc = probe_magic(fs, d, 0, d->raw_size, &magic);
	if (rc < 0)
		return rc;
	if (magic) {
		if (fs->opts.partition > 0)
			bi_info(fs, "image '%s' holds btrfs itself; partition %u ignored", d->name,
				fs->opts.partition);
		return locate_at(fs, d, 0);
	}
	struct btrfsimg_partition *p;
	char note[512];
	fs->err[0] = '\0';
	int n = parts_load(fs, d, &p, note, sizeof(note));
	if (n < 0)
		return n;
	if (note[0])
		bi_damage(fs, "image '%s': %s", d->name, note);
	if (fs->opts.partition > 0)
		rc = pick_numbered(fs, d, p, n);
	else
		rc = pick_auto(fs, d, p, n);
	free(p);
	return rc;
}

/* ---------------------------------------------------------------- */

int btrfsimg_list_partitions(const char *path, struct btrfsimg_partition *out, size_t max,
			     char *err, size_t errlen)
{
	return btrfsimg_list_partitions_format(path, BTRFSIMG_FORMAT_AUTO, out, max, err, errlen);
}

int btrfsimg_list_partitions_format(const char *path, int format,
				    struct btrfsimg_partition *out, size_t max, char *err,
				    size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (!path || (max && !out))
		return -EINVAL;
	struct btrfsimg_fs *fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	struct btrfsimg_partition *p = NULL;
	char note[512] = "";
	int n = btrfsimg_add_device_file_format(fs, path, format);
	if (n == 0)
		n = parts_load(fs, &fs->devs[0], &p, note, sizeof(note));
	if (n < 0 && err && errlen)
		snprintf(err, errlen, "%s", fs->err);
	else if (n >= 0 && err && errlen) /* damage worked around: the caller says it */
		snprintf(err, errlen, "%s", n ? note : "");
	for (int i = 0; i < n && (size_t)i < max; i++)
		out[i] = p[i];
	free(p);
	bi_devs_close(fs);
	free(fs);
	return n;
}
