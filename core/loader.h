/* SPDX-License-Identifier: MIT */
/*
 * Finding and opening plugin shared objects. The loader checks that the
 * file and every directory above it are trusted before dlopen (trust.h:
 * owned by root or ntcore's user, writable by no one else), then
 * the descriptor: ABI major, size, kind, required ops. It reads no field
 * beyond the size the plugin states, copying the descriptor into a
 * zero-filled current-layout struct so older minors load.
 */
#ifndef NTCORE_CORE_LOADER_H
#define NTCORE_CORE_LOADER_H

#include <stddef.h>

#include "ntcore/plugin.h"

struct nt_loaded {
	void *handle;
	char *path;
	struct nt_plugin_desc desc; /* current layout; absent fields are zero */
	const struct nt_plugin_desc *raw;
};

/* Smallest descriptor the loader accepts (the ABI 1.0 layout). */
#define NT_DESC_SIZE_1_0 offsetof(struct nt_plugin_desc, flush)

/* Search `dirs` for the plugin `name`; on success writes the path. Returns 0
 * or -ENOENT. */
int nt_loader_find(const char *const *dirs, size_t n_dirs, const char *name,
		   char *path, size_t path_len);

/* Check a descriptor (already read from a .so or built in a test). Returns
 * NULL when acceptable, else a message written into `why`. */
const char *nt_loader_check(const struct nt_plugin_desc *raw, const char *file,
			    char *why, size_t why_len);

/* Open and check a plugin file. Returns 0, or -1 with a message in `why`. */
int nt_loader_open(const char *path, struct nt_loaded *out, char *why,
		   size_t why_len);
void nt_loader_close(struct nt_loaded *l);

const char *nt_kind_name(uint32_t kind);

#endif
