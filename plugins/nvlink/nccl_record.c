/* SPDX-License-Identifier: MIT */
/*
 * nvlink: NCCL call records from the ring buffer to events and metrics
 * (nccl.collective, nccl.comm_init, the call counters) and the
 * per-interval bandwidth gauges built from them. No BPF here: the records
 * come as bytes, so tests/unit/test_nvlink_ring.c feeds synthetic ones
 * with a stand-in host. nccl_events.c runs the hang check.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "nccl_model.h"
#include "nvl.h"

/* ncclSuccess, or ncclInProgress (a non-blocking communicator): issued. */
static bool issued(int32_t ret)
{
	return ret == 0 || ret == 7;
}

struct labels {
	char pid[16], rank[16], nranks[16], comm[NT_COMM_LEN + 1];
	const char *v[5];
};

static void labels_make(struct labels *l, const struct nt_event_hdr *h,
			int32_t rank, int32_t nranks, uint32_t call)
{
	snprintf(l->pid, sizeof(l->pid), "%u", h->pid);
	memcpy(l->comm, h->comm, NT_COMM_LEN);
	l->comm[NT_COMM_LEN] = '\0';
	if (rank >= 0)
		snprintf(l->rank, sizeof(l->rank), "%d", rank);
	else
		l->rank[0] = '\0';
	if (nranks >= 0)
		snprintf(l->nranks, sizeof(l->nranks), "%d", nranks);
	else
		l->nranks[0] = '\0';
	l->v[0] = l->pid;
	l->v[1] = l->comm;
	l->v[2] = l->rank;
	l->v[3] = l->nranks;
	l->v[4] = nvl_call_name(call);
}

static void count_call(struct nvl *s, const struct nvl_raw_call *r,
		       int32_t rank, int32_t nranks, uint64_t bytes)
{
	struct labels l;

	labels_make(&l, &r->hdr, rank, nranks, r->call);
	s->host->metric_add(s->nm.m[NVM_NCCL_CALLS], l.v, 1);
	s->host->metric_add(s->nm.m[NVM_NCCL_SECONDS], l.v,
			    (double)r->duration_ns / 1e9);
	if (bytes)
		s->host->metric_add(s->nm.m[NVM_NCCL_BYTES], l.v, (double)bytes);
	if (!issued(r->ret)) {
		char res[16];
		const char *ev[4] = { l.pid, l.comm, l.v[4], res };

		snprintf(res, sizeof(res), "%d", r->ret);
		s->host->metric_add(s->nm.m[NVM_NCCL_ERRORS], ev, 1);
	}
}

static void bw_add(struct nvl *s, const struct nvl_raw_call *r, int32_t rank,
		   uint32_t call, uint64_t alg_bytes, double factor)
{
	struct nvl_bw *free_slot = NULL;

	if (!r->duration_ns || !alg_bytes)
		return;
	for (size_t i = 0; i < NVL_BW_MAX; i++) {
		struct nvl_bw *b = &s->bw[i];

		if (!b->used) {
			free_slot = free_slot ? free_slot : b;
			continue;
		}
		if (b->pid == r->hdr.pid && b->rank == rank && b->call == call) {
			b->alg_bytes += alg_bytes;
			b->ns += r->duration_ns;
			return;
		}
	}
	if (!free_slot) {
		s->bw_lost++;
		return;
	}
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->used = true;
	free_slot->pid = r->hdr.pid;
	memcpy(free_slot->comm, r->hdr.comm, NT_COMM_LEN);
	free_slot->rank = rank;
	free_slot->call = call;
	free_slot->alg_bytes = alg_bytes;
	free_slot->ns = r->duration_ns;
	free_slot->busbw_factor = factor;
}

static void publish_coll(struct nvl *s, const struct nvl_raw_call *r,
			 const struct nvl_args *a, const struct nvl_comm *c,
			 const struct nvl_ev_coll *fill)
{
	struct nvl_ev_coll *e = (struct nvl_ev_coll *)s->rec.bytes;

	if (!s->cfg->collective_events || s->types[NVL_EV_COLL] <= 0)
		return;
	*e = *fill;
	e->hdr = r->hdr;
	e->hdr.type = (uint32_t)s->types[NVL_EV_COLL];
	e->hdr.size = sizeof(*e);
	e->duration_ns = r->duration_ns;
	e->comm_handle = a->comm;
	e->communicator = c ? c->uid : 0;
	e->stream = a->stream;
	e->rank = c ? c->rank : -1;
	e->nranks = c ? c->nranks : -1;
	e->ret = r->ret;
	e->algbw = r->duration_ns ? (double)e->algbw_bytes * 1e9 / (double)r->duration_ns : 0;
	snprintf(e->name, sizeof(e->name), "%s", nvl_call_name(r->call));
	s->host->publish(s->inst, &e->hdr);
}

static void on_data(struct nvl *s, const struct nvl_raw_call *r,
		    const struct nvl_args *a)
{
	struct nvl_comm *c = nvl_comm_find(&s->comms, r->hdr.pid, a->comm);
	int32_t rank = c ? c->rank : -1, nranks = c ? c->nranks : -1;
	struct nvl_group *g = nvl_group_get(&s->groups, r->hdr.tid, r->hdr.ts_ns, false);
	struct nvl_ev_coll f;

	memset(&f, 0, sizeof(f));
	f.count = a->count;
	f.bytes = nvl_call_bytes(a);
	f.algbw_bytes = nvl_algbw_bytes(r->call, f.bytes, nranks);
	f.root = a->root;
	f.calls = 1;
	f.in_group = g && g->depth > 0;
	snprintf(f.dtype, sizeof(f.dtype), "%s", nvl_dtype_name(a->dtype));
	snprintf(f.op, sizeof(f.op), "%s", nvl_op_name(a->op));
	if (c && nvl_call_is_collective(r->call) && issued(r->ret)) {
		struct nvl_coll k = { 0, r->hdr.ts_ns, a->count, f.bytes, r->call,
				      a->dtype, a->op };

		f.seq = nvl_comm_collective(c, &k);
	}
	count_call(s, r, rank, nranks, f.bytes);
	if (f.in_group && issued(r->ret)) {
		g->calls++;
		g->bytes += f.bytes;
		g->alg_bytes += f.algbw_bytes;
		g->rank = rank;
		g->nranks = nranks;
		g->comm = a->comm;
		g->factor = nvl_busbw_factor(r->call, nranks);
	} else if (issued(r->ret)) {
		bw_add(s, r, rank, r->call, f.algbw_bytes,
		       nvl_busbw_factor(r->call, nranks));
	}
	publish_coll(s, r, a, c, &f);
}

static void on_group(struct nvl *s, const struct nvl_raw_call *r)
{
	struct nvl_group *g = nvl_group_get(&s->groups, r->hdr.tid, r->hdr.ts_ns,
					    r->call == NVL_C_GROUPSTART);
	struct nvl_args a = { .comm = g ? g->comm : 0, .dtype = -1, .op = -1,
			      .root = -1 };
	struct nvl_ev_coll f;

	if (g && r->call == NVL_C_GROUPSTART && !g->depth) {
		g->calls = 0;
		g->bytes = g->alg_bytes = 0;
		g->rank = g->nranks = -1;
	}
	count_call(s, r, g ? g->rank : -1, g ? g->nranks : -1, 0);
	if (!g || !issued(r->ret))
		return;
	if (r->call == NVL_C_GROUPSTART) {
		g->depth++;
		return;
	}
	if (!g->depth || --g->depth)
		return; /* unmatched, or an inner group */
	memset(&f, 0, sizeof(f));
	f.bytes = g->bytes;
	f.algbw_bytes = g->alg_bytes;
	f.calls = g->calls;
	f.root = -1;
	if (g->calls)
		bw_add(s, r, g->rank, r->call, g->alg_bytes, g->factor);
	publish_coll(s, r, &a, nvl_comm_find(&s->comms, r->hdr.pid, g->comm), &f);
}

static void publish_init(struct nvl *s, const struct nvl_raw_call *r,
			 uint64_t handle, uint64_t uid, int32_t rank, int32_t nranks)
{
	struct nvl_ev_init *e = (struct nvl_ev_init *)s->rec.bytes;

	if (s->types[NVL_EV_INIT] <= 0)
		return;
	memset(e, 0, sizeof(*e));
	e->hdr = r->hdr;
	e->hdr.type = (uint32_t)s->types[NVL_EV_INIT];
	e->hdr.size = sizeof(*e);
	e->duration_ns = r->duration_ns;
	e->comm_handle = handle;
	e->communicator = uid;
	e->rank = rank;
	e->nranks = nranks;
	e->ret = r->ret;
	snprintf(e->name, sizeof(e->name), "%s", nvl_call_name(r->call));
	s->host->publish(s->inst, &e->hdr);
}

static void on_init(struct nvl *s, const struct nvl_raw_call *r,
		    const struct nvl_args *a)
{
	uint64_t uid = nvl_uid_hash(r->uid, sizeof(r->uid));

	count_call(s, r, a->rank, a->nranks, 0);
	if (r->call == NVL_C_INITALL && r->nhandles) /* one process, no id */
		uid = nvl_uid_hash((const uint8_t *)r->handles, 8) ^ r->hdr.pid;
	if (!issued(r->ret) || !r->nhandles)
		publish_init(s, r, 0, uid, a->rank, a->nranks);
	for (uint32_t i = 0; i < r->nhandles && i < NVL_HANDLES_MAX; i++) {
		int32_t rank = a->rank + (int32_t)i;

		nvl_comm_add(&s->comms, r->hdr.pid, r->handles[i], uid, rank,
			     a->nranks);
		publish_init(s, r, r->handles[i], uid, rank, a->nranks);
	}
}

void nvl_nccl_record(struct nvl *s, const void *rec, size_t size)
{
	struct nvl_raw_call full;
	const struct nvl_raw_call *r = &full;
	struct nvl_args a;
	struct nvl_comm *c;

	if (size < NVL_RAW_CALL_SHORT)
		return;
	memset(&full, 0, sizeof(full));
	memcpy(&full, rec, size < sizeof(full) ? size : sizeof(full));
	if (r->call >= NVL_C_N || (nvl_call_is_init(r->call) && size < sizeof(full)))
		return;
	nvl_decode_args(r->call, r->reg, r->stk, &a);
	if (nvl_call_is_init(r->call)) {
		on_init(s, r, &a);
	} else if (nvl_call_moves_data(r->call)) {
		on_data(s, r, &a);
	} else if (r->call == NVL_C_GROUPSTART || r->call == NVL_C_GROUPEND) {
		on_group(s, r);
	} else {
		c = nvl_comm_find(&s->comms, r->hdr.pid, a.comm);
		count_call(s, r, c ? c->rank : -1, c ? c->nranks : -1, 0);
		if (r->call != NVL_C_FINALIZE)
			nvl_comm_drop(&s->comms, r->hdr.pid, a.comm);
	}
}

void nvl_nccl_forget_pid(struct nvl *s, uint32_t pid)
{
	nvl_comm_drop_pid(&s->comms, pid);
}

/* ------------------------------------------------------------------ */
/* Per interval                                                        */
/* ------------------------------------------------------------------ */

void nvl_nccl_bw_publish(struct nvl *s)
{
	for (size_t i = 0; i < NVL_BW_MAX; i++) {
		struct nvl_bw *b = &s->bw[i];
		char ps[16], rs[16];
		const char *lv[4] = { ps, b->comm, rs, nvl_call_name(b->call) };
		double algbw;

		if (!b->used)
			continue;
		snprintf(ps, sizeof(ps), "%u", b->pid);
		if (b->rank >= 0)
			snprintf(rs, sizeof(rs), "%d", b->rank);
		else
			rs[0] = '\0';
		algbw = (double)b->alg_bytes * 1e9 / (double)b->ns;
		s->host->metric_set(s->nm.m[NVM_NCCL_ALGBW], lv, algbw);
		s->host->metric_set(s->nm.m[NVM_NCCL_BUSBW], lv, algbw * b->busbw_factor);
		b->used = false;
	}
	if (s->bw_lost) {
		s->host->count_drop(s->inst, "nccl_bw", s->bw_lost);
		s->bw_lost = 0;
	}
}
