/* SPDX-License-Identifier: MIT */
/*
 * cuda probe, user side: the descriptor, the config (as data) and the ops.
 * It finds the CUDA runtime (libcudart, shared or linked statically) and
 * driver (libcuda) each target really uses, attaches the uprobes of
 * cuda.bpf.c to them (and to the config's function table), turns the raw
 * records into cuda.* events (cuda_decode.c) and keeps the metrics; the
 * files each part lives in are listed in cuda_plugin.h. See docs/cuda.md
 * for the events, metrics, keys and what it cannot see.
 */
#include "cuda_plugin.h"
#include "ntcore/kit/cfg.h"

/* ------------------------------------------------------------------ */
/* Config                                                              */
/* ------------------------------------------------------------------ */


static const char *const layer_choices[] = { "auto", "runtime", "driver",
					     "both", NULL };

static const struct nt_cfg_key fn_keys[] = {
	NT_KEY_STR_REQUIRED(struct fn_cfg, library,
	    "library: a name (\"cublas\" matches libcublas.so*), a basename prefix (\"libcublasLt\") or an absolute path"),
	NT_KEY_STRLIST_REQUIRED(struct fn_cfg, symbols, "exported function names to probe"),
	NT_KEY_FLOAT(struct fn_cfg, threshold_ms, 10.0, 0, 3600000,
	    "calls at least this slow publish a cuda.call event (0: none)"),
};

#define S struct cuda_cfg
static const struct nt_cfg_key cuda_config[] = {
	NT_KEY_CHOICE(S, launch_layer, "auto", layer_choices,
	    "where kernel launches are probed (one probe hit per launch): auto, runtime (cudaLaunchKernel), driver (cuLaunchKernel), both (two hits)"),
	NT_KEY_BOOL(S, stacks, false,
	    "record the CPU call stack at allocations, frees, graph launches and (with launch_events) launches"),
	NT_KEY_INT(S, stack_depth, 16, 1, NT_CUDA_STACK_MAX,
	    "frames kept in a symbolized stack"),
	NT_KEY_BOOL(S, launch_events, false,
	    "publish one cuda.launch event per kernel launch (counts per kernel are metrics either way)"),
	NT_KEY_BOOL(S, enter_events, false,
	    "publish cuda.enter when a thread enters a call that may block (sync, synchronous copy/set): for hang detection"),
	NT_KEY_BOOL(S, stop_on_load, true,
	    "stop a target (SIGSTOP/SIGCONT) while probes are attached to a CUDA library it just opened or a binary it exec'd, so no call is missed"),
	NT_KEY_BOOL(S, watch_libraries, true,
	    "check every shared object a target opens for a statically linked CUDA runtime (targets only)"),
	NT_KEY_STRLIST(S, libraries, "[]",
	    "extra CUDA runtime/driver files (or glob patterns) to probe from the start"),
	NT_KEY_INT(S, interval_ms, 1000, 50, 3600000,
	    "how often launch counts and function-table statistics are copied into the metrics (ms)"),
	NT_KEY_INT(S, ringbuf_kb, 0, 0, 1048576,
	    "BPF ring buffer size in KiB (a power of two); 0: 8192 with launch_events, else 2048 (the ring is mapped into ntcore: it counts in its RSS)"),
	NT_KEY_BOOL(S, report, true,
	    "publish a cuda.report text summary when a traced process exits"),
	NT_KEY_INT(S, max_series, 10000, 16, 1000000,
	    "label sets kept per metric family"),
	NT_KEY_GROUPS(S, functions, struct fn_cfg, fn_keys,
	    "function table: ( { library = \"cublas\"; symbols = [ \"cublasGemmEx\" ]; threshold_ms = 5.0; } , ... ): counts, latency histograms, slow-call events"),
};
#undef S

/* ------------------------------------------------------------------ */
/* Ops                                                                 */
/* ------------------------------------------------------------------ */

/* The function table: one entry per (library, symbol) of the config. */
static int fn_table_build(struct cuda *c)
{
	const struct cuda_cfg *cfg = c->cfg;

	for (uint32_t i = 0; i < cfg->functions.n; i++) {
		const struct fn_cfg *f = (const struct fn_cfg *)cfg->functions.items + i;

		if (!f->symbols.n)
			return c->host->config_error(c->inst, "functions",
						     "entry %u (%s) lists no symbols",
						     i + 1, f->library);
		for (uint32_t k = 0; k < f->symbols.n; k++) {
			struct fn_entry *n;

			if (c->nfns >= NT_CUDA_FN_MAX)
				return c->host->config_error(
					c->inst, "functions",
					"more than %d symbols in all", NT_CUDA_FN_MAX);
			n = realloc(c->fns, (c->nfns + 1) * sizeof(*n));
			if (!n)
				return -ENOMEM;
			c->fns = n;
			c->fns[c->nfns].library = (char *)f->library;
			c->fns[c->nfns].symbol = (char *)f->symbols.v[k];
			c->fns[c->nfns].threshold_ns =
				(uint64_t)(f->threshold_ms * 1e6);
			c->nfns++;
		}
	}
	return 0;
}

/* The schemas of the published records and the metric families. */
static int register_outputs(struct cuda *c)
{
	const struct nt_host *host = c->host;

	for (int i = 0; i < NT_CUDA_EVT_N; i++) {
		c->types[i] = host->register_schema(c->inst, &cuda_schemas[i]);
		if (c->types[i] < 0) {
			nt_log_err(c, "cannot register %s: %d",
				  cuda_schemas[i].name, c->types[i]);
			return c->types[i];
		}
		c->st.type_ids[i] = (uint32_t)c->types[i];
	}
	for (int i = 0; i < M_N; i++) {
		c->mdesc[i] = cuda_metric_tmpl[i];
		c->mdesc[i].max_series = (uint32_t)c->cfg->max_series;
		c->m[i] = host->metric_register(c->inst, &c->mdesc[i]);
		if (!c->m[i]) {
			nt_log_err(c, "cannot register metric %s",
				  cuda_metric_tmpl[i].name);
			return -EINVAL;
		}
	}
	return 0;
}

static int cuda_init(struct nt_instance *inst, const struct nt_host *host,
		     const void *config, void **state)
{
	const struct cuda_cfg *cfg = config;
	struct cuda *c;
	int err;

	if ((cfg->ringbuf_kb & (cfg->ringbuf_kb - 1)) ||
	    (cfg->ringbuf_kb && cfg->ringbuf_kb < 64))
		return host->config_error(inst, "ringbuf_kb",
					  "must be 0 or a power of two from 64, not %" PRId64,
					  cfg->ringbuf_kb);
	if (cfg->functions.n > NT_CUDA_FN_MAX)
		return host->config_error(inst, "functions",
					  "at most %d entries", NT_CUDA_FN_MAX);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->inst = inst;
	c->host = host;
	c->cfg = cfg;
	nt_cuda_state_init(&c->st, sym_cb, c);
	nt_hmap_init(&c->lc, sizeof(struct nt_cuda_launch_key),
		     sizeof(struct lcount), 0);
	c->st.mem = nt_cuda_mem_read_proc; /* attach-time kernel names */
	c->st.stack_depth = (uint32_t)cfg->stack_depth;
	err = fn_table_build(c);
	if (!err)
		err = register_outputs(c);
	if (err) {
		/* no fini follows a failed init */
		nt_cuda_state_fini(&c->st);
		free(c->fns);
		free(c);
		return err;
	}
	host->subscribe(inst, "proc.exit");

	if (!strcmp(cfg->launch_layer, "runtime"))
		c->layer_launch = 1 << NT_CUDA_LAYER_RUNTIME;
	else if (!strcmp(cfg->launch_layer, "driver"))
		c->layer_launch = 1 << NT_CUDA_LAYER_DRIVER;
	else if (!strcmp(cfg->launch_layer, "both"))
		c->layer_launch = (1 << NT_CUDA_LAYER_RUNTIME) |
				  (1 << NT_CUDA_LAYER_DRIVER);
	else { /* auto: the driver layer, see docs/cuda.md ("Launches") */
		c->layer_launch = 1 << NT_CUDA_LAYER_DRIVER;
		c->auto_layer = true;
	}
	*state = c;
	return 0;
}

static int cuda_attach(void *state)
{
	struct cuda *c = state;
	const struct cuda_cfg *cfg = c->cfg;
	struct cuda_bpf *s;
	uint32_t pids[1024];
	size_t npids;
	int err;

	err = cuda_load(c);
	if (err)
		goto fail;
	s = c->skel;
	cuda_attach_discovery(c);
	err = nt_ring_open(c->host, c->inst, s->maps.events, on_record, c,
			   TOK_RING, &c->rb);
	if (err)
		goto fail;

	/* Discovery: well-known files, then what the targets (or every
	 * process, host-wide) have mapped now. */
	npids = c->host->target_pids(c->inst, pids, NT_ARRAY_LEN(pids));
	if (npids > NT_ARRAY_LEN(pids))
		npids = NT_ARRAY_LEN(pids);
	scan_default_paths(c);
	if (!s->rodata->nt_filter_on) {
		scan_all_pids(c);
	} else {
		for (size_t i = 0; i < npids && i < NT_ARRAY_LEN(pids); i++) {
			char exe[64];

			snprintf(exe, sizeof(exe), "/proc/%u/exe", pids[i]);
			probe_file(c, exe, pids[i]);
			scan_pid(c, pids[i]);
		}
	}
	err = c->host->add_timer(c->inst, (uint64_t)cfg->interval_ms, TOK_TICK);
	/* most records wake the loop in batches (output_lazy in cuda.bpf.c):
	 * read them at least every RING_READ_MS when few come */
	if (!err)
		err = c->host->add_timer(c->inst, RING_READ_MS, TOK_RING);
	if (err)
		goto fail;
	c->attached = true;
	nt_log_info(c,
		     "%" PRIu64 " probes in %zu files; launches probed at the %s layer",
		     c->probes, c->nlibs,
		     c->fallback_on ? "runtime (no driver library yet)"
		     : c->auto_layer && !c->n_driver_libs
			     ? "driver (or the runtime's while no driver library is found)"
		     : c->layer_launch == (1 << NT_CUDA_LAYER_RUNTIME) ? "runtime"
		     : c->layer_launch == (1 << NT_CUDA_LAYER_DRIVER) ? "driver"
								       : "runtime and driver");
	return 0;
fail:
	return err;
}

static int cuda_poll(void *state, uint32_t token, uint32_t budget)
{
	struct cuda *c = state;
	int n = 0;

	(void)budget;
	if (!c->rb)
		return 0;
	if (token == TOK_RING) {
		n = nt_ring_consume(c->rb);
		if (n < 0)
			return n;
	} else if (token == TOK_TICK) {
		c->tick++;
		if (c->skel->bss->handover && c->tick >= c->handover_until)
			c->skel->bss->handover = false;
		reap_dead(c, false);
		nt_ring_consume(c->rb);
		sync_launches(c, 0, NULL, NULL);
		sync_fns(c, 0);
		sync_hits(c, false);
		nt_bpf_report_drops(c->host, c->inst,
				    bpf_map__fd(c->skel->maps.nt_drops),
				    &c->drops_reported);
	}
	return n;
}

static void cuda_consume(void *state, const struct nt_event_hdr *ev,
			 const struct nt_schema *schema)
{
	struct cuda *c = state;

	if (!c->skel || !schema || strcmp(schema->name, "proc.exit"))
		return;
	proc_gone(c, ev->pid);
}

static void cuda_flush(void *state)
{
	struct cuda *c = state;

	if (!c->rb)
		return;
	nt_ring_consume(c->rb);
	sync_launches(c, 0, NULL, NULL);
	sync_fns(c, 0);
	log_kname_offset(c, false);
	nt_bpf_report_drops(c->host, c->inst, bpf_map__fd(c->skel->maps.nt_drops),
			    &c->drops_reported);
}

static void cuda_detach(void *state)
{
	struct cuda *c = state;

	if (c->rb) {
		nt_ring_consume(c->rb);
		if (c->skel) {
			sync_launches(c, 0, NULL, NULL);
			sync_fns(c, 0);
			sync_hits(c, true);
		}
		log_kname_offset(c, true);
	}
	struct nt_linkset links = {0};
	for (size_t i = 0; i < c->nlibs; i++) {
		nt_uprobes_move(&c->libs[i].fallback, &links);
		nt_uprobes_move(&c->libs[i].up, &links);
		free(c->libs[i].path);
	}
	for (size_t i = 0; i < NT_ARRAY_LEN(c->tp_links); i++) {
		nt_linkset_add(&links, c->tp_links[i]);
		c->tp_links[i] = NULL;
	}
	/* one grace period for all of them, not one each (kit/links.h) */
	nt_linkset_release(&links);
	c->fallback_on = false;
	c->n_driver_libs = 0;
	free(c->libs);
	c->libs = NULL;
	c->nlibs = c->caplibs = 0;
	nt_ring_free(c->rb);
	c->rb = NULL;
	if (c->lslots)
		munmap(c->lslots, c->lslots_len);
	c->lslots = NULL;
	/* the slots go with the map: none of ours is valid any more */
	lc_forget_slots(c);
	cuda_bpf__destroy(c->skel);
	c->skel = NULL;
	c->attached = false;
}

/* Stop producing (ABI 1.6): every uprobe and the library-discovery
 * tracepoints go, all at once; the ring and maps stay for the core's last
 * read. A target held at a library's load (stop_on_load) is let go. */
static void cuda_quiesce(void *state)
{
	struct cuda *c = state;
	struct nt_linkset links = {0};

	for (size_t i = 0; i < c->nlibs; i++) {
		nt_uprobes_move(&c->libs[i].fallback, &links);
		nt_uprobes_move(&c->libs[i].up, &links);
	}
	for (size_t i = 0; i < NT_ARRAY_LEN(c->tp_links); i++) {
		nt_linkset_add(&links, c->tp_links[i]);
		c->tp_links[i] = NULL;
	}
	nt_linkset_release(&links);
}

static void cuda_fini(void *state)
{
	struct cuda *c = state;

	if (!c)
		return;
	if (c->skel)
		cuda_detach(c);
	nt_cuda_state_fini(&c->st);
	nt_hmap_fini(&c->lc);
	free(c->fc);
	free(c->fns);
	free(c);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "cuda",
	.kind = NT_KIND_PROBE,
	.n_config = NT_ARRAY_LEN(cuda_config),
	.description = "CUDA runtime and driver calls through uprobes: allocations, copies, launches per kernel, syncs, errors",
	.version = "0.1.0",
	.config = cuda_config,
	.config_size = sizeof(struct cuda_cfg),
	.init = cuda_init,
	.attach = cuda_attach,
	.poll = cuda_poll,
	.detach = cuda_detach,
	.quiesce = cuda_quiesce,
	.fini = cuda_fini,
	.consume = cuda_consume,
	.flush = cuda_flush,
};
