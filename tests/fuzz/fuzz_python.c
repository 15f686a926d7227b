/* SPDX-License-Identifier: MIT */
/* libFuzzer: the python probe's ring-buffer callback (on_ring: CPU, idle
 * and exception samples, off-CPU weights, USDT call markers, exec and
 * unknown-process notices; on_ring is pyring.c's) on records of arbitrary
 * bytes. python.c is compiled in, the plugin's other files beside it
 * (meson.build); init builds the state with the fuzz host. Pids
 * are moved to numbers no process has; one of them, FAKE_PID, is set up
 * as a sampled CPython 3.11, so samples of it are walked frame by frame
 * (its memory cannot be read: every code object is unreadable). The BPF
 * object is opened, never loaded. */
#include "../../plugins/python/python.c"

#include "fuzz_host.h"

#define FAKE_PID (FUZZ_NO_PROCESS | 4242)

static struct python_bpf *skel;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	libbpf_set_print(NULL);
	skel = python_bpf__open();
	return skel ? 0 : 1;
}

static void fake_process(struct py_plugin *st)
{
	struct pyp *p = proc_get(st, FAKE_PID, true);
	const struct py_layout *l = py_layout_lookup(3, 11);

	if (!p || !l)
		abort();
	p->status = PS_ATTACHED;
	p->layout = *l;
	p->found.major = 3;
	p->found.minor = 11;
}

static void one(void *state, void *rec, size_t len)
{
	on_ring(state, rec, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const void *cfg = fuzz_config(&ntcore_plugin, "native = true; calls = true;");
	struct py_plugin *st = NULL;

	if (!cfg || ntcore_plugin.init(fuzz_instance(), &fuzz_host, cfg, (void **)&st))
		abort();
	st->skel = skel;
	fake_process(st);
	fuzz_records(data, size, FUZZ_MASK_PIDS, one, st);
	publish_all(st, 0); /* what was aggregated, out as events */
	st->skel = NULL;
	ntcore_plugin.fini(st);
	return 0;
}
