/* SPDX-License-Identifier: MIT */
/* The list of files written during a run (see outputs.h). */
#include "outputs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "ntcore/plugin.h"

int nt_outputs_add(struct nt_outputs *o, const char *path, const char *what)
{
	char *what_copy = what ? strdup(what) : NULL;

	if (!path || (what && !what_copy))
		return free(what_copy), -ENOMEM;
	for (size_t i = 0; i < o->n; i++)
		if (strcmp(o->v[i].path, path) == 0) {
			free(o->v[i].what);
			o->v[i].what = what_copy;
			return 0;
		}
	struct nt_output *grown = realloc(o->v, (o->n + 1) * sizeof(*grown));
	char *path_copy = strdup(path);
	if (!grown || !path_copy) {
		if (grown)
			o->v = grown;
		free(path_copy);
		free(what_copy);
		return -ENOMEM;
	}
	o->v = grown;
	o->v[o->n++] = (struct nt_output){.path = path_copy, .what = what_copy};
	return 0;
}

void nt_outputs_print(const struct nt_outputs *o)
{
	for (size_t i = 0; i < o->n; i++) {
		if (o->v[i].what && *o->v[i].what)
			nt_log(NT_LOG_INFO, NULL, "wrote %s (%s)", o->v[i].path,
			       o->v[i].what);
		else
			nt_log(NT_LOG_INFO, NULL, "wrote %s", o->v[i].path);
	}
}

void nt_outputs_free(struct nt_outputs *o)
{
	for (size_t i = 0; i < o->n; i++) {
		free(o->v[i].path);
		free(o->v[i].what);
	}
	free(o->v);
	o->v = NULL;
	o->n = 0;
}
