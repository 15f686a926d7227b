/* SPDX-License-Identifier: MIT */
/*
 * Process identity (issue 21): parsing cgroup paths into container id,
 * runtime, pod UID and QoS class (pure functions, table-tested), reading a
 * process's cgroup and the kubelet's pod directory, and the per-process
 * cache the daemon keeps (thread-safe: sinks and the metric registry ask
 * from any thread; the loop forgets a process at its proc.exit).
 */
#ifndef NTCORE_CORE_IDENT_H
#define NTCORE_CORE_IDENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/identity.h"

/* Fill container_id, runtime, pod_uid and qos from one cgroup path (v1 or
 * v2, systemd or cgroupfs driver; components ".." from a cgroup namespace
 * are skipped). Returns true when it found a container or a pod. The
 * deepest container component wins (a container in a pod's container). */
bool nt_ident_parse_path(const char *path, struct nt_identity *out);

/* Parse the text of /proc/PID/cgroup: the v2 ("0::") path is the cgroup;
 * when it shows no container (hybrid hosts), each v1 path is tried. */
void nt_ident_parse_proc_cgroup(const char *text, struct nt_identity *out);

/* Pod name and namespace from the kubelet's pod directory
 * (KUBELET_DIR/pods/UID: etc-hosts, the projected service-account volume's
 * namespace file). Leaves them "" when absent. */
void nt_ident_read_kubelet(const char *kubelet_dir, struct nt_identity *id);

struct nt_ident_entry;

struct nt_ident_cache {
	pthread_mutex_t lock;
	struct nt_ident_entry **buckets;
	size_t n_buckets, n_entries, max_entries;
	const char *proc_root;   /* "/proc" (borrowed) */
	const char *kubelet_dir; /* NULL or "": pod names are not read */
	uint64_t resolved, hits, evicted, failed;
	/* A downward-API volume of ntcore's own pod (nt_ident_cache_downward):
	 * name and namespace for the processes of that pod (a sidecar). */
	char dw_uid[NT_ID_POD_UID_LEN], dw_name[NT_ID_NAME_LEN], dw_ns[NT_ID_NAME_LEN];
	/* Called (unlocked, from the resolving thread) after a pid was
	 * resolved, so the core can ask the kernel to report its exit. */
	void (*on_resolved)(void *ctx, uint32_t pid);
	void *ctx;
};

int nt_ident_cache_init(struct nt_ident_cache *c, size_t max_entries,
			const char *proc_root, const char *kubelet_dir);
void nt_ident_cache_fini(struct nt_ident_cache *c);
/* Read DIR/uid, DIR/name, DIR/namespace (a downward-API volume with
 * metadata.uid, metadata.name, metadata.namespace): processes of the pod
 * with that UID get that name and namespace where the kubelet's directory
 * did not say them. Returns -1 (and uses nothing) without a uid file. */
int nt_ident_cache_downward(struct nt_ident_cache *c, const char *dir);
/* Copy the identity of pid into *out, resolving it on the first call.
 * Returns 0, or -ESRCH when the process was gone before it could be read
 * (out is zeroed; remembered, so /proc is not read again for it). */
int nt_ident_get(struct nt_ident_cache *c, uint32_t pid, struct nt_identity *out);
/* The process exited: its identity is kept for the records of it still
 * on their way (as the symbolizer keeps its maps), and freed by the first
 * sweep after the grace period. */
void nt_ident_forget(struct nt_ident_cache *c, uint32_t pid);
/* Free the entries of processes dead, and not asked for, for at least
 * grace_ns (a plugin that keeps an exited process's series a while keeps
 * its identity as long). */
void nt_ident_sweep(struct nt_ident_cache *c, uint64_t grace_ns);
size_t nt_ident_cache_size(struct nt_ident_cache *c);

#endif
