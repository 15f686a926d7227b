/* SPDX-License-Identifier: MIT */
/*
 * A clean job: a fixed set of buffers, per-step scratch allocations freed
 * within the step, kernels, copies and syncs for 2 s, everything freed at
 * the end. No detector may alert on it.
 */
#include "wl.h"

NOINLINE void step(float *w, float *host)
{
	void *scratch = NULL;

	check(cudaMalloc(&scratch, 8 * MiB), "cudaMalloc(scratch)");
	wl_kernel(w, 8192);
	check(cudaMemcpy(host, w, 4096, cudaMemcpyDeviceToHost), "memcpy");
	check(cudaDeviceSynchronize(), "sync");
	check(cudaFree(scratch), "cudaFree(scratch)");
}

int main(void)
{
	float *w[4];
	static float host[1024];

	for (int i = 0; i < 4; i++)
		check(cudaMalloc((void **)&w[i], 64 * MiB), "cudaMalloc(w)");
	for (int i = 0; i < 100; i++) {
		step(w[i % 4], host);
		sleep_ms(20);
	}
	for (int i = 0; i < 4; i++)
		check(cudaFree(w[i]), "cudaFree(w)");
	return 0;
}
