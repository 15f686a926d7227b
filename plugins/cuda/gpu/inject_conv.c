// SPDX-License-Identifier: MIT
/*
 * ntcore cuda_gpu injection library: CUPTI activity records -> wire
 * records (gpu_wire.h), batched into messages, with kernel names sent once.
 * No CUPTI call and no socket here (the send is a callback), so the unit
 * test drives it with records laid out like CUPTI's.
 */
#include "inject.h"

#include <stdlib.h>
#include <string.h>

#include "cupti_cbids.h"

#define NAMES_MAX (1u << 16)
#define NAME_LEN_MAX 4000u

static uint32_t ptr_hash(const void *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (uint32_t)x;
}

static int names_grow(struct inj_names *t)
{
	uint32_t cap = t->cap ? t->cap * 2 : 256;
	struct inj_name *s = calloc(cap, sizeof(*s));

	if (!s)
		return -1;
	for (uint32_t i = 0; i < t->cap; i++) {
		uint32_t h;

		if (!t->slots[i].ptr)
			continue;
		for (h = ptr_hash(t->slots[i].ptr) & (cap - 1); s[h].ptr; h = (h + 1) & (cap - 1))
			;
		s[h] = t->slots[i];
	}
	free(t->slots);
	t->slots = s;
	t->cap = cap;
	return 0;
}

struct inj_name *inj_names_get(struct inj_names *t, const char *ptr)
{
	uint32_t h;

	if (!ptr)
		return NULL;
	if ((t->n + 1) * 2 > t->cap && (t->n >= NAMES_MAX || names_grow(t)))
		return NULL;
	for (h = ptr_hash(ptr) & (t->cap - 1); t->slots[h].ptr; h = (h + 1) & (t->cap - 1))
		if (t->slots[h].ptr == ptr)
			return &t->slots[h];
	t->slots[h].ptr = ptr;
	t->slots[h].id = ++t->n;
	t->slots[h].sent = false;
	return &t->slots[h];
}

void inj_names_free(struct inj_names *t)
{
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

/* ---- messages ------------------------------------------------------------ */

void inj_out_init(struct inj_out *o)
{
	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < sizeof(nt_cupti_runtime_cbids) / sizeof(nt_cupti_runtime_cbids[0]); i++)
		if (nt_cupti_runtime_cbids[i].cbid < 1024)
			o->call_of[0][nt_cupti_runtime_cbids[i].cbid] = nt_cupti_runtime_cbids[i].what;
	for (size_t i = 0; i < sizeof(nt_cupti_driver_cbids) / sizeof(nt_cupti_driver_cbids[0]); i++)
		if (nt_cupti_driver_cbids[i].cbid < 1024)
			o->call_of[1][nt_cupti_driver_cbids[i].cbid] = nt_cupti_driver_cbids[i].what;
}

void inj_out_flush(struct inj_out *o)
{
	struct inj_msg *m = &o->msg;
	struct nt_gpu_msg *h = (struct nt_gpu_msg *)m->buf;
	bool sent;

	if (!m->len)
		return;
	h->size = m->len;
	h->n_records = m->n_records;
	sent = o->send && o->send(o->send_arg, m->buf, m->len) == 0;
	for (uint32_t i = 0; i < m->n_defined; i++)
		m->defined[i]->sent = sent;
	if (!sent)
		o->send_dropped += m->n_records;
	m->len = 0;
	m->n_records = 0;
	m->n_defined = 0;
}

/* Room for `size` bytes in the current message (sending it when full). */
static void *room(struct inj_out *o, size_t size)
{
	struct inj_msg *m = &o->msg;
	void *p;

	if (size > NT_GPU_MSG_MAX - sizeof(struct nt_gpu_msg))
		return NULL;
	if (m->len + size > NT_GPU_MSG_MAX)
		inj_out_flush(o);
	if (!m->len) {
		struct nt_gpu_msg h = { .magic = NT_GPU_MAGIC, .version = NT_GPU_VERSION };

		memcpy(m->buf, &h, sizeof(h));
		m->len = sizeof(h);
	}
	p = m->buf + m->len;
	memset(p, 0, size);
	m->len += (uint32_t)size;
	return p;
}

int inj_out_raw(struct inj_out *o, const void *rec, size_t size)
{
	void *p = room(o, size);

	if (!p)
		return -1;
	memcpy(p, rec, size);
	return 0;
}

static void *rec_new(struct inj_out *o, uint16_t type, size_t size)
{
	struct nt_gpu_rec *r = room(o, size);

	if (!r)
		return NULL;
	r->type = type;
	r->size = (uint16_t)size;
	o->msg.n_records++;
	o->records++;
	return r;
}

/* The id of a kernel name, defining it in this message when not sent. */
static uint32_t name_id(struct inj_out *o, const char *name)
{
	struct inj_name *e = inj_names_get(&o->names, name);
	struct nt_gpu_name *r;
	size_t len, size;

	if (!e)
		return 0;
	if (e->sent)
		return e->id;
	for (uint32_t i = 0; i < o->msg.n_defined; i++)
		if (o->msg.defined[i] == e)
			return e->id;
	len = strnlen(name, NAME_LEN_MAX);
	size = (sizeof(*r) + len + 7) & ~(size_t)7;
	/* the definition and the record that uses it share one message */
	if (o->msg.len + size + sizeof(struct nt_gpu_kernel) > NT_GPU_MSG_MAX ||
	    o->msg.n_defined == 256)
		inj_out_flush(o);
	r = room(o, size);
	if (!r)
		return 0;
	r->h.type = NT_GPU_R_NAME;
	r->h.size = (uint16_t)size;
	r->id = e->id;
	r->len = (uint32_t)len;
	memcpy(r + 1, name, len);
	o->msg.defined[o->msg.n_defined++] = e;
	return e->id;
}

/* ---- CUPTI records ------------------------------------------------------- */

static void conv_kernel(struct inj_out *o, const struct nt_cupti_kernel *k)
{
	uint32_t id = name_id(o, k->name);
	struct nt_gpu_kernel *r = rec_new(o, NT_GPU_R_KERNEL, sizeof(*r));

	if (!r)
		return;
	r->start = k->start;
	r->end = k->end;
	r->correlation = k->correlationId;
	r->device = k->deviceId;
	r->context = k->contextId;
	r->stream = k->streamId;
	r->grid[0] = k->gridX;
	r->grid[1] = k->gridY;
	r->grid[2] = k->gridZ;
	r->block[0] = k->blockX;
	r->block[1] = k->blockY;
	r->block[2] = k->blockZ;
	r->static_shared = k->staticSharedMemory;
	r->dynamic_shared = k->dynamicSharedMemory;
	r->registers = k->registersPerThread;
	r->name_id = id;
}

static void conv_memcpy(struct inj_out *o, const struct nt_cupti_memcpy *c)
{
	struct nt_gpu_memcpy *r = rec_new(o, NT_GPU_R_MEMCPY, sizeof(*r));

	if (!r)
		return;
	r->start = c->start;
	r->end = c->end;
	r->bytes = c->bytes;
	r->correlation = c->correlationId;
	r->runtime_correlation = c->runtimeCorrelationId;
	r->device = c->deviceId;
	r->context = c->contextId;
	r->stream = c->streamId;
	r->copy_kind = c->copyKind;
	r->src_kind = c->srcKind;
	r->dst_kind = c->dstKind;
}

static void conv_memset(struct inj_out *o, const struct nt_cupti_memset *c)
{
	struct nt_gpu_memset *r = rec_new(o, NT_GPU_R_MEMSET, sizeof(*r));

	if (!r)
		return;
	r->start = c->start;
	r->end = c->end;
	r->bytes = c->bytes;
	r->correlation = c->correlationId;
	r->device = c->deviceId;
	r->context = c->contextId;
	r->stream = c->streamId;
	r->value = c->value;
}

static void conv_sync(struct inj_out *o, const struct nt_cupti_sync *c)
{
	struct nt_gpu_sync *r = rec_new(o, NT_GPU_R_SYNC, sizeof(*r));

	if (!r)
		return;
	r->start = c->start;
	r->end = c->end;
	r->correlation = c->correlationId;
	r->type = c->type;
	r->context = c->contextId;
	r->stream = c->streamId;
	r->event = c->cudaEventId;
}

static void conv_api(struct inj_out *o, const struct nt_cupti_api *a)
{
	uint8_t driver = a->kind == NT_CUPTI_KIND_DRIVER;
	uint8_t call = a->cbid < 1024 ? o->call_of[driver][a->cbid] : 0;
	struct nt_gpu_api *r;

	/* a CUPTI without per-function filters traces every call: keep the
	 * ones the join needs */
	if (!call)
		return;
	r = rec_new(o, NT_GPU_R_API, sizeof(*r));
	if (!r)
		return;
	r->start = a->start;
	r->end = a->end;
	r->tid = a->threadId;
	r->correlation = a->correlationId;
	r->cbid = a->cbid;
	r->driver = driver;
	r->call = call;
}

void inj_out_record(struct inj_out *o, const struct nt_cupti_activity *rec)
{
	switch (rec->kind) {
	case NT_CUPTI_KIND_KERNEL:
	case NT_CUPTI_KIND_CONCURRENT_KERNEL:
		conv_kernel(o, (const struct nt_cupti_kernel *)rec);
		break;
	case NT_CUPTI_KIND_MEMCPY:
		conv_memcpy(o, (const struct nt_cupti_memcpy *)rec);
		break;
	case NT_CUPTI_KIND_MEMSET:
		conv_memset(o, (const struct nt_cupti_memset *)rec);
		break;
	case NT_CUPTI_KIND_SYNCHRONIZATION:
		conv_sync(o, (const struct nt_cupti_sync *)rec);
		break;
	case NT_CUPTI_KIND_RUNTIME:
	case NT_CUPTI_KIND_DRIVER:
		conv_api(o, (const struct nt_cupti_api *)rec);
		break;
	default:
		o->unknown_records++;
	}
}

void inj_out_fini(struct inj_out *o)
{
	inj_names_free(&o->names);
}
