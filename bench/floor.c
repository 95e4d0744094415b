// SPDX-License-Identifier: MIT
/*
 * The disk's floor for a cold walk: read the listed byte ranges of an
 * image ("offset length" lines on stdin, from bench/leaves.py) with
 * O_DIRECT, bypassing the page cache, with many requests in flight (Linux
 * native AIO; 512 unless told), in the order given, and print the time.
 * A walk that reads those bytes from this disk cannot be much faster. The
 * cache must be cold for a fair comparison (bench/run.sh drops it first).
 *
 *     floor IMAGE [IN_FLIGHT] < ranges
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ALIGN 4096
#define MAX_RANGE (8u << 20)

struct range {
	uint64_t off, len;
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static struct range *read_ranges(size_t *n)
{
	size_t cap = 1024;
	struct range *v = malloc(cap * sizeof(*v));
	unsigned long long off, len;
	*n = 0;
	while (v && scanf("%llu %llu", &off, &len) == 2) {
		if (len == 0 || len > MAX_RANGE || off % ALIGN || len % ALIGN) {
			fprintf(stderr, "floor: range %llu+%llu is not %u-aligned or over %u bytes\n",
				off, len, ALIGN, MAX_RANGE);
			exit(2);
		}
		if (*n == cap) {
			cap *= 2;
			v = realloc(v, cap * sizeof(*v));
			if (!v)
				break;
		}
		v[(*n)++] = (struct range){ off, len };
	}
	if (!v) {
		fprintf(stderr, "floor: out of memory\n");
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: floor IMAGE [IN_FLIGHT] < ranges\n");
		return 2;
	}
	int depth = argc > 2 ? atoi(argv[2]) : 512;
	if (depth < 1 || depth > 4096)
		depth = 512;
	size_t n;
	struct range *r = read_ranges(&n);
	uint64_t longest = ALIGN;
	for (size_t i = 0; i < n; i++)
		longest = r[i].len > longest ? r[i].len : longest;
	int fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0) {
		fprintf(stderr, "floor: %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	aio_context_t ctx = 0;
	if (syscall(SYS_io_setup, depth, &ctx) != 0) {
		fprintf(stderr, "floor: io_setup: %s\n", strerror(errno));
		return 2;
	}
	struct iocb *cb = calloc((size_t)depth, sizeof(*cb));
	struct iocb **batch = calloc((size_t)depth, sizeof(*batch));
	struct io_event *ev = calloc((size_t)depth, sizeof(*ev));
	int *idle = calloc((size_t)depth, sizeof(*idle)), nidle = depth;
	void **buf = calloc((size_t)depth, sizeof(*buf));
	for (int i = 0; i < depth; i++) {
		idle[i] = i;
		if (posix_memalign(&buf[i], ALIGN, (size_t)longest) != 0) {
			fprintf(stderr, "floor: out of memory\n");
			return 2;
		}
	}
	uint64_t bytes = 0;
	size_t next = 0, inflight = 0;
	double t0 = now();
	while (next < n || inflight) {
		int k = 0;
		while (next < n && nidle) {
			int s = idle[--nidle];
			cb[s] = (struct iocb){ .aio_data = (uint64_t)s, .aio_lio_opcode = IOCB_CMD_PREAD,
					       .aio_fildes = (uint32_t)fd,
					       .aio_buf = (uint64_t)(uintptr_t)buf[s],
					       .aio_nbytes = r[next].len, .aio_offset = (int64_t)r[next].off };
			batch[k++] = &cb[s];
			next++;
		}
		long sent = k ? syscall(SYS_io_submit, ctx, k, batch) : 0;
		if (sent != k) {
			fprintf(stderr, "floor: io_submit took %ld of %d: %s\n", sent, k,
				sent < 0 ? strerror(errno) : "queue full");
			return 2;
		}
		inflight += (size_t)k;
		long got = syscall(SYS_io_getevents, ctx, 1, depth, ev, NULL);
		if (got < 0 && errno != EINTR) {
			fprintf(stderr, "floor: io_getevents: %s\n", strerror(errno));
			return 2;
		}
		for (long i = 0; i < got; i++) {
			if ((int64_t)ev[i].res <= 0) {
				fprintf(stderr, "floor: read failed: %s\n", strerror((int)-ev[i].res));
				return 2;
			}
			bytes += (uint64_t)ev[i].res;
			idle[nidle++] = (int)ev[i].data;
			inflight--;
		}
	}
	printf("%.3f s %.1f MB %zu reads %d in flight\n", now() - t0, (double)bytes / 1e6, n, depth);
	return 0;
}
