/* SPDX-License-Identifier: MIT */
/* Core logging: one line per message on stderr, prefixed with the instance
 * (and, when stderr is the journal, with the line's syslog priority). */
#ifndef NTCORE_CORE_LOG_H
#define NTCORE_CORE_LOG_H

#include <stdarg.h>

/* Parses "error", "warn", "info", "debug"; returns -1 for anything else. */
int nt_log_level_parse(const char *text);
const char *nt_log_level_name(int level);

/* The journald priority prefix of a level ("<3>" for errors ...) when
 * stderr is the journal (JOURNAL_STREAM), else "". */
const char *nt_log_priority(int level);

/* prefix may be NULL ("ntcore: ..."), else "[prefix] ...". */
void nt_vlog(int level, const char *prefix, const char *fmt, va_list ap);
void nt_log(int level, const char *prefix, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
