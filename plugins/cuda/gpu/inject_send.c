// SPDX-License-Identifier: MIT
/*
 * ntcore cuda_gpu injection library: CUPTI's buffers and the sender thread.
 *
 * CUPTI asks for an empty buffer on whatever thread needs one, often an
 * application thread in a launch: inj_buffer_request takes one from a free
 * list or makes one while under the cap, and otherwise returns none (CUPTI
 * then drops records and counts them, which the library reports). Completed
 * buffers are queued for the sender thread, which converts their records,
 * sends them with MSG_DONTWAIT | MSG_NOSIGNAL (waiting at most 100 ms for
 * room, on its own thread) and returns the buffers. Every flush period the
 * sender asks CUPTI for the buffers it holds (cuptiActivityFlushAll(0)).
 *
 * What an application thread does here is kept to a list operation under
 * the lock: buffers are made ahead and zeroed for reuse by the sender
 * (CUPTI is told they come zeroed, ZEROED_OUT_ACTIVITY_BUFFER), so no
 * launch waits for a 2 MiB allocation, its page faults or a memset.
 */
#include "inject.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

void inj_buffer_request(struct inj *g, uint8_t **buffer, size_t *size,
			size_t *max_records)
{
	struct inj_buf *b = NULL;

	*buffer = NULL;
	*size = 0;
	*max_records = 0;
	pthread_mutex_lock(&g->lock);
	if (!g->gone && getpid() == g->pid) {
		if (g->free_list) {
			b = g->free_list;
			g->free_list = b->next;
		} else if (g->buf_made < g->buf_max && (b = calloc(1, sizeof(*b)))) {
			/* none made ahead left: calloc's fresh pages are zero
			 * (CUPTI's 8-byte alignment: malloc gives 16) */
			b->data = calloc(1, g->buf_size);
			if (b->data)
				g->buf_made++;
			else
				free(b), b = NULL;
		}
	}
	if (b) {
		/* the node rides on the spare list until the buffer comes back */
		b->next = g->spare_nodes;
		g->spare_nodes = b;
		*buffer = b->data;
		*size = g->buf_size;
	}
	pthread_mutex_unlock(&g->lock);
}

void inj_buffer_complete(struct inj *g, uint8_t *buffer, size_t valid)
{
	struct inj_buf **pp, *b = NULL;

	pthread_mutex_lock(&g->lock);
	for (pp = &g->spare_nodes; *pp; pp = &(*pp)->next) {
		if ((*pp)->data == buffer) {
			b = *pp;
			*pp = b->next;
			break;
		}
	}
	if (b) {
		b->valid = valid;
		b->next = NULL;
		if (g->full_tail)
			g->full_tail->next = b;
		else
			g->full_head = b;
		g->full_tail = b;
		g->buffers_done++;
		pthread_cond_signal(&g->wake);
	}
	pthread_mutex_unlock(&g->lock);
}

int inj_send_now(struct inj *g, const void *buf, size_t len, int wait_ms)
{
	struct pollfd p = { .fd = g->fd, .events = POLLOUT };

	for (;;) {
		ssize_t n;

		if (g->fd < 0 || g->gone)
			return -1;
		n = send(g->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n == (ssize_t)len)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) &&
		    wait_ms > 0 && poll(&p, 1, wait_ms) > 0 && !(p.revents & (POLLERR | POLLHUP))) {
			wait_ms = 0; /* one wait per message */
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS)
			g->gone = true; /* EPIPE, ECONNRESET: the daemon is gone */
		return -1;
	}
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait at most 100 ms for room per message; at exit, until the deadline. */
static int send_cb(void *arg, const void *buf, size_t len)
{
	struct inj *g = arg;
	int wait = 100;

	if (g->deadline_ms) {
		uint64_t now = mono_ms();

		wait = now < g->deadline_ms ? (int)(g->deadline_ms - now) : 0;
	}
	return inj_send_now(g, buf, len, wait);
}

static void drain_buffer(struct inj *g, struct inj_buf *b)
{
	struct nt_cupti_activity *rec = NULL;

	while (g->api.ActivityGetNextRecord(b->data, b->valid, &rec) == NT_CUPTI_SUCCESS)
		inj_out_record(&g->out, rec);
}

static void send_stats(struct inj *g)
{
	struct nt_gpu_stats s = { .h = { .type = NT_GPU_R_STATS, .size = sizeof(s) } };
	size_t dropped = 0;

	if (g->api.ActivityGetNumDroppedRecords &&
	    g->api.ActivityGetNumDroppedRecords(NULL, 0, &dropped) == NT_CUPTI_SUCCESS)
		g->cupti_dropped += dropped;
	s.cupti_dropped = g->cupti_dropped;
	s.send_dropped = g->out.send_dropped;
	s.records_sent = g->out.records - g->out.send_dropped;
	s.buffers = g->buffers_done;
	s.unknown_records = g->out.unknown_records;
	inj_out_raw(&g->out, &s, sizeof(s));
}

/* Take the queued buffers, convert and send them, give them back. */
static bool drain_queue(struct inj *g)
{
	struct inj_buf *list, *b;

	pthread_mutex_lock(&g->lock);
	list = g->full_head;
	g->full_head = g->full_tail = NULL;
	pthread_mutex_unlock(&g->lock);
	if (!list)
		return false;
	for (b = list; b; b = b->next) {
		drain_buffer(g, b);
		/* the next user gets it zeroed, as CUPTI was told */
		if (g->zero_buffers)
			memset(b->data, 0, g->buf_size);
	}
	pthread_mutex_lock(&g->lock);
	while ((b = list)) {
		list = b->next;
		b->next = g->free_list;
		g->free_list = b;
	}
	pthread_mutex_unlock(&g->lock);
	return true;
}

/* Make the first buffers on this thread, their pages touched, so that
 * the application threads CUPTI asks on find them on the free list. */
static void make_ahead(struct inj *g)
{
	for (uint32_t i = 0; i < INJ_BUFFERS_AHEAD; i++) {
		struct inj_buf *b = calloc(1, sizeof(*b));

		if (!b || !(b->data = calloc(1, g->buf_size))) {
			free(b);
			return;
		}
		/* fault its pages in here, not in CUPTI's first records */
		for (size_t off = 0; off < g->buf_size; off += 4096)
			((volatile uint8_t *)b->data)[off] = 0;
		pthread_mutex_lock(&g->lock);
		if (g->buf_made < g->buf_max) {
			g->buf_made++;
			b->next = g->free_list;
			g->free_list = b;
			b = NULL;
		}
		pthread_mutex_unlock(&g->lock);
		if (b) {
			free(b->data);
			free(b);
			return;
		}
	}
}

static void *sender_main(void *arg)
{
	struct inj *g = arg;
	uint64_t last_flush = mono_ms(), last_stats = 0;

	make_ahead(g);
	pthread_mutex_lock(&g->lock);
	while (!g->stopping) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += (long)g->flush_ms * 1000000L;
		until.tv_sec += until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		if (!g->full_head)
			pthread_cond_timedwait(&g->wake, &g->lock, &until);
		if (g->stopping)
			break;
		pthread_mutex_unlock(&g->lock);
		if (mono_ms() - last_flush >= g->flush_ms && !g->gone) {
			/* completes held buffers (onto our queue) on this thread */
			g->api.ActivityFlushAll(0);
			last_flush = mono_ms();
		}
		drain_queue(g);
		if (mono_ms() - last_stats >= 1000) {
			send_stats(g);
			last_stats = mono_ms();
		}
		inj_out_flush(&g->out);
		if (g->gone && !g->kinds_stopped) {
			inj_stop_kinds(g);
			g->kinds_stopped = true;
		}
		pthread_mutex_lock(&g->lock);
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

int inj_sender_start(struct inj *g)
{
	inj_out_init(&g->out);
	g->out.send = send_cb;
	g->out.send_arg = g;
	if (pthread_create(&g->sender, NULL, sender_main, g))
		return -1;
	g->sender_running = true;
	return 0;
}

/* At exit: stop the thread, take every buffer CUPTI holds, send them. */
void inj_sender_stop(struct inj *g, uint32_t wait_ms)
{
	pthread_mutex_lock(&g->lock);
	g->stopping = true;
	pthread_cond_signal(&g->wake);
	pthread_mutex_unlock(&g->lock);
	if (g->sender_running)
		pthread_join(g->sender, NULL);
	g->sender_running = false;
	/* the job is exiting: what is left may wait for room, in all at most
	 * wait_ms */
	g->deadline_ms = mono_ms() + wait_ms;
	if (!g->gone)
		g->api.ActivityFlushAll(NT_CUPTI_FLUSH_FORCED);
	drain_queue(g);
	send_stats(g);
	inj_out_flush(&g->out);
}
