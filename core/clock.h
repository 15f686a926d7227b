/* SPDX-License-Identifier: MIT */
/* CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns() and event ts_ns. */
#ifndef NTCORE_CORE_CLOCK_H
#define NTCORE_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t nt_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
