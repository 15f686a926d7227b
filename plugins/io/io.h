/* SPDX-License-Identifier: MIT */
/*
 * io probe: layouts shared by io.bpf.c (kernel side) and the io_*.c files
 * (user side), and the bucketing rules. The bucket functions are plain C:
 * the BPF programs call them and the unit test checks them, so what is
 * tested is what runs in the kernel.
 */
#ifndef NTCORE_IO_H
#define NTCORE_IO_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "ntcore/event.h"

#ifndef __VMLINUX_H__
#include <stdbool.h>
#endif

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/*
 * Latency histograms: slot k (0 <= k < IO_LAT_SLOTS) counts latencies
 * t <= 2^k microseconds and > 2^(k-1) us (slot 0: t <= 1 us); slot
 * IO_LAT_SLOTS counts the rest (the +Inf bucket). So the Prometheus upper
 * bounds are exactly 2^k us: 1 us ... 2^26 us (67 s).
 */
#define IO_LAT_SLOTS 27
/* Request sizes: slot k counts sizes <= 512 << k bytes (512 B ... 8 MiB),
 * slot IO_SIZE_SLOTS the rest. */
#define IO_SIZE_SLOTS 15

enum io_op {
	IO_OP_READ = 0,
	IO_OP_WRITE = 1,
	IO_OP_FLUSH = 2,
	IO_OP_DISCARD = 3,
	IO_OP_OTHER = 4,
	IO_OP_MAX = 5,
};

/*
 * Kernel REQ_OP_* (low 8 bits of cmd_flags) to enum io_op. A write of no
 * data is the empty REQ_PREFLUSH write behind fsync(): a flush.
 */
static __always_inline __u32 io_op_of(__u32 cmd_flags, __u32 bytes)
{
	switch (cmd_flags & 0xff) {
	case 0: return IO_OP_READ;      /* REQ_OP_READ */
	case 1: return bytes ? IO_OP_WRITE : IO_OP_FLUSH; /* REQ_OP_WRITE */
	case 2: return IO_OP_FLUSH;     /* REQ_OP_FLUSH */
	case 3:                         /* REQ_OP_DISCARD */
	case 5: return IO_OP_DISCARD;   /* REQ_OP_SECURE_ERASE */
	default: return IO_OP_OTHER;    /* write zeroes, zone ops, driver */
	}
}

/* Smallest k with ns <= 1000 * 2^k, or IO_LAT_SLOTS. */
static __always_inline __u32 io_lat_slot(__u64 ns)
{
	__u64 us = (ns + 999) / 1000;
	__u32 k;

	for (k = 0; k < IO_LAT_SLOTS; k++)
		if (us <= (1ull << k))
			return k;
	return IO_LAT_SLOTS;
}

/* Smallest k with bytes <= 512 << k, or IO_SIZE_SLOTS. */
static __always_inline __u32 io_size_slot(__u64 bytes)
{
	__u32 k;

	for (k = 0; k < IO_SIZE_SLOTS; k++)
		if (bytes <= (512ull << k))
			return k;
	return IO_SIZE_SLOTS;
}

/* Key of the `stats` per-CPU hash: one device, one process, one op. */
struct io_key {
	__u32 dev;  /* kernel dev_t (major << 20 | minor) of the partition */
	__u32 tgid; /* issuing process */
	__u32 op;   /* enum io_op */
	__u32 pad;
};

/*
 * Requests of one key, per CPU (summed by the user side). Requests, bytes
 * and sizes are counted when a request is first issued to the driver (or
 * completes without ever being issued: the empty PREFLUSH write of fsync),
 * latencies when it completes: on some kernels a small share of completions
 * never reaches the block_rq_complete tracepoint (about 0.2% on the
 * virtio-blk VMs this was written on), and counting at issue keeps bytes
 * exact in spite of it. `completed` is the latency histograms' count.
 */
struct io_stats {
	char comm[NT_COMM_LEN];
	__u64 ops;
	__u64 bytes;
	__u64 small_ops;      /* requests smaller than small_bytes */
	__u64 completed;
	__u64 queue_ns_sum;
	__u64 service_ns_sum;
	__u64 queue_hist[IO_LAT_SLOTS + 1];
	__u64 service_hist[IO_LAT_SLOTS + 1];
	__u64 size_hist[IO_SIZE_SLOTS + 1];
};

/* One request in flight, keyed by its struct request pointer. */
struct io_req {
	__u64 ts_start; /* created (block_io_start) or inserted; 0 = unknown */
	__u64 ts_issue; /* handed to the driver; 0 = not yet */
	__u32 pid;      /* issuing process (tgid) and thread */
	__u32 tid;
	char comm[NT_COMM_LEN];
	__u32 size;     /* bytes when issued */
	__u8 skip;      /* seen at creation but filtered out: never count it,
			 * even when a target later dispatches it */
	__u8 counted;   /* issued (and counted) once already */
	__u8 pad[2];
};

/* The slowest requests a CPU completed since the user side last looked:
 * IO_SLOW_SLOTS of them, the fastest replaced first. */
#define IO_SLOW_SLOTS 4

struct io_slowest {
	__u64 latency_ns;
	__u64 queue_ns;
	__u64 service_ns;
	__u64 sector;
	__u64 ts_ns;
	__u32 dev;
	__u32 bytes;
	__u32 pid;
	__u32 op;
	char comm[NT_COMM_LEN];
};

struct io_slowest_set {
	struct io_slowest s[IO_SLOW_SLOTS];
};

/* Index of the slot to replace: the fastest (an empty one is fastest). */
static __always_inline __u32 io_slowest_victim(const struct io_slowest_set *set)
{
	__u32 v = 0;

	for (__u32 i = 1; i < IO_SLOW_SLOTS; i++)
		if (set->s[i].latency_ns < set->s[v].latency_ns)
			v = i;
	return v;
}

/* io.request (request_events = true): a request issued to the driver. */
struct io_request_ev {
	struct nt_event_hdr hdr; /* pid/tid/comm: the issuing process */
	__u32 dev;
	__u32 bytes;
	char op[8];
	__u64 sector;
	__u64 queue_ns;          /* created -> issued */
};

/* io.slow: a request whose queue + service time reached slow_threshold_ms. */
struct io_slow_ev {
	struct nt_event_hdr hdr; /* pid/tid/comm: the issuing process */
	__u32 dev;               /* NT_F_DEVT */
	__u32 bytes;
	char op[8];              /* "read" "write" "flush" "discard" "other" */
	__u64 sector;            /* first sector (512 B units) */
	__u64 queue_ns;          /* created -> issued to the driver */
	__u64 service_ns;        /* issued -> completed */
	__u64 latency_ns;        /* queue_ns + service_ns */
	__s32 error;             /* blk_status_t as -errno, 0 on success */
	__u32 pad;
};

#endif /* NTCORE_IO_H */
