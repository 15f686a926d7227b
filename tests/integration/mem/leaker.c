/* SPDX-License-Identifier: MIT */
/*
 * Child of tests/integration/mem.sh. No stdio (it would allocate): output
 * goes through write(2).
 *
 *   mem-leaker run HOLD_MS
 *     1000 x malloc(1024) in leak_some(), 900 of them freed in
 *     release_most(); "allocated <realtime ns>"; sleep HOLD_MS; a 64 MiB
 *     anonymous mapping touched page by page in touch_buffer();
 *     "touched <realtime ns>"; sleep HOLD_MS; exit 0 (the mapping and the
 *     100 blocks are left to the exit). "touching <ns>" comes just before
 *     the mapping.
 *   mem-leaker loop SECONDS
 *     every 10 ms: 10 x malloc(512), 9 freed, for SECONDS; then exit 0.
 *   mem-leaker threads
 *     8 threads at once, each 3 rounds of 2000 malloc(64 + i % 64) in
 *     thread_leak(), all freed but 1 in 10 of the last round: 1600 blocks,
 *     151 744 bytes outstanding.
 *   mem-leaker hog
 *     malloc and touch 8 MiB blocks, 4 GiB at most (run it in a memory
 *     cgroup: the OOM killer ends it).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define N_ALLOCS 1000
#define BLOCK 1024
#define BUFFER (64u << 20)

static void *volatile blocks[N_ALLOCS];
static void *volatile kept;

static void say(const char *what)
{
	struct timespec ts;
	char line[96];
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	n = snprintf(line, sizeof(line), "%s %lld\n", what,
		     (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
	if (write(1, line, (size_t)n) < 0)
		_exit(3);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0)
		;
}

__attribute__((noinline)) static void leak_some(void)
{
	for (int i = 0; i < N_ALLOCS; i++) {
		blocks[i] = malloc(BLOCK);
		if (!blocks[i])
			_exit(4);
		memset(blocks[i], i & 0xff, BLOCK);
	}
}

__attribute__((noinline)) static void release_most(void)
{
	for (int i = 0; i < N_ALLOCS; i++)
		if (i % 10 != 0) {
			free(blocks[i]);
			blocks[i] = NULL;
		}
}

#define THREADS 8
#define PER_ROUND 2000
static void *volatile tblocks[THREADS][PER_ROUND];

__attribute__((noinline)) static void *thread_leak(void *arg)
{
	long t = (long)arg;

	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < PER_ROUND; i++)
			tblocks[t][i] = malloc(64 + (size_t)(i % 64));
		for (int i = 0; i < PER_ROUND; i++)
			if (r < 2 || i % 10 != 0) {
				free(tblocks[t][i]);
				tblocks[t][i] = NULL;
			}
	}
	return NULL;
}

__attribute__((noinline)) static char *touch_buffer(void)
{
	char *p = mmap(NULL, BUFFER, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long page = sysconf(_SC_PAGESIZE);

	if (p == MAP_FAILED)
		_exit(5);
	for (size_t off = 0; off < BUFFER; off += (size_t)page)
		p[off] = 1;
	return p;
}

__attribute__((noinline)) static void churn(int seconds)
{
	struct timespec end, now;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += seconds;
	do {
		kept = malloc(512); /* leaked on purpose */

		for (int i = 0; i < 9; i++) {
			void *volatile p = malloc(512);
			free(p);
		}

		sleep_ms(10);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec < end.tv_sec ||
		 (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "run") == 0) {
		long hold = atol(argv[2]);
		char *volatile buf;

		leak_some();
		release_most();
		say("allocated");
		sleep_ms(hold);
		say("touching");
		buf = touch_buffer();
		say("touched");
		sleep_ms(hold);
		(void)buf;
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "threads") == 0) {
		pthread_t th[THREADS];

		for (long t = 0; t < THREADS; t++)
			if (pthread_create(&th[t], NULL, thread_leak, (void *)t))
				return 7;
		for (int t = 0; t < THREADS; t++)
			pthread_join(th[t], NULL);
		sleep_ms(300);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "hog") == 0) {
		for (int i = 0; i < 512; i++) {
			char *p = malloc(8u << 20);

			if (!p)
				return 6;
			memset(p, 1, 8u << 20);
			kept = p;
		}
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "loop") == 0) {
		say("started");
		churn(atoi(argv[2]));
		return 0;
	}
	if (write(2, "usage: mem-leaker run HOLD_MS | loop SECONDS | threads | hog\n", 62) < 0)
		return 3;
	return 2;
}
