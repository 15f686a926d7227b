/* SPDX-License-Identifier: MIT */
/* libFuzzer: the io probe's ring-buffer callback (io_on_record, io_ring.c)
 * on records of arbitrary bytes, as if the kernel had written them. The
 * plugin's io.c is compiled in, so its static init builds the state with
 * the fuzz host, no kernel; the callback is called as the ring buffer
 * would. */
#include "../../plugins/io/io.c"

#include "fuzz_host.h"

static void one(void *state, void *rec, size_t len)
{
	io_on_record(state, rec, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const void *cfg = fuzz_config(&ntcore_plugin, "");
	void *state = NULL;

	if (!cfg || ntcore_plugin.init(fuzz_instance(), &fuzz_host, cfg, &state))
		abort();
	fuzz_records(data, size, FUZZ_KEEP_PIDS, one, state);
	ntcore_plugin.fini(state);
	return 0;
}
