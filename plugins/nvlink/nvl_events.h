/* SPDX-License-Identifier: MIT */
/*
 * nvlink: the events the plugin publishes (record layouts and schemas).
 *   nccl.collective  one per NCCL collective or point-to-point call that
 *                    returned, and one per outermost ncclGroupEnd (with the
 *                    calls and bytes it launched); ts = entry, duration_ns =
 *                    host time, so the trace sink draws it as a slice
 *   nccl.comm_init   a communicator was created (rank, nranks, id)
 *   nccl.library     a libnccl file was probed
 *   dma_fence.wait   a traced thread waited on a dma_fence at least the
 *                    configured threshold
 *   alert.nccl_hang  a rank that does not join a collective, or a call
 *                    that does not return
 *   alert.gpu_xid    an XID error, with its meaning
 */
#ifndef NVLINK_EVENTS_H
#define NVLINK_EVENTS_H

#include "ntcore/plugin.h"

enum nvl_ev {
	NVL_EV_COLL,
	NVL_EV_INIT,
	NVL_EV_LIB,
	NVL_EV_FENCE_WAIT,
	NVL_EV_HANG,
	NVL_EV_XID,
	NVL_EV_N
};

struct nvl_ev_coll {
	struct nt_event_hdr hdr;
	uint64_t duration_ns;
	uint64_t count;
	uint64_t bytes;        /* count x datatype size (group: the sum) */
	uint64_t algbw_bytes;  /* nccl-tests' size for algorithm bandwidth */
	uint64_t comm_handle;  /* ncclComm_t (the event header has the process comm) */
	uint64_t communicator; /* id shared by the ranks (hash of the unique id) */
	uint64_t stream;
	uint64_t seq;          /* collective number on this communicator, 0 p2p */
	double algbw;          /* algbw_bytes / duration, bytes per second */
	int32_t rank, nranks;
	int32_t root;          /* root or peer, -1 none */
	int32_t ret;           /* ncclResult_t */
	uint32_t calls;        /* 1; ncclGroupEnd: the calls of the group */
	uint8_t in_group;      /* queued inside ncclGroupStart/End */
	uint8_t pad[3];
	char name[32];         /* "ncclAllReduce" */
	char dtype[12];
	char op[8];
};

struct nvl_ev_init {
	struct nt_event_hdr hdr;
	uint64_t duration_ns;
	uint64_t comm_handle;
	uint64_t communicator;
	int32_t rank, nranks;
	int32_t ret;
	uint32_t pad;
	char name[32];         /* the init function */
};

struct nvl_ev_lib {
	struct nt_event_hdr hdr;
	uint32_t n_probes;
	int32_t err;
	char path[256];
};

struct nvl_ev_fence_wait {
	struct nt_event_hdr hdr;
	uint64_t duration_ns;
	uint64_t context;
	uint64_t seqno;
	char driver[32];
	char timeline[32];
};

/* Alerts: the layout of struct nt_alert, then their own fields. */
#define NVL_ALERT_HEAD                                                         \
	struct nt_event_hdr hdr;                                               \
	uint32_t severity;                                                     \
	uint32_t subject_pid;                                                  \
	struct nt_vstr message;                                                \
	struct nt_vstr evidence

struct nvl_ev_hang {
	NVL_ALERT_HEAD;
	int32_t rank;          /* the rank that entered the call */
	int32_t missing_rank;  /* the rank that did not join, -1 unknown */
	uint64_t seq;
	char call[32];
};

struct nvl_ev_xid {
	NVL_ALERT_HEAD;
	int32_t gpu;           /* NVML index, -1 unknown */
	uint32_t xid;
};

extern const struct nt_schema nvl_schemas[NVL_EV_N];

#endif /* NVLINK_EVENTS_H */
