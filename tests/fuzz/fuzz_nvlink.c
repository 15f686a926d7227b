/* SPDX-License-Identifier: MIT */
/* libFuzzer: the nvlink probe's ring-buffer callback (on_record: NCCL
 * calls, dma_fence and XID kernel records) on records of arbitrary bytes.
 * The plugin's source is compiled in; init builds the state with the fuzz
 * host. Library-open and exec records are left out: they name a file the
 * probe opens and attaches uprobes to (acting, not decoding). Pids are
 * moved to numbers no process has; the BPF object is opened, never
 * loaded. */
#include "../../plugins/nvlink/nvlink.c"

#include "fuzz_host.h"

static struct nvlink_bpf *skel;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	libbpf_set_print(NULL);
	skel = nvlink_bpf__open();
	return skel ? 0 : 1;
}

static void one(void *state, void *rec, size_t len)
{
	const struct nt_event_hdr *h = rec;

	if (len >= sizeof(*h) && (h->type == NVL_RAW_OPEN || h->type == NVL_RAW_EXEC))
		return;
	on_record(state, rec, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const void *cfg = fuzz_config(&ntcore_plugin, "");
	struct nvl *s = NULL;

	if (!cfg || ntcore_plugin.init(fuzz_instance(), &fuzz_host, cfg, (void **)&s))
		abort();
	s->skel = skel;
	fuzz_records(data, size, FUZZ_MASK_PIDS, one, s);
	s->skel = NULL; /* shared by every input; not this state's to destroy */
	ntcore_plugin.fini(s);
	return 0;
}
