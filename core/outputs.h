/* SPDX-License-Identifier: MIT */
/*
 * Files the plugins wrote, printed once at the end of a run, one line
 * each ("ntcore: wrote ntcore-training.folded (429 stacks)"), so that the
 * user learns where every output went without reading each plugin's log.
 */
#ifndef NTCORE_CORE_OUTPUTS_H
#define NTCORE_CORE_OUTPUTS_H

#include <stddef.h>

struct nt_output {
	char *path; /* owned */
	char *what; /* owned, may be NULL */
};

struct nt_outputs {
	struct nt_output *v; /* owned, in the order first written */
	size_t n;
};

/* Records PATH (a later call for the same path replaces WHAT). 0 or -ENOMEM. */
int nt_outputs_add(struct nt_outputs *o, const char *path, const char *what);
/* "ntcore: wrote PATH (WHAT)" on stderr for each. */
void nt_outputs_print(const struct nt_outputs *o);
void nt_outputs_free(struct nt_outputs *o);

#endif
