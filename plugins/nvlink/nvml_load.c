/* SPDX-License-Identifier: MIT */
/* nvlink: dlopen of libnvidia-ml (see nvml_load.h). */
#include "nvml_load.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int nvml_lib_open(struct nvml_lib *l, const char *path, char *err, size_t n)
{
	const char *e;

	memset(l, 0, sizeof(*l));
	l->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!l->handle) {
		e = dlerror();
		snprintf(err, n, "%s", e ? e : path);
		return -1;
	}
	*(void **)&l->error_string = dlsym(l->handle, "nvmlErrorString");
#define NVML_SYM_(m, sym, params) *(void **)&l->m = dlsym(l->handle, sym);
	NVML_FUNCS(NVML_SYM_)
#undef NVML_SYM_
	e = !l->init              ? "nvmlInit_v2"
	    : !l->shutdown        ? "nvmlShutdown"
	    : !l->device_count    ? "nvmlDeviceGetCount_v2"
	    : !l->device_by_index ? "nvmlDeviceGetHandleByIndex_v2"
				  : NULL;
	if (e) {
		snprintf(err, n, "%s: no %s (not an NVML library?)", path, e);
		nvml_lib_close(l);
		return -1;
	}
	return 0;
}

void nvml_lib_close(struct nvml_lib *l)
{
	if (l->handle)
		dlclose(l->handle);
	memset(l, 0, sizeof(*l));
}

const char *nvml_lib_strerror(const struct nvml_lib *l, nvml_return_t r,
			      char *buf, size_t n)
{
	const char *s = l->error_string ? l->error_string(r) : NULL;

	if (s)
		return s;
	snprintf(buf, n, "NVML error %d", r);
	return buf;
}
