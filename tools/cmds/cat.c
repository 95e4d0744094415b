// SPDX-License-Identifier: MIT
/* btrfsimg cat: one file's bytes on standard output. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "common/recovered.h"

#define CHUNK (1u << 20)

static int resolve(struct cli *c, uint64_t *subvol, uint64_t *obj)
{
	if (c->inode) {
		*subvol = c->inode_subvol;
		*obj = c->inode_objectid;
		return 0;
	}
	struct btrfsimg_dirent d;
	int rc = btrfsimg_path_lookup(c->fs, c->have_subvol ? c->subvol : 5, c->path, &d);
	if (rc < 0)
		return rc;
	*subvol = d.target_subvol;
	*obj = d.target_objectid;
	return 0;
}

/* After a failed 1 MiB read at @off: write the good 4 KiB pieces before
 * the first bad one, as the kernel's read() would return them. Returns the
 * bytes written; the handle's message is the first error again. */
static uint64_t salvage(struct cli *c, uint64_t subvol, uint64_t obj, uint64_t off,
			uint64_t size, uint8_t *buf)
{
	uint64_t done = 0;
	while (off + done < size && done < CHUNK) {
		size_t got = 0, want = size - off - done < 4096 ? (size_t)(size - off - done) : 4096;
		if (btrfsimg_file_read(c->fs, subvol, obj, off + done, buf, want, &got) < 0 ||
		    got == 0 || fwrite(buf, 1, got, stdout) != got)
			break;
		done += got;
	}
	return done;
}

/* The bytes cat writes: all of them, unless the size is past the bound
 * (16 bytes per byte of the devices, btrfsimg_file_size_bound): then up to
 * the end of the file's data, at most the bound, and the cut is said, as
 * the zeros stand on a size that may be forged (years of them for 2^62). */
static int cat_length(struct cli *c, uint64_t subvol, uint64_t obj, uint64_t size,
		      uint64_t *len)
{
	uint64_t end;
	int rc = btrfsimg_file_length(c->fs, subvol, obj, len, &end);
	if (rc != 1)
		return rc;
	cli_warn("cat: subvol=%" PRIu64 " inode=%" PRIu64 " size=%" PRIu64 " is more than %"
		 PRIu64 " (16 bytes per byte of the devices) and its data ends at byte %" PRIu64
		 ": written up to byte %" PRIu64 "; the rest, under a size that may be forged,"
		 " left out",
		 subvol, obj, size, btrfsimg_file_size_bound(c->fs), end, *len);
	c->errors++;
	return 0;
}

static int cmd_cat(struct cli *c)
{
	if (c->deleted_id)
		return rec_cat(c);
	uint64_t subvol, obj;
	int rc = resolve(c, &subvol, &obj);
	struct btrfsimg_inode ino;
	if (rc == 0)
		rc = btrfsimg_inode_get(c->fs, subvol, obj, &ino);
	if (rc < 0)
		return cli_fail(c, rc, "cat");
	if (!S_ISREG(ino.mode)) {
		cli_warn("cat: %" PRIu64 ":%" PRIu64 " is not a regular file (mode %06o)", subvol,
			 obj, ino.mode);
		return EXIT_FAILED;
	}
	uint64_t size = 0;
	if ((rc = cat_length(c, subvol, obj, ino.size, &size)) < 0)
		return cli_fail(c, rc, "cat");
	uint8_t *buf = malloc(CHUNK);
	if (!buf)
		return cli_fail(c, -ENOMEM, "cat");
	uint64_t off = 0;
	while (off < size) {
		size_t got = 0;
		size_t want = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
		rc = btrfsimg_file_read(c->fs, subvol, obj, off, buf, want, &got);
		if (rc < 0) {
			char err[512];
			snprintf(err, sizeof(err), "%s", btrfsimg_errmsg(c->fs));
			off += salvage(c, subvol, obj, off, size, buf);
			if (off)
				cli_warn("cat: stopped at byte %" PRIu64 " of %" PRIu64 ": %s", off,
					 size, err);
			break;
		}
		if (got == 0)
			break;
		if (fwrite(buf, 1, got, stdout) != got) {
			rc = -EIO;
			break;
		}
		off += got;
	}
	free(buf);
	if (rc < 0 && off == 0)
		return cli_fail(c, rc, "cat");
	/* some bytes out, then an error (already said): partial, exit 1 */
	return rc < 0 ? EXIT_DAMAGED : cli_status(c);
}

static int cat_check(struct cli *c)
{
	if (cli_need_images(c, 1, "IMAGE...") || cli_inode_alone(c))
		return EXIT_USAGE;
	if (c->deleted_id && (c->path || c->inode || c->have_subvol)) {
		cli_warn("cat: --deleted ID names the version by itself: give it alone");
		return EXIT_USAGE;
	}
	if (!c->path && !c->inode && !c->deleted_id) {
		cli_warn("cat: give --path P, --inode SUBVOL:OBJECTID or --deleted ID");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static const struct cmd_option cat_options[] = {
	{ OPT_SUBVOL, "resolve --path in subvolume ID (default 5)" },
	{ OPT_PATH, "the file at path P" },
	{ OPT_INODE, "the file of objectid O in subvolume S" },
	{ OPT_NO_VERIFY, "do not verify data checksums; with --deleted: ranges\n"
			 "whose checksums fail as on disk, not zeros (said)" },
	{ OPT_DELETED_ID, "a recovered version (its id from 'btrfsimg deleted');\n"
			  "untrusted ranges as zeros, exit 1 when partial" },
	CMD_IMAGE_OPTIONS, { OPT_GENERATION, NULL },
	{ OPT_END, NULL },
};

const struct cmd_struct cmd_struct_cat = {
	.name = "cat",
	.summary = "one file's contents (--path P or --inode SUBVOL:OBJECTID)",
	.args = "IMAGE...",
	.about = "One regular file's bytes on standard output. On a bad sector it writes\n"
		 "what comes before it, as read() would, and exits 1.",
	.examples = "btrfsimg cat --path etc/fstab disk.img > fstab\n"
		    "btrfsimg cat --subvol 256 --path home/notes.txt disk.img\n"
		    "btrfsimg cat --inode 5:258 disk.img | sha256sum\n"
		    "btrfsimg cat --deleted 5-260-7-24f34ba0 disk.img > recovered",
	.options = cat_options,
	.check = cat_check,
	.run = cmd_cat,
};
