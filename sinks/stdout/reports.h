/* SPDX-License-Identifier: MIT */
/*
 * The latest text of each `*.report` event, kept per event type AND per
 * process, so that a report is shown under the process it describes: a
 * short-lived helper (a shell shim, readlink) reporting last must not stand
 * for the job. Per type, the one shown is the report of a process the user
 * named (-p, the -- CMD), else of the process that reported most often
 * (the long-lived one), the latest on a tie.
 */
#ifndef NTCORE_STDOUT_REPORTS_H
#define NTCORE_STDOUT_REPORTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define REPORTS_PER_TYPE 64 /* processes remembered per report type */

struct report {
	const char *type; /* the schema's name (outlives the sink) */
	uint32_t pid;
	char comm[16];
	char *text;       /* owned */
	uint64_t count;   /* reports of this process */
	uint64_t seq;     /* when last updated */
};

struct reports {
	struct report *v; /* owned */
	size_t n, cap;
	uint64_t seq;
};

/* Keeps a copy of text[0..len) as the latest report of (type, pid). */
void reports_keep(struct reports *r, const char *type, uint32_t pid,
		  const char *comm, const char *text, uint32_t len);
/* Prints, per type, the report chosen as above, headed
 * "── TYPE: pid N (COMM) ──", and how many other processes reported. */
void reports_print(const struct reports *r, FILE *out, const uint32_t *named,
		   size_t n_named, const char *bold, const char *reset);
void reports_free(struct reports *r);

#endif
