/* SPDX-License-Identifier: MIT */
/*
 * Whether this process may load and attach BPF programs, and if not, what
 * it lacks, in words for the one line a user sees.
 */
#ifndef NTCORE_CORE_PRIVS_H
#define NTCORE_CORE_PRIVS_H

#include <stdbool.h>
#include <stddef.h>

/* True when the effective capabilities allow tracing (CAP_BPF and
 * CAP_PERFMON, or CAP_SYS_ADMIN, which holds both). Otherwise false, and
 * `need` receives what is missing: "root, or the capabilities CAP_BPF and
 * CAP_PERFMON (this process lacks CAP_BPF, CAP_PERFMON)". */
bool nt_privs_can_trace(char *need, size_t need_len);

#endif
