/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the kit's /proc helpers: liveness and state of a child
 * through its life (running, zombie, reaped), comm, cmdline and exe of an
 * exec'd child, the cgroup path of fixture texts, maps lines of every
 * shape, and a maps walk of this very process.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ntcore/kit/proc.h"

START_TEST(test_proc_alive_state)
{
	int gate[2];
	pid_t child;
	char c;

	ck_assert(nt_proc_alive((uint32_t)getpid()));
	ck_assert(nt_proc_alive(0));
	ck_assert(!nt_proc_alive(0x80000000u));
	ck_assert_int_eq(nt_proc_state(NULL, (uint32_t)getpid(), 0), 'R');
	ck_assert_int_eq(nt_proc_state("/nonexistent", (uint32_t)getpid(), 0), 0);
	ck_assert_int_eq(nt_proc_state(NULL, (uint32_t)getpid(), (uint32_t)getpid()), 'R');

	ck_assert_int_eq(pipe(gate), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		close(gate[1]);
		(void)!read(gate[0], &c, 1); /* wait for EOF */
		_exit(0);
	}
	close(gate[0]);
	/* Blocked in read: sleeping. */
	for (int i = 0; i < 200 && nt_proc_state(NULL, (uint32_t)child, 0) != 'S'; i++)
		usleep(5000);
	ck_assert_int_eq(nt_proc_state("/proc", (uint32_t)child, 0), 'S');
	close(gate[1]);
	for (int i = 0; i < 200 && nt_proc_state(NULL, (uint32_t)child, 0) != 'Z'; i++)
		usleep(5000);
	/* Exited, not reaped: a zombie still exists. */
	ck_assert_int_eq(nt_proc_state(NULL, (uint32_t)child, 0), 'Z');
	ck_assert(nt_proc_alive((uint32_t)child));
	ck_assert_int_eq(waitpid(child, NULL, 0), child);
	ck_assert(!nt_proc_alive((uint32_t)child));
	ck_assert_int_eq(nt_proc_state(NULL, (uint32_t)child, 0), 0);
	ck_assert_int_eq(nt_proc_maps_foreach((uint32_t)child, NULL, NULL), -ESRCH);
	char buf[32];
	ck_assert_int_eq(nt_proc_comm((uint32_t)child, 0, buf, sizeof(buf)), -ENOENT);
}
END_TEST

struct blocked {
	int fd;
	volatile pid_t tid;
};

static void *block_on_read(void *arg)
{
	struct blocked *b = arg;
	char c;

	b->tid = gettid();
	(void)!read(b->fd, &c, 1);
	return NULL;
}

START_TEST(test_thread_state)
{
	struct blocked b = {0};
	pthread_t th;
	int gate[2];
	char comm[32];

	ck_assert_int_eq(pipe(gate), 0);
	b.fd = gate[0];
	ck_assert_int_eq(pthread_create(&th, NULL, block_on_read, &b), 0);
	for (int i = 0; i < 400 && (!b.tid || nt_proc_state(NULL, (uint32_t)getpid(),
							   (uint32_t)b.tid) != 'S'); i++)
		usleep(5000);
	ck_assert_int_eq(nt_proc_state(NULL, (uint32_t)getpid(), (uint32_t)b.tid), 'S');
	pthread_setname_np(th, "nt-kit-reader");
	ck_assert_int_eq(nt_proc_comm((uint32_t)getpid(), (uint32_t)b.tid, comm,
				      sizeof(comm)), 13);
	ck_assert_str_eq(comm, "nt-kit-reader");
	close(gate[1]);
	pthread_join(th, NULL);
	ck_assert_int_eq(nt_proc_state(NULL, (uint32_t)getpid(), (uint32_t)b.tid), 0);
	close(gate[0]);
}
END_TEST

START_TEST(test_proc_names)
{
	char comm[32], cmd[64], exe[PATH_MAX], real[PATH_MAX];
	int gate[2];
	pid_t child;

	ck_assert_int_eq(prctl(PR_SET_NAME, "nt-kit-comm"), 0);
	ck_assert_int_eq(nt_proc_comm((uint32_t)getpid(), 0, comm, sizeof(comm)), 11);
	ck_assert_str_eq(comm, "nt-kit-comm");
	ck_assert_int_eq(nt_proc_comm((uint32_t)getpid(), (uint32_t)getpid(), comm,
				      sizeof(comm)), 11);
	ck_assert_str_eq(comm, "nt-kit-comm");
	ck_assert_int_eq(nt_proc_comm((uint32_t)getpid(), 0, comm, 5), 4);
	ck_assert_str_eq(comm, "nt-k");

	/* An exec'd child: sleep with two arguments, stopped by its stdin. */
	ck_assert_int_eq(pipe(gate), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		dup2(gate[0], 0);
		close(gate[1]);
		execl("/bin/sh", "sh", "-c", "read x; exit 0", "arg one", (char *)NULL);
		_exit(127);
	}
	close(gate[0]);
	for (int i = 0; i < 200; i++) {
		if (nt_proc_comm((uint32_t)child, 0, comm, sizeof(comm)) > 0 &&
		    !strcmp(comm, "sh"))
			break;
		usleep(5000);
	}
	ck_assert_str_eq(comm, "sh");
	ck_assert_int_eq(nt_proc_cmdline((uint32_t)child, cmd, sizeof(cmd)), 28);
	ck_assert_str_eq(cmd, "sh -c read x; exit 0 arg one");
	ck_assert_int_eq(nt_proc_cmdline((uint32_t)child, cmd, 9), 8);
	ck_assert_str_eq(cmd, "sh -c re");
	ck_assert_ptr_nonnull(realpath("/bin/sh", real));
	ck_assert_int_eq(nt_proc_exe((uint32_t)child, exe, sizeof(exe)), (int)strlen(real));
	ck_assert_str_eq(exe, real);
	close(gate[1]);
	ck_assert_int_eq(waitpid(child, NULL, 0), child);
	ck_assert_int_eq(nt_proc_exe((uint32_t)child, exe, sizeof(exe)), -ENOENT);
}
END_TEST

START_TEST(test_cgroup_path)
{
	static const char hybrid[] =
		"9:name=systemd:/\n"
		"4:memory:/process_api/6b19\n"
		"0::/user.slice/job-1.scope\n";
	static const char v1[] = "12:pids:/docker/abc\n11:cpu,cpuacct:/docker/abc\n";
	char out[64], file[4096];
	int n;

	ck_assert_int_eq(nt_cgroup_path(hybrid, out, sizeof(out)), 23);
	ck_assert_str_eq(out, "/user.slice/job-1.scope");
	ck_assert_int_eq(nt_cgroup_path(v1, out, sizeof(out)), 11);
	ck_assert_str_eq(out, "/docker/abc");
	ck_assert_int_eq(nt_cgroup_path("0::/a/b", out, 4), 3);
	ck_assert_str_eq(out, "/a/");
	ck_assert_int_eq(nt_cgroup_path("", out, sizeof(out)), -ENOENT);
	ck_assert_int_eq(nt_cgroup_path("garbage\n", out, sizeof(out)), -ENOENT);

	/* This process: the same as parsing the file read here. */
	ck_assert_int_ge(nt_file_read("/proc/self/cgroup", file, sizeof(file)), 4);
	n = nt_proc_cgroup((uint32_t)getpid(), out, sizeof(out));
	ck_assert_int_ge(n, 1);
	ck_assert_int_eq(out[0], '/');
	char again[64];
	ck_assert_int_eq(nt_cgroup_path(file, again, sizeof(again)), n);
	ck_assert_str_eq(again, out);
}
END_TEST

START_TEST(test_file_read)
{
	char path[] = "/tmp/nt-kit-test-XXXXXX", buf[8];
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "0123456789", 10), 10);
	close(fd);
	ck_assert_int_eq(nt_file_read(path, buf, sizeof(buf)), 7);
	ck_assert_str_eq(buf, "0123456");
	ck_assert_int_eq(nt_file_read(path, buf, 0), -EINVAL);
	unlink(path);
	ck_assert_int_eq(nt_file_read(path, buf, sizeof(buf)), -ENOENT);
}
END_TEST

START_TEST(test_maps_lines)
{
	char l1[] = "55ddde378000-55ddde37d000 r-xp 00002000 fe:00 247134"
		    "                     /usr/bin/cat\n";
	char l2[] = "7f3b6cd1e000-7f3b6cde2000 rw-p 00000000 00:00 0 \n";
	char l3[] = "55de0c673000-55de0c694000 rw-p 00000000 00:00 0"
		    "                          [heap]\n";
	char l4[] = "7f00-8f00 r--s 0000ab00 103:0a 42   /tmp/a b (deleted)\n";
	char l5[] = "1000-2000 ---p 00000000 00:00 0";
	char bad1[] = "", bad2[] = "garbage\n", bad3[] = "1-2 r-x 0 0:0 0\n",
	     bad4[] = "1000-2000 r-xp 0 fe:00\n";
	struct nt_map m;

	ck_assert(nt_maps_parse_line(l1, &m));
	ck_assert_uint_eq(m.start, 0x55ddde378000ull);
	ck_assert_uint_eq(m.end, 0x55ddde37d000ull);
	ck_assert_str_eq(m.perms, "r-xp");
	ck_assert_uint_eq(m.offset, 0x2000);
	ck_assert_uint_eq(m.dev_major, 0xfe);
	ck_assert_uint_eq(m.dev_minor, 0);
	ck_assert_uint_eq(m.inode, 247134);
	ck_assert_str_eq(m.path, "/usr/bin/cat");
	ck_assert_uint_eq(m.path_len, 12);
	ck_assert(!m.deleted);

	ck_assert(nt_maps_parse_line(l2, &m));
	ck_assert_str_eq(m.path, "");
	ck_assert_uint_eq(m.path_len, 0);
	ck_assert_uint_eq(m.inode, 0);
	ck_assert(nt_maps_parse_line(l3, &m));
	ck_assert_str_eq(m.path, "[heap]");
	ck_assert(nt_maps_parse_line(l4, &m));
	ck_assert_str_eq(m.path, "/tmp/a b");
	ck_assert_uint_eq(m.path_len, 8);
	ck_assert(m.deleted);
	ck_assert_uint_eq(m.dev_major, 0x103);
	ck_assert_uint_eq(m.dev_minor, 0xa);
	ck_assert_uint_eq(m.offset, 0xab00);
	ck_assert_str_eq(m.perms, "r--s");
	ck_assert(nt_maps_parse_line(l5, &m));
	ck_assert_str_eq(m.path, "");
	ck_assert_uint_eq(m.end, 0x2000);

	ck_assert(!nt_maps_parse_line(bad1, &m));
	ck_assert(!nt_maps_parse_line(bad2, &m));
	ck_assert(!nt_maps_parse_line(bad3, &m));
	ck_assert(!nt_maps_parse_line(bad4, &m));
}
END_TEST

struct find_code {
	uint64_t addr;
	int lines;
	char path[PATH_MAX];
	char perms[5];
};

static int on_map(void *arg, const struct nt_map *m)
{
	struct find_code *f = arg;

	f->lines++;
	if (f->addr >= m->start && f->addr < m->end) {
		snprintf(f->path, sizeof(f->path), "%s", m->path);
		memcpy(f->perms, m->perms, sizeof(f->perms));
		return 1;
	}
	return 0;
}

static int stop_at_third(void *arg, const struct nt_map *m)
{
	(void)m;
	return ++*(int *)arg == 3 ? 7 : 0;
}

START_TEST(test_maps_walk)
{
	struct find_code f = {.addr = (uint64_t)(uintptr_t)&on_map};
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int calls = 0;

	ck_assert_int_gt(n, 0);
	self[n] = '\0';
	/* This test's own code lies in an executable mapping of its file. */
	ck_assert_int_eq(nt_proc_maps_foreach((uint32_t)getpid(), on_map, &f), 1);
	ck_assert_str_eq(f.path, self);
	ck_assert_int_eq(f.perms[2], 'x');
	ck_assert_int_ge(f.lines, 1);
	ck_assert_int_eq(nt_proc_maps_foreach((uint32_t)getpid(), stop_at_third,
					      &calls), 7);
	ck_assert_int_eq(calls, 3);
}
END_TEST

static Suite *proc_suite(void)
{
	Suite *s = suite_create("kit_proc");
	TCase *t = tcase_create("proc");

	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_proc_alive_state);
	tcase_add_test(t, test_thread_state);
	tcase_add_test(t, test_proc_names);
	tcase_add_test(t, test_cgroup_path);
	tcase_add_test(t, test_file_read);
	tcase_add_test(t, test_maps_lines);
	tcase_add_test(t, test_maps_walk);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(proc_suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
