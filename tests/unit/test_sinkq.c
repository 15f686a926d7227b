/* A sink's queue and thread (core/sinkq.c): order, exact counts, drops
 * when full, posted work after the events before it, stop delivering all. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "sinkq.h"

struct rec {
	struct nt_event_hdr hdr;
	uint64_t seq;
	char pad[40];
};

static const struct nt_schema rec_schema = {
	.name = "t.rec", .min_size = sizeof(struct rec)};

struct consumer {
	pthread_mutex_t gate; /* held by the test to stall the sink */
	uint64_t got, last, out_of_order;
	bool seen;
	uint64_t got_at_poll[4];
	uint32_t poll_tokens[4];
	int n_polls;
	int signals[4], n_signals;
	uint64_t got_at_signal;
	int entered; /* atomic: consume calls begun (one may wait at the gate) */
};

static void c_consume(void *arg, const struct nt_event_hdr *ev,
		      const struct nt_schema *schema)
{
	struct consumer *c = arg;
	const struct rec *r = (const struct rec *)ev;

	__atomic_add_fetch(&c->entered, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&c->gate);
	pthread_mutex_unlock(&c->gate);
	if (schema != &rec_schema) /* no ck_assert off the test's thread */
		c->out_of_order++;
	if (c->seen && r->seq <= c->last)
		c->out_of_order++;
	c->seen = true;
	c->last = r->seq;
	c->got++;
}

static void c_poll(void *arg, uint32_t token, void *cookie)
{
	struct consumer *c = arg;

	(void)cookie;
	if (c->n_polls < 4) {
		c->poll_tokens[c->n_polls] = token;
		c->got_at_poll[c->n_polls++] = c->got;
	}
}

static void c_signal(void *arg, int signo)
{
	struct consumer *c = arg;

	c->signals[c->n_signals] = signo;
	c->got_at_signal = c->got;
	__atomic_store_n(&c->n_signals, c->n_signals + 1, __ATOMIC_RELEASE);
}

static const struct nt_sinkq_ops ops = {c_consume, c_poll, c_signal};

static struct rec make(uint64_t seq, uint32_t size)
{
	struct rec r;

	memset(&r, 0, sizeof(r));
	r.hdr.type = 1;
	r.hdr.size = size;
	r.seq = seq;
	return r;
}

START_TEST(all_in_order)
{
	struct consumer c = {.gate = PTHREAD_MUTEX_INITIALIZER};
	struct nt_sinkq *q = nt_sinkq_new(&ops, &c, 1 << 20);
	uint64_t pushed = 0, dropped = 0;

	ck_assert_ptr_nonnull(q);
	ck_assert_int_eq(nt_sinkq_start(q, "t"), 0);
	for (uint64_t i = 0; i < 300000; i++) {
		struct rec r = make(i, sizeof(r));
		if (nt_sinkq_push(q, &r.hdr, &rec_schema))
			pushed++;
		else
			dropped++;
		if (i % 1000 == 999)
			nt_sinkq_commit(q);
	}
	nt_sinkq_stop(q);
	ck_assert_uint_eq(pushed + dropped, 300000);
	ck_assert_uint_eq(nt_sinkq_dropped(q), dropped);
	ck_assert_uint_eq(nt_sinkq_delivered(q), pushed);
	ck_assert_uint_eq(c.got, pushed);
	ck_assert_uint_eq(c.out_of_order, 0);
	ck_assert_uint_eq(nt_sinkq_used(q), 0);
	nt_sinkq_free(q);
}
END_TEST

/* A steady trickle: every batch pushes and commits, the sink keeps up, so
 * the ring is empty whenever a batch starts and is reused from its start:
 * only the first eighth of a 4 MiB ring or so is ever touched (before: the
 * ring never rewound while every loop iteration pushed, and walked all of
 * it). */
START_TEST(steady_trickle_stays_small)
{
	struct consumer c = {.gate = PTHREAD_MUTEX_INITIALIZER};
	struct nt_sinkq *q = nt_sinkq_new(&ops, &c, 4 << 20);

	ck_assert_ptr_nonnull(q);
	ck_assert_int_eq(nt_sinkq_start(q, "t"), 0);
	for (uint64_t i = 0; i < 100000; i++) {
		struct rec r = make(i, sizeof(r));
		ck_assert(nt_sinkq_push(q, &r.hdr, &rec_schema));
		if (i % 4 == 3) {
			nt_sinkq_commit(q);
			while (nt_sinkq_delivered(q) != i + 1)
				sched_yield();
		}
	}
	nt_sinkq_stop(q);
	ck_assert_uint_eq(c.got, 100000);
	ck_assert_uint_eq(c.out_of_order, 0);
	ck_assert_uint_le(nt_sinkq_touched(q), 640u << 10);
	nt_sinkq_free(q);
}
END_TEST

/* A burst right behind a rewind: until the stalled sink's thread skips the
 * padding only the bytes before it are free, so the rewind at a push waits
 * for room for bursts (with a rewind at 64 KiB, 2414 of these 3000 were
 * dropped from a 4 MiB ring that held nothing else). */
START_TEST(burst_after_rewind_fits)
{
	struct consumer c = {.gate = PTHREAD_MUTEX_INITIALIZER};
	struct nt_sinkq *q = nt_sinkq_new(&ops, &c, 4 << 20);
	uint64_t i = 0, dropped = 0;

	ck_assert_ptr_nonnull(q);
	ck_assert_int_eq(nt_sinkq_start(q, "t"), 0);
	/* one event at a time, the sink keeping up, until the ring's position
	 * is just past 64 KiB (16-byte entry headers, records rounded to 16) */
	size_t entry = (16 + sizeof(struct rec) + 15) & ~(size_t)15;
	uint64_t n0 = (64u << 10) / entry + 1;

	for (; i < n0; i++) {
		struct rec r = make(i, sizeof(r));
		ck_assert(nt_sinkq_push(q, &r.hdr, &rec_schema));
		nt_sinkq_commit(q);
		while (nt_sinkq_delivered(q) != i + 1)
			sched_yield();
	}
	pthread_mutex_lock(&c.gate); /* the sink stalls at its next event */
	for (uint64_t k = 0; k < 3000; k++, i++) {
		struct rec r = make(i, sizeof(r));
		dropped += !nt_sinkq_push(q, &r.hdr, &rec_schema);
		if (k % 100 == 99)
			nt_sinkq_commit(q);
	}
	pthread_mutex_unlock(&c.gate);
	nt_sinkq_stop(q);
	ck_assert_uint_eq(dropped, 0);
	ck_assert_uint_eq(c.got, i);
	ck_assert_uint_eq(c.out_of_order, 0);
	nt_sinkq_free(q);
}
END_TEST

START_TEST(full_ring_drops_exactly)
{
	struct consumer c = {.gate = PTHREAD_MUTEX_INITIALIZER};
	struct nt_sinkq *q = nt_sinkq_new(&ops, &c, 64 << 10);
	uint64_t pushed = 0;

	ck_assert_int_eq(nt_sinkq_start(q, "t"), 0);
	pthread_mutex_lock(&c.gate); /* the sink is stuck */
	for (uint64_t i = 0; i < 5000; i++) {
		struct rec r = make(i, sizeof(r));
		pushed += nt_sinkq_push(q, &r.hdr, &rec_schema);
	}
	nt_sinkq_commit(q);
	/* 64 KiB of 112-byte entries (88 + a 16-byte header, 16-aligned);
	 * the stuck sink gives no room back */
	ck_assert_uint_eq(pushed, (64 << 10) / 112);
	ck_assert_uint_eq(nt_sinkq_dropped(q), 5000 - pushed);
	/* too large for the ring (> a quarter of it): dropped at once */
	static char big[20 << 10];
	struct nt_event_hdr *h = (struct nt_event_hdr *)big;
	h->size = sizeof(big);
	ck_assert(!nt_sinkq_push(q, h, &rec_schema));
	pthread_mutex_unlock(&c.gate);
	nt_sinkq_stop(q);
	ck_assert_uint_eq(c.got, pushed);
	ck_assert_uint_eq(c.got + nt_sinkq_dropped(q), 5001);
	ck_assert_uint_eq(c.out_of_order, 0);
	nt_sinkq_free(q);
}
END_TEST

START_TEST(posted_after_the_events_before)
{
	struct consumer c = {.gate = PTHREAD_MUTEX_INITIALIZER};
	struct nt_sinkq *q = nt_sinkq_new(&ops, &c, 1 << 20);

	ck_assert_int_eq(nt_sinkq_start(q, "t"), 0);
	pthread_mutex_lock(&c.gate);
	for (uint64_t i = 0; i < 100; i++) {
		struct rec r = make(i, sizeof(r));
		ck_assert(nt_sinkq_push(q, &r.hdr, &rec_schema));
	}
	nt_sinkq_commit(q);
	/* the sink's thread has taken this batch and waits at the gate, so
	 * both posts below wait together (on a slow machine it could otherwise
	 * take the first post with the batch and run the poll twice) */
	while (__atomic_load_n(&c.entered, __ATOMIC_ACQUIRE) == 0)
		sched_yield();
	ck_assert_int_eq(nt_sinkq_post_poll(q, 7, NULL), 0);
	ck_assert_int_eq(nt_sinkq_post_poll(q, 7, NULL), 0); /* once */
	nt_sinkq_post_signal(q, 10);
	pthread_mutex_unlock(&c.gate);
	/* a second batch, then wait for everything by posting and stopping */
	while (__atomic_load_n(&c.n_signals, __ATOMIC_ACQUIRE) == 0)
		sched_yield();
	nt_sinkq_stop(q);
	ck_assert_int_eq(c.n_polls, 1);
	ck_assert_uint_eq(c.poll_tokens[0], 7);
	ck_assert_uint_eq(c.got_at_poll[0], 100);
	ck_assert_int_eq(c.signals[0], 10);
	ck_assert_uint_eq(c.got_at_signal, 100);
	nt_sinkq_free(q);
}
END_TEST

START_TEST(restart_after_stop)
{
	struct consumer c = {.gate = PTHREAD_MUTEX_INITIALIZER};
	struct nt_sinkq *q = nt_sinkq_new(&ops, &c, 64 << 10);

	for (int round = 0; round < 3; round++) {
		ck_assert_int_eq(nt_sinkq_start(q, "t"), 0);
		/* more than the ring holds in total, in small commits: the
		 * ring wraps and rewinds */
		for (uint64_t i = 0; i < 20000; i++) {
			struct rec r = make(round * 20000 + i, sizeof(r));
			while (!nt_sinkq_push(q, &r.hdr, &rec_schema)) {
				nt_sinkq_commit(q);
				sched_yield();
			}
			if (i % 100 == 99)
				nt_sinkq_commit(q);
		}
		nt_sinkq_stop(q);
		ck_assert_uint_eq(c.got, (uint64_t)(round + 1) * 20000);
	}
	ck_assert_uint_eq(c.out_of_order, 0);
	ck_assert_uint_le(nt_sinkq_high_water(q), 64 << 10);
	nt_sinkq_free(q);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sinkq");
	TCase *tc = tcase_create("sinkq");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, all_in_order);
	tcase_add_test(tc, steady_trickle_stays_small);
	tcase_add_test(tc, burst_after_rewind_fits);
	tcase_add_test(tc, full_ring_drops_exactly);
	tcase_add_test(tc, posted_after_the_events_before);
	tcase_add_test(tc, restart_after_stop);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
