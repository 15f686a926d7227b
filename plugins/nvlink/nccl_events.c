/* SPDX-License-Identifier: MIT */
/*
 * nvlink: the NCCL part of each interval: the bandwidth gauges
 * (nccl_record.c) and the hang check (nccl_state.c decides; this file
 * feeds it the calls still inside NCCL, read from the BPF `inflight` map,
 * and nccl_alert.c publishes alert.nccl_hang).
 */
#include <string.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/proc.h"
#include "nccl_model.h"
#include "nvl.h"
#include "nvlink.bpf.skel.h"

#define HANGS_MAX 16

/* The calls inside NCCL now; entries of processes gone are deleted. */
static size_t read_pending(struct nvl *s, struct nvl_pending *out, size_t max)
{
	int fd = bpf_map__fd(s->skel->maps.inflight);
	int ufd = bpf_map__fd(s->skel->maps.init_uid);
	uint32_t key, next, stale[64];
	size_t n = 0, nstale = 0;
	bool first = true;

	while (bpf_map_get_next_key(fd, first ? NULL : &key, &next) == 0) {
		struct nvl_inflight f;
		struct nvl_args a;

		first = false;
		key = next;
		if (bpf_map_lookup_elem(fd, &key, &f) != 0)
			continue;
		if (!nt_proc_alive(f.tgid)) {
			if (nstale < NT_ARRAY_LEN(stale))
				stale[nstale++] = key;
			continue;
		}
		if (n >= max)
			continue;
		nvl_decode_args(f.call, f.reg, f.stk, &a);
		memset(&out[n], 0, sizeof(out[n]));
		out[n].pid = f.tgid;
		out[n].tid = f.tid;
		out[n].comm = a.comm;
		out[n].ts_ns = f.ts_ns;
		out[n].c.ts_ns = f.ts_ns;
		out[n].c.call = f.call;
		out[n].c.count = a.count;
		out[n].c.bytes = nvl_call_bytes(&a);
		out[n].c.dtype = a.dtype;
		out[n].c.op = a.op;
		if (nvl_call_is_init(f.call)) {
			struct nvl_uid u;

			if (bpf_map_lookup_elem(ufd, &key, &u) == 0)
				out[n].uid = nvl_uid_hash(u.b, sizeof(u.b));
		}
		out[n].rank = a.rank;
		out[n].nranks = a.nranks;
		n++;
	}
	for (size_t i = 0; i < nstale; i++)
		bpf_map_delete_elem(fd, &stale[i]);
	return n;
}

void nvl_nccl_tick(struct nvl *s)
{
	struct nvl_hang hangs[HANGS_MAX];
	size_t np, nh;

	nvl_nccl_bw_publish(s);
	if (!s->skel || s->cfg->hang_timeout_ms <= 0)
		return;
	np = read_pending(s, s->pend, NVL_PENDING_MAX);
	nh = nvl_hang_check(&s->comms, s->pend, np, nt_clock_mono_ns(),
			    (uint64_t)s->cfg->hang_timeout_ms * 1000000ull,
			    hangs, HANGS_MAX);
	for (size_t i = 0; i < nh; i++)
		nvl_nccl_hang_alert(s, &hangs[i]);
}
