/* SPDX-License-Identifier: MIT */
#include "search.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nt_search_build(struct nt_search *s, const char *const *cfg_dirs,
		     size_t n_cfg_dirs)
{
	const char *env = getenv("NTCORE_PLUGIN_PATH");
	size_t max = n_cfg_dirs + 2;

	memset(s, 0, sizeof(*s));
	if (env && *env) {
		s->env_copy = strdup(env);
		for (const char *p = env; *p; p++)
			max += *p == ':';
	}
	s->dirs = calloc(max, sizeof(char *));
	if (!s->dirs)
		return;
	for (char *save = NULL, *tok = s->env_copy ? strtok_r(s->env_copy, ":", &save) : NULL;
	     tok; tok = strtok_r(NULL, ":", &save))
		s->dirs[s->n++] = tok;
	for (size_t i = 0; i < n_cfg_dirs; i++)
		s->dirs[s->n++] = cfg_dirs[i];
	s->dirs[s->n++] = NTCORE_PLUGINDIR;
}

void nt_search_text(const struct nt_search *s, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < s->n && used < len; i++) {
		int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
				 s->dirs[i]);
		if (n < 0)
			break;
		used += (size_t)n;
	}
}

void nt_search_free(struct nt_search *s)
{
	free(s->dirs);
	free(s->env_copy);
	memset(s, 0, sizeof(*s));
}
