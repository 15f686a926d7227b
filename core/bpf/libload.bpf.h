/* SPDX-License-Identifier: MIT */
/*
 * Library discovery, BPF side, shared by the probes that put uprobes on
 * libraries a target may load late (cuda: libcudart/libcuda, nvlink:
 * libnccl). Moved here from cuda.bpf.c so both use one copy.
 *
 * A target that opens a file whose basename starts with one of the
 * `lib_pfx` prefixes (or, with `watch_so`, any "*.so*") is reported to user
 * space with a path record when the open succeeds; an exec of a binary not
 * in `exe_known` is reported too (on_exec: a runtime linked statically into
 * the executable). With `stop_on_load` and a target set, the task is
 * stopped with SIGSTOP before the record goes out: user space attaches its
 * uprobes to the file and sends SIGCONT, so no call between the load and the
 * attach is missed. `record->stopped` says whether SIGSTOP was sent.
 *
 * The includer defines, before including this file (after common.bpf.h):
 *   NT_LIBLOAD_REC        its record type, laid out as
 *                         { struct nt_event_hdr hdr; __u64 ino; __u32 dev;
 *                           __u32 stopped; char path[N]; } (N a power of 2)
 *   NT_LIBLOAD_OPEN/EXEC  the record type ids of an open and of an exec
 *   NT_LIBLOAD_PFX_MAX    prefixes at most; NT_LIBLOAD_PFX_LEN bytes each
 *   nt_libload_output     void fn(void *rec, __u64 size): write to its ring
 * and gets the rodata `stop_on_load`, `watch_so`, `n_lib_pfx`, `lib_pfx`,
 * the maps `exe_known`, `path_scratch` and the programs `on_openat_exit`,
 * `on_exec` (user space may switch either off with bpf_program__set_autoload
 * before load).
 */
#ifndef NTCORE_LIBLOAD_BPF_H
#define NTCORE_LIBLOAD_BPF_H

#define NT_LIBLOAD_SIGSTOP 19
#define NT_LIBLOAD_NAME_LEN 64
#define NT_LIBLOAD_PATH_MAX sizeof(((NT_LIBLOAD_REC *)0)->path)

const volatile bool stop_on_load = false;
const volatile bool watch_so = false;
const volatile __u32 n_lib_pfx = 0;
const volatile char lib_pfx[NT_LIBLOAD_PFX_MAX][NT_LIBLOAD_PFX_LEN] = {};

/* Executables (dev, ino) user space already checked: no stop at exec. */
struct exe_id {
	__u64 ino;
	__u32 dev;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	NT_MAP_LAZY;
	__uint(max_entries, 16384);
	__type(key, struct exe_id);
	__type(value, __u8);
} exe_known SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, NT_LIBLOAD_REC);
} path_scratch SEC(".maps");

static __always_inline void nt_libload_hdr(struct nt_event_hdr *h, __u32 type,
					   __u64 id)
{
	h->type = type;
	h->size = sizeof(NT_LIBLOAD_REC);
	h->ts_ns = bpf_ktime_get_ns();
	h->pid = id >> 32;
	h->tid = (__u32)id;
	bpf_get_current_comm(h->comm, sizeof(h->comm));
}

struct nt_libload_base {
	NT_LIBLOAD_REC *p;
	char *name;
	__u32 base;
};

static int nt_libload_find_base(__u32 i, void *arg)
{
	struct nt_libload_base *b = arg;
	char c = b->p->path[i & (NT_LIBLOAD_PATH_MAX - 1)];

	if (!c)
		return 1;
	if (c == '/')
		b->base = i + 1;
	return 0;
}

static int nt_libload_copy_base(__u32 i, void *arg)
{
	struct nt_libload_base *b = arg;
	char c = b->p->path[(b->base + i) & (NT_LIBLOAD_PATH_MAX - 1)];

	b->name[i & (NT_LIBLOAD_NAME_LEN - 1)] = c;
	return c ? 0 : 1;
}

/* Basename of p->path into name[] (NUL-terminated, truncated); bpf_loop
 * keeps the verifier from walking every path length. */
static __always_inline void nt_libload_path_base(NT_LIBLOAD_REC *p, char *name)
{
	struct nt_libload_base b = { .p = p, .name = name, .base = 0 };

	bpf_loop(NT_LIBLOAD_PATH_MAX, nt_libload_find_base, &b, 0);
	bpf_loop(NT_LIBLOAD_NAME_LEN, nt_libload_copy_base, &b, 0);
	name[NT_LIBLOAD_NAME_LEN - 1] = 0;
}

static __always_inline bool nt_libload_is_so(const char *name)
{
	for (__u32 i = 0; i + 2 < NT_LIBLOAD_NAME_LEN; i++) {
		if (!name[i])
			break;
		if (name[i] == '.' && name[i + 1] == 's' && name[i + 2] == 'o')
			return true;
	}
	return false;
}

static __always_inline bool nt_libload_matches(const char *name)
{
	for (__u32 n = 0; n < NT_LIBLOAD_PFX_MAX; n++) {
		bool ok = true;

		if (n >= n_lib_pfx)
			break;
		for (__u32 i = 0; i < NT_LIBLOAD_PFX_LEN; i++) {
			char want = lib_pfx[n][i];

			if (!want)
				break;
			if (name[i] != want) {
				ok = false;
				break;
			}
		}
		if (ok)
			return true;
	}
	return false;
}

/*
 * The raw syscall tracepoints, filtered on openat's number, not the
 * syscalls/sys_*_openat trace events: releasing a perf-event tracepoint
 * waits for a grace period under the kernel's event_mutex (30-40 ms each,
 * one after the other), which made the shutdown of training.conf 270 ms;
 * a raw tracepoint link goes without waiting. Every syscall runs the
 * program, but the per-event tracepoint enables the same sys_enter hook
 * and tests the number in C just the same.
 */
/* The number read from the typed argument directly (a CO-RE load, no
 * helper call): the exit program runs at every system call's return. */
#if defined(__TARGET_ARCH_x86)
#define NT_NR_OPENAT 257
static __always_inline long nt_syscall_nr(struct pt_regs *regs)
{
	return (long)regs->orig_ax;
}
#elif defined(__TARGET_ARCH_arm64)
#define NT_NR_OPENAT 56
static __always_inline long nt_syscall_nr(struct pt_regs *regs)
{
	return regs->syscallno;
}
#else
#error "libload.bpf.h: openat's syscall number for this architecture"
#endif

/*
 * One program, at the return of openat: its path argument is still in the
 * saved user registers there (the kernel writes only the return value
 * back), so nothing is kept from the entry. A program on sys_enter as well
 * cost every system call of the host a second run (~100 ns); a DataLoader
 * job makes ~700 a step.
 */
SEC("tp_btf/sys_exit")
int BPF_PROG(on_openat_exit, struct pt_regs *regs, long ret)
{
	__u64 id;
	__u32 zero = 0;
	NT_LIBLOAD_REC *p;
	char name[NT_LIBLOAD_NAME_LEN];
	bool match, stop;

	if (ret < 0 || !n_lib_pfx || nt_syscall_nr(regs) != NT_NR_OPENAT)
		return 0;
	id = bpf_get_current_pid_tgid();
	if (!nt_target_ok(id >> 32))
		return 0;
	p = bpf_map_lookup_elem(&path_scratch, &zero);
	if (!p)
		return 0;
	if (bpf_probe_read_user_str(p->path, sizeof(p->path),
				    (void *)PT_REGS_PARM2_CORE(regs)) <= 0)
		return 0;
	nt_libload_path_base(p, name);
	match = nt_libload_matches(name);
	if (!match && !(watch_so && nt_libload_is_so(name)))
		return 0;
	nt_libload_hdr(&p->hdr, NT_LIBLOAD_OPEN, id);
	p->ino = 0;
	p->dev = 0;
	stop = match && stop_on_load && nt_filter_on;
	p->stopped = stop;
	if (stop)
		bpf_send_signal(NT_LIBLOAD_SIGSTOP);
	nt_libload_output(p, sizeof(*p));
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *task, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	__u64 id = bpf_get_current_pid_tgid();
	NT_LIBLOAD_REC *p;
	struct exe_id eid = {};
	__u32 zero = 0;

	if (!nt_target_ok(id >> 32))
		return 0;
	eid.ino = BPF_CORE_READ(bprm, file, f_inode, i_ino);
	eid.dev = BPF_CORE_READ(bprm, file, f_inode, i_sb, s_dev);
	if (bpf_map_lookup_elem(&exe_known, &eid))
		return 0;
	p = bpf_map_lookup_elem(&path_scratch, &zero);
	if (!p)
		return 0;
	nt_libload_hdr(&p->hdr, NT_LIBLOAD_EXEC, id);
	p->ino = eid.ino;
	p->dev = eid.dev;
	p->path[0] = 0;
	bpf_probe_read_kernel_str(p->path, sizeof(p->path),
				  BPF_CORE_READ(bprm, filename));
	p->stopped = stop_on_load && nt_filter_on;
	if (p->stopped)
		bpf_send_signal(NT_LIBLOAD_SIGSTOP);
	nt_libload_output(p, sizeof(*p));
	return 0;
}

#endif /* NTCORE_LIBLOAD_BPF_H */
