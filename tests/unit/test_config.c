/* Config loading and schema validation: every error names FILE:LINE. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

struct plug_cfg {
	bool flag;
	int64_t count;
	double ratio;
	const char *mode;
	struct nt_strlist names;
	struct nt_cfg_array libs;
};

struct lib_cfg {
	const char *path;
	struct nt_strlist symbols;
	int64_t slow_us;
};

static const char *const modes[] = {"fast", "exact", NULL};

static const struct nt_cfg_key lib_keys[] = {
	{.key = "path", .type = NT_CFG_STRING, .offset = offsetof(struct lib_cfg, path),
	 .min = 1, .max = 0},
	{.key = "symbols", .type = NT_CFG_STRING_LIST,
	 .offset = offsetof(struct lib_cfg, symbols), .min = 1, .max = 0},
	{.key = "slow_us", .type = NT_CFG_INT, .offset = offsetof(struct lib_cfg, slow_us),
	 .def = "1000", .min = 0, .max = 1e9},
};

static const struct nt_cfg_key keys[] = {
	{.key = "flag", .type = NT_CFG_BOOL, .offset = offsetof(struct plug_cfg, flag),
	 .def = "true", .min = 1, .max = 0},
	{.key = "count", .type = NT_CFG_INT, .offset = offsetof(struct plug_cfg, count),
	 .def = "10", .min = 1, .max = 100},
	{.key = "ratio", .type = NT_CFG_FLOAT, .offset = offsetof(struct plug_cfg, ratio),
	 .def = "0.5", .min = 0, .max = 1},
	{.key = "mode", .type = NT_CFG_STRING, .offset = offsetof(struct plug_cfg, mode),
	 .def = "\"fast\"", .min = 1, .max = 0, .choices = modes},
	{.key = "names", .type = NT_CFG_STRING_LIST,
	 .offset = offsetof(struct plug_cfg, names), .def = "[\"a\", \"b\"]", .min = 1, .max = 0},
	{.key = "libs", .type = NT_CFG_GROUP_LIST, .offset = offsetof(struct plug_cfg, libs),
	 .min = 1, .max = 0, .sub = lib_keys, .n_sub = 3, .sub_size = sizeof(struct lib_cfg)},
};

static char path[64];
static char diag[8192];
static struct nt_arena arena; /* holds the last successful config */

/* Loads `text` as a file, validates instance 0 against `keys`; returns the
 * status and leaves the messages in `diag`. */
static int load(const char *text, struct plug_cfg **out)
{
	struct nt_config c;
	FILE *d = fmemopen(diag, sizeof(diag), "w");
	int fd, status;
	void *cfg = NULL;

	strcpy(path, "/tmp/nt-cfg-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	memset(diag, 0, sizeof(diag));
	nt_arena_free(&arena);
	status = nt_config_load(&c, path, NULL, d);
	if (status == 0 && c.n_insts)
		status = nt_config_fill(&c, c.insts[0].group, c.insts[0].name, keys, 6,
					sizeof(struct plug_cfg), &arena, &cfg);
	if (out && status == 0)
		*out = cfg;
	fclose(d);
	nt_config_free(&c);
	unlink(path);
	return status;
}

static void expect_error(const char *text, int line, const char *what)
{
	char want[256];

	ck_assert_int_eq(load(text, NULL), -1);
	nt_arena_free(&arena);
	snprintf(want, sizeof(want), "%s:%d: ", path, line);
	ck_assert_msg(strstr(diag, want), "want '%s' in: %s", want, diag);
	ck_assert_msg(strstr(diag, what), "want '%s' in: %s", what, diag);
}

START_TEST(defaults_fill_the_struct)
{
	struct plug_cfg *cfg = NULL;

	ck_assert_int_eq(load("plugins = ( { plugin = \"x\"; } );\n", &cfg), 0);
	ck_assert(cfg->flag);
	ck_assert_int_eq(cfg->count, 10);
	ck_assert_double_eq(cfg->ratio, 0.5);
	ck_assert_str_eq(cfg->mode, "fast");
	ck_assert_uint_eq(cfg->names.n, 2);
	ck_assert_str_eq(cfg->names.v[1], "b");
	ck_assert_uint_eq(cfg->libs.n, 0);
	nt_arena_free(&arena);
}
END_TEST

START_TEST(values_and_group_lists)
{
	struct plug_cfg *cfg = NULL;
	const char *text =
		"plugins = (\n"
		"  { plugin = \"x\"; count = 42; ratio = 1; mode = \"exact\";\n"
		"    libs = ( { path = \"libcublas.so\"; symbols = [\"cublasSgemm_v2\"]; } ); }\n"
		");\n";

	ck_assert_int_eq(load(text, &cfg), 0);
	ck_assert_int_eq(cfg->count, 42);
	ck_assert_double_eq(cfg->ratio, 1.0);
	ck_assert_str_eq(cfg->mode, "exact");
	ck_assert_uint_eq(cfg->libs.n, 1);
	const struct lib_cfg *lib = cfg->libs.items;
	ck_assert_str_eq(lib->path, "libcublas.so");
	ck_assert_str_eq(lib->symbols.v[0], "cublasSgemm_v2");
	ck_assert_int_eq(lib->slow_us, 1000);
	nt_arena_free(&arena);
}
END_TEST

START_TEST(unknown_key_has_its_line)
{
	expect_error("plugins = (\n  { plugin = \"x\";\n    cuont = 3; }\n);\n", 3,
		     "[x.0] unknown key 'cuont'");
}
END_TEST

START_TEST(wrong_type_has_its_line)
{
	expect_error("plugins = (\n  { plugin = \"x\";\n\n    count = \"many\"; }\n);\n", 4,
		     "count: expected an integer");
	expect_error("plugins = ( { plugin = \"x\";\n flag = 1; } );\n", 2,
		     "flag: expected true or false");
}
END_TEST

START_TEST(bounds_and_choices)
{
	expect_error("plugins = ( { plugin = \"x\";\n count = 1000; } );\n", 2,
		     "count: 1000 is out of range [1, 100]");
	expect_error("plugins = ( { plugin = \"x\";\n mode = \"slow\"; } );\n", 2,
		     "mode: \"slow\" is not one of \"fast\", \"exact\"");
}
END_TEST

START_TEST(nested_group_errors)
{
	expect_error("plugins = ( { plugin = \"x\";\n libs = (\n { path = \"a\"; } ); } );\n", 3,
		     "missing required key 'symbols'");
	expect_error("plugins = ( { plugin = \"x\";\n libs = ( { path = \"a\";\n symbols = [\"s\"]; slow = 3; } ); } );\n",
		     3, "unknown key 'slow'");
}
END_TEST

START_TEST(structure_errors)
{
	expect_error("plugins = (\n  { name = \"y\"; }\n);\n", 2, "missing required key 'plugin'");
	expect_error("colour = 3;\nplugins = ();\n", 1, "unknown top-level key 'colour'");
	expect_error("ntcore = { log_level = \"loud\"; };\nplugins = ();\n", 1, "log_level");
	expect_error("plugins = (\n { plugin = \"x\"; },\n { plugin = \"z\"; name = \"x.0\"; }\n);\n",
		     3, "instance name 'x.0' is already used at line 2");
	expect_error("plugins = (\n { plugin = \"x\"; count = ; }\n);\n", 2, "syntax error");
	expect_error("plugins = ( { plugin = \"x\";\n required = \"yes\"; } );\n", 2,
		     "required: expected true or false");
	expect_error("plugins = ( { plugin = \"x\";\n queue_kb = 8; } );\n", 2,
		     "queue_kb: expected an integer from 64 to 4194304 (KiB)");
	expect_error("plugins = ( { plugin = \"x\";\n queue_kb = \"big\"; } );\n", 2,
		     "queue_kb: expected an integer");
}
END_TEST

START_TEST(queue_kb_is_kept)
{
	struct nt_config c;
	FILE *d = fmemopen(diag, sizeof(diag), "w");
	const char *text = "plugins = ( { plugin = \"a\"; queue_kb = 4096; }, { plugin = \"b\"; } );";

	ck_assert_int_eq(nt_config_load(&c, "inline", text, d), 0);
	ck_assert_uint_eq(c.insts[0].queue_kb, 4096);
	ck_assert_uint_eq(c.insts[1].queue_kb, 0);
	nt_config_free(&c);
	fclose(d);
}
END_TEST

START_TEST(instance_names_default_per_plugin)
{
	struct nt_config c;
	FILE *d = fmemopen(diag, sizeof(diag), "w");
	const char *text = "plugins = ( { plugin = \"a\"; }, { plugin = \"b\"; },"
			   " { plugin = \"a\"; enabled = false; } );";

	ck_assert_int_eq(nt_config_load(&c, "inline", text, d), 0);
	ck_assert_str_eq(c.insts[0].name, "a.0");
	ck_assert_str_eq(c.insts[1].name, "b.0");
	ck_assert_str_eq(c.insts[2].name, "a.1");
	ck_assert(!c.insts[2].enabled);
	nt_config_free(&c);
	fclose(d);
}
END_TEST

START_TEST(missing_file)
{
	struct nt_config c;
	FILE *d = fmemopen(diag, sizeof(diag), "w");

	ck_assert_int_eq(nt_config_load(&c, "/nonexistent.conf", NULL, d), -1);
	fclose(d);
	ck_assert_msg(strstr(diag, "/nonexistent.conf: cannot read"), "%s", diag);
	nt_config_free(&c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, defaults_fill_the_struct);
	tcase_add_test(tc, queue_kb_is_kept);
	tcase_add_test(tc, values_and_group_lists);
	tcase_add_test(tc, unknown_key_has_its_line);
	tcase_add_test(tc, wrong_type_has_its_line);
	tcase_add_test(tc, bounds_and_choices);
	tcase_add_test(tc, nested_group_errors);
	tcase_add_test(tc, structure_errors);
	tcase_add_test(tc, instance_names_default_per_plugin);
	tcase_add_test(tc, missing_file);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
