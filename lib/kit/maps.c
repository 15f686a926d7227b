/* SPDX-License-Identifier: MIT */
/* Plugin kit: /proc/PID/maps, parsed by hand (no sscanf: large processes
 * have tens of thousands of lines, and the symbolizer re-reads them). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/proc.h"

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A number in `base` (16 or 10) ending at the byte `stop`; moves *p past
 * the stop byte. */
static bool number(char **p, int base, char stop, uint64_t *out)
{
	char *s = *p;
	uint64_t v = 0;
	int d, digits = 0, max_digits = base == 16 ? 16 : 19;

	for (; (d = hex_digit(*s)) >= 0 && d < base; s++, digits++)
		v = v * (uint64_t)base + (uint64_t)d;
	if (!digits || digits > max_digits || *s != stop)
		return false;
	*out = v;
	*p = s + 1;
	return true;
}

static void set_path(char *s, struct nt_map *m)
{
	static const char deleted[] = " (deleted)";
	const size_t dlen = sizeof(deleted) - 1;
	size_t len;

	while (*s == ' ')
		s++;
	len = strcspn(s, "\n");
	s[len] = '\0';
	m->deleted = len > dlen && strcmp(s + len - dlen, deleted) == 0;
	if (m->deleted)
		s[len -= dlen] = '\0';
	m->path = s;
	m->path_len = len;
}

bool nt_maps_parse_line(char *line, struct nt_map *m)
{
	char *p = line;
	uint64_t major, minor;

	memset(m, 0, sizeof(*m));
	if (!number(&p, 16, '-', &m->start) || !number(&p, 16, ' ', &m->end))
		return false;
	if (strlen(p) < 5 || p[4] != ' ')
		return false;
	memcpy(m->perms, p, 4);
	p += 5;
	if (!number(&p, 16, ' ', &m->offset) || !number(&p, 16, ':', &major) ||
	    !number(&p, 16, ' ', &minor))
		return false;
	if (!number(&p, 10, ' ', &m->inode) && !number(&p, 10, '\n', &m->inode) &&
	    !number(&p, 10, '\0', &m->inode))
		return false;
	m->dev_major = (uint32_t)major;
	m->dev_minor = (uint32_t)minor;
	if (p[-1] == ' ')
		set_path(p, m);
	else
		m->path = p - 1 + strlen(p - 1); /* "" at the line's end */
	return true;
}

int nt_proc_maps_foreach(uint32_t pid,
			 int (*fn)(void *arg, const struct nt_map *m),
			 void *arg)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	int ret = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (!ret && getline(&line, &cap, f) > 0) {
		struct nt_map m;
		if (nt_maps_parse_line(line, &m))
			ret = fn(arg, &m);
	}
	free(line);
	fclose(f);
	return ret;
}
