#!/bin/sh
# gen-errors.sh [CUDA_INCLUDE_DIR] > cuda_errors.h
# Regenerates the return-code name tables from the CUDA toolkit's headers
# (driver_types.h: cudaError_t, cuda.h: CUresult).
set -eu
inc=${1:-/usr/local/cuda/include}
cat <<'HDR'
/* SPDX-License-Identifier: MIT */
/*
 * ntcore cuda: names of the CUDA runtime (cudaError_t) and driver (CUresult)
 * return codes, as the CUDA 13 headers define them (values are facts of the
 * CUDA ABI; regenerate with plugins/cuda/gen-errors.sh when a toolkit adds
 * codes). nt_cuda_error_name() returns NULL for a code it does not know;
 * nt_cuda_error_format() always writes a name ("cudaError(1234)").
 */
#ifndef NTCORE_CUDA_ERRORS_H
#define NTCORE_CUDA_ERRORS_H

#include <stdio.h>

#include "cuda_api.h"

static inline const char *nt_cuda_runtime_error_name(int code)
{
	switch (code) {
	case 0: return "cudaSuccess";
HDR
grep -E '^\s*cudaError[A-Za-z0-9]* *= *[0-9]+' "$inc/driver_types.h" |
	sed -E 's/^\s*(cudaError[A-Za-z0-9]*) *= *([0-9]+).*/\2 \1/' |
	sort -n -u -k1,1 | awk '{printf "\tcase %s: return \"%s\";\n", $1, $2}'
cat <<'MID'
	default: return NULL;
	}
}

static inline const char *nt_cuda_driver_error_name(int code)
{
	switch (code) {
MID
grep -E '^\s*CUDA_(SUCCESS|ERROR_[A-Z0-9_]*) *= *[0-9]+' "$inc/cuda.h" |
	sed -E 's/^\s*(CUDA_[A-Z0-9_]*) *= *([0-9]+).*/\2 \1/' |
	sort -n -u -k1,1 | awk '{printf "\tcase %s: return \"%s\";\n", $1, $2}'
cat <<'END'
	default: return NULL;
	}
}

/* Name of `code` as returned by a function of `layer`, or NULL. */
static inline const char *nt_cuda_error_name(int layer, int code)
{
	return layer == NT_CUDA_LAYER_DRIVER ? nt_cuda_driver_error_name(code)
					     : nt_cuda_runtime_error_name(code);
}

/* Always a name: the known one or "cudaError(N)" / "CUresult(N)". */
static inline const char *nt_cuda_error_format(int layer, int code, char *buf,
					       size_t bufsz)
{
	const char *n = nt_cuda_error_name(layer, code);

	if (n)
		return n;
	snprintf(buf, bufsz, "%s(%d)",
		 layer == NT_CUDA_LAYER_DRIVER ? "CUresult" : "cudaError", code);
	return buf;
}

#endif /* NTCORE_CUDA_ERRORS_H */
END
