/* SPDX-License-Identifier: MIT */
/*
 * io probe: the arithmetic of its statistics. Per-CPU sums, the histogram
 * bounds exported with the metrics, quantiles read from the histograms,
 * and which requests are kept as the slowest.
 */
#include <string.h>

#include "io_int.h"

const char *io_op_str(uint32_t op)
{
	static const char *const names[IO_OP_MAX] = { "read", "write", "flush",
						      "discard", "other" };

	return op < IO_OP_MAX ? names[op] : "other";
}

void io_stats_add(struct io_stats *dst, const struct io_stats *src)
{
	if (!dst->comm[0])
		memcpy(dst->comm, src->comm, sizeof(dst->comm));
	dst->ops += src->ops;
	dst->bytes += src->bytes;
	dst->small_ops += src->small_ops;
	dst->completed += src->completed;
	dst->queue_ns_sum += src->queue_ns_sum;
	dst->service_ns_sum += src->service_ns_sum;
	for (int i = 0; i <= IO_LAT_SLOTS; i++) {
		dst->queue_hist[i] += src->queue_hist[i];
		dst->service_hist[i] += src->service_hist[i];
	}
	for (int i = 0; i <= IO_SIZE_SLOTS; i++)
		dst->size_hist[i] += src->size_hist[i];
}

#define US(k) ((double)(1ull << (k)) * 1e-6)
const double io_lat_bounds_s[IO_LAT_SLOTS] = {
	US(0), US(1), US(2), US(3), US(4), US(5), US(6), US(7), US(8),
	US(9), US(10), US(11), US(12), US(13), US(14), US(15), US(16),
	US(17), US(18), US(19), US(20), US(21), US(22), US(23), US(24),
	US(25), US(26),
};
#define SZ(k) ((double)(512ull << (k)))
const double io_size_bounds_b[IO_SIZE_SLOTS] = {
	SZ(0), SZ(1), SZ(2), SZ(3), SZ(4), SZ(5), SZ(6), SZ(7), SZ(8),
	SZ(9), SZ(10), SZ(11), SZ(12), SZ(13), SZ(14),
};

uint64_t io_lat_quantile_ns(const __u64 hist[IO_LAT_SLOTS + 1], double q)
{
	uint64_t total = 0, seen = 0, rank;

	for (int i = 0; i <= IO_LAT_SLOTS; i++)
		total += hist[i];
	if (!total)
		return 0;
	rank = (uint64_t)(q * (double)total + 0.999999);
	if (rank < 1)
		rank = 1;
	for (int i = 0; i < IO_LAT_SLOTS; i++) {
		seen += hist[i];
		if (seen >= rank)
			return (1ull << i) * 1000;
	}
	return UINT64_MAX;
}

void io_slow_offer(struct nt_topn *t, const struct io_slowest *r)
{
	/* A per-CPU slot that never held a request has no latency. */
	if (r->latency_ns)
		nt_topn_offer(t, r->latency_ns, r);
}
