/* SPDX-License-Identifier: MIT */
/* ntcore: command line. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"

extern const char nt_default_conf[];

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ntcore [-c FILE] [-p PID]... [--cgroup PATH]... [-d SECONDS] [-v] [--check]\n"
		"              [--list-plugins] [--help-plugin NAME] [-- CMD ARGS]\n"
		"\n"
		"  -c, --config FILE      configuration (default: the embedded default.conf)\n"
		"  -p, --pid PID          trace this process and its children (repeatable)\n"
		"      --cgroup PATH      trace every process in this cgroup v2 subtree,\n"
		"                         including ones started or moved there later\n"
		"                         (repeatable; relative to the cgroup2 mount)\n"
		"  -d, --duration SECS    stop after SECS seconds\n"
		"  -v, --verbose          debug logging\n"
		"      --check            validate the configuration and plugins, then exit\n"
		"      --list-plugins     list the plugins found in the search path\n"
		"      --help-plugin NAME show a plugin's configuration keys\n"
		"      --version          print the version\n"
		"  -- CMD ARGS            start CMD once every probe is attached, trace it\n"
		"                         and its children, stop when it exits\n"
		"\n"
		"Plugins are searched in $NTCORE_PLUGIN_PATH, ntcore.plugin_dirs, %s.\n",
		NTCORE_PLUGINDIR);
}

static int parse_pid(const char *text, uint32_t *out)
{
	char *end;

	errno = 0;
	unsigned long v = strtoul(text, &end, 10);
	if (errno || end == text || *end || v == 0 || v > 4194304)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int parse_duration(const char *text, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(text, &end);
	return errno || end == text || *end || !(*out > 0) ? -1 : 0;
}

enum { OPT_CHECK = 256, OPT_LIST, OPT_HELP_PLUGIN, OPT_VERSION, OPT_CGROUP };

static const struct option long_options[] = {
	{"config", required_argument, NULL, 'c'},
	{"pid", required_argument, NULL, 'p'},
	{"duration", required_argument, NULL, 'd'},
	{"verbose", no_argument, NULL, 'v'},
	{"help", no_argument, NULL, 'h'},
	{"check", no_argument, NULL, OPT_CHECK},
	{"list-plugins", no_argument, NULL, OPT_LIST},
	{"help-plugin", required_argument, NULL, OPT_HELP_PLUGIN},
	{"version", no_argument, NULL, OPT_VERSION},
	{"cgroup", required_argument, NULL, OPT_CGROUP},
	{NULL, 0, NULL, 0},
};

int main(int argc, char **argv)
{
	struct nt_options opt = {0};
	const char *help_plugin = NULL;
	bool list = false;
	int c, status;

	/* '+': stop at the first non-option so "-- CMD -x" keeps its flags. */
	while ((c = getopt_long(argc, argv, "+c:p:d:vh", long_options, NULL)) != -1) {
		switch (c) {
		case 'c':
			opt.config_path = optarg;
			break;
		case 'p': {
			uint32_t *grown = realloc(opt.pids, (opt.n_pids + 1) * sizeof(*grown));
			if (!grown)
				return 1;
			opt.pids = grown;
			if (parse_pid(optarg, &opt.pids[opt.n_pids]) < 0) {
				fprintf(stderr, "ntcore: -p %s: not a process id\n", optarg);
				free(opt.pids);
				return 2;
			}
			opt.n_pids++;
			break;
		}
		case 'd':
			if (parse_duration(optarg, &opt.duration_s) < 0) {
				fprintf(stderr, "ntcore: -d %s: expected a positive number of seconds\n",
					optarg);
				free(opt.pids);
				return 2;
			}
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 'h':
			usage(stdout);
			free(opt.pids);
			return 0;
		case OPT_CHECK:
			opt.check_only = true;
			break;
		case OPT_LIST:
			list = true;
			break;
		case OPT_HELP_PLUGIN:
			help_plugin = optarg;
			break;
		case OPT_CGROUP: {
			const char **grown = realloc(opt.cgroups, (opt.n_cgroups + 1) * sizeof(*grown));
			if (!grown)
				return 1;
			opt.cgroups = grown;
			if (!*optarg) {
				fprintf(stderr, "ntcore: --cgroup: expected a cgroup path\n");
				return 2;
			}
			opt.cgroups[opt.n_cgroups++] = optarg;
			break;
		}
		case OPT_VERSION:
			printf("ntcore %s (plugin ABI %s)\n", NTCORE_VERSION, NT_ABI_TEXT);
			free(opt.pids);
			return 0;
		default:
			usage(stderr);
			free(opt.pids);
			return 2;
		}
	}
	if (optind < argc)
		opt.argv = &argv[optind];
	if (!opt.config_path) {
		opt.config_path = "(embedded default.conf)";
		opt.config_text = nt_default_conf;
	}
	if (list)
		status = nt_list_plugins(&opt);
	else if (help_plugin)
		status = nt_help_plugin(&opt, help_plugin);
	else
		status = nt_daemon_run(&opt);
	free(opt.pids);
	free(opt.cgroups);
	return status;
}
