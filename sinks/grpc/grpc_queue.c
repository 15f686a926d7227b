/* SPDX-License-Identifier: MIT */
/*
 * The gRPC sink's bounded queue: one preallocated byte ring of event
 * copies between the loop thread and the sink thread (grpc_sink.h).
 *
 * Ring layout: entries are written contiguously from `tail`; when an entry
 * does not fit before the end of the buffer and there is room at the start,
 * a zero `len` marks the wrap (or the remaining bytes are too few to hold
 * it, which the reader recognises the same way) and the entry goes to offset
 * 0. `used` counts live bytes including the wrap padding, so the producer
 * and the consumer agree on the free space without a second counter.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_sink.h"

#define GQ_ALIGN(n) (((n) + 7u) & ~(size_t)7u)

int gq_init(struct gq *q, size_t cap_bytes, uint32_t max_events)
{
	memset(q, 0, sizeof(*q));
	cap_bytes &= ~(size_t)7u;
	if (cap_bytes < 2 * sizeof(struct gq_entry) || max_events == 0)
		return -EINVAL;
	/* malloc, not calloc: pages are touched only as the ring fills, but
	 * never beyond cap_bytes. */
	q->buf = malloc(cap_bytes);
	if (!q->buf)
		return -ENOMEM;
	q->cap = cap_bytes;
	q->max_events = max_events;
	return 0;
}

void gq_free(struct gq *q)
{
	free(q->buf);
	memset(q, 0, sizeof(*q));
}

/* True when `pos` cannot start an entry: too close to the end, or a wrap
 * marker. Only meaningful for positions the producer wrote. */
static bool gq_is_wrap(const struct gq *q, size_t pos)
{
	uint32_t len;

	if (q->cap - pos < sizeof(struct gq_entry))
		return true;
	memcpy(&len, q->buf + pos, sizeof(len));
	return len == 0;
}

int gq_push(struct gq *q, const struct nt_event_hdr *ev,
	    const struct nt_schema *schema, uint64_t wall_ns,
	    uint64_t observed_ns, uint64_t enq_mono_ns)
{
	size_t need = GQ_ALIGN(sizeof(struct gq_entry) + ev->size);
	size_t at;

	if (need > q->cap / 2)
		return GQ_TOO_LARGE;
	if (q->count >= q->max_events)
		return GQ_FULL;
	if (q->count == 0) {
		/* empty: restart at the beginning, no wrap needed */
		q->head = q->tail = q->used = 0;
	}
	if (q->used > 0 && q->tail == q->head)
		return GQ_FULL;
	if (q->tail >= q->head) {
		size_t room_end = q->cap - q->tail;

		if (need <= room_end) {
			at = q->tail;
		} else if (need <= q->head) {
			/* wrap: pad the end, write at 0 */
			if (room_end >= sizeof(uint32_t)) {
				uint32_t zero = 0;

				memcpy(q->buf + q->tail, &zero, sizeof(zero));
			}
			q->used += room_end;
			at = 0;
		} else {
			return GQ_FULL;
		}
	} else {
		if (need > q->head - q->tail)
			return GQ_FULL;
		at = q->tail;
	}

	struct gq_entry *e = (struct gq_entry *)(void *)(q->buf + at);

	e->len = (uint32_t)need;
	e->rec_size = ev->size;
	e->schema = schema;
	e->wall_ns = wall_ns;
	e->observed_ns = observed_ns;
	e->enq_mono_ns = enq_mono_ns;
	memcpy(e + 1, ev, ev->size);

	q->tail = at + need;
	if (q->tail == q->cap)
		q->tail = 0;
	q->used += need;
	q->count++;
	if (q->used > q->bytes_hwm)
		q->bytes_hwm = q->used;
	return GQ_OK;
}

const struct gq_entry *gq_oldest(const struct gq *q)
{
	size_t pos = q->head;

	if (q->count == 0)
		return NULL;
	if (gq_is_wrap(q, pos))
		pos = 0;
	return (const struct gq_entry *)(const void *)(q->buf + pos);
}

uint32_t gq_peek(const struct gq *q, const struct gq_entry **out, uint32_t max,
		 size_t max_bytes)
{
	size_t pos = q->head, bytes = 0;
	uint32_t n = 0;

	while (n < max && n < q->count) {
		const struct gq_entry *e;
		size_t est;

		if (gq_is_wrap(q, pos))
			pos = 0;
		e = (const struct gq_entry *)(const void *)(q->buf + pos);
		est = otlp_estimate(e);
		if (n > 0 && bytes + est > max_bytes)
			break;
		bytes += est;
		out[n++] = e;
		pos += e->len;
		if (pos == q->cap)
			pos = 0;
	}
	return n;
}

void gq_release(struct gq *q, uint32_t n)
{
	size_t pos = q->head;

	if (n > q->count)
		n = q->count;
	for (uint32_t i = 0; i < n; i++) {
		const struct gq_entry *e;

		if (gq_is_wrap(q, pos)) {
			q->used -= q->cap - pos;
			pos = 0;
		}
		e = (const struct gq_entry *)(const void *)(q->buf + pos);
		q->used -= e->len;
		pos += e->len;
		if (pos == q->cap)
			pos = 0;
	}
	q->head = pos;
	q->count -= n;
	if (q->count == 0)
		q->head = q->tail = q->used = 0;
}
