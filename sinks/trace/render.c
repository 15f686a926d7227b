/* SPDX-License-Identifier: MIT */
/* Events to timeline tracks, slices, flows and counters (render.h). */
#include "render.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ntcore/kit/clock.h>

#include "jsonl.h"

/* Synthetic JSON process ids (above any real pid, below 2^31). */
#define JPID_ALERTS 1999999999u
#define JPID_GPU 2000000000u
#define JTID_CHILD 1000000000u

enum { K_PROCESS = 1, K_THREAD, K_CHILD, K_GPU, K_STREAM, K_ALERTS, K_SYSTEM,
       K_COUNTER };

/* A call entered (an "*.enter" event) and not yet seen to return. */
struct open_call {
	uint64_t ts;
	uint32_t pid, tid;
	char comm[NT_COMM_LEN + 1];
	char name[128];
};

int render_init(struct render *r, const char *fmt, struct nt_buf *buf,
		bool instants)
{
	memset(r, 0, sizeof(*r));
	bool json = strcmp(fmt, "json") == 0;
	r->ops = json ? &tl_json_ops : &tl_perfetto_ops;
	r->w = json ? tl_json_new() : tl_perfetto_new();
	r->buf = buf;
	r->instants = instants;
	r->next_uuid = 1;
	r->next_jtid = JTID_CHILD;
	return r->w ? 0 : -ENOMEM;
}

/* The kit has the monotonic and wall clocks; the trace's clock snapshot
 * also names the boot clock (perf and ftrace timestamps). */
static uint64_t boottime_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_BOOTTIME, &t);
	return (uint64_t)t.tv_sec * NT_NS_PER_SEC + (uint64_t)t.tv_nsec;
}

void render_begin(struct render *r)
{
	tmap_free(&r->tracks, free);
	r->ops->begin(r->w, r->buf, nt_clock_mono_ns(), boottime_ns(),
		      nt_clock_wall_ns());
}

/* ---- tracks -------------------------------------------------------- */

struct track_key {
	uint32_t kind, a, b, pad;
	uint64_t c;
	char name[64];
};

static struct tl_track *track_get(struct render *r, const struct track_key *k)
{
	return tmap_get(&r->tracks, k, sizeof(*k));
}

/* Create, describe and remember a track; NULL when out of memory. */
static struct tl_track *track_add(struct render *r, const struct track_key *k,
				  const struct tl_track *proto, const char *name)
{
	size_t n = strlen(name);
	/* Room for a process name to be replaced by a longer comm. */
	struct tl_track *t = malloc(sizeof(*t) + (n > NT_COMM_LEN ? n : NT_COMM_LEN) + 1);

	if (!t)
		return NULL;
	*t = *proto;
	t->uuid = r->next_uuid++;
	t->name = memcpy((char *)(t + 1), name, n + 1);
	if (tmap_put(&r->tracks, k, sizeof(*k), t)) {
		free(t);
		return NULL;
	}
	r->ops->track(r->w, r->buf, t);
	return t;
}

static void comm_str(char *out, const char *comm)
{
	memcpy(out, comm, NT_COMM_LEN);
	out[NT_COMM_LEN] = '\0';
}

/* A process track is named by the comm of the first event seen of it,
 * and renamed (described again) by the first of its main thread, whose
 * comm is the process's. */
static struct tl_track *process_track(struct render *r, uint32_t pid,
				      uint32_t tid, const char *comm)
{
	struct track_key k = {.kind = K_PROCESS, .a = pid};
	struct tl_track *t = track_get(r, &k);
	char name[NT_COMM_LEN + 1];

	comm_str(name, comm);
	if (!*name)
		snprintf(name, sizeof(name), "pid %u", pid);
	if (t && !t->named_by_main && tid == pid && *comm) {
		strcpy((char *)t->name, name);
		t->named_by_main = true;
		r->ops->track(r->w, r->buf, t);
	}
	if (t)
		return t;
	struct tl_track proto = {.kind = TL_PROCESS, .pid = pid, .jpid = pid,
				 .named_by_main = tid == pid && *comm};
	return track_add(r, &k, &proto, name);
}

static struct tl_track *group_track(struct render *r, uint32_t kind,
				    const char *name, uint32_t jpid)
{
	struct track_key k = {.kind = kind};
	struct tl_track *t = track_get(r, &k);

	if (t)
		return t;
	struct tl_track proto = {.kind = TL_GROUP, .jpid = jpid};
	return track_add(r, &k, &proto, name);
}

/* The track of an event's thread: the process's when tid is 0, a
 * "system" track for records of no process. */
static struct tl_track *thread_track(struct render *r,
				     const struct nt_event_hdr *ev)
{
	if (!ev->pid)
		return group_track(r, K_SYSTEM, "system", 0);
	struct tl_track *p = process_track(r, ev->pid, ev->tid, ev->comm);
	if (!ev->tid || !p)
		return p;
	struct track_key k = {.kind = K_THREAD, .a = ev->pid, .b = ev->tid};
	struct tl_track *t = track_get(r, &k);
	char name[NT_COMM_LEN + 1];
	if (t)
		return t;
	comm_str(name, ev->comm);
	struct tl_track proto = {.kind = TL_THREAD, .pid = ev->pid, .tid = ev->tid,
				 .jpid = ev->pid, .jtid = ev->tid};
	return track_add(r, &k, &proto, name);
}

static struct tl_track *child_track(struct render *r, struct tl_track *parent,
				    const char *name)
{
	struct track_key k = {.kind = K_CHILD, .c = parent->uuid};
	snprintf(k.name, sizeof(k.name), "%s", name);
	struct tl_track *t = track_get(r, &k);
	char full[128];

	if (t)
		return t;
	snprintf(full, sizeof(full), "%s %s", parent->name, name);
	struct tl_track proto = {.kind = TL_CHILD, .parent = parent->uuid,
				 .pid = parent->pid, .tid = parent->tid,
				 .jpid = parent->jpid, .jtid = r->next_jtid++};
	return track_add(r, &k, &proto, full);
}

static struct tl_track *stream_track(struct render *r, int32_t device,
				     uint64_t stream)
{
	struct track_key k = {.kind = K_STREAM, .a = (uint32_t)device, .c = stream};
	struct tl_track *t = track_get(r, &k);
	char name[64];

	if (t)
		return t;
	snprintf(name, sizeof(name), "GPU %d", device);
	/* one group track per device: the device is folded into the kind */
	struct tl_track *gpu = group_track(r, K_GPU + 0x100 * (uint32_t)(device + 1),
					   name, JPID_GPU + (uint32_t)device);
	if (!gpu)
		return NULL;
	snprintf(name, sizeof(name), "stream %" PRIu64, stream);
	struct tl_track proto = {.kind = TL_CHILD, .parent = gpu->uuid,
				 .jpid = gpu->jpid,
				 .jtid = stream < JTID_CHILD ? (uint32_t)stream
							     : r->next_jtid++};
	return track_add(r, &k, &proto, name);
}

/* ---- arguments ----------------------------------------------------- */

static void arg_text(struct render *r, struct tl_arg *a, uint32_t i,
		     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void arg_text(struct render *r, struct tl_arg *a, uint32_t i,
		     const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(r->scratch[i], sizeof(r->scratch[i]), fmt, ap);
	va_end(ap);
	a->type = TLA_STR;
	a->v.s = r->scratch[i];
	a->len = n < 0 ? 0 : (uint32_t)strnlen(r->scratch[i], sizeof(r->scratch[i]));
}

static void arg_inaddr(struct render *r, struct tl_arg *a, uint32_t i,
		       const unsigned char *addr)
{
	static const unsigned char v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	char text[INET6_ADDRSTRLEN];

	if (memcmp(addr, v4, sizeof(v4)) == 0)
		inet_ntop(AF_INET, addr + 12, text, sizeof(text));
	else
		inet_ntop(AF_INET6, addr, text, sizeof(text));
	arg_text(r, a, i, "%s", text);
}

/* One field as an argument; false when it cannot be shown. */
static bool field_arg(struct render *r, const struct nt_event_hdr *ev,
		      const struct nt_field *f, struct tl_arg *a, uint32_t i)
{
	const char *at = (const char *)ev + f->offset;
	uint64_t u = tr_field_uint(ev, f);
	uint32_t len;

	a->name = f->name;
	switch (f->type) {
	case NT_F_U8: case NT_F_U16: case NT_F_U32: case NT_F_U64:
		a->type = TLA_UINT; a->v.u = u; return true;
	case NT_F_S32: case NT_F_S64:
		a->type = TLA_INT; a->v.i = (int64_t)u; return true;
	case NT_F_BOOL:
		a->type = TLA_BOOL; a->v.u = u; return true;
	case NT_F_F64:
		a->type = TLA_DOUBLE; memcpy(&a->v.d, at, sizeof(double)); return true;
	case NT_F_HEX64:
		arg_text(r, a, i, "0x%" PRIx64, u); return true;
	case NT_F_DEVT:
		arg_text(r, a, i, "%u:%u", (unsigned)(u >> 20), (unsigned)(u & 0xfffff));
		return true;
	case NT_F_ERRNO: {
		const char *name = u ? strerrorname_np(-(int32_t)u) : "OK";
		if (name)
			arg_text(r, a, i, "%s", name);
		else
			arg_text(r, a, i, "%d", (int32_t)u);
		return true;
	}
	case NT_F_INADDR:
		arg_inaddr(r, a, i, (const unsigned char *)at); return true;
	case NT_F_STR: case NT_F_VSTR:
		a->type = TLA_STR;
		a->v.s = tr_field_str(ev, f, &len);
		a->len = a->v.s ? len : 0;
		return a->v.s != NULL;
	default:
		return false;
	}
}

static uint32_t event_args(struct render *r, const struct nt_event_hdr *ev,
			   const struct tr_class *c, struct tl_arg *args)
{
	const struct nt_schema *s = c->schema;
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->n_fields && n < 64; i++) {
		const struct nt_field *f = &s->fields[i];
		if ((i < 64 && (c->hidden >> i) & 1) ||
		    (uint32_t)f->offset + f->size > ev->size)
			continue;
		if (field_arg(r, ev, f, &args[n], n))
			n++;
	}
	return n;
}

/* ---- events -------------------------------------------------------- */

static void emit(struct render *r, const struct tl_slice *s)
{
	r->ops->slice(r->w, r->buf, s);
	r->slices++;
}

static void open_call(struct render *r, const struct nt_event_hdr *ev,
		      const char *name, uint32_t len)
{
	uint32_t key[2] = {ev->pid, ev->tid};
	struct open_call *o = tmap_get(&r->opens, key, sizeof(key));

	if (!o) {
		o = calloc(1, sizeof(*o));
		if (!o || tmap_put(&r->opens, key, sizeof(key), o)) {
			free(o);
			return;
		}
	}
	o->ts = ev->ts_ns;
	o->pid = ev->pid;
	o->tid = ev->tid;
	comm_str(o->comm, ev->comm);
	snprintf(o->name, sizeof(o->name), "%.*s", (int)len, name);
}

static void close_call(struct render *r, const struct nt_event_hdr *ev,
		       const char *name, uint32_t len, uint64_t end)
{
	uint32_t key[2] = {ev->pid, ev->tid};
	struct open_call *o = tmap_get(&r->opens, key, sizeof(key));

	if (o && o->ts && end >= o->ts && strlen(o->name) == len &&
	    memcmp(o->name, name, len) == 0)
		o->ts = 0; /* returned: drawn by this event's slice */
}

static void draw_host(struct render *r, const struct nt_event_hdr *ev,
		      const struct tr_class *c, struct tl_slice *s)
{
	s->dur = tr_field_uint(ev, c->duration);
	s->instant = s->dur == 0;
	if (c->enter)
		open_call(r, ev, s->name, s->name_len);
	else if (!s->instant)
		close_call(r, ev, s->name, s->name_len, ev->ts_ns + s->dur);
	s->track = thread_track(r, ev);
}

static void draw_device(struct render *r, const struct nt_event_hdr *ev,
			const struct tr_class *c, struct tl_slice *s)
{
	uint64_t start = tr_field_uint(ev, c->start), end = tr_field_uint(ev, c->end);
	uint64_t launch = tr_field_uint(ev, c->launch_ts);

	s->ts = start;
	s->dur = end > start ? end - start : 0;
	if (c->device && c->stream) {
		struct tl_track *st = stream_track(r, (int32_t)tr_field_uint(ev, c->device),
						   tr_field_uint(ev, c->stream));
		/* Work launched onto the stream (the schema has launch_ts_ns)
		 * runs in stream order; anything else (a synchronisation seen on
		 * the stream) may overlap it: a child track of its own, so that
		 * slices on one track always nest. */
		s->track = st && !c->launch_ts ? child_track(r, st, c->schema->name) : st;
	} else {
		s->track = thread_track(r, ev);
	}
	if (!launch || !ev->tid || !ev->pid)
		return;
	struct tl_slice from = {.track = thread_track(r, ev), .ts = launch,
				.name = "launch", .name_len = 6, .instant = true,
				.category = "flow", .flow_out = ++r->next_flow};
	if (!from.track)
		return;
	emit(r, &from);
	s->flow_in = from.flow_out;
	r->flows++;
}

static void draw_alert(struct render *r, const struct nt_event_hdr *ev,
		       const struct tr_class *c, struct tl_slice *s)
{
	uint32_t len = 0;
	const char *msg = tr_field_str(ev, c->message, &len);

	if (msg && len) {
		s->name = msg;
		s->name_len = len;
	}
	s->instant = true;
	s->track = group_track(r, K_ALERTS, "Alerts", JPID_ALERTS);
}

/* prev_<state>_ns: [ts - value, ts] on the thread's <state> track. */
static void draw_states(struct render *r, const struct nt_event_hdr *ev,
			const struct tr_class *c)
{
	for (uint32_t i = 0; i < c->n_states; i++) {
		uint64_t v = tr_field_uint(ev, c->states[i]);
		struct tl_track *t = thread_track(r, ev);
		if (!v || v > ev->ts_ns || !t)
			continue;
		struct tl_slice s = {.ts = ev->ts_ns - v, .dur = v,
				     .name = c->state_names[i],
				     .name_len = (uint32_t)strlen(c->state_names[i]),
				     .category = c->plugin};
		s.track = child_track(r, t, c->state_names[i]);
		if (s.track)
			emit(r, &s);
	}
}

void render_event(struct render *r, const struct nt_event_hdr *ev,
		  const struct tr_class *c)
{
	struct tl_arg args[64];
	struct tl_slice s = {.ts = ev->ts_ns, .category = c->plugin};

	s.name = tr_event_name(c, ev, &s.name_len);
	switch (c->kind) {
	case TR_HOST_SLICE: draw_host(r, ev, c, &s); break;
	case TR_DEVICE_SLICE: draw_device(r, ev, c, &s); break;
	case TR_ALERT: draw_alert(r, ev, c, &s); break;
	default: {
		struct tl_track *t = r->instants ? thread_track(r, ev) : NULL;
		s.instant = true;
		s.track = t && c->kind == TR_SAMPLE ? child_track(r, t, "samples") : t;
	}
	}
	if (s.track) {
		s.args = args;
		s.n_args = event_args(r, ev, c, args);
		emit(r, &s);
	}
	if (c->n_states)
		draw_states(r, ev, c);
}

void render_counter(struct render *r, uint64_t ts, const struct ctr_series *cs,
		    double value)
{
	struct track_key k = {.kind = K_COUNTER, .a = cs->id};
	struct tl_track *t = track_get(r, &k);

	if (!t) {
		struct tl_track *parent = NULL;
		if (cs->pid) {
			char comm[NT_COMM_LEN] = "";
			parent = process_track(r, cs->pid, 0, comm);
		}
		struct tl_track proto = {.kind = TL_COUNTER, .pid = cs->pid,
					 .jpid = cs->pid, .unit = cs->unit,
					 .parent = parent ? parent->uuid : 0};
		t = track_add(r, &k, &proto, cs->name);
		if (!t)
			return;
	}
	r->ops->counter(r->w, r->buf, t, ts, value);
	r->counters++;
}

/* Calls entered and not returned: drawn from their entry to end_ts. */
static void draw_open_calls(struct render *r, uint64_t end_ts)
{
	struct nt_hmap_iter it;
	const struct tmap_ent *e;

	for (tmap_iter_init(&it, &r->opens); (e = tmap_next(&it));) {
		struct open_call *o = e->val;
		struct nt_event_hdr ev = {.pid = o->pid, .tid = o->tid};
		if (!o->ts || end_ts < o->ts)
			continue;
		memcpy(ev.comm, o->comm, NT_COMM_LEN);
		struct tl_arg unfinished = {.name = "unfinished", .type = TLA_BOOL,
					    .v.u = 1};
		struct tl_slice s = {.track = thread_track(r, &ev), .ts = o->ts,
				     .dur = end_ts - o->ts, .name = o->name,
				     .name_len = (uint32_t)strlen(o->name),
				     .category = "open", .args = &unfinished,
				     .n_args = 1};
		if (s.track)
			emit(r, &s);
	}
}

void render_end(struct render *r, uint64_t end_ts, bool final)
{
	if (final)
		draw_open_calls(r, end_ts);
	r->ops->end(r->w, r->buf);
}

void render_fini(struct render *r)
{
	tmap_free(&r->tracks, free);
	tmap_free(&r->opens, free);
	if (r->w)
		r->ops->free(r->w);
	r->w = NULL;
}
