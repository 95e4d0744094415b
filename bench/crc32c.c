/* SPDX-License-Identifier: MIT */
/*
 * CRC-32C throughput on 16 KiB blocks (the default nodesize; data csums
 * are per 4 KiB sector, also measured). Candidates:
 *   isal      ISA-L crc32_iscsi (runtime dispatch: SSE4.2 crc32 in three
 *             interleaved streams folded with PCLMULQDQ)
 *   sse42     one stream of the SSE4.2 crc32 instruction, 8 bytes a step
 *             (__builtin_ia32_crc32di), written here
 *   table     byte-at-a-time table, written here (the portable floor)
 *   lib       bi_crc32c_raw from libbtrfsimg (what the library ships)
 * plus, for scale, the library's four checksum types on 16 KiB and what
 * sodium_init() changes for BLAKE2b (libsodium picks its SIMD code only
 * there). All candidates are first checked against "123456789" ->
 * 0xE3069283. Standalone: run ./crc32c [seconds per case].
 */
#include <isa-l/crc.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/csum.h"
#include "base/cursor.h"
#include "base/ondisk.h"

typedef uint32_t (*crc_fn)(uint32_t, const uint8_t *, size_t);

static uint32_t crc_isal(uint32_t crc, const uint8_t *p, size_t n)
{
	return crc32_iscsi((unsigned char *)p, (int)n, crc);
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t crc, const uint8_t *p,
							    size_t n)
{
	uint64_t c = crc;
	for (; n >= 8; n -= 8, p += 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
	}
	uint32_t c32 = (uint32_t)c;
	for (; n; n--, p++)
		c32 = __builtin_ia32_crc32qi(c32, *p);
	return c32;
}
#endif

static uint32_t table[256];

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
		table[i] = c;
	}
}

static uint32_t crc_table(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

static uint32_t crc_lib(uint32_t crc, const uint8_t *p, size_t n)
{
	return bi_crc32c_raw(crc, p, n);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* GB/s over @secs seconds of back-to-back calls on @blk-byte blocks. */
static double run_crc(crc_fn f, const uint8_t *buf, size_t size, size_t blk, double secs)
{
	volatile uint32_t sink = 0;
	uint64_t bytes = 0;
	double t0 = now(), t;
	do {
		for (size_t off = 0; off + blk <= size; off += blk)
			sink ^= f(0xFFFFFFFFu, buf + off, blk);
		bytes += size - size % blk;
		t = now();
	} while (t - t0 < secs);
	(void)sink;
	return (double)bytes / (t - t0) / 1e9;
}

static double run_csum(int type, const uint8_t *buf, size_t size, size_t blk, double secs)
{
	uint8_t out[CSUM_SIZE_MAX];
	uint64_t bytes = 0;
	double t0 = now(), t;
	do {
		for (size_t off = 0; off + blk <= size; off += blk)
			bi_csum(type, buf + off, blk, out);
		bytes += size - size % blk;
		t = now();
	} while (t - t0 < secs);
	return (double)bytes / (t - t0) / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	size_t size = 4u << 20;	/* 4 MiB: stays in L2/L3 like a hot cache */
	uint8_t *buf = malloc(size);
	if (!buf)
		return 1;
	for (size_t i = 0; i < size; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	table_init();

	struct { const char *name; crc_fn f; } c[] = {
		{ "isal", crc_isal },
#if defined(__x86_64__)
		{ "sse42", crc_sse42 },
#endif
		{ "table", crc_table },
		{ "lib", crc_lib },
	};
	size_t nc = sizeof(c) / sizeof(c[0]);
	int bad = 0;
	for (size_t i = 0; i < nc; i++) {
		uint32_t v = ~c[i].f(0xFFFFFFFFu, (const uint8_t *)"123456789", 9);
		if (v != 0xE3069283u) {
			printf("%s: check value %08x, expected e3069283\n", c[i].name, v);
			bad = 1;
		}
	}
	if (bad)
		return 1;
	for (size_t i = 0; i < nc; i++)
		printf("crc32c %-6s 16K %6.2f GB/s   4K %6.2f GB/s\n", c[i].name,
		       run_crc(c[i].f, buf, size, 16384, secs),
		       run_crc(c[i].f, buf, size, 4096, secs));

	const char *names[] = { "crc32c", "xxhash64", "sha256", "blake2b" };
	for (int t = 0; t < 4; t++)
		printf("bi_csum %-8s 16K %6.2f GB/s\n", names[t], run_csum(t, buf, size, 16384, secs));
	if (sodium_init() < 0)
		return 1;
	printf("after sodium_init():\n");
	for (int t = 2; t < 4; t++)
		printf("bi_csum %-8s 16K %6.2f GB/s\n", names[t], run_csum(t, buf, size, 16384, secs));
	free(buf);
	return 0;
}
