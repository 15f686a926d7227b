/* SPDX-License-Identifier: MIT */
/* --list-plugins and --help-plugin: what the search path holds. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon.h"
#include "search.h"

static bool ends_with_so(const char *name)
{
	size_t len = strlen(name);

	return len > 3 && strcmp(name + len - 3, ".so") == 0;
}

static void list_one(const char *path)
{
	struct nt_loaded lib;
	char why[1024];

	if (nt_loader_open(path, &lib, why, sizeof(why))) {
		printf("  %-16s %-9s %-5s %s\n      (%s)\n", "?", "-", "-", path, why);
		return;
	}
	printf("  %-16s %-9s %u.%-3u %s\n      %s\n", lib.desc.name,
	       nt_kind_name(lib.desc.kind), lib.desc.abi_major,
	       lib.desc.abi_minor, path,
	       lib.desc.description ? lib.desc.description : "");
	nt_loader_close(&lib);
}

/* Plugins sit at most three folders down (build trees: plugins/cuda/detectors). */
static void scan(const char *dir, int depth)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, alphasort);

	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;
		const char *name = names[i]->d_name;
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		if (name[0] != '.' && stat(path, &st) == 0) {
			if (S_ISREG(st.st_mode) && ends_with_so(name))
				list_one(path);
			else if (S_ISDIR(st.st_mode) && depth < 3)
				scan(path, depth + 1);
		}
		free(names[i]);
	}
	if (n >= 0)
		free(names);
}

static void search_for(const struct nt_options *opt, struct nt_config *cfg,
		       struct nt_search *search)
{
	memset(cfg, 0, sizeof(*cfg));
	/* A config is optional here: its plugin_dirs join the search. */
	if (opt->config_path &&
	    nt_config_load(cfg, opt->config_path, opt->config_text, stderr) == 0)
		nt_search_build(search, cfg->plugin_dirs, cfg->n_plugin_dirs);
	else
		nt_search_build(search, NULL, 0);
}

int nt_list_plugins(const struct nt_options *opt)
{
	struct nt_config cfg;
	struct nt_search search;

	search_for(opt, &cfg, &search);
	printf("  %-16s %-9s %-5s %s\n", "NAME", "KIND", "ABI", "FILE / DESCRIPTION");
	for (size_t i = 0; i < search.n; i++)
		scan(search.dirs[i], 0);
	nt_search_free(&search);
	nt_config_free(&cfg);
	return 0;
}

static void print_keys(const struct nt_cfg_key *keys, uint32_t n, int indent)
{
	for (uint32_t i = 0; i < n; i++) {
		const struct nt_cfg_key *k = &keys[i];
		printf("%*s%-20s %-18s default %-12s %s", indent, "", k->key,
		       nt_cfg_type_name(k->type), k->def ? k->def : "(required)",
		       k->desc ? k->desc : "");
		/* integers as integers: [64..1048576], not 1.04858e+06 */
		if (k->type == NT_CFG_INT && k->min <= k->max)
			printf(" [%.0f..%.0f]", k->min, k->max);
		else if (k->type == NT_CFG_FLOAT && k->min <= k->max)
			printf(" [%.17g..%.17g]", k->min, k->max);
		printf("\n");
		if (k->type == NT_CFG_GROUP_LIST)
			print_keys(k->sub, k->n_sub, indent + 4);
	}
}

int nt_help_plugin(const struct nt_options *opt, const char *name)
{
	struct nt_config cfg;
	struct nt_search search;
	struct nt_loaded lib;
	char path[4096], why[1024];
	int status = 0;

	search_for(opt, &cfg, &search);
	if (nt_loader_find(search.dirs, search.n, name, path, sizeof(path))) {
		nt_search_text(&search, why, sizeof(why));
		fprintf(stderr, "ntcore: plugin '%s' not found (searched: %s)\n", name, why);
		status = 2;
	} else if (nt_loader_open(path, &lib, why, sizeof(why))) {
		fprintf(stderr, "ntcore: %s\n", why);
		status = 2;
	} else {
		printf("%s (%s, ABI %u.%u): %s\n%s\n\nkeys:\n", lib.desc.name,
		       nt_kind_name(lib.desc.kind), lib.desc.abi_major,
		       lib.desc.abi_minor, lib.desc.description ? lib.desc.description : "",
		       path);
		printf("    %-20s %-18s %s\n", "plugin", "a string",
		       "the plugin's name (core key)");
		printf("    %-20s %-18s %s\n", "name", "a string",
		       "instance name, default <plugin>.<n> (core key)");
		printf("    %-20s %-18s %s\n", "required", "a boolean",
		       "a failure stops ntcore instead of going on (core key)");
		printf("    %-20s %-18s %s\n", "enabled", "a boolean", "default true (core key)");
		printf("    %-20s %-18s %s\n", "log_level", "a string",
		       "error, warn, info or debug (core key)");
		printf("    %-20s %-18s %s\n", "events", "a list of strings",
		       "event globs a sink or detector receives (core key)");
		if (lib.desc.kind == NT_KIND_SINK)
			printf("    %-20s %-18s %s\n", "queue_kb", "an integer",
			       "its own queue, KiB, default 65536 (core key)");
		print_keys(lib.desc.config, lib.desc.n_config, 4);
		nt_loader_close(&lib);
	}
	nt_search_free(&search);
	nt_config_free(&cfg);
	return status;
}
