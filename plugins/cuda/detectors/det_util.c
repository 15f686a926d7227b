/* SPDX-License-Identifier: MIT */
#include "det_util.h"

#include "ntcore/kit/proc.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void sb_xml_str(struct nt_sb *b, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<': nt_sb_puts(b, "&lt;"); break;
		case '>': nt_sb_puts(b, "&gt;"); break;
		case '&': nt_sb_puts(b, "&amp;"); break;
		case '"': nt_sb_puts(b, "&quot;"); break;
		default:
			if ((unsigned char)*s >= 0x20 || *s == '\n')
				nt_sb_putc(b, *s);
		}
	}
}

static unsigned count_frames(const char *stack)
{
	unsigned n = 0;

	for (const char *p = stack; p && *p; n++) {
		p = strchr(p, STACK_SEP);
		if (p)
			p++;
	}
	return n;
}

/* The frames root first, as in the text; of a long stack, the innermost
 * max_frames (the ones near the CUDA call). */
void sb_json_stack(struct nt_sb *b, const char *stack, unsigned max_frames)
{
	unsigned total = 0, n = 0, i = 0;

	for (const char *p = stack; p && *p;) { /* non-empty frames */
		const char *nl = strchr(p, STACK_SEP);
		total += (nl ? nl : p + strlen(p)) > p;
		p = nl ? nl + 1 : NULL;
	}
	unsigned skip = total > max_frames ? total - max_frames : 0;
	nt_sb_putc(b, '[');
	while (stack && *stack) {
		const char *nl = strchr(stack, STACK_SEP);
		size_t len = nl ? (size_t)(nl - stack) : strlen(stack);

		if (len && i++ >= skip) {
			if (n++)
				nt_sb_putc(b, ',');
			nt_sb_json_str(b, stack, len);
		}
		if (!nl)
			break;
		stack = nl + 1;
	}
	nt_sb_putc(b, ']');
}

const char *fmt_bytes(uint64_t v, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double d = (double)v;
	unsigned u = 0;

	if (v < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", v);
		return buf;
	}
	while (d >= 1024.0 && u < 4) {
		d /= 1024.0;
		u++;
	}
	snprintf(buf, len, "%.2f %s", d, unit[u]);
	return buf;
}

const char *stack_frame(const char *stack, unsigned idx, char *out, size_t len)
{
	unsigned total = count_frames(stack);
	size_t n = 0;

	if (!len)
		return out;
	out[0] = '\0';
	if (idx >= total)
		return out;
	/* idx counts from the innermost frame, the text's last */
	for (unsigned i = 0; stack && i < total - 1 - idx; i++) {
		stack = strchr(stack, STACK_SEP);
		if (stack)
			stack++;
	}
	while (stack && stack[n] && stack[n] != STACK_SEP && n + 1 < len) {
		out[n] = stack[n];
		n++;
	}
	out[n] = '\0';
	return out;
}

const char *stack_top(const char *stack, char *out, size_t len)
{
	return stack_frame(stack, 0, out, len);
}

static bool cuda_frame(const char *f)
{
	if (strstr(f, "libcudart") || strstr(f, "libcuda.so") ||
	    strstr(f, "libcuda-"))
		return true;
	if (strncmp(f, "cuda", 4) == 0 && f[4] >= 'A' && f[4] <= 'Z')
		return true;
	if (strncmp(f, "cu", 2) == 0 && f[2] >= 'A' && f[2] <= 'Z')
		return true;
	return strncmp(f, "__cuda", 6) == 0;
}

const char *stack_caller(const char *stack, const char *skip, char *out,
			 size_t len)
{
	unsigned last = 0;

	for (unsigned i = 0; i < 16; i++) {
		stack_frame(stack, i, out, len);
		if (!out[0])
			break;
		if (cuda_frame(out))
			last = i;
	}
	for (unsigned i = last + 1; i < last + 64; i++) {
		stack_frame(stack, i, out, len);
		if (!out[0])
			break;
		if (strncmp(out, "__device_stub__", 15) == 0 ||
		    (skip && skip[0] && strcmp(out, skip) == 0))
			continue;
		return out;
	}
	return stack_frame(stack, 0, out, len);
}

const char *stack_user_frame(const char *stack, char *out, size_t len)
{
	return stack_caller(stack, NULL, out, len);
}

const char *short_fn(const char *fn, char *buf, size_t len)
{
	static const char anon[] = "(anonymous namespace)";
	size_t o = 0;

	if (!len)
		return buf;
	for (size_t i = 0; fn && fn[i] && o + 1 < len;) {
		if (fn[i] == '(' && strncmp(fn + i, anon, sizeof(anon) - 1) != 0 &&
		    i > 0 && strncmp(fn + (i >= 8 ? i - 8 : 0), "operator", i >= 8 ? 8 : 0) != 0)
			break;
		buf[o++] = fn[i++];
	}
	buf[o] = '\0';
	return buf;
}


/* Reads /proc/PID/stat; returns the text after "(comm) " or NULL. */
static const char *read_stat(const char *root, uint32_t pid, char *buf,
			     size_t len)
{
	char path[256];
	FILE *f;
	size_t n;
	char *rp;

	snprintf(path, sizeof(path), "%s/%u/stat", root, pid);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	rp = strrchr(buf, ')');
	if (!rp || rp[1] != ' ')
		return NULL;
	return rp + 2;
}

int proc_alive(const char *root, uint32_t pid)
{
	char st = nt_proc_state(root, pid, 0);

	return st && !(st == 'Z' || st == 'X' || st == 'x');
}

char proc_state(const char *root, uint32_t pid)
{
	return nt_proc_state(root, pid, 0);
}

int64_t proc_cpu_ticks(const char *root, uint32_t pid)
{
	char buf[1024];
	const char *s = read_stat(root, pid, buf, sizeof(buf));
	unsigned long long ut, st;

	/* after "(comm) ": state(3) ppid pgrp session tty tpgid flags minflt
	 * cminflt majflt cmajflt utime(14) stime(15) */
	if (!s || sscanf(s, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			 &ut, &st) != 2)
		return -1;
	return (int64_t)(ut + st);
}
