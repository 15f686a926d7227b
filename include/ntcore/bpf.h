/* SPDX-License-Identifier: MIT */
/*
 * ntcore SDK: header-only user-side helpers for BPF probes built on libbpf.
 * They glue a plugin's BPF object to the core's target filter and drop
 * accounting; include it from the plugin's .c file (not from .bpf.c).
 */
#ifndef NTCORE_BPF_H
#define NTCORE_BPF_H

#include <errno.h>
#include <stdlib.h>

#include <bpf/bpf.h>
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

/* Sum of a one-slot per-CPU u64 array (the `nt_drops` map). */
static inline uint64_t nt_bpf_percpu_sum(int map_fd)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t total = 0;
	uint32_t zero = 0;
	uint64_t *vals;

	if (ncpu <= 0)
		return 0;
	vals = calloc((size_t)ncpu, sizeof(*vals));
	if (!vals)
		return 0;
	if (bpf_map_lookup_elem(map_fd, &zero, vals) == 0)
		for (int i = 0; i < ncpu; i++)
			total += vals[i];
	free(vals);
	return total;
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
