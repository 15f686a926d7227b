/* Trust checks: the file and every directory above it, owner and write
 * bits, symlinks resolved first, sticky directories, the reason named. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trust.h"

static char dir[64];
static char why[PATH_MAX + 512];

static void setup(void)
{
	strcpy(dir, "/tmp/nt-trust-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	chmod(dir, 0755);
}

static void teardown(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "chmod -R u+w %s; rm -rf %s", dir, dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Creates DIR/rel (a file, or a directory when rel ends in '/'). */
static const char *make(const char *rel, mode_t mode)
{
	static char path[256];
	size_t len = strlen(rel);

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	if (rel[len - 1] == '/') {
		path[strlen(path) - 1] = '\0';
		ck_assert_int_eq(mkdir(path, mode), 0);
	} else {
		FILE *f = fopen(path, "w");
		ck_assert_ptr_nonnull(f);
		fclose(f);
	}
	ck_assert_int_eq(chmod(path, mode), 0);
	return path;
}

static int check(const char *path, char *resolved)
{
	why[0] = '\0';
	return nt_trust_path(path, "plugin file", resolved, why, sizeof(why));
}

static void expect_refused(const char *path, const char *what)
{
	ck_assert_int_eq(check(path, NULL), -1);
	ck_assert_msg(strstr(why, what), "want '%s' in: %s", what, why);
	ck_assert_msg(strncmp(why, path, strlen(path)) == 0, "path first: %s", why);
}

START_TEST(a_private_file_is_trusted)
{
	char resolved[PATH_MAX], real[PATH_MAX];
	const char *p = make("x.so", 0755);

	ck_assert_msg(check(p, resolved) == 0, "%s", why);
	ck_assert_ptr_nonnull(realpath(p, real));
	ck_assert_str_eq(resolved, real);
}
END_TEST

START_TEST(write_bits_of_the_file)
{
	expect_refused(make("g.so", 0664), "refusing a plugin file writable by its group (mode 0664); chmod g-w it");
	expect_refused(make("o.so", 0646), "refusing a plugin file writable by others (mode 0646); chmod o-w it");
}
END_TEST

START_TEST(every_directory_above_counts)
{
	char want[256];
	const char *p;

	make("a/", 0775);
	make("a/b/", 0755);
	p = make("a/b/x.so", 0755);
	snprintf(want, sizeof(want), "its directory %s/a is writable by its group (mode 0775)", dir);
	expect_refused(p, want);
	chmod(dir, 0777); /* the walk goes top down: the first flaw is named */
	snprintf(want, sizeof(want), "its directory %s is writable by others (mode 0777)", dir);
	expect_refused(p, want);
}
END_TEST

START_TEST(sticky_directories_pass_their_entries_do_not)
{
	const char *p;

	make("t/", 01777);
	p = make("t/x.so", 0755);
	ck_assert_msg(check(p, NULL) == 0, "%s", why);
	p = make("t/w.so", 0666);
	expect_refused(p, "writable by others (mode 0666)");
}
END_TEST

START_TEST(symlinks_are_resolved_first)
{
	char link[256], resolved[PATH_MAX], want[256], good[256];

	make("good/", 0755);
	snprintf(good, sizeof(good), "%s", make("good/x.so", 0755));
	make("open/", 0777);
	/* a link that sits in an open directory but names a trusted file */
	snprintf(link, sizeof(link), "%s/open/l.so", dir);
	ck_assert_int_eq(symlink(good, link), 0);
	ck_assert_msg(check(link, resolved) == 0, "%s", why);
	ck_assert(strstr(resolved, "/good/x.so"));
	/* a link in a trusted directory to a file under an open one */
	make("open/y.so", 0755);
	snprintf(link, sizeof(link), "%s/good/l.so", dir);
	snprintf(want, sizeof(want), "%s/open/y.so", dir);
	ck_assert_int_eq(symlink(want, link), 0);
	snprintf(want, sizeof(want), "its directory %s/open is writable by others", dir);
	expect_refused(link, want);
}
END_TEST

START_TEST(not_a_file_or_missing)
{
	char missing[256];

	expect_refused(make("d/", 0755), "refusing a plugin file that is a directory");
	snprintf(missing, sizeof(missing), "%s/none.so", dir);
	expect_refused(missing, "No such file or directory");
}
END_TEST

/* Root may own anything; another owner needs root to set up (chown). */
START_TEST(owner_is_root_or_the_daemons_user)
{
	ck_assert_msg(nt_trust_path("/bin/sh", "plugin file", NULL, why, sizeof(why)) == 0,
		      "%s", why);
	if (geteuid() != 0) {
		/* our own file, in our own directory, is trusted too */
		ck_assert_msg(check(make("mine.so", 0755), NULL) == 0, "%s", why);
		return;
	}
	const char *p = make("nobody.so", 0755);
	ck_assert_int_eq(chown(p, 65534, 65534), 0);
	expect_refused(p, "refusing a plugin file owned by uid 65534 (only root may own it)");
	make("nd/", 0755);
	p = make("nd/x.so", 0755);
	char nd[256], want[300];
	snprintf(nd, sizeof(nd), "%s/nd", dir);
	ck_assert_int_eq(chown(nd, 65534, 65534), 0);
	snprintf(want, sizeof(want), "its directory %s is owned by uid 65534", nd);
	expect_refused(p, want);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("trust");
	TCase *tc = tcase_create("trust");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, a_private_file_is_trusted);
	tcase_add_test(tc, write_bits_of_the_file);
	tcase_add_test(tc, every_directory_above_counts);
	tcase_add_test(tc, sticky_directories_pass_their_entries_do_not);
	tcase_add_test(tc, symlinks_are_resolved_first);
	tcase_add_test(tc, not_a_file_or_missing);
	tcase_add_test(tc, owner_is_root_or_the_daemons_user);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
