/* The elfutils symbolizer on the test's own process: hits, misses, a
 * library loaded after the first lookup, and the price of a cached miss. */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "symbolize.h"

__attribute__((noinline)) int nt_test_marker_function(int x)
{
	return x * 3 + 1;
}

static double elapsed_ms(struct timespec a, struct timespec b)
{
	return (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
}

START_TEST(names_a_function_with_file_and_line)
{
	struct nt_symbolizer s;
	struct nt_symbol sym;
	uint64_t addr = (uint64_t)(uintptr_t)&nt_test_marker_function + 4;

	nt_symbolizer_init(&s);
	ck_assert_int_eq(nt_symbolize(&s, (uint32_t)getpid(), addr, &sym), 0);
	ck_assert_str_eq(sym.name, "nt_test_marker_function");
	ck_assert_uint_eq(sym.offset, 4);
	ck_assert_ptr_nonnull(strstr(sym.module, "test_symbolize"));
	ck_assert_ptr_nonnull(sym.file);
	ck_assert_ptr_nonnull(strstr(sym.file, "test_symbolize.c"));
	ck_assert_uint_gt(sym.line, 0);
	nt_symbolizer_fini(&s);
}
END_TEST

START_TEST(cached_miss_is_cheap_and_late_library_is_found)
{
	struct nt_symbolizer s;
	struct nt_symbol sym;
	struct timespec t0, t1;
	char path[4096];
	void *anon = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	nt_symbolizer_init(&s);
	ck_assert_ptr_ne(anon, MAP_FAILED);
	/* A byte in no module: a miss, then the same miss again, from cache. */
	ck_assert_int_eq(nt_symbolize(&s, (uint32_t)getpid(), (uint64_t)(uintptr_t)anon + 8, &sym),
			 -ENOENT);
	ck_assert_ptr_null(sym.name);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 1000; i++)
		nt_symbolize(&s, (uint32_t)getpid(), (uint64_t)(uintptr_t)anon + 8, &sym);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_msg(elapsed_ms(t0, t1) < 100, "1000 cached misses took %.1f ms",
		      elapsed_ms(t0, t1));

	/* A library mapped after the process was first reported. */
	snprintf(path, sizeof(path), "%s/fixture_good.so", FIXTURE_DIR);
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ck_assert_ptr_nonnull(lib);
	void *desc = dlsym(lib, "ntcore_plugin");
	ck_assert_ptr_nonnull(desc);
	usleep(150 * 1000); /* past the refresh interval */
	ck_assert_int_eq(nt_symbolize(&s, (uint32_t)getpid(), (uint64_t)(uintptr_t)desc, &sym), 0);
	ck_assert_str_eq(sym.name, "ntcore_plugin");
	ck_assert_ptr_nonnull(strstr(sym.module, "fixture_good.so"));
	dlclose(lib);
	munmap(anon, 4096);
	nt_symbolizer_fini(&s);
}
END_TEST

START_TEST(gone_process)
{
	struct nt_symbolizer s;
	struct nt_symbol sym;

	nt_symbolizer_init(&s);
	ck_assert_int_eq(nt_symbolize(&s, 4194000, 0x401000, &sym), -ESRCH);
	ck_assert_int_eq(nt_symbolize(&s, (uint32_t)getpid(), 0, &sym), -ENOENT);
	nt_symbolizer_fini(&s);
}
END_TEST

int main(void)
{
	Suite *suite = suite_create("symbolize");
	TCase *tc = tcase_create("symbolize");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, names_a_function_with_file_and_line);
	tcase_add_test(tc, cached_miss_is_cheap_and_late_library_is_found);
	tcase_add_test(tc, gone_process);
	suite_add_tcase(suite, tc);
	sr = srunner_create(suite);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
