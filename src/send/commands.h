/* SPDX-License-Identifier: MIT */
/*
 * The commands a send stream is made of, as full and incremental streams
 * both write them: one function per command or group (an inode's
 * creation, its data, its owner and mode, its times), each taking paths
 * as the receiving side has them at that point of the stream.
 */
#ifndef BI_SEND_COMMANDS_H
#define BI_SEND_COMMANDS_H

#include <stdbool.h>
#include <stdint.h>

#include "btrfsimg.h"
#include "send/paths.h"
#include "send/stream.h"

struct sent_extent {
	uint64_t disk_bytenr;
	uint64_t pos, len;	/* bytes [pos, pos + len) of the disk extent's data */
	uint64_t file_offset;	/* where they are in the file sent */
	size_t path;		/* index in send::paths */
};

struct bi_send {
	btrfsimg_fs *fs;
	const struct btrfsimg_send_opts *o;
	struct bi_stream st;
	const struct btrfsimg_subvol *sv;
	const struct btrfsimg_subvol *parent;	/* incremental: what the receiver holds */
	const struct btrfsimg_subvol **sources;	/* clones may come from: parent, clone sources */
	size_t nsources;
	struct btrfsimg_inode *inodes;
	size_t ninodes, cap;
	struct sent_extent *ext;
	size_t next, extcap;
	struct bi_bytes *paths;	/* the files clone sources are read from */
	size_t npaths, pathcap;
	uint32_t sectorsize;
	uint8_t *buf;
	uint8_t *enc;		/* a compressed extent's bytes (--compressed-data) */
	struct btrfsimg_send_stats *stats;
};

/* "o<ino>-<gen>-<k>": where an inode waits while the tree around it moves
 * (the kernel's orphan names), with the first k (from 0) whose name is
 * free at the top of the sent subvolume and of the parent. The same
 * answer for the same inode every time. */
int bi_send_orphan_name(struct bi_send *s, const struct btrfsimg_inode *ino,
			struct bi_bytes *out);
void bi_send_attr_path(struct bi_stream *st, enum bi_send_attr a, const struct bi_bytes *p);
/* subvol, or snapshot (of the parent) for an incremental stream */
int bi_send_subvol(struct bi_send *s);
int bi_send_rename(struct bi_send *s, const struct bi_bytes *from, const struct bi_bytes *to);
/* mkfile, mkdir, mknod, mkfifo, mksock or symlink, as @ino's type says */
int bi_send_create(struct bi_send *s, const struct btrfsimg_inode *ino, const struct bi_bytes *path);
/* xattrs (every one: set), owner, and mode (not for a symlink) */
int bi_send_owner_mode(struct bi_send *s, const struct btrfsimg_inode *ino,
		       const struct bi_bytes *path);
int bi_send_times(struct bi_send *s, const struct btrfsimg_inode *ino, const struct bi_bytes *path);
/* The file's bytes [start, end) as writes. */
int bi_send_write(struct bi_send *s, const struct btrfsimg_inode *ino, const struct bi_bytes *path,
		  uint64_t start, uint64_t end);
/* After a file's data could not all be read: @rc itself when the stream
 * cannot go on (the writer failed, memory ran out), else 0, the file
 * named as damage (its bytes from there on are not in the stream, nor its
 * size: nothing unread is sent as zeros) and counted. */
int bi_send_survive(struct bi_send *s, int rc, const struct btrfsimg_inode *ino,
		    const struct bi_bytes *path);
/* One extent record of a regular file as a full stream sends it: a clone
 * of bytes sent before in this stream or held by the parent or a clone
 * source, an encoded write (protocol 2, compressed), or its bytes; holes
 * and preallocated space are left alone. */
int bi_send_extent(struct bi_send *s, const struct btrfsimg_inode *ino,
		   const struct bi_bytes *path, const struct btrfsimg_extent *e);
/* All of a regular file's data (clones of what was sent before, encoded
 * writes with compressed data), then its size. */
int bi_send_data(struct bi_send *s, const struct btrfsimg_inode *ino, const struct bi_bytes *path);

#endif
