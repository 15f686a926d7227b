// SPDX-License-Identifier: MIT
/*
 * ntcore cuda_gpu: the plugin's descriptor, config and ops (see gpu.h).
 *
 * attach: the socket, then the job's environment: CUDA_INJECTION64_PATH
 * (only where the user has not set it), NTCORE_CUPTI_SOCKET and the
 * library's settings, through host->child_setenv, which exists only for a
 * command started as `ntcore -- CMD` (held at the gate until now).
 * consume: the host calls of the cuda probe and the stacks the python
 * probe lends to launches, for the join.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"

enum { TOK_SOCKET = 1, TOK_TICK = 2 };

#define KEY(k, t, d, lo, hi, text)                                             \
	{ .key = #k, .type = (t), .offset = offsetof(struct gpu_cfg, k),       \
	  .def = (d), .min = (lo), .max = (hi), .desc = (text) }

static const struct nt_cfg_key gpu_config[] = {
	KEY(inject, NT_CFG_BOOL, "true", 1, 0,
	    "put the CUPTI injection library into the job started as `ntcore -- CMD` (CUDA_INJECTION64_PATH)"),
	KEY(library, NT_CFG_STRING, "\"\"", 1, 0,
	    "the injection library; \"\": libntcore-cupti.so.1 next to this plugin"),
	KEY(cupti_path, NT_CFG_STRING, "\"\"", 1, 0,
	    "libcupti for the job (NTCORE_CUPTI_PATH); \"\": the one matching the job's CUDA runtime"),
	KEY(flush_ms, NT_CFG_INT, "200", 10, 60000,
	    "how often the job hands its CUPTI buffers over (ms)"),
	KEY(buffers, NT_CFG_INT, "8", 2, 1024, "CUPTI buffers the job may hold"),
	KEY(buffer_kb, NT_CFG_INT, "2048", 64, 65536, "size of one CUPTI buffer (KiB)"),
	{ .key = "kinds", .type = NT_CFG_STRING_LIST, .offset = offsetof(struct gpu_cfg, kinds),
	  .def = "[\"kernel\", \"memcpy\", \"memset\"]", .min = 1, .max = 0,
	  .desc = "CUPTI activity kinds: kernel, memcpy, memset, sync (sync costs the job about 4 us per launch)" },
	KEY(api_records, NT_CFG_BOOL, "false", 1, 0,
	    "CUPTI API records of launches, copies and sets: join GPU records to their thread, "
	    "launch event and stacks, and measure queueing delay (costs the job about 1.5-2 us per runtime call)"),
	KEY(join_wait_ms, NT_CFG_INT, "1000", 0, 60000,
	    "how long a GPU record waits for its launch event before it is published without stacks (ms)"),
	KEY(max_calls, NT_CFG_INT, "262144", 1024, 16777216,
	    "host calls remembered per thread for the join (a power of two)"),
	KEY(max_apis, NT_CFG_INT, "262144", 1024, 16777216,
	    "CUPTI API records remembered per process for the join"),
	KEY(max_pending, NT_CFG_INT, "262144", 1024, 16777216,
	    "GPU records that may wait for their launch event at once"),
	KEY(interval_ms, NT_CFG_INT, "1000", 50, 3600000,
	    "metrics update period and busy-ratio window (ms)"),
	KEY(report_interval_s, NT_CFG_INT, "0", 0, 86400,
	    "publish cuda.gpu_stack every so often (s); 0: at process exit and shutdown"),
	KEY(max_series, NT_CFG_INT, "10000", 16, 1000000, "label sets kept per metric family"),
	KEY(max_stacks, NT_CFG_INT, "100000", 16, 10000000,
	    "distinct (thread, stack, kernel) entries of the GPU flame graph"),
	KEY(max_connections, NT_CFG_INT, "1024", 1, 65536, "processes traced at once"),
	KEY(stream_busy, NT_CFG_BOOL, "true", 1, 0, "busy ratio per stream too"),
	KEY(folded, NT_CFG_BOOL, "true", 1, 0, "GPU time per launching stack (cuda.gpu_stack)"),
};

/* ---- consuming host calls ------------------------------------------------------- */

static int field_off(const struct nt_schema *s, const char *name)
{
	for (uint32_t i = 0; i < s->n_fields; i++)
		if (strcmp(s->fields[i].name, name) == 0 && s->fields[i].type == NT_F_VSTR)
			return s->fields[i].offset;
	return -1;
}

/* The vstr field at off (cached per schema), or NULL/0. */
static const char *vstr_at(const struct nt_event_hdr *ev, int off, uint32_t *len)
{
	struct nt_vstr v;

	*len = 0;
	if (off < 0 || (uint32_t)off + sizeof(v) > ev->size)
		return NULL;
	memcpy(&v, (const char *)ev + off, sizeof(v));
	if (!v.len || (uint64_t)v.off + v.len > ev->size)
		return NULL;
	*len = v.len;
	return (const char *)ev + v.off;
}

static uint32_t seen_slot(struct gpu_plugin *g, const struct nt_schema *s)
{
	for (uint32_t i = 0; i < g->n_seen; i++)
		if (g->seen_schema[i] == s)
			return i;
	if (g->n_seen == NT_ARRAY_LEN(g->seen_schema))
		return 0;
	g->seen_schema[g->n_seen] = s;
	g->seen_stack[g->n_seen] = field_off(s, "stack");
	g->seen_api[g->n_seen] = field_off(s, "api_name");
	return g->n_seen++;
}

static unsigned call_kind(const char *name)
{
	static const char *const names[] = { NULL, "cuda.launch", "cuda.graph_launch",
					     "cuda.memcpy", "cuda.memset" };

	for (unsigned i = 1; i < NT_ARRAY_LEN(names); i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return 0;
}

static void gpu_consume(void *state, const struct nt_event_hdr *ev,
			const struct nt_schema *schema)
{
	struct gpu_plugin *g = state;
	struct gpu_pstate *ps;
	uint32_t slot, len, alen;
	const char *s, *api;
	unsigned kind;
	char comm[NT_COMM_LEN + 1];

	if (strcmp(schema->name, "proc.exit") == 0) {
		if (g->injecting) {
			memcpy(comm, ev->comm, NT_COMM_LEN);
			comm[NT_COMM_LEN] = '\0';
			gpu_server_exited(g, ev->pid, comm);
		}
		return;
	}
	ps = gpu_pstate_of(g, ev->pid);
	if (!ps && g->injecting) { /* its connection may wait in the backlog */
		gpu_server_accept_now(g);
		ps = gpu_pstate_of(g, ev->pid);
	}
	/* before its hello is read, a connected process is taken as traced
	 * (its host calls would be lost otherwise) */
	if (!ps || ps->fd < 0 || (!ps->tracing && ps->status != UINT32_MAX))
		return;
	slot = seen_slot(g, schema);
	memcpy(comm, ev->comm, NT_COMM_LEN);
	comm[NT_COMM_LEN] = '\0';
	s = vstr_at(ev, g->seen_stack[slot], &len);
	if (strcmp(schema->name, "python.launch_stack") == 0) {
		if (ps->join->api_off)
			return;
		gpu_join_lend(ps->join, ev->tid, comm, ev->ts_ns,
			      s ? gpu_str_intern(&g->strs, s, len) : 0);
		return;
	}
	if (!(kind = call_kind(schema->name)))
		return;
	ps->host_calls++; /* the end-of-process line says when they went unused */
	if (ps->join->api_off)
		return; /* nothing to join them with */
	if (s) {
		char name[128];

		api = vstr_at(ev, g->seen_api[slot], &alen);
		snprintf(name, sizeof(name), "%.*s", (int)alen, api ? api : "");
		gpu_stack_root_first(s, len, name, &g->text);
	}
	gpu_join_call(ps->join, ev->tid, comm, ev->ts_ns, kind,
		      s && g->text.len ? gpu_str_intern(&g->strs, g->text.buf, g->text.len) : 0);
}

/* ---- ops ---------------------------------------------------------------------------- */

static void gpu_fini(void *state);

static int gpu_init(struct nt_instance *inst, const struct nt_host *host,
		    const void *config, void **state)
{
	static const char *const kinds[] = { "kernel", "memcpy", "memset", "sync" };
	const struct gpu_cfg *cfg = config;
	struct gpu_plugin *g;
	int err;

	for (uint32_t i = 0; i < cfg->kinds.n; i++) {
		bool ok = false;

		for (size_t k = 0; k < NT_ARRAY_LEN(kinds); k++)
			ok |= strcmp(cfg->kinds.v[i], kinds[k]) == 0;
		if (!ok)
			return host->config_error(inst, "kinds", "'%s' is not one of kernel, memcpy, "
						  "memset, sync", cfg->kinds.v[i]);
	}
	if (cfg->max_calls & (cfg->max_calls - 1))
		return host->config_error(inst, "max_calls", "%lld is not a power of two",
					  (long long)cfg->max_calls);
	if (!(g = calloc(1, sizeof(*g))))
		return -ENOMEM;
	g->inst = inst;
	g->host = host;
	g->cfg = cfg;
	g->listen_fd = g->epoll_fd = -1;
	gpu_strtab_init(&g->strs, 256u << 20);
	nt_sb_init(&g->ev, 0);
	nt_sb_init(&g->text, 0);
	if ((err = gpu_events_register(g)) < 0 ||
	    (!(g->m = gpu_metrics_new(g)) && (err = -ENOMEM)) ||
	    (cfg->folded && !(g->fold = gpu_folded_new((uint32_t)cfg->max_stacks)) &&
	     (err = -ENOMEM))) {
		gpu_fini(g); /* no fini follows a failed init */
		return err;
	}
	*state = g;
	host->subscribe(inst, "cuda.launch");
	host->subscribe(inst, "cuda.graph_launch");
	host->subscribe(inst, "cuda.memcpy");
	host->subscribe(inst, "cuda.memset");
	host->subscribe(inst, "python.launch_stack");
	host->subscribe(inst, "proc.exit");
	return 0;
}

static int gpu_attach(void *state)
{
	struct gpu_plugin *g = state;
	char lib[1024], why[512];
	int rc;

	if ((rc = g->host->add_timer(g->inst, (uint64_t)g->cfg->interval_ms, TOK_TICK)))
		return rc;
	if (!g->cfg->inject) {
		g->host->log(g->inst, NT_LOG_INFO, "inject = false: no GPU times");
		return 0;
	}
	if ((rc = gpu_library_path(g, lib, sizeof(lib))))
		return rc;
	if ((rc = gpu_server_open(g, why, sizeof(why)))) {
		g->host->log(g->inst, NT_LOG_ERROR, "%s", why);
		return rc;
	}
	rc = gpu_set_env(g, lib);
	if (rc) {
		gpu_server_close(g);
		return rc < 0 ? rc : 0;
	}
	if ((rc = g->host->watch_fd(g->inst, g->epoll_fd, TOK_SOCKET)))
		return rc;
	g->injecting = true;
	g->host->log(g->inst, NT_LOG_DEBUG, "injecting %s; socket %s", lib, g->sock_path);
	return 0;
}

/* Processes whose connection ended join_wait_ms ago are finished. */
static void reap(struct gpu_plugin *g, uint64_t now, bool all)
{
	uint64_t wait = (uint64_t)g->cfg->join_wait_ms * 1000000ull;
	uint32_t pids[256], n = 0;
	struct nt_hmap_iter it = {0};
	uint64_t k, v;

	while (n < NT_ARRAY_LEN(pids) && gpu_map_next(&g->procs, &it, &k, &v)) {
		struct gpu_pstate *ps = (struct gpu_pstate *)(uintptr_t)v;

		if (all || (ps->closed_ns && now - ps->closed_ns >= wait))
			pids[n++] = ps->pid;
	}
	for (uint32_t i = 0; i < n; i++)
		gpu_records_forget(g, pids[i]);
}

static void tick(struct gpu_plugin *g)
{
	uint64_t now = nt_clock_mono_ns();

	gpu_records_retry(g, false);
	if (g->injecting)
		gpu_server_expire(g, now);
	reap(g, now, false);
	if (g->cfg->report_interval_s &&
	    now - g->last_report_ns >= (uint64_t)g->cfg->report_interval_s * 1000000000ull) {
		gpu_stacks_publish(g, 0);
		g->last_report_ns = now;
	}
	gpu_metrics_tick(g->m, now);
}

static int gpu_poll(void *state, uint32_t token, uint32_t budget)
{
	struct gpu_plugin *g = state;

	if (token == TOK_SOCKET)
		return g->epoll_fd >= 0 ? gpu_server_poll(g, budget) : 0;
	tick(g);
	return 0;
}

/* Shutdown (or reload): everything that waits is published as it is. */
static void gpu_flush(void *state)
{
	struct gpu_plugin *g = state;

	gpu_records_retry(g, true);
	gpu_stacks_publish(g, 0);
	gpu_metrics_tick(g->m, nt_clock_mono_ns());
	if (g->malformed)
		g->host->log(g->inst, NT_LOG_WARN, "%llu malformed or unknown records from jobs were skipped",
			     (unsigned long long)g->malformed);
}

static void gpu_detach(void *state)
{
	struct gpu_plugin *g = state;

	reap(g, nt_clock_mono_ns(), true);
	while (nt_hmap_count(&g->procs.h)) /* more than one reap's batch */
		reap(g, nt_clock_mono_ns(), true);
	gpu_server_close(g);
	g->injecting = false;
}

static void gpu_fini(void *state)
{
	struct gpu_plugin *g = state;

	if (!g)
		return;
	gpu_server_close(g);
	gpu_map_free(&g->procs);
	free(g->pend);
	gpu_metrics_free(g->m);
	gpu_folded_free(g->fold);
	gpu_strtab_free(&g->strs);
	nt_sb_fini(&g->ev);
	nt_sb_fini(&g->text);
	free(g);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "cuda_gpu",
	.kind = NT_KIND_PROBE,
	.n_config = NT_ARRAY_LEN(gpu_config),
	.description = "GPU time from CUPTI (kernels, copies, sets, syncs) joined with the launches' CPU and Python stacks",
	.version = "0.1.0",
	.config = gpu_config,
	.config_size = sizeof(struct gpu_cfg),
	.init = gpu_init,
	.attach = gpu_attach,
	.poll = gpu_poll,
	.detach = gpu_detach,
	.fini = gpu_fini,
	.consume = gpu_consume,
	.flush = gpu_flush,
};
