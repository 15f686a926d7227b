// SPDX-License-Identifier: MIT
/*
 * ntcore cuda_gpu: a message from a job -> its records -> the join ->
 * events, metrics and folded stacks. A message is checked whole before any
 * record of it is used (sizes, types); API records, names and the hello go
 * first, so GPU records find the API records that came with them. A GPU
 * record whose host side may still come waits (gpu_join_find) in a FIFO,
 * at most join_wait_ms, and is then published as joined as it can be.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cupti_cbids.h"
#include "gpu.h"

extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

static const uint16_t min_size[] = {
	[NT_GPU_R_HELLO] = sizeof(struct nt_gpu_hello),
	[NT_GPU_R_NAME] = sizeof(struct nt_gpu_name),
	[NT_GPU_R_API] = sizeof(struct nt_gpu_api),
	[NT_GPU_R_KERNEL] = sizeof(struct nt_gpu_kernel),
	[NT_GPU_R_MEMCPY] = sizeof(struct nt_gpu_memcpy),
	[NT_GPU_R_MEMSET] = sizeof(struct nt_gpu_memset),
	[NT_GPU_R_SYNC] = sizeof(struct nt_gpu_sync),
	[NT_GPU_R_STATS] = sizeof(struct nt_gpu_stats),
};

/* Every record's size fits the message and its type; 0 or -1. */
static int check_message(const uint8_t *msg, size_t len)
{
	const struct nt_gpu_msg *m = (const struct nt_gpu_msg *)msg;
	size_t off = sizeof(*m);

	if (len < sizeof(*m) || m->magic != NT_GPU_MAGIC || m->version != NT_GPU_VERSION ||
	    m->size != len)
		return -1;
	while (off < len) {
		const struct nt_gpu_rec *r = (const struct nt_gpu_rec *)(msg + off);

		if (len - off < sizeof(*r) || r->size < sizeof(*r) || r->size % 8 ||
		    r->size > len - off)
			return -1;
		if (r->type < NT_ARRAY_LEN(min_size) && r->size < min_size[r->type])
			return -1;
		off += r->size;
	}
	return 0;
}

static void on_hello(struct gpu_plugin *g, struct gpu_pstate *ps,
		     const struct nt_gpu_hello *h)
{
	char text[NT_GPU_TEXT_MAX + 1];
	int err = h->status == NT_GPU_ST_OK ? 0 : h->status == NT_GPU_ST_NO_CUPTI ? ENOENT : EIO;

	snprintf(text, sizeof(text), "%.*s", (int)strnlen(h->text, NT_GPU_TEXT_MAX), h->text);
	ps->status = h->status;
	ps->tracing = h->status == NT_GPU_ST_OK;
	ps->join->system_tid = h->flags & NT_GPU_HELLO_SYSTEM_TID;
	ps->join->api_off = h->flags & NT_GPU_HELLO_NO_API;
	if (ps->tracing) {
		gpu_metrics_process(g->m, 1);
		g->host->log(g->inst, NT_LOG_INFO, "pid %u (%s): GPU activity from %s", ps->pid,
			     ps->comm, text);
		if (!(h->flags & NT_GPU_HELLO_MONOTONIC))
			g->host->log(g->inst, NT_LOG_WARN, "pid %u: this CUPTI cannot use ntcore's "
				     "clock: GPU times are not on the events' time line", ps->pid);
	} else if (h->status == NT_GPU_ST_NO_CUPTI) {
		g->host->log(g->inst, NT_LOG_WARN, "pid %u (%s): no CUPTI found: %s; no GPU times "
			     "for this process", ps->pid, ps->comm, text);
	} else {
		g->host->log(g->inst, NT_LOG_WARN, "pid %u (%s): CUPTI refused: %s; no GPU times "
			     "for this process", ps->pid, ps->comm, text);
	}
	gpu_publish_process(g, ps, h, err);
}

static void on_name(struct gpu_plugin *g, struct gpu_pstate *ps,
		    const struct nt_gpu_name *n)
{
	const char *s = (const char *)(n + 1);
	size_t len = n->len <= n->h.size - sizeof(*n) ? n->len : n->h.size - sizeof(*n);
	char *mangled = strndup(s, len), *d = NULL;
	int status = -1;
	uint32_t id;

	if (!mangled)
		return;
	if (mangled[0] == '_' && mangled[1] == 'Z')
		d = __cxa_demangle(mangled, NULL, NULL, &status);
	id = status == 0 && d ? gpu_str_intern(&g->strs, d, strlen(d))
			      : gpu_str_intern(&g->strs, mangled, strlen(mangled));
	gpu_map_put(&ps->join->names, n->id, id);
	free(d);
	free(mangled);
}

static void on_stats(struct gpu_plugin *g, struct gpu_pstate *ps,
		     const struct nt_gpu_stats *s)
{
	if (s->cupti_dropped > ps->cupti_dropped)
		g->host->count_drop(g->inst, "cupti_buffer", s->cupti_dropped - ps->cupti_dropped);
	if (s->send_dropped > ps->send_dropped)
		g->host->count_drop(g->inst, "cupti_send", s->send_dropped - ps->send_dropped);
	ps->cupti_dropped = s->cupti_dropped;
	ps->send_dropped = s->send_dropped;
}

/* ---- GPU records -------------------------------------------------------------- */

static uint32_t intern_cstr(struct gpu_plugin *g, const char *s)
{
	return gpu_str_intern(&g->strs, s, strlen(s));
}

/* The string id of a record's slice name. */
/* The string id of a fixed name, interned once (slot: 0..15 copies by
 * kind, 16 memset, 17.. syncs by type). */
static uint32_t fixed_name(struct gpu_plugin *g, unsigned slot, const char *fmt,
			   const char *arg)
{
	char buf[64];

	if (slot >= NT_ARRAY_LEN(g->fixed_names))
		return 0;
	if (!g->fixed_names[slot]) {
		snprintf(buf, sizeof(buf), fmt, arg);
		g->fixed_names[slot] = intern_cstr(g, buf);
	}
	return g->fixed_names[slot];
}

static uint32_t name_of(struct gpu_plugin *g, struct gpu_pstate *ps,
			const struct nt_gpu_rec *r)
{
	uint64_t id = 0;
	unsigned kind;

	switch (r->type) {
	case NT_GPU_R_KERNEL:
		gpu_map_get(&ps->join->names, ((const struct nt_gpu_kernel *)r)->name_id, &id);
		return (uint32_t)id;
	case NT_GPU_R_MEMCPY:
		kind = ((const struct nt_gpu_memcpy *)r)->copy_kind;
		kind = kind < 11 ? kind : 0;
		return fixed_name(g, kind, "memcpy %s", gpu_copy_kind_name(kind));
	case NT_GPU_R_MEMSET:
		return fixed_name(g, 16, "%s", "memset");
	default:
		kind = ((const struct nt_gpu_sync *)r)->type;
		kind = kind < 5 ? kind : 0;
		return fixed_name(g, 17 + kind, "%s", gpu_sync_type_name(kind));
	}
}

static int join_of(struct gpu_pstate *ps, const struct nt_gpu_rec *r, bool final,
		   struct gpu_joined *j)
{
	switch (r->type) {
	case NT_GPU_R_KERNEL:
		return gpu_join_find(ps->join, ((const struct nt_gpu_kernel *)r)->correlation, 0,
				     final, j);
	case NT_GPU_R_MEMCPY: {
		const struct nt_gpu_memcpy *c = (const struct nt_gpu_memcpy *)r;

		return gpu_join_find(ps->join, c->correlation, c->runtime_correlation, final, j);
	}
	case NT_GPU_R_MEMSET:
		return gpu_join_find(ps->join, ((const struct nt_gpu_memset *)r)->correlation, 0,
				     final, j);
	default:
		/* syncs: the API records of sync calls are not traced */
		memset(j, 0, sizeof(*j));
		return 0;
	}
}

/* The API function of a call (cupti_cbids.h), NULL unknown. */
static const char *api_name(unsigned driver, unsigned cbid)
{
	const struct nt_cupti_cbid *t = driver ? nt_cupti_driver_cbids : nt_cupti_runtime_cbids;
	size_t n = driver ? NT_ARRAY_LEN(nt_cupti_driver_cbids) : NT_ARRAY_LEN(nt_cupti_runtime_cbids);

	for (size_t i = 0; i < n; i++) /* rare: records whose launch had no stack */
		if (t[i].cbid == cbid)
			return t[i].name;
	return NULL;
}

/* The flame graph's base for a record without a launch stack (copies,
 * graph launches: the cuda probe takes no stack there): "[THREAD];API". */
static uint32_t no_stack(struct gpu_plugin *g, struct gpu_pstate *ps,
			 const struct gpu_joined *j)
{
	const char *comm = gpu_comm_of(g, ps, j), *api = NULL;
	char buf[128];

	if (j->how != GPU_JOIN_NONE)
		api = api_name(j->driver, j->cbid);
	/* no thread known (no API records): the process's name */
	if (!comm[0])
		comm = ps->comm[0] ? ps->comm : "unknown thread";
	snprintf(buf, sizeof(buf), "[%s]%s%s", comm, api ? ";" : "", api ? api : "");
	return intern_cstr(g, buf);
}

/* Publish a joined record and add it to the folded stacks. */
static void finish(struct gpu_plugin *g, struct gpu_pstate *ps,
		   const struct nt_gpu_rec *r, const struct gpu_joined *j)
{
	uint32_t name = name_of(g, ps, r);
	struct gpu_exec x = { .ps = ps, .j = j, .name = gpu_str(&g->strs, name, NULL) };

	if (!x.name[0])
		x.name = "?";
	if (r->type != NT_GPU_R_SYNC) {
		ps->n_joined[j->how]++;
		ps->tot_joined[j->how]++;
		ps->n_records++;
	}
	switch (r->type) {
	case NT_GPU_R_KERNEL:
		x.start = ((const struct nt_gpu_kernel *)r)->start;
		gpu_publish_kernel(g, &x, (const struct nt_gpu_kernel *)r);
		break;
	case NT_GPU_R_MEMCPY:
		x.start = ((const struct nt_gpu_memcpy *)r)->start;
		gpu_publish_memcpy(g, &x, (const struct nt_gpu_memcpy *)r);
		break;
	case NT_GPU_R_MEMSET:
		x.start = ((const struct nt_gpu_memset *)r)->start;
		gpu_publish_memset(g, &x, (const struct nt_gpu_memset *)r);
		break;
	default: {
		const struct nt_gpu_sync *s = (const struct nt_gpu_sync *)r;

		x.start = s->start;
		x.device = gpu_proc_device(ps->join, s->context);
		gpu_publish_sync(g, &x, s);
		return; /* a wait is no GPU work: not in the GPU-time flame graph */
	}
	}
	if (g->fold) {
		const struct nt_gpu_kernel *k = (const void *)r; /* start/end lead every record */
		uint32_t base = j->py_stack ? j->py_stack : j->stack ? j->stack : no_stack(g, ps, j);

		gpu_folded_add(g->fold, ps->pid, j->tid, gpu_comm_of(g, ps, j), base, name,
			       k->end > k->start ? k->end - k->start : 0);
	}
}

static void note_metrics(struct gpu_plugin *g, struct gpu_pstate *ps,
			 const struct nt_gpu_rec *r)
{
	const struct nt_gpu_kernel *k = (const void *)r;
	const struct nt_gpu_memcpy *c = (const void *)r;
	const struct nt_gpu_memset *s = (const void *)r;
	const struct nt_gpu_sync *y = (const void *)r;
	struct gpu_proc *p = ps->join;

	switch (r->type) {
	case NT_GPU_R_KERNEL:
		gpu_proc_learn_device(p, k->context, k->device);
		gpu_metrics_exec(g->m, ps->pid, GPU_X_KERNEL, name_of(g, ps, r), (int32_t)k->device,
				 k->stream, k->start, k->end, 0, 0);
		break;
	case NT_GPU_R_MEMCPY:
		gpu_proc_learn_device(p, c->context, c->device);
		gpu_metrics_exec(g->m, ps->pid, GPU_X_MEMCPY, 0, (int32_t)c->device, c->stream,
				 c->start, c->end, c->bytes, c->copy_kind);
		break;
	case NT_GPU_R_MEMSET:
		gpu_proc_learn_device(p, s->context, s->device);
		gpu_metrics_exec(g->m, ps->pid, GPU_X_MEMSET, 0, (int32_t)s->device, s->stream,
				 s->start, s->end, s->bytes, 0);
		break;
	default:
		gpu_metrics_exec(g->m, ps->pid, GPU_X_SYNC, 0, gpu_proc_device(p, y->context),
				 y->stream, y->start, y->end, 0, y->type);
	}
}

/* Queueing delay needs the API record: counted when the join is done. */
static void note_queue(struct gpu_plugin *g, struct gpu_pstate *ps,
		       const struct nt_gpu_rec *r, const struct gpu_joined *j)
{
	const struct nt_gpu_kernel *k = (const void *)r;

	if (r->type == NT_GPU_R_KERNEL && j->api_start && k->start > j->api_start)
		gpu_metrics_queue(g->m, ps->pid, k->start - j->api_start);
}

static void join_and_finish(struct gpu_plugin *g, struct gpu_pstate *ps,
			    const struct nt_gpu_rec *r, bool final, bool *waits)
{
	struct gpu_joined j;

	*waits = join_of(ps, r, final, &j) == 1;
	if (*waits)
		return;
	note_queue(g, ps, r, &j);
	finish(g, ps, r, &j);
}

static struct gpu_pending *pend_at(struct gpu_plugin *g, uint32_t i)
{
	return &g->pend[(g->pend_head + i) % g->pend_cap];
}

static bool pend_push(struct gpu_plugin *g, struct gpu_pstate *ps,
		      const struct nt_gpu_rec *r)
{
	struct gpu_pending *p;

	if (g->pend_n == g->pend_cap) {
		uint32_t cap = g->pend_cap ? g->pend_cap * 2 : 1024;
		struct gpu_pending *n;

		if (cap > (uint32_t)g->cfg->max_pending || !(n = malloc(cap * sizeof(*n))))
			return false;
		for (uint32_t i = 0; i < g->pend_n; i++)
			n[i] = *pend_at(g, i);
		free(g->pend);
		g->pend = n;
		g->pend_cap = cap;
		g->pend_head = 0;
	}
	p = pend_at(g, g->pend_n++);
	p->pid = ps->pid;
	p->arrival_ns = nt_clock_mono_ns();
	p->seq = ps->seq;
	memcpy(&p->r, r, r->size < sizeof(p->r) ? r->size : sizeof(p->r));
	return true;
}

static void on_exec(struct gpu_plugin *g, struct gpu_pstate *ps, const struct nt_gpu_rec *r)
{
	bool waits;

	if (r->size > sizeof(((struct gpu_pending *)0)->r)) {
		g->malformed++;
		return;
	}
	note_metrics(g, ps, r);
	join_and_finish(g, ps, r, false, &waits);
	/* no room to wait: joined now, as far as it goes */
	if (waits && !pend_push(g, ps, r))
		join_and_finish(g, ps, r, true, &waits);
}

static void each_record(struct gpu_plugin *g, struct gpu_pstate *ps, const uint8_t *msg,
			size_t len, bool gpu_pass)
{
	for (size_t off = sizeof(struct nt_gpu_msg); off < len;) {
		const struct nt_gpu_rec *r = (const struct nt_gpu_rec *)(msg + off);

		off += r->size;
		if (gpu_pass) {
			if (r->type >= NT_GPU_R_KERNEL && r->type <= NT_GPU_R_SYNC && ps->tracing)
				on_exec(g, ps, r);
			continue;
		}
		switch (r->type) {
		case NT_GPU_R_HELLO:
			if (ps->status == UINT32_MAX)
				on_hello(g, ps, (const struct nt_gpu_hello *)r);
			break;
		case NT_GPU_R_NAME:
			on_name(g, ps, (const struct nt_gpu_name *)r);
			break;
		case NT_GPU_R_API:
			gpu_join_api(ps->join, (const struct nt_gpu_api *)r);
			break;
		case NT_GPU_R_STATS:
			on_stats(g, ps, (const struct nt_gpu_stats *)r);
			break;
		case NT_GPU_R_KERNEL: case NT_GPU_R_MEMCPY: case NT_GPU_R_MEMSET: case NT_GPU_R_SYNC:
			break;
		default:
			g->malformed++; /* a newer library's record: skipped */
		}
	}
}

void gpu_records_message(struct gpu_plugin *g, struct gpu_pstate *ps,
			 const uint8_t *msg, size_t len)
{
	if (check_message(msg, len)) {
		g->malformed++;
		g->host->count_drop(g->inst, "cupti_malformed", 1);
		return;
	}
	each_record(g, ps, msg, len, false);
	each_record(g, ps, msg, len, true);
}

void gpu_records_retry(struct gpu_plugin *g, bool all)
{
	uint64_t now = nt_clock_mono_ns(), wait = (uint64_t)g->cfg->join_wait_ms * 1000000ull;
	uint32_t n = g->pend_n, kept = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct gpu_pending p = *pend_at(g, i);
		struct gpu_pstate *ps = gpu_pstate_of(g, p.pid);
		bool final = all || now - p.arrival_ns >= wait || (ps && ps->closed_ns &&
								      now - ps->closed_ns >= wait);
		bool waits = false;

		if (ps)
			join_and_finish(g, ps, &p.r.h, final, &waits);
		if (waits)
			*pend_at(g, kept++) = p;
	}
	g->pend_n = kept;
}

/* The end of a process: what waits is joined as it is, its stacks are
 * published, its state freed. */
void gpu_records_forget(struct gpu_plugin *g, uint32_t pid)
{
	struct gpu_pstate *ps = gpu_pstate_of(g, pid);
	uint32_t kept = 0, n = g->pend_n;

	if (!ps)
		return;
	for (uint32_t i = 0; i < n; i++) {
		struct gpu_pending p = *pend_at(g, i);
		bool waits;

		if (p.pid == pid)
			join_and_finish(g, ps, &p.r.h, true, &waits);
		else
			*pend_at(g, kept++) = p;
	}
	g->pend_n = kept;
	gpu_stacks_publish(g, pid);
	if (g->fold)
		gpu_folded_forget(g->fold, pid);
	gpu_metrics_forget(g->m, pid);
	if (ps->tracing && ps->join->api_off)
		g->host->log(g->inst, NT_LOG_INFO, "pid %u (%s): %llu GPU records (no API records: "
			     "joined to the process only%s); lost in the job: %llu (CUPTI buffers), "
			     "%llu (socket full)", pid, ps->comm, (unsigned long long)ps->n_records,
			     ps->host_calls ? "; the cuda probe's launch events go unused: set "
					      "api_records = true for stacks" : "",
			     (unsigned long long)ps->cupti_dropped,
			     (unsigned long long)ps->send_dropped);
	else if (ps->tracing)
		g->host->log(g->inst, NT_LOG_INFO, "pid %u (%s): %llu GPU records; joined with their "
			     "launch event (stacks) %llu, with their API call (thread) %llu, not "
			     "joined %llu; lost in the job: %llu (CUPTI buffers), %llu (socket full)",
			     pid, ps->comm, (unsigned long long)ps->n_records,
			     (unsigned long long)ps->tot_joined[GPU_JOIN_CALL],
			     (unsigned long long)ps->tot_joined[GPU_JOIN_THREAD],
			     (unsigned long long)ps->tot_joined[GPU_JOIN_NONE],
			     (unsigned long long)ps->cupti_dropped,
			     (unsigned long long)ps->send_dropped);
	gpu_pstate_free(g, ps);
}
