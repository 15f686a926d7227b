/* SPDX-License-Identifier: MIT */
/* nvlink: NCCL API facts (see nccl_model.h). */
#include "nccl_model.h"

#include <string.h>

/* Where a call's arguments are: index 1..6 = argument register, 7..8 = the
 * 7th and 8th argument (x86-64: first and second stack word; arm64: x6,
 * x7); 0 = the call has no such argument. */
struct call_spec {
	const char *name;
	uint8_t kind;    /* K_* */
	uint8_t count, dtype, op, root, comm, stream, nranks, rank;
};

enum { K_OTHER = 0, K_COLL = 1, K_P2P = 2, K_INIT = 3 };

/*
 * From the prototypes in nccl.h, e.g.
 *   ncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream)
 *   ncclReduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream)
 *   ncclSend(sendbuff, count, datatype, peer, comm, stream)
 *   ncclCommInitRank(ncclComm_t *comm, nranks, ncclUniqueId id, rank):
 *     the 128-byte id is passed in memory on x86-64, so rank takes the 3rd
 *     register; AAPCS64 passes it by reference in the 3rd (a composite
 *     over 16 bytes), so rank takes the 4th.
 */
#if defined(__aarch64__)
#define UID_RANK 4
#else
#define UID_RANK 3
#endif
static const struct call_spec specs[NVL_C_N] = {
	[NVL_C_NONE] = { "?", K_OTHER, 0, 0, 0, 0, 0, 0, 0, 0 },
	[NVL_C_ALLREDUCE] = { "ncclAllReduce", K_COLL, 3, 4, 5, 0, 6, 7, 0, 0 },
	[NVL_C_ALLGATHER] = { "ncclAllGather", K_COLL, 3, 4, 0, 0, 5, 6, 0, 0 },
	[NVL_C_REDUCESCATTER] = { "ncclReduceScatter", K_COLL, 3, 4, 5, 0, 6, 7, 0, 0 },
	[NVL_C_BROADCAST] = { "ncclBroadcast", K_COLL, 3, 4, 0, 5, 6, 7, 0, 0 },
	[NVL_C_BCAST] = { "ncclBcast", K_COLL, 2, 3, 0, 4, 5, 6, 0, 0 },
	[NVL_C_REDUCE] = { "ncclReduce", K_COLL, 3, 4, 5, 6, 7, 8, 0, 0 },
	[NVL_C_ALLTOALL] = { "ncclAlltoAll", K_COLL, 3, 4, 0, 0, 5, 6, 0, 0 },
	[NVL_C_GATHER] = { "ncclGather", K_COLL, 3, 4, 0, 5, 6, 7, 0, 0 },
	[NVL_C_SCATTER] = { "ncclScatter", K_COLL, 3, 4, 0, 5, 6, 7, 0, 0 },
	[NVL_C_SEND] = { "ncclSend", K_P2P, 2, 3, 0, 4, 5, 6, 0, 0 },
	[NVL_C_RECV] = { "ncclRecv", K_P2P, 2, 3, 0, 4, 5, 6, 0, 0 },
	[NVL_C_GROUPSTART] = { "ncclGroupStart", K_OTHER, 0, 0, 0, 0, 0, 0, 0, 0 },
	[NVL_C_GROUPEND] = { "ncclGroupEnd", K_OTHER, 0, 0, 0, 0, 0, 0, 0, 0 },
	[NVL_C_INITRANK] = { "ncclCommInitRank", K_INIT, 0, 0, 0, 0, 0, 0, 2, UID_RANK },
	[NVL_C_INITRANKCONFIG] = { "ncclCommInitRankConfig", K_INIT, 0, 0, 0, 0, 0, 0, 2, UID_RANK },
	[NVL_C_INITALL] = { "ncclCommInitAll", K_INIT, 0, 0, 0, 0, 0, 0, 2, 0 },
	[NVL_C_INITSCALABLE] = { "ncclCommInitRankScalable", K_INIT, 0, 0, 0, 0, 0, 0, 2, 3 },
	[NVL_C_FINALIZE] = { "ncclCommFinalize", K_OTHER, 0, 0, 0, 0, 1, 0, 0, 0 },
	[NVL_C_DESTROY] = { "ncclCommDestroy", K_OTHER, 0, 0, 0, 0, 1, 0, 0, 0 },
	[NVL_C_ABORT] = { "ncclCommAbort", K_OTHER, 0, 0, 0, 0, 1, 0, 0, 0 },
};

static const struct call_spec *spec_of(uint32_t call)
{
	return call < NVL_C_N ? &specs[call] : &specs[NVL_C_NONE];
}

const char *nvl_call_name(uint32_t call)
{
	return spec_of(call)->name;
}

const char *nvl_call_pname(uint32_t call)
{
	/* "p" + the name, kept in a table so no buffer is needed */
	static const char *const pnames[NVL_C_N] = {
		[NVL_C_ALLREDUCE] = "pncclAllReduce",
		[NVL_C_ALLGATHER] = "pncclAllGather",
		[NVL_C_REDUCESCATTER] = "pncclReduceScatter",
		[NVL_C_BROADCAST] = "pncclBroadcast",
		[NVL_C_BCAST] = "pncclBcast",
		[NVL_C_REDUCE] = "pncclReduce",
		[NVL_C_ALLTOALL] = "pncclAlltoAll",
		[NVL_C_GATHER] = "pncclGather",
		[NVL_C_SCATTER] = "pncclScatter",
		[NVL_C_SEND] = "pncclSend",
		[NVL_C_RECV] = "pncclRecv",
		[NVL_C_GROUPSTART] = "pncclGroupStart",
		[NVL_C_GROUPEND] = "pncclGroupEnd",
		[NVL_C_INITRANK] = "pncclCommInitRank",
		[NVL_C_INITRANKCONFIG] = "pncclCommInitRankConfig",
		[NVL_C_INITALL] = "pncclCommInitAll",
		[NVL_C_INITSCALABLE] = "pncclCommInitRankScalable",
		[NVL_C_FINALIZE] = "pncclCommFinalize",
		[NVL_C_DESTROY] = "pncclCommDestroy",
		[NVL_C_ABORT] = "pncclCommAbort",
	};

	return call < NVL_C_N ? pnames[call] : NULL;
}

bool nvl_call_is_collective(uint32_t call)
{
	return spec_of(call)->kind == K_COLL;
}

bool nvl_call_is_p2p(uint32_t call)
{
	return spec_of(call)->kind == K_P2P;
}

bool nvl_call_is_init(uint32_t call)
{
	return spec_of(call)->kind == K_INIT;
}

bool nvl_call_moves_data(uint32_t call)
{
	return nvl_call_is_collective(call) || nvl_call_is_p2p(call);
}

static uint64_t arg_at(uint8_t idx, const __u64 reg[6], const __u64 stk[2])
{
	if (idx >= 1 && idx <= 6)
		return reg[idx - 1];
	if (idx == 7 || idx == 8)
		return stk[idx - 7];
	return 0;
}

/* An int argument: the low 32 bits of its register or stack slot. */
static int32_t int_at(uint8_t idx, const __u64 reg[6], const __u64 stk[2])
{
	return idx ? (int32_t)(uint32_t)arg_at(idx, reg, stk) : -1;
}

void nvl_decode_args(uint32_t call, const __u64 reg[6],
		     const __u64 stk[2], struct nvl_args *out)
{
	const struct call_spec *s = spec_of(call);

	out->count = s->count ? arg_at(s->count, reg, stk) : 0;
	out->dtype = int_at(s->dtype, reg, stk);
	out->op = int_at(s->op, reg, stk);
	out->root = int_at(s->root, reg, stk);
	out->nranks = int_at(s->nranks, reg, stk);
	out->rank = int_at(s->rank, reg, stk);
	out->comm = arg_at(s->comm, reg, stk);
	out->stream = arg_at(s->stream, reg, stk);
	if (call == NVL_C_INITALL)
		out->rank = 0; /* the first of ndev; the others follow */
}

/* ncclDataType_t: ncclInt8 0, ncclUint8 1, ncclInt32 2, ncclUint32 3,
 * ncclInt64 4, ncclUint64 5, ncclFloat16 6, ncclFloat32 7, ncclFloat64 8,
 * ncclBfloat16 9, ncclFloat8e4m3 10, ncclFloat8e5m2 11. */
static const struct {
	const char *name;
	unsigned size;
} dtypes[] = {
	{ "int8", 1 },    { "uint8", 1 },   { "int32", 4 },
	{ "uint32", 4 },  { "int64", 8 },   { "uint64", 8 },
	{ "float16", 2 }, { "float32", 4 }, { "float64", 8 },
	{ "bfloat16", 2 }, { "float8e4m3", 1 }, { "float8e5m2", 1 },
};

unsigned nvl_dtype_size(int32_t dtype)
{
	if (dtype < 0 || (size_t)dtype >= sizeof(dtypes) / sizeof(dtypes[0]))
		return 0;
	return dtypes[dtype].size;
}

const char *nvl_dtype_name(int32_t dtype)
{
	if (dtype < 0 || (size_t)dtype >= sizeof(dtypes) / sizeof(dtypes[0]))
		return "?";
	return dtypes[dtype].name;
}

/* ncclRedOp_t: ncclSum 0, ncclProd 1, ncclMax 2, ncclMin 3, ncclAvg 4;
 * values from ncclNumOps (5) on are ops made by ncclRedOpCreatePreMulSum. */
const char *nvl_op_name(int32_t op)
{
	static const char *const ops[] = { "sum", "prod", "max", "min", "avg" };

	if (op < 0)
		return "";
	if (op < 5)
		return ops[op];
	return "custom";
}

uint64_t nvl_call_bytes(const struct nvl_args *a)
{
	return a->count * nvl_dtype_size(a->dtype);
}

uint64_t nvl_algbw_bytes(uint32_t call, uint64_t call_bytes, int nranks)
{
	uint64_t n = nranks > 0 ? (uint64_t)nranks : 1;

	switch (call) {
	case NVL_C_ALLGATHER:
	case NVL_C_REDUCESCATTER:
	case NVL_C_ALLTOALL:
	case NVL_C_GATHER:
	case NVL_C_SCATTER:
		return call_bytes * n;
	default:
		return call_bytes;
	}
}

double nvl_busbw_factor(uint32_t call, int nranks)
{
	double n = nranks > 0 ? nranks : 1;

	switch (call) {
	case NVL_C_ALLREDUCE:
		return 2.0 * (n - 1) / n;
	case NVL_C_ALLGATHER:
	case NVL_C_REDUCESCATTER:
	case NVL_C_ALLTOALL:
		return (n - 1) / n;
	default:
		return 1.0;
	}
}

/* FNV-1a spelled out rather than the kit's hash: the ranks of one
 * communicator compute this id in different processes, possibly on
 * different hosts running different ntcore builds, so it must be a fixed
 * function of the bytes; the kit's map hash promises no such thing. */
uint64_t nvl_uid_hash(const uint8_t *uid, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	bool zero = true;

	for (size_t i = 0; i < n; i++) {
		zero &= uid[i] == 0;
		h ^= uid[i];
		h *= 0x100000001b3ull;
	}
	return zero ? 0 : h;
}
