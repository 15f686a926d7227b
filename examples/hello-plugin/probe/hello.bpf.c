// SPDX-License-Identifier: GPL-2.0 OR MIT
/* Kernel side: one hello.exec record per exec of a traced process. The
 * program comes in both tracepoint flavours; the user side loads one
 * (the kit's tp_btf/raw_tp chooser). */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "common.bpf.h"
#include "hello.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* The type id the core gave hello.exec, set before load. */
const volatile __u32 exec_type = 0;

static __always_inline int on_exec(pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct hello_exec *rec;

	if (!nt_target_ok(tgid))
		return 0;
	rec = nt_reserve(&events, sizeof(*rec));
	if (!rec)
		return 0;
	nt_hdr_current(&rec->hdr, exec_type, sizeof(*rec));
	rec->old_pid = old_pid;
	rec->pad = 0;
	bpf_probe_read_kernel_str(rec->filename, sizeof(rec->filename),
				  BPF_CORE_READ(bprm, filename));
	bpf_ringbuf_submit(rec, 0);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(hello_exec, struct task_struct *task, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	return on_exec(old_pid, bprm);
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(hello_exec_raw, struct task_struct *task, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	return on_exec(old_pid, bprm);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
