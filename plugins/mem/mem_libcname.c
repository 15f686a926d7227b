/* SPDX-License-Identifier: MIT */
/*
 * mem probe: naming the C library: a path that is one, the first one a
 * maps text or line maps, and the one ldconfig -p lists for this ABI. Pure.
 */
#include <linux/types.h>

#include "mem_logic.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/proc.h"

bool mem_is_libc_path(const char *path)
{
	const char *base;
	size_t len;

	if (!path || path[0] != '/')
		return false;
	base = strrchr(path, '/') + 1;
	len = strlen(base);
	if (strcmp(base, "libc.so.6") == 0 || strcmp(base, "libc.so") == 0)
		return true;
	/* glibc before 2.34 installed libc-2.NN.so */
	if (strncmp(base, "libc-", 5) == 0 && len > 8 &&
	    strcmp(base + len - 3, ".so") == 0)
		return true;
	/* musl: the dynamic linker is the C library */
	return strncmp(base, "ld-musl-", 8) == 0 || strcmp(base, "libc.musl-x86_64.so.1") == 0;
}

int mem_map_libc(const struct nt_map *m, char *out, size_t outlen)
{
	if (m->deleted || !mem_is_libc_path(m->path))
		return -ENOENT; /* a deleted file was never matched: keep it so */
	if (m->path_len >= outlen)
		return -ENAMETOOLONG;
	memcpy(out, m->path, m->path_len + 1);
	return 0;
}

int mem_maps_find_libc(const char *maps, char *out, size_t outlen)
{
	const char *line = maps;

	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char buf[4096];
		struct nt_map m;

		if (len < sizeof(buf)) {
			int rc;

			memcpy(buf, line, len);
			buf[len] = '\0';
			if (nt_maps_parse_line(buf, &m) &&
			    (rc = mem_map_libc(&m, out, outlen)) != -ENOENT)
				return rc;
		}
		line = end ? end + 1 : NULL;
	}
	return -ENOENT;
}

int mem_ldconfig_find_libc(const char *text, char *out, size_t outlen)
{
#if defined(__x86_64__)
	static const char *const abi = "x86-64";
#elif defined(__aarch64__)
	static const char *const abi = "AArch64";
#else
	static const char *const abi = NULL;
#endif
	const char *line = text;

	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *s = line;

		while (s < line + len && (*s == ' ' || *s == '\t'))
			s++;
		if ((size_t)(line + len - s) > 10 && strncmp(s, "libc.so.6 (", 11) == 0) {
			const char *close = memchr(s, ')', (size_t)(line + len - s));
			const char *arrow = close ? strstr(close, "=> ") : NULL;
			bool abi_ok = true;

			if (close && abi) {
				size_t flen = (size_t)(close - (s + 11));
				char flags[128];

				if (flen >= sizeof(flags))
					flen = sizeof(flags) - 1;
				memcpy(flags, s + 11, flen);
				flags[flen] = '\0';
				abi_ok = strstr(flags, abi) != NULL;
			}
			if (abi_ok && arrow && arrow < line + len) {
				const char *p = arrow + 3;
				size_t plen = (size_t)(line + len - p);

				if (plen >= outlen)
					return -ENAMETOOLONG;
				memcpy(out, p, plen);
				out[plen] = '\0';
				return 0;
			}
		}
		line = end ? end + 1 : NULL;
	}
	return -ENOENT;
}
