/* SPDX-License-Identifier: MIT */
/*
 * Planted leak: leak_here() allocates 3 x 4096 + 1000 = 13288 bytes of
 * device memory that are never freed; everything else (200 allocations of
 * churn in work_step, a buffer in setup) is freed before exit.
 * Prints "LEAK_BYTES=13288".
 */
#include "wl.h"

NOINLINE void *leak_here(size_t n)
{
	void *p = NULL;

	check(cudaMalloc(&p, n), "cudaMalloc(leak)");
	return p;
}

NOINLINE void work_step(float *buf, int i)
{
	void *tmp = NULL;

	check(cudaMalloc(&tmp, (size_t)(i % 7 + 1) * 65536), "cudaMalloc(tmp)");
	wl_kernel(buf, 1024);
	check(cudaFree(tmp), "cudaFree(tmp)");
}

int main(void)
{
	float *buf = NULL;

	check(cudaMalloc((void **)&buf, 4 * MiB), "cudaMalloc(buf)");
	for (int i = 0; i < 200; i++) {
		work_step(buf, i);
		if (i == 50 || i == 100 || i == 150)
			leak_here(4096);
	}
	leak_here(1000);
	check(cudaDeviceSynchronize(), "sync");
	check(cudaFree(buf), "cudaFree(buf)");
	printf("LEAK_BYTES=%d\n", 3 * 4096 + 1000);
	return 0;
}
