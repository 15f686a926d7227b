/* SPDX-License-Identifier: MIT */
/*
 * Cost of consume() per event of the allocation-tracking CUDA detectors
 * (cuda_memleak, cuda_oom, cuda_frag), side by side in one run: N
 * cudaMalloc/cudaFree pairs with stacks fed to each detector .so through
 * the unit tests' stand-in host, the detectors interleaved over REPS
 * rounds, the median round printed with its ratio to the cheapest.
 * (It was test_det_consume_cost, a unit test that asserted nothing.)
 *
 *   CUDADET_BENCH_N=20000 CUDADET_BENCH_REPS=5 bench_cudadet_consume
 *
 * It runs as a check test case (no fork), so a detector that fails to load
 * stops it with check's message.
 */
#include "cudadet_harness.h"

#define N_DET 3

static const char *const det_names[N_DET] = {"cuda_memleak", "cuda_oom",
					     "cuda_frag"};

struct workload {
	int n;
	struct nt_cuda_alloc **a;
	struct nt_cuda_free **f;
};

static void workload_make(struct workload *w, int n)
{
	w->n = n;
	w->a = calloc((size_t)n, sizeof(*w->a));
	w->f = calloc((size_t)n, sizeof(*w->f));
	for (int i = 0; i < n; i++) {
		w->a[i] = mk_alloc(900, (uint64_t)i,
				   0x7f0000000000ULL + (uint64_t)(i % 512) * MiB, MiB, 0,
				   NT_CUDA_LAYER_RUNTIME,
				   (i & 1) ? "python3;at::empty;c10::cuda::CUDACachingAllocator::malloc;cudaMalloc"
					   : "main;train_step;cudaMalloc");
		w->f[i] = mk_free(900, (uint64_t)i, w->a[i]->ptr, NT_CUDA_LAYER_RUNTIME);
	}
}

static void workload_free(struct workload *w)
{
	for (int i = 0; i < w->n; i++) {
		free(w->a[i]);
		free(w->f[i]);
	}
	free(w->a);
	free(w->f);
}

/* ns per consumed event of one detector over the whole workload. */
static double run_one(const char *name, const struct workload *w)
{
	static const char *const no_svg[] = {"svg_path=\"\"", NULL};
	struct det x;
	uint64_t t0, t1;

	det_open(&x, name, strcmp(name, "cuda_frag") == 0 ? no_svg : NULL);
	t0 = nt_clock_mono_ns();
	for (int i = 0; i < w->n; i++) {
		x.d->consume(x.state, &w->a[i]->hdr, &alloc_schema);
		x.d->consume(x.state, &w->f[i]->hdr, &free_schema);
	}
	t1 = nt_clock_mono_ns();
	det_close(&x);
	return (double)(t1 - t0) / (2.0 * w->n);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* A positive integer from the environment, at most max; def when unset. */
static int env_int(const char *name, int def, int max)
{
	const char *v = getenv(name);
	int n = v ? atoi(v) : def;

	ck_assert_msg(n >= 1 && n <= max, "%s must be 1..%d", name, max);
	return n;
}

START_TEST(bench_consume)
{
	int n = env_int("CUDADET_BENCH_N", 20000, 10000000);
	int reps = env_int("CUDADET_BENCH_REPS", 5, 16);
	double ns[N_DET][16], median[N_DET], best = 0;
	struct workload w;

	workload_make(&w, n);
	for (int r = 0; r < reps; r++)
		for (int k = 0; k < N_DET; k++)
			ns[k][r] = run_one(det_names[k], &w);
	for (int k = 0; k < N_DET; k++) {
		qsort(ns[k], (size_t)reps, sizeof(double), cmp_double);
		median[k] = ns[k][reps / 2];
		if (!best || median[k] < best)
			best = median[k];
	}
	printf("%-13s %12s %8s   (%d alloc/free pairs, median of %d rounds)\n",
	       "detector", "ns/event", "ratio", n, reps);
	for (int k = 0; k < N_DET; k++)
		printf("%-13s %12.0f %7.2fx\n", det_names[k], median[k],
		       median[k] / best);
	workload_free(&w);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cudadet_bench");
	TCase *t = tcase_create("consume");
	SRunner *r;
	int failed;

	tcase_set_timeout(t, 600);
	tcase_add_test(t, bench_consume);
	suite_add_tcase(s, t);
	r = srunner_create(s);
	srunner_set_fork_status(r, CK_NOFORK);
	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
