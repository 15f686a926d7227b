// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The core's own BPF: keeps the shared target map in step with the traced
 * processes. A fork of a target adds the child; the death of a target's last
 * thread removes it and emits a proc.exit record for the core to publish.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "common.bpf.h"
#include "follow.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} exits SEC(".maps");

const volatile __u32 exit_type = 0;
const volatile __u32 exec_type = 0;
/* --cgroup: processes whose cgroup (v2) is one of these or below one are
 * targets, however they got there (fork, exec, a move). */
const volatile bool cgroup_filter = false;

/* Host-wide, the exits of the processes whose identity the core cached
 * (nt_known, filled by the core) are reported, so it can forget them. */
const volatile bool known_exits = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} nt_known SEC(".maps");

#define NT_CGROUP_DEPTH 32 /* levels walked up from a task's cgroup */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);   /* cgroup id (the v2 directory's inode) */
	__type(value, __u8);
} nt_cgroups SEC(".maps");

/* Whether the task's v2 cgroup is a target cgroup or lies below one. */
static __always_inline bool task_in_cgroups(struct task_struct *task)
{
	struct cgroup *cg = BPF_CORE_READ(task, cgroups, dfl_cgrp);

	for (int i = 0; i < NT_CGROUP_DEPTH && cg; i++) {
		__u64 id = BPF_CORE_READ(cg, kn, id);

		if (bpf_map_lookup_elem(&nt_cgroups, &id))
			return true;
		cg = BPF_CORE_READ(cg, self.parent, cgroup);
	}
	return false;
}

static __always_inline void add_if_in_cgroups(struct task_struct *task)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	__u8 one = 1;

	if (cgroup_filter && task_in_cgroups(task))
		bpf_map_update_elem(&nt_targets, &tgid, &one, BPF_NOEXIST);
}

static __always_inline int on_fork(struct task_struct *parent,
				   struct task_struct *child)
{
	__u32 parent_tgid = BPF_CORE_READ(parent, tgid);
	__u32 child_tgid = BPF_CORE_READ(child, tgid);
	__u8 one = 1;

	if (parent_tgid == child_tgid)
		return 0; /* a new thread, not a new process */
	if (!bpf_map_lookup_elem(&nt_targets, &parent_tgid)) {
		/* clone3(CLONE_INTO_CGROUP) starts a child elsewhere */
		add_if_in_cgroups(child);
		return 0;
	}
	bpf_map_update_elem(&nt_targets, &child_tgid, &one, BPF_NOEXIST);
	return 0;
}

static __always_inline int on_exit(struct task_struct *task)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct nt_proc_exit *rec;

	/* signal->live reaches 0 when the last thread of the group exits. */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	bool target = bpf_map_lookup_elem(&nt_targets, &tgid) != NULL;
	bool known = known_exits && bpf_map_lookup_elem(&nt_known, &tgid);
	if (!target && !known)
		return 0;
	if (target)
		bpf_map_delete_elem(&nt_targets, &tgid);
	if (known)
		bpf_map_delete_elem(&nt_known, &tgid);
	rec = nt_reserve(&exits, sizeof(*rec));
	if (!rec)
		return 0;
	rec->pad[0] = target ? 0 : NT_EXIT_IDENTITY_ONLY;
	rec->pad[1] = rec->pad[2] = 0;
	nt_hdr_current(&rec->hdr, exit_type, sizeof(*rec));
	rec->hdr.pid = tgid;
	/* The process's name, not that of whichever thread ended last
	 * ("cuda-EvtHandlr"): the group leader's. */
	struct task_struct *leader = BPF_CORE_READ(task, group_leader);
	BPF_CORE_READ_STR_INTO(&rec->hdr.comm, leader, comm);
	/* Decoded as a shell reports it: the exit code, or 128 + the signal
	 * that killed it (the wait status is code << 8 | signal). */
	int status = BPF_CORE_READ(task, exit_code);
	rec->signal = status & 0x7f;
	rec->exit_code = rec->signal ? 128 + rec->signal : (status >> 8) & 0xff;
	rec->core_dumped = (status & 0x80) != 0;
	rec->ppid = BPF_CORE_READ(task, real_parent, tgid);
	bpf_ringbuf_submit(rec, 0);
	return 0;
}

static __always_inline int on_exec(pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct nt_proc_exec *rec;

	if (!bpf_map_lookup_elem(&nt_targets, &tgid))
		add_if_in_cgroups((struct task_struct *)bpf_get_current_task());
	if (!bpf_map_lookup_elem(&nt_targets, &tgid))
		return 0;
	rec = nt_reserve(&exits, sizeof(*rec));
	if (!rec)
		return 0;
	nt_hdr_current(&rec->hdr, exec_type, sizeof(*rec));
	rec->old_tid = old_pid;
	rec->pad = 0;
	bpf_probe_read_kernel_str(rec->filename, sizeof(rec->filename),
				  BPF_CORE_READ(bprm, filename));
	bpf_ringbuf_submit(rec, 0);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(follow_exec_btf, struct task_struct *task, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	return on_exec(old_pid, bprm);
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(follow_exec_raw, struct task_struct *task, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	return on_exec(old_pid, bprm);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(follow_fork_btf, struct task_struct *parent,
	     struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(follow_exit_btf, struct task_struct *task)
{
	return on_exit(task);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(follow_fork_raw, struct task_struct *parent,
	     struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(follow_exit_raw, struct task_struct *task)
{
	return on_exit(task);
}

/* A process moved into a target cgroup (systemd-run --scope, a runtime
 * placing a container's first process) is followed from then on. The
 * tracepoint fires after the move, so the task's cgroup is the new one. */
SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(follow_attach_btf, struct cgroup *dst, const char *path,
	     struct task_struct *task, bool threadgroup)
{
	add_if_in_cgroups(task);
	return 0;
}

SEC("raw_tp/cgroup_attach_task")
int BPF_PROG(follow_attach_raw, struct cgroup *dst, const char *path,
	     struct task_struct *task, bool threadgroup)
{
	add_if_in_cgroups(task);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
