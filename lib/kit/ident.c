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

static const struct {
	const char *schema_prefix, *field, *key;
} field_keys[] = {
	{"proc.exit", "exit_code", "process.exit.code"},
	{"net.", "laddr", "network.local.address"},
	{"net.", "lport", "network.local.port"},
	{"net.", "raddr", "network.peer.address"},
	{"net.", "rport", "network.peer.port"},
	{"net.", "proto", "network.transport"},
	{"python.", "function", "code.function.name"},
	{"python.", "file", "code.file.path"},
	{"python.", "line", "code.line.number"},
	{"python.", "exc_type", "exception.type"},
};

const char *nt_otel_field_key(const char *schema, const char *field)
{
	for (size_t i = 0; i < sizeof(field_keys) / sizeof(field_keys[0]); i++)
		if (strncmp(schema, field_keys[i].schema_prefix,
			    strlen(field_keys[i].schema_prefix)) == 0 &&
		    strcmp(field, field_keys[i].field) == 0)
			return field_keys[i].key;
	return NULL;
}

static const struct {
	const char *label, *key;
} label_keys[] = {
	{"pid", "process.pid"},
	{"tid", "thread.id"},
	{"comm", "process.executable.name"},
	{"container_id", "container.id"},
	{"namespace", "k8s.namespace.name"},
	{"pod", "k8s.pod.name"},
	{"uid", "k8s.pod.uid"},
	{"cgroup", "ntcore.cgroup"},
};

const char *nt_otel_label_key(const char *label)
{
	for (size_t i = 0; i < sizeof(label_keys) / sizeof(label_keys[0]); i++)
		if (strcmp(label, label_keys[i].label) == 0)
			return label_keys[i].key;
	return NULL;
}
