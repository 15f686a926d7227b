/* SPDX-License-Identifier: MIT */
/*
 * Planted hang: 1 s of launches, copies and syncs, then the process stops
 * giving the GPU work while it still runs (argv[1] = "idle": it sleeps;
 * "busy": it spins on the CPU) for argv[2] ms, then exits.
 * Prints "QUIET_AT=<wall ns>" after its last CUDA call returned.
 */
#include <string.h>

#include "wl.h"

NOINLINE void train_loop(float *x, float *host)
{
	for (int i = 0; i < 50; i++) {
		wl_kernel(x, 4096);
		check(cudaMemcpy(host, x, 4096, cudaMemcpyDeviceToHost), "memcpy");
		check(cudaDeviceSynchronize(), "sync");
		sleep_ms(20);
	}
}

NOINLINE void stuck(const char *how, long ms)
{
	uint64_t end = wall_ns() + (uint64_t)ms * 1000000ULL;
	volatile uint64_t spin = 0;

	if (strcmp(how, "busy") == 0)
		while (wall_ns() < end)
			spin++;
	else
		sleep_ms(ms);
}

int main(int argc, char **argv)
{
	float *x = NULL;
	static float host[1024];
	const char *how = argc > 1 ? argv[1] : "idle";
	long ms = argc > 2 ? atol(argv[2]) : 4000;

	check(cudaMalloc((void **)&x, MiB), "cudaMalloc");
	train_loop(x, host);
	printf("QUIET_AT=%llu\n", (unsigned long long)wall_ns());
	fflush(stdout);
	stuck(how, ms);
	check(cudaFree(x), "cudaFree"); /* no leak: only the hang is planted */
	return 0;
}
