/* SPDX-License-Identifier: MIT */
/* Plugin kit: the monotonic and wall clocks in nanoseconds. */
#include <time.h>

#include "ntcore/kit/clock.h"

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;

	if (clock_gettime(clock, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * NT_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

uint64_t nt_clock_mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

uint64_t nt_clock_wall_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}
