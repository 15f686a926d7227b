/* SPDX-License-Identifier: MIT */
/*
 * The JSON trace-event writer (the format chrome://tracing, Perfetto's UI
 * and speedscope import): {"traceEvents":[...]} with "X" slices, "i"
 * instants, "C" counters, "s"/"f" flow events and "M" metadata naming
 * processes and threads. Times are microseconds with three decimals, so no
 * nanosecond is lost. JSON knows only processes and threads: GPU, alert and
 * child tracks get the synthetic ids the renderer gave them (tl_track.jpid
 * and jtid) and are named by metadata events.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tl.h"

struct tj {
	bool first; /* no comma before the first event of a file */
};

void *tl_json_new(void)
{
	return calloc(1, sizeof(struct tj));
}

static void sep(struct tj *j, struct nt_buf *b)
{
	if (!j->first)
		nt_buf_put(b, ",\n", 2);
	j->first = false;
}

static void ts_us(struct nt_buf *b, const char *key, uint64_t ns)
{
	nt_buf_printf(b, ",\"%s\":%" PRIu64 ".%03u", key, ns / 1000,
		      (unsigned)(ns % 1000));
}

static void tj_begin(void *w, struct nt_buf *b, uint64_t mono, uint64_t boot,
		     uint64_t real)
{
	struct tj *j = w;

	(void)boot;
	j->first = true;
	nt_buf_printf(b, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock\":"
		      "\"CLOCK_MONOTONIC\",\"monotonic_ns\":%" PRIu64
		      ",\"realtime_ns\":%" PRIu64 "},\"traceEvents\":[\n", mono, real);
}

static void meta(struct tj *j, struct nt_buf *b, const char *what,
		 uint32_t pid, uint32_t tid, const char *name)
{
	sep(j, b);
	nt_buf_printf(b, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,"
		      "\"args\":{\"name\":", what, pid, tid);
	nt_json_string(b, name, strlen(name));
	nt_buf_put(b, "}}", 2);
}

static void tj_track(void *w, struct nt_buf *b, const struct tl_track *t)
{
	switch (t->kind) {
	case TL_PROCESS:
	case TL_GROUP:
		meta(w, b, "process_name", t->jpid, 0, t->name);
		break;
	case TL_THREAD:
	case TL_CHILD:
		meta(w, b, "thread_name", t->jpid, t->jtid, t->name);
		break;
	default: /* counters are named by their events */
		break;
	}
}

static void arg_value(struct nt_buf *b, const struct tl_arg *a)
{
	switch (a->type) {
	case TLA_UINT: nt_buf_printf(b, "%" PRIu64, a->v.u); break;
	case TLA_INT: nt_buf_printf(b, "%" PRId64, a->v.i); break;
	case TLA_DOUBLE:
		if (isfinite(a->v.d))
			nt_buf_printf(b, "%.17g", a->v.d);
		else
			nt_buf_put(b, "null", 4);
		break;
	case TLA_BOOL: nt_buf_printf(b, "%s", a->v.u ? "true" : "false"); break;
	default: nt_json_string(b, a->v.s, a->len);
	}
}

static void args(struct nt_buf *b, const struct tl_slice *s)
{
	nt_buf_put(b, ",\"args\":{", 9);
	for (uint32_t i = 0; i < s->n_args; i++) {
		if (i)
			nt_buf_put(b, ",", 1);
		nt_json_string(b, s->args[i].name, strlen(s->args[i].name));
		nt_buf_put(b, ":", 1);
		arg_value(b, &s->args[i]);
	}
	nt_buf_put(b, "}", 1);
}

static void flow(struct tj *j, struct nt_buf *b, const struct tl_slice *s,
		 uint64_t id, bool start)
{
	sep(j, b);
	nt_buf_printf(b, "{\"ph\":\"%s\",%s\"id\":%" PRIu64
		      ",\"name\":\"launch\",\"cat\":\"flow\"",
		      start ? "s" : "f", start ? "" : "\"bp\":\"e\",", id);
	ts_us(b, "ts", s->ts);
	nt_buf_printf(b, ",\"pid\":%u,\"tid\":%u}", s->track->jpid, s->track->jtid);
}

static void tj_slice(void *w, struct nt_buf *b, const struct tl_slice *s)
{
	struct tj *j = w;
	/* A flow binds to the slice enclosing it: a flow's source is a
	 * zero-length slice rather than an instant. */
	bool instant = s->instant && !s->flow_out;

	sep(j, b);
	nt_buf_printf(b, "{\"ph\":\"%s\",%s\"name\":", instant ? "i" : "X",
		      instant ? "\"s\":\"t\"," : "");
	nt_json_string(b, s->name, s->name_len);
	if (s->category) {
		nt_buf_put(b, ",\"cat\":", 7);
		nt_json_string(b, s->category, strlen(s->category));
	}
	ts_us(b, "ts", s->ts);
	if (!instant)
		ts_us(b, "dur", s->instant ? 0 : s->dur);
	nt_buf_printf(b, ",\"pid\":%u,\"tid\":%u", s->track->jpid, s->track->jtid);
	args(b, s);
	nt_buf_put(b, "}", 1);
	if (s->flow_out)
		flow(j, b, s, s->flow_out, true);
	if (s->flow_in)
		flow(j, b, s, s->flow_in, false);
}

static void tj_counter(void *w, struct nt_buf *b, const struct tl_track *t,
		       uint64_t ts, double value)
{
	sep(w, b);
	nt_buf_put(b, "{\"ph\":\"C\",\"name\":", 17);
	nt_json_string(b, t->name, strlen(t->name));
	ts_us(b, "ts", ts);
	nt_buf_printf(b, ",\"pid\":%u,\"tid\":0,\"args\":{\"value\":", t->jpid);
	if (isfinite(value))
		nt_buf_printf(b, "%.17g}}", value);
	else
		nt_buf_put(b, "null}}", 6);
}

static void tj_end(void *w, struct nt_buf *b)
{
	(void)w;
	nt_buf_put(b, "\n]}\n", 4);
}

const struct tl_ops tl_json_ops = {
	.ext = "json",
	.begin = tj_begin,
	.track = tj_track,
	.slice = tj_slice,
	.counter = tj_counter,
	.end = tj_end,
	.free = free,
};
