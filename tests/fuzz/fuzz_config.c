/* SPDX-License-Identifier: MIT */
/* libFuzzer: the config loader on arbitrary text: confread.c (@include
 * expansion, trust, the line map), libconfig's parser, the daemon's and
 * the instances' structure, then every instance group validated against a
 * schema with every key type, as a plugin's would be. The config file sits
 * in a directory holding an include file, a subdirectory, a FIFO and a
 * 0666 file, so that @include of each is met. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

struct sub_cfg {
	const char *path;
	struct nt_strlist symbols;
	int64_t slow_us;
};

struct all_cfg {
	bool flag;
	int64_t count;
	double ratio;
	const char *mode;
	struct nt_strlist names;
	struct nt_cfg_array libs;
};

static const char *const modes[] = {"fast", "exact", NULL};

static const struct nt_cfg_key sub_keys[] = {
	{.key = "path", .type = NT_CFG_STRING, .offset = offsetof(struct sub_cfg, path),
	 .min = 1, .max = 0},
	{.key = "symbols", .type = NT_CFG_STRING_LIST,
	 .offset = offsetof(struct sub_cfg, symbols), .def = "[]", .min = 1, .max = 0},
	{.key = "slow_us", .type = NT_CFG_INT, .offset = offsetof(struct sub_cfg, slow_us),
	 .def = "1000", .min = 0, .max = 1e9},
};

static const struct nt_cfg_key keys[] = {
	{.key = "flag", .type = NT_CFG_BOOL, .offset = offsetof(struct all_cfg, flag),
	 .def = "true", .min = 1, .max = 0},
	{.key = "count", .type = NT_CFG_INT, .offset = offsetof(struct all_cfg, count),
	 .def = "10", .min = 1, .max = 100},
	{.key = "ratio", .type = NT_CFG_FLOAT, .offset = offsetof(struct all_cfg, ratio),
	 .def = "0.5", .min = 0, .max = 1},
	{.key = "mode", .type = NT_CFG_STRING, .offset = offsetof(struct all_cfg, mode),
	 .def = "\"fast\"", .min = 1, .max = 0, .choices = modes},
	{.key = "names", .type = NT_CFG_STRING_LIST,
	 .offset = offsetof(struct all_cfg, names), .def = "[\"a\"]", .min = 1, .max = 0},
	{.key = "libs", .type = NT_CFG_GROUP_LIST, .offset = offsetof(struct all_cfg, libs),
	 .min = 1, .max = 0, .sub = sub_keys, .n_sub = 3, .sub_size = sizeof(struct sub_cfg)},
};

static FILE *quiet;
static char dir[] = "/tmp/nt-fuzz-config-XXXXXX";
static char conf[sizeof(dir) + 16];

static void put(const char *name, const char *text, mode_t mode)
{
	char path[sizeof(dir) + 32];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0 || write(fd, text, strlen(text)) < 0 || fchmod(fd, mode))
		abort();
	close(fd);
}

static void cleanup(void)
{
	static const char *const names[] = {"part.conf", "plugins.conf", "open.conf",
					    "fifo", "fuzz.conf", "sub"};
	char path[sizeof(dir) + 32];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (unlink(path))
			rmdir(path);
	}
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[sizeof(dir) + 32];

	(void)argc;
	(void)argv;
	if (!mkdtemp(dir) || chmod(dir, 0755))
		return 1;
	atexit(cleanup);
	put("part.conf", "ntcore = { log_level = \"debug\"; };\n", 0644);
	put("plugins.conf", "plugins = ( { plugin = \"x\"; count = 5; } );\n", 0644);
	put("open.conf", "plugins = ();\n", 0666);
	snprintf(path, sizeof(path), "%s/sub", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/fifo", dir);
	mkfifo(path, 0644);
	snprintf(conf, sizeof(conf), "%s/fuzz.conf", dir);
	quiet = fopen("/dev/null", "w");
	return quiet ? 0 : 1;
}

/* Every instance group against the schema with every key type. */
static void fill_all(struct nt_config *c)
{
	for (size_t i = 0; i < c->n_insts; i++) {
		struct nt_arena arena = {0};
		void *out = NULL;
		const char *file;
		int line;
		nt_config_fill(c, c->insts[i].group, c->insts[i].name, keys,
			       NT_ARRAY_LEN(keys), sizeof(struct all_cfg), &arena, &out);
		nt_config_where(c, c->insts[i].line, &file, &line);
		nt_arena_free(&arena);
	}
}

/* The text is read from a file in the fixture directory (as -c FILE is),
 * or, when its first byte is '\x01', given as text (as the embedded
 * default is; its relative includes are taken from the working directory). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nt_config c;
	int loaded;

	if (size && data[0] == 1) {
		char *text = malloc(size);
		if (!text)
			return 0;
		memcpy(text, data + 1, size - 1);
		text[size - 1] = '\0';
		loaded = nt_config_load(&c, "(embedded)", text, quiet);
		free(text);
	} else {
		int fd = open(conf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, data, size) != (ssize_t)size)
			abort();
		close(fd);
		loaded = nt_config_load(&c, conf, NULL, quiet);
	}
	if (loaded == 0)
		fill_all(&c);
	nt_config_free(&c);
	return 0;
}
