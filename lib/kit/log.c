/* SPDX-License-Identifier: MIT */
/* Plugin kit: the instance-prefixed log line, through the host vtable. */
#include <stdio.h>

#include "ntcore/kit/log.h"

/* Longer lines are cut: the host's own line buffer is 2 KiB. */
#define KIT_LOG_LINE 2048

void nt_kit_vlog(const struct nt_host *host, struct nt_instance *inst,
		 int level, const char *fmt, va_list ap)
{
	char line[KIT_LOG_LINE];

	if (NT_HOST_HAS(host, vlog)) {
		host->vlog(inst, level, fmt, ap);
		return;
	}
	vsnprintf(line, sizeof(line), fmt, ap);
	host->log(inst, level, "%s", line);
}

void nt_kit_log(const struct nt_host *host, struct nt_instance *inst,
		int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	nt_kit_vlog(host, inst, level, fmt, ap);
	va_end(ap);
}
