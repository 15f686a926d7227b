/* SPDX-License-Identifier: MIT */
/*
 * Helper of tests/integration/python_cuda_join.sh, loaded by Python with
 * ctypes: kernel launches through the fixture CUDA runtime from the calling
 * (Python) thread, and from an engine thread while the caller waits on a
 * condition variable, the way PyTorch's autograd engine launches backward
 * kernels while the Python thread waits in backward(). Like PyTorch's
 * device threads (PythonEngine::thread_init: gil_scoped_acquire, then
 * gil_scoped_release for the thread's life), the engine thread holds a
 * Python thread state but never runs a Python frame (join_init with
 * pystate 1); with pystate 0 it is a plain pthread.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

/* CPython's C API, resolved in the interpreter that loads us (ctypes) */
extern int PyGILState_Ensure(void);
extern void *PyEval_SaveThread(void);

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

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t cv_done = PTHREAD_COND_INITIALIZER;
static long work, done_gen, work_gen;
static int pystate;
static pid_t waiter; /* the thread in join_backward */

/* Until the waiting thread is asleep ('S'; at most 20 ms): on a loaded
 * machine it may still be runnable, not yet in its futex wait, when the
 * engine starts, and launches then have no blocked thread to take a stack
 * from. That race is real (docs/python.md); the test checks the join. */
static void until_asleep(pid_t tid)
{
	char path[64], buf[256], *rp;
	struct timespec ns = { 0, 50000 };

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	for (int i = 0; i < 400; i++) {
		FILE *f = fopen(path, "re");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = '\0';
		rp = strrchr(buf, ')');
		if (!rp || (rp[1] == ' ' && rp[2] == 'S'))
			return;
		nanosleep(&ns, NULL);
	}
}

static void *engine(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "pt_autograd_0");
	if (pystate) {
		/* a thread state of its own, the GIL released for good */
		PyGILState_Ensure();
		PyEval_SaveThread();
	}
	for (;;) {
		long n, gen;

		pthread_mutex_lock(&mu);
		while (work_gen == done_gen)
			pthread_cond_wait(&cv_work, &mu);
		n = work;
		gen = work_gen;
		pthread_mutex_unlock(&mu);
		until_asleep(waiter);
		launches((const void *)join_bwd_kernel, n);
		pthread_mutex_lock(&mu);
		done_gen = gen;
		pthread_cond_broadcast(&cv_done);
		pthread_mutex_unlock(&mu);
	}
	return NULL;
}

int join_init(const char *cudart, int with_pystate)
{
	void *h = dlopen(cudart, RTLD_NOW | RTLD_GLOBAL);
	pthread_t t;

	if (h)
		*(void **)&launch = dlsym(h, "cudaLaunchKernel");
	if (!launch)
		return 1;
	pystate = with_pystate;
	if (pthread_create(&t, NULL, engine, NULL))
		return 2;
	return pthread_detach(t);
}

void join_forward(long n)
{
	launches((const void *)join_fwd_kernel, n);
}

/* hand n launches to the engine thread and wait until it is done */
int join_backward(long n)
{
	pthread_mutex_lock(&mu);
	waiter = gettid();
	work = n;
	work_gen++;
	pthread_cond_signal(&cv_work);
	while (done_gen != work_gen)
		pthread_cond_wait(&cv_done, &mu);
	pthread_mutex_unlock(&mu);
	return 0;
}
