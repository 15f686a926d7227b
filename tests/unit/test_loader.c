/* The loader: ABI checks, missing ops, permissions, search rules. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader.h"

static char why[1024];

static int open_fixture(const char *name, struct nt_loaded *out)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s.so", FIXTURE_DIR, name);
	chmod(path, 0755);
	return nt_loader_open(path, out, why, sizeof(why));
}

START_TEST(accepts_current_abi)
{
	struct nt_loaded lib;

	ck_assert_int_eq(open_fixture("fixture_good", &lib), 0);
	ck_assert_str_eq(lib.desc.name, "fixture_good");
	ck_assert_uint_eq(lib.desc.kind, NT_KIND_SINK);
	ck_assert(NT_DESC_HAS(&lib.desc, flush));
	nt_loader_close(&lib);
}
END_TEST

START_TEST(loads_previous_minor_without_reading_past_its_size)
{
	struct nt_loaded lib;

	ck_assert_msg(open_fixture("fixture_old_minor", &lib) == 0, "%s", why);
	ck_assert_uint_eq(lib.desc.abi_minor, 0);
	ck_assert_uint_eq(lib.raw->size, NT_DESC_SIZE_1_0);
	/* The word after the 1.0 descriptor is non-zero in the fixture; the
	 * loader must not have taken it for `flush`. */
	ck_assert_ptr_null(lib.desc.flush);
	ck_assert(!NT_DESC_HAS(&lib.desc, flush));
	nt_loader_close(&lib);
}
END_TEST

START_TEST(refuses_other_major_naming_both_versions)
{
	struct nt_loaded lib;
	char want[64];

	ck_assert_int_eq(open_fixture("fixture_new_major", &lib), -1);
	snprintf(want, sizeof(want), "plugin ABI %d.0", NT_ABI_MAJOR + 1);
	ck_assert_msg(strstr(why, want), "message: %s", why);
	snprintf(want, sizeof(want), "(ABI %d.%d)", NT_ABI_MAJOR, NT_ABI_MINOR);
	ck_assert_msg(strstr(why, want), "message: %s", why);
	ck_assert_msg(strstr(why, "fixture_new_major.so"), "message: %s", why);
}
END_TEST

START_TEST(refuses_missing_op)
{
	struct nt_loaded lib;

	ck_assert_int_eq(open_fixture("fixture_missing_op", &lib), -1);
	ck_assert_msg(strstr(why, "lacks the required op 'poll'"), "message: %s", why);
	ck_assert_int_eq(open_fixture("fixture_missing_consume", &lib), -1);
	ck_assert_msg(strstr(why, "lacks the required op 'consume'"), "message: %s", why);
}
END_TEST

START_TEST(refuses_file_writable_by_others)
{
	char src[4096], dir[] = "/tmp/nt-loader-XXXXXX", dst[4200], cmd[9000];
	struct nt_loaded lib;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(src, sizeof(src), "%s/fixture_good.so", FIXTURE_DIR);
	snprintf(dst, sizeof(dst), "%s/fixture_good.so", dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", src, dst);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(chmod(dst, 0666), 0);
	ck_assert_int_eq(nt_loader_open(dst, &lib, why, sizeof(why)), -1);
	ck_assert_msg(strstr(why, "writable by others"), "message: %s", why);
	ck_assert_int_eq(chmod(dst, 0644), 0);
	ck_assert_int_eq(nt_loader_open(dst, &lib, why, sizeof(why)), 0);
	nt_loader_close(&lib);
	unlink(dst);
	rmdir(dir);
}
END_TEST

START_TEST(refuses_non_plugin)
{
	struct nt_loaded lib;

	ck_assert_int_eq(nt_loader_open("/etc/hostname", &lib, why, sizeof(why)), -1);
	ck_assert_int_eq(nt_loader_open("/nonexistent/x.so", &lib, why, sizeof(why)), -1);
	ck_assert_msg(strstr(why, "No such file"), "message: %s", why);
}
END_TEST

START_TEST(finds_by_search_rules)
{
	char dir[] = "/tmp/nt-find-XXXXXX", path[4096], want[4200];
	const char *dirs[] = {"/nonexistent", dir};

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/cuda", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/cuda/cuda_memleak.so", dir);
	fclose(fopen(path, "w"));
	ck_assert_int_eq(nt_loader_find(dirs, 2, "cuda_memleak", path, sizeof(path)), 0);
	snprintf(want, sizeof(want), "%s/cuda/cuda_memleak.so", dir);
	ck_assert_str_eq(path, want);
	ck_assert_int_eq(nt_loader_find(dirs, 2, "nothere", path, sizeof(path)), -ENOENT);
	unlink(want);
	snprintf(path, sizeof(path), "%s/cuda", dir);
	rmdir(path);
	rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("loader");
	TCase *tc = tcase_create("loader");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, accepts_current_abi);
	tcase_add_test(tc, loads_previous_minor_without_reading_past_its_size);
	tcase_add_test(tc, refuses_other_major_naming_both_versions);
	tcase_add_test(tc, refuses_missing_op);
	tcase_add_test(tc, refuses_file_writable_by_others);
	tcase_add_test(tc, refuses_non_plugin);
	tcase_add_test(tc, finds_by_search_rules);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
