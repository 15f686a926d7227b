/* SPDX-License-Identifier: MIT */
/* Identity of a process as attributes under OpenTelemetry's keys. */
#include "ntcore/kit/ident.h"

#include <string.h>

size_t nt_ident_attrs(const struct nt_identity *id,
		      struct nt_ident_attr out[NT_IDENT_ATTRS_MAX])
{
	const struct nt_ident_attr all[NT_IDENT_ATTRS_MAX] = {
		{"container.id", id->container_id},
		{"container.runtime", id->runtime},
		{"k8s.pod.uid", id->pod_uid},
		{"k8s.pod.name", id->pod_name},
		{"k8s.namespace.name", id->pod_namespace},
		{"ntcore.k8s.qos", id->qos},
		{"ntcore.cgroup", id->cgroup},
	};
	size_t n = 0;

	for (size_t i = 0; i < NT_IDENT_ATTRS_MAX; i++)
		if (all[i].value[0])
			out[n++] = all[i];
	return n;
}

void nt_sb_ident_json(struct nt_sb *b, const struct nt_identity *id)
{
	struct nt_ident_attr a[NT_IDENT_ATTRS_MAX];
	size_t n = nt_ident_attrs(id, a);

	for (size_t i = 0; i < n; i++) {
		nt_sb_putc(b, ',');
		nt_sb_json_str(b, a[i].key, strlen(a[i].key));
		nt_sb_putc(b, ':');
		nt_sb_json_str(b, a[i].value, strlen(a[i].value));
	}
}
