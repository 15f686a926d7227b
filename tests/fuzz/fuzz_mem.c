/* SPDX-License-Identifier: MIT */
/* libFuzzer: the mem probe's ring-buffer callback (mem_on_record in
 * mem_ring.c: published events, OOM kills, and the internal
 * stack/exec/exit/fork records) on records of arbitrary bytes. The plugin's
 * sources are compiled in (mem.c included here for its descriptor, the
 * other files linked); init builds the state with the fuzz host. The BPF
 * object is opened (parsed, never loaded), so map lookups fail as they
 * would for a vanished entry, and pids are moved to numbers no process has. */
#include "../../plugins/mem/mem.c"

#include "fuzz_host.h"

static struct mem_bpf *skel;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	libbpf_set_print(NULL);
	skel = mem_bpf__open();
	return skel ? 0 : 1;
}

static void one(void *state, void *rec, size_t len)
{
	struct mem_state *st = state;

	st->sym_budget = 64; /* as each poll grants */
	mem_on_record(state, rec, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const void *cfg = fuzz_config(&ntcore_plugin, "");
	struct mem_state *st = NULL;

	if (!cfg || ntcore_plugin.init(fuzz_instance(), &fuzz_host, cfg, (void **)&st))
		abort();
	st->skel = skel;
	fuzz_records(data, size, FUZZ_MASK_PIDS, one, st);
	st->skel = NULL; /* shared by every input; not this state's to destroy */
	ntcore_plugin.fini(st);
	return 0;
}
