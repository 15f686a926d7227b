// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * bench/eventpath, kernel side: one BPF_PROG_TEST_RUN of `produce` writes
 * args->n records into the ring, as fast as the ring takes them (the
 * producer of the event-path benchmark: no syscall or tracepoint per
 * record, so what is measured is the path from the ring on). A record the
 * ring has no room for is counted in nt_drops, like every probe's.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "common.bpf.h"
#include "ringbench.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24); /* resized by the user side */
} events SEC(".maps");

struct loop_ctx {
	struct rb_args *args;
	__u64 now;
};

static long write_one(__u32 i, void *data)
{
	struct loop_ctx *lc = data;
	struct rb_rec *r;
	__u64 seq = lc->args->first_seq + i;

	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		nt_count_drop();
		return 0;
	}
	r->hdr.type = lc->args->type;
	r->hdr.size = sizeof(*r);
	r->hdr.ts_ns = lc->now + i;
	r->hdr.pid = 4242;
	r->hdr.tid = 4243 + (seq & 7);
	__builtin_memcpy(r->hdr.comm, "pt_main_thread\0\0", 16);
	r->oncpu_ns = 123456789 + seq;
	r->offcpu_ns = 987654321;
	r->runq_ns = 4242 + (seq & 1023);
	r->waits = seq;
	r->switches = 90210;
	r->migrations = 3;
	r->addr = 0x7f3a2b1c0000ull + seq * 64;
	r->path.off = __builtin_offsetof(struct rb_rec, path_text);
	r->path.len = 27;
	__builtin_memcpy(r->path_text, "/data/shard-0042/part.arrow\0\0\0\0\0", RB_PATH_LEN);
	/* one wake-up per run, on its last record, not one per record */
	bpf_ringbuf_submit(r, i + 1 == lc->args->n ? BPF_RB_FORCE_WAKEUP
						   : BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("syscall")
int produce(struct rb_args *args)
{
	struct loop_ctx lc = {.args = args, .now = bpf_ktime_get_ns()};

	bpf_loop(args->n, write_one, &lc, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
