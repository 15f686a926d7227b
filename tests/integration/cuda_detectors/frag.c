/* SPDX-License-Identifier: MIT */
/*
 * Planted fragmentation: small_block() fills the fixture's 16 GiB device with
 * 64 blocks of 256 MiB, every other one is freed (8 GiB free in 32 holes of
 * 256 MiB, 31 of them inside the allocated span), then big_request() asks
 * for 9 GiB, which fails. Stays alive 1.5 s so the detector samples it.
 * Prints "FRAG_FAIL_RET=<code>".
 */
#include "wl.h"

#define N 64

static void *b[N];

NOINLINE void small_block(int i)
{
	check(cudaMalloc(&b[i], 256 * MiB), "cudaMalloc(block)");
}

NOINLINE cudaError_t big_request(void **p)
{
	return cudaMalloc(p, 9 * GiB);
}

int main(void)
{
	void *big = NULL;
	cudaError_t e;

	for (int i = 0; i < N; i++) {
		small_block(i);
		sleep_ms(5);
	}
	/* From the top down: freeing the last block only shrinks the span,
	 * so the worst map (31 holes) is reached once, at the last free, with
	 * exactly 32 live blocks. Bottom up, the same map held for one step
	 * with block 63 still live, and which step the detector sampled
	 * depended on scheduling. */
	for (int i = N - 1; i >= 1; i -= 2) {
		check(cudaFree(b[i]), "cudaFree(odd)");
		sleep_ms(5);
	}
	e = big_request(&big);
	printf("FRAG_FAIL_RET=%d\n", (int)e);
	fflush(stdout);
	sleep_ms(1500);
	for (int i = 0; i < N; i += 2)
		check(cudaFree(b[i]), "cudaFree(even)");
	return 0;
}
