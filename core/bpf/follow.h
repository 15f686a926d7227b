/* SPDX-License-Identifier: MIT */
/* Record shared by follow.bpf.c and the core: the proc.exit event. */
#ifndef NTCORE_FOLLOW_H
#define NTCORE_FOLLOW_H

#include "ntcore/event.h"

struct nt_proc_exit {
	struct nt_event_hdr hdr;
	int32_t exit_code; /* raw wait status as the kernel keeps it */
	uint32_t ppid;
};

#endif
