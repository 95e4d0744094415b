// SPDX-License-Identifier: MIT
/* The send stream's encoding (see stream.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "send/stream.h"

#include "base/csum.h"
#include "base/cursor.h"
#include "send/paths.h"

#define CMD_HEADER 10	/* le32 len, le16 cmd, le32 crc */
#define ATTR_HEADER 4

static const char magic[] = "btrfs-stream"; /* and its NUL */

static void room(struct bi_stream *s, size_t more)
{
	if (s->err)
		return;
	if (more > SIZE_MAX - s->len) {
		s->err = -ENOMEM;
		return;
	}
	s->err = bi_grow((void **)&s->buf, &s->cap, s->len + more, 1);
}

static void put(struct bi_stream *s, const void *d, size_t n)
{
	room(s, n);
	if (s->err)
		return;
	memcpy(s->buf + s->len, d, n);
	s->len += n;
}

static int out(struct bi_stream *s, const void *d, size_t n)
{
	int rc = s->write(s->ctx, d, n);
	if (rc < 0)
		s->err = rc;
	else
		s->bytes += n;
	return rc < 0 ? rc : 0;
}

int bi_stream_begin(struct bi_stream *s, uint32_t proto, btrfsimg_write_fn write, void *ctx)
{
	*s = (struct bi_stream){ .write = write, .ctx = ctx, .proto = proto };
	uint8_t head[sizeof(magic) + 4];
	memcpy(head, magic, sizeof(magic));
	bi_put_le32(head + sizeof(magic), proto);
	return out(s, head, sizeof(head));
}

void bi_stream_free(struct bi_stream *s)
{
	free(s->buf);
	s->buf = NULL;
}

void bi_cmd_start(struct bi_stream *s, enum bi_send_cmd cmd)
{
	s->len = 0;
	uint8_t h[CMD_HEADER] = { 0 };
	bi_put_le16(h + 4, (uint16_t)cmd);
	put(s, h, sizeof(h));
}

void bi_attr(struct bi_stream *s, enum bi_send_attr type, const void *data, size_t len)
{
	if (len > UINT16_MAX && !s->err)
		s->err = -E2BIG;
	uint8_t h[ATTR_HEADER];
	bi_put_le16(h, (uint16_t)type);
	bi_put_le16(h + 2, (uint16_t)len);
	put(s, h, sizeof(h));
	if (len)
		put(s, data, len);
}

void bi_attr_u64(struct bi_stream *s, enum bi_send_attr type, uint64_t v)
{
	uint8_t b[8];
	bi_put_le64(b, v);
	bi_attr(s, type, b, sizeof(b));
}

void bi_attr_u32(struct bi_stream *s, enum bi_send_attr type, uint32_t v)
{
	uint8_t b[4];
	bi_put_le32(b, v);
	bi_attr(s, type, b, sizeof(b));
}

void bi_attr_time(struct bi_stream *s, enum bi_send_attr type, int64_t sec, uint32_t nsec)
{
	uint8_t b[12];
	bi_put_le64(b, (uint64_t)sec);
	bi_put_le32(b + 8, nsec);
	bi_attr(s, type, b, sizeof(b));
}

void bi_attr_data(struct bi_stream *s, const void *data, size_t len)
{
	if (s->proto < 2) {
		bi_attr(s, SEND_A_DATA, data, len);
		return;
	}
	uint8_t h[2];
	bi_put_le16(h, SEND_A_DATA);
	put(s, h, sizeof(h));
	put(s, data, len);
}

int bi_cmd_send(struct bi_stream *s)
{
	if (s->err)
		return s->err;
	size_t body = s->len - CMD_HEADER;
	if (body > UINT32_MAX || (s->proto < 2 && s->len > SEND_V1_CMD_MAX))
		return s->err = -E2BIG;
	bi_put_le32(s->buf, (uint32_t)body);
	bi_put_le32(s->buf + 6, 0);
	bi_put_le32(s->buf + 6, bi_crc32c_raw(0, s->buf, s->len));
	return out(s, s->buf, s->len);
}
