/* SPDX-License-Identifier: MIT */
/*
 * Online leak: after a steady warm-up (1 s of alloc/free churn), keep_tensor()
 * keeps one 1 MiB allocation every 40 ms in a list for 3 s, then everything
 * is freed. Prints "GROW_START=<wall ns>" when the growth begins.
 */
#include "wl.h"

#define MAXKEEP 200

static void *kept[MAXKEEP];
static int nkept;

NOINLINE void keep_tensor(void)
{
	check(cudaMalloc(&kept[nkept++], MiB), "cudaMalloc(keep)");
}

NOINLINE void steady_step(void)
{
	void *t = NULL;

	check(cudaMalloc(&t, 2 * MiB), "cudaMalloc(steady)");
	check(cudaFree(t), "cudaFree(steady)");
}

int main(void)
{
	for (int i = 0; i < 25; i++) {
		steady_step();
		sleep_ms(40);
	}
	printf("GROW_START=%llu\n", (unsigned long long)wall_ns());
	fflush(stdout);
	for (int i = 0; i < 75 && nkept < MAXKEEP; i++) {
		steady_step();
		keep_tensor();
		sleep_ms(40);
	}
	for (int i = 0; i < nkept; i++)
		check(cudaFree(kept[i]), "cudaFree(kept)");
	return 0;
}
