// SPDX-License-Identifier: MIT
/*
 * ntcore cuda_gpu: the events it publishes (docs/cuda-gpu.md) and how they
 * are built. The slice conventions the trace sink renders them by: a
 * device slice is [start_ns, end_ns] (CLOCK_MONOTONIC) on the track of
 * (device, stream); a non-zero launch_ts_ns links it by a flow arrow from
 * the launching thread's call; hdr.ts_ns is start_ns.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"

struct ev_kernel {
	struct nt_event_hdr hdr;
	uint64_t start_ns, end_ns, queued_ns, launch_ts_ns, stream;
	int32_t device;
	uint32_t context, correlation;
	uint32_t grid_x, grid_y, grid_z, block_x, block_y, block_z;
	uint32_t shared_mem, registers, joined;
	struct nt_vstr name, stack, py_stack;
};

struct ev_memcpy {
	struct nt_event_hdr hdr;
	uint64_t start_ns, end_ns, bytes, launch_ts_ns, stream;
	double bandwidth;
	int32_t device;
	uint32_t correlation;
	uint8_t copy_kind, src_kind, dst_kind, joined;
	struct nt_vstr name;
};

struct ev_memset {
	struct nt_event_hdr hdr;
	uint64_t start_ns, end_ns, bytes, launch_ts_ns, stream;
	int32_t device;
	uint32_t correlation, value, joined;
	struct nt_vstr name;
};

struct ev_sync {
	struct nt_event_hdr hdr;
	uint64_t start_ns, end_ns, stream;
	int32_t device;
	uint32_t correlation, sync_kind, event;
	struct nt_vstr name;
};

struct ev_stack {
	struct nt_event_hdr hdr;
	uint64_t count, gpu_ns, launches;
	struct nt_vstr stack;
};

struct ev_process {
	struct nt_event_hdr hdr;
	uint32_t subject_pid;
	int32_t status;
	uint32_t cuda_major, cupti_version;
	struct nt_vstr message;
};

#define F NT_FIELD
#define JOINED_DESC "2: joined with its launch event (stacks), 1: with its API call (thread), 0: not"

static const struct nt_field kernel_fields[] = {
	F(struct ev_kernel, start_ns, NT_F_U64, "ns", "GPU start (CLOCK_MONOTONIC)"),
	F(struct ev_kernel, end_ns, NT_F_U64, "ns", "GPU end (CLOCK_MONOTONIC)"),
	F(struct ev_kernel, queued_ns, NT_F_U64, "ns", "launch API call entry to GPU start (0 unknown)"),
	F(struct ev_kernel, launch_ts_ns, NT_F_U64, "ns", "hdr.ts_ns of the joined cuda.launch (0 none)"),
	F(struct ev_kernel, stream, NT_F_U64, "", "CUPTI stream id"),
	F(struct ev_kernel, device, NT_F_S32, "", "device ordinal (as the process sees it)"),
	F(struct ev_kernel, context, NT_F_U32, "", "CUPTI context id"),
	F(struct ev_kernel, correlation, NT_F_U32, "", "CUPTI correlation id"),
	F(struct ev_kernel, grid_x, NT_F_U32, "", "grid x"),
	F(struct ev_kernel, grid_y, NT_F_U32, "", "grid y"),
	F(struct ev_kernel, grid_z, NT_F_U32, "", "grid z"),
	F(struct ev_kernel, block_x, NT_F_U32, "", "block x"),
	F(struct ev_kernel, block_y, NT_F_U32, "", "block y"),
	F(struct ev_kernel, block_z, NT_F_U32, "", "block z"),
	F(struct ev_kernel, shared_mem, NT_F_U32, "bytes", "static + dynamic shared memory"),
	F(struct ev_kernel, registers, NT_F_U32, "", "registers per thread"),
	F(struct ev_kernel, joined, NT_F_U32, "", JOINED_DESC),
	F(struct ev_kernel, name, NT_F_VSTR, "", "kernel (demangled)"),
	F(struct ev_kernel, stack, NT_F_VSTR, "", "CPU stack of the launch, root first, ';'"),
	F(struct ev_kernel, py_stack, NT_F_VSTR, "", "Python stack of the launch (python probe), root first"),
};

static const struct nt_field memcpy_fields[] = {
	F(struct ev_memcpy, start_ns, NT_F_U64, "ns", "GPU start (CLOCK_MONOTONIC)"),
	F(struct ev_memcpy, end_ns, NT_F_U64, "ns", "GPU end (CLOCK_MONOTONIC)"),
	F(struct ev_memcpy, bytes, NT_F_U64, "bytes", "bytes copied"),
	F(struct ev_memcpy, launch_ts_ns, NT_F_U64, "ns", "hdr.ts_ns of the joined cuda.memcpy (0 none)"),
	F(struct ev_memcpy, stream, NT_F_U64, "", "CUPTI stream id"),
	F(struct ev_memcpy, bandwidth, NT_F_F64, "bytes/s", "bytes / GPU time"),
	F(struct ev_memcpy, device, NT_F_S32, "", "device ordinal"),
	F(struct ev_memcpy, correlation, NT_F_U32, "", "CUPTI correlation id"),
	F(struct ev_memcpy, copy_kind, NT_F_U8, "", "CUPTI copy kind: 1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, ..."),
	F(struct ev_memcpy, src_kind, NT_F_U8, "", "CUPTI memory kind: 1 pageable, 2 pinned, 3 device, ..."),
	F(struct ev_memcpy, dst_kind, NT_F_U8, "", "CUPTI memory kind of the destination"),
	F(struct ev_memcpy, joined, NT_F_U8, "", JOINED_DESC),
	F(struct ev_memcpy, name, NT_F_VSTR, "", "\"memcpy HtoD\" etc."),
};

static const struct nt_field memset_fields[] = {
	F(struct ev_memset, start_ns, NT_F_U64, "ns", "GPU start (CLOCK_MONOTONIC)"),
	F(struct ev_memset, end_ns, NT_F_U64, "ns", "GPU end (CLOCK_MONOTONIC)"),
	F(struct ev_memset, bytes, NT_F_U64, "bytes", "bytes set"),
	F(struct ev_memset, launch_ts_ns, NT_F_U64, "ns", "hdr.ts_ns of the joined cuda.memset (0 none)"),
	F(struct ev_memset, stream, NT_F_U64, "", "CUPTI stream id"),
	F(struct ev_memset, device, NT_F_S32, "", "device ordinal"),
	F(struct ev_memset, correlation, NT_F_U32, "", "CUPTI correlation id"),
	F(struct ev_memset, value, NT_F_U32, "", "value set"),
	F(struct ev_memset, joined, NT_F_U32, "", JOINED_DESC),
	F(struct ev_memset, name, NT_F_VSTR, "", "\"memset\""),
};

static const struct nt_field sync_fields[] = {
	F(struct ev_sync, start_ns, NT_F_U64, "ns", "start of the wait (CLOCK_MONOTONIC)"),
	F(struct ev_sync, end_ns, NT_F_U64, "ns", "end of the wait"),
	F(struct ev_sync, stream, NT_F_U64, "", "CUPTI stream id (waits on a stream or event)"),
	F(struct ev_sync, device, NT_F_S32, "", "device ordinal (-1 unknown)"),
	F(struct ev_sync, correlation, NT_F_U32, "", "CUPTI correlation id"),
	F(struct ev_sync, sync_kind, NT_F_U32, "", "1 event sync, 2 stream wait event, 3 stream sync, 4 context sync"),
	F(struct ev_sync, event, NT_F_U32, "", "CUPTI event id"),
	F(struct ev_sync, name, NT_F_VSTR, "", "\"stream synchronize\" etc."),
};

static const struct nt_field stack_fields[] = {
	F(struct ev_stack, count, NT_F_U64, "us", "GPU microseconds under this stack since the previous event for it"),
	F(struct ev_stack, gpu_ns, NT_F_U64, "ns", "the same in ns"),
	F(struct ev_stack, launches, NT_F_U64, "count", "GPU records (kernels, copies, sets) counted"),
	F(struct ev_stack, stack, NT_F_VSTR, "", "root first, ';': the launch's Python or CPU stack, then [gpu] NAME"),
};

static const struct nt_field process_fields[] = {
	F(struct ev_process, subject_pid, NT_F_U32, "", "the process"),
	F(struct ev_process, status, NT_F_ERRNO, "", "OK tracing; ENOENT no CUPTI for its CUDA; EIO CUPTI refused"),
	F(struct ev_process, cuda_major, NT_F_U32, "", "the job's CUDA major (0 unknown)"),
	F(struct ev_process, cupti_version, NT_F_U32, "", "cuptiGetVersion (0 unknown)"),
	F(struct ev_process, message, NT_F_VSTR, "", "which CUPTI, or why none (also logged)"),
};
#undef F

#define SCHEMA(var, nm, dsc, flds, strct)                                      \
	static const struct nt_schema var = { .name = nm, .desc = dsc,         \
		.fields = flds, .n_fields = NT_ARRAY_LEN(flds), .min_size = sizeof(strct) }

SCHEMA(kernel_schema, "cuda.kernel_exec", "a kernel ran on the GPU (CUPTI)", kernel_fields, struct ev_kernel);
SCHEMA(memcpy_schema, "cuda.memcpy_exec", "a copy ran on the GPU (CUPTI)", memcpy_fields, struct ev_memcpy);
SCHEMA(memset_schema, "cuda.memset_exec", "a memset ran on the GPU (CUPTI)", memset_fields, struct ev_memset);
SCHEMA(sync_schema, "cuda.sync_exec", "a synchronization (CUPTI)", sync_fields, struct ev_sync);
SCHEMA(stack_schema, "cuda.gpu_stack", "GPU time per launching stack (folded)", stack_fields, struct ev_stack);
SCHEMA(process_schema, "cuda.gpu_process", "a job's CUPTI: tracing, or why not", process_fields, struct ev_process);

int gpu_events_register(struct gpu_plugin *g)
{
	struct { int *t; const struct nt_schema *s; } all[] = {
		{ &g->t_kernel, &kernel_schema }, { &g->t_memcpy, &memcpy_schema },
		{ &g->t_memset, &memset_schema }, { &g->t_sync, &sync_schema },
		{ &g->t_stack, &stack_schema }, { &g->t_process, &process_schema },
	};

	for (size_t i = 0; i < NT_ARRAY_LEN(all); i++)
		if ((*all[i].t = g->host->register_schema(g->inst, all[i].s)) < 0)
			return *all[i].t;
	return 0;
}

/* ---- building a record ------------------------------------------------------ */

static void *ev_begin(struct gpu_plugin *g, int type, size_t fixed, uint64_t ts,
		      uint32_t pid, uint32_t tid, const char *comm)
{
	static const char zero[512];
	struct nt_sb *b = &g->ev;
	struct nt_event_hdr *h;

	nt_sb_reset(b);
	nt_sb_put(b, zero, fixed < sizeof(zero) ? fixed : sizeof(zero));
	if (b->failed || fixed > sizeof(zero))
		return NULL;
	h = (struct nt_event_hdr *)b->buf;
	h->type = (uint32_t)type;
	h->ts_ns = ts;
	h->pid = pid;
	h->tid = tid;
	if (comm)
		memcpy(h->comm, comm, strnlen(comm, NT_COMM_LEN));
	return b->buf;
}

/* Append s and point the vstr at offset `field` of the record at it. */
static void ev_str(struct gpu_plugin *g, size_t field, const char *s, size_t len)
{
	struct nt_sb *b = &g->ev;
	struct nt_vstr v = { (uint32_t)b->len, (uint32_t)len };

	if (!len)
		return;
	nt_sb_put(b, s, len);
	if (b->failed)
		return;
	memcpy(b->buf + field, &v, sizeof(v));
}

static void ev_publish(struct gpu_plugin *g)
{
	struct nt_event_hdr *h = (struct nt_event_hdr *)g->ev.buf;

	if (g->ev.failed) {
		g->host->count_drop(g->inst, "cupti_nomem", 1);
		return;
	}
	h->size = (uint32_t)g->ev.len;
	g->host->publish(g->inst, h);
}

static void ev_str_id(struct gpu_plugin *g, size_t field, uint32_t id)
{
	uint32_t len;
	const char *s = gpu_str(&g->strs, id, &len);

	ev_str(g, field, s, len);
}

const char *gpu_comm_of(struct gpu_plugin *g, struct gpu_pstate *ps,
			const struct gpu_joined *j)
{
	(void)g;
	struct gpu_thread *t;
	char path[64];
	FILE *f;

	if (!j->tid)
		return "";
	if (j->thr && j->thr->comm_known)
		return j->thr->comm;
	t = gpu_thread_get(ps->join, j->tid, true);
	if (!t)
		return "";
	if (!t->comm_known) {
		/* a thread the probe never reported: read its name once */
		t->comm_known = true;
		snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", ps->pid, j->tid);
		if ((f = fopen(path, "re"))) {
			if (fgets(t->comm, sizeof(t->comm), f))
				t->comm[strcspn(t->comm, "\n")] = '\0';
			fclose(f);
		}
	}
	return t->comm;
}

#define BEGIN(type_, strct, x)                                                 \
	(strct *)ev_begin(g, g->type_, sizeof(strct), (x)->start, (x)->ps->pid, \
			  (x)->j->tid, gpu_comm_of(g, (x)->ps, (x)->j))

void gpu_publish_kernel(struct gpu_plugin *g, const struct gpu_exec *x,
			const struct nt_gpu_kernel *k)
{
	struct ev_kernel *e = BEGIN(t_kernel, struct ev_kernel, x);

	if (!e)
		return;
	e->start_ns = k->start;
	e->end_ns = k->end;
	e->queued_ns = x->j->api_start && k->start > x->j->api_start ? k->start - x->j->api_start : 0;
	e->launch_ts_ns = x->j->call_ts;
	e->stream = k->stream;
	e->device = (int32_t)k->device;
	e->context = k->context;
	e->correlation = k->correlation;
	e->grid_x = (uint32_t)k->grid[0];
	e->grid_y = (uint32_t)k->grid[1];
	e->grid_z = (uint32_t)k->grid[2];
	e->block_x = (uint32_t)k->block[0];
	e->block_y = (uint32_t)k->block[1];
	e->block_z = (uint32_t)k->block[2];
	e->shared_mem = (uint32_t)(k->static_shared + k->dynamic_shared);
	e->registers = k->registers;
	e->joined = (uint32_t)x->j->how;
	ev_str(g, offsetof(struct ev_kernel, name), x->name, strlen(x->name));
	ev_str_id(g, offsetof(struct ev_kernel, stack), x->j->stack);
	ev_str_id(g, offsetof(struct ev_kernel, py_stack), x->j->py_stack);
	ev_publish(g);
}

void gpu_publish_memcpy(struct gpu_plugin *g, const struct gpu_exec *x,
			const struct nt_gpu_memcpy *c)
{
	struct ev_memcpy *e = BEGIN(t_memcpy, struct ev_memcpy, x);

	if (!e)
		return;
	e->start_ns = c->start;
	e->end_ns = c->end;
	e->bytes = c->bytes;
	e->launch_ts_ns = x->j->call_ts;
	e->stream = c->stream;
	e->bandwidth = c->end > c->start ? (double)c->bytes * 1e9 / (double)(c->end - c->start) : 0;
	e->device = (int32_t)c->device;
	e->correlation = c->correlation;
	e->copy_kind = c->copy_kind;
	e->src_kind = c->src_kind;
	e->dst_kind = c->dst_kind;
	e->joined = (uint8_t)x->j->how;
	ev_str(g, offsetof(struct ev_memcpy, name), x->name, strlen(x->name));
	ev_publish(g);
}

void gpu_publish_memset(struct gpu_plugin *g, const struct gpu_exec *x,
			const struct nt_gpu_memset *s)
{
	struct ev_memset *e = BEGIN(t_memset, struct ev_memset, x);

	if (!e)
		return;
	e->start_ns = s->start;
	e->end_ns = s->end;
	e->bytes = s->bytes;
	e->launch_ts_ns = x->j->call_ts;
	e->stream = s->stream;
	e->device = (int32_t)s->device;
	e->correlation = s->correlation;
	e->value = s->value;
	e->joined = (uint32_t)x->j->how;
	ev_str(g, offsetof(struct ev_memset, name), x->name, strlen(x->name));
	ev_publish(g);
}

void gpu_publish_sync(struct gpu_plugin *g, const struct gpu_exec *x,
		      const struct nt_gpu_sync *s)
{
	struct ev_sync *e = BEGIN(t_sync, struct ev_sync, x);

	if (!e)
		return;
	e->start_ns = s->start;
	e->end_ns = s->end;
	e->stream = s->stream;
	e->device = x->device;
	e->correlation = s->correlation;
	e->sync_kind = s->type;
	e->event = s->event;
	ev_str(g, offsetof(struct ev_sync, name), x->name, strlen(x->name));
	ev_publish(g);
}

void gpu_publish_process(struct gpu_plugin *g, const struct gpu_pstate *ps,
			 const struct nt_gpu_hello *h, int err)
{
	struct ev_process *e = ev_begin(g, g->t_process, sizeof(*e), nt_clock_mono_ns(), ps->pid,
					ps->pid, ps->comm);

	if (!e)
		return;
	e->subject_pid = ps->pid;
	e->status = err;
	e->cuda_major = h ? h->cuda_major : 0;
	e->cupti_version = h ? h->cupti_version : 0;
	if (h)
		ev_str(g, offsetof(struct ev_process, message), h->text,
		       strnlen(h->text, sizeof(h->text)));
	ev_publish(g);
}

void gpu_publish_stack(struct gpu_plugin *g, uint32_t pid, uint32_t tid,
		       const char *comm, const char *stack, size_t len,
		       uint64_t us, uint64_t ns, uint64_t launches)
{
	struct ev_stack *e = ev_begin(g, g->t_stack, sizeof(*e), nt_clock_mono_ns(), pid, tid, comm);

	if (!e)
		return;
	e->count = us;
	e->gpu_ns = ns;
	e->launches = launches;
	ev_str(g, offsetof(struct ev_stack, stack), stack, len);
	ev_publish(g);
}

/* ---- cuda.gpu_stack ----------------------------------------------------------- */

struct publish_ctx {
	struct gpu_plugin *g;
};

static void publish_one(void *arg, uint32_t pid, uint32_t tid, const char *comm,
			uint32_t base, uint32_t name, uint64_t us, uint64_t ns,
			uint64_t launches)
{
	struct gpu_plugin *g = ((struct publish_ctx *)arg)->g;
	struct nt_sb *b = &g->text;
	uint32_t len;
	const char *s;

	nt_sb_reset(b);
	if (!base && !name) {
		nt_sb_puts(b, "[other stacks]");
	} else {
		s = gpu_str(&g->strs, base, &len);
		nt_sb_put(b, len ? s : "[no launch stack]", len ? len : 17);
		nt_sb_puts(b, ";[gpu] ");
		s = gpu_str(&g->strs, name, &len);
		nt_sb_put(b, len ? s : "?", len ? len : 1);
	}
	gpu_publish_stack(g, pid, tid, comm, b->buf, b->len, us, ns, launches);
}

void gpu_stacks_publish(struct gpu_plugin *g, uint32_t pid)
{
	struct publish_ctx c = { g };

	if (g->fold)
		gpu_folded_emit(g->fold, pid, publish_one, &c);
}
