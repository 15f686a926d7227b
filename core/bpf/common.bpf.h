/* SPDX-License-Identifier: MIT */
/*
 * Shared BPF-side helpers for ntcore probes: the target filter map the core
 * owns (reused by fd), the per-CPU drop counter beside every ring buffer,
 * the event header filler and PT_REGS_PARM6. Include after vmlinux.h and
 * the libbpf headers (bpf_tracing.h for PT_REGS_PARM6).
 */
#ifndef NTCORE_COMMON_BPF_H
#define NTCORE_COMMON_BPF_H

#include "ntcore/event.h"

/* The sixth argument register of a uprobe: libbpf 1.1 (Debian 12) stops
 * at the fifth. Used by the cuda and nvlink probes. */
#ifndef PT_REGS_PARM6
#if defined(__TARGET_ARCH_x86)
#define PT_REGS_PARM6(x) ((x)->r9)
#elif defined(__TARGET_ARCH_arm64)
#define PT_REGS_PARM6(x) (((const struct user_pt_regs *)(x))->regs[5])
#endif
#endif

/* For hash maps whose keys come rarely (a process, a connection, a
 * device, an executable): entries allocated at insert, not preallocated
 * and zeroed whole at load. training.conf's maps, all preallocated, held
 * 198 MB of kernel memory on a 2-CPU machine (a per-CPU map multiplies by
 * the CPUs), and zeroing it was a good part of the attach time. Maps that
 * take an insert on every call or request stay preallocated. */
#define NT_MAP_LAZY __uint(map_flags, BPF_F_NO_PREALLOC)

#ifndef NT_TARGETS_MAX
#define NT_TARGETS_MAX 16384
#endif

/* Filled by the core (fork-following) and reused by fd in every plugin. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NT_TARGETS_MAX);
	__type(key, __u32);
	__type(value, __u8);
} nt_targets SEC(".maps");

/* Ring-buffer reservations that failed, per CPU; the user side sums them. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} nt_drops SEC(".maps");

/* Set before load: true when tracing targets only, false host-wide. */
const volatile bool nt_filter_on = false;

static __always_inline bool nt_target_ok(__u32 tgid)
{
	if (!nt_filter_on)
		return true;
	return bpf_map_lookup_elem(&nt_targets, &tgid) != NULL;
}

static __always_inline void nt_count_drop(void)
{
	__u32 zero = 0;
	__u64 *drops = bpf_map_lookup_elem(&nt_drops, &zero);

	if (drops)
		__sync_fetch_and_add(drops, 1);
}

static __always_inline void *nt_reserve(void *ringbuf, __u32 size)
{
	void *rec = bpf_ringbuf_reserve(ringbuf, size, 0);

	if (!rec)
		nt_count_drop();
	return rec;
}

/* Header for an event about the current task. */
static __always_inline void nt_hdr_current(struct nt_event_hdr *hdr,
					   __u32 type, __u32 size)
{
	__u64 id = bpf_get_current_pid_tgid();

	hdr->type = type;
	hdr->size = size;
	hdr->ts_ns = bpf_ktime_get_ns();
	hdr->pid = id >> 32;
	hdr->tid = (__u32)id;
	bpf_get_current_comm(hdr->comm, sizeof(hdr->comm));
}

#endif /* NTCORE_COMMON_BPF_H */
