/* SPDX-License-Identifier: MIT */
/*
 * nvlink: what the probe knows of NCCL communicators and how it decides
 * that a collective hangs. Pure (no BPF, no host), unit-tested.
 *
 * A communicator is known per (pid, ncclComm_t handle) from its comm-init
 * call: rank, nranks and the hash of its ncclUniqueId, which is the same in
 * every process of the communicator and so joins the ranks this host sees.
 * Every collective a rank makes gets the next sequence number of that rank
 * on that communicator (NCCL requires all ranks to issue collectives in the
 * same order), so rank r's collective #k meets the other ranks' #k.
 *
 * The hang check (nvl_hang_check) reports, once each:
 *  - a rank that has not entered collective #k while another rank of the
 *    same communicator entered #k at least `timeout` ago (the rank that
 *    never joins; NCCL's host calls return at once, so this is what a
 *    stuck job looks like from the host), with both ranks and the call;
 *  - a call still inside NCCL (entered, not returned) for `timeout`
 *    when no lagging rank explains it (ranks not traced on this host);
 *  - a comm init still waiting for `timeout` (ncclCommInitRank returns
 *    only once every rank joined), naming the lowest rank not seen.
 */
#ifndef NVLINK_NCCL_STATE_H
#define NVLINK_NCCL_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NVL_RING 64
#define NVL_GROUPS_MAX 256

/* One collective as entered by a rank. */
struct nvl_coll {
	uint64_t seq;      /* 1-based, per rank and communicator */
	uint64_t ts_ns;    /* entry, CLOCK_MONOTONIC */
	uint64_t count;
	uint64_t bytes;
	uint32_t call;     /* enum nvl_call */
	int32_t dtype;
	int32_t op;
};

struct nvl_comm {
	uint32_t pid;
	uint64_t handle;   /* ncclComm_t in that process */
	uint64_t uid;      /* nvl_uid_hash of the ncclUniqueId, 0 unknown */
	int32_t rank, nranks;
	uint64_t seq;      /* collectives returned */
	struct nvl_coll ring[NVL_RING]; /* by seq % NVL_RING */
	uint64_t reported_missing; /* last awaited seq reported as not joined */
	uint64_t reported_blocked; /* last in-flight seq reported as blocked */
	bool used;
};

#define NVL_INIT_REPORTED 32

struct nvl_comms {
	struct nvl_comm *v;
	size_t n, cap;
	uint64_t init_reported[NVL_INIT_REPORTED]; /* tid ^ entry ts */
	size_t init_next;
};

/* A call inside NCCL now (from the BPF `inflight` map), decoded. */
struct nvl_pending {
	uint32_t pid, tid;
	uint64_t comm;     /* handle */
	uint64_t ts_ns;
	struct nvl_coll c; /* seq is filled by the check */
	/* comm init only: the communicator being created */
	uint64_t uid;
	int32_t rank, nranks;
};

struct nvl_hang {
	uint64_t uid;
	int32_t nranks;
	uint32_t call;
	uint64_t seq;
	uint64_t bytes, count;
	int32_t dtype, op;
	/* the rank that entered the collective */
	uint32_t wait_pid, wait_tid;
	int32_t wait_rank;
	uint64_t wait_ns;  /* how long ago it entered */
	bool blocked;      /* and has not returned from it */
	/* the rank that has not joined (-1/0: not traced on this host) */
	int32_t missing_rank;
	uint32_t missing_pid;
	uint64_t missing_last_seq;
	int32_t ranks_seen; /* ranks of the communicator known here */
};

/* Comm table. add replaces an entry of the same (pid, handle). */
struct nvl_comm *nvl_comm_add(struct nvl_comms *t, uint32_t pid,
			      uint64_t handle, uint64_t uid, int32_t rank,
			      int32_t nranks);
struct nvl_comm *nvl_comm_find(struct nvl_comms *t, uint32_t pid,
			       uint64_t handle);
void nvl_comm_drop(struct nvl_comms *t, uint32_t pid, uint64_t handle);
void nvl_comm_drop_pid(struct nvl_comms *t, uint32_t pid);
void nvl_comms_free(struct nvl_comms *t);
/* A collective of this rank returned: numbered and remembered; returns
 * its sequence number. */
uint64_t nvl_comm_collective(struct nvl_comm *c, const struct nvl_coll *k);

/*
 * Check every communicator against the pending calls; fills at most `max`
 * reports (each reported once) and returns how many.
 */
size_t nvl_hang_check(struct nvl_comms *t, const struct nvl_pending *pend,
		      size_t npend, uint64_t now_ns, uint64_t timeout_ns,
		      struct nvl_hang *out, size_t max);

/* NCCL group nesting per thread: calls between ncclGroupStart and
 * ncclGroupEnd are only queued; their work runs in ncclGroupEnd. */
struct nvl_group {
	uint32_t tid;
	uint32_t depth;
	uint32_t calls;
	uint64_t bytes, alg_bytes;
	int32_t rank, nranks;
	uint64_t comm;
	double factor;    /* busbw factor of the group's calls */
	uint64_t last_ns; /* eviction order */
};

struct nvl_groups {
	struct nvl_group v[NVL_GROUPS_MAX];
};

/* The thread's entry (created, evicting the stalest, when `create`). */
struct nvl_group *nvl_group_get(struct nvl_groups *g, uint32_t tid,
				uint64_t now_ns, bool create);

#endif /* NVLINK_NCCL_STATE_H */
