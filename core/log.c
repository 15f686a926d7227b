/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdio.h>
#include <string.h>

#include "ntcore/plugin.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int nt_log_level_parse(const char *text)
{
	for (int i = 0; i < (int)NT_ARRAY_LEN(level_names); i++)
		if (strcmp(text, level_names[i]) == 0)
			return i;
	return -1;
}

const char *nt_log_level_name(int level)
{
	if (level < 0 || level >= (int)NT_ARRAY_LEN(level_names))
		return "?";
	return level_names[level];
}

void nt_vlog(int level, const char *prefix, const char *fmt, va_list ap)
{
	char line[2048];
	int n = 0;

	if (prefix)
		n = snprintf(line, sizeof(line), "ntcore: %s[%s] ",
			     level == NT_LOG_ERROR  ? "error: "
			     : level == NT_LOG_WARN ? "warning: "
						    : "",
			     prefix);
	else
		n = snprintf(line, sizeof(line), "ntcore: %s",
			     level == NT_LOG_ERROR  ? "error: "
			     : level == NT_LOG_WARN ? "warning: "
						    : "");
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	/* One fputs per line keeps lines whole when plugin threads log too. */
	size_t len = strlen(line);
	if (len + 1 < sizeof(line)) {
		line[len] = '\n';
		line[len + 1] = '\0';
	}
	fputs(line, stderr);
}

void nt_log(int level, const char *prefix, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	nt_vlog(level, prefix, fmt, ap);
	va_end(ap);
}
