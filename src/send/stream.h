/* SPDX-License-Identifier: MIT */
/*
 * The send stream's encoding, as btrfs receive reads it (the kernel's
 * fs/btrfs/send.h, btrfs-progs' common/send-stream.c): "btrfs-stream\0"
 * and a le32 version, then commands: le32 length of what follows the
 * header, le16 command, le32 crc32c (seed 0, not inverted) over the
 * header (crc zeroed) and the attributes; each attribute le16 type, le16
 * length, bytes. In version 2 the data of a write is the command's last
 * attribute and has no length.
 */
#ifndef BI_SEND_STREAM_H
#define BI_SEND_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "btrfsimg.h"

enum bi_send_cmd {
	SEND_C_SUBVOL = 1, SEND_C_SNAPSHOT = 2, SEND_C_MKFILE = 3, SEND_C_MKDIR = 4,
	SEND_C_MKNOD = 5, SEND_C_MKFIFO = 6, SEND_C_MKSOCK = 7, SEND_C_SYMLINK = 8,
	SEND_C_RENAME = 9, SEND_C_LINK = 10, SEND_C_UNLINK = 11, SEND_C_RMDIR = 12,
	SEND_C_SET_XATTR = 13, SEND_C_REMOVE_XATTR = 14, SEND_C_WRITE = 15, SEND_C_CLONE = 16,
	SEND_C_TRUNCATE = 17, SEND_C_CHMOD = 18, SEND_C_CHOWN = 19, SEND_C_UTIMES = 20,
	SEND_C_END = 21, SEND_C_UPDATE_EXTENT = 22,
	SEND_C_FALLOCATE = 23, SEND_C_FILEATTR = 24, SEND_C_ENCODED_WRITE = 25,	/* v2 */
};

enum bi_send_attr {
	SEND_A_UUID = 1, SEND_A_CTRANSID = 2, SEND_A_INO = 3, SEND_A_SIZE = 4, SEND_A_MODE = 5,
	SEND_A_UID = 6, SEND_A_GID = 7, SEND_A_RDEV = 8, SEND_A_CTIME = 9, SEND_A_MTIME = 10,
	SEND_A_ATIME = 11, SEND_A_OTIME = 12, SEND_A_XATTR_NAME = 13, SEND_A_XATTR_DATA = 14,
	SEND_A_PATH = 15, SEND_A_PATH_TO = 16, SEND_A_PATH_LINK = 17, SEND_A_FILE_OFFSET = 18,
	SEND_A_DATA = 19, SEND_A_CLONE_UUID = 20, SEND_A_CLONE_CTRANSID = 21,
	SEND_A_CLONE_PATH = 22, SEND_A_CLONE_OFFSET = 23, SEND_A_CLONE_LEN = 24,
	SEND_A_FALLOCATE_MODE = 25, SEND_A_FILEATTR = 26, SEND_A_UNENCODED_FILE_LEN = 27,
	SEND_A_UNENCODED_LEN = 28, SEND_A_UNENCODED_OFFSET = 29, SEND_A_COMPRESSION = 30,
	SEND_A_ENCRYPTION = 31,
};

/* A v1 command never exceeds 64 KiB; its writes carry 48 KiB. */
#define SEND_V1_CMD_MAX (64u << 10)
#define SEND_WRITE_PIECE (48u << 10)
/* A compressed extent holds at most 128 KiB on disk (BTRFS_MAX_COMPRESSED). */
#define SEND_ENCODED_MAX (128u << 10)

struct bi_stream {
	btrfsimg_write_fn write;
	void *ctx;
	uint32_t proto;
	uint8_t *buf;
	size_t len, cap;
	uint64_t bytes;		/* written so far, header included */
	int err;		/* the first error; later calls do nothing */
};

int bi_stream_begin(struct bi_stream *s, uint32_t proto, btrfsimg_write_fn write, void *ctx);
void bi_stream_free(struct bi_stream *s);
void bi_cmd_start(struct bi_stream *s, enum bi_send_cmd cmd);
void bi_attr(struct bi_stream *s, enum bi_send_attr type, const void *data, size_t len);
void bi_attr_u64(struct bi_stream *s, enum bi_send_attr type, uint64_t v);
void bi_attr_u32(struct bi_stream *s, enum bi_send_attr type, uint32_t v);
void bi_attr_time(struct bi_stream *s, enum bi_send_attr type, int64_t sec, uint32_t nsec);
/* A write's data: the last attribute (v2: without its length). */
void bi_attr_data(struct bi_stream *s, const void *data, size_t len);
/* Finish the command (length, crc) and hand it to the writer. */
int bi_cmd_send(struct bi_stream *s);

#endif
