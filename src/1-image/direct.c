/* SPDX-License-Identifier: MIT */
/*
 * The ring reader of a plain image file (see direct.h).
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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "1-image/direct.h"

#include "0-base/cursor.h"

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
