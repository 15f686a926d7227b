/* SPDX-License-Identifier: MIT */
/*
 * Identity labels of metric families (issue 21). A family that declares a
 * `pid` label is rewritten at registration by the label policy: `pid`,
 * `tid` and `comm` are kept or dropped, and the identity labels of the
 * process (`cgroup`; `container_id`; `namespace`, `pod`, `uid`) appended,
 * per family (a glob on its name) or by the deployment-wide default. The
 * plugin keeps passing its declared labels; the registry maps them on each
 * update, resolving the pid through the identity cache. A family without a
 * `pid` label, or under the policy "declared", is left as it is.
 */
#ifndef NTCORE_CORE_LABELS_H
#define NTCORE_CORE_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/identity.h"

enum {
	NT_IDL_PID = 1u << 0,
	NT_IDL_TID = 1u << 1,
	NT_IDL_COMM = 1u << 2,
	NT_IDL_CGROUP = 1u << 3,
	NT_IDL_CONTAINER = 1u << 4,
	NT_IDL_POD = 1u << 5,
	NT_IDL_DECLARED = 1u << 31, /* labels as the plugin declared them */
};

/* The host-wide default: no pid/tid (series would churn with every
 * process), the process name and where it runs. */
#define NT_IDL_HOSTWIDE (NT_IDL_COMM | NT_IDL_CONTAINER | NT_IDL_POD)

struct nt_label_family_rule {
	char *glob; /* fnmatch(3) on the family name; owned */
	uint32_t mask;
};

struct nt_label_policy {
	uint32_t default_mask;
	struct nt_label_family_rule *rules; /* first match wins; owned */
	size_t n_rules;
	/* Identity of a process, from any thread (ident.h's cache). */
	int (*ident)(void *ctx, uint32_t pid, struct nt_identity *out);
	void *ctx;
};

/* "pid", "tid", "comm", "cgroup", "container", "pod" (or the one word
 * "declared") into a mask; returns -1 with *bad the unknown name. */
int nt_label_mask_parse(const char *const *names, size_t n, uint32_t *mask,
			const char **bad);
int nt_label_policy_add_rule(struct nt_label_policy *p, const char *glob,
			     uint32_t mask);
void nt_label_policy_free(struct nt_label_policy *p);
uint32_t nt_label_policy_mask(const struct nt_label_policy *p,
			      const char *family);

/* How one family's declared labels become its exposed ones. */
struct nt_label_map {
	uint32_t n_decl, n_eff;
	int32_t src[40];   /* per exposed label: declared index >= 0, or
			    * -(identity field + 1) */
	int32_t pid_idx;   /* the declared `pid` label */
	bool pid_dropped;  /* series hold many processes: never removed */
	const char *eff_names[40]; /* static strings or declared names */
};

/* NULL when the family stays as declared (no pid label, or "declared"). */
struct nt_label_map *nt_label_map_build(uint32_t mask,
					const char *const *decl,
					uint32_t n_decl);

/* Strings an applied map points into. */
struct nt_label_scratch {
	struct nt_identity id;
	char container[96];
};

/* Fill eff[0..map->n_eff) from the declared values; identity strings point
 * into *scratch. Resolves the pid (the cache's lock, maybe a /proc read):
 * call it outside the family's lock. */
void nt_label_map_apply(const struct nt_label_map *map,
			const struct nt_label_policy *p,
			const char *const *decl_values, const char **eff,
			struct nt_label_scratch *scratch);

#endif
