/* SPDX-License-Identifier: MIT */
/*
 * io probe: block requests per device and process (bytes, requests, queue
 * and service latency, sizes, the slowest requests). This file holds the
 * config schema, the descriptor and its ops; io_int.h lists the files that
 * do the work.
 */
#include <errno.h>
#include <stdlib.h>

#include <bpf/libbpf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/cfg.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/links.h"
#include "ntcore/kit/log.h"

#include "io.bpf.skel.h"
#include "io_int.h"

static const struct nt_cfg_key io_cfg_keys[] = {
	NT_KEY_STRLIST(struct io_cfg, devices, "[]",
		       "block devices to trace, by name (\"vda\", \"nvme0n1p2\") "
		       "or \"MAJOR:MINOR\"; a disk includes its partitions; "
		       "empty: all"),
	NT_KEY_FLOAT(struct io_cfg, slow_threshold_ms, 50.0, 0, 3600000,
		     "requests whose queue + service time reach this become "
		     "io.slow events (0: every request)"),
	NT_KEY_BOOL(struct io_cfg, slow_events, true, "publish io.slow events"),
	NT_KEY_BOOL(struct io_cfg, request_events, false,
		    "publish an io.request event for every request issued "
		    "(audits and debugging; costly on busy disks)"),
	NT_KEY_INT(struct io_cfg, small_bytes, 4096, 1, 1073741824,
		   "requests smaller than this count as small "
		   "(ntcore_io_small_requests_total)"),
	NT_KEY_BOOL(struct io_cfg, per_process, true,
		    "export ntcore_io_process_* series (pid, comm labels)"),
	NT_KEY_INT(struct io_cfg, interval_ms, 1000, 100, 3600000,
		   "how often BPF counters are copied into the metrics"),
	NT_KEY_INT(struct io_cfg, report_interval_s, 10, 0, 86400,
		   "publish io.report this often (0: only at exit)"),
	NT_KEY_INT(struct io_cfg, top_n, 10, 0, 1000,
		   "rows of the process and slowest-request tables in io.report"),
};

/* Stop producing (ABI 1.6): the skeleton's links go, all at once; the ring
 * and maps stay for the core's last read. */
static void io_quiesce(void *state)
{
	struct io_state *st = state;
	struct nt_linkset ls = {0};

	if (st->skel)
		nt_linkset_take_skeleton(&ls, st->skel->skeleton);
	nt_linkset_release(&ls);
}

static void io_fini(void *state);

static int register_all(struct io_state *st)
{
	const struct nt_host *host = st->host;

	st->ev_slow = host->register_schema(st->inst, &io_schema_slow);
	st->ev_report = host->register_schema(st->inst, &io_schema_report);
	st->ev_request = host->register_schema(st->inst, &io_schema_request);
	if (st->ev_slow < 0 || st->ev_report < 0 || st->ev_request < 0) {
		nt_log_err(st, "cannot register the io.* schemas");
		return -EEXIST;
	}
	for (int i = 0; i < IO_M_COUNT; i++) {
		if (!st->cfg->per_process && i >= IO_M_P_REQS &&
		    i <= IO_M_P_SERVICE)
			continue;
		st->m[i] = host->metric_register(st->inst, &io_metrics[i]);
		if (!st->m[i]) {
			nt_log_err(st, "cannot register metric %s",
				   io_metrics[i].name);
			return -EINVAL;
		}
	}
	return 0;
}

/* The tables of the state; -ENOMEM when one cannot be set up. */
static int tables_init(struct io_state *st)
{
	if (nt_hmap_init(&st->names, sizeof(uint32_t), IO_DEV_NAME_LEN, 0) ||
	    nt_hmap_init(&st->retired, sizeof(struct io_devop),
			 sizeof(struct io_stats), 0) ||
	    nt_hmap_init(&st->dead, sizeof(uint32_t), sizeof(uint64_t), 0) ||
	    nt_topn_init(&st->slow, (size_t)st->cfg->top_n,
			 sizeof(struct io_slowest)))
		return -ENOMEM;
	return 0;
}

static int io_init(struct nt_instance *inst, const struct nt_host *host,
		   const void *config, void **state)
{
	const struct io_cfg *cfg = config;
	struct io_state *st;
	int err;

	if (cfg->devices.n > IO_MAX_DEVICES)
		return host->config_error(inst, "devices",
					  "at most %d devices (got %u)",
					  IO_MAX_DEVICES, cfg->devices.n);
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->inst = inst;
	st->host = host;
	st->cfg = cfg;
	st->sysfs = IO_SYSFS;
	err = tables_init(st);
	if (!err)
		err = io_devices_setup(st);
	if (!err)
		err = register_all(st);
	if (err) {
		io_fini(st);
		return err;
	}
	*state = st;
	return 0;
}

/* Drops, a full statistics table and untimed requests, then the series;
 * with `final`, processes are not retired (their last values stay). */
static void io_tick(struct io_state *st, bool final)
{
	uint64_t now = nt_clock_mono_ns() / NT_NS_PER_MS, full;
	struct io_rows rows = {0};
	bool report = final || (st->cfg->report_interval_s &&
				now - st->last_report_ms >=
					(uint64_t)st->cfg->report_interval_s * 1000);

	nt_bpf_report_drops(st->host, st->inst,
			    bpf_map__fd(st->skel->maps.nt_drops),
			    &st->drops_reported);
	full = nt_bpf_percpu_sum(bpf_map__fd(st->skel->maps.stats_full));
	if (full > st->full_reported) {
		st->host->count_drop(st->inst, "map_full", full - st->full_reported);
		if (!st->full_reported)
			nt_log_warn(st, "statistics table full: some requests "
					"are not counted");
		st->full_reported = full;
	}
	st->host->metric_set(st->m[IO_M_UNSEEN], NULL,
			     (double)nt_bpf_percpu_sum(bpf_map__fd(st->skel->maps.unseen)));
	io_collect_slowest(st);
	io_collect(st, !final, report ? &rows : NULL);
	if (report) {
		st->last_report_ms = now;
		io_publish_report(st, &rows);
	}
	io_rows_free(&rows);
}

static int io_poll(void *state, uint32_t token, uint32_t budget)
{
	struct io_state *st = state;
	int n;

	(void)budget; /* libbpf 1.1 has no bounded consume */
	if (!st->rb)
		return 0;
	if (token == IO_TOK_RING) {
		n = nt_ring_consume(st->rb);
		return n < 0 ? 0 : n;
	}
	if (token == IO_TOK_TIMER) {
		nt_ring_consume(st->rb);
		io_tick(st, false);
	}
	return 0;
}

static void io_final(struct io_state *st)
{
	if (st->final_done || !st->skel || !st->rb)
		return;
	st->final_done = true;
	nt_ring_consume(st->rb);
	io_tick(st, true);
}

static void io_flush(void *state)
{
	io_final(state);
}

void io_detach(void *state)
{
	struct io_state *st = state;

	io_final(st);
	nt_ring_free(st->rb);
	st->rb = NULL;
	io_bpf__destroy(st->skel);
	st->skel = NULL;
}

static void io_fini(void *state)
{
	struct io_state *st = state;

	if (!st)
		return;
	if (st->skel)
		io_detach(st);
	nt_topn_fini(&st->slow);
	nt_hmap_fini(&st->names);
	nt_hmap_fini(&st->retired);
	nt_hmap_fini(&st->dead);
	free(st);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "io",
	.kind = NT_KIND_PROBE,
	.description = "block I/O per device and process: bytes, requests, "
		       "queue and service latency, sizes, slowest requests",
	.version = "0.1.0",
	.config = io_cfg_keys,
	.n_config = NT_ARRAY_LEN(io_cfg_keys),
	.config_size = sizeof(struct io_cfg),
	.init = io_init,
	.attach = io_attach,
	.poll = io_poll,
	.detach = io_detach,
	.quiesce = io_quiesce,
	.fini = io_fini,
	.flush = io_flush,
};
