/* SPDX-License-Identifier: MIT */
/* nvlink: event schemas (see nvl_events.h). */
#include "nvl_events.h"

#define CF(m, t, u, d) NT_FIELD(struct nvl_ev_coll, m, t, u, d)
static const struct nt_field coll_fields[] = {
	CF(name, NT_F_STR, "", "NCCL function"),
	CF(duration_ns, NT_F_U64, "ns", "host time from entry to return"),
	CF(count, NT_F_U64, "count", "elements (the call's count argument; a group: its calls' sum)"),
	CF(bytes, NT_F_U64, "bytes", "count x datatype size"),
	CF(algbw_bytes, NT_F_U64, "bytes", "size for algorithm bandwidth (nccl-tests)"),
	CF(algbw, NT_F_F64, "bytes/s", "algbw_bytes / duration_ns (host time)"),
	CF(dtype, NT_F_STR, "", "datatype"),
	CF(op, NT_F_STR, "", "reduction op (empty when none)"),
	CF(rank, NT_F_S32, "", "rank of this process in the communicator (-1 unknown)"),
	CF(nranks, NT_F_S32, "", "ranks in the communicator (-1 unknown)"),
	CF(root, NT_F_S32, "", "root or peer (-1 none)"),
	CF(comm_handle, NT_F_HEX64, "", "ncclComm_t (the handle in this process)"),
	CF(communicator, NT_F_HEX64, "", "communicator id shared by its ranks"),
	CF(stream, NT_F_HEX64, "", "cudaStream_t"),
	CF(seq, NT_F_U64, "", "collective number on the communicator (0 point-to-point)"),
	CF(ret, NT_F_S32, "", "ncclResult_t (0 success)"),
	CF(calls, NT_F_U32, "count", "calls launched (ncclGroupEnd: the group's)"),
	CF(in_group, NT_F_BOOL, "", "queued inside ncclGroupStart/ncclGroupEnd"),
};

#define IF(m, t, u, d) NT_FIELD(struct nvl_ev_init, m, t, u, d)
static const struct nt_field init_fields[] = {
	IF(name, NT_F_STR, "", "init function"),
	IF(duration_ns, NT_F_U64, "ns", "host time of the init"),
	IF(comm_handle, NT_F_HEX64, "", "ncclComm_t created"),
	IF(communicator, NT_F_HEX64, "", "communicator id (hash of the ncclUniqueId)"),
	IF(rank, NT_F_S32, "", "rank"),
	IF(nranks, NT_F_S32, "", "ranks"),
	IF(ret, NT_F_S32, "", "ncclResult_t"),
};

#define LF(m, t, u, d) NT_FIELD(struct nvl_ev_lib, m, t, u, d)
static const struct nt_field lib_fields[] = {
	LF(path, NT_F_STR, "", "the libnccl file"),
	LF(n_probes, NT_F_U32, "count", "entry points probed"),
	LF(err, NT_F_S32, "", "0, or -errno when some probes failed"),
};

#define WF(m, t, u, d) NT_FIELD(struct nvl_ev_fence_wait, m, t, u, d)
static const struct nt_field fence_fields[] = {
	WF(duration_ns, NT_F_U64, "ns", "wait_start to wait_end"),
	WF(driver, NT_F_STR, "", "fence driver: the module of its get_driver_name, or that function"),
	WF(timeline, NT_F_STR, "", "the driver function that names the fence's timeline"),
	WF(context, NT_F_U64, "", "fence context"),
	WF(seqno, NT_F_U64, "", "fence sequence number"),
};

#define HF(m, t, u, d) NT_FIELD(struct nvl_ev_hang, m, t, u, d)
static const struct nt_field hang_fields[] = {
	NT_ALERT_FIELDS(struct nvl_ev_hang),
	HF(call, NT_F_STR, "", "the NCCL call"),
	HF(seq, NT_F_U64, "", "its collective number on the communicator"),
	HF(rank, NT_F_S32, "", "rank that entered the call"),
	HF(missing_rank, NT_F_S32, "", "rank that has not joined (-1 unknown)"),
};

#define XF(m, t, u, d) NT_FIELD(struct nvl_ev_xid, m, t, u, d)
static const struct nt_field xid_fields[] = {
	NT_ALERT_FIELDS(struct nvl_ev_xid),
	XF(gpu, NT_F_S32, "", "NVML index of the GPU (-1 unknown)"),
	XF(xid, NT_F_U32, "", "XID number"),
};

#define SCHEMA(n, d, f, T)                                                     \
	{ .name = n, .desc = d, .fields = f, .n_fields = NT_ARRAY_LEN(f),      \
	  .min_size = sizeof(T) }

const struct nt_schema nvl_schemas[NVL_EV_N] = {
	[NVL_EV_COLL] = SCHEMA("nccl.collective", "an NCCL collective or point-to-point call (or group) returned", coll_fields, struct nvl_ev_coll),
	[NVL_EV_INIT] = SCHEMA("nccl.comm_init", "an NCCL communicator was created", init_fields, struct nvl_ev_init),
	[NVL_EV_LIB] = SCHEMA("nccl.library", "a libnccl was found and probed", lib_fields, struct nvl_ev_lib),
	[NVL_EV_FENCE_WAIT] = SCHEMA("dma_fence.wait", "a traced thread waited on a dma_fence", fence_fields, struct nvl_ev_fence_wait),
	[NVL_EV_HANG] = SCHEMA("alert.nccl_hang", "an NCCL collective that a rank does not join, or a call that does not return", hang_fields, struct nvl_ev_hang),
	[NVL_EV_XID] = SCHEMA("alert.gpu_xid", "an XID error reported by the NVIDIA driver", xid_fields, struct nvl_ev_xid),
};
