/* SPDX-License-Identifier: MIT */
/*
 * The wrapped job (`ntcore ... -- CMD ARGS`) as batch systems see it:
 * ntcore exits with CMD's status, as a shell would report it.
 */
#ifndef NTCORE_CORE_JOB_H
#define NTCORE_CORE_JOB_H

#include <stdbool.h>
#include <stddef.h>

/* Exit statuses a shell gives a command it cannot run. */
#define NT_JOB_NOT_FOUND 127
#define NT_JOB_NOT_EXECUTABLE 126

/* Finds CMD as execvp(3) would (a name with a '/' as is, else along
 * $PATH). Returns 0 when it can be executed, else NT_JOB_NOT_FOUND or
 * NT_JOB_NOT_EXECUTABLE with the reason in `why`. */
int nt_job_resolve(const char *cmd, char *why, size_t why_len);

/* The exit status of a process from its wait status: its exit code, or
 * 128 + N when signal N killed it. */
int nt_job_exit_status(int wait_status);

/* True when a terminal already delivered `signo` to this process group
 * (Ctrl-C reaches the job too: ntcore must not send it a second one). */
bool nt_job_tty_delivered(int signo);

#endif
