/* SPDX-License-Identifier: MIT */
/*
 * nvlink probe: the records nvlink.bpf.c writes into its ring buffer and
 * nvlink.c reads (plain C, fixed-width fields, usable from BPF), and the
 * ids of the NCCL entry points it probes (the attach cookie of each uprobe).
 *
 * NCCL calls are probed at entry and return. The entry saves the six
 * argument registers and the first two stack words in `inflight` (per
 * thread); the return writes one nvl_raw_call with them, so user space
 * decodes each function's arguments (nccl_model.c) and the BPF side stays
 * one generic pair of programs. `inflight` is also what the hang check
 * reads: a call entered long ago and not returned.
 */
#ifndef NVLINK_H
#define NVLINK_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "ntcore/event.h"

enum nvl_raw_type {
	NVL_RAW_CALL = 1,  /* struct nvl_raw_call: an NCCL call returned */
	NVL_RAW_OPEN = 2,  /* struct nvl_raw_path: a target opened a libnccl */
	NVL_RAW_EXEC = 3,  /* struct nvl_raw_path: (unused: exec discovery off) */
	NVL_RAW_FENCE = 4, /* struct nvl_raw_fence: dma_fence signal or wait */
	NVL_RAW_XID = 5,   /* struct nvl_raw_xid: nvidia:nvidia_dev_xid */
};

/* NCCL entry points (cookie of their uprobes). Order is ABI of the ring. */
enum nvl_call {
	NVL_C_NONE = 0,
	NVL_C_ALLREDUCE,
	NVL_C_ALLGATHER,
	NVL_C_REDUCESCATTER,
	NVL_C_BROADCAST,
	NVL_C_BCAST,
	NVL_C_REDUCE,
	NVL_C_ALLTOALL,
	NVL_C_GATHER,
	NVL_C_SCATTER,
	NVL_C_SEND,
	NVL_C_RECV,
	NVL_C_GROUPSTART,
	NVL_C_GROUPEND,
	NVL_C_INITRANK,
	NVL_C_INITRANKCONFIG,
	NVL_C_INITALL,
	NVL_C_INITSCALABLE,
	NVL_C_FINALIZE,
	NVL_C_DESTROY,
	NVL_C_ABORT,
	NVL_C_N
};

#define NVL_UID_LEN 128      /* sizeof(ncclUniqueId) */
#define NVL_HANDLES_MAX 8    /* ncclCommInitAll: communicators read back */
#define NVL_PATH_MAX 256
#define NVL_PFX_MAX 4
#define NVL_PFX_LEN 24
#define NVL_STR_LEN 32       /* dma_fence driver/timeline, xid device */
#define NVL_XID_MSG_LEN 128

/* Per-thread state between an NCCL call's entry and its return. */
struct nvl_inflight {
	__u64 ts_ns;             /* entry, CLOCK_MONOTONIC */
	__u64 reg[6];            /* argument registers at entry */
	__u64 stk[2];            /* 7th and 8th arguments (x86-64: stack;
				  * arm64: x6, x7) */
	__u32 call;              /* enum nvl_call of the outermost call */
	__u32 depth;             /* nested probed calls (counted once) */
	__u32 tgid;
	__u32 tid;
};

/* Comm init only, per thread from entry to return (`init_uid`): the
 * ncclUniqueId, kept out of nvl_inflight so other calls copy 88 bytes. */
struct nvl_uid {
	__u8 b[NVL_UID_LEN];
};

/* Written whole for comm-init calls; other calls stop at `handles`
 * (NVL_RAW_CALL_SHORT bytes), so the ring holds 2.5 times as many. */
struct nvl_raw_call {
	struct nt_event_hdr hdr; /* ts_ns: entry time */
	__u64 duration_ns;       /* entry to return */
	__u64 reg[6];
	__u64 stk[2];
	__s32 ret;               /* ncclResult_t */
	__u32 call;              /* enum nvl_call */
	__u32 nhandles;
	__u32 pad;
	/* comm init only */
	__u64 handles[NVL_HANDLES_MAX]; /* the new ncclComm_t(s) */
	__u8 uid[NVL_UID_LEN];
};

#define NVL_RAW_CALL_SHORT __builtin_offsetof(struct nvl_raw_call, handles)

/* Library discovery record (core/bpf/libload.bpf.h's layout). */
struct nvl_raw_path {
	struct nt_event_hdr hdr;
	__u64 ino;
	__u32 dev;
	__u32 stopped;           /* 1: SIGSTOP sent; user space sends SIGCONT */
	char path[NVL_PATH_MAX];
};

enum nvl_fence_kind {
	NVL_FENCE_EMIT = 0,
	NVL_FENCE_SIGNALED = 1,
	NVL_FENCE_WAIT_START = 2,
	NVL_FENCE_WAIT_END = 3,
	NVL_FENCE_N = 4,
};

/* A fence signalled (latency from its emit, 0 if the emit was not seen)
 * or a wait that ended (duration from its wait_start). */
struct nvl_raw_fence {
	struct nt_event_hdr hdr;
	__u64 latency_ns;
	__u64 context;
	__u64 seqno;
	__u32 kind;              /* NVL_FENCE_SIGNALED or NVL_FENCE_WAIT_END */
	__u32 pad;
	__u64 driver_fn;         /* fence->ops->get_driver_name (kernel address) */
	__u64 timeline_fn;       /* fence->ops->get_timeline_name */
};

struct nvl_raw_xid {
	struct nt_event_hdr hdr;
	__u32 xid;
	__u32 pad;
	char dev[NVL_STR_LEN];   /* PCI name, "0000:00:06.0" */
	char msg[NVL_XID_MSG_LEN];
};

/* Fence ids: the key of `fence_emit` (emit time per fence). */
struct nvl_fence_key {
	__u64 context;
	__u64 seqno;
};

#endif /* NVLINK_H */
