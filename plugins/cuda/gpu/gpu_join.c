// SPDX-License-Identifier: MIT
/* ntcore cuda_gpu: the join of GPU records with host calls (gpu_join.h). */
#include "gpu_join.h"

#include <stdlib.h>
#include <string.h>

struct gpu_proc *gpu_proc_new(uint32_t pid, uint32_t max_calls, uint32_t max_apis)
{
	struct gpu_proc *p = calloc(1, sizeof(*p));
	uint32_t cap = 1024;

	if (!p)
		return NULL;
	while (cap < max_apis)
		cap *= 2;
	p->api = calloc(cap, sizeof(*p->api));
	if (!p->api) {
		free(p);
		return NULL;
	}
	p->api_cap = cap;
	p->pid = pid;
	p->max_calls = max_calls ? max_calls : 65536;
	return p;
}

void gpu_proc_free(struct gpu_proc *p)
{
	struct nt_hmap_iter it = {0};
	uint64_t k, v;

	if (!p)
		return;
	while (gpu_map_next(&p->threads, &it, &k, &v)) {
		struct gpu_thread *t = (struct gpu_thread *)(uintptr_t)v;

		free(t->ring);
		free(t);
	}
	gpu_map_free(&p->threads);
	gpu_map_free(&p->api_at);
	gpu_map_free(&p->names);
	gpu_map_free(&p->ctx_dev);
	free(p->api);
	free(p);
}

struct gpu_thread *gpu_thread_get(struct gpu_proc *p, uint32_t tid, bool create)
{
	uint64_t v;
	struct gpu_thread *t;

	if (gpu_map_get(&p->threads, tid, &v))
		return (struct gpu_thread *)(uintptr_t)v;
	if (!create || !(t = calloc(1, sizeof(*t))))
		return NULL;
	t->tid = tid;
	t->max = p->max_calls;
	if (gpu_map_put(&p->threads, tid, (uint64_t)(uintptr_t)t)) {
		free(t);
		return NULL;
	}
	return t;
}

/* ---- a thread's host calls: a ring sorted by time -------------------------- */

static struct gpu_call *ring_at(const struct gpu_thread *t, uint32_t i)
{
	return &t->ring[(t->head + i) & (t->cap - 1)];
}

static int ring_grow(struct gpu_thread *t)
{
	uint32_t cap = t->cap ? t->cap * 2 : 256;
	struct gpu_call *r;

	if (cap > t->max && t->cap)
		return -1;
	if (!(r = malloc(cap * sizeof(*r))))
		return -1;
	for (uint32_t i = 0; i < t->n; i++)
		r[i] = *ring_at(t, i);
	free(t->ring);
	t->ring = r;
	t->cap = cap;
	t->head = 0;
	return 0;
}

/* Index of the newest call with ts <= x, or -1. */
static int64_t ring_last_at_or_before(const struct gpu_thread *t, uint64_t x)
{
	int64_t lo = 0, hi = (int64_t)t->n - 1, found = -1;

	while (lo <= hi) {
		int64_t mid = (lo + hi) / 2;

		if (ring_at(t, (uint32_t)mid)->ts <= x) {
			found = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return found;
}

/* The entry for (ts), created in time order when absent. */
static struct gpu_call *ring_entry(struct gpu_thread *t, uint64_t ts)
{
	int64_t at = ring_last_at_or_before(t, ts);
	uint32_t pos;

	if (at >= 0 && ring_at(t, (uint32_t)at)->ts == ts)
		return ring_at(t, (uint32_t)at);
	if (t->n == t->cap && ring_grow(t)) {
		if (!t->cap || at < 0)
			return NULL; /* older than everything kept */
		t->head = (t->head + 1) & (t->cap - 1); /* forget the oldest */
		t->n--;
		at--;
	}
	pos = (uint32_t)(at + 1);
	/* usually the newest: nothing to move */
	for (uint32_t i = t->n; i > pos; i--)
		*ring_at(t, i) = *ring_at(t, i - 1);
	t->n++;
	memset(ring_at(t, pos), 0, sizeof(struct gpu_call));
	ring_at(t, pos)->ts = ts;
	if (ts > t->newest_ts)
		t->newest_ts = ts;
	return ring_at(t, pos);
}

static struct gpu_call *call_slot(struct gpu_proc *p, uint32_t tid,
				  const char *comm, uint64_t ts)
{
	struct gpu_thread *t = gpu_thread_get(p, tid, true);

	if (!t)
		return NULL;
	if (comm && comm[0]) {
		/* comm: a record's 16 bytes, or a shorter C string */
		size_t n = strnlen(comm, sizeof(t->comm) - 1);
		memcpy(t->comm, comm, n);
		t->comm[n] = '\0';
		t->comm_known = true;
	}
	return ring_entry(t, ts);
}

int gpu_join_call(struct gpu_proc *p, uint32_t tid, const char *comm,
		  uint64_t ts, unsigned kind, uint32_t stack)
{
	struct gpu_call *c = call_slot(p, tid, comm, ts);

	if (!c)
		return -1;
	c->kind = (uint8_t)kind;
	c->stack = stack;
	if (kind < sizeof(p->any_call))
		p->any_call[kind] = true;
	return 0;
}

int gpu_join_lend(struct gpu_proc *p, uint32_t tid, const char *comm,
		  uint64_t ts, uint32_t py_stack)
{
	struct gpu_call *c = call_slot(p, tid, comm, ts);

	if (!c)
		return -1;
	c->py_stack = py_stack;
	return 0;
}

/* ---- API records ------------------------------------------------------------ */

void gpu_join_api(struct gpu_proc *p, const struct nt_gpu_api *a)
{
	uint32_t slot = p->api_next++ & (p->api_cap - 1);
	struct gpu_api_ent *e = &p->api[slot];
	uint64_t have;

	/* a runtime call and the driver call inside it may share an id: keep
	 * the outer one (the earlier start) */
	if (gpu_map_get(&p->api_at, a->correlation, &have) &&
	    p->api[have].corr == a->correlation && p->api[have].start <= a->start) {
		p->api_next--;
		return;
	}
	if (e->corr && gpu_map_get(&p->api_at, e->corr, &have) && have == slot)
		gpu_map_del(&p->api_at, e->corr);
	e->start = a->start;
	e->end = a->end;
	e->lo = a->start > GPU_JOIN_SLACK_NS ? a->start - GPU_JOIN_SLACK_NS : 0;
	if (p->system_tid) {
		struct gpu_thread *t = gpu_thread_get(p, a->tid, true);

		/* API records of a thread come in the order its calls ended */
		if (t && t->last_api_end && t->last_api_end <= a->start)
			e->lo = t->last_api_end;
		if (t && a->end > t->last_api_end)
			t->last_api_end = a->end;
	}
	e->tid = a->tid;
	e->corr = a->correlation;
	e->cbid = (uint16_t)a->cbid;
	e->call = a->call;
	e->driver = a->driver;
	gpu_map_put(&p->api_at, a->correlation, slot);
}

static const struct gpu_api_ent *api_of(const struct gpu_proc *p, uint32_t corr)
{
	uint64_t slot;

	if (!corr || !gpu_map_get(&p->api_at, corr, &slot) || p->api[slot].corr != corr)
		return NULL;
	return &p->api[slot];
}

/* The host call of a thread for an API call: the newest one of the right
 * kind in (lo, end] not taken by another correlation (gpu_join.h). */
static struct gpu_call *call_in(const struct gpu_thread *t,
				const struct gpu_api_ent *a)
{
	for (int64_t i = ring_last_at_or_before(t, a->end); i >= 0; i--) {
		struct gpu_call *c = ring_at(t, (uint32_t)i);

		if (c->ts <= a->lo)
			break;
		if (c->kind == a->call && (!c->corr || c->corr == a->corr))
			return c;
	}
	return NULL;
}

static struct gpu_call *call_any_thread(struct gpu_proc *p,
					const struct gpu_api_ent *a,
					const struct gpu_thread **thr)
{
	struct nt_hmap_iter it = {0};
	uint64_t k, v;

	while (gpu_map_next(&p->threads, &it, &k, &v)) {
		struct gpu_call *c = call_in((struct gpu_thread *)(uintptr_t)v, a);

		if (c) {
			*thr = (struct gpu_thread *)(uintptr_t)v;
			return c;
		}
	}
	return NULL;
}

int gpu_join_find(struct gpu_proc *p, uint32_t corr, uint32_t alt, bool final,
		  struct gpu_joined *j)
{
	const struct gpu_api_ent *a = api_of(p, corr);
	const struct gpu_thread *t = NULL;
	struct gpu_call *c = NULL;

	memset(j, 0, sizeof(*j));
	if (!a)
		a = api_of(p, alt);
	if (!a)
		return final || p->api_off ? 0 : 1;
	j->how = GPU_JOIN_THREAD;
	j->api_start = a->start;
	j->call = a->call;
	j->cbid = a->cbid;
	j->driver = a->driver;
	if (p->system_tid) {
		j->tid = a->tid;
		t = gpu_thread_get(p, a->tid, false);
		c = t ? call_in(t, a) : NULL;
	} else {
		c = call_any_thread(p, a, &t); /* pthread ids: by time alone */
		j->tid = c ? t->tid : 0;
	}
	if (!c && !final && a->call < sizeof(p->any_call) && p->any_call[a->call] &&
	    (!t || t->newest_ts < a->end))
		return 1; /* the probe's event of this call may still come */
	j->thr = t;
	if (c) {
		c->corr = a->corr;
		j->how = GPU_JOIN_CALL;
		j->call_ts = c->ts;
		j->stack = c->stack;
		j->py_stack = c->py_stack;
	}
	return 0;
}

int32_t gpu_proc_device(const struct gpu_proc *p, uint32_t context)
{
	uint64_t d;

	return gpu_map_get(&p->ctx_dev, context, &d) ? (int32_t)d : -1;
}

void gpu_proc_learn_device(struct gpu_proc *p, uint32_t context, uint32_t device)
{
	uint64_t d;

	if (!gpu_map_get(&p->ctx_dev, context, &d) || d != device)
		gpu_map_put(&p->ctx_dev, context, device);
}

/* ---- stacks ---------------------------------------------------------------- */

static bool frame_is(const char *f, size_t n, const char *name)
{
	size_t l = strlen(name);

	/* "cuLaunchKernel" or "cuLaunchKernel+0x1a" */
	return l && n >= l && memcmp(f, name, l) == 0 && (n == l || f[l] == '+');
}

void gpu_stack_root_first(const char *s, size_t len, const char *api_name,
			  struct nt_sb *out)
{
	const char *first_end = memchr(s, ';', len);
	size_t first_len = first_end ? (size_t)(first_end - s) : len;
	size_t end = len;

	nt_sb_reset(out);
	nt_sb_put(out, "", 0);
	if (!api_name || !frame_is(s, first_len, api_name)) {
		nt_sb_put(out, s, len);
		return;
	}
	/* innermost first: write the frames in reverse order */
	while (end > 0) {
		size_t start = end;

		while (start > 0 && s[start - 1] != ';')
			start--;
		if (out->len)
			nt_sb_put(out, ";", 1);
		nt_sb_put(out, s + start, end - start);
		end = start ? start - 1 : 0;
	}
}
