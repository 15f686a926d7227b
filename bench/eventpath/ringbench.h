/* SPDX-License-Identifier: MIT */
/*
 * bench/eventpath: the record the ring benchmark's BPF program writes (a
 * thread report's shape: 14 fields in JSON with ts, type, pid, tid and
 * comm) and the arguments of one production run. Shared by
 * ringbench.bpf.c and ringbench.c.
 */
#ifndef NTCORE_BENCH_RINGBENCH_H
#define NTCORE_BENCH_RINGBENCH_H

#ifndef __VMLINUX_H__
#include <stdint.h>
#endif

#include "ntcore/event.h"

#define RB_PATH_LEN 32

struct rb_rec {
	struct nt_event_hdr hdr;
	uint64_t oncpu_ns, offcpu_ns, runq_ns, waits, switches, migrations;
	uint64_t addr;
	struct nt_vstr path;
	char path_text[RB_PATH_LEN];
};

/* What one BPF_PROG_TEST_RUN of `produce` writes. */
struct rb_args {
	uint64_t first_seq; /* seq of the first record (its `waits` field) */
	uint32_t n;         /* records to write */
	uint32_t type;      /* the schema's type id */
};

#endif
