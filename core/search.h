/* SPDX-License-Identifier: MIT */
/* The plugin search path: $NTCORE_PLUGIN_PATH, then the config's
 * ntcore.plugin_dirs, then the install directory. */
#ifndef NTCORE_CORE_SEARCH_H
#define NTCORE_CORE_SEARCH_H

#include <stddef.h>

struct nt_search {
	const char **dirs;
	size_t n;
	char *env_copy; /* owns the strings split from the environment */
};

void nt_search_build(struct nt_search *s, const char *const *cfg_dirs,
		     size_t n_cfg_dirs);
void nt_search_text(const struct nt_search *s, char *buf, size_t len);
void nt_search_free(struct nt_search *s);

#endif
