/* SPDX-License-Identifier: MIT */
/*
 * Log lines held back for a while instead of printed: while an
 * unprivileged start-up attaches its plugins, their errors are held, so
 * that a run in which nothing could attach ends with one line saying what
 * is missing rather than every plugin's (and libbpf's) version of EPERM.
 */
#ifndef NTCORE_CORE_LOGHOLD_H
#define NTCORE_CORE_LOGHOLD_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

struct nt_held_line;

/* Zero-initialised is ready. Safe from any thread (host->vlog is): a
 * sink's thread may log while the loop thread attaches the probes. */
struct nt_loghold {
	pthread_mutex_t lock;
	struct nt_held_line *lines; /* owned */
	size_t n, cap;
	bool on;
};

void nt_loghold_start(struct nt_loghold *h);
/* Holds one line when holding and returns true; returns false (and uses
 * nothing of `ap`) when not holding: then the caller prints it. */
bool nt_loghold_vadd(struct nt_loghold *h, int level, const char *prefix,
		     const char *fmt, va_list ap);
/* Stops holding; prints the held lines in order when `print`, else drops
 * them. Frees them either way. */
void nt_loghold_release(struct nt_loghold *h, bool print);

#endif
