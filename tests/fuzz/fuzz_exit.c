/* SPDX-License-Identifier: MIT */
/* libFuzzer: the core's exit-ring callback (proc.exit and proc.exec
 * records of the fork-following BPF program) on records of arbitrary
 * bytes, on a daemon that is set up but not run. Two -p targets are
 * named, so an exit record of one is logged as the daemon would; every
 * event published reaches a sink that renders it as the file sink does. */
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "jsonl.h"

#include "fuzz_host.h"

static struct nt_daemon *d;
static struct nt_instance sink;
static struct nt_buf out;

static void render(void *state, const struct nt_event_hdr *ev,
		   const struct nt_schema *schema)
{
	(void)state;
	out.len = 0;
	nt_jsonl_event(&out, ev, schema, ev->ts_ns);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static uint32_t pids[] = {FUZZ_NO_PROCESS | 7, FUZZ_NO_PROCESS | 4242};
	struct nt_options opt = {.config_path = "fuzz", .pids = pids, .n_pids = 2};

	(void)argc;
	(void)argv;
	d = calloc(1, sizeof(*d));
	if (!d)
		return 1;
	nt_daemon_setup(d, &opt);
	sink.d = d;
	sink.st = NT_ST_ATTACHED;
	sink.lib.desc.consume = render;
	return nt_bus_subscribe(&d->bus, &sink, "*");
}

static void one(void *arg, void *rec, size_t len)
{
	nt_daemon_follow_record(arg, rec, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_records(data, size, FUZZ_MASK_PIDS, one, d);
	return 0;
}
