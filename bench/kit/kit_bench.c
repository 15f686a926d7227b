/* SPDX-License-Identifier: MIT */
/*
 * Cost of the plugin kit's hot-path pieces, each beside the alternative a
 * plugin would use without it, measured in one run (the two alternate over
 * REPS rounds; the median round is printed):
 *
 *   hash map   nt_hmap put / get hit / get miss / delete, 8- and 16-byte
 *              keys, against glibc's tsearch tree (the only keyed map with
 *              deletion in libc); 10 000 keys (in cache: a per-process or
 *              per-stack table) and 1 000 000 (memory-bound for both)
 *   strings    nt_sb_u64, nt_sb_json_str and a whole JSON Lines record
 *              (the file sink's shape: 14 fields) against snprintf per
 *              field and byte-at-a-time escaping into a growable buffer
 *
 *   bench_kit [--smoke]
 *
 * Prints one line per operation: ns per op of the kit, of the alternative,
 * and alternative / kit (above 1: the kit is faster).
 */
#include <inttypes.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/clock.h"
#include "ntcore/kit/hmap.h"
#include "ntcore/kit/sb.h"

#define REPS 5

/* What each timed loop folds its results into, so none is optimized away. */
struct sink {
	uint64_t sum;
};

struct pair {
	double kit[REPS], alt[REPS];
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v)
{
	qsort(v, REPS, sizeof(*v), cmp_double);
	return v[REPS / 2];
}

static void report(const char *what, struct pair *p)
{
	double kit = median(p->kit), alt = median(p->alt);

	printf("%-34s %9.1f %9.1f %8.2fx\n", what, kit, alt, alt / kit);
}

static uint64_t mix(uint64_t i)
{
	return (i + 1) * 0x9e3779b97f4a7c15ull;
}

/* ---- hash map against tsearch ---------------------------------------- */

struct key16 {
	uint64_t a, b;
};

static int cmp_key16(const void *x, const void *y)
{
	const struct key16 *p = x, *q = y;

	if (p->a != q->a)
		return p->a < q->a ? -1 : 1;
	return (p->b > q->b) - (p->b < q->b);
}

/* ns per op of each phase: 0 put, 1 get hit, 2 get miss, 3 delete. */
static void hmap_round(const struct key16 *keys, size_t n, size_t key_size,
		       double out[4], struct sink *s)
{
	struct nt_hmap m;
	uint64_t t[5];

	nt_hmap_init(&m, (uint32_t)key_size, sizeof(uint64_t), 0);
	t[0] = nt_clock_mono_ns();
	for (size_t i = 0; i < n; i++)
		*(uint64_t *)nt_hmap_put(&m, &keys[i], NULL) = i;
	t[1] = nt_clock_mono_ns();
	for (size_t i = 0; i < n; i++)
		s->sum += *(uint64_t *)nt_hmap_get(&m, &keys[i]);
	t[2] = nt_clock_mono_ns();
	for (size_t i = 0; i < n; i++)
		s->sum += nt_hmap_get(&m, &keys[n + i]) != NULL;
	t[3] = nt_clock_mono_ns();
	for (size_t i = 0; i < n; i++)
		s->sum += nt_hmap_del(&m, &keys[i]);
	t[4] = nt_clock_mono_ns();
	nt_hmap_fini(&m);
	for (int k = 0; k < 4; k++)
		out[k] = (double)(t[k + 1] - t[k]) / (double)n;
}

/* The same phases with tsearch: a node per key, as a tree needs. */
static void tree_round(const struct key16 *keys, size_t n, double out[4],
		       struct sink *s)
{
	void *root = NULL;
	uint64_t t[5];

	t[0] = nt_clock_mono_ns();
	for (size_t i = 0; i < n; i++)
		tsearch(&keys[i], &root, cmp_key16);
	t[1] = nt_clock_mono_ns();
	for (size_t i = 0; i < n; i++)
		s->sum += *(const struct key16 **)tfind(&keys[i], &root, cmp_key16) ==
			  &keys[i];
	t[2] = nt_clock_mono_ns();
	for (size_t i = 0; i < n; i++)
		s->sum += tfind(&keys[n + i], &root, cmp_key16) != NULL;
	t[3] = nt_clock_mono_ns();
	for (size_t i = 0; i < n; i++)
		s->sum += tdelete(&keys[i], &root, cmp_key16) != NULL;
	t[4] = nt_clock_mono_ns();
	for (int k = 0; k < 4; k++)
		out[k] = (double)(t[k + 1] - t[k]) / (double)n;
}

static void bench_hmap(size_t n, struct sink *s)
{
	static const char *const phase[4] = {"put (new key)", "get (hit)",
					     "get (miss)", "delete"};
	struct key16 *keys = malloc(2 * n * sizeof(*keys));
	struct pair p[2][4];

	/* Keys n..2n-1 are never inserted: the misses. */
	for (size_t i = 0; i < 2 * n; i++)
		keys[i] = (struct key16){mix(i), mix(i) >> 7};
	for (int r = 0; r < REPS; r++) {
		double kit8[4], kit16[4], tree[4];
		hmap_round(keys, n, 8, kit8, s);
		hmap_round(keys, n, 16, kit16, s);
		tree_round(keys, n, tree, s);
		for (int k = 0; k < 4; k++) {
			p[0][k].kit[r] = kit8[k];
			p[1][k].kit[r] = kit16[k];
			p[0][k].alt[r] = p[1][k].alt[r] = tree[k];
		}
	}
	printf("\nhash map, %zu keys: nt_hmap vs tsearch%38s\n", n, "");
	for (int w = 0; w < 2; w++)
		for (int k = 0; k < 4; k++) {
			char what[64];
			snprintf(what, sizeof(what), "%s, %d-byte key", phase[k],
				 w ? 16 : 8);
			report(what, &p[w][k]);
		}
	free(keys);
}

/* ---- string builder against snprintf --------------------------------- */

/* The alternative: a growable buffer fed by snprintf or by single bytes. */
struct plain_buf {
	char *p;
	size_t len, cap;
};

static void plain_put(struct plain_buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void plain_printf_u64(struct plain_buf *b, uint64_t v)
{
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%" PRIu64, v);

	plain_put(b, tmp, (size_t)n);
}

/* Byte at a time, each escape its own append: the shape of the sinks'
 * current JSON string writers. */
static void plain_json_str(struct plain_buf *b, const char *s, size_t n)
{
	plain_put(b, "\"", 1);
	for (size_t i = 0; i < n && s[i]; i++) {
		char c = s[i];
		if (c == '"' || c == '\\') {
			char esc[2] = {'\\', c};
			plain_put(b, esc, 2);
		} else if ((unsigned char)c < 0x20) {
			char esc[8];
			int k = snprintf(esc, sizeof(esc), "\\u%04x", c);
			plain_put(b, esc, (size_t)k);
		} else {
			plain_put(b, &c, 1);
		}
	}
	plain_put(b, "\"", 1);
}

/* One event as the file sink writes it: 14 fields. */
struct record {
	uint64_t ts, v[6], addr;
	uint32_t pid, tid;
	const char *type, *comm, *path;
};

static void record_kit(struct nt_sb *b, const struct record *r)
{
	static const char *const names[6] = {",\"oncpu_ns\":", ",\"offcpu_ns\":",
		",\"runq_ns\":", ",\"waits\":", ",\"switches\":", ",\"migrations\":"};

	nt_sb_puts(b, "{\"ts\":");
	nt_sb_u64(b, r->ts);
	nt_sb_puts(b, ",\"type\":");
	nt_sb_json_str(b, r->type, 64);
	nt_sb_puts(b, ",\"pid\":");
	nt_sb_u64(b, r->pid);
	nt_sb_puts(b, ",\"tid\":");
	nt_sb_u64(b, r->tid);
	nt_sb_puts(b, ",\"comm\":");
	nt_sb_json_str(b, r->comm, 16);
	for (int i = 0; i < 6; i++) {
		nt_sb_puts(b, names[i]);
		nt_sb_u64(b, r->v[i]);
	}
	nt_sb_puts(b, ",\"addr\":\"0x");
	nt_sb_hex(b, r->addr);
	nt_sb_puts(b, "\",\"path\":");
	nt_sb_json_str(b, r->path, 256);
	nt_sb_puts(b, "}\n");
}

static void record_plain(struct plain_buf *b, const struct record *r)
{
	char tmp[512];
	int n = snprintf(tmp, sizeof(tmp),
			 "{\"ts\":%" PRIu64 ",\"type\":", r->ts);

	plain_put(b, tmp, (size_t)n);
	plain_json_str(b, r->type, 64);
	n = snprintf(tmp, sizeof(tmp), ",\"pid\":%u,\"tid\":%u,\"comm\":", r->pid,
		     r->tid);
	plain_put(b, tmp, (size_t)n);
	plain_json_str(b, r->comm, 16);
	n = snprintf(tmp, sizeof(tmp),
		     ",\"oncpu_ns\":%" PRIu64 ",\"offcpu_ns\":%" PRIu64
		     ",\"runq_ns\":%" PRIu64 ",\"waits\":%" PRIu64
		     ",\"switches\":%" PRIu64 ",\"migrations\":%" PRIu64
		     ",\"addr\":\"0x%" PRIx64 "\",\"path\":",
		     r->v[0], r->v[1], r->v[2], r->v[3], r->v[4], r->v[5], r->addr);
	plain_put(b, tmp, (size_t)n);
	plain_json_str(b, r->path, 256);
	plain_put(b, "}\n", 2);
}

/* Times `n` calls of one of three shapes, resetting the buffers every 64
 * appends (a sink's write batch); returns ns per call. */
enum sb_op { OP_U64, OP_JSON, OP_RECORD };

static double time_kit(enum sb_op op, size_t n, const struct record *r,
		       struct sink *s)
{
	struct nt_sb b;
	uint64_t t0;

	nt_sb_init(&b, 1 << 20);
	t0 = nt_clock_mono_ns();
	for (size_t i = 0; i < n; i++) {
		if (op == OP_U64)
			nt_sb_u64(&b, mix(i) >> (i & 63));
		else if (op == OP_JSON)
			nt_sb_json_str(&b, r->path, 256);
		else
			record_kit(&b, r);
		if ((i & 63) == 63) {
			s->sum += b.len;
			nt_sb_reset(&b);
		}
	}
	double ns = (double)(nt_clock_mono_ns() - t0) / (double)n;
	nt_sb_fini(&b);
	return ns;
}

static double time_plain(enum sb_op op, size_t n, const struct record *r,
			 struct sink *s)
{
	struct plain_buf b = {0};
	uint64_t t0 = nt_clock_mono_ns();

	for (size_t i = 0; i < n; i++) {
		if (op == OP_U64)
			plain_printf_u64(&b, mix(i) >> (i & 63));
		else if (op == OP_JSON)
			plain_json_str(&b, r->path, 256);
		else
			record_plain(&b, r);
		if ((i & 63) == 63) {
			s->sum += b.len;
			b.len = 0;
		}
	}
	double ns = (double)(nt_clock_mono_ns() - t0) / (double)n;
	free(b.p);
	return ns;
}

static void bench_sb(size_t n, struct sink *s)
{
	static const char *const what[3] = {
		"u64 (nt_sb_u64 / snprintf)", "JSON string, 45 bytes, 2 escapes",
		"JSONL record, 14 fields"};
	const struct record r = {
		.ts = 1795541800213387141ull, .v = {123456789, 987654321, 4242, 17, 90210, 3},
		.addr = 0x7f3b6ce68000ull, .pid = 30468, .tid = 30471,
		.type = "sched.thread", .comm = "python3",
		.path = "/usr/lib/x86_64-linux-gnu/libcudart.so.13 \"x\"",
	};
	struct pair p[3];

	for (int rep = 0; rep < REPS; rep++)
		for (int op = 0; op < 3; op++) {
			p[op].kit[rep] = time_kit((enum sb_op)op, n, &r, s);
			p[op].alt[rep] = time_plain((enum sb_op)op, n, &r, s);
		}
	printf("\nstrings, %zu appends each: nt_sb vs snprintf/bytewise\n", n);
	for (int op = 0; op < 3; op++)
		report(what[op], &p[op]);
	printf("%-34s %9.1f M records/s on one core\n", "  kit record rate",
	       1e3 / median(p[OP_RECORD].kit));
}

int main(int argc, char **argv)
{
	bool smoke = argc > 1 && strcmp(argv[1], "--smoke") == 0;
	struct sink s = {0};

	if (argc > 2 || (argc == 2 && !smoke)) {
		fprintf(stderr, "usage: %s [--smoke]\n", argv[0]);
		return 2;
	}
	printf("%-34s %9s %9s %9s\n", "operation (median of 5 rounds)", "kit ns",
	       "alt ns", "alt/kit");
	bench_hmap(10000, &s);
	if (!smoke)
		bench_hmap(1000000, &s);
	bench_sb(smoke ? 20000 : 2000000, &s);
	printf("(checksum %" PRIu64 ")\n", s.sum);
	return 0;
}
