/* SPDX-License-Identifier: MIT */
/*
 * Bounded little-endian reads of on-disk bytes.
 *
 * Every on-disk structure is read through a cursor: a (pointer, length)
 * window plus a sticky "bad" flag. A read outside the window returns 0 and
 * sets the flag, so a parser can read a whole structure and check once.
 * The check is overflow-safe and always compiled in; values are assembled
 * byte-wise (via memcpy), never by casting image bytes to structs.
 */
#ifndef BI_CURSOR_H
#define BI_CURSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct bi_cur {
	const uint8_t *p;
	size_t len;
	bool bad;
};

static inline struct bi_cur bi_cur_make(const void *p, size_t len)
{
	struct bi_cur c = { (const uint8_t *)p, p ? len : 0, false };
	return c;
}

/* true if [off, off+n) lies inside a window of len bytes (no overflow) */
static inline bool bi_fits(size_t len, size_t off, size_t n)
{
	return off <= len && n <= len - off;
}

/* Same for 64-bit on-disk quantities. */
static inline bool bi_fits64(uint64_t len, uint64_t off, uint64_t n)
{
	return off <= len && n <= len - off;
}

/* Raw little-endian loads: only after a bounds check. */
static inline uint16_t bi_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static inline uint32_t bi_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t bi_le64(const uint8_t *p)
{
	return (uint64_t)bi_le32(p) | (uint64_t)bi_le32(p + 4) << 32;
}

/* Raw big-endian loads, for the formats that store them (LUKS headers,
 * qcow2, VHD): only after a bounds check. */
static inline uint16_t bi_be16(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t bi_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t bi_be64(const uint8_t *p)
{
	return (uint64_t)bi_be32(p) << 32 | bi_be32(p + 4);
}

/* Little-endian writers: for the few places that build on-disk bytes
 * (file handles, test and fuzz fixtures). */
static inline void bi_put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void bi_put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void bi_put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline bool bi_cur_check(struct bi_cur *c, size_t off, size_t n)
{
	if (!bi_fits(c->len, off, n)) {
		c->bad = true;
		return false;
	}
	return true;
}

static inline uint8_t bi_u8(struct bi_cur *c, size_t off)
{
	return bi_cur_check(c, off, 1) ? c->p[off] : 0;
}

static inline uint16_t bi_u16(struct bi_cur *c, size_t off)
{
	return bi_cur_check(c, off, 2) ? bi_le16(c->p + off) : 0;
}

static inline uint32_t bi_u32(struct bi_cur *c, size_t off)
{
	return bi_cur_check(c, off, 4) ? bi_le32(c->p + off) : 0;
}

static inline uint64_t bi_u64(struct bi_cur *c, size_t off)
{
	return bi_cur_check(c, off, 8) ? bi_le64(c->p + off) : 0;
}

/* Pointer to n bytes at off, or NULL (and bad) if they do not fit. */
static inline const uint8_t *bi_bytes(struct bi_cur *c, size_t off, size_t n)
{
	return bi_cur_check(c, off, n) ? c->p + off : NULL;
}

/* Copy n bytes at off into dst; zero-fills dst and sets bad if out of range. */
static inline void bi_copy(struct bi_cur *c, size_t off, void *dst, size_t n)
{
	if (bi_cur_check(c, off, n))
		memcpy(dst, c->p + off, n);
	else
		memset(dst, 0, n);
}

/* A sub-window [off, off+n); empty and bad (in both) if it does not fit. */
static inline struct bi_cur bi_sub(struct bi_cur *c, size_t off, size_t n)
{
	struct bi_cur s = { NULL, 0, true };
	if (bi_cur_check(c, off, n)) {
		s.p = c->p + off;
		s.len = n;
		s.bad = false;
	}
	return s;
}

/* Checked arithmetic on on-disk values. */
static inline bool bi_add_ok(uint64_t a, uint64_t b, uint64_t *r)
{
	return !__builtin_add_overflow(a, b, r);
}

static inline bool bi_mul_ok(uint64_t a, uint64_t b, uint64_t *r)
{
	return !__builtin_mul_overflow(a, b, r);
}

#endif
