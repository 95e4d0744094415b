/* SPDX-License-Identifier: MIT */
/*
 * What every container format file shares (container.h): format names,
 * and filling a struct bi_ctr's segments, metadata and damage notes. Kept
 * apart from container.c, which calls the formats, so that the formats
 * call down, not back up.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "1-image/container.h"

static const char *const format_names[BI_NFORMATS] = {
	[BTRFSIMG_FORMAT_AUTO] = "auto",   [BTRFSIMG_FORMAT_RAW] = "raw",
	[BTRFSIMG_FORMAT_SPLIT] = "split", [BTRFSIMG_FORMAT_EWF] = "ewf",
	[BTRFSIMG_FORMAT_QCOW2] = "qcow2", [BTRFSIMG_FORMAT_VMDK] = "vmdk",
	[BTRFSIMG_FORMAT_VHD] = "vhd",	   [BTRFSIMG_FORMAT_VHDX] = "vhdx",
};

const char *btrfsimg_format_name(int format)
{
	if (format < 0 || (size_t)format >= BI_NFORMATS)
		return NULL;
	return format_names[format];
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
	for (size_t i = 0; name && i < BI_NFORMATS; i++)
		if (!strcmp(name, format_names[i]))
			return (int)i;
	if (name && (!strcmp(name, "e01") || !strcmp(name, "E01")))
		return BTRFSIMG_FORMAT_EWF;
	if (name && !strcmp(name, "qcow"))
		return BTRFSIMG_FORMAT_QCOW2;
	return -EINVAL;
}
