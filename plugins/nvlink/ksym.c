/* SPDX-License-Identifier: MIT */
#include "ksym.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void copy_name(char *dst, const char *src, size_t len)
{
	if (len >= NVL_KSYM_NAME)
		len = NVL_KSYM_NAME - 1;
	memcpy(dst, src, len);
	dst[len] = '\0';
}

/* "ffffffffc0a1b2c0 t nv_fence_get_driver_name\t[nvidia_drm]" */
bool nvl_ksym_parse_line(const char *line, uint64_t addr, struct nvl_ksym *out)
{
	char *end;
	const char *name, *mod;
	size_t len;

	if (strtoull(line, &end, 16) != addr || end == line || *end != ' ' ||
	    !end[1] || end[2] != ' ')
		return false;
	name = end + 3;
	len = strcspn(name, " \t\n");
	if (!len)
		return false;
	memset(out, 0, sizeof(*out));
	out->addr = addr;
	copy_name(out->func, name, len);
	mod = strchr(name + len, '[');
	if (mod)
		copy_name(out->module, mod + 1, strcspn(mod + 1, "]\n"));
	return true;
}

static void look_up(const char *path, uint64_t addr, struct nvl_ksym *out)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	bool found = false;

	while (f && !found && getline(&line, &cap, f) > 0)
		found = nvl_ksym_parse_line(line, addr, out);
	free(line);
	if (f)
		fclose(f);
	if (!found) {
		memset(out, 0, sizeof(*out));
		out->addr = addr;
		snprintf(out->func, sizeof(out->func), "0x%" PRIx64, addr);
	}
}

const struct nvl_ksym *nvl_ksym_find(struct nvl_ksyms *c, uint64_t addr)
{
	static const struct nvl_ksym none;
	struct nvl_ksym *slot;

	if (!addr)
		return &none;
	for (size_t i = 0; i < c->n; i++)
		if (c->e[i].addr == addr)
			return &c->e[i];
	if (c->n < NVL_KSYM_CACHED) {
		slot = &c->e[c->n++];
	} else {
		slot = &c->e[c->next];
		c->next = (c->next + 1) % NVL_KSYM_CACHED;
	}
	look_up(c->path ? c->path : "/proc/kallsyms", addr, slot);
	return slot;
}

const char *nvl_ksym_driver(const struct nvl_ksym *k)
{
	return k->module[0] ? k->module : k->func;
}
