/* SPDX-License-Identifier: MIT */
/*
 * nvlink: what an XID means. The numbers and their meanings are facts of
 * NVIDIA's published XID catalog (docs.nvidia.com/deploy/xid-errors); the
 * wording and the severity chosen here are ours: critical where the GPU
 * needs a reset or a node needs draining, warning where one application
 * faulted and the GPU itself is fine.
 */
#ifndef NVLINK_XID_H
#define NVLINK_XID_H

#include <stdint.h>

struct nvl_xid_info {
	uint32_t xid;
	uint32_t severity;   /* enum nt_severity */
	const char *meaning; /* one line */
	const char *action;  /* what to try first */
};

/* The entry of `xid`; an "unknown XID" entry (warning) for any other. */
const struct nvl_xid_info *nvl_xid_lookup(uint32_t xid);

#endif /* NVLINK_XID_H */
