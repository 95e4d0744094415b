/* SPDX-License-Identifier: MIT */
/*
 * Evidence containers: EWF (E01), qcow2, VMDK, VHD/VHDX and split raw
 * images, each read through the library made for it (libewf, libqcow,
 * libvmdk, libvhdi) or, for split raw, here. One file per format
 * (ewf.c, qcow.c, vmdk.c, vhdi.c, split.c) fills a struct bi_ctr_ops;
 * container.c holds the table, detection by signature, and the read
 * path every format shares (a cache of decoded blocks, read-ahead for
 * sequential work, and a mutex: the libyal handles are not shared between
 * threads). For EWF and qcow2 a sequential stream is decoded ahead on a
 * background thread of the container's own, through its own handle.
 *
 *   btrfsimg_add_device_file(ev.E01)
 *      -> bi_ctr_detect: signature at 0 (or the VHD footer at the end)
 *      -> bi_ctr_open:   ops->open finds the segments, the virtual size
 *      -> bi_ctr_read:   [cache] -> ops->read (virtual offsets)
 *
 * Every message names the container file and the virtual offset.
 */
#ifndef BI_CONTAINER_H
#define BI_CONTAINER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "btrfsimg.h"

struct bi_ctr;

/* One row of the format table (ctrbase.c): what a format is called and
 * what it needs, whether or not this build reads it. */
#define BI_FORMAT_ALIASES 2
struct bi_format {
	const char *name;			/* btrfsimg_format_name */
	const char *lib;			/* the library and meson option; NULL: none */
	const char *aliases[BI_FORMAT_ALIASES];	/* also taken by btrfsimg_format_parse */
};
/* The row of @format (enum btrfsimg_format), or NULL. */
const struct bi_format *bi_format(int format);

struct bi_ctr_ops {
	int format;  /* enum btrfsimg_format */
	bool cached; /* decoded blocks worth caching (not split raw) */
	/* Open @c->path: fill size, segments, metadata, notes. 0 or a
	 * negative errno with the reason in @err. */
	int (*open)(struct bi_ctr *c, char *err, size_t errlen);
	/* Read [off, off+len) of the virtual disk (inside size). */
	int (*read)(struct bi_ctr *c, uint64_t off, void *buf, size_t len, char *err,
		    size_t errlen);
	void (*close)(struct bi_ctr *c);
	/* Reading ahead on a background thread (NULL: none). ahead_new
	 * makes the thread's own state (NULL when this image cannot be read
	 * that way); ahead_read reads [off, off+len) with @c->mu NOT held
	 * (taking it only around the library calls that share the format's
	 * handle) and returns 0 when every byte was read and verified, else
	 * nonzero: the block is then left to the caller's own read, which
	 * reports the failure as ever. */
	void *(*ahead_new)(struct bi_ctr *c);
	int (*ahead_read)(struct bi_ctr *c, void *st, uint64_t off, uint8_t *buf, size_t len);
	void (*ahead_free)(void *st);
};

/* One key of a container's metadata ("case_number" -> "2026-117"). */
struct bi_ctr_meta {
	char *key, *value;
};

/* One file of a container, and how it is identified (to recognise a
 * segment given again as another argument). */
struct bi_ctr_seg {
	char *name;
	dev_t dev;
	ino_t ino;
	bool present;
};

#define BI_CTR_NOTES 8

struct bi_ctr {
	const struct bi_ctr_ops *ops;
	char *path;		 /* as given */
	uint64_t size;		 /* the virtual disk's bytes */
	void *h;		 /* the format's state */
	struct bi_ctr_seg *segs; /* every file, in order */
	size_t nsegs;
	struct bi_ctr_meta *meta;
	size_t nmeta;
	const char *detail;	   /* static: "monolithicSparse", "dynamic", ... */
	char *notes[BI_CTR_NOTES]; /* damage found at open: missing segments */
	size_t nnotes;
	char *lost;		/* the first missing or truncated file, or NULL */
	bool has_md5, has_sha1; /* hashes stored in the container (EWF) */
	uint8_t md5[16], sha1[20];
	pthread_mutex_t mu;
	/* the block cache (container.c) */
	uint8_t *cache;
	uint64_t *tags;	    /* block number + 1 per slot; 0 empty */
	uint64_t last_miss; /* block of the last miss + 1 (read-ahead) */
	/* the background reader (container.c), all under cmu */
	pthread_mutex_t cmu; /* the cache, the window (container.c) */
	pthread_t ahead;
	pthread_cond_t wake;		/* for the reader: the window moved, or stop */
	pthread_cond_t done;		/* for readers of the cache: a block is in */
	void *ahead_st;			/* ops->ahead_new's state */
	uint8_t *ahead_buf;		/* the one block in flight */
	uint64_t want_lo, want_hi;	/* blocks wanted ahead: [lo, hi) */
	uint64_t busy;			/* block being read ahead + 1; 0 none */
	uint64_t last_b;		/* the block of the last access */
	unsigned resv_lo, resv_n;	/* slots the caller is filling */
	bool ahead_on, ahead_off, stop; /* running; not possible; shut down */
};

/* Cache geometry: direct-mapped blocks of 64 KiB; a sequential run of
 * misses reads ahead BI_CTR_AHEAD blocks in one call to the library. */
#define BI_CTR_BLOCK (64u * 1024)
#define BI_CTR_SLOTS 128u
#define BI_CTR_AHEAD 8u
/* With a background reader: a sequential stream keeps the next
 * BI_CTR_DEPTH blocks (2 MiB) decoded ahead of the reads, one block in
 * flight at a time. */
#define BI_CTR_DEPTH 32u
/* The largest virtual disk opened: offsets are off64_t in every library. */
#define BI_CTR_MAX_SIZE ((uint64_t)INT64_MAX)

/* The format at @path by signature (or, for split raw, by name:
 * NAME.001 with NAME.002 beside it). BTRFSIMG_FORMAT_RAW when none. Reads
 * through @fd (open on @path). Negative errno on a read error. */
int bi_ctr_detect(const char *path, int fd, int *format);
/* Open the container @path as @format (not raw or auto). On failure the
 * reason is in @err, naming the file. Owned by the caller: bi_ctr_free. */
int bi_ctr_open(struct bi_ctr **out, const char *path, int format, char *err, size_t errlen);
void bi_ctr_free(struct bi_ctr *c);
/* Read the virtual disk; @err names the container, the offset and why. */
int bi_ctr_read(struct bi_ctr *c, uint64_t off, void *buf, size_t len, char *err, size_t errlen);
/* Whether the file @st is one of @c's segments. */
bool bi_ctr_holds(const struct bi_ctr *c, dev_t dev, ino_t ino);
/* If @path names a later segment of a set (ev.E02, disk.002), the name
 * of its first segment (malloc'd) when that file exists, else NULL. */
char *bi_ctr_first_segment(const char *path);
/* Whether @format is compiled in. */
bool bi_ctr_supported(int format);

/* ---- for the format files ---- */

int bi_ctr_add_seg(struct bi_ctr *c, const char *name, bool present);
int bi_ctr_add_meta(struct bi_ctr *c, const char *key, const char *value);
void bi_ctr_note(struct bi_ctr *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* dirname(@path) + "/" + @name, unless @name is absolute (malloc'd). */
char *bi_ctr_beside(const char *path, const char *name);
/* Where a file that the image @path names (@name as stored in it: a
 * backing file, a parent, an extent file) is looked for: only in the
 * image's folder. A relative name without ".." is taken beside the image
 * (as qemu-img does); an absolute name or one with a ".." component by its
 * last component beside the image (as libvmdk does for extent files), and
 * *@moved says so. Malloc'd; NULL when out of memory or @name has no last
 * component. */
char *bi_ctr_companion(const char *path, const char *name, bool *moved);
/* Open @path read-only if it is a regular file: a FIFO, a device, a
 * directory or a socket is refused without blocking (the open is
 * O_NONBLOCK until fstat has seen a regular file). The descriptor (owned
 * by the caller), or a negative errno with *@why saying why ("is a FIFO",
 * "is a character device", strerror). */
int bi_ctr_open_regular(const char *path, const char **why);
/* What a file of mode @m that is not a regular file is: "is a FIFO", "is a
 * character device", ... (static). */
const char *bi_ctr_kind(mode_t m);
/* bi_ctr_open_regular, the descriptor closed again: for a name a library
 * opens by itself. 0 or a negative errno with *@why. */
int bi_ctr_check_regular(const char *path, const char **why);

extern const struct bi_ctr_ops bi_ctr_split_ops, bi_ctr_raw_ops;
#ifdef BI_HAVE_EWF
extern const struct bi_ctr_ops bi_ctr_ewf_ops;
#endif
#ifdef BI_HAVE_QCOW
extern const struct bi_ctr_ops bi_ctr_qcow_ops;
#endif
#ifdef BI_HAVE_VMDK
extern const struct bi_ctr_ops bi_ctr_vmdk_ops;
#endif
#ifdef BI_HAVE_VHDI
extern const struct bi_ctr_ops bi_ctr_vhd_ops, bi_ctr_vhdx_ops;
#endif

#endif
