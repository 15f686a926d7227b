/* SPDX-License-Identifier: MIT */
/* libFuzzer: the sched probe's ring-buffer callback (sched_on_ring in
 * sched_ring.c: thread exit records, published events) on records of
 * arbitrary bytes. The plugin's sources are compiled in (sched.c included
 * here for its descriptor, the other files linked); init builds the state
 * with the fuzz host. */
#include "../../plugins/sched/sched.c"

#include "fuzz_host.h"

static void one(void *state, void *rec, size_t len)
{
	struct sched_state *st = state;

	st->ring_budget = 1u << 30; /* as ring_drain sets it */
	st->ring_n = 0;
	sched_on_ring(state, rec, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const void *cfg = fuzz_config(&ntcore_plugin, "");
	void *state = NULL;

	if (!cfg || ntcore_plugin.init(fuzz_instance(), &fuzz_host, cfg, &state))
		abort();
	fuzz_records(data, size, FUZZ_MASK_PIDS, one, state);
	ntcore_plugin.fini(state);
	return 0;
}
