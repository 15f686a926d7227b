/* The elfutils symbolizer on the test's own process: hits, misses, a
 * library loaded after the first lookup, and the price of a cached miss. */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
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

/* A child that maps a page, reports its address, then (when told) dlopens
 * a library and reports a symbol's address. Another process, as in real use:
 * symbolizing ourselves would also see libelf's own private mappings of the
 * files it reads, which look like libraries. */
struct child {
	pid_t pid;
	int to_child, from_child;
};

static void child_main(int in, int out, const char *lib_path)
{
	void *anon = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t addr = (uint64_t)(uintptr_t)anon + 8;
	char go;

	if (write(out, &addr, sizeof(addr)) != sizeof(addr) || read(in, &go, 1) != 1)
		_exit(1);
	void *lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
	addr = lib ? (uint64_t)(uintptr_t)dlsym(lib, "ntcore_plugin") : 0;
	if (write(out, &addr, sizeof(addr)) != sizeof(addr))
		_exit(1);
	pause();
	_exit(0);
}

static struct child child_start(const char *lib_path)
{
	int down[2], up[2];
	struct child c;

	ck_assert_int_eq(pipe(down), 0);
	ck_assert_int_eq(pipe(up), 0);
	c.pid = fork();
	ck_assert_int_ge(c.pid, 0);
	if (c.pid == 0) {
		close(down[1]);
		close(up[0]);
		child_main(down[0], up[1], lib_path);
	}
	close(down[0]);
	close(up[1]);
	c.to_child = down[1];
	c.from_child = up[0];
	return c;
}

static uint64_t child_read(struct child *c)
{
	uint64_t addr = 0;

	ck_assert_int_eq(read(c->from_child, &addr, sizeof(addr)), sizeof(addr));
	return addr;
}

START_TEST(cached_miss_is_cheap_and_late_library_is_found)
{
	struct nt_symbolizer s;
	struct nt_symbol sym;
	struct timespec t0, t1;
	char path[4096];

	snprintf(path, sizeof(path), "%s/fixture_good.so", FIXTURE_DIR);
	struct child c = child_start(path);
	uint64_t anon = child_read(&c);
	nt_symbolizer_init(&s);
	/* A byte in no module: a miss, then the same miss again, from cache. */
	ck_assert_int_eq(nt_symbolize(&s, (uint32_t)c.pid, anon, &sym), -ENOENT);
	ck_assert_ptr_null(sym.name);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 1000; i++)
		nt_symbolize(&s, (uint32_t)c.pid, anon, &sym);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_msg(elapsed_ms(t0, t1) < 100, "1000 cached misses took %.1f ms",
		      elapsed_ms(t0, t1));

	/* A library the child maps after it was first reported. */
	ck_assert_int_eq(write(c.to_child, "g", 1), 1);
	uint64_t desc = child_read(&c);
	ck_assert_uint_ne(desc, 0);
	int found = nt_symbolize(&s, (uint32_t)c.pid, desc, &sym);
	ck_assert_msg(found == 0, "symbolize(0x%llx) = %d, module %s", (unsigned long long)desc,
		      found, sym.module ? sym.module : "-");
	ck_assert_str_eq(sym.name, "ntcore_plugin");
	ck_assert_ptr_nonnull(strstr(sym.module, "fixture_good.so"));

	/* Once the child is gone, what was read of it still names its frames,
	 * also an address not looked up before: an exited, unreaped process
	 * shows empty maps, which must not wipe the modules known. */
	kill(c.pid, SIGKILL);
	usleep(50 * 1000);
	/* a fresh address in no file makes the symbolizer look at the maps */
	ck_assert_int_eq(nt_symbolize(&s, (uint32_t)c.pid, anon + 16, &sym), -ENOENT);
	ck_assert_int_eq(nt_symbolize(&s, (uint32_t)c.pid, desc + 1, &sym), 0);
	ck_assert_str_eq(sym.name, "ntcore_plugin");
	ck_assert_uint_eq(sym.offset, 1);
	waitpid(c.pid, NULL, 0);
	ck_assert_int_eq(nt_symbolize(&s, (uint32_t)c.pid, desc, &sym), 0);
	ck_assert_str_eq(sym.name, "ntcore_plugin");
	close(c.to_child);
	close(c.from_child);
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
