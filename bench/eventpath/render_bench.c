/* SPDX-License-Identifier: MIT */
/*
 * bench/eventpath: the file sink's two JSON renderers side by side on the
 * benchmark's 14-field record (ringbench.h): jsonl.c's generic one (one
 * formatted append per field) and jsonr.c's compiled one (the file sink's
 * hot path). Prints ns per record and MB/s of text, each the best of 5
 * runs of N records into a 1 MiB buffer written nowhere.
 * usage: render_bench [N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jsonl.h"
#include "jsonr.h"
#include "ringbench.h"

#define F(m, t) NT_FIELD(struct rb_rec, m, t, "", "")
static const struct nt_field fields[] = {
	F(oncpu_ns, NT_F_U64), F(offcpu_ns, NT_F_U64), F(runq_ns, NT_F_U64),
	F(waits, NT_F_U64), F(switches, NT_F_U64), F(migrations, NT_F_U64),
	F(addr, NT_F_HEX64), F(path, NT_F_VSTR),
};
static const struct nt_schema schema = {
	.name = "bench.thread", .fields = fields, .n_fields = 8,
	.min_size = offsetof(struct rb_rec, path_text)};

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void fill(struct rb_rec *r, uint64_t seq)
{
	memset(r, 0, sizeof(*r));
	r->hdr.type = 1;
	r->hdr.size = sizeof(*r);
	r->hdr.ts_ns = 8000000000000ull + seq;
	r->hdr.pid = 4242;
	r->hdr.tid = 4243 + (uint32_t)(seq & 7);
	memcpy(r->hdr.comm, "pt_main_thread", 14);
	r->oncpu_ns = 123456789 + seq;
	r->offcpu_ns = 987654321;
	r->runq_ns = 4242 + (seq & 1023);
	r->waits = seq;
	r->switches = 90210;
	r->migrations = 3;
	r->addr = 0x7f3a2b1c0000ull + seq * 64;
	r->path.off = offsetof(struct rb_rec, path_text);
	r->path.len = 27;
	memcpy(r->path_text, "/data/shard-0042/part.arrow", 27);
}

static double run(int compiled, long n, size_t *bytes)
{
	static struct rb_rec recs[64];
	struct jr_cache cache = {0};
	struct nt_buf buf = {0};
	struct nt_sb sb;
	double t0, t1;

	nt_sb_init(&sb, 0);
	nt_sb_reserve(&sb, 2 << 20);
	for (int i = 0; i < 64; i++)
		fill(&recs[i], (uint64_t)i * 977);
	*bytes = 0;
	t0 = now_ns();
	for (long i = 0; i < n; i++) {
		const struct rb_rec *r = &recs[i & 63];
		uint64_t wall = 1795541800213387141ull + (uint64_t)i;
		if (compiled) {
			jr_render(&cache, &sb, &r->hdr, &schema, wall);
			if (sb.len >= 1 << 20) {
				*bytes += sb.len;
				nt_sb_rewind(&sb, 0);
			}
		} else {
			nt_jsonl_event(&buf, &r->hdr, &schema, wall);
			if (buf.len >= 1 << 20) {
				*bytes += buf.len;
				buf.len = 0;
			}
		}
	}
	t1 = now_ns();
	*bytes += compiled ? sb.len : buf.len;
	nt_sb_fini(&sb);
	nt_buf_free(&buf);
	jr_cache_free(&cache);
	return (t1 - t0) / (double)n;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000;
	double best[2] = {1e18, 1e18};
	size_t bytes[2] = {0, 0};

	for (int rep = 0; rep < 5; rep++)
		for (int c = 0; c < 2; c++) {
			double v = run(c, n, &bytes[c]);
			if (v < best[c])
				best[c] = v;
		}
	printf("%-34s %10s %10s\n", "render 14-field record", "ns/record", "MB/s");
	printf("%-34s %10.1f %10.0f\n", "generic (jsonl.c, per-field fmt)", best[0],
	       (double)bytes[0] / (double)n / best[0] * 1e3);
	printf("%-34s %10.1f %10.0f\n", "compiled (jsonr.c, file sink)", best[1],
	       (double)bytes[1] / (double)n / best[1] * 1e3);
	printf("ratio: compiled renders %.1fx faster\n", best[0] / best[1]);
	return 0;
}
