/* SPDX-License-Identifier: MIT */
/*
 * ntcore SDK: the identity of a process (issue 21): its cgroup and, where
 * the cgroup path shows them, the container id and runtime, the Kubernetes
 * pod UID and QoS class; pod name and namespace when the kubelet's pod
 * directory (or a downward-API file) on this host says them. Never read
 * from a network API.
 *
 * The core resolves it once per process, caches it and forgets it when the
 * process exits. Sinks fetch it with host->identity (ABI 1.7), which is safe
 * from any thread, so a sink that renders on its own thread adds identity
 * fields without calling back into the loop.
 */
#ifndef NTCORE_IDENTITY_H
#define NTCORE_IDENTITY_H

#include <stdint.h>

#define NT_ID_CGROUP_LEN 256
#define NT_ID_CONTAINER_LEN 65 /* 64 hex digits + NUL */
#define NT_ID_POD_UID_LEN 37   /* canonical UUID + NUL */
#define NT_ID_NAME_LEN 64      /* Kubernetes names are DNS labels (<= 63) */

/* Every string is NUL-terminated, "" when unknown. */
struct nt_identity {
	char cgroup[NT_ID_CGROUP_LEN];          /* cgroup v2 path, "/" at the root */
	char container_id[NT_ID_CONTAINER_LEN]; /* 64 lowercase hex digits */
	char runtime[16];    /* "docker", "containerd", "cri-o", "podman" or "" */
	char pod_uid[NT_ID_POD_UID_LEN]; /* 8-4-4-4-12, dashes (not the
					  * systemd driver's underscores) */
	char qos[12];        /* "guaranteed", "burstable", "besteffort" or "" */
	char pod_name[NT_ID_NAME_LEN];
	char pod_namespace[NT_ID_NAME_LEN];
};

#endif /* NTCORE_IDENTITY_H */
