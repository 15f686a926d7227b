/* Shared between hello.bpf.c and hello.c: the hello.exec record. */
#ifndef HELLO_H
#define HELLO_H

#include "ntcore/event.h"

#define HELLO_FILENAME_LEN 128

struct hello_exec {
	struct nt_event_hdr hdr;
	uint32_t old_pid; /* the thread id before exec */
	uint32_t pad;
	char filename[HELLO_FILENAME_LEN];
};

#endif
