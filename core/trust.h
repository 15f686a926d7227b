/* SPDX-License-Identifier: MIT */
/*
 * Trust in files the daemon runs or obeys: plugin shared objects, the
 * directories they sit in, config files. A file is trusted when every
 * component of its resolved path (the file and each directory above it up
 * to "/") is owned by root or by the daemon's effective user, and writable
 * by no one else (neither group nor others). A directory with the sticky
 * bit (/tmp) may be writable by others: nobody but an entry's owner can
 * then rename or delete that entry, and the entry is checked itself.
 */
#ifndef NTCORE_CORE_TRUST_H
#define NTCORE_CORE_TRUST_H

#include <stddef.h>

/*
 * Checks `path` as described above. `what` names the file in the refusal
 * ("plugin file", "config file"). Returns 0 and writes the resolved path
 * into `resolved` (PATH_MAX bytes; may be NULL), or -1 with the reason in
 * `why`, e.g. "/opt/p/x.so: refusing a plugin file: its directory /opt/p is
 * writable by others (mode 0777); chmod o-w /opt/p".
 */
int nt_trust_path(const char *path, const char *what, char *resolved,
		  char *why, size_t why_len);

#endif
