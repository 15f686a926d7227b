/* SPDX-License-Identifier: MIT */
/* nvlink: metric family descriptions (see nvl_metrics.h). */
#include "nvl_metrics.h"

#include <errno.h>

#include "ntcore/kit/log.h"

static const char *const l_dev[] = { "gpu", "uuid" };
static const char *const l_info[] = { "gpu", "uuid", "pci_bus_id", "name" };
static const char *const l_reason[] = { "gpu", "uuid", "reason" };
static const char *const l_link[] = { "gpu", "uuid", "link" };
static const char *const l_linkerr[] = { "gpu", "uuid", "link", "kind" };
static const char *const l_ecc[] = { "gpu", "uuid", "kind" };
static const char *const l_xid[] = { "gpu", "uuid", "xid", "source" };
static const char *const l_proc[] = { "gpu", "uuid", "pid", "comm" };
static const char *const l_unsup[] = { "gpu", "uuid", "query" };
static const char *const l_nccl[] = { "pid", "comm", "rank", "nranks", "call" };
static const char *const l_nerr[] = { "pid", "comm", "call", "result" };
static const char *const l_nbw[] = { "pid", "comm", "rank", "call" };
static const char *const l_fence[] = { "event" };
static const char *const l_driver[] = { "driver" };

static const double poll_buckets[] = { 0.0005, 0.001, 0.002, 0.005, 0.01,
				       0.02, 0.05, 0.1, 0.2, 0.5, 1 };
static const double fence_buckets[] = { 1e-5, 1e-4, 5e-4, 1e-3, 5e-3,
					1e-2, 5e-2, 0.1, 0.5, 1 };

#define G(n, h, l) { n, h, NT_METRIC_GAUGE, NT_ARRAY_LEN(l), l, NULL, 0, 0 }
#define C(n, h, l) { n, h, NT_METRIC_COUNTER, NT_ARRAY_LEN(l), l, NULL, 0, 0 }
#define H(n, h, l, b) \
	{ n, h, NT_METRIC_HISTOGRAM, NT_ARRAY_LEN(l), l, b, NT_ARRAY_LEN(b), 0 }

static const struct nt_metric_desc tmpl[NVM_N] = {
	[NVM_INFO] = G("ntcore_nvlink_gpu_info", "one series per GPU NVML sees (value 1)", l_info),
	[NVM_UTIL] = G("ntcore_nvlink_gpu_utilization_ratio", "time a kernel ran on the GPU over NVML's last sample period (0-1)", l_dev),
	[NVM_MEMUTIL] = G("ntcore_nvlink_memory_utilization_ratio", "time device memory was read or written over NVML's last sample period (0-1)", l_dev),
	[NVM_MEM_USED] = G("ntcore_nvlink_memory_used_bytes", "device memory in use (as nvidia-smi counts it: without the reserved part)", l_dev),
	[NVM_MEM_TOTAL] = G("ntcore_nvlink_memory_total_bytes", "device memory in all", l_dev),
	[NVM_MEM_RESERVED] = G("ntcore_nvlink_memory_reserved_bytes", "device memory the driver reserves (not in used)", l_dev),
	[NVM_POWER] = G("ntcore_nvlink_power_watts", "power draw", l_dev),
	[NVM_ENERGY] = C("ntcore_nvlink_energy_joules_total", "energy used since the driver loaded", l_dev),
	[NVM_TEMP] = G("ntcore_nvlink_temperature_celsius", "GPU die temperature", l_dev),
	[NVM_SM_CLOCK] = G("ntcore_nvlink_sm_clock_hertz", "SM clock", l_dev),
	[NVM_MEM_CLOCK] = G("ntcore_nvlink_memory_clock_hertz", "memory clock", l_dev),
	[NVM_REASON] = G("ntcore_nvlink_clock_event_reason", "1 while this reason holds the clocks down (idle, power cap, thermal, ...)", l_reason),
	[NVM_PCIE_TX_RATE] = G("ntcore_nvlink_pcie_tx_bytes_per_second", "PCIe transmit throughput (NVML, 1 KB granularity)", l_dev),
	[NVM_PCIE_RX_RATE] = G("ntcore_nvlink_pcie_rx_bytes_per_second", "PCIe receive throughput (NVML, 1 KB granularity)", l_dev),
	[NVM_PCIE_TX_BYTES] = C("ntcore_nvlink_pcie_tx_bytes_total", "PCIe bytes transmitted since the driver loaded", l_dev),
	[NVM_PCIE_RX_BYTES] = C("ntcore_nvlink_pcie_rx_bytes_total", "PCIe bytes received since the driver loaded", l_dev),
	[NVM_PCIE_REPLAYS] = C("ntcore_nvlink_pcie_replays_total", "PCIe replays (link-level retransmissions)", l_dev),
	[NVM_LINK_UP] = G("ntcore_nvlink_link_up", "1 when the NVLink link is active", l_link),
	[NVM_LINK_TX] = C("ntcore_nvlink_link_tx_bytes_total", "NVLink data bytes transmitted (1 KiB granularity)", l_link),
	[NVM_LINK_RX] = C("ntcore_nvlink_link_rx_bytes_total", "NVLink data bytes received (1 KiB granularity)", l_link),
	[NVM_LINK_ERRORS] = C("ntcore_nvlink_link_errors_total", "NVLink data-link errors: replay, recovery, crc", l_linkerr),
	[NVM_ECC] = C("ntcore_nvlink_ecc_errors_total", "ECC errors since the driver loaded (volatile): corrected, uncorrected", l_ecc),
	[NVM_XID] = C("ntcore_nvlink_xid_errors_total", "XID errors seen (source: nvml events or the nvidia tracepoint)", l_xid),
	[NVM_PROC_MEM] = G("ntcore_nvlink_process_memory_bytes", "device memory a process uses", l_proc),
	[NVM_PROC_SM] = G("ntcore_nvlink_process_sm_utilization_ratio", "SM utilisation of a process, mean of NVML's samples of the interval (0-1)", l_proc),
	[NVM_PROC_MEMUTIL] = G("ntcore_nvlink_process_memory_utilization_ratio", "memory utilisation of a process, mean of NVML's samples of the interval (0-1)", l_proc),
	[NVM_UNSUPPORTED] = G("ntcore_nvlink_nvml_unsupported", "1 for each reading NVML does not support on this GPU (its series are left out)", l_unsup),
	[NVM_POLL] = { "ntcore_nvlink_nvml_poll_seconds", "time one NVML poll of every GPU took (worker thread)", NT_METRIC_HISTOGRAM, 0, NULL, poll_buckets, NT_ARRAY_LEN(poll_buckets), 0 },
	[NVM_NCCL_CALLS] = C("ntcore_nvlink_nccl_calls_total", "NCCL calls that returned", l_nccl),
	[NVM_NCCL_BYTES] = C("ntcore_nvlink_nccl_bytes_total", "element count x datatype size of the NCCL calls", l_nccl),
	[NVM_NCCL_SECONDS] = C("ntcore_nvlink_nccl_seconds_total", "host time inside NCCL calls (entry to return)", l_nccl),
	[NVM_NCCL_ERRORS] = C("ntcore_nvlink_nccl_errors_total", "NCCL calls that returned an error", l_nerr),
	[NVM_NCCL_ALGBW] = G("ntcore_nvlink_nccl_algbw_bytes_per_second", "algorithm bandwidth of the interval's calls: nccl-tests' size over host time", l_nbw),
	[NVM_NCCL_BUSBW] = G("ntcore_nvlink_nccl_busbw_bytes_per_second", "bus bandwidth of the interval's calls (algbw x nccl-tests' factor)", l_nbw),
	[NVM_NCCL_HANGS] = { "ntcore_nvlink_nccl_hang_alerts_total", "alert.nccl_hang published", NT_METRIC_COUNTER, 0, NULL, NULL, 0, 0 },
	[NVM_FENCE_EVENTS] = C("ntcore_nvlink_dma_fence_events_total", "dma_fence tracepoint hits: emit, signaled, wait_start, wait_end", l_fence),
	[NVM_FENCE_SIGNAL] = H("ntcore_nvlink_dma_fence_signal_seconds", "dma_fence emit to signaled", l_driver, fence_buckets),
	[NVM_FENCE_WAIT] = H("ntcore_nvlink_dma_fence_wait_seconds", "time a traced thread waited on a dma_fence", l_driver, fence_buckets),
};

int nvl_metrics_register(struct nvl_metrics *nm, struct nt_instance *inst,
			 const struct nt_host *host, uint32_t max_series,
			 struct nt_metric_desc descs[NVM_N])
{
	for (int i = 0; i < NVM_N; i++) {
		descs[i] = tmpl[i];
		descs[i].max_series = max_series;
		nm->m[i] = host->metric_register(inst, &descs[i]);
		if (!nm->m[i]) {
			nt_kit_log(host, inst, NT_LOG_ERROR, "cannot register %s",
				   descs[i].name);
			return -EINVAL;
		}
	}
	return 0;
}
