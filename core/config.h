/* SPDX-License-Identifier: MIT */
/*
 * The libconfig loader: the daemon's own keys, the instance list, and the
 * schema-driven validation of each plugin's keys into the plugin's config
 * struct. Every error is printed as "FILE:LINE: message" to `diag`.
 */
#ifndef NTCORE_CORE_CONFIG_H
#define NTCORE_CORE_CONFIG_H

#include <libconfig.h>
#include <stdbool.h>
#include <stdio.h>

#include "confread.h"
#include "ntcore/plugin.h"

/* Every allocation made for one instance's config, freed together. */
struct nt_arena {
	void **ptrs;
	size_t n, cap;
};
void *nt_arena_alloc(struct nt_arena *a, size_t size);
char *nt_arena_strdup(struct nt_arena *a, const char *s);
void nt_arena_free(struct nt_arena *a);

/* A sink's queue_kb (core key): 64 KiB to 4 GiB. */
#define NT_QUEUE_KB_MIN 64
#define NT_QUEUE_KB_MAX 4194304

struct nt_inst_cfg {
	const char *plugin; /* strings point into the config_t */
	char name[64];
	bool required;
	bool enabled;
	int log_level;      /* -1: the daemon's */
	const char **events;
	size_t n_events;
	bool events_set;
	uint32_t queue_kb;  /* sinks: their queue's size; 0: the default */
	config_setting_t *group;
	int line;
};

/* identity_families: which identity labels the metric families whose
 * names match a glob carry (issue 21). Strings owned by libconfig. */
struct nt_id_family {
	const char *match;
	const char **labels;
	size_t n_labels;
};

struct nt_config {
	config_t cfg;
	char *path;
	struct nt_conf_src src; /* files read (@include) and the line map */
	FILE *diag;          /* where errors go (stderr by default) */
	int log_level;
	const char **plugin_dirs;
	size_t n_plugin_dirs;
	const char **cgroups;   /* ntcore.cgroup: target cgroups */
	size_t n_cgroups;
	const char **id_labels; /* ntcore.identity_labels, NULL: auto */
	size_t n_id_labels;
	int id_labels_line;
	struct nt_id_family *id_families;
	size_t n_id_families;
	const char *kubelet_dir; /* NULL: the default, "": not read */
	const char *downward_dir; /* a downward-API volume, or NULL */
	struct nt_inst_cfg *insts;
	size_t n_insts;
};

/* Parse and check the file's structure (not the plugins' own keys, which
 * need the plugin's schema). With `text` non-NULL, parse it and use `path`
 * only as the name in messages. The file and its @include files are read
 * by confread.c (trusted, regular files only; nothing read can end the
 * process). Returns 0, or -1 after printing the error. */
int nt_config_load(struct nt_config *c, const char *path, const char *text,
		   FILE *diag);
void nt_config_free(struct nt_config *c);

/* Validate `group` against `keys`, ignoring the core's instance keys, and
 * build the config struct (`size` bytes) in *out from the arena. Returns 0
 * or -1 after printing every error found. */
int nt_config_fill(const struct nt_config *c, const config_setting_t *group,
		   const char *inst_name, const struct nt_cfg_key *keys,
		   uint32_t n_keys, uint32_t size, struct nt_arena *arena,
		   void **out);

/* The file and line of a config_t line (files joined by @include). */
void nt_config_where(const struct nt_config *c, int line, const char **file,
		     int *file_line);

/* Print "FILE:LINE: [inst] message" (inst may be NULL); `line` is a
 * config_t line, printed as the file and line it came from. */
void nt_config_error(const struct nt_config *c, int line, const char *inst,
		     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The config_t line of a key inside an instance group, or the group's. */
int nt_config_key_line(const config_setting_t *group, const char *key);

const char *nt_cfg_type_name(uint32_t type);

#endif
