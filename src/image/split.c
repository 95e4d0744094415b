/* SPDX-License-Identifier: MIT */
/*
 * Split raw images: the disk's bytes cut into files NAME.001, NAME.002, ...
 * (FTK Imager, `split -d`; NAME.000 first works too), found by name beside
 * the first. Every segment but the last holds the same number of bytes,
 * the first one's; a missing segment (one after it exists) or a short one
 * in the middle is reported, and reads of what it held fail naming it.
 * Given a name without a number (--format split), the file alone is the
 * disk.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/container.h"

/* Beyond a missing segment, look this far for later ones. */
#define SPLIT_GAP 64
#define SPLIT_MAX 100000

struct split {
	size_t n;
	int *fd;	/* -1: missing */
	uint64_t *have; /* bytes in the file */
	uint64_t unit;	/* bytes per segment (the first one's) */
};

static char *seg_name(const char *path, size_t at, unsigned width, unsigned long num)
{
	char *s = malloc(at + 32);
	if (s)
		snprintf(s, at + 32, "%.*s%0*lu", (int)at, path, (int)width, num);
	return s;
}

static bool seg_exists(const char *name)
{
	struct stat st;
	return stat(name, &st) == 0 && S_ISREG(st.st_mode);
}

/* A later segment that is there but not a regular file (a FIFO, a device):
 * refused, not taken for a missing one. */
static int seg_odd(struct bi_ctr *c, const char *name, char *err, size_t errlen)
{
	struct stat st;
	if (stat(name, &st) != 0 || S_ISREG(st.st_mode))
		return 0;
	snprintf(err, errlen,
		 "split image '%s': segment '%s' %s: refused (only a regular file is read)",
		 c->path, name, bi_ctr_kind(st.st_mode));
	return -EINVAL;
}

/* The names of the set, missing ones included: the run from @path on,
 * then any found within SPLIT_GAP after a gap. */
static int split_names(struct bi_ctr *c, char *err, size_t errlen)
{
	const char *path = c->path;
	if (c->ops->format == BTRFSIMG_FORMAT_RAW)
		return bi_ctr_add_seg(c, path, true);
	size_t n = strlen(path), at = n;
	while (at > 0 && path[at - 1] >= '0' && path[at - 1] <= '9')
		at--;
	if (n - at < 2 || n - at > 6 || at == 0 || path[at - 1] != '.')
		return bi_ctr_add_seg(c, path, true);
	unsigned width = (unsigned)(n - at);
	unsigned long first = strtoul(path + at, NULL, 10), last = first;
	for (unsigned long k = first + 1, gap = 0; gap < SPLIT_GAP && k - first < SPLIT_MAX; k++) {
		char *s = seg_name(path, at, width, k);
		if (!s)
			return -ENOMEM;
		bool yes = seg_exists(s);
		free(s);
		if (yes) {
			last = k;
			gap = 0;
		} else {
			gap++;
		}
	}
	for (unsigned long k = first; k <= last; k++) {
		char *s = seg_name(path, at, width, k);
		int rc = !s ? -ENOMEM : k == first ? 0 : seg_odd(c, s, err, errlen);
		if (rc == 0)
			rc = bi_ctr_add_seg(c, s, seg_exists(s));
		free(s);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void split_close(struct bi_ctr *c)
{
	struct split *s = c->h;
	for (size_t i = 0; i < s->n; i++)
		if (s->fd[i] >= 0)
			close(s->fd[i]);
	free(s->fd);
	free(s->have);
	free(s);
	c->h = NULL;
}

static int split_files(struct bi_ctr *c, struct split *s, char *err, size_t errlen)
{
	for (size_t i = 0; i < s->n; i++) {
		s->fd[i] = -1;
		if (!c->segs[i].present) {
			bi_ctr_note(c, "split image '%s': segment '%s' is missing", c->path,
				    c->segs[i].name);
			continue;
		}
		/* the first is the file given (a device is fine); the others are
		 * found by name: only regular files, opened without blocking */
		const char *why = NULL;
		s->fd[i] = i == 0 ? open(c->segs[i].name, O_RDONLY | O_CLOEXEC)
				  : bi_ctr_open_regular(c->segs[i].name, &why);
		struct stat st;
		if (s->fd[i] < 0 || fstat(s->fd[i], &st) != 0) {
			int e = s->fd[i] < 0 && why ? -s->fd[i] : errno;
			if (e == EINVAL && why)
				snprintf(err, errlen,
					 "split image '%s': segment '%s' %s: refused (only a "
					 "regular file is read)",
					 c->path, c->segs[i].name, why);
			else
				snprintf(err, errlen,
					 "split image '%s': cannot open segment '%s': %s", c->path,
					 c->segs[i].name, why ? why : strerror(e));
			return -e;
		}
		s->have[i] = (uint64_t)st.st_size;
	}
	if (!c->segs[0].present || s->have[0] == 0) {
		snprintf(err, errlen, "split image '%s': its first segment is %s", c->path,
			 c->segs[0].present ? "empty" : "missing");
		return -EIO;
	}
	return 0;
}

static int split_open(struct bi_ctr *c, char *err, size_t errlen)
{
	err[0] = '\0';
	int rc = split_names(c, err, errlen);
	struct split *s = rc < 0 ? NULL : calloc(1, sizeof(*s));
	if (!s) {
		if (!err[0])
			snprintf(err, errlen, "split image '%s': out of memory", c->path);
		return rc < 0 ? rc : -ENOMEM;
	}
	c->h = s;
	s->n = c->nsegs;
	s->fd = calloc(s->n, sizeof(*s->fd));
	s->have = calloc(s->n, sizeof(*s->have));
	if (!s->fd || !s->have) {
		snprintf(err, errlen, "split image '%s': out of memory", c->path);
		return -ENOMEM;
	}
	rc = split_files(c, s, err, errlen);
	if (rc < 0)
		return rc;
	s->unit = s->have[0];
	for (size_t i = 1; i + 1 < s->n; i++)
		if (c->segs[i].present && s->have[i] != s->unit)
			bi_ctr_note(c,
				    "split image '%s': segment '%s' holds %" PRIu64
				    " bytes, expect %" PRIu64 " as the first (truncated?)",
				    c->path, c->segs[i].name, s->have[i], s->unit);
	uint64_t tail = s->fd[s->n - 1] >= 0 ? s->have[s->n - 1] : s->unit;
	if (s->n - 1 > (UINT64_MAX - tail) / s->unit) {
		snprintf(err, errlen, "split image '%s': too large", c->path);
		return -EFBIG;
	}
	c->size = (uint64_t)(s->n - 1) * s->unit + tail;
	c->detail = s->n > 1 ? "segments" : "";
	return 0;
}

static int split_read(struct bi_ctr *c, uint64_t off, void *buf, size_t len, char *err,
		      size_t errlen)
{
	struct split *s = c->h;
	uint8_t *p = buf;
	while (len > 0) {
		size_t i = (size_t)(off / s->unit);
		if (i >= s->n)
			i = s->n - 1; /* the last segment may be longer */
		uint64_t in = off - (uint64_t)i * s->unit;
		uint64_t room = i + 1 < s->n ? s->unit - in : UINT64_MAX;
		size_t n = room < len ? (size_t)room : len;
		if (s->fd[i] < 0 || in + n > s->have[i]) {
			snprintf(err, errlen,
				 "offset %" PRIu64 " lies in segment '%s' "
				 "(its byte %" PRIu64 "), which %s",
				 off, c->segs[i].name, in,
				 s->fd[i] < 0 ? "is missing" : "ends before it (truncated)");
			return -EIO;
		}
		for (size_t done = 0; done < n;) {
			ssize_t r = pread(s->fd[i], p + done, n - done, (off_t)(in + done));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				snprintf(err, errlen, "segment '%s' at byte %" PRIu64 ": %s",
					 c->segs[i].name, in + done,
					 r < 0 ? strerror(errno) : "ended early");
				return -EIO;
			}
			done += (size_t)r;
		}
		p += n;
		off += n;
		len -= n;
	}
	return 0;
}

const struct bi_ctr_ops bi_ctr_split_ops = {
	.format = BTRFSIMG_FORMAT_SPLIT,
	.cached = false,
	.open = split_open,
	.read = split_read,
	.close = split_close,
};

/* A raw image as a container of one file (btrfsimg_image_open). */
const struct bi_ctr_ops bi_ctr_raw_ops = {
	.format = BTRFSIMG_FORMAT_RAW,
	.cached = false,
	.open = split_open,
	.read = split_read,
	.close = split_close,
};
