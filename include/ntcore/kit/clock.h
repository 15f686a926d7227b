/* SPDX-License-Identifier: MIT */
/*
 * ntcore plugin kit: clocks in nanoseconds.
 *
 * CLOCK_MONOTONIC is the clock of bpf_ktime_get_ns() and of every event's
 * hdr.ts_ns, so a plugin compares its own "now" with record timestamps
 * using nt_clock_mono_ns(); host->wall_ns converts either to the epoch.
 * Both read the vDSO (no system call), about 20 ns. Functions in the
 * library rather than inline, so this header needs no POSIX feature macro
 * in a plugin built with -std=c11.
 */
#ifndef NTCORE_KIT_CLOCK_H
#define NTCORE_KIT_CLOCK_H

#include <stdint.h>

#define NT_NS_PER_MS 1000000ull
#define NT_NS_PER_SEC 1000000000ull

/* ns since boot, not counting suspend: the events' clock. */
uint64_t nt_clock_mono_ns(void);
/* ns since the epoch (file names, rotation; never event timestamps). */
uint64_t nt_clock_wall_ns(void);

#endif /* NTCORE_KIT_CLOCK_H */
