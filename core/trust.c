/* SPDX-License-Identifier: MIT */
/* Trust checks on the files the daemon loads or obeys (see trust.h). */
#include "trust.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Why one component is not trusted, or NULL. `is_target`: the file itself
 * (it must be a regular file; a sticky bit excuses nothing). */
static const char *component_flaw(const struct stat *st, bool is_target)
{
	uid_t me = geteuid();

	if (st->st_uid != 0 && st->st_uid != me)
		return "owner";
	if (is_target && !S_ISREG(st->st_mode))
		return S_ISDIR(st->st_mode) ? "directory" : "special";
	if (!is_target && !S_ISDIR(st->st_mode))
		return "special";
	/* Sticky directories (/tmp): others may add entries, not replace ours. */
	if (!is_target && (st->st_mode & S_ISVTX))
		return NULL;
	if (st->st_mode & S_IWOTH)
		return "others";
	if (st->st_mode & S_IWGRP)
		return "group";
	return NULL;
}

static void owner_hint(char *buf, size_t len)
{
	uid_t me = geteuid();

	if (me == 0)
		snprintf(buf, len, "only root may own it");
	else
		snprintf(buf, len, "only root or ntcore's user (uid %u) may own it",
			 (unsigned)me);
}

/* The refusal for the file itself. */
static void describe_target(const char *path, const char *what,
			    const char *flaw, const struct stat *st, char *why,
			    size_t len)
{
	unsigned mode = (unsigned)(st->st_mode & 07777);
	char hint[80];

	if (strcmp(flaw, "owner") == 0) {
		owner_hint(hint, sizeof(hint));
		snprintf(why, len, "%s: refusing a %s owned by uid %u (%s)", path,
			 what, (unsigned)st->st_uid, hint);
	} else if (strcmp(flaw, "directory") == 0) {
		snprintf(why, len, "%s: refusing a %s that is a directory", path, what);
	} else if (strcmp(flaw, "special") == 0) {
		snprintf(why, len, "%s: refusing a %s that is not a regular file", path,
			 what);
	} else {
		bool others = strcmp(flaw, "others") == 0;
		snprintf(why, len, "%s: refusing a %s writable by %s (mode %04o); chmod %s-w it",
			 path, what, others ? "others" : "its group", mode,
			 others ? "o" : "g");
	}
}

/* The refusal for a directory above the file. */
static void describe_dir(const char *path, const char *what, const char *dir,
			 const char *flaw, const struct stat *st, char *why,
			 size_t len)
{
	unsigned mode = (unsigned)(st->st_mode & 07777);
	char hint[80];

	if (strcmp(flaw, "owner") == 0) {
		owner_hint(hint, sizeof(hint));
		snprintf(why, len,
			 "%s: refusing a %s: its directory %s is owned by uid %u (%s)",
			 path, what, dir, (unsigned)st->st_uid, hint);
	} else if (strcmp(flaw, "special") == 0) {
		snprintf(why, len, "%s: refusing a %s: %s is not a directory", path,
			 what, dir);
	} else {
		bool others = strcmp(flaw, "others") == 0;
		snprintf(why, len,
			 "%s: refusing a %s: its directory %s is writable by %s (mode %04o); chmod %s-w %s",
			 path, what, dir, others ? "others" : "its group", mode,
			 others ? "o" : "g", dir);
	}
}

/* Walks "/", "/a", "/a/b", ... of the resolved path `real`, then the file. */
static int check_components(const char *path, const char *what,
			    const char *real, char *why, size_t why_len)
{
	char prefix[PATH_MAX];
	size_t len = strlen(real);
	struct stat st;

	for (size_t end = 1; end <= len; end++) {
		if (end < len && real[end] != '/')
			continue;
		bool is_target = end == len;
		memcpy(prefix, real, end);
		prefix[end] = '\0';
		if (stat(prefix, &st) != 0) {
			snprintf(why, why_len, "%s: %s: %s", path, prefix, strerror(errno));
			return -1;
		}
		const char *flaw = component_flaw(&st, is_target);
		if (!flaw)
			continue;
		if (is_target)
			describe_target(path, what, flaw, &st, why, why_len);
		else
			describe_dir(path, what, prefix, flaw, &st, why, why_len);
		return -1;
	}
	return 0;
}

int nt_trust_path(const char *path, const char *what, char *resolved,
		  char *why, size_t why_len)
{
	char real[PATH_MAX];
	struct stat root;

	if (!realpath(path, real)) {
		snprintf(why, why_len, "%s: %s", path, strerror(errno));
		return -1;
	}
	/* The root directory first: the walk below starts after it. */
	if (stat("/", &root) != 0 || component_flaw(&root, false)) {
		snprintf(why, why_len, "%s: refusing a %s: / is not owned by root or is writable by others",
			 path, what);
		return -1;
	}
	if (check_components(path, what, real, why, why_len))
		return -1;
	if (resolved)
		snprintf(resolved, PATH_MAX, "%s", real);
	return 0;
}
