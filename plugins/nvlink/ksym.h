/* SPDX-License-Identifier: MIT */
/*
 * nvlink: names for the kernel functions a dma_fence's ops point at, read
 * from /proc/kallsyms: "driver" is the module that holds the function
 * ("amdgpu", "nvidia_drm"), or the function's own name for code built into
 * the kernel; a name that cannot be found (kptr_restrict hides addresses,
 * the module went) is the address in hex. A few recent answers are kept,
 * since fences come from one or two drivers and kallsyms is long.
 * Ownership: the cache is plain data inside its owner; nothing to free.
 */
#ifndef NTCORE_NVLINK_KSYM_H
#define NTCORE_NVLINK_KSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NVL_KSYM_NAME 32
#define NVL_KSYM_CACHED 16

struct nvl_ksym {
	uint64_t addr;
	char module[NVL_KSYM_NAME]; /* empty for a built-in function */
	char func[NVL_KSYM_NAME];
};

struct nvl_ksyms {
	struct nvl_ksym e[NVL_KSYM_CACHED];
	size_t n, next;
	const char *path;           /* NULL: /proc/kallsyms (tests set a file) */
};

/* The entry for `addr` (addr 0: both names empty). Never NULL; valid until
 * the next call. */
const struct nvl_ksym *nvl_ksym_find(struct nvl_ksyms *c, uint64_t addr);
/* The driver's name for a fence: its module, else the function. */
const char *nvl_ksym_driver(const struct nvl_ksym *k);
/* One kallsyms line: true when it is `addr`'s, with the names filled. */
bool nvl_ksym_parse_line(const char *line, uint64_t addr, struct nvl_ksym *out);

#endif /* NTCORE_NVLINK_KSYM_H */
