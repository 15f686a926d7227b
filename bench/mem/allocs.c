/* SPDX-License-Identifier: MIT */
/*
 * Allocation-heavy workload of bench/mem.sh.
 *   allocs ITERATIONS GATE_FILE
 * Waits until GATE_FILE exists (the tracer under test is attached by then),
 * then runs ITERATIONS rounds over a working set of 1024 blocks: free one
 * block picked pseudo-randomly and allocate a new one of 16..2063 bytes
 * (every 16th a calloc, every 32nd a realloc of another block). Prints
 * "seconds=S calls=C" for the timed loop alone, to stdout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 1024

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static void *slot[SLOTS];
	unsigned long long calls = 0;
	unsigned int x = 12345;
	long n;
	double t0, t1;

	if (argc != 3) {
		fprintf(stderr, "usage: allocs ITERATIONS GATE_FILE\n");
		return 2;
	}
	n = atol(argv[1]);
	while (access(argv[2], F_OK) != 0)
		usleep(1000);
	t0 = now();
	for (long i = 0; i < n; i++) {
		unsigned int k, size;

		x = x * 1103515245u + 12345u;
		k = (x >> 8) % SLOTS;
		size = 16 + (x >> 20) % 2048;
		free(slot[k]);
		if (i % 16 == 0)
			slot[k] = calloc(1, size);
		else
			slot[k] = malloc(size);
		calls += 2;
		if (i % 32 == 0) {
			unsigned int j = (k + 7) % SLOTS;

			slot[j] = realloc(slot[j], size * 2);
			calls++;
		}
		if (slot[k])
			memset(slot[k], 1, 16);
	}
	t1 = now();
	for (int k = 0; k < SLOTS; k++)
		free(slot[k]);
	printf("seconds=%.6f calls=%llu\n", t1 - t0, calls);
	return 0;
}
