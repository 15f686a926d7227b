/* SPDX-License-Identifier: MIT */
#include "det_util.h"

#include "ntcore/kit/proc.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void sb_init(struct sbuf *b)
{
	memset(b, 0, sizeof(*b));
}

void sb_free(struct sbuf *b)
{
	free(b->p);
	sb_init(b);
}

void sb_reset(struct sbuf *b)
{
	b->len = 0;
	if (b->p)
		b->p[0] = '\0';
}

static bool sb_reserve(struct sbuf *b, size_t more)
{
	size_t need = b->len + more + 1;
	size_t cap;
	char *p;

	if (b->oom)
		return false;
	if (need <= b->cap)
		return true;
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void sb_putn(struct sbuf *b, const char *s, size_t n)
{
	if (!sb_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void sb_putc(struct sbuf *b, char c)
{
	sb_putn(b, &c, 1);
}

void sb_puts(struct sbuf *b, const char *s)
{
	sb_putn(b, s, strlen(s));
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !sb_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void sb_json_strn(struct sbuf *b, const char *s, size_t n)
{
	sb_putc(b, '"');
	for (size_t i = 0; i < n && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		switch (c) {
		case '"': sb_puts(b, "\\\""); break;
		case '\\': sb_puts(b, "\\\\"); break;
		case '\n': sb_puts(b, "\\n"); break;
		case '\r': sb_puts(b, "\\r"); break;
		case '\t': sb_puts(b, "\\t"); break;
		default:
			if (c < 0x20)
				sb_printf(b, "\\u%04x", c);
			else
				sb_putc(b, (char)c);
		}
	}
	sb_putc(b, '"');
}

void sb_json_str(struct sbuf *b, const char *s)
{
	sb_json_strn(b, s ? s : "", s ? strlen(s) : 0);
}

void sb_xml_str(struct sbuf *b, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<': sb_puts(b, "&lt;"); break;
		case '>': sb_puts(b, "&gt;"); break;
		case '&': sb_puts(b, "&amp;"); break;
		case '"': sb_puts(b, "&quot;"); break;
		default:
			if ((unsigned char)*s >= 0x20 || *s == '\n')
				sb_putc(b, *s);
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
void sb_json_stack(struct sbuf *b, const char *stack, unsigned max_frames)
{
	unsigned total = 0, n = 0, i = 0;

	for (const char *p = stack; p && *p;) { /* non-empty frames */
		const char *nl = strchr(p, STACK_SEP);
		total += (nl ? nl : p + strlen(p)) > p;
		p = nl ? nl + 1 : NULL;
	}
	unsigned skip = total > max_frames ? total - max_frames : 0;
	sb_putc(b, '[');
	while (stack && *stack) {
		const char *nl = strchr(stack, STACK_SEP);
		size_t len = nl ? (size_t)(nl - stack) : strlen(stack);

		if (len && i++ >= skip) {
			if (n++)
				sb_putc(b, ',');
			sb_json_strn(b, stack, len);
		}
		if (!nl)
			break;
		stack = nl + 1;
	}
	sb_putc(b, ']');
}

const char *sb_str(const struct sbuf *b)
{
	return b->p ? b->p : "";
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

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *c = p;
	uint64_t h = 1469598103934665603ULL ^ seed;

	for (size_t i = 0; i < n; i++) {
		h ^= c[i];
		h *= 1099511628211ULL;
	}
	return h;
}
