/* SPDX-License-Identifier: MIT */
/*
 * ntcore plugin kit: logging macros that carry the instance prefix.
 *
 *   nt_log_err(st, "cannot open %s: %s", path, strerror(errno));
 *   -> "ntcore: error: [probe:hello.0] cannot open ..." on stderr
 *
 * `p` is any pointer to a struct with the members `host` (const struct
 * nt_host *) and `inst` (struct nt_instance *): a plugin's state, or a
 * struct nt_ctx for a helper that holds nothing else. The host adds the
 * "[kind:instance]" prefix and drops lines below the instance's log_level.
 *
 * Threads: with a 1.2 host the line goes through host->vlog, which is safe
 * from any thread; an older host has only host->log, which is for the loop
 * thread, so the kit formats the line itself and hands it to log there.
 */
#ifndef NTCORE_KIT_LOG_H
#define NTCORE_KIT_LOG_H

#include "../plugin.h"

/* What a helper needs to log or publish on behalf of an instance. */
struct nt_ctx {
	const struct nt_host *host;
	struct nt_instance *inst;
};

#define nt_log_err(p, ...)                                                     \
	nt_kit_log((p)->host, (p)->inst, NT_LOG_ERROR, __VA_ARGS__)
#define nt_log_warn(p, ...)                                                    \
	nt_kit_log((p)->host, (p)->inst, NT_LOG_WARN, __VA_ARGS__)
#define nt_log_info(p, ...)                                                    \
	nt_kit_log((p)->host, (p)->inst, NT_LOG_INFO, __VA_ARGS__)
#define nt_log_dbg(p, ...)                                                     \
	nt_kit_log((p)->host, (p)->inst, NT_LOG_DEBUG, __VA_ARGS__)

/* One line at `level` (enum nt_log_level) for `inst`. */
void nt_kit_log(const struct nt_host *host, struct nt_instance *inst,
		int level, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void nt_kit_vlog(const struct nt_host *host, struct nt_instance *inst,
		 int level, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));

#endif /* NTCORE_KIT_LOG_H */
