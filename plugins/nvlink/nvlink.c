/* SPDX-License-Identifier: MIT */
/*
 * nvlink probe: GPU telemetry from NVML, NCCL collectives through uprobes,
 * and the kernel's dma_fence and NVIDIA XID tracepoints. This file holds
 * the config schema, the descriptor and the ops; see nvl.h for the map of
 * the other files and docs/nvlink.md for what it publishes and costs.
 *
 * The three sources fail independently: no NVML library (no NVIDIA
 * driver) is one line in the log and the rest runs; no BPF (no privilege)
 * leaves NVML running.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/links.h"
#include "ntcore/kit/cfg.h"
#include "ntcore/kit/log.h"
#include "nvl.h"
#include "nvlink.h"
#include "nvlink.bpf.skel.h"

enum { TOK_RING = 1, TOK_TICK = 2, TOK_NVML = 3 };

#define S struct nvl_cfg
static const struct nt_cfg_key nvl_config[] = {
	NT_KEY_INT(S, interval_ms, 1000, 50, 3600000,
		   "NVML poll interval; also NCCL bandwidth gauges and hang checks (ms)"),
	NT_KEY_BOOL(S, nvml, true, "poll GPUs through NVML"),
	NT_KEY_STR(S, nvml_library, "libnvidia-ml.so.1",
		   "NVML library (file name searched like dlopen, or a path)"),
	NT_KEY_BOOL(S, processes, true,
		    "per-process GPU memory and utilisation (targets only with -p or -- CMD)"),
	NT_KEY_BOOL(S, xid_events, true, "XID errors through NVML's event API (alert.gpu_xid)"),
	NT_KEY_BOOL(S, nccl, true, "probe NCCL calls (uprobes on libnccl)"),
	NT_KEY_STRLIST(S, libraries, "[]",
		       "extra libnccl files or globs to probe from the start"),
	NT_KEY_BOOL(S, stop_on_load, true,
		    "hold a target that opens a libnccl while the probes attach"),
	NT_KEY_BOOL(S, collective_events, true,
		    "one nccl.collective event per call (metrics are kept either way)"),
	NT_KEY_INT(S, hang_timeout_ms, 30000, 0, 86400000,
		   "report a rank that has not joined a collective, or a call inside NCCL, after this long (0: off)"),
	NT_KEY_BOOL(S, dma_fence, true, "dma_fence tracepoints, where the kernel has them"),
	NT_KEY_INT(S, fence_wait_threshold_us, 1000, 0, 3600000000,
		   "a dma_fence wait at least this long is published as dma_fence.wait (us)"),
	NT_KEY_BOOL(S, xid_tracepoint, true,
		    "the nvidia:nvidia_dev_xid tracepoint, where the NVIDIA module has it"),
	NT_KEY_INT(S, ringbuf_kb, 1024, 4, 1048576,
		   "BPF ring buffer size in KiB (a power of two; 128 bytes per NCCL call; mapped into ntcore: it counts in its RSS)"),
	NT_KEY_INT(S, max_series, 10000, 16, 1000000, "label sets kept per metric family"),
};
#undef S

static int nvl_init(struct nt_instance *inst, const struct nt_host *host,
		    const void *config, void **state)
{
	const struct nvl_cfg *cfg = config;
	struct nvl *s;
	int kb = (int)cfg->ringbuf_kb;

	if (kb & (kb - 1))
		return host->config_error(inst, "ringbuf_kb", "must be a power of two");
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->inst = inst;
	s->host = host;
	s->cfg = cfg;
	for (int i = 0; i < NVL_EV_N; i++) {
		s->types[i] = host->register_schema(inst, &nvl_schemas[i]);
		if (s->types[i] < 0) {
			int err = s->types[i];

			nt_log_err(s, "cannot register %s", nvl_schemas[i].name);
			free(s);
			return err;
		}
	}
	if (nvl_metrics_register(&s->nm, inst, host, (uint32_t)cfg->max_series,
				 s->mdesc) < 0 ||
	    host->subscribe(inst, "proc.exit") < 0) {
		free(s);
		return -EINVAL;
	}
	*state = s;
	return 0;
}

static int nvml_attach(struct nvl *s)
{
	char err[512];
	int r;

	s->nvml = calloc(1, sizeof(*s->nvml));
	s->box = calloc(1, sizeof(*s->box));
	if (!s->nvml || !s->box)
		return -ENOMEM;
	s->nvml->inst = s->inst;
	s->nvml->host = s->host;
	s->nvml->nm = &s->nm;
	s->nvml->interval_ns = (uint64_t)s->cfg->interval_ms * 1000000ull;
	s->nvml->procs_on = s->cfg->processes;
	s->nvml->xids_on = s->cfg->xid_events;
	r = nvml_poller_start(s->nvml, s->cfg->nvml_library, err, sizeof(err));
	if (r == -ENOENT) {
		nt_log_warn(s, "NVML not available (%s): no GPU metrics; NCCL and kernel events go on", err);
	} else if (r < 0) {
		nt_log_warn(s, "NVML: %s", err);
	} else if ((r = s->host->watch_fd(s->inst, s->nvml->efd, TOK_NVML)) < 0) {
		nvml_poller_stop(s->nvml);
	}
	if (r < 0) {
		free(s->nvml);
		free(s->box);
		s->nvml = NULL;
		s->box = NULL;
	}
	return r;
}

static void set_multi(struct nvlink_bpf *k, bool on)
{
	if (!on)
		return;
	bpf_program__set_expected_attach_type(
		k->progs.nccl_enter, (enum bpf_attach_type)NT_BPF_TRACE_UPROBE_MULTI);
	bpf_program__set_expected_attach_type(
		k->progs.nccl_return, (enum bpf_attach_type)NT_BPF_TRACE_UPROBE_MULTI);
}

/* Open and load the BPF object: uprobe_multi links first (6.6+), then
 * perf-event uprobes. */
static int bpf_open_load(struct nvl *s)
{
	int err = -EINVAL;

	for (int attempt = 0; attempt < 2; attempt++) {
		struct nvlink_bpf *k = nvlink_bpf__open();

		if (!k)
			return -errno;
		s->skel = k;
		s->multi = attempt == 0;
		set_multi(k, s->multi);
		bpf_map__set_max_entries(k->maps.events, (uint32_t)s->cfg->ringbuf_kb * 1024);
		k->rodata->wakeup_bytes = (uint64_t)s->cfg->ringbuf_kb * 1024 / 8;
		err = nt_bpf_use_targets(s->host, s->inst, k->maps.nt_targets,
					 &k->rodata->nt_filter_on);
		if (err)
			return err;
		nvl_nccl_set_prefixes(s);
		bpf_program__set_autoload(k->progs.on_exec, false);
		if (!s->cfg->nccl) {
			bpf_program__set_autoload(k->progs.on_openat_exit, false);
		}
		nvl_kernel_autoload(s);
		err = nvlink_bpf__load(k);
		if (!err)
			return 0;
		nvlink_bpf__destroy(k);
		s->skel = NULL;
	}
	return err;
}

static int on_record(void *ctx, void *data, size_t size)
{
	struct nvl *s = ctx;
	const struct nt_event_hdr *h = data;

	if (size < sizeof(*h))
		return 0;
	switch (h->type) {
	case NVL_RAW_CALL:
		nvl_nccl_record(s, data, size);
		break;
	case NVL_RAW_OPEN:
	case NVL_RAW_EXEC:
		nvl_nccl_on_path(s, data, size);
		break;
	default:
		nvl_kernel_record(s, data, size);
	}
	return 0;
}

static int bpf_attach(struct nvl *s)
{
	int err = bpf_open_load(s);

	if (err) {
		nt_log_warn(s, "cannot load the BPF programs: %s (run as root, or with CAP_BPF and CAP_PERFMON); NCCL and kernel events off",
			     strerror(-err));
		return err;
	}
	if (s->cfg->nccl) {
		s->tp[s->ntp++] = bpf_program__attach(s->skel->progs.on_openat_exit);
		if (!s->tp[0])
			nt_log_warn(s, "library discovery not attached: a libnccl loaded later is missed");
	}
	nvl_kernel_attach(s);
	err = nt_ring_open(s->host, s->inst, s->skel->maps.events, on_record, s,
			   TOK_RING, &s->rb);
	if (err)
		return err;
	if (s->cfg->nccl)
		nvl_nccl_discover(s);
	return 0;
}

static void nvl_detach(void *state);

static int nvl_attach(void *state)
{
	struct nvl *s = state;
	int nvml = -1, bpf = -1, err;

	if (s->cfg->nvml)
		nvml = nvml_attach(s);
	if (s->cfg->nccl || s->cfg->dma_fence || s->cfg->xid_tracepoint)
		bpf = bpf_attach(s);
	if (nvml < 0 && bpf < 0) {
		nvl_detach(s);
		return bpf != -1 ? bpf : -ENODEV;
	}
	err = s->host->add_timer(s->inst, (uint64_t)s->cfg->interval_ms, TOK_TICK);
	if (err < 0) {
		nvl_detach(s);
		return err;
	}
	return 0;
}

static int nvl_poll(void *state, uint32_t token, uint32_t budget)
{
	struct nvl *s = state;
	int n = 0;

	(void)budget;
	if (token == TOK_RING && s->rb) {
		n = nt_ring_consume(s->rb);
	} else if (token == TOK_NVML && s->nvml) {
		nvl_nvml_drain(s);
	} else if (token == TOK_TICK) {
		if (s->rb)
			nt_ring_consume(s->rb);
		nvl_nccl_tick(s);
		nvl_kernel_tick(s);
		if (s->skel)
			nt_bpf_report_drops(s->host, s->inst,
					    bpf_map__fd(s->skel->maps.nt_drops),
					    &s->drops_reported);
	}
	return n;
}

static void nvl_consume(void *state, const struct nt_event_hdr *ev,
			const struct nt_schema *schema)
{
	struct nvl *s = state;

	if (!schema || strcmp(schema->name, "proc.exit"))
		return;
	/* its last NCCL records may still wait in our ring: read them first */
	if (s->rb)
		nt_ring_consume(s->rb);
	nvl_nccl_forget_pid(s, ev->pid);
}

static void nvl_flush(void *state)
{
	struct nvl *s = state;

	if (s->rb)
		nt_ring_consume(s->rb);
	nvl_nccl_tick(s);
	nvl_kernel_tick(s);
	if (s->nvml)
		nvl_nvml_drain(s);
}

static void nvl_detach(void *state)
{
	struct nvl *s = state;

	if (s->nvml) {
		nvml_poller_stop(s->nvml);
		free(s->nvml);
		free(s->box);
		s->nvml = NULL;
		s->box = NULL;
	}
	if (s->rb)
		nt_ring_consume(s->rb);
	nvl_nccl_release(s);
	for (size_t i = 0; i < s->ntp; i++)
		bpf_link__destroy(s->tp[i]);
	s->ntp = 0;
	nt_ring_free(s->rb);
	s->rb = NULL;
	nvlink_bpf__destroy(s->skel);
	s->skel = NULL;
	nvl_comms_free(&s->comms);
}

/* Stop producing (ABI 1.6): the NCCL uprobes and the kernel tracepoints
 * go, all at once; the ring stays for the core's last read (NVML is polled,
 * not probed: it stops at detach). */
static void nvl_quiesce(void *state)
{
	struct nvl *s = state;
	struct nt_linkset ls = {0};

	for (size_t i = 0; i < s->nlibs; i++)
		nt_uprobes_move(&s->libs[i].up, &ls);
	for (size_t i = 0; i < s->ntp; i++) {
		nt_linkset_add(&ls, s->tp[i]);
		s->tp[i] = NULL;
	}
	nt_linkset_release(&ls);
}

static void nvl_fini(void *state)
{
	struct nvl *s = state;

	if (!s)
		return;
	nvl_detach(s);
	free(s);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "nvlink",
	.kind = NT_KIND_PROBE,
	.n_config = NT_ARRAY_LEN(nvl_config),
	.description = "GPU telemetry (NVML), NCCL collectives (uprobes), NVLink/PCIe traffic, XIDs, dma_fence",
	.version = "0.1.0",
	.config = nvl_config,
	.config_size = sizeof(struct nvl_cfg),
	.init = nvl_init,
	.attach = nvl_attach,
	.poll = nvl_poll,
	.detach = nvl_detach,
	.quiesce = nvl_quiesce,
	.fini = nvl_fini,
	.consume = nvl_consume,
	.flush = nvl_flush,
};
