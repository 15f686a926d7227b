/* SPDX-License-Identifier: MIT */
/*
 * Planted API errors: double_free() frees the same pointer twice, 50 times
 * over (cudaFree -> cudaErrorInvalidValue 50 times from one place), and
 * bad_copy() copies from NULL 3 times (cudaMemcpy -> cudaErrorInvalidValue).
 */
#include "wl.h"

NOINLINE void double_free(void)
{
	void *p = NULL;

	check(cudaMalloc(&p, 4096), "cudaMalloc");
	check(cudaFree(p), "cudaFree");
	if (cudaFree(p) != cudaErrorInvalidValue)
		exit(5);
}

NOINLINE void bad_copy(void *dst)
{
	if (cudaMemcpy(dst, NULL, 16, cudaMemcpyHostToDevice) != cudaErrorInvalidValue)
		exit(6);
}

int main(void)
{
	void *d = NULL;

	check(cudaMalloc(&d, 4096), "cudaMalloc");
	for (int i = 0; i < 50; i++)
		double_free();
	for (int i = 0; i < 3; i++)
		bad_copy(d);
	check(cudaFree(d), "cudaFree");
	return 0;
}
