/* SPDX-License-Identifier: MIT */
/*
 * nvlink: a process's command name (the kit's /proc reader, "?" when it is
 * gone) and alert records with their message and evidence strings.
 */
#include <stdio.h>
#include <string.h>

#include "ntcore/kit/clock.h"
#include "ntcore/kit/proc.h"
#include "nvl.h"

const char *nvl_comm_of(uint32_t pid, char *buf, size_t n)
{
	if (nt_proc_comm(pid, 0, buf, n) < 0)
		snprintf(buf, n, "?");
	return buf;
}

static struct nt_vstr put_str(struct nvl *s, size_t *off, const char *str)
{
	size_t cap = sizeof(s->rec.bytes), len = strlen(str);
	struct nt_vstr v;

	if (*off + len > cap)
		len = cap - *off;
	memcpy(s->rec.bytes + *off, str, len);
	v.off = (uint32_t)*off;
	v.len = (uint32_t)len;
	*off += len;
	return v;
}

int nvl_publish_alert(struct nvl *s, int type_idx, size_t fixed_size,
		      uint32_t severity, uint32_t pid, const char *message,
		      const char *evidence)
{
	struct nt_alert *a = (struct nt_alert *)s->rec.bytes;
	size_t off = fixed_size;
	char comm[NT_COMM_LEN + 1];

	if (s->types[type_idx] <= 0)
		return 0;
	a->hdr.type = (uint32_t)s->types[type_idx];
	a->hdr.ts_ns = nt_clock_mono_ns();
	a->hdr.pid = pid;
	a->hdr.tid = pid;
	memset(a->hdr.comm, 0, sizeof(a->hdr.comm));
	if (pid) {
		nvl_comm_of(pid, comm, sizeof(comm));
		memcpy(a->hdr.comm, comm, strnlen(comm, NT_COMM_LEN));
	}
	a->severity = severity;
	a->subject_pid = pid;
	a->message = put_str(s, &off, message);
	a->evidence = put_str(s, &off, evidence);
	a->hdr.size = (uint32_t)off;
	return s->host->publish(s->inst, &a->hdr);
}

