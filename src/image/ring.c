/* SPDX-License-Identifier: MIT */
/*
 * The ring reader of a plain image file (see ring.h).
 *
 * O_DIRECT wants the offset, the length and the buffer aligned to the
 * logical block size of the file's device; ALIGN (4096) covers every
 * device met in practice. A request is widened to aligned bounds and the
 * caller's pointer points into the widened buffer, so nothing is copied.
 * A read the kernel refuses (EINVAL) switches the ring to reading the
 * file through the page cache, from then on. The file is opened again
 * through /proc/self/fd, so it is the same file whatever its path became.
 *
 * READERS threads take the requests in the order submitted, each read
 * into its own slot: the device is kept busy with large sequential reads
 * (as `dd iflag=direct` does, but two at once) while the caller checks the
 * slot it holds. Slot states move FREE -> QUEUED (caller) -> READING ->
 * DONE (a thread) -> FREE (caller, when it asks for the next one); the
 * mutex guards the states, rd and direct; the rest of a slot belongs to
 * whoever its state says.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "image/ring.h"

#ifdef BI_HAVE_URING
#include <liburing.h>
#endif

#include "base/cursor.h"

#define ALIGN	  4096u
#define MAX_LEN	  (256u << 20)
#define MAX_DEPTH 16u

/* Reading threads: two reads in flight kept this machine's virtio disk
 * 10-15% busier than one (two dd processes on the two halves of a file
 * against one dd over it). */
#define READERS 2

enum { FREE, QUEUED, READING, DONE };

struct slot {
	uint8_t *buf;
	uint64_t off; /* the request, as the caller gave it */
	size_t len;
	int state;
	int rc;	     /* when DONE: 0 or a negative errno */
	size_t skip; /* when DONE and 0: where the bytes start in buf */
};

struct bi_ring {
	int dfd;	     /* the O_DIRECT descriptor, or -1 */
	int fd;		     /* the device's own (buffered) descriptor */
	bool direct;	     /* the thread reads dfd (cleared on EINVAL) */
	uint64_t base, size; /* the device's window of the file */
	size_t maxlen;
	unsigned n;
	struct slot slot[MAX_DEPTH];
	/* the caller's: */
	unsigned tail, head, used;
	int held; /* the slot bi_ring_next last returned, or -1 */
	/* the threads': */
	unsigned rd; /* the next slot to read */
	pthread_t th[READERS];
	unsigned started;
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	bool stop;
};

/* pread until @want bytes or the end of the file; the bytes got, or -errno. */
static ssize_t read_full(int fd, uint8_t *buf, size_t want, uint64_t at)
{
	size_t got = 0;
	while (got < want) {
		ssize_t n = pread(fd, buf + got, want - got, (off_t)(at + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return got ? (ssize_t)got : -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Read slot @s's request (with O_DIRECT if @direct); its rc and skip.
 * Thread side, unlocked; true when O_DIRECT was refused (the caller then
 * clears r->direct, locked). */
static bool fill(struct bi_ring *r, struct slot *s, bool direct)
{
	uint64_t abs;
	s->skip = 0;
	if (!bi_fits64(r->size, s->off, s->len) || !bi_add_ok(r->base, s->off, &abs) ||
	    abs > INT64_MAX - 2 * (uint64_t)ALIGN) {
		s->rc = -EINVAL;
		return false;
	}
	if (direct) {
		uint64_t a = abs / ALIGN * ALIGN;
		size_t want = (size_t)((abs + s->len + ALIGN - 1) / ALIGN * ALIGN - a);
		size_t skip = (size_t)(abs - a);
		ssize_t n = read_full(r->dfd, s->buf, want, a);
		if (n >= 0) {
			/* the file's last block may be partial: only the bytes
			 * asked for count */
			s->rc = (size_t)n >= skip + s->len ? 0 : -EIO;
			s->skip = skip;
			return false;
		}
		if (n != -EINVAL) {
			s->rc = (int)n;
			return false;
		}
	}
	ssize_t n = read_full(r->fd, s->buf, s->len, abs);
	s->rc = n < 0 ? (int)n : (size_t)n == s->len ? 0 : -EIO;
	return direct; /* refused: through the page cache from now on */
}

static void *reader(void *arg)
{
	struct bi_ring *r = arg;
	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (!r->stop && r->slot[r->rd].state != QUEUED)
			pthread_cond_wait(&r->work, &r->mu);
		if (r->stop)
			break;
		struct slot *s = &r->slot[r->rd];
		s->state = READING;
		r->rd = (r->rd + 1) % r->n;
		bool direct = r->direct;
		pthread_mutex_unlock(&r->mu);
		bool refused = fill(r, s, direct);
		pthread_mutex_lock(&r->mu);
		if (refused)
			r->direct = false;
		s->state = DONE;
		pthread_cond_broadcast(&r->done);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

struct bi_ring *bi_ring_open(const struct bi_dev *d, size_t maxlen, unsigned depth, bool cached)
{
	if (d->fd < 0 || d->ctr || d->vread || d->rfn || d->mem || maxlen == 0 ||
	    maxlen > MAX_LEN || depth < 2 || depth > MAX_DEPTH)
		return NULL;
	struct bi_ring *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->fd = d->fd;
	r->base = d->base;
	r->size = d->size;
	r->maxlen = maxlen;
	r->n = depth;
	r->held = -1;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", d->fd);
	r->dfd = cached ? -1 : open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	r->direct = r->dfd >= 0;
	bool ok = pthread_mutex_init(&r->mu, NULL) == 0;
	if (ok && pthread_cond_init(&r->work, NULL) != 0) {
		pthread_mutex_destroy(&r->mu);
		ok = false;
	}
	if (ok && pthread_cond_init(&r->done, NULL) != 0) {
		pthread_cond_destroy(&r->work);
		pthread_mutex_destroy(&r->mu);
		ok = false;
	}
	if (!ok) {
		if (r->dfd >= 0)
			close(r->dfd);
		free(r);
		return NULL;
	}
	for (unsigned i = 0; i < depth; i++)
		if (posix_memalign((void **)&r->slot[i].buf, ALIGN, maxlen + 2 * ALIGN) != 0) {
			r->slot[i].buf = NULL;
			bi_ring_close(r);
			return NULL;
		}
	for (; r->started < READERS; r->started++)
		if (pthread_create(&r->th[r->started], NULL, reader, r) != 0)
			break;
	if (!r->started) {
		bi_ring_close(r);
		return NULL;
	}
	return r;
}

void bi_ring_close(struct bi_ring *r)
{
	if (!r)
		return;
	if (r->started) {
		pthread_mutex_lock(&r->mu);
		r->stop = true;
		pthread_cond_broadcast(&r->work);
		pthread_mutex_unlock(&r->mu);
		for (unsigned i = 0; i < r->started; i++)
			pthread_join(r->th[i], NULL);
	}
	pthread_cond_destroy(&r->done);
	pthread_cond_destroy(&r->work);
	pthread_mutex_destroy(&r->mu);
	if (r->dfd >= 0)
		close(r->dfd);
	for (unsigned i = 0; i < r->n; i++)
		free(r->slot[i].buf);
	free(r);
}

bool bi_ring_room(const struct bi_ring *r)
{
	return r->used < r->n;
}

bool bi_ring_direct(const struct bi_ring *r)
{
	pthread_mutex_lock((pthread_mutex_t *)&r->mu);
	bool d = r->direct;
	pthread_mutex_unlock((pthread_mutex_t *)&r->mu);
	return d;
}

int bi_ring_submit(struct bi_ring *r, uint64_t off, size_t len)
{
	if (len > r->maxlen)
		return -EINVAL;
	if (r->used == r->n)
		return -EAGAIN;
	struct slot *s = &r->slot[r->tail];
	pthread_mutex_lock(&r->mu);
	s->off = off;
	s->len = len;
	s->state = QUEUED;
	pthread_cond_broadcast(&r->work);
	pthread_mutex_unlock(&r->mu);
	r->tail = (r->tail + 1) % r->n;
	r->used++;
	return 0;
}

void bi_ring_release(struct bi_ring *r)
{
	if (r->held < 0)
		return;
	pthread_mutex_lock(&r->mu);
	r->slot[r->held].state = FREE;
	pthread_mutex_unlock(&r->mu);
	r->held = -1;
	r->used--;
}

int bi_ring_next(struct bi_ring *r, const uint8_t **data)
{
	bi_ring_release(r);
	pthread_mutex_lock(&r->mu);
	struct slot *s = &r->slot[r->head];
	if (s->state == FREE) {
		pthread_mutex_unlock(&r->mu);
		return -ENOENT;
	}
	while (s->state != DONE)
		pthread_cond_wait(&r->done, &r->mu);
	int rc = s->rc;
	pthread_mutex_unlock(&r->mu);
	r->held = (int)r->head;
	r->head = (r->head + 1) % r->n;
	*data = rc == 0 ? s->buf + s->skip : NULL;
	return rc;
}

/* ------------------------------------------------------------ scattered
 *
 * io_uring, through the page cache: a block in the cache is copied when
 * the batch is started; one that is not is read from the disk while the
 * caller goes on (the kernel's asynchronous buffered reads), and stays in
 * the cache for the next command. With O_DIRECT every run of a command
 * read its blocks from the disk again: twice the time of a run after one
 * that left them cached.
 *
 * Where there is no io_uring (built without liburing, a kernel or a
 * seccomp filter that refuses it): native AIO (io_submit) with O_DIRECT:
 * the reads go to the device at once, as many as asked, without a thread
 * each and without the page cache's copy. The page cache is asked first
 * (mincore over a read-only map of the file) so that blocks already there
 * are not read again. */

#define AIO_DEVS 16
/* Reads started with one io_submit (fewer when the caller flushes). */
#define AIO_BATCH 32

/* The completion ring the kernel maps at the context's address (fs/aio.c,
 * struct aio_ring); libaio looks at it the same way to answer "nothing
 * finished" without a system call. */
struct aio_ring_hdr {
	unsigned id, nr, head, tail, magic, compat_features, incompat_features, header_length;
};
#define AIO_RING_MAGIC 0xa10a10a1u

struct aio_dev {
	const struct bi_dev *d;
	int dfd;	    /* O_DIRECT, or -1 */
	const uint8_t *map; /* the whole file, for mincore, or NULL */
	size_t maplen;
};

struct bi_aio {
	aio_context_t ctx;
	unsigned depth, inflight; /* inflight counts those pending too */
	unsigned pending;
	bool no_ctx;
	struct iocb cb[AIO_BATCH];
	long page;
	struct aio_dev dev[AIO_DEVS];
	unsigned ndev;
	struct io_event ev[64];
	uint64_t failed[AIO_BATCH]; /* tags of reads io_submit did not start */
	unsigned nfailed;
	bool uring; /* reads go through the page cache, by io_uring */
#ifdef BI_HAVE_URING
	bool uring_broken;	   /* a batch could not be started: no more reads */
	uint64_t tags[AIO_BATCH]; /* of the reads gathered, not yet started */
	struct io_uring ring;
#endif
};

static bool plain_file(const struct bi_dev *d)
{
	return d->fd >= 0 && !d->ctr && !d->vread && !d->rfn && !d->mem;
}

struct bi_aio *bi_aio_open(unsigned depth, bool through_cache)
{
	if (depth == 0 || depth > 1024)
		return NULL;
	struct bi_aio *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->depth = depth; /* the AIO context is set up at the first read */
	a->page = sysconf(_SC_PAGESIZE);
	if (a->page <= 0)
		a->page = 4096;
#ifdef BI_HAVE_URING
	/* room for every read in flight: the completion queue (twice the
	 * submission queue) can then never overflow */
	if (through_cache && io_uring_queue_init(depth, &a->ring, 0) == 0)
		a->uring = true;
#else
	(void)through_cache;
#endif
	return a;
}

bool bi_aio_buffered(const struct bi_aio *a)
{
	return a->uring;
}

/* io_destroy waits for an RCU grace period (27 ms on the bench machine,
 * a tenth of a cold run): a thread of its own does it, unwaited for, once
 * every read has finished (nothing refers to the caller's memory then).
 * Inline when no thread can be had. */
static void *destroy_run(void *arg)
{
	syscall(SYS_io_destroy, (aio_context_t)(uintptr_t)arg);
	return NULL;
}

static void destroy_ctx(aio_context_t ctx)
{
	pthread_t t;
	pthread_attr_t at;
	bool ok = pthread_attr_init(&at) == 0;
	if (ok) {
		ok = pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED) == 0 &&
		     pthread_create(&t, &at, destroy_run, (void *)(uintptr_t)ctx) == 0;
		pthread_attr_destroy(&at);
	}
	if (!ok)
		syscall(SYS_io_destroy, ctx);
}

void bi_aio_close(struct bi_aio *a)
{
	if (!a)
		return;
	uint64_t tag;
	int res;
	bi_aio_flush(a);
	while (a->inflight) /* the buffers are the caller's: not before the reads end */
		bi_aio_reap(a, true, &tag, &res, 1);
#ifdef BI_HAVE_URING
	if (a->uring)
		io_uring_queue_exit(&a->ring);
#endif
	if (a->ctx)
		destroy_ctx(a->ctx);
	for (unsigned i = 0; i < a->ndev; i++) {
		if (a->dev[i].dfd >= 0)
			close(a->dev[i].dfd);
		if (a->dev[i].map)
			munmap((void *)a->dev[i].map, a->dev[i].maplen);
	}
	free(a);
}

/* @d's entry (opened on first use), or NULL: not a plain file, no room. */
static struct aio_dev *aio_dev(struct bi_aio *a, const struct bi_dev *d)
{
	for (unsigned i = 0; i < a->ndev; i++)
		if (a->dev[i].d == d)
			return &a->dev[i];
	if (!plain_file(d) || a->ndev == AIO_DEVS)
		return NULL;
	struct aio_dev *e = &a->dev[a->ndev++];
	e->d = d;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", d->fd);
	/* through the cache: a descriptor of our own that reads no more than
	 * asked (the kernel's readahead, ramping up over a tree's leaves,
	 * fetched 397 MB for the bench's 257 MB of them, cold in 1.6x the
	 * time); else around it, with O_DIRECT */
	e->dfd = open(path, O_RDONLY | (a->uring ? 0 : O_DIRECT) | O_CLOEXEC);
	if (a->uring && e->dfd >= 0)
		(void)posix_fadvise(e->dfd, 0, 0, POSIX_FADV_RANDOM);
	/* mincore() of a file's pages answers for the page cache only to its
	 * owner or to someone who may write it (the kernel's can_do_mincore);
	 * anyone else would be told "not there" of cached pages */
	struct stat st;
	uid_t me = geteuid();
	if (fstat(d->fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
	    (uint64_t)st.st_size <= SIZE_MAX &&
	    (me == 0 || st.st_uid == me || faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0)) {
		void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, d->fd, 0);
		if (m != MAP_FAILED) {
			e->map = m;
			e->maplen = (size_t)st.st_size;
		}
	}
	return e;
}

int bi_aio_cached(struct bi_aio *a, const struct bi_dev *d, uint64_t off, size_t len)
{
	struct aio_dev *e = aio_dev(a, d);
	uint64_t abs;
	if (!e || !e->map || !bi_fits64(d->size, off, len) || !bi_add_ok(d->base, off, &abs) ||
	    abs > e->maplen || len > e->maplen - abs || len == 0)
		return -EINVAL;
	uint64_t pg = (uint64_t)a->page, first = abs / pg, last = (abs + len - 1) / pg;
	unsigned char vec[64];
	if (last - first + 1 > sizeof(vec))
		return -EINVAL;
	if (mincore((void *)(e->map + first * pg), (size_t)((last - first + 1) * pg), vec) != 0)
		return -errno;
	for (uint64_t i = 0; i <= last - first; i++)
		if (!(vec[i] & 1))
			return 0;
	return 1;
}

#ifdef BI_HAVE_URING
/* A read through the page cache: any offset, length and buffer. */
static int uring_submit(struct bi_aio *a, const struct bi_dev *d, uint64_t off, void *buf,
			size_t len, uint64_t tag)
{
	uint64_t abs;
	if (!plain_file(d) || !bi_fits64(d->size, off, len) || !bi_add_ok(d->base, off, &abs) ||
	    abs > INT64_MAX - len || len > UINT32_MAX || a->uring_broken)
		return -EINVAL;
	if (a->inflight >= a->depth || a->nfailed)
		return -EAGAIN;
	/* the descriptor first: an entry taken from the queue is started
	 * with the batch, whatever it holds */
	struct aio_dev *e = aio_dev(a, d);
	if (!e || e->dfd < 0)
		return -EINVAL;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&a->ring);
	if (!sqe)
		return -EAGAIN; /* never: the queue holds depth, and a batch is less */
	io_uring_prep_read(sqe, e->dfd, buf, (unsigned)len, abs);
	io_uring_sqe_set_data64(sqe, tag);
	a->tags[a->pending++] = tag;
	a->inflight++;
	if (a->pending == AIO_BATCH)
		bi_aio_flush(a);
	return 0;
}

/* Start the gathered reads. One the kernel will not take (it is out of
 * memory for them, say) makes the queue unusable from then on: the reads
 * not started report failing, for the caller to make them another way. */
static void uring_flush(struct bi_aio *a)
{
	if (!a->pending)
		return;
	int n;
	do
		n = io_uring_submit(&a->ring);
	while (n == -EINTR);
	unsigned started = n > 0 ? (unsigned)n : 0;
	if (started < a->pending) {
		/* left in the submission queue, never handed to the kernel
		 * again (a wait asks it to start none): dropped at close */
		a->uring_broken = true;
		for (unsigned i = started; i < a->pending; i++)
			a->failed[a->nfailed++] = a->tags[i];
	}
	a->pending = 0;
}

static unsigned uring_reap(struct bi_aio *a, bool wait, uint64_t *tags, int *res, unsigned max)
{
	struct io_uring_cqe *cqe;
	if (wait) {
		int rc;
		do
			rc = io_uring_wait_cqe(&a->ring, &cqe);
		while (rc == -EINTR || rc == -EAGAIN);
		if (rc < 0)
			return 0;
	}
	unsigned n = 0, head;
	io_uring_for_each_cqe(&a->ring, head, cqe)
	{
		if (n == max)
			break;
		tags[n] = io_uring_cqe_get_data64(cqe);
		res[n] = cqe->res;
		n++;
	}
	io_uring_cq_advance(&a->ring, n);
	a->inflight -= n;
	return n;
}
#endif

int bi_aio_cached_fd(struct bi_aio *a, const struct bi_dev *d, uint64_t off, size_t len,
		     uint64_t *at)
{
	struct aio_dev *e = aio_dev(a, d);
	uint64_t abs;
	if (!e || !bi_fits64(d->size, off, len) || !bi_add_ok(d->base, off, &abs) ||
	    abs > INT64_MAX - len)
		return -EINVAL;
	*at = abs;
	/* our own buffered descriptor reads no more than asked should the
	 * block have left the cache since; an O_DIRECT one would not read
	 * from the cache at all */
	return a->uring && e->dfd >= 0 ? e->dfd : d->fd;
}

int bi_aio_submit(struct bi_aio *a, const struct bi_dev *d, uint64_t off, void *buf, size_t len,
		  uint64_t tag)
{
#ifdef BI_HAVE_URING
	if (a->uring)
		return uring_submit(a, d, off, buf, len, tag);
#endif
	struct aio_dev *e = aio_dev(a, d);
	uint64_t abs;
	if (!e || e->dfd < 0 || !bi_fits64(d->size, off, len) || !bi_add_ok(d->base, off, &abs) ||
	    abs % ALIGN || len % ALIGN || (uintptr_t)buf % ALIGN || abs > INT64_MAX - len)
		return -EINVAL;
	/* nor while reads io_submit did not start wait to be reaped: failed[]
	 * then never holds more than one batch */
	if (a->inflight >= a->depth || a->nfailed)
		return -EAGAIN;
	if (a->no_ctx)
		return -EINVAL;
	if (!a->ctx && syscall(SYS_io_setup, a->depth, &a->ctx) != 0) {
		a->ctx = 0;
		a->no_ctx = true; /* no AIO here: not asked again */
		return -EINVAL;
	}
	struct iocb *cb = &a->cb[a->pending];
	memset(cb, 0, sizeof(*cb));
	cb->aio_data = tag;
	cb->aio_lio_opcode = IOCB_CMD_PREAD;
	cb->aio_fildes = (uint32_t)e->dfd;
	cb->aio_buf = (uint64_t)(uintptr_t)buf;
	cb->aio_nbytes = len;
	cb->aio_offset = (int64_t)abs;
	a->pending++;
	a->inflight++;
	if (a->pending == AIO_BATCH)
		bi_aio_flush(a);
	return 0;
}

void bi_aio_flush(struct bi_aio *a)
{
#ifdef BI_HAVE_URING
	if (a->uring) {
		uring_flush(a);
		return;
	}
#endif
	struct iocb *cbs[AIO_BATCH];
	unsigned done = 0;
	for (unsigned i = 0; i < a->pending; i++)
		cbs[i] = &a->cb[i];
	while (done < a->pending) {
		long n = syscall(SYS_io_submit, a->ctx, (long)(a->pending - done), cbs + done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0) {
			done += (unsigned)n;
			continue;
		}
		/* not started (the kernel is out of room, or refuses the
		 * first): the read reports failing, for the caller to make
		 * it another way */
		a->failed[a->nfailed++] = a->cb[done].aio_data;
		done++;
	}
	a->pending = 0;
}

unsigned bi_aio_reap(struct bi_aio *a, bool wait, uint64_t *tags, int *res, unsigned max)
{
	if (!a->inflight || !max)
		return 0;
	if (wait || a->pending == AIO_BATCH)
		bi_aio_flush(a);
	if (a->nfailed) {
		unsigned k = 0;
		while (k < max && a->nfailed) {
			tags[k] = a->failed[--a->nfailed];
			res[k++] = -EAGAIN;
		}
		a->inflight -= k;
		return k;
	}
	if (a->inflight == a->pending)
		return 0; /* none started: none can have finished */
#ifdef BI_HAVE_URING
	if (a->uring)
		return uring_reap(a, wait, tags, res, max);
#endif
	if (!wait) {
		const struct aio_ring_hdr *ring = (const struct aio_ring_hdr *)(uintptr_t)a->ctx;
		if (ring->magic == AIO_RING_MAGIC &&
		    __atomic_load_n(&ring->head, __ATOMIC_ACQUIRE) ==
			    __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE))
			return 0;
	}
	if (max > sizeof(a->ev) / sizeof(a->ev[0]))
		max = sizeof(a->ev) / sizeof(a->ev[0]);
	struct timespec zero = { 0, 0 };
	long n;
	do
		n = syscall(SYS_io_getevents, a->ctx, wait ? 1L : 0L, (long)max, a->ev,
			    wait ? NULL : &zero);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return 0;
	for (long i = 0; i < n; i++) {
		tags[i] = a->ev[i].data;
		long r = (long)a->ev[i].res;
		res[i] = r < 0 ? (int)r : r > INT32_MAX ? -EIO : (int)r;
	}
	a->inflight -= (unsigned)n;
	return (unsigned)n;
}

unsigned bi_aio_inflight(const struct bi_aio *a)
{
	return a->inflight;
}
