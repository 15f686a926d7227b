/* SPDX-License-Identifier: MIT */
/*
 * pingpong: a context-switch-heavy workload for bench/sched.sh. Two
 * processes pinned to one CPU hand a byte back and forth through two pipes,
 * so every hand-off is one context switch (block, wake the other, switch).
 *
 *   pingpong [-n ROUNDS] [-c CPU]     (-c -1: no pinning)
 *
 * Prints one line: rounds, seconds of the timed loop, switches per second
 * (2 per round when pinned) and ns per round.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0) {
		fprintf(stderr, "pingpong: cpu %d: %s\n", cpu, strerror(errno));
		exit(2);
	}
}

static void xfer(int rfd, int wfd, long n, int first_write)
{
	char c = 'x';

	for (long i = 0; i < n; i++) {
		if (first_write && write(wfd, &c, 1) != 1)
			exit(3);
		if (read(rfd, &c, 1) != 1)
			exit(3);
		if (!first_write && write(wfd, &c, 1) != 1)
			exit(3);
	}
}

int main(int argc, char **argv)
{
	long rounds = 100000, warm = 1000;
	int cpu = 0, opt, a[2], b[2], status;
	pid_t child;
	double t0, t1;

	while ((opt = getopt(argc, argv, "n:c:")) != -1) {
		switch (opt) {
		case 'n':
			rounds = strtol(optarg, NULL, 10);
			break;
		case 'c':
			cpu = (int)strtol(optarg, NULL, 10);
			break;
		default:
			fprintf(stderr, "usage: pingpong [-n ROUNDS] [-c CPU|-1]\n");
			return 2;
		}
	}
	if (rounds < 1 || pipe(a) || pipe(b)) {
		fprintf(stderr, "pingpong: bad rounds or pipe: %s\n", strerror(errno));
		return 2;
	}
	pin(cpu);
	child = fork();
	if (child < 0)
		return 2;
	if (child == 0) {
		xfer(a[0], b[1], warm + rounds, 0);
		_exit(0);
	}
	xfer(b[0], a[1], warm, 1);
	t0 = now_s();
	xfer(b[0], a[1], rounds, 1);
	t1 = now_s();
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0) {
		fprintf(stderr, "pingpong: child failed\n");
		return 1;
	}
	printf("rounds=%ld seconds=%.6f switches_per_s=%.0f ns_per_round=%.1f\n",
	       rounds, t1 - t0, cpu >= 0 ? 2.0 * (double)rounds / (t1 - t0) : 0.0,
	       (t1 - t0) * 1e9 / (double)rounds);
	return 0;
}
