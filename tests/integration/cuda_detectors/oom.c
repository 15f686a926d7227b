/* SPDX-License-Identifier: MIT */
/*
 * Planted out-of-memory: load_weights() takes 4 x 1 GiB of the fixture's
 * 16 GiB device, train_step() runs for 1 s (a scratch buffer allocated and
 * freed every 50 ms, as a job does before it dies), then make_activations()
 * asks for 64 GiB, which fails with cudaErrorMemoryAllocation. Prints
 * "OOM_AT=<wall ns>" right after the failed call returns, then stays alive
 * 1 s (the alert must come while the job runs, not at exit).
 */
#include "wl.h"

static void *w[4];

NOINLINE void load_weights(void)
{
	for (int i = 0; i < 4; i++)
		check(cudaMalloc(&w[i], GiB), "cudaMalloc(weights)");
}

NOINLINE void train_step(void)
{
	void *scratch = NULL;

	check(cudaMalloc(&scratch, 64 * MiB), "cudaMalloc(scratch)");
	check(cudaFree(scratch), "cudaFree(scratch)");
}

NOINLINE cudaError_t make_activations(void **p)
{
	return cudaMalloc(p, 64 * GiB);
}

int main(void)
{
	void *act = NULL;
	cudaError_t e;
	uint64_t t;

	load_weights();
	for (int i = 0; i < 20; i++) {
		train_step();
		sleep_ms(50);
	}
	e = make_activations(&act);
	t = wall_ns();
	printf("OOM_RET=%d\nOOM_AT=%llu\n", (int)e, (unsigned long long)t);
	fflush(stdout);
	sleep_ms(1000);
	for (int i = 0; i < 4; i++)
		check(cudaFree(w[i]), "cudaFree");
	return e == cudaErrorMemoryAllocation ? 0 : 4;
}
