/* SPDX-License-Identifier: MIT */
/*
 * Planted hang: 1 s of launches, copies and syncs, then the process stops
 * giving the GPU work while it still runs, for argv[2] ms, then exits:
 *   idle     it sleeps
 *   busy     it spins on the CPU
 *   blocked  a worker thread sits inside a synchronous cudaMemcpy that does
 *            not return (a host-to-host copy from a page whose fault is held
 *            by userfaultfd, standing in for a sync waiting on a kernel that
 *            never ends); the main thread releases it after argv[2] ms
 * Prints "QUIET_AT=<wall ns>" after its last completed CUDA call.
 */
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "wl.h"

static float *x;
static float host[1024];
static char *held; /* a page whose first touch blocks (userfaultfd) */

NOINLINE void train_loop(void)
{
	for (int i = 0; i < 50; i++) {
		wl_kernel(x, 4096);
		check(cudaMemcpy(host, x, 4096, cudaMemcpyDeviceToHost), "memcpy");
		check(cudaDeviceSynchronize(), "sync");
		sleep_ms(20);
	}
}

NOINLINE void copy_stuck(void)
{
	check(cudaMemcpy(host, held, 4096, cudaMemcpyHostToHost), "memcpy(held)");
}

static void *worker(void *arg)
{
	(void)arg;
	train_loop();
	printf("QUIET_AT=%llu\n", (unsigned long long)wall_ns());
	fflush(stdout);
	copy_stuck();
	return NULL;
}

static int hold_page(void)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg;
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);

	if (fd < 0 || ioctl(fd, UFFDIO_API, &api) < 0)
		return -1;
	held = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (held == MAP_FAILED)
		return -1;
	reg.range.start = (unsigned long)held;
	reg.range.len = 4096;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(fd, UFFDIO_REGISTER, &reg) < 0)
		return -1;
	return fd;
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
	const char *how = argc > 1 ? argv[1] : "idle";
	long ms = argc > 2 ? atol(argv[2]) : 4000;

	check(cudaMalloc((void **)&x, MiB), "cudaMalloc");
	if (strcmp(how, "blocked") == 0) {
		struct uffdio_zeropage zp;
		pthread_t t;
		int fd = hold_page();

		if (fd < 0) {
			perror("userfaultfd");
			return 7;
		}
		pthread_create(&t, NULL, worker, NULL);
		sleep_ms(1000 + ms); /* the worker's 1 s of work, then the hang */
		zp.range.start = (unsigned long)held;
		zp.range.len = 4096;
		zp.mode = 0;
		if (ioctl(fd, UFFDIO_ZEROPAGE, &zp) < 0) {
			perror("UFFDIO_ZEROPAGE");
			return 8;
		}
		pthread_join(t, NULL);
	} else {
		train_loop();
		printf("QUIET_AT=%llu\n", (unsigned long long)wall_ns());
		fflush(stdout);
		stuck(how, ms);
	}
	check(cudaFree(x), "cudaFree"); /* no leak: only the hang is planted */
	return 0;
}
