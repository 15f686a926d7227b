/* SPDX-License-Identifier: MIT */
/*
 * ntcore plugin kit: clocks in nanoseconds.
 *
 * CLOCK_MONOTONIC is the clock of bpf_ktime_get_ns() and of every event's
 * hdr.ts_ns, so a plugin compares its own "now" with record timestamps
 * using nt_clock_mono_ns(); host->wall_ns converts either to the epoch.
 * Both are vDSO calls (no system call), cheap enough for a hot path.
 */
#ifndef NTCORE_KIT_CLOCK_H
#define NTCORE_KIT_CLOCK_H

#include <stdint.h>
#include <time.h>

#define NT_NS_PER_MS 1000000ull
#define NT_NS_PER_SEC 1000000000ull

static inline uint64_t nt_kit_clock_ns(clockid_t clock)
{
	struct timespec ts;

	if (clock_gettime(clock, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * NT_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* ns since boot, not counting suspend: the events' clock. */
static inline uint64_t nt_clock_mono_ns(void)
{
	return nt_kit_clock_ns(CLOCK_MONOTONIC);
}

/* ns since the epoch (for file names and rotation; never for events). */
static inline uint64_t nt_clock_wall_ns(void)
{
	return nt_kit_clock_ns(CLOCK_REALTIME);
}

#endif /* NTCORE_KIT_CLOCK_H */
