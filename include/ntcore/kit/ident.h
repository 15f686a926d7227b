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

#endif
