/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* systemd names the journal stream it connected to stderr in
 * JOURNAL_STREAM ("DEV:INODE"); checked per line (a log line is no hot
 * path), so a redirected stderr is never given prefixes. */
static bool stderr_is_journal(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	return env && sscanf(env, "%llu:%llu", &dev, &ino) == 2 &&
	       fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

const char *nt_log_priority(int level)
{
	static const char *const prio[] = {"<3>", "<4>", "<6>", "<7>"};

	if (!stderr_is_journal())
		return "";
	return prio[level < 0 ? 0 : level > NT_LOG_DEBUG ? NT_LOG_DEBUG : level];
}

void nt_vlog(int level, const char *prefix, const char *fmt, va_list ap)
{
	char line[2048];
	int n = 0;

	if (prefix)
		n = snprintf(line, sizeof(line), "%sntcore: %s[%s] ",
			     nt_log_priority(level),
			     level == NT_LOG_ERROR  ? "error: "
			     : level == NT_LOG_WARN ? "warning: "
						    : "",
			     prefix);
	else
		n = snprintf(line, sizeof(line), "%sntcore: %s",
			     nt_log_priority(level),
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
