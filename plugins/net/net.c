/* SPDX-License-Identifier: MIT */
/*
 * net probe: TCP/UDP bytes and packets per process and connection, the
 * connection lifecycle, retransmits, resets and RTT. This file holds the
 * config schema, the descriptor and its ops; net_int.h lists the files
 * that do the work.
 */
#include <errno.h>
#include <stdlib.h>

#include <bpf/libbpf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/cfg.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/links.h"
#include "ntcore/kit/log.h"

#include "net.bpf.skel.h"
#include "net_int.h"

static const struct nt_cfg_key net_cfg_keys[] = {
	NT_KEY_BOOL(struct net_cfg, tcp, true, "trace TCP sockets"),
	NT_KEY_BOOL(struct net_cfg, udp, true, "trace UDP sockets"),
	NT_KEY_STRLIST(struct net_cfg, ports, "[]",
		       "only connections with a local or remote port in this "
		       "list (\"443\", \"8000-8100\"); empty: all"),
	NT_KEY_INT(struct net_cfg, interval_ms, 1000, 100, 3600000,
		   "how often BPF counters are copied into the metrics"),
	NT_KEY_INT(struct net_cfg, max_connections, 65536, 64, 4194304,
		   "connections tracked at once (BPF hash size)"),
	NT_KEY_BOOL(struct net_cfg, conn_events, true,
		    "publish net.open / net.conn / net.reset / net.connect_fail"),
	NT_KEY_INT(struct net_cfg, report_interval_s, 10, 0, 86400,
		   "publish net.report this often (0: only at exit)"),
	NT_KEY_INT(struct net_cfg, top_n, 10, 0, 1000,
		   "rows per table in net.report"),
};

/* Stop producing (ABI 1.6): the skeleton's links and the cgroup socket
 * program go, all at once; the ring and maps stay for the core's last read. */
static void net_quiesce(void *state)
{
	struct net_state *st = state;
	struct nt_linkset ls = {0};

	if (st->skel)
		nt_linkset_take_skeleton(&ls, st->skel->skeleton);
	nt_linkset_add(&ls, st->cg_link);
	st->cg_link = NULL;
	nt_linkset_release(&ls);
}

static void net_fini(void *state);

static int register_all(struct net_state *st)
{
	const struct nt_host *host = st->host;

	st->ev_open = host->register_schema(st->inst, &net_schema_open);
	st->ev_close = host->register_schema(st->inst, &net_schema_conn);
	st->ev_reset = host->register_schema(st->inst, &net_schema_reset);
	st->ev_fail = host->register_schema(st->inst, &net_schema_fail);
	st->ev_report = host->register_schema(st->inst, &net_schema_report);
	if (st->ev_open < 0 || st->ev_close < 0 || st->ev_reset < 0 ||
	    st->ev_fail < 0 || st->ev_report < 0) {
		nt_log_err(st, "cannot register the net.* schemas");
		return -EEXIST;
	}
	for (int i = 0; i < NET_M_COUNT; i++) {
		st->m[i] = host->metric_register(st->inst, &net_metrics[i]);
		if (!st->m[i]) {
			nt_log_err(st, "cannot register metric %s",
				   net_metrics[i].name);
			return -EINVAL;
		}
	}
	return 0;
}

static int net_init(struct nt_instance *inst, const struct nt_host *host,
		    const void *config, void **state)
{
	const struct net_cfg *cfg = config;
	struct net_state *st;
	char err[160];
	int rc;

	if (!cfg->tcp && !cfg->udp)
		return host->config_error(inst, "udp",
					  "tcp and udp are both false: "
					  "nothing to trace");
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->inst = inst;
	st->host = host;
	st->cfg = cfg;
	rc = net_parse_ports(cfg->ports.v, cfg->ports.n, st->ports,
			     NET_PORTS_MAX, err, sizeof(err));
	if (rc < 0) {
		free(st);
		return host->config_error(inst, "ports", "%s", err);
	}
	st->n_ports = rc;
	if (nt_topn_init(&st->closed_top, (size_t)cfg->top_n,
			 sizeof(struct net_top_row)) ||
	    nt_hmap_init(&st->dead, sizeof(struct net_proc_key),
			 sizeof(uint64_t), 0))
		rc = -ENOMEM;
	else
		rc = register_all(st);
	if (rc < 0) {
		net_fini(st);
		return rc;
	}
	*state = st;
	return 0;
}

static uint64_t stat_sum(struct net_state *st, uint32_t which)
{
	return nt_bpf_percpu_sum_at(bpf_map__fd(st->skel->maps.stats), which);
}

/* Drops and a full table counted; resets of sockets nobody owns. */
static void net_counters(struct net_state *st)
{
	const struct nt_host *h = st->host;
	uint64_t full, rs, rr;

	nt_bpf_report_drops(h, st->inst, bpf_map__fd(st->skel->maps.nt_drops),
			    &st->drops_reported);
	full = stat_sum(st, NET_STAT_CONN_MAP_FULL) +
	       stat_sum(st, NET_STAT_PROC_MAP_FULL);
	if (full > st->map_full_reported) {
		h->count_drop(st->inst, "map_full", full - st->map_full_reported);
		if (!st->map_full_reported)
			nt_log_warn(st, "connection table full: raise "
					"max_connections (now %lld)",
				    (long long)st->cfg->max_connections);
		st->map_full_reported = full;
	}
	rs = stat_sum(st, NET_STAT_RST_SENT_NOSOCK);
	rr = stat_sum(st, NET_STAT_RST_RECV_NOSOCK);
	if (!st->skel->rodata->nt_filter_on && st->cfg->tcp) {
		const char *ls[] = { "sent" }, *lr[] = { "received" };

		h->metric_set(st->m[NET_M_RST_UNOWNED], ls, (double)rs);
		h->metric_set(st->m[NET_M_RST_UNOWNED], lr, (double)rr);
	}
}

/* net.report: the largest connections of the run, closed or open. */
static void net_report(struct net_state *st, struct net_proc_row *rows,
		       size_t n_rows)
{
	struct nt_topn top;
	uint64_t active;

	if (nt_topn_init(&top, (size_t)st->cfg->top_n,
			 sizeof(struct net_top_row)) < 0)
		return;
	for (size_t i = 0; i < nt_topn_count(&st->closed_top); i++)
		net_top_offer(&top, nt_topn_at(&st->closed_top, i, NULL));
	active = net_walk_conns(st, &top, false);
	net_publish_report(st, rows, n_rows, active, &top);
	nt_topn_fini(&top);
}

/* The series, and the report when it is due (always with `final`, which
 * also keeps the processes that exited). */
static void net_tick(struct net_state *st, bool final)
{
	struct net_proc_row *rows = NULL;
	uint64_t now = nt_clock_mono_ns() / NT_NS_PER_MS;
	size_t n_rows = 0;
	bool report = final ||
		      (st->cfg->report_interval_s &&
		       now - st->last_report_ms >=
			       (uint64_t)st->cfg->report_interval_s * 1000);

	net_counters(st);
	net_copy_procs(st, !final, report ? &rows : NULL, &n_rows);
	if (report) {
		st->last_report_ms = now;
		net_report(st, rows, n_rows);
	} else {
		net_walk_conns(st, NULL, false);
	}
	free(rows);
}

static int net_poll(void *state, uint32_t token, uint32_t budget)
{
	struct net_state *st = state;
	int n;

	(void)budget; /* libbpf 1.1 has no bounded consume */
	if (!st->rb)
		return 0;
	if (token == NET_TOK_RING) {
		n = nt_ring_consume(st->rb);
		return n < 0 ? 0 : n;
	}
	if (token == NET_TOK_TIMER) {
		nt_ring_consume(st->rb);
		net_tick(st, false);
	}
	return 0;
}

/* Last words: drain the ring, copy the final counters, announce the
 * connections still open and publish the final report. Runs once, from
 * flush (shutdown) or from detach when the core has no flush for probes. */
static void net_final(struct net_state *st)
{
	if (st->final_done || !st->skel || !st->rb)
		return;
	st->final_done = true;
	nt_ring_consume(st->rb);
	net_walk_conns(st, NULL, true);
	net_tick(st, true);
}

static void net_flush(void *state)
{
	net_final(state);
}

void net_detach(void *state)
{
	struct net_state *st = state;

	net_final(st);
	nt_ring_free(st->rb);
	st->rb = NULL;
	bpf_link__destroy(st->cg_link);
	st->cg_link = NULL;
	net_bpf__destroy(st->skel);
	st->skel = NULL;
	nt_hmap_clear(&st->dead);
}

static void net_fini(void *state)
{
	struct net_state *st = state;

	if (!st)
		return;
	if (st->skel)
		net_detach(st);
	nt_topn_fini(&st->closed_top);
	nt_hmap_fini(&st->dead);
	free(st);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "net",
	.kind = NT_KIND_PROBE,
	.description = "TCP/UDP bytes and packets per process and connection, "
		       "connection lifecycle, retransmits, resets, RTT",
	.version = "0.1.0",
	.config = net_cfg_keys,
	.n_config = NT_ARRAY_LEN(net_cfg_keys),
	.config_size = sizeof(struct net_cfg),
	.init = net_init,
	.attach = net_attach,
	.poll = net_poll,
	.detach = net_detach,
	.quiesce = net_quiesce,
	.fini = net_fini,
	.flush = net_flush,
};
