/* SPDX-License-Identifier: MIT */
/* libFuzzer: the cuda probe's ring-buffer callback (on_record: calls,
 * entries, launches, kernel names, user functions) on records of arbitrary
 * bytes. The plugin's source is compiled in; init builds the state with
 * the fuzz host. Library-open and exec records are left out: on_path
 * opens the file they name and attaches uprobes to it (acting, not
 * decoding; its decoding is a bounded copy of the path). Pids are moved to
 * numbers no process has; the BPF object is opened, never loaded. */
#include "../../plugins/cuda/cuda.c"

#include "fuzz_host.h"

static struct cuda_bpf *skel;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	libbpf_set_print(NULL);
	skel = cuda_bpf__open();
	return skel ? 0 : 1;
}

static void one(void *state, void *rec, size_t len)
{
	const struct nt_event_hdr *h = rec;

	if (len >= sizeof(*h) &&
	    (h->type == NT_CUDA_RAW_OPEN || h->type == NT_CUDA_RAW_EXEC))
		return;
	on_record(state, rec, len);
}

/* Both launch paths: with launch events (decoded and published) and
 * without (counted, named); the first byte picks. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const void *cfg[2];
	struct cuda *c = NULL;
	int which = size && (data[0] & 1);

	if (!cfg[0])
		cfg[0] = fuzz_config(&ntcore_plugin,
				     "stacks = true; enter_events = true; functions = ( { library = "
				     "\"cublas\"; symbols = [ \"cublasGemmEx\", \"cublasSgemm_v2\" ]; } );");
	if (!cfg[0] || ntcore_plugin.init(fuzz_instance(), &fuzz_host, cfg[0], (void **)&c))
		abort();
	c->skel = skel;
	((struct cuda_cfg *)c->cfg)->launch_events = which;
	fuzz_records(data + (size > 0), size - (size > 0), FUZZ_MASK_PIDS, one, c);
	c->skel = NULL;
	ntcore_plugin.fini(c);
	return 0;
}
