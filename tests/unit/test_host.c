/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the host functions of ABI 1.2: vlog from many threads at
 * once (every line whole, each exactly once, the level filter applied) and
 * vmlinux_btf (parsed once, the same handle for every instance, freed by
 * the daemon's release).
 */
#include <check.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "host.h"

enum { THREADS = 4, LINES = 2000 };

static void log_line(struct nt_instance *inst, int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	nt_host_vtable.vlog(inst, level, fmt, ap);
	va_end(ap);
}

struct writer {
	struct nt_instance *inst;
	int id;
};

static void *write_lines(void *arg)
{
	const struct writer *w = arg;

	for (int i = 0; i < LINES; i++) {
		log_line(w->inst, NT_LOG_INFO, "thread %d line %d %s", w->id, i,
			 "padding to make the line long enough to tear if it could");
		log_line(w->inst, NT_LOG_DEBUG, "dropped %d", i);
	}
	return NULL;
}

START_TEST(test_vlog_threads)
{
	struct nt_daemon d = {0};
	struct nt_instance inst = {.d = &d, .log_level = NT_LOG_INFO};
	struct writer w[THREADS];
	pthread_t tid[THREADS];
	unsigned char seen[THREADS][LINES];
	char path[] = "/tmp/nt-host-vlog-XXXXXX", line[512];
	int fd = mkstemp(path), saved = dup(2), whole = 0;
	FILE *f;

	ck_assert(NT_HOST_HAS(&nt_host_vtable, vlog));
	snprintf(inst.prefix, sizeof(inst.prefix), "probe:t.0");
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dup2(fd, 2), 2);
	for (int t = 0; t < THREADS; t++) {
		w[t] = (struct writer){&inst, t};
		ck_assert_int_eq(pthread_create(&tid[t], NULL, write_lines, &w[t]), 0);
	}
	for (int t = 0; t < THREADS; t++)
		pthread_join(tid[t], NULL);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	f = fdopen(fd, "r");
	rewind(f);
	memset(seen, 0, sizeof(seen));
	while (fgets(line, sizeof(line), f)) {
		int t, i, end = 0;

		ck_assert_msg(sscanf(line, "ntcore: [probe:t.0] thread %d line %d %*s%n",
				     &t, &i, &end) == 2 && end > 0,
			      "torn or foreign line: %s", line);
		ck_assert(t >= 0 && t < THREADS && i >= 0 && i < LINES);
		ck_assert_ptr_nonnull(strstr(line, "tear if it could\n"));
		ck_assert_uint_eq(seen[t][i], 0);
		seen[t][i] = 1;
		whole++;
	}
	ck_assert_int_eq(whole, THREADS * LINES); /* and no debug line */
	fclose(f);
	unlink(path);
}
END_TEST

START_TEST(test_vmlinux_btf_once)
{
	struct nt_daemon d = {0};
	struct nt_instance a = {.d = &d, .log_level = NT_LOG_ERROR};
	struct nt_instance b = {.d = &d, .log_level = NT_LOG_ERROR};
	const struct btf *first, *second;

	ck_assert(NT_HOST_HAS(&nt_host_vtable, vmlinux_btf));
	first = nt_host_vtable.vmlinux_btf(&a);
	second = nt_host_vtable.vmlinux_btf(&b);
	ck_assert_ptr_eq(first, second);
	ck_assert_ptr_eq(first, d.vmlinux_btf);
	ck_assert(d.vmlinux_btf_tried);
	ck_assert_int_eq(first != NULL, access("/sys/kernel/btf/vmlinux", R_OK) == 0);
	nt_host_release(&d); /* valgrind: nothing of it is left */
	ck_assert_ptr_eq(d.vmlinux_btf, NULL);
	ck_assert(!d.vmlinux_btf_tried);
}
END_TEST

static Suite *host_suite(void)
{
	Suite *s = suite_create("host");
	TCase *t = tcase_create("abi_1_2");

	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_vlog_threads);
	tcase_add_test(t, test_vmlinux_btf_once);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(host_suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
