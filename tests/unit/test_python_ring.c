/* SPDX-License-Identifier: MIT */
/*
 * The python probe's ring handler with no kernel (as Fluent Bit's in_ebpf
 * tests do): byte records laid out as python.bpf.c writes them are fed to
 * on_ring, then what the plugin publishes is checked event by event
 * through a host that records publishes and metric updates. The sampled
 * "process" is this test itself: its code objects, strings and types are
 * laid out in this process's memory (CPython 3.11 layout), so frames
 * resolve to real names through the same reads the probe does on a
 * target. No BPF object is opened (st->skel stays NULL).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyplugin.h"

extern const struct nt_plugin_desc ntcore_plugin; /* python.c */

/* ---- a host that records ---- */

#define MAX_EVS 64

struct rec_host {
	const struct nt_schema *schemas[16];
	int n_schemas;
	struct nt_event_hdr *evs[MAX_EVS];
	int n_evs;
	char metric_log[4096]; /* "name{a,b}+=v\n" lines */
	size_t metric_at;
	void *metrics[16];
	int n_metrics;
};

static struct rec_host H;

struct rec_metric {
	const struct nt_metric_desc *d;
};

static void h_vlog(struct nt_instance *i, int level, const char *fmt, va_list ap)
{
	(void)i;
	(void)level;
	(void)fmt;
	(void)ap;
}

static void h_log(struct nt_instance *i, int level, const char *fmt, ...)
{
	(void)i;
	(void)level;
	(void)fmt;
}

static int h_register(struct nt_instance *i, const struct nt_schema *s)
{
	(void)i;
	H.schemas[H.n_schemas] = s;
	return 100 + H.n_schemas++;
}

static int h_publish(struct nt_instance *i, const struct nt_event_hdr *ev)
{
	(void)i;
	ck_assert_int_lt(H.n_evs, MAX_EVS);
	H.evs[H.n_evs] = malloc(ev->size);
	memcpy(H.evs[H.n_evs++], ev, ev->size);
	return 0;
}

static struct nt_metric *h_metric_register(struct nt_instance *i,
					   const struct nt_metric_desc *d)
{
	struct rec_metric *m = calloc(1, sizeof(*m));

	(void)i;
	m->d = d;
	H.metrics[H.n_metrics++] = m;
	return (struct nt_metric *)m;
}

static void h_metric_add(struct nt_metric *m, const char *const *lv, double v)
{
	const struct rec_metric *rm = (const struct rec_metric *)m;
	size_t room = sizeof(H.metric_log) - H.metric_at;
	int n;

	if (room < 1024) /* full: later updates are not recorded */
		return;
	n = snprintf(H.metric_log + H.metric_at, room, "%s{", rm->d->name);

	for (uint32_t k = 0; k < rm->d->n_labels; k++)
		n += snprintf(H.metric_log + H.metric_at + n, room - (size_t)n, "%s%s",
			      k ? "," : "", lv[k]);
	n += snprintf(H.metric_log + H.metric_at + n, room - (size_t)n, "}+=%g\n", v);
	H.metric_at += (size_t)n;
}

static void h_metric_set(struct nt_metric *m, const char *const *lv, double v)
{
	(void)m;
	(void)lv;
	(void)v;
}

static int h_subscribe(struct nt_instance *i, const char *pattern)
{
	(void)i;
	(void)pattern;
	return 0;
}

static int h_target_map_fd(const struct nt_instance *i)
{
	(void)i;
	return 3; /* targets given: every process is ours */
}

static int h_symbolize(struct nt_instance *i, uint32_t pid, uint64_t addr,
		       struct nt_symbol *out)
{
	(void)i;
	(void)pid;
	(void)addr;
	(void)out;
	return -ENOENT;
}

static const struct nt_host host = {
	.abi_major = NT_ABI_MAJOR,
	.abi_minor = NT_ABI_MINOR,
	.size = sizeof(struct nt_host),
	.log = h_log,
	.vlog = h_vlog,
	.register_schema = h_register,
	.publish = h_publish,
	.subscribe = h_subscribe,
	.metric_register = h_metric_register,
	.metric_add = h_metric_add,
	.metric_set = h_metric_set,
	.target_map_fd = h_target_map_fd,
	.symbolize = h_symbolize,
};

/* The published events of schema `name`, in order. */
static int evs_named(const char *name, struct nt_event_hdr **out, int max)
{
	int n = 0;

	for (int i = 0; i < H.n_evs && n < max; i++) {
		const struct nt_schema *s = H.schemas[H.evs[i]->type - 100];

		if (strcmp(s->name, name) == 0)
			out[n++] = H.evs[i];
	}
	return n;
}

static void clear_evs(void)
{
	for (int i = 0; i < H.n_evs; i++)
		free(H.evs[i]);
	H.n_evs = 0;
}

static const char *vstr(const struct nt_event_hdr *e, struct nt_vstr v, char *buf,
			size_t len)
{
	ck_assert_uint_le((uint64_t)v.off + v.len, e->size);
	snprintf(buf, len, "%.*s", (int)v.len, (const char *)e + v.off);
	return buf;
}

/* ---- a CPython 3.11 in this process ---- */

struct fake_type {
	uint64_t refcnt, ob_type, ob_size;
	const char *tp_name; /* at 24 */
};

struct fake_str {
	uint64_t refcnt, ob_type, length, hash;
	uint32_t state, pad;
	uint64_t wstr;
	char data[64]; /* at 48: compact ASCII data */
};

struct fake_bytes {
	uint64_t refcnt, ob_type, ob_size, hash;
	uint8_t data[16];
};

static struct fake_type code_type = { 1, 0, 0, "code" };
static struct fake_type str_type = { 1, 0, 0, "str" };
static struct fake_type exc_type = { 1, 0, 0, "ValueError" };
static struct fake_str s_outer, s_inner, s_file;
static struct fake_bytes no_lines;
static uint8_t code_outer[256], code_inner[256];

static void fake_str(struct fake_str *s, const char *text)
{
	s->ob_type = (uint64_t)(uintptr_t)&str_type;
	s->length = strlen(text);
	s->state = (1u << 2) | (1u << 5) | (1u << 6); /* kind 1, compact, ascii */
	memcpy(s->data, text, s->length + 1);
}

static void put64(uint8_t *at, uint64_t v)
{
	memcpy(at, &v, 8);
}

static void fake_code(uint8_t *code, const struct py_layout *l, struct fake_str *name,
		      int32_t first)
{
	put64(code + l->ob_type, (uint64_t)(uintptr_t)&code_type);
	put64(code + l->code_qualname, (uint64_t)(uintptr_t)name);
	put64(code + l->code_name, (uint64_t)(uintptr_t)name);
	put64(code + l->code_filename, (uint64_t)(uintptr_t)&s_file);
	put64(code + l->code_linetable, (uint64_t)(uintptr_t)&no_lines);
	memcpy(code + l->code_firstlineno, &first, 4);
}

static struct py_plugin *st;
static struct py_cfg cfg;
static uint32_t me;

static void setup(void)
{
	const struct py_layout *l = py_layout_lookup(3, 11);
	struct pyp *p;

	memset(&H, 0, sizeof(H));
	fake_str(&s_outer, "outer");
	fake_str(&s_inner, "Net.inner");
	fake_str(&s_file, "/app.py");
	fake_code(code_outer, l, &s_outer, 10);
	fake_code(code_inner, l, &s_inner, 20);
	cfg = (struct py_cfg){ .frequency = 100, .max_frames = 64, .idle = true,
			       .lines = true, .call_pattern = "*", .exceptions = true,
			       .top_n = 20, .ringbuf_kb = 1024, .max_stacks = 1000,
			       .native_stacks = 64 };
	ck_assert_int_eq(ntcore_plugin.init(NULL, &host, &cfg, (void **)&st), 0);
	me = (uint32_t)getpid();
	p = proc_get(st, me, true);
	ck_assert_ptr_nonnull(p);
	p->status = PS_ATTACHED;
	p->layout = *l;
	p->found.major = 3;
	p->found.minor = 11;
}

static void teardown(void)
{
	ntcore_plugin.fini(st);
	clear_evs();
	for (int i = 0; i < H.n_metrics; i++)
		free(H.metrics[i]);
}

/* ---- records as python.bpf.c writes them ---- */

static size_t sample(struct py_sample_rec *r, uint32_t type, uint32_t tid,
		     uint64_t ts, const uint8_t *const *codes, uint16_t n)
{
	const struct py_layout *l = py_layout_lookup(3, 11);

	memset(r, 0, sizeof(*r));
	r->hdr.type = type;
	r->hdr.ts_ns = ts;
	r->hdr.pid = me;
	r->hdr.tid = tid;
	memcpy(r->hdr.comm, "trainer", 8);
	r->native_id = -1;
	r->n_frames = n;
	for (uint16_t i = 0; i < n; i++) { /* frames[0]: innermost */
		r->frames[i].code = (uint64_t)(uintptr_t)codes[i];
		r->frames[i].instr = (uint64_t)(uintptr_t)codes[i] + l->code_adaptive;
	}
	r->hdr.size = (uint32_t)(PY_SAMPLE_HDR_SIZE + n * sizeof(struct py_frame));
	return r->hdr.size;
}

static const uint8_t *const inner_outer[] = { code_inner, code_outer };

#define TID 4321

START_TEST(cpu_samples_fold)
{
	struct py_sample_rec r;
	struct nt_event_hdr *ev[8];
	struct py_stack_ev *e;
	char buf[256];

	for (int i = 0; i < 3; i++) {
		size_t n = sample(&r, PY_REC_CPU, TID, 1000 + i, inner_outer, 2);

		ck_assert_int_eq(on_ring(st, &r, n), 0);
	}
	publish_all(st, 0);
	ck_assert_int_eq(evs_named("python.stack", ev, 8), 1);
	e = (struct py_stack_ev *)ev[0];
	ck_assert_uint_eq(e->count, 3);
	ck_assert_uint_eq(e->period_ns, 10000000);
	ck_assert_uint_eq(e->hdr.pid, me);
	ck_assert_uint_eq(e->hdr.tid, TID);
	ck_assert_str_eq(e->hdr.comm, "trainer");
	ck_assert_str_eq(vstr(ev[0], e->state, buf, sizeof(buf)), "cpu");
	ck_assert_str_eq(vstr(ev[0], e->stack, buf, sizeof(buf)),
			 "outer (/app.py:10);Net.inner (/app.py:20)");
	ck_assert_ptr_nonnull(strstr(H.metric_log, "ntcore_python_samples_total{"));
	snprintf(buf, sizeof(buf), "ntcore_python_samples_total{%u,cpu}+=3\n", me);
	ck_assert_ptr_nonnull(strstr(H.metric_log, buf));
	/* the report names both functions; inner has every self sample */
	ck_assert_int_eq(evs_named("python.report", ev, 8), 1);
	snprintf(buf, sizeof(buf), "ntcore_python_function_self_samples_total{%u,Net.inner (/app.py)}+=3\n", me);
	ck_assert_ptr_nonnull(strstr(H.metric_log, buf));
	/* nothing new: nothing published again */
	clear_evs();
	publish_all(st, 0);
	ck_assert_int_eq(evs_named("python.stack", ev, 8), 0);
}
END_TEST

START_TEST(idle_weight_counts_periods)
{
	struct py_sample_rec r;
	struct py_weight_rec w = { 0 };
	struct nt_event_hdr *ev[8];
	char buf[256];
	size_t n = sample(&r, PY_REC_IDLE, TID, 5000, inner_outer + 1, 1);

	ck_assert_int_eq(on_ring(st, &r, n), 0);
	w.hdr.type = PY_REC_WEIGHT;
	w.hdr.size = sizeof(w);
	w.hdr.pid = me;
	w.hdr.tid = TID;
	w.start_ns = 5000;
	w.off_ns = 5 * 10000000ull + 4000000; /* 5.4 periods */
	ck_assert_int_eq(on_ring(st, &w, sizeof(w)), 0);
	/* a weight of another thread, and one cut short: not counted */
	w.hdr.tid = TID + 1;
	ck_assert_int_eq(on_ring(st, &w, sizeof(w)), 0);
	w.hdr.tid = TID;
	ck_assert_int_eq(on_ring(st, &w, sizeof(w) - 1), 0);
	publish_all(st, 0);
	ck_assert_int_eq(evs_named("python.stack", ev, 8), 1);
	struct py_stack_ev *e = (struct py_stack_ev *)ev[0];

	ck_assert_uint_eq(e->count, 5);
	ck_assert_str_eq(vstr(ev[0], e->state, buf, sizeof(buf)), "idle");
	ck_assert_str_eq(vstr(ev[0], e->stack, buf, sizeof(buf)), "outer (/app.py:10)");
}
END_TEST

START_TEST(bad_records_ignored)
{
	struct py_sample_rec r;
	struct nt_event_hdr *ev[8];
	size_t n = sample(&r, PY_REC_CPU, TID, 1, inner_outer, 2);

	ck_assert_int_eq(on_ring(st, &r, 4), 0);                      /* no header */
	ck_assert_int_eq(on_ring(st, &r, PY_SAMPLE_HDR_SIZE - 1), 0); /* cut */
	ck_assert_int_eq(on_ring(st, &r, n - 1), 0);                  /* frames cut */
	r.n_frames = PY_MAX_FRAMES + 1;
	ck_assert_int_eq(on_ring(st, &r, sizeof(r)), 0);               /* too many */
	n = sample(&r, PY_REC_CPU, TID, 1, inner_outer, 2);
	r.hdr.pid = me + 1; /* a process not attached */
	ck_assert_int_eq(on_ring(st, &r, n), 0);
	r.hdr.type = 99; /* unknown kind */
	ck_assert_int_eq(on_ring(st, &r, n), 0);
	publish_all(st, 0);
	ck_assert_int_eq(evs_named("python.stack", ev, 8), 0);
	ck_assert_uint_eq(py_agg_n_stacks(st->agg), 0);
}
END_TEST

START_TEST(exception_by_type_and_place)
{
	struct py_sample_rec r;
	struct nt_event_hdr *ev[8];
	struct py_exc_ev *e;
	char buf[256];

	for (int i = 0; i < 2; i++) {
		size_t n = sample(&r, PY_REC_EXC, TID, 7, inner_outer, 2);

		r.aux = (uint64_t)(uintptr_t)&exc_type;
		ck_assert_int_eq(on_ring(st, &r, n), 0);
	}
	publish_all(st, 0);
	ck_assert_int_eq(evs_named("python.exception", ev, 8), 1);
	e = (struct py_exc_ev *)ev[0];
	ck_assert_uint_eq(e->count, 2);
	ck_assert_int_eq(e->line, 20);
	ck_assert_str_eq(vstr(ev[0], e->exc_type, buf, sizeof(buf)), "ValueError");
	ck_assert_str_eq(vstr(ev[0], e->function, buf, sizeof(buf)), "Net.inner");
	ck_assert_str_eq(vstr(ev[0], e->file, buf, sizeof(buf)), "/app.py");
	ck_assert_str_eq(vstr(ev[0], e->stack, buf, sizeof(buf)),
			 "outer (/app.py:10);Net.inner (/app.py:20)");
	snprintf(buf, sizeof(buf), "ntcore_python_exceptions_total{%u,ValueError}+=2\n", me);
	ck_assert_ptr_nonnull(strstr(H.metric_log, buf));
	/* exception samples are not CPU time */
	ck_assert_int_eq(evs_named("python.stack", ev, 8), 0);
}
END_TEST

START_TEST(call_names_from_code_object)
{
	struct py_func_rec f;
	struct call_name *cn;

	memset(&f, 0, sizeof(f));
	f.hdr.type = PY_REC_FUNC;
	f.hdr.pid = me;
	f.key.pid = me;
	f.key.code = (uint64_t)(uintptr_t)code_inner;
	f.key.func = 0x1000;
	f.line = 22;
	memcpy(f.func, "inner", 6);
	memcpy(f.file, "/app.py", 8);
	ck_assert_int_eq(on_ring(st, &f, sizeof(f)), 0);
	cn = py_map_get(&st->names, call_key_hash(&f.key));
	ck_assert_ptr_nonnull(cn);
	/* the marker's co_name matches the code object: its qualified name */
	ck_assert_str_eq(cn->func, "Net.inner");
	ck_assert_str_eq(cn->file, "/app.py");
	ck_assert_int_eq(cn->line, 20);
	ck_assert(cn->match);
	/* a marker naming another function than its frame's code: as sent */
	f.key.func = 0x2000;
	memcpy(f.func, "other", 6);
	ck_assert_int_eq(on_ring(st, &f, sizeof(f)), 0);
	cn = py_map_get(&st->names, call_key_hash(&f.key));
	ck_assert_ptr_nonnull(cn);
	ck_assert_str_eq(cn->func, "other");
	ck_assert_int_eq(cn->line, 22);
	/* cut short: ignored */
	f.key.func = 0x3000;
	ck_assert_int_eq(on_ring(st, &f, sizeof(f) - 1), 0);
	ck_assert_ptr_null(py_map_get(&st->names, call_key_hash(&f.key)));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("python_ring");
	TCase *tc = tcase_create("ring");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, cpu_samples_fold);
	tcase_add_test(tc, idle_weight_counts_periods);
	tcase_add_test(tc, bad_records_ignored);
	tcase_add_test(tc, exception_by_type_and_place);
	tcase_add_test(tc, call_names_from_code_object);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
