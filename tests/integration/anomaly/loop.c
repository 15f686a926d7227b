/* SPDX-License-Identifier: MIT */
/*
 * The GPU test's training loop on the cuda probe's fixture runtime (no GPU):
 * a loader process ("pt_data_worker", as PyTorch names its DataLoader
 * workers) reads each step's 8 MiB of FILE with O_DIRECT, in 256 KiB
 * requests, or 4 KiB ones from step SLOW_AT on; the trainer waits for it,
 * launches the step's kernels (the same sequence every step: an embedding,
 * four layers of two kernels, a loss, four backward kernels, an optimizer
 * step) and "computes" 20 ms. Writes OUT (JSON): each step's start
 * (CLOCK_REALTIME ns, the file sink's clock), SLOW_AT, the loader's pid.
 *   anomaly_loop FILE STEPS SLOW_AT OUT
 */
#define _GNU_SOURCE /* O_DIRECT */
#include "cuda_fx_api.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STEP_BYTES (8 << 20)

/* Host stubs: the launch symbol is (function, grid, block). */
#define KERNEL(name)                                                           \
	__attribute__((noinline, used, visibility("default"))) void name(int n) \
	{                                                                      \
		(void)n;                                                       \
	}
KERNEL(embed)
KERNEL(layer_gemm)
KERNEL(layer_act)
KERNEL(loss)
KERNEL(layer_bwd)
KERNEL(sgd)

static void launch(void (*k)(int), unsigned grid)
{
	dim3 g = { grid, 1, 1 }, b = { 128, 1, 1 };
	int n = 0;
	void *args[] = { &n };

	cudaLaunchKernel((const void *)k, g, b, args, 0, NULL);
}

static void step_kernels(void)
{
	launch(embed, 64);
	for (unsigned l = 0; l < 4; l++) {
		launch(layer_gemm, 256);
		launch(layer_act, 32);
	}
	launch(loss, 8);
	for (unsigned l = 0; l < 4; l++)
		launch(layer_bwd, 256);
	launch(sgd, 16);
}

static uint64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The loader: per step index on `in`, reads STEP_BYTES; answers on `out`. */
static int loader(const char *path, int slow_at, int in, int out)
{
	int fd = open(path, O_RDONLY | O_DIRECT), step;
	off_t size, off = 0;
	void *buf;
	struct stat st;

	prctl(PR_SET_NAME, "pt_data_worker");
	if (fd < 0 || fstat(fd, &st) || posix_memalign(&buf, 4096, 256 << 10))
		return 1;
	size = st.st_size;
	while (read(in, &step, sizeof(step)) == sizeof(step)) {
		size_t chunk = step >= slow_at ? 4096 : 256 << 10;

		for (size_t done = 0; done < STEP_BYTES; done += chunk) {
			if (off + (off_t)chunk > size)
				off = 0;
			if (pread(fd, buf, chunk, off) != (ssize_t)chunk)
				return 1;
			off += (off_t)chunk;
		}
		if (write(out, &step, sizeof(step)) != sizeof(step))
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int to[2], from[2], steps, slow_at;
	uint64_t *marks;
	pid_t pid;
	FILE *f;

	if (argc != 5)
		return fprintf(stderr, "usage: anomaly_loop FILE STEPS SLOW_AT OUT\n"), 2;
	steps = atoi(argv[2]);
	slow_at = atoi(argv[3]);
	marks = calloc((size_t)steps, sizeof(*marks));
	if (!marks || pipe(to) || pipe(from))
		return 1;
	if ((pid = fork()) == 0) {
		close(to[1]);
		close(from[0]);
		_exit(loader(argv[1], slow_at, to[0], from[1]));
	}
	close(to[0]);
	close(from[1]);
	prctl(PR_SET_NAME, "trainer");
	for (int i = 0; i < steps; i++) {
		struct timespec gpu = { 0, 20 * 1000000L };
		int got;

		marks[i] = wall_ns();
		if (write(to[1], &i, sizeof(i)) != sizeof(i) ||
		    read(from[0], &got, sizeof(got)) != sizeof(got))
			return 1;
		step_kernels();
		nanosleep(&gpu, NULL);
	}
	close(to[1]);
	waitpid(pid, NULL, 0);
	if (!(f = fopen(argv[4], "w")))
		return 1;
	fprintf(f, "{\"slow_at\":%d,\"worker_pids\":[%d],\"step_ns\":[", slow_at, (int)pid);
	for (int i = 0; i < steps; i++)
		fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)marks[i]);
	fprintf(f, "]}\n");
	fclose(f);
	free(marks);
	return 0;
}
