/* SPDX-License-Identifier: MIT */
/*
 * python probe, user side: the descriptor, its config keys and the ops
 * (attach, detach and quiesce are pyattach.c's; pyplugin.h says which
 * file does what). Finds the CPython processes among the targets,
 * checks each interpreter's layout (pyproc.c), registers it with the BPF
 * sampler, resolves the (code object, instruction) frames it sends into
 * (qualified name, file, line) once per code object, and publishes
 *   - python.stack: folded stacks with sample counts (file sink, format =
 *     "folded", writes flame-graph input), per process, thread and state;
 *   - python.report: the per-function table (samples, self %, total %);
 *   - python.calls (calls = true): exact call counts, inclusive/self time;
 *   - python.exception (exceptions = true): exceptions by type and location;
 *   - python.process: a process attached, or refused and why;
 *   - metrics of samples, top functions, calls, exceptions, walk errors.
 * See docs/python.md.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "ntcore/kit/cfg.h"
#include "ntcore/kit/proc.h"

#include "pyplugin.h"

static const struct nt_cfg_key py_config[] = {
	NT_KEY_INT(struct py_cfg, frequency, 99, 1, 10000,
		   "samples per second per CPU (perf CPU clock); also the idle sample rate"),
	NT_KEY_INT(struct py_cfg, max_frames, 64, 1, PY_MAX_FRAMES,
		   "Python frames walked per sample (deeper stacks are cut at the root)"),
	NT_KEY_BOOL(struct py_cfg, idle, true,
		    "also attribute off-CPU time (sleeping, waiting, GIL) like a wall-clock sampler"),
	NT_KEY_BOOL(struct py_cfg, native, false,
		    "append the native frames a Python function was running (needs frame pointers)"),
	NT_KEY_BOOL(struct py_cfg, lines, true,
		    "folded frames carry the line (\"f (file:line)\"); false: \"f (file)\""),
	NT_KEY_BOOL(struct py_cfg, calls, false,
		    "call tracing through CPython's USDT markers: exact counts and times (costly)"),
	NT_KEY_STR(struct py_cfg, call_pattern, "*",
		   "fnmatch pattern on the function name or \"file:function\" for call tracing"),
	NT_KEY_BOOL(struct py_cfg, exceptions, false,
		    "count raised exceptions by type and raising location (uprobe PyTraceBack_Here)"),
	NT_KEY_INT(struct py_cfg, top_n, 20, 1, 1000,
		   "functions in python.report and in the top-function metrics"),
	NT_KEY_INT(struct py_cfg, report_interval_s, 0, 0, 86400,
		   "publish stacks and reports every so often (s); 0 = at process exit and shutdown"),
	NT_KEY_INT(struct py_cfg, ringbuf_kb, 1024, 64, 1048576,
		   "BPF ring buffer size in KiB (a power of two; the reader is woken every 64 KiB; the ring is mapped into ntcore: it counts in its RSS)"),
	NT_KEY_INT(struct py_cfg, max_stacks, 100000, 100, 10000000,
		   "distinct stacks kept (further ones are counted as \"[other stacks]\")"),
	NT_KEY_INT(struct py_cfg, native_stacks, 16384, 64, 1048576,
		   "native stack map entries (native = true)"),
	NT_KEY_BOOL(struct py_cfg, cuda_join, true,
		    "join cuda.launch events (cuda probe) with the thread's latest Python stack"),
	NT_KEY_BOOL(struct py_cfg, other_users, false,
		    "host-wide, also sample other users' processes (ntcore's own user's only by default; -p and -- CMD targets always)"),
};

static void py_consume(void *state, const struct nt_event_hdr *ev,
		       const struct nt_schema *schema)
{
	struct py_plugin *st = state;

	if (!st->skel)
		return;
	if (strcmp(schema->name, "proc.exit") == 0)
		proc_gone(st, ev->pid);
	else if (strcmp(schema->name, "cuda.launch") == 0)
		on_cuda_launch(st, ev, schema, true);
	else if (strncmp(schema->name, "cuda.", 5) == 0)
		on_cuda_launch(st, ev, schema, false); /* graph launch, copy, set */
}

/* Processes that went away without a proc.exit (host-wide mode): found
 * first, then forgotten (forgetting one reads the ring, which may add
 * processes: not while the table is walked). */
static void reap_gone(struct py_plugin *st)
{
	uint32_t gone[256];
	size_t n = 0;
	struct py_map_it it = { 0 };
	uint64_t k;
	void *v;

	while (n < NT_ARRAY_LEN(gone) && py_map_next(&st->procs, &it, &k, &v))
		if (!nt_proc_alive((uint32_t)k))
			gone[n++] = (uint32_t)k;
	for (size_t i = 0; i < n; i++)
		proc_gone(st, gone[i]);
}

static void tick(struct py_plugin *st)
{
	struct py_map_it it = { 0 };
	uint64_t k;
	void *v;

	st->tick++;
	while (py_map_next(&st->procs, &it, &k, &v)) {
		struct pyp *p = v;

		if (p->status == PS_PENDING)
			proc_inspect(st, p);
		else
			seed_idle(st, p);
	}
	if (st->tick % STATS_EVERY)
		return;
	read_stats(st);
	if (st->host->target_map_fd(st->inst) >= 0)
		poll_targets(st);
	reap_gone(st);
}

static int py_poll(void *state, uint32_t token, uint32_t budget)
{
	struct py_plugin *st = state;
	int n = 0;

	(void)budget;
	if (!st->skel)
		return 0;
	switch (token) {
	case TOK_RING:
		n = nt_ring_consume(st->rb);
		if (n < 0 && n != -EINTR) {
			nt_log_warn(st, "ring buffer: %s",
				      strerror(-n));
			n = 0;
		}
		break;
	case TOK_DRAIN:
		n = nt_ring_consume(st->rb);
		break;
	case TOK_TICK:
		n = nt_ring_consume(st->rb);
		tick(st);
		break;
	case TOK_REPORT:
		nt_ring_consume(st->rb);
		publish_all(st, 0);
		break;
	}
	return n < 0 ? 0 : n;
}

static int py_init(struct nt_instance *inst, const struct nt_host *host,
		   const void *config, void **state)
{
	const struct py_cfg *cfg = config;
	struct py_plugin *st;
	int64_t kb = cfg->ringbuf_kb;

	if (kb & (kb - 1))
		return host->config_error(inst, "ringbuf_kb",
					  "%lld is not a power of two", (long long)kb);
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->inst = inst;
	st->host = host;
	st->cfg = cfg;
	st->period_ns = 1000000000ull / (uint64_t)cfg->frequency;
	st->agg = py_agg_new((uint32_t)cfg->max_stacks);
	st->text = malloc(TEXT_MAX);
	if (!st->agg || !st->text)
		goto nomem;
	st->t_stack = host->register_schema(inst, &py_stack_schema);
	st->t_report = host->register_schema(inst, &py_report_schema);
	st->t_calls = host->register_schema(inst, &py_calls_schema);
	st->t_exc = host->register_schema(inst, &py_exc_schema);
	st->t_proc = host->register_schema(inst, &py_proc_schema);
	if (st->t_stack < 0 || st->t_report < 0 || st->t_calls < 0 ||
	    st->t_exc < 0 || st->t_proc < 0) {
		nt_log_err(st, "cannot register event schemas");
		py_agg_free(st->agg);
		free(st->text);
		free(st);
		return -EEXIST;
	}
	for (int i = 0; i < M_N; i++) {
		st->m[i] = host->metric_register(inst, &py_metric_desc[i]);
		if (!st->m[i]) {
			nt_log_err(st, "cannot register metric %s",
				  py_metric_desc[i].name);
			py_agg_free(st->agg);
			free(st->text);
			free(st);
			return -ENOMEM;
		}
	}
	host->subscribe(inst, "proc.exit");
	if (cfg->cuda_join) {
		host->subscribe(inst, "cuda.launch");
		/* their stacks are lent only (python.launch_stack) */
		py_lend_subscribe(host, inst);
		if (py_lend_init(&st->lend, host, inst))
			nt_log_warn(st, "cannot register python.launch_stack: no stacks lent");
	}
	*state = st;
	return 0;
nomem:
	py_agg_free(st->agg);
	free(st->text);
	free(st);
	return -ENOMEM;
}

static void py_flush(void *state)
{
	struct py_plugin *st = state;

	if (!st->skel)
		return;
	nt_ring_consume(st->rb);
	publish_all(st, 0);
	read_stats(st);
}

static void py_fini(void *state)
{
	struct py_plugin *st = state;
	struct py_map_it it = { 0 };
	uint64_t k;
	void *v;

	if (!st)
		return;
	if (st->skel)
		py_detach(st);
	while (py_map_next(&st->procs, &it, &k, &v))
		proc_free(st, v);
	py_map_free(&st->procs);
	py_lend_fini(&st->lend);
	it = (struct py_map_it){ 0 };
	while (py_map_next(&st->threads, &it, &k, &v))
		free(v);
	py_map_free(&st->threads);
	it = (struct py_map_it){ 0 };
	while (py_map_next(&st->names, &it, &k, &v)) {
		struct call_name *cn = v;

		free(cn->func);
		free(cn->file);
		free(cn);
	}
	py_map_free(&st->names);
	py_map_free(&st->siblings);
	free(st->excs);
	py_agg_free(st->agg);
	free(st->text);
	free(st->evbuf);
	free(st);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "python",
	.kind = NT_KIND_PROBE,
	.description = "CPython stack sampler (3.10-3.13): flame graphs, per-function "
		       "table, USDT call tracing, exceptions",
	.version = "1.0",
	.config = py_config,
	.n_config = NT_ARRAY_LEN(py_config),
	.config_size = sizeof(struct py_cfg),
	.init = py_init,
	.attach = py_attach,
	.poll = py_poll,
	.detach = py_detach,
	.quiesce = py_quiesce,
	.fini = py_fini,
	.consume = py_consume,
	.flush = py_flush,
};
