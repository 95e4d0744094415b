/* SPDX-License-Identifier: MIT */
/*
 * What every container format file shares (container.h): the table of
 * formats (names, aliases, the library each needs),
 * and filling a struct bi_ctr's segments, metadata and damage notes. Kept
 * apart from container.c, which calls the formats, so that the formats
 * call down, not back up.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/container.h"

/* The formats, one row each: the one list every name comes from (the
 * CLI's --format, its help and messages, the completion through
 * `btrfsimg --list-formats`; the manual, which tests/test_cli.py checks
 * against it). A new format is a row here, its enumerator in btrfsimg.h,
 * its ops in container.c's table. */
static const struct bi_format formats[BTRFSIMG_FORMAT_COUNT] = {
	[BTRFSIMG_FORMAT_AUTO] = { "auto", NULL, { NULL } },
	[BTRFSIMG_FORMAT_RAW] = { "raw", NULL, { NULL } },
	[BTRFSIMG_FORMAT_SPLIT] = { "split", NULL, { NULL } },
	[BTRFSIMG_FORMAT_EWF] = { "ewf", "libewf (meson -Dewf)", { "e01", "E01" } },
	[BTRFSIMG_FORMAT_QCOW2] = { "qcow2", "libqcow (meson -Dqcow)", { "qcow" } },
	[BTRFSIMG_FORMAT_VMDK] = { "vmdk", "libvmdk (meson -Dvmdk)", { NULL } },
	[BTRFSIMG_FORMAT_VHD] = { "vhd", "libvhdi (meson -Dvhdi)", { NULL } },
	[BTRFSIMG_FORMAT_VHDX] = { "vhdx", "libvhdi (meson -Dvhdi)", { NULL } },
};

const struct bi_format *bi_format(int format)
{
	if (format < 0 || format >= BTRFSIMG_FORMAT_COUNT)
		return NULL;
	return &formats[format];
}

const char *btrfsimg_format_name(int format)
{
	const struct bi_format *f = bi_format(format);
	return f ? f->name : NULL;
}

char *bi_ctr_beside(const char *path, const char *name)
{
	if (name[0] == '/')
		return strdup(name);
	const char *slash = strrchr(path, '/');
	size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
	char *s = malloc(dl + strlen(name) + 1);
	if (s) {
		memcpy(s, path, dl);
		strcpy(s + dl, name);
	}
	return s;
}

/* Whether @name has a ".." component (would climb out of a folder). */
static bool climbs(const char *name)
{
	for (const char *p = name; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return true;
		p += n;
		p += *p == '/';
	}
	return false;
}

char *bi_ctr_companion(const char *path, const char *name, bool *moved)
{
	*moved = false;
	if (name[0] != '/' && !climbs(name))
		return bi_ctr_beside(path, name); /* as qemu-img resolves it */
	const char *base = strrchr(name, '/');
	base = base ? base + 1 : name;
	if (!*base || !strcmp(base, "..") || !strcmp(base, "."))
		return NULL;
	*moved = true;
	return bi_ctr_beside(path, base);
}

const char *bi_ctr_kind(mode_t m)
{
	return S_ISFIFO(m)   ? "is a FIFO"
	       : S_ISCHR(m)  ? "is a character device"
	       : S_ISBLK(m)  ? "is a block device"
	       : S_ISDIR(m)  ? "is a directory"
	       : S_ISSOCK(m) ? "is a socket"
			     : "is not a regular file";
}

int bi_ctr_open_regular(const char *path, const char **why)
{
	/* O_NONBLOCK: an open of a FIFO with no writer returns at once
	 * instead of waiting for one; O_NOCTTY: a terminal named here does
	 * not become ours. Both only matter until fstat has refused it. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	if (fd < 0) {
		int en = errno;
		*why = strerror(en);
		return -en;
	}
	if (fstat(fd, &st) != 0) {
		int en = errno;
		*why = strerror(en);
		close(fd);
		return -en;
	}
	if (!S_ISREG(st.st_mode)) {
		*why = bi_ctr_kind(st.st_mode);
		close(fd);
		return -EINVAL;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
		*why = strerror(errno);
		close(fd);
		return -EIO;
	}
	*why = NULL;
	return fd;
}

int bi_ctr_check_regular(const char *path, const char **why)
{
	int fd = bi_ctr_open_regular(path, why);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

int bi_ctr_add_seg(struct bi_ctr *c, const char *name, bool present)
{
	if (c->nsegs >= 100000)
		return -E2BIG;
	struct bi_ctr_seg *n = realloc(c->segs, (c->nsegs + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	c->segs = n;
	struct bi_ctr_seg *s = &n[c->nsegs];
	memset(s, 0, sizeof(*s));
	s->name = strdup(name);
	if (!s->name)
		return -ENOMEM;
	struct stat st;
	s->present = present && stat(name, &st) == 0;
	if (s->present) {
		s->dev = st.st_dev;
		s->ino = st.st_ino;
	}
	c->nsegs++;
	return 0;
}

int bi_ctr_add_meta(struct bi_ctr *c, const char *key, const char *value)
{
	struct bi_ctr_meta *n = realloc(c->meta, (c->nmeta + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	c->meta = n;
	n[c->nmeta].key = strdup(key);
	n[c->nmeta].value = strdup(value);
	if (!n[c->nmeta].key || !n[c->nmeta].value) {
		free(n[c->nmeta].key);
		free(n[c->nmeta].value);
		return -ENOMEM;
	}
	c->nmeta++;
	return 0;
}

void bi_ctr_note(struct bi_ctr *c, const char *fmt, ...)
{
	if (c->nnotes >= BI_CTR_NOTES)
		return;
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	c->notes[c->nnotes] = strdup(buf);
	if (c->notes[c->nnotes])
		c->nnotes++;
}

int btrfsimg_format_parse(const char *name)
{
	for (int i = 0; name && i < BTRFSIMG_FORMAT_COUNT; i++) {
		if (!strcmp(name, formats[i].name))
			return i;
		for (size_t k = 0; k < BI_FORMAT_ALIASES && formats[i].aliases[k]; k++)
			if (!strcmp(name, formats[i].aliases[k]))
				return i;
	}
	return -EINVAL;
}
