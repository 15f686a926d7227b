/* SPDX-License-Identifier: MIT */
#include "cuda_decode_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Specs: what the BPF side captures per API                           */
/* ------------------------------------------------------------------ */

/* Graph building: which argument is the handle made (read at return),
 * which one points at kernel-node parameters (func at offset 0). */
static void graphdef_spec(unsigned api, struct nt_cuda_spec *s)
{
	switch (api) {
	case NT_CUDA_API_cudaStreamEndCapture:
	case NT_CUDA_API_cudaStreamEndCapture_ptsz:
	case NT_CUDA_API_cuStreamEndCapture:
	case NT_CUDA_API_cuStreamEndCapture_ptsz:
		s->out_arg = 2; /* (stream, &graph) */
		break;
	case NT_CUDA_API_cudaGraphInstantiate:
	case NT_CUDA_API_cudaGraphInstantiateWithFlags:
	case NT_CUDA_API_cudaGraphInstantiateWithParams:
	case NT_CUDA_API_cuGraphInstantiateWithFlags:
	case NT_CUDA_API_cuGraphInstantiateWithParams:
	case NT_CUDA_API_cuGraphInstantiate_v2:
		s->out_arg = 1; /* (&exec, graph, ...) */
		break;
	case NT_CUDA_API_cudaGraphAddKernelNode:
	case NT_CUDA_API_cuGraphAddKernelNode_v2:
		/* (&node, graph, deps, ndeps, params) */
		s->out_arg = 1;
		s->flags = NT_CUDA_SPEC_DEREF;
		s->deref_arg = 5;
		s->deref_size = NT_CUDA_BLOB;
		break;
	case NT_CUDA_API_cudaGraphKernelNodeSetParams:
	case NT_CUDA_API_cuGraphKernelNodeSetParams_v2:
		s->flags = NT_CUDA_SPEC_DEREF; /* (node, params) */
		s->deref_arg = 2;
		s->deref_size = NT_CUDA_BLOB;
		break;
	case NT_CUDA_API_cudaGraphExecKernelNodeSetParams:
	case NT_CUDA_API_cuGraphExecKernelNodeSetParams_v2:
		s->flags = NT_CUDA_SPEC_DEREF; /* (exec, node, params) */
		s->deref_arg = 3;
		s->deref_size = NT_CUDA_BLOB;
		break;
	default:
		break;
	}
}

bool nt_cuda_spec_for(unsigned api, struct nt_cuda_spec *s)
{
	int fam = nt_cuda_api_family(api);

	memset(s, 0, sizeof(*s));
	if (api == NT_CUDA_API_NONE || api >= NT_CUDA_API_COUNT)
		return false;
	s->family = (uint8_t)fam;
	s->layer = (uint8_t)nt_cuda_api_layer(api);
	switch (fam) {
	case NT_CUDA_FAM_ALLOC:
		s->out_arg = 1;
		s->flags = NT_CUDA_SPEC_STACK;
		if (api == NT_CUDA_API_cudaMallocPitch ||
		    api == NT_CUDA_API_cuMemAllocPitch_v2)
			s->out2_arg = 2;
		break;
	case NT_CUDA_FAM_FREE:
		s->flags = NT_CUDA_SPEC_STACK;
		break;
	case NT_CUDA_FAM_MEMCPY:
	case NT_CUDA_FAM_MEMSET:
		/* the asynchronous ones return at once: no enter event (an
		 * enter per cudaMemsetAsync cost PyTorch ~1 us a call) */
		if (!strstr(nt_cuda_api_name(api), "Async"))
			s->flags = NT_CUDA_SPEC_ENTER_EV;
		if (api == NT_CUDA_API_cudaMemcpy2D ||
		    api == NT_CUDA_API_cudaMemcpy2DAsync)
			s->nstack = 2; /* kind, stream */
		break;
	case NT_CUDA_FAM_SYNC:
		s->flags = NT_CUDA_SPEC_ENTER_EV;
		break;
	case NT_CUDA_FAM_GRAPH:
		s->flags = NT_CUDA_SPEC_STACK;
		break;
	case NT_CUDA_FAM_KNAME:
		s->out_arg = 1;
		break;
	case NT_CUDA_FAM_DEVICE:
		if (api == NT_CUDA_API_cuDevicePrimaryCtxRetain)
			s->out_arg = 1;
		break;
	case NT_CUDA_FAM_LAUNCH:
		/* launches have their own programs (no return probe) */
		s->flags = NT_CUDA_SPEC_STACK;
		break;
	case NT_CUDA_FAM_GRAPHDEF:
		graphdef_spec(api, s);
		break;
	case NT_CUDA_FAM_VMM:
		if (api == NT_CUDA_API_cuMemCreate) {
			/* (&handle, size, prop, flags): prop's location */
			s->out_arg = 1;
			s->flags = NT_CUDA_SPEC_STACK | NT_CUDA_SPEC_DEREF;
			s->deref_arg = 3;
			s->deref_size = 16;
		} else if (api != NT_CUDA_API_cuMemRelease) {
			s->flags = NT_CUDA_SPEC_STACK;
		}
		break;
	default:
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------ */
/* Records                                                             */
/* ------------------------------------------------------------------ */

void nt_cuda_rec_str(struct nt_cuda_rec *rec, struct nt_vstr *field,
		     const char *s, size_t n)
{
	uint32_t off = rec->u.hdr.size;

	if (!s)
		n = 0;
	if (off + n > NT_CUDA_REC_MAX)
		n = off < NT_CUDA_REC_MAX ? NT_CUDA_REC_MAX - off : 0;
	if (n)
		memcpy(rec->u.bytes + off, s, n);
	field->off = off;
	field->len = (uint32_t)n;
	rec->u.hdr.size = off + (uint32_t)n;
}

static void rec_cstr(struct nt_cuda_rec *rec, struct nt_vstr *field,
		     const char *s)
{
	nt_cuda_rec_str(rec, field, s, s ? strlen(s) : 0);
}

/* Start a record: header copied from the raw one, fixed part zeroed. */
static void *rec_start(struct nt_cuda_state *st, struct nt_cuda_rec *rec,
		       enum nt_cuda_evt evt, const struct nt_event_hdr *from,
		       size_t fixed)
{
	memset(rec->u.bytes, 0, fixed);
	rec->u.hdr = *from;
	rec->u.hdr.type = st->type_ids[evt];
	rec->u.hdr.size = (uint32_t)fixed;
	return rec->u.bytes;
}

#define COMMON_FROM_RAW(ev, rc)                                                \
	do {                                                                   \
		(ev)->cgroup_id = (rc)->cgroup_id;                             \
		(ev)->duration_ns = (rc)->duration_ns;                         \
		(ev)->api = (rc)->api;                                         \
		(ev)->layer = (rc)->layer;                                     \
		(ev)->flags = (rc)->flags;                                     \
		(ev)->ret = (int32_t)(rc)->ret;                                \
		(ev)->device = (rc)->device;                                   \
	} while (0)


static void rec_stack(struct nt_cuda_state *st, struct nt_cuda_rec *rec,
		      struct nt_vstr *field, uint32_t pid, const uint64_t *ips,
		      uint32_t n, const char *top)
{
	uint32_t off = rec->u.hdr.size;
	size_t room = off < NT_CUDA_REC_MAX ? NT_CUDA_REC_MAX - off : 0;
	size_t len = 0;

	if (n && room > 1)
		len = nt_cuda_format_stack(st, pid, ips, n,
					   (char *)rec->u.bytes + off, room, top);
	field->off = off;
	field->len = (uint32_t)len;
	rec->u.hdr.size = off + (uint32_t)len;
}

int nt_cuda_dir_from_kind(uint64_t kind)
{
	switch (kind) {
	case 0: return NT_CUDA_DIR_H2H;
	case 1: return NT_CUDA_DIR_H2D;
	case 2: return NT_CUDA_DIR_D2H;
	case 3: return NT_CUDA_DIR_D2D;
	default: return NT_CUDA_DIR_UNKNOWN;
	}
}

static bool addr_on_device(const struct nt_cuda_proc *p, uint64_t addr)
{
	const struct nt_cuda_block *b = p ? nt_cuda_block_at(p, addr) : NULL;

	return b && nt_cuda_mem_on_device(b->kind);
}

int nt_cuda_classify_copy(const struct nt_cuda_proc *p, uint64_t dst,
			  uint64_t src)
{
	bool d = addr_on_device(p, dst), s = addr_on_device(p, src);

	if (d && s)
		return NT_CUDA_DIR_D2D;
	if (d)
		return NT_CUDA_DIR_H2D;
	if (s)
		return NT_CUDA_DIR_D2H;
	return NT_CUDA_DIR_H2H;
}

/* A stack taken at the return of a failed call: the caller's frames, then
 * the function itself, last as in every stack of the probe. */
static void ret_stack(struct nt_cuda_state *st, struct nt_cuda_rec *rec,
		      struct nt_vstr *field, const struct nt_cuda_raw_call *rc)
{
	const char *fn = nt_cuda_api_name(rc->api);
	size_t fl = strlen(fn);

	rec_stack(st, rec, field, rc->hdr.pid, rc->ips, rc->nframes, NULL);
	if (rec->u.hdr.size + fl + 1 > NT_CUDA_REC_MAX)
		return;
	if (field->len)
		rec->u.bytes[rec->u.hdr.size++] = ';';
	memcpy(rec->u.bytes + rec->u.hdr.size, fn, fl);
	rec->u.hdr.size += (uint32_t)fl;
	field->len = rec->u.hdr.size - field->off;
}

/* Error record for a failed call. */
static void build_error(struct nt_cuda_state *st, const struct nt_cuda_raw_call *rc,
			uint64_t size, uint64_t handle, struct nt_cuda_rec *rec)
{
	struct nt_cuda_error *e =
		rec_start(st, rec, NT_CUDA_EVT_ERROR, &rc->hdr, sizeof(*e));
	char buf[48];

	COMMON_FROM_RAW(e, rc);
	e->size = size;
	e->handle = handle;
	e->stack_id = nt_cuda_stack_id(rc->ips, rc->nframes);
	rec_cstr(rec, &e->api_name, nt_cuda_api_name(rc->api));
	rec_cstr(rec, &e->error_name,
		 nt_cuda_error_format(rc->layer, (int32_t)rc->ret, buf, sizeof(buf)));
	if (rc->pad & NT_CUDA_RAWF_RET_STACK)
		ret_stack(st, rec, &e->stack, rc);
	else
		rec_stack(st, rec, &e->stack, rc->hdr.pid, rc->ips, rc->nframes,
			  nt_cuda_api_name(rc->api));
}

static void alloc_book(struct nt_cuda_state *st, struct nt_cuda_proc *p,
		       const struct nt_cuda_raw_call *rc, struct nt_cuda_rec *rec,
		       struct nt_cuda_alloc *a);
static void free_book(struct nt_cuda_state *st, struct nt_cuda_proc *p,
		      const struct nt_cuda_raw_call *rc, struct nt_cuda_rec *rec,
		      struct nt_cuda_free *f);

static int decode_alloc(struct nt_cuda_state *st, struct nt_cuda_proc *p,
			const struct nt_cuda_raw_call *rc, struct nt_cuda_rec *rec,
			uint64_t *err_size)
{
	struct nt_cuda_alloc *a =
		rec_start(st, rec, NT_CUDA_EVT_ALLOC, &rc->hdr, sizeof(*a));
	bool ok = (int32_t)rc->ret == 0;
	unsigned api = rc->api;

	COMMON_FROM_RAW(a, rc);
	a->ptr = ok ? rc->out[0] : 0;
	a->size = rc->arg[1];
	switch (api) {
	case NT_CUDA_API_cudaMallocAsync:
	case NT_CUDA_API_cudaMallocAsync_ptsz:
	case NT_CUDA_API_cuMemAllocAsync:
	case NT_CUDA_API_cuMemAllocAsync_ptsz:
		a->kind = NT_CUDA_MEM_ASYNC;
		a->stream = rc->arg[2];
		a->flags |= NT_CUDA_F_ASYNC;
		break;
	case NT_CUDA_API_cudaMallocFromPoolAsync:
	case NT_CUDA_API_cudaMallocFromPoolAsync_ptsz:
	case NT_CUDA_API_cuMemAllocFromPoolAsync:
	case NT_CUDA_API_cuMemAllocFromPoolAsync_ptsz:
		a->kind = NT_CUDA_MEM_ASYNC;
		a->stream = rc->arg[3];
		a->flags |= NT_CUDA_F_ASYNC;
		break;
	case NT_CUDA_API_cudaMallocManaged:
	case NT_CUDA_API_cuMemAllocManaged:
		a->kind = NT_CUDA_MEM_MANAGED;
		a->alloc_flags = (uint32_t)rc->arg[2];
		break;
	case NT_CUDA_API_cudaMallocHost:
	case NT_CUDA_API_cuMemAllocHost_v2:
		a->kind = NT_CUDA_MEM_HOST;
		break;
	case NT_CUDA_API_cudaHostAlloc:
	case NT_CUDA_API_cuMemHostAlloc:
		a->kind = NT_CUDA_MEM_HOST;
		a->alloc_flags = (uint32_t)rc->arg[2];
		break;
	case NT_CUDA_API_cudaMallocPitch:
	case NT_CUDA_API_cuMemAllocPitch_v2:
		/* (ptr, &pitch, width, height) */
		a->kind = NT_CUDA_MEM_DEVICE;
		a->size = (ok && rc->out[1] ? rc->out[1] : rc->arg[2]) * rc->arg[3];
		break;
	default:
		a->kind = NT_CUDA_MEM_DEVICE;
		break;
	}
	if (api == NT_CUDA_API_cudaMallocAsync_ptsz ||
	    api == NT_CUDA_API_cudaMallocFromPoolAsync_ptsz ||
	    api == NT_CUDA_API_cuMemAllocAsync_ptsz ||
	    api == NT_CUDA_API_cuMemAllocFromPoolAsync_ptsz)
		a->flags |= NT_CUDA_F_PTSZ;
	alloc_book(st, p, rc, rec, a);
	*err_size = a->size;
	return 1;
}

/* The common end of an allocation record: the block booked (successful
 * calls), totals, function name and stack. */
static void alloc_book(struct nt_cuda_state *st, struct nt_cuda_proc *p,
		       const struct nt_cuda_raw_call *rc, struct nt_cuda_rec *rec,
		       struct nt_cuda_alloc *a)
{
	bool ok = (int32_t)rc->ret == 0;
	unsigned api = rc->api;

	a->stack_id = nt_cuda_stack_id(rc->ips, rc->nframes);
	if (ok && a->ptr) {
		struct nt_cuda_block b = {
			.ptr = a->ptr, .size = a->size, .ts_ns = rc->hdr.ts_ns,
			.stack_id = a->stack_id, .device = a->device,
			.kind = a->kind,
		};

		a->outstanding_bytes = nt_cuda_block_add(p, &b);
		p->tot.allocs++;
		p->tot.alloc_bytes += a->size;
	} else {
		a->outstanding_bytes = nt_cuda_outstanding(p, a->device, a->kind);
		if (!ok)
			p->tot.alloc_failed++;
	}
	rec_cstr(rec, &a->api_name, nt_cuda_api_name(api));
	rec_stack(st, rec, &a->stack, rc->hdr.pid, rc->ips, rc->nframes,
		  nt_cuda_api_name(api));
}

static int decode_free(struct nt_cuda_state *st, struct nt_cuda_proc *p,
		       const struct nt_cuda_raw_call *rc, struct nt_cuda_rec *rec)
{
	struct nt_cuda_free *f;
	bool ok = (int32_t)rc->ret == 0;
	unsigned api = rc->api;

	/* cudaFree(NULL) initialises a context; it frees nothing */
	if (!rc->arg[0] && ok)
		return 0;
	f = rec_start(st, rec, NT_CUDA_EVT_FREE, &rc->hdr, sizeof(*f));
	COMMON_FROM_RAW(f, rc);
	f->ptr = rc->arg[0];
	switch (api) {
	case NT_CUDA_API_cudaFreeAsync:
	case NT_CUDA_API_cudaFreeAsync_ptsz:
	case NT_CUDA_API_cuMemFreeAsync:
	case NT_CUDA_API_cuMemFreeAsync_ptsz:
		f->stream = rc->arg[1];
		f->flags |= NT_CUDA_F_ASYNC;
		f->kind = NT_CUDA_MEM_ASYNC;
		if (api == NT_CUDA_API_cudaFreeAsync_ptsz ||
		    api == NT_CUDA_API_cuMemFreeAsync_ptsz)
			f->flags |= NT_CUDA_F_PTSZ;
		break;
	case NT_CUDA_API_cudaFreeHost:
	case NT_CUDA_API_cuMemFreeHost:
		f->kind = NT_CUDA_MEM_HOST;
		break;
	default:
		f->kind = NT_CUDA_MEM_DEVICE;
		break;
	}
	free_book(st, p, rc, rec, f);
	return 1;
}

/* The common end of a free record: the block's booking undone (its size,
 * kind, device and allocation time from the map), name and stack. */
static void free_book(struct nt_cuda_state *st, struct nt_cuda_proc *p,
		      const struct nt_cuda_raw_call *rc, struct nt_cuda_rec *rec,
		      struct nt_cuda_free *f)
{
	struct nt_cuda_block b = {0};
	bool ok = (int32_t)rc->ret == 0, known;
	unsigned api = rc->api;

	known = ok && nt_cuda_block_remove(p, f->ptr, &b);
	if (known) {
		f->size = b.size;
		f->kind = b.kind;
		f->alloc_ts_ns = b.ts_ns;
		f->device = b.device;
		f->outstanding_bytes = nt_cuda_outstanding(p, b.device, b.kind);
		p->tot.frees++;
		p->tot.free_bytes += b.size;
	} else {
		f->outstanding_bytes = nt_cuda_outstanding(p, rc->device, f->kind);
		if (ok)
			p->tot.frees++;
	}
	f->stack_id = nt_cuda_stack_id(rc->ips, rc->nframes);
	rec_cstr(rec, &f->api_name, nt_cuda_api_name(api));
	rec_stack(st, rec, &f->stack, rc->hdr.pid, rc->ips, rc->nframes,
		  nt_cuda_api_name(api));
}

/* The driver's copies: arguments, direction, stream. */
static void memcpy_driver(struct nt_cuda_memcpy *m, const uint64_t *a,
			  unsigned api, int *dir, bool *async)
{
	switch (api) {
	case NT_CUDA_API_cuMemcpy:
		m->dst = a[0], m->src = a[1], m->bytes = a[2];
		break;
	case NT_CUDA_API_cuMemcpyAsync:
		m->dst = a[0], m->src = a[1], m->bytes = a[2], m->stream = a[3];
		*async = true;
		break;
	case NT_CUDA_API_cuMemcpyHtoD_v2:
	case NT_CUDA_API_cuMemcpyHtoDAsync_v2:
		m->dst = a[0], m->src = a[1], m->bytes = a[2];
		*dir = NT_CUDA_DIR_H2D;
		break;
	case NT_CUDA_API_cuMemcpyDtoH_v2:
	case NT_CUDA_API_cuMemcpyDtoHAsync_v2:
		m->dst = a[0], m->src = a[1], m->bytes = a[2];
		*dir = NT_CUDA_DIR_D2H;
		break;
	case NT_CUDA_API_cuMemcpyDtoD_v2:
	case NT_CUDA_API_cuMemcpyDtoDAsync_v2:
		m->dst = a[0], m->src = a[1], m->bytes = a[2];
		*dir = NT_CUDA_DIR_D2D;
		break;
	case NT_CUDA_API_cuMemcpyPeer:
	case NT_CUDA_API_cuMemcpyPeerAsync:
		/* (dst, dstCtx, src, srcCtx, count[, stream]) */
		m->dst = a[0], m->src = a[2], m->bytes = a[4];
		*dir = NT_CUDA_DIR_P2P;
		if (api == NT_CUDA_API_cuMemcpyPeerAsync)
			m->stream = a[5], *async = true;
		break;
	default:
		break;
	}
}

static int decode_memcpy(struct nt_cuda_state *st, struct nt_cuda_proc *p,
			 const struct nt_cuda_raw_call *rc, struct nt_cuda_rec *rec,
			 uint64_t *err_size)
{
	struct nt_cuda_memcpy *m =
		rec_start(st, rec, NT_CUDA_EVT_MEMCPY, &rc->hdr, sizeof(*m));
	const uint64_t *a = rc->arg;
	unsigned api = rc->api;
	int dir = NT_CUDA_DIR_UNKNOWN;
	bool async = false;

	COMMON_FROM_RAW(m, rc);
	m->src_device = -1;
	switch (api) {
	case NT_CUDA_API_cudaMemcpy:
	case NT_CUDA_API_cudaMemcpy_ptds:
		m->dst = a[0], m->src = a[1], m->bytes = a[2];
		dir = nt_cuda_dir_from_kind(a[3]);
		break;
	case NT_CUDA_API_cudaMemcpyAsync:
	case NT_CUDA_API_cudaMemcpyAsync_ptsz:
		m->dst = a[0], m->src = a[1], m->bytes = a[2];
		dir = nt_cuda_dir_from_kind(a[3]);
		m->stream = a[4];
		async = true;
		break;
	case NT_CUDA_API_cudaMemcpyPeer:
	case NT_CUDA_API_cudaMemcpyPeerAsync:
		/* (dst, dstDevice, src, srcDevice, count[, stream]) */
		m->dst = a[0], m->src = a[2], m->bytes = a[4];
		m->device = (int32_t)a[1];
		m->src_device = (int32_t)a[3];
		dir = NT_CUDA_DIR_P2P;
		if (api == NT_CUDA_API_cudaMemcpyPeerAsync)
			m->stream = a[5], async = true;
		break;
	case NT_CUDA_API_cudaMemcpy2D:
	case NT_CUDA_API_cudaMemcpy2DAsync:
		/* (dst, dpitch, src, spitch, width, height, kind[, stream]) */
		m->dst = a[0], m->src = a[2], m->bytes = a[4] * a[5];
		dir = nt_cuda_dir_from_kind(rc->sarg[0]);
		if (api == NT_CUDA_API_cudaMemcpy2DAsync)
			m->stream = rc->sarg[1], async = true;
		break;
	default:
		memcpy_driver(m, a, api, &dir, &async);
		break;
	}
	if (api == NT_CUDA_API_cuMemcpyHtoDAsync_v2 ||
	    api == NT_CUDA_API_cuMemcpyDtoHAsync_v2 ||
	    api == NT_CUDA_API_cuMemcpyDtoDAsync_v2) {
		m->stream = a[3];
		async = true;
	}
	if (api == NT_CUDA_API_cudaMemcpy_ptds ||
	    api == NT_CUDA_API_cudaMemcpyAsync_ptsz)
		m->flags |= NT_CUDA_F_PTSZ;
	if (dir == NT_CUDA_DIR_UNKNOWN)
		dir = nt_cuda_classify_copy(p, m->dst, m->src);
	m->direction = (uint32_t)dir;
	if (async)
		m->flags |= NT_CUDA_F_ASYNC;
	if ((int32_t)rc->ret == 0) {
		p->tot.copies[dir]++;
		p->tot.copy_bytes[dir] += m->bytes;
		if (!async) {
			p->tot.sync_copy_bytes[dir] += m->bytes;
			p->tot.sync_copy_ns[dir] += rc->duration_ns;
		}
	}
	rec_cstr(rec, &m->api_name, nt_cuda_api_name(api));
	*err_size = m->bytes;
	return 1;
}

static int decode_memset(struct nt_cuda_state *st, struct nt_cuda_proc *p,
			 const struct nt_cuda_raw_call *rc, struct nt_cuda_rec *rec,
			 uint64_t *err_size)
{
	struct nt_cuda_memset *m =
		rec_start(st, rec, NT_CUDA_EVT_MEMSET, &rc->hdr, sizeof(*m));
	const uint64_t *a = rc->arg;
	unsigned api = rc->api;

	(void)p;
	COMMON_FROM_RAW(m, rc);
	m->ptr = a[0];
	m->value = (uint32_t)a[1];
	m->bytes = a[2];
	switch (api) {
	case NT_CUDA_API_cuMemsetD32_v2:
		m->bytes = a[2] * 4;
		break;
	case NT_CUDA_API_cuMemsetD32Async:
		m->bytes = a[2] * 4;
		m->stream = a[3];
		m->flags |= NT_CUDA_F_ASYNC;
		break;
	case NT_CUDA_API_cudaMemsetAsync:
	case NT_CUDA_API_cudaMemsetAsync_ptsz:
	case NT_CUDA_API_cuMemsetD8Async:
		m->stream = a[3];
		m->flags |= NT_CUDA_F_ASYNC;
		if (api == NT_CUDA_API_cudaMemsetAsync_ptsz)
			m->flags |= NT_CUDA_F_PTSZ;
		break;
	default:
		break;
	}
	rec_cstr(rec, &m->api_name, nt_cuda_api_name(api));
	*err_size = m->bytes;
	return 1;
}

static int decode_sync(struct nt_cuda_state *st, struct nt_cuda_proc *p,
		       const struct nt_cuda_raw_call *rc, struct nt_cuda_rec *rec)
{
	struct nt_cuda_sync *s =
		rec_start(st, rec, NT_CUDA_EVT_SYNC, &rc->hdr, sizeof(*s));
	unsigned api = rc->api;

	COMMON_FROM_RAW(s, rc);
	switch (api) {
	case NT_CUDA_API_cudaDeviceSynchronize:
	case NT_CUDA_API_cuCtxSynchronize:
		s->sync_kind = NT_CUDA_SYNC_DEVICE;
		break;
	case NT_CUDA_API_cudaEventSynchronize:
	case NT_CUDA_API_cuEventSynchronize:
		s->sync_kind = NT_CUDA_SYNC_EVENT;
		s->handle = rc->arg[0];
		break;
	default:
		s->sync_kind = NT_CUDA_SYNC_STREAM;
		s->handle = rc->arg[0];
		if (api == NT_CUDA_API_cudaStreamSynchronize_ptsz ||
		    api == NT_CUDA_API_cuStreamSynchronize_ptsz)
			s->flags |= NT_CUDA_F_PTSZ;
		break;
	}
	p->tot.syncs++;
	p->tot.sync_ns += rc->duration_ns;
	rec_cstr(rec, &s->api_name, nt_cuda_api_name(api));
	return 1;
}

static int decode_graph(struct nt_cuda_state *st, struct nt_cuda_proc *p,
			const struct nt_cuda_raw_call *rc, struct nt_cuda_rec *rec)
{
	struct nt_cuda_graph_launch *g =
		rec_start(st, rec, NT_CUDA_EVT_GRAPH, &rc->hdr, sizeof(*g));

	COMMON_FROM_RAW(g, rc);
	g->graph_exec = rc->arg[0];
	g->stream = rc->arg[1];
	if (rc->api == NT_CUDA_API_cudaGraphLaunch_ptsz ||
	    rc->api == NT_CUDA_API_cuGraphLaunch_ptsz)
		g->flags |= NT_CUDA_F_PTSZ;
	if ((int32_t)rc->ret == 0) {
		const struct nt_cuda_glist *k =
			nt_cuda_graph_kernels(&p->graphs, g->graph_exec);

		p->tot.graph_launches++;
		if (k)
			p->tot.launches += k->n;
	}
	rec_cstr(rec, &g->api_name, nt_cuda_api_name(rc->api));
	return 1;
}

/* ------------------------------------------------------------------ */
/* Virtual memory: a mapping is what occupies device memory            */
/* ------------------------------------------------------------------ */

/* cuMemCreate(&handle, size, prop, flags): remembered; a failure is a
 * failed device allocation (what the OOM detector must see). */
static int vmm_create(struct nt_cuda_state *st, struct nt_cuda_proc *p,
		      const struct nt_cuda_raw_call *rc, struct nt_cuda_rec *rec,
		      uint64_t *err_size)
{
	struct nt_cuda_alloc *a;
	int32_t loc_type, loc_id, dev = rc->device;

	memcpy(&loc_type, rc->blob + 8, 4);
	memcpy(&loc_id, rc->blob + 12, 4);
	if (loc_type == 1 /* CU_MEM_LOCATION_TYPE_DEVICE */ && loc_id >= 0)
		dev = loc_id;
	*err_size = rc->arg[1];
	if ((int32_t)rc->ret == 0) {
		struct nt_cuda_vmm *v = nt_hmap_put(&p->vmm, &rc->out[0], NULL);

		if (v) {
			v->size = rc->arg[1];
			v->device = dev;
		}
		return 0;
	}
	a = rec_start(st, rec, NT_CUDA_EVT_ALLOC, &rc->hdr, sizeof(*a));
	COMMON_FROM_RAW(a, rc);
	a->device = dev;
	a->size = rc->arg[1];
	a->kind = NT_CUDA_MEM_DEVICE;
	alloc_book(st, p, rc, rec, a);
	return 1;
}

/* cuMemMap(ptr, size, offset, handle, flags) -> cuda.alloc at ptr;
 * cuMemUnmap(ptr, size) -> cuda.free of it; cuMemRelease(handle): the
 * handle is forgotten (its memory lives on while mapped). */
static int decode_vmm(struct nt_cuda_state *st, struct nt_cuda_proc *p,
		      const struct nt_cuda_raw_call *rc, struct nt_cuda_rec *rec,
		      uint64_t *err_size)
{
	bool ok = (int32_t)rc->ret == 0;

	switch (rc->api) {
	case NT_CUDA_API_cuMemCreate:
		return vmm_create(st, p, rc, rec, err_size);
	case NT_CUDA_API_cuMemRelease:
		if (ok)
			nt_hmap_del(&p->vmm, &rc->arg[0]);
		return 0;
	case NT_CUDA_API_cuMemMap: {
		const struct nt_cuda_vmm *v = nt_hmap_get(&p->vmm, &rc->arg[3]);
		struct nt_cuda_alloc *a;

		*err_size = rc->arg[1];
		if (!ok)
			return 0;
		a = rec_start(st, rec, NT_CUDA_EVT_ALLOC, &rc->hdr, sizeof(*a));
		COMMON_FROM_RAW(a, rc);
		if (v)
			a->device = v->device;
		a->ptr = rc->arg[0];
		a->size = rc->arg[1];
		a->kind = NT_CUDA_MEM_DEVICE;
		alloc_book(st, p, rc, rec, a);
		return 1;
	}
	case NT_CUDA_API_cuMemUnmap: {
		struct nt_cuda_free *f;

		*err_size = rc->arg[1];
		if (!ok)
			return 0;
		f = rec_start(st, rec, NT_CUDA_EVT_FREE, &rc->hdr, sizeof(*f));
		COMMON_FROM_RAW(f, rc);
		f->ptr = rc->arg[0];
		f->kind = NT_CUDA_MEM_DEVICE;
		free_book(st, p, rc, rec, f);
		return 1;
	}
	default:
		return 0;
	}
}

/* ------------------------------------------------------------------ */
/* Graph building: what each graph launch will run (cuda_graph.c)      */
/* ------------------------------------------------------------------ */

/* The kernel of kernel-node parameters read at entry: the runtime's
 * cudaKernelNodeParams and the driver's CUDA_KERNEL_NODE_PARAMS(_v2)
 * both begin with func; the driver's v2 names a CUkernel at offset 56
 * when func is NULL. */
static uint64_t node_func(const struct nt_cuda_raw_call *rc)
{
	uint64_t f;

	memcpy(&f, rc->blob, 8);
	if (!f && rc->layer == NT_CUDA_LAYER_DRIVER)
		memcpy(&f, rc->blob + 56, 8);
	return f;
}

static void decode_graphdef(struct nt_cuda_proc *p,
			    const struct nt_cuda_raw_call *rc)
{
	struct nt_cuda_graphs *g = &p->graphs;
	bool ok = (int32_t)rc->ret == 0;
	const uint64_t *a = rc->arg;

	switch (rc->api) {
	case NT_CUDA_API_cudaStreamBeginCapture:
	case NT_CUDA_API_cudaStreamBeginCapture_ptsz:
	case NT_CUDA_API_cudaStreamBeginCaptureToGraph:
	case NT_CUDA_API_cuStreamBeginCapture_v2:
	case NT_CUDA_API_cuStreamBeginCapture_v2_ptsz:
	case NT_CUDA_API_cuStreamBeginCaptureToGraph:
		if (ok)
			nt_cuda_graph_capture_begin(g, rc->hdr.tid);
		break;
	case NT_CUDA_API_cudaStreamEndCapture:
	case NT_CUDA_API_cudaStreamEndCapture_ptsz:
	case NT_CUDA_API_cuStreamEndCapture:
	case NT_CUDA_API_cuStreamEndCapture_ptsz:
		nt_cuda_graph_capture_end(g, rc->hdr.tid, ok ? rc->out[0] : 0);
		break;
	case NT_CUDA_API_cudaGraphInstantiate:
	case NT_CUDA_API_cudaGraphInstantiateWithFlags:
	case NT_CUDA_API_cudaGraphInstantiateWithParams:
	case NT_CUDA_API_cuGraphInstantiateWithFlags:
	case NT_CUDA_API_cuGraphInstantiateWithParams:
	case NT_CUDA_API_cuGraphInstantiate_v2:
		if (ok)
			nt_cuda_graph_instantiate(g, rc->out[0], a[1]);
		break;
	case NT_CUDA_API_cudaGraphExecUpdate:
	case NT_CUDA_API_cuGraphExecUpdate_v2:
		if (ok)
			nt_cuda_graph_instantiate(g, a[0], a[1]);
		break;
	case NT_CUDA_API_cudaGraphAddKernelNode:
	case NT_CUDA_API_cuGraphAddKernelNode_v2:
		if (ok)
			nt_cuda_graph_add_node(g, a[1], rc->out[0], rc->layer,
					       node_func(rc));
		break;
	case NT_CUDA_API_cudaGraphKernelNodeSetParams:
	case NT_CUDA_API_cuGraphKernelNodeSetParams_v2:
		if (ok)
			nt_cuda_graph_node_set(g, a[0], rc->layer, node_func(rc));
		break;
	case NT_CUDA_API_cudaGraphExecKernelNodeSetParams:
	case NT_CUDA_API_cuGraphExecKernelNodeSetParams_v2:
		if (ok)
			nt_cuda_graph_exec_node_set(g, a[0], a[1], rc->layer,
						    node_func(rc));
		break;
	case NT_CUDA_API_cudaGraphDestroy:
	case NT_CUDA_API_cuGraphDestroy:
		if (ok)
			nt_cuda_graph_destroy(g, a[0]);
		break;
	case NT_CUDA_API_cudaGraphExecDestroy:
	case NT_CUDA_API_cuGraphExecDestroy:
		if (ok)
			nt_cuda_graph_exec_destroy(g, a[0]);
		break;
	default:
		break;
	}
}

int nt_cuda_note_captured(struct nt_cuda_state *st,
			  const struct nt_cuda_raw_launch *rl, size_t size)
{
	struct nt_cuda_proc *p;

	if (size < NT_CUDA_RAW_LAUNCH_FIXED)
		return -EINVAL;
	p = nt_cuda_proc_get(st, rl->hdr.pid);
	if (!p)
		return -ENOMEM;
	/* named now, while the process (and its stub symbols) lives */
	nt_cuda_kernel_name(st, rl->hdr.pid, rl->layer, rl->func);
	return nt_cuda_graph_capture_add(&p->graphs, rl->hdr.tid, rl->layer,
					 rl->func);
}

const struct nt_cuda_glist *nt_cuda_graph_launched(struct nt_cuda_state *st,
						   uint32_t pid, uint64_t exec)
{
	struct nt_cuda_proc *p = nt_cuda_proc_find(st, pid);

	return p ? nt_cuda_graph_kernels(&p->graphs, exec) : NULL;
}

int nt_cuda_decode_call(struct nt_cuda_state *st,
			const struct nt_cuda_raw_call *rc, size_t size,
			struct nt_cuda_rec out[2])
{
	struct nt_cuda_proc *p;
	uint64_t err_size = 0, handle = 0;
	int n = 0;

	if (size < NT_CUDA_RAW_CALL_FIXED || rc->nframes > NT_CUDA_STACK_MAX ||
	    size < NT_CUDA_RAW_CALL_FIXED + rc->nframes * 8ull ||
	    rc->api == NT_CUDA_API_NONE || rc->api >= NT_CUDA_API_COUNT)
		return -EINVAL;
	p = nt_cuda_proc_get(st, rc->hdr.pid);
	if (!p)
		return -ENOMEM;
	p->cgroup_id = rc->cgroup_id;
	memcpy(p->comm, rc->hdr.comm, NT_COMM_LEN);
	switch (nt_cuda_api_family(rc->api)) {
	case NT_CUDA_FAM_ALLOC:
		n = decode_alloc(st, p, rc, &out[0], &err_size);
		break;
	case NT_CUDA_FAM_FREE:
		n = decode_free(st, p, rc, &out[0]);
		handle = rc->arg[0];
		break;
	case NT_CUDA_FAM_MEMCPY:
		n = decode_memcpy(st, p, rc, &out[0], &err_size);
		break;
	case NT_CUDA_FAM_MEMSET:
		n = decode_memset(st, p, rc, &out[0], &err_size);
		handle = rc->arg[0];
		break;
	case NT_CUDA_FAM_SYNC:
		n = decode_sync(st, p, rc, &out[0]);
		handle = rc->arg[0];
		break;
	case NT_CUDA_FAM_GRAPH:
		n = decode_graph(st, p, rc, &out[0]);
		handle = rc->arg[0];
		break;
	case NT_CUDA_FAM_GRAPHDEF:
		decode_graphdef(p, rc);
		handle = rc->arg[0];
		break;
	case NT_CUDA_FAM_VMM:
		n = decode_vmm(st, p, rc, &out[0], &err_size);
		handle = rc->arg[0];
		break;
	default:
		/* device / kname / launch calls: an event only on failure */
		handle = rc->arg[0];
		break;
	}
	if ((rc->flags & NT_CUDA_F_RET) && (int32_t)rc->ret != 0) {
		build_error(st, rc, err_size, handle, &out[n]);
		p->tot.errors++;
		n++;
	}
	return n;
}

int nt_cuda_decode_enter(struct nt_cuda_state *st,
			 const struct nt_cuda_raw_call *rc, size_t size,
			 struct nt_cuda_rec *out)
{
	struct nt_cuda_enter *e;
	unsigned api;
	int fam;

	if (size < NT_CUDA_RAW_CALL_FIXED)
		return -EINVAL;
	api = rc->api;
	if (api == NT_CUDA_API_NONE || api >= NT_CUDA_API_COUNT)
		return -EINVAL;
	fam = nt_cuda_api_family(api);
	e = rec_start(st, out, NT_CUDA_EVT_ENTER, &rc->hdr, sizeof(*e));
	e->cgroup_id = rc->cgroup_id;
	e->api = rc->api;
	e->layer = rc->layer;
	e->device = rc->device;
	e->family = (uint32_t)fam;
	switch (api) {
	case NT_CUDA_API_cudaDeviceSynchronize:
	case NT_CUDA_API_cuCtxSynchronize:
		break;
	case NT_CUDA_API_cudaStreamSynchronize:
	case NT_CUDA_API_cudaStreamSynchronize_ptsz:
	case NT_CUDA_API_cudaEventSynchronize:
	case NT_CUDA_API_cuStreamSynchronize:
	case NT_CUDA_API_cuStreamSynchronize_ptsz:
	case NT_CUDA_API_cuEventSynchronize:
		e->handle = rc->arg[0];
		break;
	case NT_CUDA_API_cudaMemcpyPeer:
	case NT_CUDA_API_cuMemcpyPeer:
		e->bytes = rc->arg[4];
		break;
	case NT_CUDA_API_cudaMemcpy2D:
		e->bytes = rc->arg[4] * rc->arg[5];
		break;
	case NT_CUDA_API_cuMemsetD32_v2:
		e->bytes = rc->arg[2] * 4;
		break;
	default:
		if (fam == NT_CUDA_FAM_MEMCPY || fam == NT_CUDA_FAM_MEMSET)
			e->bytes = rc->arg[2];
		break;
	}
	rec_cstr(out, &e->api_name, nt_cuda_api_name(api));
	return 1;
}


int nt_cuda_decode_launch(struct nt_cuda_state *st,
			  const struct nt_cuda_raw_launch *rl, size_t size,
			  struct nt_cuda_rec *out)
{
	struct nt_cuda_launch *l;
	const char *name;

	if (size < NT_CUDA_RAW_LAUNCH_FIXED || rl->nframes > NT_CUDA_STACK_MAX ||
	    size < NT_CUDA_RAW_LAUNCH_FIXED + rl->nframes * 8ull)
		return -EINVAL;
	name = nt_cuda_launch_name(st, rl);
	l = rec_start(st, out, NT_CUDA_EVT_LAUNCH, &rl->hdr, sizeof(*l));
	l->cgroup_id = rl->cgroup_id;
	l->api = rl->api;
	l->layer = rl->layer;
	l->device = rl->device;
	l->func = rl->func;
	l->stream = rl->stream;
	l->grid_x = rl->grid[0];
	l->grid_y = rl->grid[1];
	l->grid_z = rl->grid[2];
	l->block_x = rl->block[0];
	l->block_y = rl->block[1];
	l->block_z = rl->block[2];
	l->shared_mem = rl->shared_mem;
	l->stack_id = nt_cuda_stack_id(rl->ips, rl->nframes);
	if (rl->api == NT_CUDA_API_cudaLaunchKernel_ptsz ||
	    rl->api == NT_CUDA_API_cudaLaunchKernelExC_ptsz ||
	    rl->api == NT_CUDA_API_cuLaunchKernel_ptsz ||
	    rl->api == NT_CUDA_API_cuLaunchKernelEx_ptsz)
		l->flags |= NT_CUDA_F_PTSZ;
	rec_cstr(out, &l->kernel, name);
	rec_cstr(out, &l->api_name, nt_cuda_api_name(rl->api));
	rec_stack(st, out, &l->stack, rl->hdr.pid, rl->ips, rl->nframes,
		  nt_cuda_api_name(rl->api));
	return 1;
}

