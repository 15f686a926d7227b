/* SPDX-License-Identifier: MIT */
/*
 * nvlink: one NVML poll of one GPU, on the worker thread: each reading is
 * asked, checked and written to its metric; unsupported readings are
 * remembered and skipped from then on (see nvml_poll.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "nvml_poll.h"

static const char *const query_names[NQ_N] = {
	[NQ_UTIL] = "utilization",     [NQ_MEMORY] = "memory",
	[NQ_POWER] = "power",          [NQ_ENERGY] = "energy",
	[NQ_TEMP] = "temperature",     [NQ_SM_CLOCK] = "sm_clock",
	[NQ_MEM_CLOCK] = "memory_clock", [NQ_REASONS] = "clock_event_reasons",
	[NQ_PCIE_RATE] = "pcie_throughput", [NQ_PCIE_BYTES] = "pcie_bytes",
	[NQ_PCIE_REPLAY] = "pcie_replay", [NQ_NVLINK_STATE] = "nvlink_state",
	[NQ_NVLINK_FIELDS] = "nvlink_fields", [NQ_ECC] = "ecc",
	[NQ_PROCS] = "processes",      [NQ_PROC_UTIL] = "process_utilization",
};

const char *nvml_query_name(int q)
{
	return q >= 0 && q < NQ_N ? query_names[q] : "?";
}

/* Mark a query unsupported on a device: once counted, noted, skipped. */
void nvml_unsupported(struct nvml_poller *p, struct nvml_dev *d, int q)
{
	const char *lv[3] = { d->index_s, d->uuid, nvml_query_name(q) };

	if (d->unsupported & (1u << q))
		return;
	d->unsupported |= 1u << q;
	p->host->metric_set(p->nm->m[NVM_UNSUPPORTED], lv, 1);
	nvml_note(p, "gpu %u: NVML does not support %s here; its series are left out",
		  d->index, nvml_query_name(q));
}

/* Whether a reading can be used; notes other errors once per query. */
bool nvml_ok(struct nvml_poller *p, struct nvml_dev *d, int q, nvml_return_t r)
{
	char buf[32];

	if (r == NVML_OK) {
		d->failing &= ~(1u << q);
		return true;
	}
	if (r == NVML_ERR_NOT_SUPPORTED || r == NVML_ERR_FUNCTION_NOT_FOUND) {
		nvml_unsupported(p, d, q);
	} else if (!(d->failing & (1u << q))) {
		d->failing |= 1u << q;
		nvml_note(p, "gpu %u: %s: %s", d->index, nvml_query_name(q),
			  nvml_lib_strerror(&p->lib, r, buf, sizeof(buf)));
	}
	return false;
}

bool nvml_want(struct nvml_poller *p, struct nvml_dev *d, int q, bool present)
{
	if (d->unsupported & (1u << q))
		return false;
	if (!present) {
		nvml_unsupported(p, d, q);
		return false;
	}
	return true;
}

static void set_dev(struct nvml_poller *p, struct nvml_dev *d, int m, double v)
{
	const char *lv[2] = { d->index_s, d->uuid };

	p->host->metric_set(p->nm->m[m], lv, v);
}

/* Memory in use as nvidia-smi and dcgm-exporter count it: the v2 call,
 * whose `used` leaves out what the driver reserves; v1 (used includes the
 * reserved part) on drivers without it. */
static void read_memory(struct nvml_poller *p, struct nvml_dev *d)
{
	const struct nvml_lib *l = &p->lib;
	struct nvml_memory_v2 m2;
	struct nvml_memory m1;

	memset(&m2, 0, sizeof(m2));
	m2.version = NVML_MEMORY_V2_VERSION;
	if (l->memory_v2 && l->memory_v2(d->h, &m2) == NVML_OK) {
		set_dev(p, d, NVM_MEM_USED, (double)m2.used);
		set_dev(p, d, NVM_MEM_TOTAL, (double)m2.total);
		set_dev(p, d, NVM_MEM_RESERVED, (double)m2.reserved);
		return;
	}
	if (nvml_want(p, d, NQ_MEMORY, l->memory != NULL) &&
	    nvml_ok(p, d, NQ_MEMORY, l->memory(d->h, &m1))) {
		set_dev(p, d, NVM_MEM_USED, (double)m1.used);
		set_dev(p, d, NVM_MEM_TOTAL, (double)m1.total);
	}
}

static void read_basic(struct nvml_poller *p, struct nvml_dev *d)
{
	const struct nvml_lib *l = &p->lib;
	struct nvml_utilization u;
	unsigned int v;
	unsigned long long e;

	if (nvml_want(p, d, NQ_UTIL, l->utilization != NULL) &&
	    nvml_ok(p, d, NQ_UTIL, l->utilization(d->h, &u))) {
		set_dev(p, d, NVM_UTIL, u.gpu / 100.0);
		set_dev(p, d, NVM_MEMUTIL, u.memory / 100.0);
	}
	read_memory(p, d);
	if (nvml_want(p, d, NQ_POWER, l->power != NULL) && nvml_ok(p, d, NQ_POWER, l->power(d->h, &v)))
		set_dev(p, d, NVM_POWER, v / 1000.0);
	if (nvml_want(p, d, NQ_ENERGY, l->energy != NULL) &&
	    nvml_ok(p, d, NQ_ENERGY, l->energy(d->h, &e)))
		set_dev(p, d, NVM_ENERGY, (double)e / 1000.0);
	if (nvml_want(p, d, NQ_TEMP, l->temperature != NULL) &&
	    nvml_ok(p, d, NQ_TEMP, l->temperature(d->h, NVML_TEMPERATURE_GPU, &v)))
		set_dev(p, d, NVM_TEMP, v);
	if (nvml_want(p, d, NQ_SM_CLOCK, l->clock != NULL) &&
	    nvml_ok(p, d, NQ_SM_CLOCK, l->clock(d->h, NVML_CLOCK_SM, &v)))
		set_dev(p, d, NVM_SM_CLOCK, v * 1e6);
	if (nvml_want(p, d, NQ_MEM_CLOCK, l->clock != NULL) &&
	    nvml_ok(p, d, NQ_MEM_CLOCK, l->clock(d->h, NVML_CLOCK_MEM, &v)))
		set_dev(p, d, NVM_MEM_CLOCK, v * 1e6);
}

static const struct {
	unsigned long long bit;
	const char *name;
} reasons[] = {
	{ NVML_CLOCK_REASON_GPU_IDLE, "gpu_idle" },
	{ NVML_CLOCK_REASON_APP_SETTING, "applications_clocks_setting" },
	{ NVML_CLOCK_REASON_SW_POWER_CAP, "sw_power_cap" },
	{ NVML_CLOCK_REASON_HW_SLOWDOWN, "hw_slowdown" },
	{ NVML_CLOCK_REASON_SYNC_BOOST, "sync_boost" },
	{ NVML_CLOCK_REASON_SW_THERMAL, "sw_thermal_slowdown" },
	{ NVML_CLOCK_REASON_HW_THERMAL, "hw_thermal_slowdown" },
	{ NVML_CLOCK_REASON_HW_POWER_BRAKE, "hw_power_brake_slowdown" },
	{ NVML_CLOCK_REASON_DISPLAY_SETTING, "display_clock_setting" },
};

static void read_reasons(struct nvml_poller *p, struct nvml_dev *d)
{
	/* the R535+ name first, the older one (same bits) otherwise */
	nvml_return_t (*fn)(nvml_device_t, unsigned long long *) =
		p->lib.clock_reasons ? p->lib.clock_reasons
				     : p->lib.throttle_reasons;
	unsigned long long bits;

	if (!nvml_want(p, d, NQ_REASONS, fn != NULL) || !nvml_ok(p, d, NQ_REASONS, fn(d->h, &bits)))
		return;
	for (size_t i = 0; i < NT_ARRAY_LEN(reasons); i++) {
		const char *lv[3] = { d->index_s, d->uuid, reasons[i].name };

		p->host->metric_set(p->nm->m[NVM_REASON], lv,
				    (bits & reasons[i].bit) ? 1 : 0);
	}
}

/* PCIe byte counters (fields 197/198: cheap, exact) with the rate from
 * their deltas; nvmlDeviceGetPcieThroughput (which samples ~20 ms per
 * direction) only where the counters are not supported. */
static bool read_pcie_bytes(struct nvml_poller *p, struct nvml_dev *d,
			    uint64_t now_ns)
{
	struct nvml_field_value f[2];

	if (!nvml_want(p, d, NQ_PCIE_BYTES, p->lib.field_values != NULL))
		return false;
	memset(f, 0, sizeof(f));
	f[0].field_id = NVML_FI_PCIE_COUNT_TX_BYTES;
	f[1].field_id = NVML_FI_PCIE_COUNT_RX_BYTES;
	if (!nvml_ok(p, d, NQ_PCIE_BYTES, p->lib.field_values(d->h, 2, f)) ||
	    !nvml_ok(p, d, NQ_PCIE_BYTES, f[0].ret) || !nvml_ok(p, d, NQ_PCIE_BYTES, f[1].ret))
		return false;
	set_dev(p, d, NVM_PCIE_TX_BYTES, (double)f[0].value.ull);
	set_dev(p, d, NVM_PCIE_RX_BYTES, (double)f[1].value.ull);
	if (d->pcie_ns && now_ns > d->pcie_ns && f[0].value.ull >= d->pcie_tx &&
	    f[1].value.ull >= d->pcie_rx) {
		double s = (double)(now_ns - d->pcie_ns) / 1e9;

		set_dev(p, d, NVM_PCIE_TX_RATE, (double)(f[0].value.ull - d->pcie_tx) / s);
		set_dev(p, d, NVM_PCIE_RX_RATE, (double)(f[1].value.ull - d->pcie_rx) / s);
	}
	d->pcie_tx = f[0].value.ull;
	d->pcie_rx = f[1].value.ull;
	d->pcie_ns = now_ns;
	return true;
}

static void read_pcie(struct nvml_poller *p, struct nvml_dev *d, uint64_t now_ns)
{
	const struct nvml_lib *l = &p->lib;
	unsigned int tx, rx, replays;

	if (nvml_want(p, d, NQ_PCIE_REPLAY, l->pcie_replay != NULL) &&
	    nvml_ok(p, d, NQ_PCIE_REPLAY, l->pcie_replay(d->h, &replays)))
		set_dev(p, d, NVM_PCIE_REPLAYS, replays);
	if (read_pcie_bytes(p, d, now_ns))
		return;
	if (nvml_want(p, d, NQ_PCIE_RATE, l->pcie_throughput != NULL) &&
	    nvml_ok(p, d, NQ_PCIE_RATE, l->pcie_throughput(d->h, NVML_PCIE_UTIL_TX, &tx)) &&
	    nvml_ok(p, d, NQ_PCIE_RATE, l->pcie_throughput(d->h, NVML_PCIE_UTIL_RX, &rx))) {
		set_dev(p, d, NVM_PCIE_TX_RATE, tx * 1000.0); /* NVML: KB/s */
		set_dev(p, d, NVM_PCIE_RX_RATE, rx * 1000.0);
	}
}

static void read_ecc(struct nvml_poller *p, struct nvml_dev *d)
{
	const struct nvml_lib *l = &p->lib;
	unsigned long long corr, unc;

	if (!nvml_want(p, d, NQ_ECC, l->ecc_total != NULL) ||
	    !nvml_ok(p, d, NQ_ECC, l->ecc_total(d->h, NVML_ECC_CORRECTED, NVML_ECC_VOLATILE, &corr)) ||
	    !nvml_ok(p, d, NQ_ECC, l->ecc_total(d->h, NVML_ECC_UNCORRECTED, NVML_ECC_VOLATILE, &unc)))
		return;
	{
		const char *lc[3] = { d->index_s, d->uuid, "corrected" };
		const char *lu[3] = { d->index_s, d->uuid, "uncorrected" };

		p->host->metric_set(p->nm->m[NVM_ECC], lc, (double)corr);
		p->host->metric_set(p->nm->m[NVM_ECC], lu, (double)unc);
	}
}

void nvml_read_dev(struct nvml_poller *p, struct nvml_dev *d, uint64_t now_ns,
		   struct nvml_proc *procs, uint32_t *nprocs)
{
	read_basic(p, d);
	read_reasons(p, d);
	read_pcie(p, d, now_ns);
	read_ecc(p, d);
	nvml_read_nvlink(p, d);
	*nprocs = 0;
	if (p->procs_on)
		nvml_read_procs(p, d, procs, nprocs);
}
