/* SPDX-License-Identifier: MIT */
/*
 * mem probe: /proc/PID/statm and the mem.report table. Pure.
 */
#include <linux/types.h>

#include "mem_logic.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "mem.h"
#include "ntcore/kit/sb.h"

int mem_parse_statm(const char *text, uint64_t *size, uint64_t *resident,
		    uint64_t *shared)
{
	unsigned long long a, b, c;

	if (!text || sscanf(text, "%llu %llu %llu", &a, &b, &c) != 3)
		return -EINVAL;
	*size = a;
	*resident = b;
	*shared = c;
	return 0;
}

/* The first line: the process, its heap and its RSS. */
static void format_head(struct nt_sb *sb, const struct mem_report_proc *p)
{
	char a[32], b[32], c[32];

	nt_sb_printf(sb, "pid %u (%s)%s:", p->pid, p->comm ? p->comm : "?",
		     p->final ? " exited" : "");
	if (p->heap) {
		nt_fmt_bytes(p->live_bytes > 0 ? (uint64_t)p->live_bytes : 0,
			     a, sizeof(a));
		nt_fmt_bytes(p->peak_bytes > 0 ? (uint64_t)p->peak_bytes : 0,
			     b, sizeof(b));
		nt_sb_printf(sb, " heap %s in %" PRId64 " allocations outstanding (peak %s; %" PRIu64
			     " allocs, %" PRIu64 " frees)",
			     a, p->live_allocs, b, p->allocs, p->frees);
		if (p->mmap_live_bytes > 0) {
			nt_fmt_bytes((uint64_t)p->mmap_live_bytes, c, sizeof(c));
			nt_sb_printf(sb, "; anon mmap %s", c);
		}
		if (p->rss)
			nt_sb_putc(sb, ';');
	}
	if (p->rss) {
		nt_fmt_bytes(p->rss_bytes, a, sizeof(a));
		nt_fmt_bytes(p->peak_rss_bytes, b, sizeof(b));
		nt_sb_printf(sb, " rss %s (peak %s)", a, b);
	}
	nt_sb_putc(sb, '\n');
}

/* The report is built whole in a builder of the kit's and copied into buf,
 * cut to fit: the caller learns the full length, as from snprintf. */
size_t mem_format_report(char *buf, size_t len, const struct mem_report_proc *p,
			 const struct mem_report_line *lines, size_t n_lines,
			 size_t total_groups)
{
	struct nt_sb sb;
	size_t used;

	nt_sb_init(&sb, 1u << 24);
	format_head(&sb, p);
	for (size_t i = 0; i < n_lines; i++) {
		const struct mem_group *g = lines[i].g;
		char a[32];

		nt_fmt_bytes(g->bytes, a, sizeof(a));
		nt_sb_printf(&sb, "  #%zu %s in %" PRIu64 " %s from %s: %s\n", i + 1, a,
			     g->count, g->kind == MEM_KIND_MMAP ? "mmaps" : "allocs",
			     lines[i].function && lines[i].function[0] ? lines[i].function : "?",
			     lines[i].text ? lines[i].text : "[stack not recorded]");
	}
	if (total_groups > n_lines)
		nt_sb_printf(&sb, "  ... %zu more stacks\n", total_groups - n_lines);
	used = sb.len;
	if (len) {
		size_t n = used < len ? used : len - 1;

		memcpy(buf, nt_sb_str(&sb), n);
		buf[n] = '\0';
	}
	nt_sb_fini(&sb);
	return used;
}
