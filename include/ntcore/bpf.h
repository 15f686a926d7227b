/* SPDX-License-Identifier: MIT */
/*
 * ntcore SDK: header-only user-side helpers for BPF probes built on libbpf.
 * They glue a plugin's BPF object to the core's target filter and drop
 * accounting; include it from the plugin's .c file (not from .bpf.c).
 */
#ifndef NTCORE_BPF_H
#define NTCORE_BPF_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <stdbool.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
#if !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE)
long syscall(long number, ...); /* unistd.h hides it under strict C11 */
#endif

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "plugin.h"

/*
 * Before load: make the object's `nt_targets` map the core's shared target
 * map, and tell the BPF side whether to filter. `filter_on` points at the
 * skeleton's rodata `nt_filter_on`. Returns 0 or a negative errno.
 */
static inline int nt_bpf_use_targets(const struct nt_host *host,
				     struct nt_instance *inst,
				     struct bpf_map *targets,
				     volatile bool *filter_on)
{
	int fd = host->target_map_fd(inst);

	*filter_on = fd >= 0;
	if (fd < 0)
		return 0;
	if (bpf_map__reuse_fd(targets, fd) < 0) {
		int err = -errno;

		host->log(inst, NT_LOG_ERROR, "cannot reuse target map: %d", err);
		return err;
	}
	return 0;
}

/*
 * Sum over the CPUs of slot `key` of a per-CPU u64 array (0 when the
 * lookup fails or memory runs out).
 */
static inline uint64_t nt_bpf_percpu_sum_at(int map_fd, uint32_t key)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t total = 0;
	uint64_t *vals;

	if (ncpu <= 0)
		return 0;
	vals = calloc((size_t)ncpu, sizeof(*vals));
	if (!vals)
		return 0;
	if (bpf_map_lookup_elem(map_fd, &key, vals) == 0)
		for (int i = 0; i < ncpu; i++)
			total += vals[i];
	free(vals);
	return total;
}

/* Sum of a one-slot per-CPU u64 array (the `nt_drops` map). */
static inline uint64_t nt_bpf_percpu_sum(int map_fd)
{
	return nt_bpf_percpu_sum_at(map_fd, 0);
}

/*
 * After load: open a libbpf ring buffer on `map` (records go to
 * `cb(ctx, data, size)`) and hand its epoll fd to the core's loop, so that
 * `poll(state, token, ...)` runs when records are waiting. On success
 * `*out` holds the ring buffer (free it with ring_buffer__free in detach)
 * and 0 is returned; on failure the error is logged, nothing is left open,
 * `*out` is NULL and a negative errno is returned.
 */
static inline int nt_bpf_ring_open(const struct nt_host *host,
				   struct nt_instance *inst,
				   const struct bpf_map *map,
				   ring_buffer_sample_fn cb, void *ctx,
				   uint32_t token, struct ring_buffer **out)
{
	struct ring_buffer *rb;
	int err;

	*out = NULL;
	rb = ring_buffer__new(bpf_map__fd(map), cb, ctx, NULL);
	if (!rb) {
		err = errno ? -errno : -ENOMEM;
		host->log(inst, NT_LOG_ERROR, "cannot open the ring buffer: %s",
			  strerror(-err));
		return err;
	}
	err = host->watch_fd(inst, ring_buffer__epoll_fd(rb), token);
	if (err) {
		host->log(inst, NT_LOG_ERROR, "cannot watch the ring buffer: %s",
			  strerror(-err));
		ring_buffer__free(rb);
		return err < 0 ? err : -EINVAL;
	}
	*out = rb;
	return 0;
}

/*
 * BPF_LINK_CREATE of a uprobe_multi link (Linux 6.6+): `prog_fd` (a program
 * loaded with expected attach type NT_BPF_TRACE_UPROBE_MULTI) on `n` file
 * offsets of `path`, each with its BPF cookie, entry or (`ret`) return
 * probes. Returns the link fd, or -errno (-EINVAL on kernels before 6.6:
 * fall back to one perf-event uprobe per offset). Written by hand because
 * Debian 12's libbpf (1.1) predates bpf_program__attach_uprobe_multi; the
 * field offsets are those of union bpf_attr's link_create.uprobe_multi in
 * the kernel UAPI.
 */
#define NT_BPF_LINK_CREATE 28
#define NT_BPF_TRACE_UPROBE_MULTI 48
#define NT_BPF_F_UPROBE_MULTI_RETURN 1u

struct nt_uprobe_multi_attr {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;
	uint32_t flags;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t cnt;
	uint32_t um_flags;
	uint32_t pid;
	uint32_t pad_;
	uint8_t rest_[64]; /* zero: the rest of union bpf_attr */
};

static inline int nt_bpf_uprobe_multi(int prog_fd, const char *path, bool ret,
				      const uint64_t *offs,
				      const uint64_t *cookies, size_t n)
{
	struct nt_uprobe_multi_attr a;
	long fd;

	memset(&a, 0, sizeof(a));
	a.prog_fd = (uint32_t)prog_fd;
	a.attach_type = NT_BPF_TRACE_UPROBE_MULTI;
	a.path = (uint64_t)(uintptr_t)path;
	a.offsets = (uint64_t)(uintptr_t)offs;
	a.cookies = (uint64_t)(uintptr_t)cookies;
	a.cnt = (uint32_t)n;
	a.um_flags = ret ? NT_BPF_F_UPROBE_MULTI_RETURN : 0;
	fd = syscall(__NR_bpf, NT_BPF_LINK_CREATE, &a, sizeof(a));
	return fd < 0 ? -errno : (int)fd;
}

/*
 * Whether the running kernel has the BTF-enabled tracepoint `tp` (a
 * `tp_btf/<tp>` program can attach): its `btf_trace_<tp>` typedef is in
 * `vmlinux`, the kernel's BTF (btf__load_vmlinux_btf(); NULL: false).
 * Kept for plugins built against 1.1; new code uses the plugin kit's
 * <ntcore/kit/tp.h> (nt_tp_exists, nt_tp_choose) on the BTF the daemon
 * parses once (nt_vmlinux_get).
 */
static inline bool nt_bpf_kernel_has_tp(const struct btf *vmlinux,
					const char *tp)
{
	char name[128];

	snprintf(name, sizeof(name), "btf_trace_%s", tp);
	return vmlinux &&
	       btf__find_by_name_kind(vmlinux, name, BTF_KIND_TYPEDEF) > 0;
}

/*
 * Forward new BPF-side ring-buffer drops to the core's drop counter
 * (stage "bpf"). `*reported` holds the total already forwarded.
 */
static inline void nt_bpf_report_drops(const struct nt_host *host,
				       struct nt_instance *inst, int drops_fd,
				       uint64_t *reported)
{
	uint64_t total = nt_bpf_percpu_sum(drops_fd);

	if (total > *reported) {
		host->count_drop(inst, "bpf", total - *reported);
		*reported = total;
	}
}

#endif /* NTCORE_BPF_H */
