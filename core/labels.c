/* SPDX-License-Identifier: MIT */
/* Identity labels of metric families: the policy and the label maps. */
#include "labels.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *word;
	uint32_t bit;
} words[] = {
	{"pid", NT_IDL_PID},       {"tid", NT_IDL_TID},
	{"comm", NT_IDL_COMM},     {"cgroup", NT_IDL_CGROUP},
	{"container", NT_IDL_CONTAINER}, {"pod", NT_IDL_POD},
	{"declared", NT_IDL_DECLARED},
};

int nt_label_mask_parse(const char *const *names, size_t n, uint32_t *mask,
			const char **bad)
{
	*mask = 0;
	for (size_t i = 0; i < n; i++) {
		size_t w = 0;
		while (w < sizeof(words) / sizeof(words[0]) &&
		       strcmp(words[w].word, names[i]) != 0)
			w++;
		if (w == sizeof(words) / sizeof(words[0])) {
			*bad = names[i];
			return -1;
		}
		*mask |= words[w].bit;
	}
	if ((*mask & NT_IDL_DECLARED) && *mask != NT_IDL_DECLARED) {
		*bad = "declared (alone, not with other labels)";
		return -1;
	}
	return 0;
}

int nt_label_policy_add_rule(struct nt_label_policy *p, const char *glob,
			     uint32_t mask)
{
	struct nt_label_family_rule *grown =
		realloc(p->rules, (p->n_rules + 1) * sizeof(*grown));

	if (!grown)
		return -ENOMEM;
	p->rules = grown;
	if (!(grown[p->n_rules].glob = strdup(glob)))
		return -ENOMEM;
	grown[p->n_rules++].mask = mask;
	return 0;
}

void nt_label_policy_free(struct nt_label_policy *p)
{
	for (size_t i = 0; i < p->n_rules; i++)
		free(p->rules[i].glob);
	free(p->rules);
	p->rules = NULL;
	p->n_rules = 0;
}

uint32_t nt_label_policy_mask(const struct nt_label_policy *p,
			      const char *family)
{
	for (size_t i = 0; i < p->n_rules; i++)
		if (fnmatch(p->rules[i].glob, family, 0) == 0)
			return p->rules[i].mask;
	return p->default_mask;
}

/* The identity fields, in the order they are appended. */
enum { F_CGROUP, F_CONTAINER, F_NAMESPACE, F_POD, F_UID, F_COUNT };
static const char *const field_label[F_COUNT] = {
	"cgroup", "container_id", "namespace", "pod", "uid",
};
static const uint32_t field_bit[F_COUNT] = {
	NT_IDL_CGROUP, NT_IDL_CONTAINER, NT_IDL_POD, NT_IDL_POD, NT_IDL_POD,
};

static bool declared_has(const char *const *decl, uint32_t n, const char *name)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(decl[i], name) == 0)
			return true;
	return false;
}

static bool keep_declared(uint32_t mask, const char *name)
{
	if (strcmp(name, "pid") == 0)
		return mask & NT_IDL_PID;
	if (strcmp(name, "tid") == 0)
		return mask & NT_IDL_TID;
	if (strcmp(name, "comm") == 0)
		return mask & NT_IDL_COMM;
	return true;
}

struct nt_label_map *nt_label_map_build(uint32_t mask,
					const char *const *decl,
					uint32_t n_decl)
{
	struct nt_label_map *map;
	int32_t pid_idx = -1;

	for (uint32_t i = 0; i < n_decl; i++)
		if (strcmp(decl[i], "pid") == 0)
			pid_idx = (int32_t)i;
	if (pid_idx < 0 || (mask & NT_IDL_DECLARED) || n_decl + F_COUNT > 40)
		return NULL;
	if (!(map = calloc(1, sizeof(*map))))
		return NULL;
	map->n_decl = n_decl;
	map->pid_idx = pid_idx;
	map->pid_dropped = !(mask & NT_IDL_PID);
	for (uint32_t i = 0; i < n_decl; i++)
		if (keep_declared(mask, decl[i])) {
			map->src[map->n_eff] = (int32_t)i;
			map->eff_names[map->n_eff++] = decl[i];
		}
	for (int f = 0; f < F_COUNT; f++)
		if ((mask & field_bit[f]) && !declared_has(decl, n_decl, field_label[f])) {
			map->src[map->n_eff] = -(f + 1);
			map->eff_names[map->n_eff++] = field_label[f];
		}
	return map;
}

static const char *field_value(int f, struct nt_label_scratch *s)
{
	switch (f) {
	case F_CGROUP:
		return s->id.cgroup;
	case F_CONTAINER:
		/* as kube-state-metrics' container_id: "containerd://ID" */
		if (s->id.runtime[0] && s->id.container_id[0])
			snprintf(s->container, sizeof(s->container), "%s://%s",
				 s->id.runtime, s->id.container_id);
		else
			snprintf(s->container, sizeof(s->container), "%s",
				 s->id.container_id);
		return s->container;
	case F_NAMESPACE:
		return s->id.pod_namespace;
	case F_POD:
		return s->id.pod_name;
	default:
		return s->id.pod_uid;
	}
}

void nt_label_map_apply(const struct nt_label_map *map,
			const struct nt_label_policy *p,
			const char *const *decl_values, const char **eff,
			struct nt_label_scratch *scratch)
{
	bool want_ident = false;

	for (uint32_t j = 0; j < map->n_eff; j++)
		want_ident |= map->src[j] < 0;
	memset(&scratch->id, 0, sizeof(scratch->id));
	if (want_ident && p->ident) {
		const char *pid_text = decl_values[map->pid_idx];
		unsigned long pid = pid_text ? strtoul(pid_text, NULL, 10) : 0;
		if (pid)
			p->ident(p->ctx, (uint32_t)pid, &scratch->id);
	}
	for (uint32_t j = 0; j < map->n_eff; j++)
		eff[j] = map->src[j] >= 0 ? decl_values[map->src[j]]
					  : field_value(-map->src[j] - 1, scratch);
}
