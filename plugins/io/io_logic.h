/* SPDX-License-Identifier: MIT */
/*
 * io probe: user-side logic that needs no kernel (device names from sysfs,
 * per-CPU sums, histogram bounds and quantiles, the slowest-request table,
 * the report text). Compiled into io.so and tests/unit/test_io.c.
 */
#ifndef NTCORE_IO_LOGIC_H
#define NTCORE_IO_LOGIC_H

#include <stddef.h>
#include <stdint.h>

#include "io.h"

#define IO_DEV_MAJOR(d) ((uint32_t)(d) >> 20)
#define IO_DEV_MINOR(d) ((uint32_t)(d) & 0xfffff)
#define IO_MKDEV(ma, mi) (((uint32_t)(ma) << 20) | (uint32_t)(mi))

/*
 * Resolve a `devices` entry: a block device name ("vda", "nvme0n1p2") or
 * "MAJOR:MINOR", against a sysfs tree (normally "/sys"). Returns 0 with the
 * kernel dev_t in *dev, -EINVAL when the entry is malformed, -ENODEV when no
 * such block device exists; `err` says why.
 */
int io_resolve_device(const char *sysfs, const char *spec, uint32_t *dev,
		      char *err, size_t errlen);

/* The kernel's name of a block device ("vda1") from
 * SYSFS/dev/block/M:m/uevent, or "M:m" when it has none. */
const char *io_dev_name(const char *sysfs, uint32_t dev, char *buf, size_t len);

const char *io_op_str(uint32_t op);

/* dst += src, field by field (comm is taken from src when dst has none). */
void io_stats_add(struct io_stats *dst, const struct io_stats *src);

/* Upper bounds of the histograms, in the metrics' base units. */
extern const double io_lat_bounds_s[IO_LAT_SLOTS];  /* seconds: 2^k us */
extern const double io_size_bounds_b[IO_SIZE_SLOTS]; /* bytes: 512 << k */

/*
 * The q-quantile (0 < q <= 1) of a latency histogram as the upper bound of
 * the slot that holds it, in ns; 0 for an empty histogram, UINT64_MAX when
 * it lies in the +Inf slot.
 */
uint64_t io_lat_quantile_ns(const __u64 hist[IO_LAT_SLOTS + 1], double q);

/* The slowest requests seen, largest latency first. */
struct io_slow_top {
	struct io_slowest *rows;
	size_t n, cap;
};

int io_slow_top_init(struct io_slow_top *t, size_t cap);
void io_slow_top_free(struct io_slow_top *t);
void io_slow_top_offer(struct io_slow_top *t, const struct io_slowest *r);

/* One row of the report's device or process table. */
struct io_row {
	uint32_t dev;
	uint32_t pid;            /* 0 in the device table */
	uint32_t op;
	char name[32];           /* device name */
	char comm[NT_COMM_LEN + 1];
	struct io_stats st;
};

/*
 * The io.report text: per device and op, the busiest processes (at most
 * max_procs, by bytes), then the slowest requests. Names of devices in the
 * slowest table come from `dev_name` (may be NULL: "M:m"). Returns the full
 * length like snprintf.
 */
size_t io_format_report(char *buf, size_t len, struct io_row *devs,
			size_t n_devs, struct io_row *procs, size_t n_procs,
			size_t max_procs, const struct io_slow_top *slow,
			const char *(*dev_name)(void *arg, uint32_t dev),
			void *arg);

#endif /* NTCORE_IO_LOGIC_H */
