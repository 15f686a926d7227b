/* SPDX-License-Identifier: MIT */
/*
 * Helper of tests/integration/python_cuda_join.sh, loaded by Python with
 * ctypes: kernel launches through the fixture CUDA runtime from the calling
 * (Python) thread, and from a plain pthread (no Python thread state) while
 * the caller waits in pthread_join, the way PyTorch's autograd engine
 * launches backward kernels while the Python thread waits in backward().
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <time.h>

struct dim3_ { unsigned x, y, z; };
typedef int (*launch_fn)(const void *, struct dim3_, struct dim3_, void **,
			 size_t, void *);
static launch_fn launch;

#define KERNEL __attribute__((noinline, used, visibility("default")))
KERNEL void join_fwd_kernel(int n) { (void)n; }
KERNEL void join_bwd_kernel(int n) { (void)n; }

static void spin_us(long us)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static void launches(const void *k, long n)
{
	struct dim3_ g = { 1, 1, 1 }, b = { 32, 1, 1 };

	for (long i = 0; i < n; i++) {
		int v = (int)i;
		void *args[] = { &v };

		launch(k, g, b, args, 0, NULL);
		spin_us(200);
	}
}

int join_init(const char *cudart)
{
	void *h = dlopen(cudart, RTLD_NOW | RTLD_GLOBAL);

	if (h)
		*(void **)&launch = dlsym(h, "cudaLaunchKernel");
	return launch ? 0 : 1;
}

void join_forward(long n)
{
	launches((const void *)join_fwd_kernel, n);
}

static void *engine(void *arg)
{
	launches((const void *)join_bwd_kernel, (long)arg);
	return NULL;
}

int join_backward(long n)
{
	pthread_t t;

	if (pthread_create(&t, NULL, engine, (void *)n))
		return 1;
	return pthread_join(t, NULL);
}
