/* SPDX-License-Identifier: MIT */
/* The wrapped job: finding its command, and its status as a shell reports it. */
#include "job.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* 0, or why the file at `path` cannot be executed. */
static int check_file(const char *path, char *why, size_t why_len)
{
	struct stat st;

	if (stat(path, &st) != 0) {
		int err = errno;
		snprintf(why, why_len, "%s", strerror(err));
		return err == ENOENT || err == ENOTDIR ? NT_JOB_NOT_FOUND
						       : NT_JOB_NOT_EXECUTABLE;
	}
	if (S_ISDIR(st.st_mode)) {
		snprintf(why, why_len, "is a directory");
		return NT_JOB_NOT_EXECUTABLE;
	}
	if (access(path, X_OK) != 0) {
		snprintf(why, why_len, "%s", strerror(errno));
		return NT_JOB_NOT_EXECUTABLE;
	}
	return 0;
}

int nt_job_resolve(const char *cmd, char *why, size_t why_len)
{
	const char *path = getenv("PATH");
	char candidate[4096];
	int first_bad = 0;

	if (!cmd || !*cmd) {
		snprintf(why, why_len, "empty command");
		return NT_JOB_NOT_FOUND;
	}
	if (strchr(cmd, '/'))
		return check_file(cmd, why, why_len);
	/* execvp's default search path when PATH is unset */
	for (const char *dir = path ? path : "/bin:/usr/bin"; dir;) {
		const char *end = strchr(dir, ':');
		int len = end ? (int)(end - dir) : (int)strlen(dir);
		snprintf(candidate, sizeof(candidate), "%.*s/%s", len ? len : 1,
			 len ? dir : ".", cmd);
		char reason[256];
		int rc = check_file(candidate, reason, sizeof(reason));
		if (rc == 0)
			return 0;
		/* execvp too reports EACCES when a match was not executable */
		if (rc == NT_JOB_NOT_EXECUTABLE && !first_bad) {
			first_bad = rc;
			snprintf(why, why_len, "%s: %s", candidate, reason);
		}
		dir = end ? end + 1 : NULL;
	}
	if (first_bad)
		return first_bad;
	snprintf(why, why_len, "command not found");
	return NT_JOB_NOT_FOUND;
}

int nt_job_exit_status(int wait_status)
{
	if (WIFEXITED(wait_status))
		return WEXITSTATUS(wait_status);
	if (WIFSIGNALED(wait_status))
		return 128 + WTERMSIG(wait_status);
	return 1;
}

bool nt_job_tty_delivered(int signo)
{
	/* Only the terminal's own signals, and only when this process group
	 * is its foreground: then the job (in this group) got it too. */
	if (signo != SIGINT && signo != SIGQUIT)
		return false;
	for (int fd = 0; fd <= 2; fd++) {
		pid_t fg = tcgetpgrp(fd);
		if (fg > 0)
			return fg == getpgrp();
	}
	return false;
}
