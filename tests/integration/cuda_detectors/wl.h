/* SPDX-License-Identifier: MIT */
/*
 * Shared bits of the planted-bug workloads of tests/integration/cuda_detectors.sh.
 * They link against the fixture CUDA runtime (tests/fixtures/cuda, a 16 GiB
 * fake device), are built with frame pointers and -rdynamic so stacks and
 * kernel names resolve, and print what the test asserts on stdout.
 */
#ifndef WL_H
#define WL_H

#include "cuda_fx_api.h" /* tests/fixtures/cuda: no toolkit needed */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, used, visibility("default")))
#define MiB (1024ULL * 1024ULL)
#define GiB (1024ULL * MiB)

static inline uint64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static inline void check(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "%s: unexpected error %d\n", what, (int)e);
		exit(3);
	}
}

/* A kernel host stub, as nvcc generates for a __global__ function (the
 * fixture names it through dladdr: link with -rdynamic). */
NOINLINE void wl_kernel(float *x, int n)
{
	void *args[] = { &x, &n };
	dim3 g = { (unsigned)(n + 255) / 256, 1, 1 }, b = { 256, 1, 1 };

	check(cudaLaunchKernel((const void *)wl_kernel, g, b, args, 0, NULL),
	      "cudaLaunchKernel");
}

#endif
