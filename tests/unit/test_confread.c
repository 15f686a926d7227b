/* Config files read by the daemon itself: @include expanded where
 * libconfig's scanner would see it, errors named by the file and line they
 * come from, and no input that can end the process. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

static char dir[64];
static char diag[8192];

static void put(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	chmod(path, 0644);
}

/* Loads DIR/name; returns nt_config_load's status, messages in `diag`. */
static int load(const char *name, struct nt_config *c)
{
	char path[256];
	FILE *d = fmemopen(diag, sizeof(diag), "w");

	memset(diag, 0, sizeof(diag));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int status = nt_config_load(c, path, NULL, d);
	fclose(d);
	return status;
}

/* The message must hold "DIR/file:line: " followed by `what`. */
static void expect_at(const char *file, int line, const char *what)
{
	char want[512];

	snprintf(want, sizeof(want), "%s/%s:%d: %s", dir, file, line, what);
	ck_assert_msg(strstr(diag, want), "want '%s' in: %s", want, diag);
}

static void setup(void)
{
	strcpy(dir, "/tmp/nt-confread-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	chmod(dir, 0755);
}

static void teardown(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(include_beside_the_file_with_its_own_lines)
{
	struct nt_config c;

	put("main.conf", "# line 1\n@include \"part.conf\"\nplugins = (\n"
			 "  { plugin = \"x\"; },\n  { plugin = \"y\"; name = \"p\"; }\n);\n");
	put("part.conf", "ntcore = {\n  log_level = \"debug\";\n};\n");
	ck_assert_msg(load("main.conf", &c) == 0, "%s", diag);
	ck_assert_int_eq(c.log_level, 3);
	ck_assert_uint_eq(c.n_insts, 2);
	const char *file;
	int line;
	nt_config_where(&c, c.insts[1].line, &file, &line);
	ck_assert_int_eq(line, 5);
	ck_assert_msg(strstr(file, "/main.conf"), "%s", file);
	nt_config_free(&c);
}
END_TEST

START_TEST(errors_name_the_included_file)
{
	struct nt_config c;

	put("main.conf", "\n\n@include \"part.conf\"\nplugins = ();\n");
	put("part.conf", "ntcore = {\n  colour = 3;\n};\n");
	ck_assert_int_eq(load("main.conf", &c), -1);
	expect_at("part.conf", 2, "unknown key 'ntcore.colour'");
	nt_config_free(&c);

	put("part.conf", "ntcore = {\n\n  log_level = ;\n};\n");
	ck_assert_int_eq(load("main.conf", &c), -1);
	expect_at("part.conf", 3, "syntax error");
	nt_config_free(&c);

	/* a line of the main file after the include keeps its own number */
	put("part.conf", "ntcore = { log_level = \"info\"; };\n");
	put("main.conf", "@include \"part.conf\"\nplugins = (\n  { plugin = 3; }\n);\n");
	ck_assert_int_eq(load("main.conf", &c), -1);
	expect_at("main.conf", 3, "plugin: expected a string");
	nt_config_free(&c);
}
END_TEST

START_TEST(include_of_a_directory_fifo_or_missing_file)
{
	struct nt_config c;
	char sub[128];

	snprintf(sub, sizeof(sub), "%s/sub", dir);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	put("main.conf", "plugins = ();\n  @include \"sub\"\n");
	ck_assert_int_eq(load("main.conf", &c), -1);
	expect_at("main.conf", 2, "@include \"sub\": ");
	ck_assert_msg(strstr(diag, "is a directory"), "%s", diag);
	nt_config_free(&c);

	snprintf(sub, sizeof(sub), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(sub, 0644), 0);
	put("main.conf", "plugins = ();\n@include \"fifo\"\n");
	ck_assert_int_eq(load("main.conf", &c), -1); /* and it did not hang */
	expect_at("main.conf", 2, "@include \"fifo\": ");
	ck_assert_msg(strstr(diag, "not a regular file"), "%s", diag);
	nt_config_free(&c);

	put("main.conf", "plugins = ();\n@include \"none.conf\"\n");
	ck_assert_int_eq(load("main.conf", &c), -1);
	expect_at("main.conf", 2, "@include \"none.conf\": ");
	ck_assert_msg(strstr(diag, "No such file or directory"), "%s", diag);
	nt_config_free(&c);
}
END_TEST

START_TEST(include_cycle_is_an_error)
{
	struct nt_config c;

	put("main.conf", "plugins = ();\n@include \"main.conf\"\n");
	ck_assert_int_eq(load("main.conf", &c), -1);
	ck_assert_msg(strstr(diag, "nested more than 10 deep"), "%s", diag);
	nt_config_free(&c);
}
END_TEST

/* Where libconfig's scanner would not see an include, neither does the
 * reader: in comments, in strings, after other text on the line. */
START_TEST(include_only_where_the_scanner_sees_one)
{
	struct nt_config c;

	put("main.conf",
	    "/* @include \"nope1\"\n@include \"nope2\" */\n"
	    "# @include \"nope3\"\n"
	    "plugins = ( { plugin = \"a\"; name = \"x\n@include \\\"nope4\\\"\"; } );\n");
	ck_assert_msg(load("main.conf", &c) == 0, "%s", diag);
	ck_assert_str_eq(c.insts[0].name, "x\n@include \"nope4\"");
	nt_config_free(&c);

	/* text after the directive stays: here a comment */
	put("part.conf", "plugins = ();");
	put("main.conf", "\t @include \"part.conf\" # the list\n");
	ck_assert_msg(load("main.conf", &c) == 0, "%s", diag);
	nt_config_free(&c);

	/* a second directive on the same line is not at a line start */
	put("main.conf", "@include \"part.conf\" @include \"part.conf\"\n");
	ck_assert_int_eq(load("main.conf", &c), -1);
	nt_config_free(&c);

	put("main.conf", "@include \"pa\\rt.conf\"\n");
	ck_assert_int_eq(load("main.conf", &c), -1);
	expect_at("main.conf", 1, "@include: an escape other than");
	nt_config_free(&c);
}
END_TEST

START_TEST(writable_config_files_are_refused)
{
	struct nt_config c;
	char path[256];

	put("main.conf", "@include \"part.conf\"\n");
	put("part.conf", "plugins = ();\n");
	snprintf(path, sizeof(path), "%s/part.conf", dir);
	chmod(path, 0664);
	ck_assert_int_eq(load("main.conf", &c), -1);
	expect_at("main.conf", 1, "@include \"part.conf\": ");
	ck_assert_msg(strstr(diag, "refusing a config file writable by its group (mode 0664)"),
		      "%s", diag);
	nt_config_free(&c);

	snprintf(path, sizeof(path), "%s/main.conf", dir);
	chmod(path, 0666);
	ck_assert_int_eq(load("main.conf", &c), -1);
	ck_assert_msg(strstr(diag, "main.conf: refusing a config file writable by others (mode 0666)"),
		      "%s", diag);
	nt_config_free(&c);

	chmod(path, 0644);
	chmod(dir, 0777);
	ck_assert_int_eq(load("main.conf", &c), -1);
	ck_assert_msg(strstr(diag, "its directory") && strstr(diag, "writable by others (mode 0777)"),
		      "%s", diag);
	nt_config_free(&c);
}
END_TEST

START_TEST(embedded_text_includes_from_the_working_directory)
{
	struct nt_config c;
	FILE *d = fmemopen(diag, sizeof(diag), "w");
	char cwd[512];

	put("part.conf", "plugins = ( { plugin = \"z\"; } );\n");
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_int_eq(chdir(dir), 0);
	int status = nt_config_load(&c, "(embedded)", "\n@include \"part.conf\"\n", d);
	ck_assert_int_eq(chdir(cwd), 0);
	fclose(d);
	ck_assert_msg(status == 0, "%s", diag);
	ck_assert_str_eq(c.insts[0].plugin, "z");
	nt_config_free(&c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("confread");
	TCase *tc = tcase_create("confread");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, include_beside_the_file_with_its_own_lines);
	tcase_add_test(tc, errors_name_the_included_file);
	tcase_add_test(tc, include_of_a_directory_fifo_or_missing_file);
	tcase_add_test(tc, include_cycle_is_an_error);
	tcase_add_test(tc, include_only_where_the_scanner_sees_one);
	tcase_add_test(tc, writable_config_files_are_refused);
	tcase_add_test(tc, embedded_text_includes_from_the_working_directory);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
