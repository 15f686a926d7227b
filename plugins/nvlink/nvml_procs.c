/* SPDX-License-Identifier: MIT */
/*
 * nvlink: per-process GPU use, on the NVML worker thread: device memory of
 * each compute process (nvmlDeviceGetComputeRunningProcesses_v3) and the
 * mean of NVML's SM and memory utilisation samples of each process since
 * the last poll (nvmlDeviceGetProcessUtilization; NOT_FOUND means no sample,
 * not an error). The loop names the processes and keeps the targets'.
 */
#include <stdint.h>
#include <string.h>

#include "nvml_poll.h"

static struct nvml_proc *proc_slot(struct nvml_proc *out, uint32_t *n,
				   uint32_t pid)
{
	for (uint32_t i = 0; i < *n; i++)
		if (out[i].pid == pid)
			return &out[i];
	if (*n >= NVML_PROCS_MAX)
		return NULL;
	out[*n].pid = pid;
	out[*n].mem_bytes = UINT64_MAX;
	out[*n].sm = out[*n].mem = -1;
	return &out[(*n)++];
}

static void read_memory(struct nvml_poller *p, struct nvml_dev *d,
			struct nvml_proc *out, uint32_t *n)
{
	struct nvml_process_info info[NVML_PROCS_MAX];
	unsigned int cnt = NVML_PROCS_MAX;
	nvml_return_t r;

	if (!nvml_want(p, d, NQ_PROCS, p->lib.compute_procs != NULL))
		return;
	r = p->lib.compute_procs(d->h, &cnt, info);
	if (r == NVML_ERR_INSUFFICIENT_SIZE)
		cnt = NVML_PROCS_MAX; /* the first ones were filled */
	else if (!nvml_ok(p, d, NQ_PROCS, r))
		return;
	for (unsigned int i = 0; i < cnt && i < NVML_PROCS_MAX; i++) {
		struct nvml_proc *s = proc_slot(out, n, info[i].pid);

		/* NVML_VALUE_NOT_AVAILABLE is all ones: left as UINT64_MAX */
		if (s)
			s->mem_bytes = info[i].used_gpu_memory;
	}
}

static void read_util(struct nvml_poller *p, struct nvml_dev *d,
		      struct nvml_proc *out, uint32_t *n)
{
	struct nvml_process_util u[NVML_PROCS_MAX];
	unsigned int cnt = NVML_PROCS_MAX, samples[NVML_PROCS_MAX] = { 0 };
	double sm[NVML_PROCS_MAX] = { 0 }, mem[NVML_PROCS_MAX] = { 0 };
	unsigned long long newest = d->last_util_us;
	nvml_return_t r;

	if (!nvml_want(p, d, NQ_PROC_UTIL, p->lib.process_util != NULL))
		return;
	r = p->lib.process_util(d->h, u, &cnt, d->last_util_us);
	if (r == NVML_ERR_NOT_FOUND || !nvml_ok(p, d, NQ_PROC_UTIL, r))
		return;
	for (unsigned int i = 0; i < cnt && i < NVML_PROCS_MAX; i++) {
		struct nvml_proc *s = proc_slot(out, n, u[i].pid);
		uint32_t k;

		if (!s)
			continue;
		k = (uint32_t)(s - out);
		sm[k] += u[i].sm_util;
		mem[k] += u[i].mem_util;
		samples[k]++;
		if (u[i].timestamp_us > newest)
			newest = u[i].timestamp_us;
	}
	for (uint32_t k = 0; k < *n; k++)
		if (samples[k]) {
			out[k].sm = sm[k] / samples[k] / 100.0;
			out[k].mem = mem[k] / samples[k] / 100.0;
		}
	d->last_util_us = newest;
}

void nvml_read_procs(struct nvml_poller *p, struct nvml_dev *d,
		     struct nvml_proc *out, uint32_t *n)
{
	*n = 0;
	read_memory(p, d, out, n);
	read_util(p, d, out, n);
}
