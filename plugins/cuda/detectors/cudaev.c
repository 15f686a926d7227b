/* SPDX-License-Identifier: MIT */
#include "cudaev.h"

#include <stdio.h>
#include <string.h>

#include "../cuda.h"

enum {
	F_API, F_LAYER, F_FLAGS, F_RET, F_DEVICE, F_DURATION, F_PTR, F_SIZE,
	F_BYTES, F_OUTSTANDING, F_STACK_ID, F_ALLOC_TS, F_KIND, F_FAMILY,
	F_EXIT_CODE, F_API_NAME, F_STACK, F_KERNEL, F_ERROR_NAME, F_N
};

static const char *const field_names[F_N] = {
	[F_API] = "api", [F_LAYER] = "layer", [F_FLAGS] = "flags",
	[F_RET] = "ret", [F_DEVICE] = "device", [F_DURATION] = "duration_ns",
	[F_PTR] = "ptr", [F_SIZE] = "size", [F_BYTES] = "bytes",
	[F_OUTSTANDING] = "outstanding_bytes", [F_STACK_ID] = "stack_id",
	[F_ALLOC_TS] = "alloc_ts_ns", [F_KIND] = "kind", [F_FAMILY] = "family",
	[F_EXIT_CODE] = "exit_code", [F_API_NAME] = "api_name",
	[F_STACK] = "stack", [F_KERNEL] = "kernel", [F_ERROR_NAME] = "error_name",
};

_Static_assert(F_N <= 20, "cuev_layout arrays too small");

enum cuev_type cuev_type_of(const char *n)
{
	static const struct {
		const char *name;
		enum cuev_type t;
	} map[] = {
		{ NT_CUDA_EV_ALLOC, CUEV_ALLOC },   { NT_CUDA_EV_FREE, CUEV_FREE },
		{ NT_CUDA_EV_MEMCPY, CUEV_MEMCPY }, { NT_CUDA_EV_MEMSET, CUEV_MEMSET },
		{ NT_CUDA_EV_LAUNCH, CUEV_LAUNCH }, { NT_CUDA_EV_GRAPH, CUEV_GRAPH },
		{ NT_CUDA_EV_SYNC, CUEV_SYNC },     { NT_CUDA_EV_ENTER, CUEV_ENTER },
		{ NT_CUDA_EV_ERROR, CUEV_ERROR },   { "proc.exit", CUEV_PROC_EXIT },
	};

	for (size_t i = 0; n && i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(map[i].name, n) == 0)
			return map[i].t;
	return CUEV_OTHER;
}

static const struct cuev_layout *layout_of(struct cuev_cache *c,
					   const struct nt_schema *s)
{
	struct cuev_layout *l;

	for (uint32_t i = 0; i < c->n; i++)
		if (c->l[i].schema == s)
			return &c->l[i];
	if (c->n < CUEV_CACHE)
		l = &c->l[c->n++];
	else
		l = &c->l[(uintptr_t)s % CUEV_CACHE]; /* evict: stays correct */
	memset(l, 0, sizeof(*l));
	l->schema = s;
	l->type = cuev_type_of(s->name);
	for (int k = 0; k < F_N; k++) {
		l->off[k] = -1;
		for (uint32_t i = 0; i < s->n_fields; i++) {
			if (strcmp(s->fields[i].name, field_names[k]) != 0)
				continue;
			l->off[k] = (int16_t)s->fields[i].offset;
			l->size[k] = s->fields[i].size;
			l->ftype[k] = s->fields[i].type;
			break;
		}
	}
	/* proc.exit as the core documents it, if its schema names differ */
	if (l->type == CUEV_PROC_EXIT && l->off[F_EXIT_CODE] < 0) {
		l->off[F_EXIT_CODE] = 40;
		l->size[F_EXIT_CODE] = 4;
		l->ftype[F_EXIT_CODE] = NT_F_S32;
	}
	return l;
}

static int64_t rd_int(const struct nt_event_hdr *ev, const struct cuev_layout *l,
		      int k)
{
	const unsigned char *p = (const unsigned char *)ev + l->off[k];
	bool sgn = l->ftype[k] == NT_F_S32 || l->ftype[k] == NT_F_S64 ||
		   l->ftype[k] == NT_F_ERRNO;

	if (l->off[k] < 0 || (uint32_t)l->off[k] + l->size[k] > ev->size)
		return 0;
	switch (l->size[k]) {
	case 1: return sgn ? (int64_t)(int8_t)p[0] : (int64_t)p[0];
	case 2: {
		uint16_t v;
		memcpy(&v, p, 2);
		return sgn ? (int64_t)(int16_t)v : (int64_t)v;
	}
	case 4: {
		uint32_t v;
		memcpy(&v, p, 4);
		return sgn ? (int64_t)(int32_t)v : (int64_t)v;
	}
	case 8: {
		uint64_t v;
		memcpy(&v, p, 8);
		return (int64_t)v;
	}
	default: return 0;
	}
}

static struct cuev_str rd_str(const struct nt_event_hdr *ev,
			      const struct cuev_layout *l, int k)
{
	struct cuev_str s = { "", 0 };
	struct nt_vstr v;

	if (l->off[k] < 0 || l->ftype[k] != NT_F_VSTR ||
	    (uint32_t)l->off[k] + sizeof(v) > ev->size)
		return s;
	memcpy(&v, (const char *)ev + l->off[k], sizeof(v));
	if (v.len == 0 || v.off < sizeof(*ev) || (uint64_t)v.off + v.len > ev->size)
		return s;
	s.p = (const char *)ev + v.off;
	s.len = v.len;
	/* tolerate a terminator counted in len */
	while (s.len && s.p[s.len - 1] == '\0')
		s.len--;
	return s;
}

bool cuev_decode(struct cuev_cache *c, const struct nt_event_hdr *ev,
		 const struct nt_schema *schema, struct cuev *e)
{
	const struct cuev_layout *l;

	memset(e, 0, sizeof(*e));
	if (!ev || !schema || ev->size < sizeof(*ev) || ev->size < schema->min_size)
		return false;
	l = layout_of(c, schema);
	if (l->type == CUEV_OTHER)
		return false;
	e->type = l->type;
	e->ts = ev->ts_ns;
	e->pid = ev->pid;
	e->tid = ev->tid;
	memcpy(e->comm, ev->comm, NT_COMM_LEN);
	e->api = (uint32_t)rd_int(ev, l, F_API);
	e->layer = (uint32_t)rd_int(ev, l, F_LAYER);
	e->flags = (uint32_t)rd_int(ev, l, F_FLAGS);
	e->ret = (int32_t)rd_int(ev, l, F_RET);
	e->device = l->off[F_DEVICE] >= 0 ? (int32_t)rd_int(ev, l, F_DEVICE) : -1;
	e->duration_ns = (uint64_t)rd_int(ev, l, F_DURATION);
	e->ptr = (uint64_t)rd_int(ev, l, F_PTR);
	e->size = (uint64_t)(l->off[F_SIZE] >= 0 ? rd_int(ev, l, F_SIZE)
						  : rd_int(ev, l, F_BYTES));
	e->outstanding = (uint64_t)rd_int(ev, l, F_OUTSTANDING);
	e->stack_id = (uint64_t)rd_int(ev, l, F_STACK_ID);
	e->alloc_ts = (uint64_t)rd_int(ev, l, F_ALLOC_TS);
	e->kind = (uint32_t)rd_int(ev, l, F_KIND);
	e->family = (uint32_t)rd_int(ev, l, F_FAMILY);
	e->exit_code = (int32_t)rd_int(ev, l, F_EXIT_CODE);
	e->api_name = rd_str(ev, l, F_API_NAME);
	e->stack = rd_str(ev, l, F_STACK);
	e->kernel = rd_str(ev, l, F_KERNEL);
	e->error_name = rd_str(ev, l, F_ERROR_NAME);
	e->end_ts = e->ts;
	if ((e->flags & NT_CUDA_F_RET) && e->duration_ns)
		e->end_ts = e->ts + e->duration_ns;
	if (e->type == CUEV_ENTER && !e->family)
		e->family = (uint32_t)nt_cuda_api_family(e->api);
	return true;
}

const char *cuev_str_copy(struct cuev_str s, char *buf, size_t len)
{
	size_t n = s.len < len ? s.len : len - 1;

	if (!len)
		return buf;
	if (n)
		memcpy(buf, s.p, n);
	buf[n] = '\0';
	return buf;
}

const char *cuev_api_name(const struct cuev *e, char *buf, size_t len)
{
	if (e->api_name.len)
		return cuev_str_copy(e->api_name, buf, len);
	if (e->api && e->api < NT_CUDA_API_COUNT)
		snprintf(buf, len, "%s", nt_cuda_api_name(e->api));
	else
		snprintf(buf, len, "api#%u", e->api);
	return buf;
}

bool cuev_failed(const struct cuev *e)
{
	return (e->flags & NT_CUDA_F_RET) && e->ret != 0;
}
