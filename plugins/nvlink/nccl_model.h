/* SPDX-License-Identifier: MIT */
/*
 * nvlink: what NCCL's public API means, as facts of the published nccl.h
 * (2.x): the entry points and their spellings (ncclX, and pncclX, the
 * profiling name that the system library exports as the strong symbol),
 * where each one's arguments are under the x86-64 SysV and AAPCS64
 * conventions (they differ for the by-value ncclUniqueId), the
 * datatype sizes and reduction ops, and the byte conventions behind
 * algorithm and bus bandwidth (those of nccl-tests). Pure functions,
 * unit-tested.
 */
#ifndef NVLINK_NCCL_MODEL_H
#define NVLINK_NCCL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvlink.h"

/* The decoded arguments of one call. Fields a call lacks are -1 / 0. */
struct nvl_args {
	uint64_t count;   /* elements (sendcount/recvcount/count) */
	int32_t dtype;    /* ncclDataType_t, -1 none */
	int32_t op;       /* ncclRedOp_t, -1 none */
	int32_t root;     /* root or peer, -1 none */
	int32_t nranks;   /* comm init */
	int32_t rank;     /* comm init */
	uint64_t comm;    /* ncclComm_t the call works on */
	uint64_t stream;  /* cudaStream_t */
};

/* "ncclAllReduce"; "?" for an unknown id. */
const char *nvl_call_name(uint32_t call);
/* The profiling spelling ("pncclAllReduce"), or NULL. */
const char *nvl_call_pname(uint32_t call);
/* Every rank of the communicator must make the call (in the same order). */
bool nvl_call_is_collective(uint32_t call);
bool nvl_call_is_p2p(uint32_t call);
bool nvl_call_is_init(uint32_t call);
/* Calls that move data (collectives and p2p): bytes and bandwidth apply. */
bool nvl_call_moves_data(uint32_t call);

/* Decode a call's raw registers and stack words. */
void nvl_decode_args(uint32_t call, const __u64 reg[6],
		     const __u64 stk[2], struct nvl_args *out);

/* Bytes per element of an ncclDataType_t, 0 if unknown. */
unsigned nvl_dtype_size(int32_t dtype);
const char *nvl_dtype_name(int32_t dtype);   /* "float32"; "?" */
const char *nvl_op_name(int32_t op);         /* "sum"; "" none; "custom" */

/* count x datatype size: the bytes named by the call's count argument. */
uint64_t nvl_call_bytes(const struct nvl_args *a);
/*
 * The size S of nccl-tests' algorithm bandwidth S / t: the whole buffer
 * the collective produces (allgather: sendcount x nranks; reducescatter
 * and alltoall, gather, scatter: count x nranks; the others: count).
 */
uint64_t nvl_algbw_bytes(uint32_t call, uint64_t call_bytes, int nranks);
/* busbw = algbw x this factor (allreduce 2(n-1)/n, allgather,
 * reducescatter, alltoall (n-1)/n, others 1). */
double nvl_busbw_factor(uint32_t call, int nranks);

/* FNV-1a 64 of a ncclUniqueId: the communicator's id across processes
 * (0 for an all-zero id). */
uint64_t nvl_uid_hash(const uint8_t *uid, size_t n);

#endif /* NVLINK_NCCL_MODEL_H */
