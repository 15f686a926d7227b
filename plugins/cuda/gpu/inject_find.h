/* SPDX-License-Identifier: MIT */
/*
 * Which libcupti a job should load: the one that matches the CUDA runtime
 * the process loaded (never a CUPTI of another major, such as Triton's
 * libcupti.so.12 in a CUDA 13 job). Kept apart from the injection library so
 * the choice is unit-tested with made-up file systems.
 */
#ifndef NTCORE_INJECT_FIND_H
#define NTCORE_INJECT_FIND_H

#include <stdbool.h>
#include <stddef.h>

/* What the process shows, and how to look at the file system. */
struct nt_cupti_where {
	const char *const *loaded; /* paths of the loaded objects */
	size_t n_loaded;
	const char *override;      /* NTCORE_CUPTI_PATH, or NULL */
	int driver_major;          /* from cuDriverGetVersion, 0 unknown */
	const char *arch;          /* "x86_64" (toolkit's targets/<arch>-linux) */
	/* does this file exist (readable)? */
	bool (*exists)(void *arg, const char *path);
	/* up to max paths matching a glob pattern; returns how many */
	size_t (*glob)(void *arg, const char *pattern, char out[][512], size_t max);
	void *arg;
};

/*
 * The CUDA major of the job: the runtime's (libcudart*.so.N loaded), else
 * the driver's. 0 when neither says.
 */
int nt_cupti_cuda_major(const struct nt_cupti_where *w);

/*
 * Choose the CUPTI for the job, in this order: a libcupti.so.M already
 * loaded (PyTorch's kineto links it; two copies in one process must never
 * be), the NTCORE_CUPTI_PATH override, libcupti.so.M next to the loaded
 * libcudart (a venv's nvidia/cu13/lib; the cu12 wheels' ../../cuda_cupti/lib;
 * a toolkit's ../extras/CUPTI/lib64), the toolkits under /usr/local, and
 * last the bare soname for the dynamic linker's own search (*bare = true).
 * Writes the path to out and returns 0; or returns -1 with a one-line
 * reason in why (where it looked).
 */
int nt_cupti_find(const struct nt_cupti_where *w, char *out, size_t out_len,
		  bool *bare, char *why, size_t why_len);

#endif
