/* SPDX-License-Identifier: MIT */
/*
 * Out-of-memory under a launch storm (issue 17): a thread launches
 * wl_kernel as fast as it can for the whole run while the main thread
 * takes 4 x 1 GiB and then asks for 64 GiB eight times, 250 ms apart,
 * printing "OOM_CALL_<i>=<wall ns>" before each call and "OOM_AT_<i>=..."
 * right after it returns.
 * At the end "LAUNCHES=<n>" (the launcher's launches). With launch_events
 * on, every alert must still come within 10 ms of its failure, and no
 * launch record may be lost.
 */
#include <pthread.h>

#include "wl.h"

static volatile int stop;
static unsigned long launches;

static void *launcher(void *arg)
{
	(void)arg;
	while (!stop) {
		wl_kernel(NULL, 1024);
		launches++;
	}
	return NULL;
}

NOINLINE cudaError_t make_activations(void **p)
{
	return cudaMalloc(p, 64 * GiB);
}

int main(void)
{
	void *w[4], *act = NULL;
	pthread_t th;

	for (int i = 0; i < 4; i++)
		check(cudaMalloc(&w[i], GiB), "cudaMalloc(weights)");
	wl_kernel(NULL, 1024); /* the first launch loads the driver */
	if (pthread_create(&th, NULL, launcher, NULL))
		return 2;
	sleep_ms(500);
	for (int i = 0; i < 8; i++) {
		uint64_t t0 = wall_ns();
		cudaError_t e = make_activations(&act);
		uint64_t t = wall_ns();
		printf("OOM_RET_%d=%d\nOOM_CALL_%d=%llu\nOOM_AT_%d=%llu\n", i, (int)e, i,
		       (unsigned long long)t0, i, (unsigned long long)t);
		fflush(stdout);
		sleep_ms(250);
	}
	stop = 1;
	pthread_join(th, NULL);
	printf("LAUNCHES=%lu\n", launches + 1);
	for (int i = 0; i < 4; i++)
		check(cudaFree(w[i]), "cudaFree");
	return 0;
}
