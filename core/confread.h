/* SPDX-License-Identifier: MIT */
/*
 * Reading config text so that no input can end the process. libconfig 1.5
 * reads @include files through its flex scanner, which calls exit() when a
 * read fails (an @include of a directory: "input in flex scanner failed").
 * Debian 12's libconfig has no include hook, so the daemon reads every file
 * itself (trusted, regular, bounded in size), expands the @include
 * directives exactly where libconfig's scanner would see them, and hands
 * libconfig one string. A line map turns the string's line numbers back
 * into FILE:LINE.
 */
#ifndef NTCORE_CORE_CONFREAD_H
#define NTCORE_CORE_CONFREAD_H

#include <stddef.h>
#include <stdint.h>

#define NT_CONF_MAX_DEPTH 10            /* libconfig's own include limit */
#define NT_CONF_MAX_BYTES (16u << 20)   /* all files together */

struct nt_conf_line {
	uint32_t file; /* index into nt_conf_src.files */
	uint32_t line; /* 1-based line in that file */
};

/* Where each line of the expanded text came from. */
struct nt_conf_src {
	char **files;               /* owned; [0] is the main file */
	size_t n_files;
	struct nt_conf_line *lines; /* [expanded line - 1] */
	size_t n_lines, cap_lines;
};

/*
 * Reads `path` (or, when `text` is non-NULL, that text under the name
 * `path`, e.g. the embedded default) and expands its @include directives.
 * A relative include path is taken from the including file's directory
 * (from the working directory for `text`). Every file read must pass
 * nt_trust_path. Returns the expanded NUL-terminated text (caller frees)
 * or NULL with "FILE:LINE: what is wrong" (or "FILE: ...") in `why`.
 */
char *nt_conf_read(const char *path, const char *text, struct nt_conf_src *src,
		   char *why, size_t why_len);

/* The file and line of expanded line `line`; out-of-range lines map to the
 * main file unchanged. */
void nt_conf_where(const struct nt_conf_src *src, int line, const char **file,
		   int *file_line);

void nt_conf_src_free(struct nt_conf_src *src);

#endif
