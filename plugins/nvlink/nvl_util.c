/* SPDX-License-Identifier: MIT */
/*
 * nvlink: generic plumbing kept in one file (the SDK's plugin kit will
 * replace it): the monotonic clock, a process's command name from /proc,
 * and alert records with their message and evidence strings.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvl.h"

uint64_t nvl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *nvl_comm_of(uint32_t pid, char *buf, size_t n)
{
	char path[64];
	ssize_t r;
	int fd;

	snprintf(buf, n, "?");
	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return buf;
	r = read(fd, buf, n - 1);
	close(fd);
	if (r <= 0) {
		snprintf(buf, n, "?");
		return buf;
	}
	buf[r] = '\0';
	if (r > 0 && buf[r - 1] == '\n')
		buf[r - 1] = '\0';
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
	a->hdr.ts_ns = nvl_now_ns();
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

size_t nvl_json_str(char *out, size_t n, const char *str)
{
	size_t o = 0;

	if (!n)
		return 0;
	for (const unsigned char *c = (const unsigned char *)str; *c && o + 7 < n; c++) {
		if (*c == '"' || *c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)*c;
		} else if (*c < 0x20) {
			o += (size_t)snprintf(out + o, n - o, "\\u%04x", *c);
		} else {
			out[o++] = (char)*c;
		}
	}
	out[o] = '\0';
	return o;
}
