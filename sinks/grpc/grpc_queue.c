/* SPDX-License-Identifier: MIT */
/*
 * The gRPC sink's bounded queue (one preallocated byte ring) and its small
 * pure helpers: endpoint parsing, status classification, backoff.
 *
 * Ring layout: entries are written contiguously from `tail`; when an entry
 * does not fit before the end of the buffer and there is room at the start,
 * a zero `len` marks the wrap (or the remaining bytes are too few to hold
 * it, which the reader recognises the same way) and the entry goes to offset
 * 0. `used` counts live bytes including the wrap padding, so the producer
 * and the consumer agree on the free space without a second counter.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_sink.h"

#define GQ_ALIGN(n) (((n) + 7u) & ~(size_t)7u)

const char *const gs_drop_reason_names[GS_DROP__N] = {
	[GS_DROP_QUEUE_FULL] = "queue_full",
	[GS_DROP_TOO_LARGE] = "too_large",
	[GS_DROP_PERMANENT] = "permanent_error",
	[GS_DROP_REJECTED] = "rejected",
	[GS_DROP_RETRY_EXHAUSTED] = "retry_exhausted",
	[GS_DROP_SHUTDOWN] = "shutdown",
};

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

/* ------------------------------------------------------------------ */
/* Endpoint                                                            */
/* ------------------------------------------------------------------ */

static int parse_port(const char *p, char *err, size_t elen)
{
	long v = 0;

	if (!*p) {
		snprintf(err, elen, "missing port after ':'");
		return -1;
	}
	for (const char *c = p; *c; c++) {
		if (!isdigit((unsigned char)*c)) {
			snprintf(err, elen, "port \"%s\" is not a number", p);
			return -1;
		}
		v = v * 10 + (*c - '0');
		if (v > 65535)
			break;
	}
	if (v < 1 || v > 65535) {
		snprintf(err, elen, "port %s is out of range 1..65535", p);
		return -1;
	}
	return 0;
}

int gs_parse_endpoint(const char *in, char *target, size_t tlen,
		      int *scheme_tls, char *err, size_t elen)
{
	char buf[512];
	const char *s = in;
	char *hostport, *port;
	size_t n;

	*scheme_tls = -1;
	if (!in || !*in) {
		snprintf(err, elen, "endpoint is empty (expected \"host:port\")");
		return -1;
	}
	if (strlen(in) >= sizeof(buf) || strlen(in) >= tlen) {
		snprintf(err, elen, "endpoint is too long");
		return -1;
	}
	for (const char *c = in; *c; c++) {
		if (isspace((unsigned char)*c) || !isprint((unsigned char)*c)) {
			snprintf(err, elen, "endpoint contains a blank or control character");
			return -1;
		}
	}
	if (strncmp(s, "unix:", 5) == 0) {
		const char *path = s + 5;

		if (strncmp(path, "//", 2) == 0)
			path += 2;
		if (path[0] != '/' || path[1] == '\0') {
			snprintf(err, elen, "unix endpoint needs an absolute socket path (\"unix:/run/otel.sock\")");
			return -1;
		}
		snprintf(target, tlen, "unix:%s", path);
		return 0;
	}
	if (strncmp(s, "https://", 8) == 0) {
		*scheme_tls = 1;
		s += 8;
	} else if (strncmp(s, "http://", 7) == 0) {
		*scheme_tls = 0;
		s += 7;
	} else if (strstr(s, "://")) {
		snprintf(err, elen, "unknown scheme (use \"host:port\", \"http://host:port\", \"https://host:port\" or \"unix:/path\")");
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", s);
	n = strlen(buf);
	if (n > 0 && buf[n - 1] == '/')
		buf[--n] = '\0';
	if (strchr(buf, '/')) {
		snprintf(err, elen, "endpoint must not have a path (OTLP/gRPC uses fixed service paths)");
		return -1;
	}
	hostport = buf;
	if (hostport[0] == '[') {
		char *close = strchr(hostport, ']');

		if (!close || close == hostport + 1) {
			snprintf(err, elen, "unterminated or empty IPv6 address in brackets");
			return -1;
		}
		for (char *c = hostport + 1; c < close; c++) {
			if (!isxdigit((unsigned char)*c) && *c != ':' && *c != '.') {
				snprintf(err, elen, "invalid character '%c' in IPv6 address", *c);
				return -1;
			}
		}
		if (close[1] != ':') {
			snprintf(err, elen, "missing port (expected \"[addr]:port\", e.g. \"[::1]:4317\")");
			return -1;
		}
		port = close + 2;
	} else {
		port = strrchr(hostport, ':');
		if (!port) {
			snprintf(err, elen, "missing port (expected \"host:port\", e.g. \"%s:4317\")", hostport);
			return -1;
		}
		if (port == hostport) {
			snprintf(err, elen, "missing host before ':'");
			return -1;
		}
		if (memchr(hostport, ':', (size_t)(port - hostport))) {
			snprintf(err, elen, "IPv6 addresses must be in brackets (\"[::1]:4317\")");
			return -1;
		}
		for (char *c = hostport; c < port; c++) {
			if (!isalnum((unsigned char)*c) && *c != '.' && *c != '-' && *c != '_') {
				snprintf(err, elen, "invalid character '%c' in host name", *c);
				return -1;
			}
		}
		port++;
	}
	if (parse_port(port, err, elen) < 0)
		return -1;
	snprintf(target, tlen, "%s", buf);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Status codes and backoff                                            */
/* ------------------------------------------------------------------ */

static const char *const code_names[] = {
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
	"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
	"INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
};

const char *gs_code_name(int code)
{
	static const char *const unknown[] = { "CODE_OTHER" };

	if (code >= 0 && (size_t)code < sizeof(code_names) / sizeof(code_names[0]))
		return code_names[code];
	return unknown[0];
}

bool gs_code_retryable(int code)
{
	switch (code) {
	case 1:  /* CANCELLED */
	case 4:  /* DEADLINE_EXCEEDED */
	case 8:  /* RESOURCE_EXHAUSTED: the batch is also halved (grpc.c) */
	case 10: /* ABORTED */
	case 11: /* OUT_OF_RANGE */
	case 14: /* UNAVAILABLE */
	case 15: /* DATA_LOSS */
		return true;
	default:
		return false;
	}
}

uint64_t gs_backoff_ms(uint32_t attempt, uint64_t initial_ms, uint64_t max_ms,
		       uint32_t rnd)
{
	uint64_t d = initial_ms ? initial_ms : 1;
	int64_t jitter;

	for (uint32_t i = 0; i < attempt && d < max_ms; i++)
		d *= 2;
	if (d > max_ms)
		d = max_ms;
	/* +-20%: rnd maps to [-d/5, +d/5] */
	jitter = (int64_t)((d / 5) * 2 + 1);
	jitter = (int64_t)(rnd % (uint64_t)jitter) - (int64_t)(d / 5);
	d = (uint64_t)((int64_t)d + jitter);
	return d ? d : 1;
}
