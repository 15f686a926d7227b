/* SPDX-License-Identifier: MIT */
/* A sink's bounded queue and thread (sinkq.h). */
#include "sinkq.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIN_BYTES (64u << 10)
#define HEAD_EVERY 64 /* entries consumed between two head publications */
#define REWIND_AT (64u << 10) /* an empty ring restarts at its start past this */
#define PUSH_REWIND_MAX (512u << 10) /* at a push: past cap / 8, at most this */
#define MAX_SIGNALS 8
#define PREFETCH_AHEAD 512 /* bytes: about four records ahead */

/* One entry of the ring: this header, then the record. `len` counts both,
 * rounded up to 16 bytes, so every entry (and the padding that skips the
 * ring's end) starts 16-byte aligned and has room for a header. */
struct qent {
	uint32_t len;
	uint32_t kind;
	const struct nt_schema *schema;
};

enum { QE_EVENT = 1, QE_PAD = 2 };

struct posted {
	uint32_t token;
	void *cookie;
};

struct nt_sinkq {
	const struct nt_sinkq_ops *ops;
	void *arg;
	char *ring;
	size_t cap, mask;

	/* The loop thread's (the producer's) own. Positions only grow: a
	 * byte's place in the ring is its position & mask. */
	_Alignas(64) size_t wr;     /* bytes written */
	size_t published;           /* wr at the last commit */
	size_t head_seen;           /* the consumer's head when last read */
	uint64_t dropped;
	size_t touched;             /* the ring's bytes written at least once */

	/* Shared, each on its own cache line. */
	_Alignas(64) size_t tail;   /* atomic: published wr */
	_Alignas(64) size_t head;   /* atomic: consumed up to here */
	uint64_t delivered;         /* atomic */
	size_t high_water;          /* atomic */
	uint64_t abandoned;         /* atomic: queued, never consumed (hurry) */
	int abandon;                /* atomic: consume nothing more */
	uint64_t first_ns, last_ns; /* the thread's first and last batch */
	_Alignas(64) int sleeping;  /* atomic: the thread waits on cond */
	int pending;                /* atomic: something was posted */

	pthread_mutex_t lock;       /* guards what follows, and cond */
	pthread_cond_t cond;
	struct posted posted[NT_SINKQ_MAX_POSTED];
	size_t n_posted;
	int signals[MAX_SIGNALS];
	size_t n_signals;
	bool stop;

	bool running; /* loop thread's view: the sink's thread exists */
	pthread_t thread;
};

struct nt_sinkq *nt_sinkq_new(const struct nt_sinkq_ops *ops, void *arg,
			      size_t bytes)
{
	struct nt_sinkq *q;
	size_t cap = MIN_BYTES;

	while (cap < bytes && cap < ((size_t)1 << 40))
		cap <<= 1;
	if (posix_memalign((void **)&q, 64, sizeof(*q)))
		return NULL;
	memset(q, 0, sizeof(*q));
	/* malloc, not calloc: pages are touched only as the ring fills */
	q->ring = malloc(cap);
	if (!q->ring) {
		free(q);
		return NULL;
	}
	q->ops = ops;
	q->arg = arg;
	q->cap = cap;
	q->mask = cap - 1;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	return q;
}

void nt_sinkq_free(struct nt_sinkq *q)
{
	if (!q)
		return;
	nt_sinkq_stop(q);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
	free(q->ring);
	free(q);
}

/* ------------------------------------------------------------------ */
/* Producer: the loop thread                                           */
/* ------------------------------------------------------------------ */

static bool has_room(struct nt_sinkq *q, size_t total)
{
	if (q->wr + total - q->head_seen <= q->cap)
		return true;
	q->head_seen = __atomic_load_n(&q->head, __ATOMIC_ACQUIRE);
	return q->wr + total - q->head_seen <= q->cap;
}

/* An empty ring past REWIND_AT starts again at its start (a padding entry
 * to its end, which is free space), so that a trickle of events keeps
 * reusing the same pages instead of touching the whole ring in turn: the
 * RSS stays what bursts needed. Asked at an idle commit, and at the first
 * push after a commit (one load of the consumer's head per batch): when
 * every loop iteration pushed something, the idle commit never came and
 * each sink's ring walked all of its size (5 sinks of 4 MiB: 11 MB more
 * RSS). Until the consumer has skipped the padding, only the `pos` bytes
 * before it are free: a rewind at a push, with the rest of a burst right
 * behind it, waits for a position past push_rewind_at (room for bursts of
 * up to 512 KiB; sink_queue.sh once dropped 20000 of its 200000 events,
 * pushed 2000 at a time, with 64 KiB: test_sinkq burst_after_rewind_fits). */
static void rewind_if_empty(struct nt_sinkq *q)
{
	size_t pos = q->wr & q->mask;
	struct qent *pad;

	if (pos <= REWIND_AT || q->wr != q->published)
		return;
	q->head_seen = __atomic_load_n(&q->head, __ATOMIC_ACQUIRE);
	if (q->head_seen != q->wr)
		return;
	pad = (struct qent *)(q->ring + pos);
	pad->len = (uint32_t)(q->cap - pos);
	pad->kind = QE_PAD;
	q->wr += q->cap - pos;
}

static size_t push_rewind_at(const struct nt_sinkq *q)
{
	size_t at = q->cap / 8;

	if (at > PUSH_REWIND_MAX)
		at = PUSH_REWIND_MAX;
	return at > REWIND_AT ? at : REWIND_AT;
}

bool nt_sinkq_push(struct nt_sinkq *q, const struct nt_event_hdr *ev,
		   const struct nt_schema *schema)
{
	size_t need = (sizeof(struct qent) + ev->size + 15) & ~(size_t)15;
	size_t pos = q->wr & q->mask, to_end = q->cap - pos;
	size_t total = need + (to_end < need ? to_end : 0);
	struct qent *e;

	if (q->wr == q->published && pos > push_rewind_at(q)) {
		rewind_if_empty(q);
		pos = q->wr & q->mask;
		to_end = q->cap - pos;
		total = need + (to_end < need ? to_end : 0);
	}
	if (need > q->cap / 4 || !has_room(q, total)) {
		q->dropped++;
		return false;
	}
	if (to_end < need) { /* skip the ring's end: the record stays whole */
		e = (struct qent *)(q->ring + pos);
		e->len = (uint32_t)to_end;
		e->kind = QE_PAD;
		q->wr += to_end;
		pos = 0;
	}
	if (pos + need > q->touched)
		q->touched = pos + need;
	e = (struct qent *)(q->ring + pos);
	e->len = (uint32_t)need;
	e->kind = QE_EVENT;
	e->schema = schema;
	memcpy(e + 1, ev, ev->size);
	q->wr += need;
	if (q->wr - q->published > q->cap / 16)
		nt_sinkq_commit(q);
	return true;
}

static void wake(struct nt_sinkq *q)
{
	pthread_mutex_lock(&q->lock);
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

void nt_sinkq_commit(struct nt_sinkq *q)
{
	if (q->wr == q->published) {
		rewind_if_empty(q);
		if (q->wr == q->published)
			return;
	}
	q->published = q->wr;
	__atomic_store_n(&q->tail, q->wr, __ATOMIC_RELEASE);
	/* Pairs with the thread's fence between `sleeping = 1` and its last
	 * look at the tail: one of the two sees the other's store. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&q->sleeping, __ATOMIC_RELAXED))
		wake(q);
}

int nt_sinkq_post_poll(struct nt_sinkq *q, uint32_t token, void *cookie)
{
	int err = 0;
	size_t i;

	pthread_mutex_lock(&q->lock);
	for (i = 0; i < q->n_posted; i++)
		if (q->posted[i].token == token && q->posted[i].cookie == cookie)
			break;
	if (i == q->n_posted) {
		if (q->n_posted < NT_SINKQ_MAX_POSTED)
			q->posted[q->n_posted++] = (struct posted){token, cookie};
		else
			err = -ENOSPC;
	}
	__atomic_store_n(&q->pending, 1, __ATOMIC_SEQ_CST);
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	return err;
}

void nt_sinkq_post_signal(struct nt_sinkq *q, int signo)
{
	pthread_mutex_lock(&q->lock);
	if (q->n_signals < MAX_SIGNALS)
		q->signals[q->n_signals++] = signo;
	__atomic_store_n(&q->pending, 1, __ATOMIC_SEQ_CST);
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

/* ------------------------------------------------------------------ */
/* Consumer: the sink's thread                                         */
/* ------------------------------------------------------------------ */

/* What was posted, taken in one go. */
struct taken {
	struct posted polls[NT_SINKQ_MAX_POSTED];
	size_t n_polls;
	int signals[MAX_SIGNALS];
	size_t n_signals;
	bool stop;
};

static void take_posted(struct nt_sinkq *q, struct taken *t)
{
	t->n_polls = t->n_signals = 0;
	t->stop = false;
	if (!__atomic_exchange_n(&q->pending, 0, __ATOMIC_ACQ_REL))
		return;
	pthread_mutex_lock(&q->lock);
	memcpy(t->polls, q->posted, q->n_posted * sizeof(q->posted[0]));
	t->n_polls = q->n_posted;
	memcpy(t->signals, q->signals, q->n_signals * sizeof(q->signals[0]));
	t->n_signals = q->n_signals;
	t->stop = q->stop;
	q->n_posted = q->n_signals = 0;
	pthread_mutex_unlock(&q->lock);
}

static void note_high_water(struct nt_sinkq *q, size_t used)
{
	size_t hw = __atomic_load_n(&q->high_water, __ATOMIC_RELAXED);

	while (used > hw && !__atomic_compare_exchange_n(&q->high_water, &hw, used,
							 true, __ATOMIC_RELAXED,
							 __ATOMIC_RELAXED))
		;
}

/* Hand the entries in [rd, tail) to consume; returns the new head. */
static size_t consume_until(struct nt_sinkq *q, size_t rd, size_t tail)
{
	uint64_t n = 0;
	unsigned since_head = 0;

	note_high_water(q, tail - rd);
	while (rd != tail) {
		const struct qent *e = (const struct qent *)(q->ring + (rd & q->mask));

		/* the producer wrote these on another CPU: ask for the lines a
		 * few records ahead while this one is consumed */
		__builtin_prefetch(q->ring + ((rd + PREFETCH_AHEAD) & q->mask));
		__builtin_prefetch(q->ring + ((rd + PREFETCH_AHEAD + 64) & q->mask));

		if (e->kind == QE_EVENT &&
		    __atomic_load_n(&q->abandon, __ATOMIC_RELAXED)) {
			__atomic_add_fetch(&q->abandoned, 1, __ATOMIC_RELAXED);
		} else if (e->kind == QE_EVENT) {
			q->ops->consume(q->arg, (const struct nt_event_hdr *)(e + 1),
					e->schema);
			n++;
		}
		rd += e->len;
		if (++since_head == HEAD_EVERY) {
			/* room for the producer as we go, not only at the end */
			__atomic_store_n(&q->head, rd, __ATOMIC_RELEASE);
			__atomic_add_fetch(&q->delivered, n, __ATOMIC_RELAXED);
			n = 0;
			since_head = 0;
		}
	}
	__atomic_store_n(&q->head, rd, __ATOMIC_RELEASE);
	__atomic_add_fetch(&q->delivered, n, __ATOMIC_RELAXED);
	if (n) { /* once per batch: the window the sink consumed in */
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		q->last_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		if (!q->first_ns)
			q->first_ns = q->last_ns;
	}
	return rd;
}

static void sleep_until_work(struct nt_sinkq *q, size_t rd)
{
	pthread_mutex_lock(&q->lock);
	__atomic_store_n(&q->sleeping, 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&q->tail, __ATOMIC_ACQUIRE) == rd &&
	    !__atomic_load_n(&q->pending, __ATOMIC_ACQUIRE))
		pthread_cond_wait(&q->cond, &q->lock);
	__atomic_store_n(&q->sleeping, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&q->lock);
}

static void *sink_thread(void *arg)
{
	struct nt_sinkq *q = arg;
	size_t rd = __atomic_load_n(&q->head, __ATOMIC_RELAXED);
	struct taken t;

	for (;;) {
		/* What was posted first, then the tail: every event pushed
		 * before a post is consumed before the post's work runs. */
		take_posted(q, &t);
		size_t tail = __atomic_load_n(&q->tail, __ATOMIC_ACQUIRE);
		bool busy = rd != tail;

		rd = consume_until(q, rd, tail);
		if (t.stop)
			break;
		for (size_t i = 0; i < t.n_polls; i++)
			q->ops->poll(q->arg, t.polls[i].token, t.polls[i].cookie);
		for (size_t i = 0; i < t.n_signals; i++)
			q->ops->signal(q->arg, t.signals[i]);
		if (!busy && !t.n_polls && !t.n_signals)
			sleep_until_work(q, rd);
	}
	return NULL;
}

int nt_sinkq_start(struct nt_sinkq *q, const char *name)
{
	int err;

	if (q->running)
		return 0;
	q->stop = false;
	err = pthread_create(&q->thread, NULL, sink_thread, q);
	if (err)
		return -err;
	if (name) {
		char short_name[16];
		snprintf(short_name, sizeof(short_name), "%s", name);
		pthread_setname_np(q->thread, short_name);
	}
	q->running = true;
	return 0;
}

void nt_sinkq_stop(struct nt_sinkq *q)
{
	nt_sinkq_stop_unless(q, NULL, NULL);
}

/* Wait for the sink's thread in slices, asking `hurry` between them. */
static void join_unless(struct nt_sinkq *q, bool (*hurry)(void *), void *arg)
{
	struct timespec until;

	if (!hurry) {
		pthread_join(q->thread, NULL);
		return;
	}
	for (;;) {
		if (hurry(arg))
			__atomic_store_n(&q->abandon, 1, __ATOMIC_RELEASE);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += NT_SINKQ_HURRY_SLICE_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		if (pthread_timedjoin_np(q->thread, NULL, &until) != ETIMEDOUT)
			return;
	}
}

void nt_sinkq_stop_unless(struct nt_sinkq *q, bool (*hurry)(void *), void *arg)
{
	if (!q->running)
		return;
	nt_sinkq_commit(q);
	pthread_mutex_lock(&q->lock);
	q->stop = true;
	__atomic_store_n(&q->pending, 1, __ATOMIC_SEQ_CST);
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	join_unless(q, hurry, arg);
	__atomic_store_n(&q->abandon, 0, __ATOMIC_RELAXED);
	q->running = false;
	q->stop = false;
	q->n_posted = q->n_signals = 0;
	q->head_seen = __atomic_load_n(&q->head, __ATOMIC_ACQUIRE);
}

uint64_t nt_sinkq_delivered(const struct nt_sinkq *q)
{
	return __atomic_load_n(&q->delivered, __ATOMIC_RELAXED);
}

uint64_t nt_sinkq_dropped(const struct nt_sinkq *q)
{
	return q->dropped + __atomic_load_n(&q->abandoned, __ATOMIC_RELAXED);
}

size_t nt_sinkq_used(const struct nt_sinkq *q)
{
	return __atomic_load_n(&q->tail, __ATOMIC_RELAXED) -
	       __atomic_load_n(&q->head, __ATOMIC_RELAXED);
}

size_t nt_sinkq_touched(const struct nt_sinkq *q)
{
	return q->touched;
}

size_t nt_sinkq_high_water(const struct nt_sinkq *q)
{
	return __atomic_load_n(&q->high_water, __ATOMIC_RELAXED);
}

void nt_sinkq_window(const struct nt_sinkq *q, uint64_t *first_ns,
		     uint64_t *last_ns)
{
	*first_ns = q->first_ns;
	*last_ns = q->last_ns;
}

void nt_sinkq_prefault(struct nt_sinkq *q)
{
	memset(q->ring, 0, q->cap);
}

bool nt_sinkq_running(const struct nt_sinkq *q)
{
	return q->running;
}
