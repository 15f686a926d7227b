/* SPDX-License-Identifier: MIT */
#include "loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trust.h"

const char *nt_kind_name(uint32_t kind)
{
	switch (kind) {
	case NT_KIND_PROBE: return "probe";
	case NT_KIND_DETECTOR: return "detector";
	case NT_KIND_SINK: return "sink";
	default: return "unknown";
	}
}

static bool is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int nt_loader_find(const char *const *dirs, size_t n_dirs, const char *name,
		   char *path, size_t path_len)
{
	char prefix[128];
	const char *underscore = strchr(name, '_');

	snprintf(prefix, sizeof(prefix), "%.*s",
		 underscore ? (int)(underscore - name) : 0, name);
	for (size_t i = 0; i < n_dirs; i++) {
		if (!dirs[i] || !*dirs[i])
			continue;
		snprintf(path, path_len, "%s/%s.so", dirs[i], name);
		if (is_file(path))
			return 0;
		snprintf(path, path_len, "%s/%s/%s.so", dirs[i], name, name);
		if (is_file(path))
			return 0;
		if (!underscore)
			continue;
		snprintf(path, path_len, "%s/%s/%s.so", dirs[i], prefix, name);
		if (is_file(path))
			return 0;
		snprintf(path, path_len, "%s/%s/detectors/%s.so", dirs[i], prefix,
			 name);
		if (is_file(path))
			return 0;
	}
	return -ENOENT;
}

static const char *missing_op(const struct nt_plugin_desc *d)
{
	if (!d->init) return "init";
	if (!d->attach) return "attach";
	if (!d->poll) return "poll";
	if (!d->detach) return "detach";
	if (!d->fini) return "fini";
	if ((d->kind == NT_KIND_DETECTOR || d->kind == NT_KIND_SINK) && !d->consume)
		return "consume";
	return NULL;
}

const char *nt_loader_check(const struct nt_plugin_desc *raw, const char *file,
			    char *why, size_t why_len)
{
	struct nt_plugin_desc d = {0};
	const char *op;

	if (raw->abi_major != NT_ABI_MAJOR) {
		snprintf(why, why_len,
			 "%s: plugin ABI %u.%u is not supported by this ntcore (ABI %d.%d); rebuild the plugin against this SDK",
			 file, raw->abi_major, raw->abi_minor, NT_ABI_MAJOR,
			 NT_ABI_MINOR);
		return why;
	}
	if (raw->size < NT_DESC_SIZE_1_0) {
		snprintf(why, why_len,
			 "%s: descriptor size %u is smaller than ABI %d.0's %zu bytes",
			 file, raw->size, NT_ABI_MAJOR, (size_t)NT_DESC_SIZE_1_0);
		return why;
	}
	memcpy(&d, raw, raw->size < sizeof(d) ? raw->size : sizeof(d));
	if (!d.name || !*d.name) {
		snprintf(why, why_len, "%s: descriptor has no name", file);
		return why;
	}
	if (d.kind < NT_KIND_PROBE || d.kind > NT_KIND_SINK) {
		snprintf(why, why_len, "%s: plugin '%s' has unknown kind %u", file,
			 d.name, d.kind);
		return why;
	}
	if ((op = missing_op(&d))) {
		snprintf(why, why_len, "%s: plugin '%s' lacks the required op '%s'",
			 file, d.name, op);
		return why;
	}
	if (d.n_config && !d.config) {
		snprintf(why, why_len, "%s: plugin '%s' declares %u config keys but no table",
			 file, d.name, d.n_config);
		return why;
	}
	return NULL;
}

int nt_loader_open(const char *path, struct nt_loaded *out, char *why,
		   size_t why_len)
{
	char real[PATH_MAX];

	memset(out, 0, sizeof(*out));
	/* Before dlopen: opening runs the file's constructors. The resolved
	 * path is what was checked, so that is what gets opened. */
	if (nt_trust_path(path, "plugin file", real, why, why_len))
		return -1;
	out->handle = dlopen(real, RTLD_NOW | RTLD_LOCAL);
	if (!out->handle) {
		snprintf(why, why_len, "%s: %s", path, dlerror());
		return -1;
	}
	out->raw = dlsym(out->handle, NT_PLUGIN_SYMBOL);
	if (!out->raw) {
		snprintf(why, why_len, "%s: not an ntcore plugin (no '%s' symbol)",
			 path, NT_PLUGIN_SYMBOL);
		goto fail;
	}
	if (nt_loader_check(out->raw, path, why, why_len))
		goto fail;
	memcpy(&out->desc, out->raw,
	       out->raw->size < sizeof(out->desc) ? out->raw->size : sizeof(out->desc));
	out->path = strdup(path);
	return 0;
fail:
	dlclose(out->handle);
	out->handle = NULL;
	return -1;
}

void nt_loader_close(struct nt_loaded *l)
{
	if (l->handle)
		dlclose(l->handle);
	free(l->path);
	memset(l, 0, sizeof(*l));
}
