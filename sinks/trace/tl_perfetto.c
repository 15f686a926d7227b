/* SPDX-License-Identifier: MIT */
/*
 * The Perfetto writer: a file is a `Trace` message, a sequence of
 * `TracePacket`s (field 1). Field numbers are those of Perfetto's published
 * protos (protos/perfetto/trace/trace_packet.proto, track_event/{track_event,track_descriptor,...}.proto,
 * interned_data/interned_data.proto, clock_snapshot.proto).
 *
 * One packet sequence per file (trusted_packet_sequence_id 1). The first
 * packet clears the incremental state and carries a clock snapshot whose
 * primary trace clock is CLOCK_MONOTONIC, the clock of every event's ts_ns;
 * every timestamped packet says so (timestamp_clock_id 3), so the trace's
 * times are the events' own. Event names, categories, argument names and
 * long argument values (kernel names, stacks) are interned: each is written
 * once per file, in the packet that first uses it.
 */
#include <stdlib.h>
#include <string.h>

#include "pbw.h"
#include "tl.h"
#include "tmap.h"

/* TracePacket */
enum {
	PKT = 1, /* Trace.packet */
	PKT_CLOCK_SNAPSHOT = 6,
	PKT_TIMESTAMP = 8,
	PKT_SEQ_ID = 10,
	PKT_TRACK_EVENT = 11,
	PKT_INTERNED = 12,
	PKT_SEQ_FLAGS = 13,
	PKT_CLOCK_ID = 58,
	PKT_TRACK_DESC = 60,
};
enum { SEQ_CLEARED = 1, SEQ_NEEDS_STATE = 2 };
enum { CLOCK_REALTIME = 1, CLOCK_MONOTONIC = 3, CLOCK_BOOTTIME = 6 };
/* TrackEvent */
enum {
	TE_CATEGORY_IIDS = 3,
	TE_ANNOTATIONS = 4,
	TE_TYPE = 9,
	TE_NAME_IID = 10,
	TE_TRACK_UUID = 11,
	TE_NAME = 23,
	TE_DOUBLE_COUNTER = 44,
	TE_FLOW_IDS = 47,
	TE_TERMINATING_FLOW_IDS = 48,
};
enum { TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4 };
/* DebugAnnotation */
enum {
	DA_NAME_IID = 1,
	DA_BOOL = 2,
	DA_UINT = 3,
	DA_INT = 4,
	DA_DOUBLE = 5,
	DA_STRING = 6,
	DA_NAME = 10,
	DA_STRING_IID = 17,
};
/* InternedData and its entries ({iid = 1, name/str = 2}) */
enum {
	ID_CATEGORIES = 1,
	ID_EVENT_NAMES = 2,
	ID_ANNOTATION_NAMES = 3,
	ID_ANNOTATION_STRINGS = 29,
};
/* TrackDescriptor, ProcessDescriptor, ThreadDescriptor, CounterDescriptor */
enum {
	TD_UUID = 1,
	TD_NAME = 2,
	TD_PROCESS = 3,
	TD_THREAD = 4,
	TD_PARENT = 5,
	TD_COUNTER = 8,
	PD_PID = 1,
	PD_NAME = 6,
	THD_PID = 1,
	THD_TID = 2,
	THD_NAME = 5,
	CD_UNIT = 3,
	CD_UNIT_NAME = 6,
};
enum { UNIT_TIME_NS = 1, UNIT_COUNT = 2, UNIT_SIZE_BYTES = 3 };

#define SEQ_ID 1
/* Strings interned per file; past this, names are written inline. */
#define INTERN_MAX 200000
/* Argument values shorter than this are written inline. */
#define INTERN_VALUE_MIN 16
#define MAX_ARGS 64

struct pf {
	struct strtab names, cats, argnames, values;
};

void *tl_perfetto_new(void)
{
	struct pf *p = calloc(1, sizeof(*p));

	if (p)
		p->names.max = p->cats.max = p->argnames.max =
			p->values.max = INTERN_MAX;
	return p;
}

static void reset(struct pf *p)
{
	strtab_free(&p->names);
	strtab_free(&p->cats);
	strtab_free(&p->argnames);
	strtab_free(&p->values);
	p->names.max = p->cats.max = p->argnames.max = p->values.max = INTERN_MAX;
}

static size_t packet_begin(struct nt_buf *b, const uint64_t *ts, uint32_t flags)
{
	size_t m = pbw_begin(b, PKT);

	if (ts) {
		pbw_uint(b, PKT_TIMESTAMP, *ts);
		pbw_uint(b, PKT_CLOCK_ID, CLOCK_MONOTONIC);
	}
	pbw_uint(b, PKT_SEQ_ID, SEQ_ID);
	if (flags)
		pbw_uint(b, PKT_SEQ_FLAGS, flags);
	return m;
}

static void clock(struct nt_buf *b, uint32_t id, uint64_t ts)
{
	size_t m = pbw_begin(b, 1); /* ClockSnapshot.clocks */

	pbw_uint(b, 1, id);
	pbw_uint(b, 2, ts);
	pbw_end(b, m);
}

static void pf_begin(void *w, struct nt_buf *b, uint64_t mono, uint64_t boot,
		     uint64_t real)
{
	reset(w);
	size_t pkt = packet_begin(b, NULL, SEQ_CLEARED);
	size_t cs = pbw_begin(b, PKT_CLOCK_SNAPSHOT);
	clock(b, CLOCK_BOOTTIME, boot);
	clock(b, CLOCK_MONOTONIC, mono);
	clock(b, CLOCK_REALTIME, real);
	pbw_uint(b, 2, CLOCK_MONOTONIC); /* primary_trace_clock */
	pbw_end(b, cs);
	pbw_end(b, pkt);
}

static void pf_track(void *w, struct nt_buf *b, const struct tl_track *t)
{
	(void)w;
	size_t pkt = packet_begin(b, NULL, 0);
	size_t td = pbw_begin(b, PKT_TRACK_DESC);
	pbw_uint(b, TD_UUID, t->uuid);
	if (t->parent)
		pbw_uint(b, TD_PARENT, t->parent);
	if (t->kind == TL_PROCESS) {
		size_t pd = pbw_begin(b, TD_PROCESS);
		pbw_uint(b, PD_PID, t->pid);
		pbw_str(b, PD_NAME, t->name);
		pbw_end(b, pd);
	} else if (t->kind == TL_THREAD) {
		size_t th = pbw_begin(b, TD_THREAD);
		pbw_uint(b, THD_PID, t->pid);
		pbw_uint(b, THD_TID, t->tid);
		pbw_str(b, THD_NAME, t->name);
		pbw_end(b, th);
	} else {
		pbw_str(b, TD_NAME, t->name);
	}
	if (t->kind == TL_COUNTER) {
		size_t cd = pbw_begin(b, TD_COUNTER);
		if (t->unit && strcmp(t->unit, "bytes") == 0)
			pbw_uint(b, CD_UNIT, UNIT_SIZE_BYTES);
		else if (t->unit && strcmp(t->unit, "ns") == 0)
			pbw_uint(b, CD_UNIT, UNIT_TIME_NS);
		else if (t->unit && *t->unit)
			pbw_str(b, CD_UNIT_NAME, t->unit);
		pbw_end(b, cd);
	}
	pbw_end(b, td);
	pbw_end(b, pkt);
}

/* The iid of s in tab, writing its InternedData entry (field `field`)
 * when new; 0 when the table is full (then the caller writes it inline). */
static uint32_t intern(struct strtab *tab, struct nt_buf *b, size_t *idm,
		       uint32_t field, const char *s, size_t len)
{
	int is_new;
	uint32_t iid = strtab_id(tab, s, len, &is_new);

	if (iid && is_new) {
		if (!*idm)
			*idm = pbw_begin(b, PKT_INTERNED);
		size_t e = pbw_begin(b, field);
		pbw_uint(b, 1, iid);
		pbw_bytes(b, 2, s, len);
		pbw_end(b, e);
	}
	return iid;
}

struct iids {
	uint32_t name, cat;
	uint32_t arg[MAX_ARGS], val[MAX_ARGS];
};

/* Intern everything the event refers to, in one InternedData. */
static void intern_slice(struct pf *p, struct nt_buf *b,
			 const struct tl_slice *s, struct iids *ids, uint32_t n)
{
	size_t idm = 0;

	ids->name = intern(&p->names, b, &idm, ID_EVENT_NAMES, s->name, s->name_len);
	ids->cat = s->category ? intern(&p->cats, b, &idm, ID_CATEGORIES, s->category,
					strlen(s->category)) : 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct tl_arg *a = &s->args[i];
		ids->arg[i] = intern(&p->argnames, b, &idm, ID_ANNOTATION_NAMES,
				     a->name, strlen(a->name));
		ids->val[i] = a->type == TLA_STR && a->len >= INTERN_VALUE_MIN
				      ? intern(&p->values, b, &idm, ID_ANNOTATION_STRINGS,
					       a->v.s, a->len) : 0;
	}
	if (idm)
		pbw_end(b, idm);
}

static void annotation(struct nt_buf *b, const struct tl_arg *a, uint32_t name_iid,
		       uint32_t val_iid)
{
	size_t m = pbw_begin(b, TE_ANNOTATIONS);

	if (name_iid)
		pbw_uint(b, DA_NAME_IID, name_iid);
	else
		pbw_str(b, DA_NAME, a->name);
	switch (a->type) {
	case TLA_UINT: pbw_uint(b, DA_UINT, a->v.u); break;
	case TLA_INT: pbw_uint(b, DA_INT, (uint64_t)a->v.i); break;
	case TLA_DOUBLE: pbw_double(b, DA_DOUBLE, a->v.d); break;
	case TLA_BOOL: pbw_uint(b, DA_BOOL, a->v.u != 0); break;
	default:
		if (val_iid)
			pbw_uint(b, DA_STRING_IID, val_iid);
		else
			pbw_bytes(b, DA_STRING, a->v.s, a->len);
	}
	pbw_end(b, m);
}

static void event_begin(struct pf *p, struct nt_buf *b, const struct tl_slice *s)
{
	struct iids ids;
	uint32_t n = s->n_args < MAX_ARGS ? s->n_args : MAX_ARGS;
	size_t pkt = packet_begin(b, &s->ts, SEQ_NEEDS_STATE);

	intern_slice(p, b, s, &ids, n);
	size_t te = pbw_begin(b, PKT_TRACK_EVENT);
	pbw_uint(b, TE_TYPE, s->instant ? TYPE_INSTANT : TYPE_SLICE_BEGIN);
	pbw_uint(b, TE_TRACK_UUID, s->track->uuid);
	if (ids.cat)
		pbw_uint(b, TE_CATEGORY_IIDS, ids.cat);
	if (ids.name)
		pbw_uint(b, TE_NAME_IID, ids.name);
	else
		pbw_bytes(b, TE_NAME, s->name, s->name_len);
	for (uint32_t i = 0; i < n; i++)
		annotation(b, &s->args[i], ids.arg[i], ids.val[i]);
	if (s->flow_out)
		pbw_fixed64(b, TE_FLOW_IDS, s->flow_out);
	if (s->flow_in)
		pbw_fixed64(b, TE_TERMINATING_FLOW_IDS, s->flow_in);
	pbw_end(b, te);
	pbw_end(b, pkt);
}

static void pf_slice(void *w, struct nt_buf *b, const struct tl_slice *s)
{
	event_begin(w, b, s);
	if (s->instant)
		return;
	uint64_t end = s->ts + s->dur;
	size_t pkt = packet_begin(b, &end, SEQ_NEEDS_STATE);
	size_t te = pbw_begin(b, PKT_TRACK_EVENT);
	pbw_uint(b, TE_TYPE, TYPE_SLICE_END);
	pbw_uint(b, TE_TRACK_UUID, s->track->uuid);
	pbw_end(b, te);
	pbw_end(b, pkt);
}

static void pf_counter(void *w, struct nt_buf *b, const struct tl_track *t,
		       uint64_t ts, double value)
{
	(void)w;
	size_t pkt = packet_begin(b, &ts, SEQ_NEEDS_STATE);
	size_t te = pbw_begin(b, PKT_TRACK_EVENT);
	pbw_uint(b, TE_TYPE, TYPE_COUNTER);
	pbw_uint(b, TE_TRACK_UUID, t->uuid);
	pbw_double(b, TE_DOUBLE_COUNTER, value);
	pbw_end(b, te);
	pbw_end(b, pkt);
}

static void pf_end(void *w, struct nt_buf *b)
{
	(void)w;
	(void)b;
}

static void pf_free(void *w)
{
	if (!w)
		return;
	reset(w);
	free(w);
}

const struct tl_ops tl_perfetto_ops = {
	.ext = "pftrace",
	.begin = pf_begin,
	.track = pf_track,
	.slice = pf_slice,
	.counter = pf_counter,
	.end = pf_end,
	.free = pf_free,
};
