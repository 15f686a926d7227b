/* SPDX-License-Identifier: MIT */
/*
 * nvlink: the metric families of the plugin, registered once in init and
 * updated from the loop (NCCL, kernel events, per-process GPU use) and
 * from the NVML worker thread (device readings; the host's metric_*
 * functions are thread-safe). Names follow ntcore_nvlink_<what>_<unit>;
 * device series carry `gpu` (NVML index) and `uuid`, as dcgm-exporter's
 * do, so the two join.
 */
#ifndef NVLINK_METRICS_H
#define NVLINK_METRICS_H

#include "ntcore/plugin.h"

enum nvl_metric {
	/* NVML, per device: {gpu, uuid} unless noted */
	NVM_INFO,        /* {gpu, uuid, pci_bus_id, name} = 1 */
	NVM_UTIL,
	NVM_MEMUTIL,
	NVM_MEM_USED,
	NVM_MEM_TOTAL,
	NVM_MEM_RESERVED,
	NVM_POWER,
	NVM_ENERGY,
	NVM_TEMP,
	NVM_SM_CLOCK,
	NVM_MEM_CLOCK,
	NVM_REASON,      /* {gpu, uuid, reason} */
	NVM_PCIE_TX_RATE,
	NVM_PCIE_RX_RATE,
	NVM_PCIE_TX_BYTES,
	NVM_PCIE_RX_BYTES,
	NVM_PCIE_REPLAYS,
	NVM_LINK_UP,     /* {gpu, uuid, link} */
	NVM_LINK_TX,
	NVM_LINK_RX,
	NVM_LINK_ERRORS, /* {gpu, uuid, link, kind} */
	NVM_ECC,         /* {gpu, uuid, kind} */
	NVM_XID,         /* {gpu, uuid, xid, source} */
	NVM_PROC_MEM,    /* {gpu, uuid, pid, comm} */
	NVM_PROC_SM,
	NVM_PROC_MEMUTIL,
	NVM_UNSUPPORTED, /* {gpu, uuid, query} */
	NVM_POLL,        /* histogram, no labels */
	/* NCCL: {pid, comm, rank, nranks, call} */
	NVM_NCCL_CALLS,
	NVM_NCCL_BYTES,
	NVM_NCCL_SECONDS,
	NVM_NCCL_ERRORS, /* {pid, comm, call, result} */
	NVM_NCCL_ALGBW,  /* {pid, comm, rank, call} */
	NVM_NCCL_BUSBW,
	NVM_NCCL_HANGS,  /* no labels */
	/* dma_fence */
	NVM_FENCE_EVENTS, /* {event} */
	NVM_FENCE_SIGNAL, /* histogram {driver} */
	NVM_FENCE_WAIT,   /* histogram {driver} */
	NVM_N
};

struct nvl_metrics {
	struct nt_metric *m[NVM_N];
};

/* Register every family (init only); max_series bounds each. */
int nvl_metrics_register(struct nvl_metrics *nm, struct nt_instance *inst,
			 const struct nt_host *host, uint32_t max_series,
			 struct nt_metric_desc descs[NVM_N]);

#endif /* NVLINK_METRICS_H */
