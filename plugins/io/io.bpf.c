// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * io probe, kernel side: block-layer requests from creation to completion,
 * on BTF tracepoints only.
 *
 *  block_io_start (6.5+)  the request is created in the submitter's context:
 *                         remember pid/tid/comm and the time, keyed by the
 *                         struct request pointer
 *  block_rq_insert        into the I/O scheduler (fallback for the above)
 *  block_rq_issue         handed to the driver: queue time ends here
 *  block_rq_requeue       back from the driver: it will be issued again
 *  block_rq_complete      usually IRQ context: service time ends; account
 *                         the request to the process remembered above
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "common.bpf.h"
#include "io.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MINORBITS 20

/* Set by the user side before load. */
const volatile __u32 ev_slow_type = 0;
const volatile __u32 ev_request_type = 0; /* 0: no io.request events */
const volatile __u64 slow_ns = 0;        /* 0: every request is an event */
const volatile bool slow_events = true;
const volatile __u32 small_bytes = 4096;
const volatile bool dev_filter_on = false;

/*
 * Requests in flight, keyed by the struct request pointer. A plain hash, not
 * an LRU one (its updates cost twice as much): the keys are bounded by the
 * requests the block layer preallocates (queue depth x hardware queues), and
 * an entry left behind by a completion the tracepoint missed is overwritten
 * when blk-mq hands the same request out again.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct io_req);
} reqs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	NT_MAP_LAZY;
	__uint(max_entries, 16384);
	__type(key, struct io_key);
	__type(value, struct io_stats);
} stats SEC(".maps");

/* A zeroed io_stats to create new `stats` entries from (too big for the
 * BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct io_stats);
} zero_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct io_slowest_set);
} slowest SEC(".maps");

/* devices = [...]: partition or whole-disk dev_t values to trace. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u8);
} devs SEC(".maps");

/* Per-CPU count of requests issued whose completion the tracepoint never
 * reported (found when blk-mq hands their struct out again). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} unseen SEC(".maps");

/* Per-CPU count of `stats` insertions that failed (map full). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} stats_full SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* dev_t of the request's partition, or of its disk when it has none
 * (flushes). */
static __always_inline __u32 rq_dev(struct request *rq)
{
	struct block_device *part = BPF_CORE_READ(rq, part);
	struct gendisk *disk;

	if (part)
		return BPF_CORE_READ(part, bd_dev);
	disk = BPF_CORE_READ(rq, q, disk);
	if (!disk)
		return 0;
	return ((__u32)BPF_CORE_READ(disk, major) << MINORBITS) |
	       (__u32)BPF_CORE_READ(disk, first_minor);
}

static __always_inline bool dev_ok(struct request *rq)
{
	struct gendisk *disk;
	__u32 dev, whole;

	if (!dev_filter_on)
		return true;
	dev = rq_dev(rq);
	if (bpf_map_lookup_elem(&devs, &dev))
		return true;
	disk = BPF_CORE_READ(rq, q, disk);
	if (!disk)
		return false;
	whole = ((__u32)BPF_CORE_READ(disk, major) << MINORBITS) |
		(__u32)BPF_CORE_READ(disk, first_minor);
	return bpf_map_lookup_elem(&devs, &whole) != NULL;
}

/*
 * Find the request, or start tracking it in the current task's name (always
 * anew at creation). At
 * creation (block_io_start, the submitter's context) a request that the
 * filters reject is remembered as `skip`, so that insert or issue, which may
 * run in another task (a target dispatching the queue), never claim it.
 */
static __always_inline struct io_req *req_get(struct request *rq,
					      bool at_creation)
{
	__u64 key = (__u64)rq;
	struct io_req *r = bpf_map_lookup_elem(&reqs, &key);
	struct io_req n = {};
	__u64 id;

	/* At creation the pointer may still carry a stale entry: a request
	 * merged into another is freed without completing, and blk-mq reuses
	 * its struct request. */
	if (r && !at_creation)
		return r;
	if (r && r->counted && !r->skip) {
		/* Issued, then freed without a completion we saw. */
		__u32 zero = 0;
		__u64 *n = bpf_map_lookup_elem(&unseen, &zero);

		if (n)
			*n += 1;
	}
	id = bpf_get_current_pid_tgid();
	if (!nt_target_ok(id >> 32) || !dev_ok(rq)) {
		if (!at_creation)
			return NULL;
		n.skip = 1;
	} else {
		n.pid = id >> 32;
		n.tid = (__u32)id;
		bpf_get_current_comm(n.comm, sizeof(n.comm));
		n.ts_start = bpf_ktime_get_ns();
	}
	bpf_map_update_elem(&reqs, &key, &n, BPF_ANY);
	if (at_creation)
		return NULL; /* block_io_start needs no pointer back */
	return bpf_map_lookup_elem(&reqs, &key);
}

SEC("tp_btf/block_io_start")
int BPF_PROG(io_start, struct request *rq)
{
	req_get(rq, true);
	return 0;
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(io_insert, struct request *rq)
{
	req_get(rq, false);
	return 0;
}

/*
 * Global (not inlined) so that the verifier checks each once, on its own:
 * inlined, several 28-way bucket searches in a row multiply into more
 * states than it accepts. The caller sees an unknown value and bounds it.
 */
__noinline __u64 io_lat_slot_g(__u64 ns)
{
	return io_lat_slot(ns);
}

__noinline __u64 io_size_slot_g(__u64 bytes)
{
	return io_size_slot(bytes);
}

static __always_inline void op_name(char *dst, __u32 op)
{
	switch (op) {
	case IO_OP_READ: __builtin_memcpy(dst, "read\0\0\0\0", 8); break;
	case IO_OP_WRITE: __builtin_memcpy(dst, "write\0\0\0", 8); break;
	case IO_OP_FLUSH: __builtin_memcpy(dst, "flush\0\0\0", 8); break;
	case IO_OP_DISCARD: __builtin_memcpy(dst, "discard\0", 8); break;
	default: __builtin_memcpy(dst, "other\0\0\0", 8); break;
	}
}

/* The statistics slot of (device, process, op) on this CPU. */
static __always_inline struct io_stats *stats_get(struct io_key *k,
						  const struct io_req *r)
{
	struct io_stats *s = bpf_map_lookup_elem(&stats, k), *z;
	__u32 zero = 0;

	if (s)
		return s;
	z = bpf_map_lookup_elem(&zero_stats, &zero);
	if (!z)
		return NULL;
	if (bpf_map_update_elem(&stats, k, z, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&stats, k)) {
		__u64 *full = bpf_map_lookup_elem(&stats_full, &zero);

		if (full)
			*full += 1;
		return NULL;
	}
	s = bpf_map_lookup_elem(&stats, k);
	if (s)
		__builtin_memcpy(s->comm, r->comm, NT_COMM_LEN);
	return s;
}

/*
 * What io.request and io.slow records share: the header (the issuing
 * process) and dev, bytes, op, sector, queue_ns. struct io_slow_ev starts
 * with the layout of struct io_request_ev (checked below).
 */
_Static_assert(__builtin_offsetof(struct io_slow_ev, queue_ns) ==
		       __builtin_offsetof(struct io_request_ev, queue_ns),
	       "io_slow_ev must start like io_request_ev");
static __always_inline void fill_request_ev(struct io_request_ev *e,
					    __u32 type, __u32 size, __u64 now,
					    const struct io_req *r,
					    const struct io_key *k, __u32 bytes,
					    struct request *rq, __u64 queue_ns)
{
	e->hdr.type = type;
	e->hdr.size = size;
	e->hdr.ts_ns = now;
	e->hdr.pid = r->pid;
	e->hdr.tid = r->tid;
	__builtin_memcpy(e->hdr.comm, r->comm, NT_COMM_LEN);
	e->dev = k->dev;
	e->bytes = bytes;
	op_name(e->op, k->op);
	e->sector = BPF_CORE_READ(rq, __sector);
	e->queue_ns = queue_ns;
}

/*
 * Count a request once, when it is first issued (or completes unissued):
 * requests, bytes, sizes, and the optional io.request event.
 */
static __always_inline void count_request(struct request *rq, struct io_req *r,
					  __u32 size, __u64 now)
{
	struct io_key k = {};
	struct io_stats *s;

	r->counted = 1;
	r->size = size;
	k.dev = rq_dev(rq);
	k.tgid = r->pid;
	k.op = io_op_of(BPF_CORE_READ(rq, cmd_flags), size);
	s = stats_get(&k, r);
	if (s) {
		__u64 z = io_size_slot_g(size);

		asm volatile("" : "+r"(z));
		if (z > IO_SIZE_SLOTS)
			z = IO_SIZE_SLOTS;
		s->ops += 1;
		s->bytes += size;
		if (size && size < small_bytes) /* flushes carry no data */
			s->small_ops += 1;
		s->size_hist[z] += 1;
	}
	if (ev_request_type) {
		struct io_request_ev *e = nt_reserve(&events, sizeof(*e));

		if (e) {
			fill_request_ev(e, ev_request_type, sizeof(*e), now, r,
					&k, size, rq,
					r->ts_start && now > r->ts_start ?
						now - r->ts_start : 0);
			bpf_ringbuf_submit(e, 0);
		}
	}
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(io_issue, struct request *rq)
{
	/* Issue may run in a kworker (kblockd): the current task only stands
	 * in when neither creation nor insert saw the request. */
	struct io_req *r = req_get(rq, false);
	__u64 now = bpf_ktime_get_ns();

	if (!r || r->skip)
		return 0;
	r->ts_issue = now;
	if (!r->counted)
		count_request(rq, r, BPF_CORE_READ(rq, __data_len), now);
	return 0;
}

SEC("tp_btf/block_rq_requeue")
int BPF_PROG(io_requeue, struct request *rq)
{
	__u64 key = (__u64)rq;
	struct io_req *r = bpf_map_lookup_elem(&reqs, &key);

	if (r)
		r->ts_issue = 0;
	return 0;
}

static __always_inline __s32 blk_status_errno(__u8 st)
{
	switch (st) {
	case 0: return 0;
	case 1: return -95;  /* BLK_STS_NOTSUPP: EOPNOTSUPP */
	case 2: return -110; /* BLK_STS_TIMEOUT: ETIMEDOUT */
	case 3: return -28;  /* BLK_STS_NOSPC: ENOSPC */
	case 4: return -67;  /* BLK_STS_TRANSPORT: ENOLINK */
	case 5: return -121; /* BLK_STS_TARGET: EREMOTEIO */
	case 7: return -61;  /* BLK_STS_MEDIUM: ENODATA */
	case 8: return -84;  /* BLK_STS_PROTECTION: EILSEQ */
	case 9: return -12;  /* BLK_STS_RESOURCE: ENOMEM */
	case 12: return -11; /* BLK_STS_AGAIN: EAGAIN */
	default: return -5;  /* EIO */
	}
}

/* A completed request's latencies into its key's histograms. */
static __always_inline void count_latency(struct io_stats *s, __u64 queue_ns,
					  __u64 service_ns)
{
	/* 64-bit, so no zero-extension copy loses the bounds. */
	__u64 q = io_lat_slot_g(queue_ns), v = io_lat_slot_g(service_ns);

	/* Hide what clang knows of the range, so the bounds checks below
	 * stay for the verifier. */
	asm volatile("" : "+r"(q), "+r"(v));
	if (q > IO_LAT_SLOTS)
		q = IO_LAT_SLOTS;
	if (v > IO_LAT_SLOTS)
		v = IO_LAT_SLOTS;
	s->completed += 1;
	s->queue_ns_sum += queue_ns;
	s->service_ns_sum += service_ns;
	s->queue_hist[q] += 1;
	s->service_hist[v] += 1;
}

/* Keep the request among this CPU's slowest when it is slower than the
 * fastest kept. */
static __always_inline void keep_slowest(struct request *rq,
					 const struct io_req *r,
					 const struct io_key *k, __u64 now,
					 __u64 queue_ns, __u64 service_ns)
{
	__u64 lat = queue_ns + service_ns;
	struct io_slowest_set *set;
	struct io_slowest *sl = NULL;
	__u32 zero = 0;

	set = bpf_map_lookup_elem(&slowest, &zero);
	if (set) {
		__u32 v = io_slowest_victim(set);

		if (v < IO_SLOW_SLOTS && lat > set->s[v].latency_ns)
			sl = &set->s[v];
	}
	if (!sl)
		return;
	sl->latency_ns = lat;
	sl->queue_ns = queue_ns;
	sl->service_ns = service_ns;
	sl->sector = BPF_CORE_READ(rq, __sector);
	sl->ts_ns = now;
	sl->dev = k->dev;
	sl->bytes = r->size;
	sl->pid = r->pid;
	sl->op = k->op;
	__builtin_memcpy(sl->comm, r->comm, NT_COMM_LEN);
}

/* io.slow for a request that reached the threshold. */
static __always_inline void emit_slow(struct request *rq, const struct io_req *r,
				      const struct io_key *k, __u64 now,
				      __u64 queue_ns, __u64 service_ns,
				      blk_status_t error)
{
	__u64 lat = queue_ns + service_ns;
	struct io_slow_ev *e;

	if (!slow_events || !ev_slow_type || lat < slow_ns)
		return;
	e = nt_reserve(&events, sizeof(*e));
	if (!e)
		return;
	fill_request_ev((struct io_request_ev *)e, ev_slow_type, sizeof(*e),
			now, r, k, r->size, rq, queue_ns);
	e->service_ns = service_ns;
	e->latency_ns = lat;
	e->error = blk_status_errno(error);
	e->pad = 0;
	bpf_ringbuf_submit(e, 0);
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(io_complete, struct request *rq, blk_status_t error,
	     unsigned int nr_bytes)
{
	__u64 key = (__u64)rq, now = bpf_ktime_get_ns();
	struct io_req *r = bpf_map_lookup_elem(&reqs, &key);
	__u64 queue_ns, service_ns;
	struct io_stats *s;
	struct io_key k = {};

	if (!r)
		return 0; /* started before attach, or not traced */
	if (nr_bytes < BPF_CORE_READ(rq, __data_len))
		return 0; /* partial completion: the rest comes later */
	if (r->skip)
		goto out;
	if (!r->counted) /* completed without being issued: a flush */
		count_request(rq, r, BPF_CORE_READ(rq, __data_len), now);

	if (!r->ts_issue)
		r->ts_issue = r->ts_start ? r->ts_start : now;
	if (!r->ts_start)
		r->ts_start = r->ts_issue;
	queue_ns = r->ts_issue > r->ts_start ? r->ts_issue - r->ts_start : 0;
	service_ns = now > r->ts_issue ? now - r->ts_issue : 0;

	k.dev = rq_dev(rq);
	k.tgid = r->pid;
	k.op = io_op_of(BPF_CORE_READ(rq, cmd_flags), r->size);
	s = stats_get(&k, r);
	if (s)
		count_latency(s, queue_ns, service_ns);
	keep_slowest(rq, r, &k, now, queue_ns, service_ns);
	emit_slow(rq, r, &k, now, queue_ns, service_ns, error);
out:
	bpf_map_delete_elem(&reqs, &key);
	return 0;
}
