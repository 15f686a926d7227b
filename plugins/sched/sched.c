/* SPDX-License-Identifier: MIT */
/*
 * sched probe, user side: the descriptor, the config keys and the ops
 * (init, attach in sched_attach.c, poll, flush, quiesce, detach, fini).
 * It loads sched.bpf.c (tp_btf, or raw_tp where BTF tracepoints do not
 * work), reads the per-thread and run-queue maps on a timer, and publishes
 *   - metrics: on/off-CPU and run-queue wait seconds per thread, context
 *     switches and migrations per process, a run-queue latency histogram;
 *   - sched.thread events: per-thread deltas on each interval and at exit;
 *   - sched.report: the top-threads table for the stdout summary;
 *   - sched.switch (switch_events = true, debugging): one per switch.
 * See docs/sched.md; sched_priv.h lists the other files.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/log.h"
#include "ntcore/plugin.h"

#include "sched_priv.h"
#include "ntcore/kit/cfg.h"
#include "ntcore/kit/links.h"
#include "sched.bpf.skel.h"

static const char *const attach_choices[] = { "auto", "tp_btf", "raw_tp", NULL };
static const char *const hist_choices[] = { "process", "global", NULL };

#define CFG struct sched_cfg

static const struct nt_cfg_key sched_config[] = {
	NT_KEY_INT(CFG, interval_ms, 1000, 100, 3600000,
		   "how often the maps are read: metrics and sched.thread events (ms)"),
	NT_KEY_INT(CFG, report_interval_s, 10, 0, 86400,
		   "how often sched.report is published (s); 0 = only at the end"),
	NT_KEY_BOOL(CFG, thread_events, true,
		    "publish sched.thread events (per interval and at thread exit)"),
	NT_KEY_BOOL(CFG, switch_events, false,
		    "publish one sched.switch event per context switch (debugging; costly)"),
	NT_KEY_INT(CFG, top_n, 10, 1, 1000, "threads listed in sched.report"),
	NT_KEY_INT(CFG, max_threads, 16384, 64, 4194304,
		   "threads tracked at once in BPF (further ones are counted as drops)"),
	NT_KEY_INT(CFG, max_processes, 1024, 1, 65536,
		   "per-process run-queue histograms in BPF (further ones go to pid=\"other\")"),
	NT_KEY_INT(CFG, max_series, 4096, 16, 1000000,
		   "label sets kept per metric family (cardinality bound)"),
	NT_KEY_INT(CFG, ringbuf_kb, 256, 4, 1048576,
		   "BPF ring buffer size in KiB (a power of two)"),
	NT_KEY_INT(CFG, exited_keep_ms, 60000, 0, 86400000,
		   "keep the metric series of an exited thread or process this long (ms; at least 2 intervals) so every exporter sees its last value"),
	NT_KEY_CHOICE(CFG, attach, "auto", attach_choices,
		      "tracepoint flavour: auto (tp_btf when it works), tp_btf, raw_tp"),
	NT_KEY_CHOICE(CFG, runq_hist, "process", hist_choices,
		      "run-queue latency histogram per process (pid label) or one global (pid=\"all\")"),
};

static int sched_init(struct nt_instance *inst, const struct nt_host *host,
		      const void *config, void **state)
{
	const struct sched_cfg *c = config;
	struct sched_state *st;
	int64_t kb = c->ringbuf_kb;
	int err;

	if (kb & (kb - 1))
		return host->config_error(inst, "ringbuf_kb",
					  "%" PRId64 " is not a power of two", kb);
	if (c->report_interval_s && c->report_interval_s * 1000 < c->interval_ms)
		return host->config_error(inst, "report_interval_s",
					  "must be 0 or at least interval_ms (%" PRId64 ")",
					  c->interval_ms);
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->inst = inst;
	st->host = host;
	st->cfg = c;
	st->batch_ok = true;
	st->keys = calloc(BATCH, sizeof(*st->keys));
	st->vals = calloc(BATCH, sizeof(*st->vals));
	st->exited_top = calloc((size_t)c->top_n, sizeof(*st->exited_top));
	if (!st->keys || !st->vals || !st->exited_top ||
	    sched_map_init(&st->threads, 256) || sched_map_init(&st->procs, 64))
		err = -ENOMEM;
	else
		err = sched_register(st);
	if (!err) {
		*state = st;
		return 0;
	}
	sched_map_fini(&st->threads, NULL);
	sched_map_fini(&st->procs, NULL);
	free(st->keys);
	free(st->vals);
	free(st->exited_top);
	free(st);
	return err;
}

static int sched_poll(void *state, uint32_t token, uint32_t budget)
{
	struct sched_state *st = state;

	switch (token) {
	case TOK_RING:
		return sched_ring_drain(st, budget);
	case TOK_TICK:
		sched_snapshot(st, false);
		return 0;
	case TOK_REPORT:
		sched_publish_report(st);
		return 0;
	default:
		return 0;
	}
}

static void sched_flush(void *state)
{
	struct sched_state *st = state;

	if (!st->skel)
		return;
	sched_snapshot(st, true);
	sched_publish_report(st);
}

/* Stop producing (ABI 1.6): the links go, all at once (kit/links.h); the
 * ring stays for the core's last read. */
static void sched_quiesce(void *state)
{
	struct sched_state *st = state;

	nt_links_release_parallel(st->links, NPROG, NULL, 0);
	memset(st->links, 0, sizeof(st->links));
}

static void sched_fini(void *state)
{
	struct sched_state *st = state;

	if (!st)
		return;
	sched_map_fini(&st->threads, free);
	sched_map_fini(&st->procs, free);
	free(st->keys);
	free(st->vals);
	free(st->exited_top);
	free(st->scratch);
	free(st);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "sched",
	.kind = NT_KIND_PROBE,
	.description = "scheduler: per-thread on/off-CPU time, run-queue latency, context switches, migrations (tracepoints)",
	.version = "0.1.0",
	.config = sched_config,
	.n_config = NT_ARRAY_LEN(sched_config),
	.config_size = sizeof(struct sched_cfg),
	.init = sched_init,
	.attach = sched_attach,
	.poll = sched_poll,
	.detach = sched_detach,
	.quiesce = sched_quiesce,
	.fini = sched_fini,
	.flush = sched_flush,
};
