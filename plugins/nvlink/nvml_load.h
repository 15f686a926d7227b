/* SPDX-License-Identifier: MIT */
/*
 * nvlink: NVML opened with dlopen at run time, so ntcore builds and runs
 * where no NVIDIA driver is installed (the plugin then says so once and
 * goes on with NCCL and the kernel events).
 */
#ifndef NVLINK_NVML_LOAD_H
#define NVLINK_NVML_LOAD_H

#include <stddef.h>

#include "nvml_api.h"

struct nvml_lib {
	void *handle;
	const char *(*error_string)(nvml_return_t);
#define NVML_FP_(m, sym, params) nvml_return_t (*m) params;
	NVML_FUNCS(NVML_FP_)
#undef NVML_FP_
};

/*
 * dlopen `path` (a file name is searched the dynamic loader's way) and
 * resolve the functions. On failure returns -1 with a one-line reason in
 * `err` ("libnvidia-ml.so.1: cannot open shared object file ..." or the
 * missing required symbol) and leaves nothing open.
 */
int nvml_lib_open(struct nvml_lib *l, const char *path, char *err, size_t n);
void nvml_lib_close(struct nvml_lib *l);
/* nvmlErrorString when there is one, else "NVML error N" (in `buf`). */
const char *nvml_lib_strerror(const struct nvml_lib *l, nvml_return_t r,
			      char *buf, size_t n);

#endif /* NVLINK_NVML_LOAD_H */
