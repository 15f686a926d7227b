/* SPDX-License-Identifier: MIT */
/*
 * The CUDA detectors' harness, shared by their unit tests
 * (tests/unit/test_cuda_detectors.c) and their benchmark
 * (bench/cuda_detectors/consume_cost.c): synthetic cuda.* records built
 * with the probe's own structs (plugins/cuda/cuda.h), and a stand-in host
 * that dlopens a detector .so from CUDADET_DIR, fills its config from the
 * descriptor's defaults and keeps what it publishes. Static functions: each
 * program compiles its own copy and uses part of them.
 */
#ifndef NTCORE_TEST_CUDADET_HARNESS_H
#define NTCORE_TEST_CUDADET_HARNESS_H

#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/plugin.h"

#include "cuda.h"
#include "det_util.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"

#define MiB (1024ULL * 1024ULL)
#define SEC 1000000000ULL

/* ================================================================== */
/* synthetic cuda.* records                                            */
/* ================================================================== */

#define COMMON_FIELDS(S)                                                       \
	NT_FIELD(S, cgroup_id, NT_F_U64, "", ""),                              \
	NT_FIELD(S, duration_ns, NT_F_U64, "ns", ""),                          \
	NT_FIELD(S, api, NT_F_U16, "", ""),                                    \
	NT_FIELD(S, layer, NT_F_U8, "", ""),                                   \
	NT_FIELD(S, flags, NT_F_U8, "", ""),                                   \
	NT_FIELD(S, ret, NT_F_S32, "", ""),                                    \
	NT_FIELD(S, device, NT_F_S32, "", "")

static const struct nt_field alloc_fields[] = {
	COMMON_FIELDS(struct nt_cuda_alloc),
	NT_FIELD(struct nt_cuda_alloc, ptr, NT_F_HEX64, "", ""),
	NT_FIELD(struct nt_cuda_alloc, size, NT_F_U64, "bytes", ""),
	NT_FIELD(struct nt_cuda_alloc, stream, NT_F_HEX64, "", ""),
	NT_FIELD(struct nt_cuda_alloc, outstanding_bytes, NT_F_U64, "bytes", ""),
	NT_FIELD(struct nt_cuda_alloc, stack_id, NT_F_HEX64, "", ""),
	NT_FIELD(struct nt_cuda_alloc, kind, NT_F_U32, "", ""),
	NT_FIELD(struct nt_cuda_alloc, alloc_flags, NT_F_U32, "", ""),
	NT_FIELD(struct nt_cuda_alloc, api_name, NT_F_VSTR, "", ""),
	NT_FIELD(struct nt_cuda_alloc, stack, NT_F_VSTR, "", ""),
};
static const struct nt_schema alloc_schema = { "cuda.alloc", "", alloc_fields,
	NT_ARRAY_LEN(alloc_fields), sizeof(struct nt_cuda_alloc) };

static const struct nt_field free_fields[] = {
	COMMON_FIELDS(struct nt_cuda_free),
	NT_FIELD(struct nt_cuda_free, ptr, NT_F_HEX64, "", ""),
	NT_FIELD(struct nt_cuda_free, size, NT_F_U64, "bytes", ""),
	NT_FIELD(struct nt_cuda_free, kind, NT_F_U32, "", ""),
	NT_FIELD(struct nt_cuda_free, api_name, NT_F_VSTR, "", ""),
	NT_FIELD(struct nt_cuda_free, stack, NT_F_VSTR, "", ""),
};
static const struct nt_schema free_schema = { "cuda.free", "", free_fields,
	NT_ARRAY_LEN(free_fields), sizeof(struct nt_cuda_free) };

static const struct nt_field launch_fields[] = {
	COMMON_FIELDS(struct nt_cuda_launch),
	NT_FIELD(struct nt_cuda_launch, func, NT_F_HEX64, "", ""),
	NT_FIELD(struct nt_cuda_launch, kernel, NT_F_VSTR, "", ""),
	NT_FIELD(struct nt_cuda_launch, api_name, NT_F_VSTR, "", ""),
	NT_FIELD(struct nt_cuda_launch, stack, NT_F_VSTR, "", ""),
};
static const struct nt_schema launch_schema = { "cuda.launch", "",
	launch_fields, NT_ARRAY_LEN(launch_fields), sizeof(struct nt_cuda_launch) };

static const struct nt_field enter_fields[] = {
	COMMON_FIELDS(struct nt_cuda_enter),
	NT_FIELD(struct nt_cuda_enter, handle, NT_F_HEX64, "", ""),
	NT_FIELD(struct nt_cuda_enter, family, NT_F_U32, "", ""),
	NT_FIELD(struct nt_cuda_enter, api_name, NT_F_VSTR, "", ""),
};
static const struct nt_schema enter_schema = { "cuda.enter", "", enter_fields,
	NT_ARRAY_LEN(enter_fields), sizeof(struct nt_cuda_enter) };

static const struct nt_field sync_fields[] = {
	COMMON_FIELDS(struct nt_cuda_sync),
	NT_FIELD(struct nt_cuda_sync, sync_kind, NT_F_U32, "", ""),
	NT_FIELD(struct nt_cuda_sync, api_name, NT_F_VSTR, "", ""),
};
static const struct nt_schema sync_schema = { "cuda.sync", "", sync_fields,
	NT_ARRAY_LEN(sync_fields), sizeof(struct nt_cuda_sync) };

static const struct nt_field error_fields[] = {
	COMMON_FIELDS(struct nt_cuda_error),
	NT_FIELD(struct nt_cuda_error, size, NT_F_U64, "bytes", ""),
	NT_FIELD(struct nt_cuda_error, api_name, NT_F_VSTR, "", ""),
	NT_FIELD(struct nt_cuda_error, error_name, NT_F_VSTR, "", ""),
	NT_FIELD(struct nt_cuda_error, stack, NT_F_VSTR, "", ""),
};
static const struct nt_schema error_schema = { "cuda.error", "", error_fields,
	NT_ARRAY_LEN(error_fields), sizeof(struct nt_cuda_error) };

struct proc_exit_rec {
	struct nt_event_hdr hdr;
	int32_t exit_code;
	uint32_t ppid;
};
static const struct nt_field exit_fields[] = {
	NT_FIELD(struct proc_exit_rec, exit_code, NT_F_S32, "", ""),
	NT_FIELD(struct proc_exit_rec, ppid, NT_F_U32, "", ""),
};
static const struct nt_schema exit_schema = { "proc.exit", "", exit_fields,
	NT_ARRAY_LEN(exit_fields), sizeof(struct proc_exit_rec) };

/* appends strings after a fixed record; returns the new malloc'd record */
static void *rec_new(size_t fixed, const char *const *strs, const size_t *slots,
		     int n)
{
	size_t size = fixed;
	char *r;

	for (int i = 0; i < n; i++)
		size += strs[i] ? strlen(strs[i]) : 0;
	r = calloc(1, size);
	ck_assert_ptr_nonnull(r);
	size = fixed;
	for (int i = 0; i < n; i++) {
		size_t l = strs[i] ? strlen(strs[i]) : 0;
		struct nt_vstr *v = (struct nt_vstr *)(r + slots[i]);

		v->off = (uint32_t)size;
		v->len = (uint32_t)l;
		memcpy(r + size, strs[i] ? strs[i] : "", l);
		size += l;
	}
	((struct nt_event_hdr *)r)->size = (uint32_t)size;
	return r;
}

#define SLOT(S, m) offsetof(S, m)

static void hdr_fill(struct nt_event_hdr *h, uint32_t pid, uint32_t tid,
		     uint64_t ts, const char *comm)
{
	h->type = 1;
	h->ts_ns = ts;
	h->pid = pid;
	h->tid = tid;
	snprintf(h->comm, sizeof(h->comm), "%s", comm);
}

static struct nt_cuda_alloc *mk_alloc(uint32_t pid, uint64_t ts, uint64_t ptr,
				      uint64_t size, int32_t ret, int layer,
				      const char *stack)
{
	const char *s[2] = { layer == NT_CUDA_LAYER_DRIVER ? "cuMemAlloc_v2" : "cudaMalloc",
			     stack };
	const size_t sl[2] = { SLOT(struct nt_cuda_alloc, api_name),
				  SLOT(struct nt_cuda_alloc, stack) };
	struct nt_cuda_alloc *a = rec_new(sizeof(*a), s, sl, 2);

	hdr_fill(&a->hdr, pid, pid, ts, "train");
	a->api = layer == NT_CUDA_LAYER_DRIVER ? NT_CUDA_API_cuMemAlloc_v2
					       : NT_CUDA_API_cudaMalloc;
	a->layer = (uint8_t)layer;
	a->flags = NT_CUDA_F_RET;
	a->ret = ret;
	a->device = 0;
	a->ptr = ret ? 0 : ptr;
	a->size = size;
	a->kind = NT_CUDA_MEM_DEVICE;
	return a;
}

static struct nt_cuda_free *mk_free(uint32_t pid, uint64_t ts, uint64_t ptr,
				    int layer)
{
	const char *s[2] = { layer == NT_CUDA_LAYER_DRIVER ? "cuMemFree_v2" : "cudaFree",
			     "" };
	const size_t sl[2] = { SLOT(struct nt_cuda_free, api_name),
				  SLOT(struct nt_cuda_free, stack) };
	struct nt_cuda_free *f = rec_new(sizeof(*f), s, sl, 2);

	hdr_fill(&f->hdr, pid, pid, ts, "train");
	f->api = layer == NT_CUDA_LAYER_DRIVER ? NT_CUDA_API_cuMemFree_v2
					       : NT_CUDA_API_cudaFree;
	f->layer = (uint8_t)layer;
	f->flags = NT_CUDA_F_RET;
	f->device = 0;
	f->ptr = ptr;
	f->kind = NT_CUDA_MEM_DEVICE;
	return f;
}

static struct nt_cuda_error *mk_error(uint32_t pid, uint64_t ts,
				      const char *api, const char *err, int code,
				      const char *stack)
{
	const char *s[3] = { api, err, stack };
	const size_t sl[3] = { SLOT(struct nt_cuda_error, api_name),
				  SLOT(struct nt_cuda_error, error_name),
				  SLOT(struct nt_cuda_error, stack) };
	struct nt_cuda_error *e = rec_new(sizeof(*e), s, sl, 3);

	hdr_fill(&e->hdr, pid, pid + 1, ts, "train");
	e->layer = NT_CUDA_LAYER_RUNTIME;
	e->flags = NT_CUDA_F_RET;
	e->ret = code;
	e->device = 0;
	return e;
}

static struct proc_exit_rec *mk_exit(uint32_t pid, int code)
{
	struct proc_exit_rec *x = calloc(1, sizeof(*x));

	hdr_fill(&x->hdr, pid, pid, nt_clock_mono_ns(), "train");
	x->hdr.size = sizeof(*x);
	x->exit_code = code;
	return x;
}

/* ================================================================== */
/* the detector .so files through a stand-in host                      */
/* ================================================================== */

#define MAX_SCHEMAS 16
#define MAX_PUB 256

struct fake {
	const struct nt_schema *schemas[MAX_SCHEMAS];
	int nschemas;
	char subs[32][64];
	int nsubs;
	struct nt_event_hdr *pub[MAX_PUB];
	int npub;
	uint64_t timer_ms;
	int config_errors;
};

static struct fake F;

static void f_log(struct nt_instance *inst, int level, const char *fmt, ...)
{
	va_list ap;

	(void)inst;
	if (!getenv("TEST_VERBOSE") && level > NT_LOG_ERROR)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static const char *f_name(const struct nt_instance *inst)
{
	(void)inst;
	return "test.0";
}

static int f_config_error(struct nt_instance *inst, const char *key,
			  const char *fmt, ...)
{
	(void)inst;
	(void)key;
	(void)fmt;
	F.config_errors++;
	return -EINVAL;
}

static int f_register(struct nt_instance *inst, const struct nt_schema *s)
{
	(void)inst;
	for (int i = 0; i < F.nschemas; i++)
		if (strcmp(F.schemas[i]->name, s->name) == 0)
			return i + 100;
	F.schemas[F.nschemas++] = s;
	return F.nschemas - 1 + 100;
}

static int f_publish(struct nt_instance *inst, const struct nt_event_hdr *ev)
{
	(void)inst;
	if (F.npub < MAX_PUB) {
		F.pub[F.npub] = malloc(ev->size);
		memcpy(F.pub[F.npub], ev, ev->size);
		F.npub++;
	}
	return 1;
}

static int f_subscribe(struct nt_instance *inst, const char *pattern)
{
	(void)inst;
	snprintf(F.subs[F.nsubs++], 64, "%s", pattern);
	return 0;
}

static const struct nt_schema *f_schema_of(const struct nt_instance *inst,
					   uint32_t type)
{
	(void)inst;
	if (type >= 100 && type < 100 + (uint32_t)F.nschemas)
		return F.schemas[type - 100];
	return NULL;
}

static int dummy_metric;
static struct nt_metric *f_metric_register(struct nt_instance *inst,
					   const struct nt_metric_desc *d)
{
	(void)inst;
	ck_assert_ptr_nonnull(strstr(d->name, "ntcore_cuda_"));
	return (struct nt_metric *)&dummy_metric;
}

static void f_metric_v(struct nt_metric *m, const char *const *lv, double v)
{
	(void)m;
	(void)lv;
	(void)v;
}

static void f_metric_remove(struct nt_metric *m, const char *const *lv)
{
	(void)m;
	(void)lv;
}

static int f_add_timer(struct nt_instance *inst, uint64_t ms, uint32_t token)
{
	(void)inst;
	(void)token;
	F.timer_ms = ms;
	return 0;
}

static const struct nt_host fake_host = {
	.abi_major = NT_ABI_MAJOR,
	.abi_minor = NT_ABI_MINOR,
	.size = sizeof(struct nt_host),
	.log = f_log,
	.instance_name = f_name,
	.config_error = f_config_error,
	.register_schema = f_register,
	.publish = f_publish,
	.subscribe = f_subscribe,
	.schema_of = f_schema_of,
	.metric_register = f_metric_register,
	.metric_add = f_metric_v,
	.metric_set = f_metric_v,
	.metric_observe = f_metric_v,
	.metric_remove = f_metric_remove,
	.add_timer = f_add_timer,
};

struct det {
	void *dl;
	const struct nt_plugin_desc *d;
	void *cfg;
	void *state;
	char *strings[64]; /* config strings we allocated */
	const char **lists[16];
	int ns, nl;
};

/* Fills a config struct from the descriptor's defaults, then overrides
 * given as "key=value" (the way the core fills it from libconfig). */
static void cfg_set(struct det *x, const struct nt_cfg_key *k, const char *val)
{
	char *p = (char *)x->cfg + k->offset;

	switch (k->type) {
	case NT_CFG_BOOL:
		*(bool *)p = strcmp(val, "true") == 0;
		break;
	case NT_CFG_INT:
		*(int64_t *)p = strtoll(val, NULL, 10);
		break;
	case NT_CFG_FLOAT:
		*(double *)p = strtod(val, NULL);
		break;
	case NT_CFG_STRING: {
		size_t n = strlen(val);
		char *s = malloc(n + 1);

		if (val[0] == '"') {
			memcpy(s, val + 1, n - 2);
			s[n - 2] = '\0';
		} else {
			memcpy(s, val, n + 1);
		}
		x->strings[x->ns++] = s;
		*(const char **)p = s;
		break;
	}
	case NT_CFG_STRING_LIST: {
		struct nt_strlist *l = (struct nt_strlist *)p;
		const char **v = calloc(16, sizeof(*v));
		const char *q = val;

		l->n = 0;
		while ((q = strchr(q, '"'))) {
			const char *e = strchr(q + 1, '"');
			char *s = strndup(q + 1, (size_t)(e - q - 1));

			x->strings[x->ns++] = s;
			v[l->n++] = s;
			q = e + 1;
		}
		l->v = v;
		x->lists[x->nl++] = v;
		break;
	}
	default:
		ck_abort_msg("unexpected config type");
	}
}

static void det_open(struct det *x, const char *name, const char *const *over)
{
	char path[1024];
	const struct nt_cfg_key *keys;

	memset(x, 0, sizeof(*x));
	memset(&F, 0, sizeof(F));
	snprintf(path, sizeof(path), "%s/%s.so", CUDADET_DIR, name);
	x->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(x->dl != NULL, "dlopen %s: %s", path, dlerror());
	x->d = dlsym(x->dl, NT_PLUGIN_SYMBOL);
	ck_assert_ptr_nonnull(x->d);
	ck_assert_str_eq(x->d->name, name);
	ck_assert_int_eq(x->d->kind, NT_KIND_DETECTOR);
	ck_assert_ptr_nonnull(x->d->consume);
	x->cfg = calloc(1, x->d->config_size);
	keys = x->d->config;
	for (uint32_t i = 0; i < x->d->n_config; i++) {
		ck_assert_ptr_nonnull(keys[i].def);
		cfg_set(x, &keys[i], keys[i].def);
	}
	for (int j = 0; over && over[j]; j++) {
		const char *eq = strchr(over[j], '=');
		bool found = false;

		for (uint32_t i = 0; i < x->d->n_config; i++)
			if (strlen(keys[i].key) == (size_t)(eq - over[j]) &&
			    strncmp(keys[i].key, over[j], (size_t)(eq - over[j])) == 0) {
				cfg_set(x, &keys[i], eq + 1);
				found = true;
			}
		ck_assert_msg(found, "no key %s", over[j]);
	}
	ck_assert_int_eq(x->d->init((struct nt_instance *)x, &fake_host, x->cfg,
				    &x->state), 0);
	ck_assert_int_eq(x->d->attach(x->state), 0);
}

static void det_close(struct det *x)
{
	x->d->detach(x->state);
	x->d->fini(x->state);
	for (int i = 0; i < x->ns; i++)
		free(x->strings[i]);
	for (int i = 0; i < x->nl; i++)
		free(x->lists[i]);
	free(x->cfg);
	dlclose(x->dl);
	for (int i = 0; i < F.npub; i++)
		free(F.pub[i]);
	F.npub = 0;
}

static void feed(struct det *x, void *rec, const struct nt_schema *s)
{
	x->d->consume(x->state, rec, s);
	free(rec);
}

/* the i-th published record of a schema name, or NULL */
static const struct nt_event_hdr *pub_of(const char *name, int i)
{
	for (int k = 0; k < F.npub; k++) {
		const struct nt_schema *s = f_schema_of(NULL, F.pub[k]->type);

		if (s && strcmp(s->name, name) == 0 && i-- == 0)
			return F.pub[k];
	}
	return NULL;
}

static int pub_count(const char *name)
{
	int n = 0;

	while (pub_of(name, n))
		n++;
	return n;
}

static char *vstr_dup(const struct nt_event_hdr *ev, struct nt_vstr v)
{
	return strndup((const char *)ev + v.off, v.len);
}

struct alert_view {
	uint32_t severity, pid;
	char *msg, *ev;
};

static bool alert_get(const char *name, int i, struct alert_view *a)
{
	const struct nt_alert *al = (const struct nt_alert *)pub_of(name, i);

	if (!al)
		return false;
	ck_assert_uint_eq(al->hdr.size, sizeof(*al) + al->message.len + al->evidence.len);
	a->severity = al->severity;
	a->pid = al->subject_pid;
	a->msg = vstr_dup(&al->hdr, al->message);
	a->ev = vstr_dup(&al->hdr, al->evidence);
	return true;
}

static void alert_free(struct alert_view *a)
{
	free(a->msg);
	free(a->ev);
}

#pragma GCC diagnostic pop

#endif /* NTCORE_TEST_CUDADET_HARNESS_H */
