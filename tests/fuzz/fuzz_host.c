/* SPDX-License-Identifier: MIT */
/* The fuzz harnesses' host (fuzz_host.h): the core's bus and registry, and
 * a consumer that renders every published event like the file sink. */
#include "fuzz_host.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus.h"
#include "config.h"
#include "jsonl.h"
#include "metrics.h"

struct nt_instance {
	const char *name;
};

/* The harness state lives as long as the fuzzing process. */
static struct {
	struct nt_bus bus;
	struct nt_registry reg;
	struct nt_instance inst, sink;
	struct nt_buf out;
	uint64_t delivered, drops;
	struct nt_arena arena;
	const void *config;
	int ready;
} H;

/* Render each event as the file sink would, then forget the text. */
static void render(void *subscriber, const struct nt_event_hdr *ev,
		   const struct nt_schema *schema)
{
	(void)subscriber;
	H.out.len = 0;
	nt_jsonl_event(&H.out, ev, schema, ev->ts_ns);
	nt_folded_event(&H.out, ev, schema);
	H.delivered++;
}

static void setup(void)
{
	if (H.ready)
		return;
	nt_bus_init(&H.bus, render);
	nt_registry_init(&H.reg);
	H.inst.name = "fuzz.0";
	H.sink.name = "sink";
	nt_bus_subscribe(&H.bus, &H.sink, "*");
	H.ready = 1;
}

struct nt_instance *fuzz_instance(void)
{
	setup();
	return &H.inst;
}

static void fz_log(struct nt_instance *inst, int level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	(void)inst;
	(void)level;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap); /* formats every argument */
	va_end(ap);
}

static const char *fz_name(const struct nt_instance *inst)
{
	return inst->name;
}

static int fz_config_error(struct nt_instance *inst, const char *key,
			   const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	(void)inst;
	(void)key;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int fz_register(struct nt_instance *inst, const struct nt_schema *schema)
{
	const char *why;

	return nt_bus_register(&H.bus, inst, schema, &why);
}

static int fz_publish(struct nt_instance *inst, const struct nt_event_hdr *ev)
{
	(void)inst;
	return nt_bus_publish(&H.bus, ev);
}

static int fz_subscribe(struct nt_instance *inst, const char *pattern)
{
	(void)inst;
	(void)pattern; /* the plugin's own consume is not under test */
	return 0;
}

static const struct nt_schema *fz_schema_of(const struct nt_instance *inst,
					    uint32_t type)
{
	(void)inst;
	return nt_bus_schema(&H.bus, type);
}

static struct nt_metric *fz_metric_register(struct nt_instance *inst,
					    const struct nt_metric_desc *desc)
{
	const char *why;

	(void)inst;
	return nt_registry_register(&H.reg, desc, &why);
}

static int fz_visit(struct nt_instance *inst, nt_metric_visit_fn fn, void *arg)
{
	(void)inst;
	return nt_registry_visit(&H.reg, fn, arg);
}

static int fz_watch(struct nt_instance *inst, int fd, uint32_t token)
{
	(void)inst;
	(void)fd;
	(void)token;
	return 0;
}

static int fz_timer(struct nt_instance *inst, uint64_t ms, uint32_t token)
{
	(void)inst;
	(void)ms;
	(void)token;
	return 0;
}

static int fz_target_map_fd(const struct nt_instance *inst)
{
	(void)inst;
	return -1; /* host-wide */
}

static size_t fz_target_pids(const struct nt_instance *inst, uint32_t *out,
			     size_t max)
{
	(void)inst;
	(void)out;
	(void)max;
	return 0;
}

/* A name from the address: the same address always names the same
 * function; one address in 8 is unknown (name NULL), as JIT code is. */
static int fz_symbolize(struct nt_instance *inst, uint32_t pid, uint64_t addr,
			struct nt_symbol *out)
{
	static const char *const names[] = {"main", "train_step", "cudaLaunchKernel",
					    "_Z6kernelPfi", "a;b", "\xff\xfe"};

	(void)inst;
	(void)pid;
	memset(out, 0, sizeof(*out));
	if (addr % 8 == 7)
		return -ENOENT;
	out->name = names[addr % (sizeof(names) / sizeof(names[0]))];
	out->offset = addr & 0xfff;
	out->module = addr % 3 ? "libfuzz.so.1" : "/usr/lib/x86_64-linux-gnu/libc.so.6";
	return 0;
}

static uint64_t fz_wall(const struct nt_instance *inst, uint64_t mono)
{
	(void)inst;
	return mono;
}

static void fz_drop(struct nt_instance *inst, const char *stage, uint64_t n)
{
	(void)inst;
	(void)stage;
	H.drops += n;
}

static const char *fz_config_file(const struct nt_instance *inst, int *line)
{
	(void)inst;
	if (line)
		*line = 1;
	return "fuzz.conf";
}

static void fz_vlog(struct nt_instance *inst, int level, const char *fmt,
		    va_list ap)
{
	char line[1024];

	(void)inst;
	(void)level;
	vsnprintf(line, sizeof(line), fmt, ap);
}

/* No kernel here: a plugin that needs the BTF in a decoder would be wrong. */
static const struct btf *fz_vmlinux_btf(struct nt_instance *inst)
{
	(void)inst;
	return NULL;
}

static int fz_child_setenv(struct nt_instance *inst, const char *name,
			   const char *value, bool overwrite)
{
	(void)inst;
	(void)name;
	(void)value;
	(void)overwrite;
	return -ESRCH; /* host-wide: no child */
}

static bool fz_stop_now(struct nt_instance *inst)
{
	(void)inst;
	return false;
}

const struct nt_host fuzz_host = {
	.abi_major = NT_ABI_MAJOR,
	.abi_minor = NT_ABI_MINOR,
	.size = sizeof(struct nt_host),
	.log = fz_log,
	.instance_name = fz_name,
	.config_error = fz_config_error,
	.register_schema = fz_register,
	.publish = fz_publish,
	.subscribe = fz_subscribe,
	.schema_of = fz_schema_of,
	.metric_register = fz_metric_register,
	.metric_add = nt_metric_add,
	.metric_set = nt_metric_set,
	.metric_observe = nt_metric_observe,
	.metric_hist_set = nt_metric_hist_set,
	.metric_remove = nt_metric_remove,
	.metrics_visit = fz_visit,
	.watch_fd = fz_watch,
	.add_timer = fz_timer,
	.target_map_fd = fz_target_map_fd,
	.target_pids = fz_target_pids,
	.symbolize = fz_symbolize,
	.wall_ns = fz_wall,
	.count_drop = fz_drop,
	.config_file = fz_config_file,
	.vlog = fz_vlog,
	.vmlinux_btf = fz_vmlinux_btf,
	.child_setenv = fz_child_setenv,
	.stop_now = fz_stop_now,
};

const void *fuzz_config(const struct nt_plugin_desc *desc, const char *keys)
{
	struct nt_config c;
	char *text = NULL;
	void *out = NULL;
	FILE *quiet;

	setup();
	if (H.config)
		return H.config;
	quiet = fopen("/dev/null", "w");
	if (asprintf(&text, "plugins = ( { plugin = \"%s\"; %s } );", desc->name,
		     keys) < 0)
		return NULL;
	if (nt_config_load(&c, "fuzz.conf", text, quiet) == 0 &&
	    nt_config_fill(&c, c.insts[0].group, "fuzz.0", desc->config,
			   desc->n_config, desc->config_size, &H.arena, &out) == 0)
		H.config = out;
	nt_config_free(&c);
	free(text);
	if (quiet)
		fclose(quiet);
	return H.config;
}

uint64_t fuzz_delivered(void)
{
	return H.delivered;
}

