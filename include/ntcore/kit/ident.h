/* SPDX-License-Identifier: MIT */
/*
 * Identity of a process as attributes (issue 21): the non-empty fields of
 * a struct nt_identity (host->identity, ABI 1.7) under OpenTelemetry's
 * semantic-convention keys, so every sink names them alike:
 *   container.id, container.runtime, k8s.pod.uid, k8s.pod.name,
 *   k8s.namespace.name; and ntcore's own ntcore.cgroup, ntcore.k8s.qos
 *   (no convention names them).
 */
#ifndef NTCORE_KIT_IDENT_H
#define NTCORE_KIT_IDENT_H

#include <stddef.h>

#include "../identity.h"
#include "sb.h"

#define NT_IDENT_ATTRS_MAX 7

struct nt_ident_attr {
	const char *key;   /* static */
	const char *value; /* points into the struct nt_identity */
};

/* Fills out[] with the non-empty fields, in a fixed order; returns how
 * many. */
size_t nt_ident_attrs(const struct nt_identity *id,
		      struct nt_ident_attr out[NT_IDENT_ATTRS_MAX]);

/* Appends `,"KEY":"VALUE"` for each non-empty field (JSON Lines sinks). */
void nt_sb_ident_json(struct nt_sb *b, const struct nt_identity *id);

/* The OpenTelemetry attribute key of an event field where a semantic
 * convention names what it holds (proc.exit's exit_code is
 * process.exit.code; net.*'s laddr/lport/raddr/rport/proto are
 * network.local.address ... network.transport; python.*'s function, file,
 * line, exc_type are code.function.name, code.file.path,
 * code.line.number, exception.type), else NULL (keep the field's name). */
const char *nt_otel_field_key(const char *schema, const char *field);

/* The OpenTelemetry attribute key of a metric label: pid process.pid,
 * tid thread.id, comm process.executable.name, container_id container.id,
 * namespace k8s.namespace.name, pod k8s.pod.name, uid k8s.pod.uid, cgroup
 * ntcore.cgroup; else NULL (keep the label's name). */
const char *nt_otel_label_key(const char *label);

#endif
