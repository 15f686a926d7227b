/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the python probe's pure parts: line tables (against
 * co_lines() of real 3.10-3.13 interpreters), the offsets table and the
 * 3.13 debug-offsets reader, maps parsing and name checks, reading str and
 * code objects laid out in this process's own memory, aggregation (folded
 * stacks, per-function table, deltas, bounds), the u64 map and the CUDA
 * join's decision (own thread, blocked thread of the same process).
 */
#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyagg.h"
#include "pyjoin.h"
#include "pyline.h"
#include "pymap.h"
#include "pyoffsets.h"
#include "pyproc.h"

#include "test_python_fixtures.c"

/* ---- line tables ---- */

static void check_fixtures(const struct line_fixture *fx, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t a = 0; a < fx[i].n; a++) {
			int got = py_addr2line(fx[i].minor, fx[i].lt, fx[i].lt_len,
					       fx[i].first, (int)a * 2);

			ck_assert_msg(got == fx[i].lines[a],
				      "3.%d %s: byte %zu: line %d, co_lines says %d",
				      fx[i].minor, fx[i].name, a * 2, got, fx[i].lines[a]);
		}
}

START_TEST(lines_310) { check_fixtures(fx310, sizeof(fx310) / sizeof(fx310[0])); }
END_TEST
START_TEST(lines_311) { check_fixtures(fx311, sizeof(fx311) / sizeof(fx311[0])); }
END_TEST
START_TEST(lines_312) { check_fixtures(fx312, sizeof(fx312) / sizeof(fx312[0])); }
END_TEST
START_TEST(lines_313) { check_fixtures(fx313, sizeof(fx313) / sizeof(fx313[0])); }
END_TEST

START_TEST(lines_edges)
{
	static const uint8_t lt311[] = { 0x80 | (13 << 3) | 1, 4 /* +2 */ };

	/* a negative address is the first line (a frame not started yet) */
	ck_assert_int_eq(py_addr2line(11, lt311, sizeof(lt311), 40, -2), 40);
	/* one no-column entry of 2 code units, line +2 */
	ck_assert_int_eq(py_addr2line(11, lt311, sizeof(lt311), 40, 0), 42);
	ck_assert_int_eq(py_addr2line(11, lt311, sizeof(lt311), 40, 2), 42);
	/* past the table */
	ck_assert_int_eq(py_addr2line(11, lt311, sizeof(lt311), 40, 4), -1);
	ck_assert_int_eq(py_addr2line(11, NULL, 0, 40, 0), -1);
	/* 3.10: (bytes, line delta) pairs; -128 = no line */
	static const uint8_t lt310[] = { 4, 1, 2, 0x80, 6, 3 };

	ck_assert_int_eq(py_addr2line(10, lt310, sizeof(lt310), 10, 0), 11);
	ck_assert_int_eq(py_addr2line(10, lt310, sizeof(lt310), 10, 2), 11);
	ck_assert_int_eq(py_addr2line(10, lt310, sizeof(lt310), 10, 4), -1);
	ck_assert_int_eq(py_addr2line(10, lt310, sizeof(lt310), 10, 6), 14);
	ck_assert_int_eq(py_addr2line(10, lt310, sizeof(lt310), 10, 12), -1);
}
END_TEST

/* ---- offsets ---- */

START_TEST(layout_table)
{
	const struct py_layout *l;
	struct py_bpf_offsets o;

	ck_assert_ptr_null(py_layout_lookup(3, 9));
	ck_assert_ptr_null(py_layout_lookup(3, 14));
	ck_assert_ptr_null(py_layout_lookup(2, 7));
	for (int m = 10; m <= 13; m++) {
		l = py_layout_lookup(3, m);
		ck_assert_ptr_nonnull(l);
		ck_assert_ptr_nonnull(strstr(l->source, "headers"));
		ck_assert_int_le(l->frame_code, PY_FRAME_BUF - 8);
		ck_assert_int_le(l->frame_previous, PY_FRAME_BUF - 8);
		ck_assert_int_le(l->frame_instr, PY_FRAME_BUF - 8);
		ck_assert_int_le(l->frame_read, PY_FRAME_BUF - 8);
	}
	l = py_layout_lookup(3, 10);
	py_layout_to_bpf(l, &o);
	ck_assert_int_eq(o.instr_is_int, 1);
	ck_assert_int_eq(o.tid_is_pthread, 1);
	ck_assert_int_eq(o.cframe_current, PY_NO_OFF);
	ck_assert_int_eq(o.owner_cstack, 0xff);
	ck_assert_int_eq(o.ts_frame, 24);
	l = py_layout_lookup(3, 11);
	py_layout_to_bpf(l, &o);
	ck_assert_int_eq(o.instr_is_int, 0);
	ck_assert_int_eq(o.ts_frame, 56);
	ck_assert_int_eq(o.cframe_current, 8);
	ck_assert_int_eq(o.frame_code, 32);
	ck_assert_int_eq(o.frame_previous, 48);
	ck_assert_int_eq(o.exc_is_type, 1);
	l = py_layout_lookup(3, 12);
	py_layout_to_bpf(l, &o);
	ck_assert_int_eq(o.owner_cstack, 3);
	ck_assert_int_eq(o.cframe_current, 0);
	ck_assert_int_eq(o.exc_is_type, 0);
	ck_assert_str_eq(py_layout_known(), "3.10, 3.11, 3.12, 3.13");
}
END_TEST

static void put64(uint8_t *b, size_t off, uint64_t v)
{
	memcpy(b + off, &v, 8);
}

/* A 3.13 _Py_DebugOffsets as CPython 3.13.0 fills it (values from its
 * headers, like the table row). */
static void fake_debug(uint8_t *b)
{
	memset(b, 0, PY_DEBUG_OFFSETS_313_SIZE);
	memcpy(b, "xdebugpy", 8);
	put64(b, 8, 0x030d00f0);
	put64(b, 24, 1000); put64(b, 40, 632);
	put64(b, 48, 8000); put64(b, 64, 7264); put64(b, 72, 7344);
	put64(b, 152, 300); put64(b, 168, 8); put64(b, 176, 16);
	put64(b, 184, 72); put64(b, 200, 160);
	put64(b, 224, 80); put64(b, 232, 8); put64(b, 240, 0); put64(b, 248, 56);
	put64(b, 256, 72); put64(b, 264, 70);
	put64(b, 272, 200); put64(b, 280, 112); put64(b, 288, 120);
	put64(b, 296, 128); put64(b, 304, 136); put64(b, 312, 68); put64(b, 344, 200);
	put64(b, 360, 8); put64(b, 376, 24);
	put64(b, 520, 16); put64(b, 528, 32);
	put64(b, 544, 32); put64(b, 552, 16); put64(b, 560, 40);
}

START_TEST(debug_offsets)
{
	uint8_t b[PY_DEBUG_OFFSETS_313_SIZE];
	struct py_layout l;
	const struct py_layout *row = py_layout_lookup(3, 13);
	char err[256];

	fake_debug(b);
	ck_assert_int_eq(py_layout_from_debug(b, sizeof(b), 0x030d00f0, &l, err, sizeof(err)), 0);
	/* every field the debug offsets carry equals the header-derived row */
	ck_assert_int_eq(l.runtime_interp_head, row->runtime_interp_head);
	ck_assert_int_eq(l.interp_threads_head, row->interp_threads_head);
	ck_assert_int_eq(l.interp_next, row->interp_next);
	ck_assert_int_eq(l.ts_frame, row->ts_frame);
	ck_assert_int_eq(l.ts_thread_id, row->ts_thread_id);
	ck_assert_int_eq(l.frame_code, row->frame_code);
	ck_assert_int_eq(l.frame_instr, row->frame_instr);
	ck_assert_int_eq(l.frame_owner, row->frame_owner);
	ck_assert_int_eq(l.frame_read, row->frame_read);
	ck_assert_int_eq(l.code_qualname, row->code_qualname);
	ck_assert_int_eq(l.code_adaptive, row->code_adaptive);
	ck_assert_int_eq(l.code_firstlineno, row->code_firstlineno);
	ck_assert_int_eq(l.unicode_ascii_data, row->unicode_ascii_data);
	ck_assert_int_eq(l.unicode_compact_data, row->unicode_compact_data);
	ck_assert_int_eq(l.ts_exc, row->ts_exc);
	ck_assert_ptr_nonnull(strstr(l.source, "_Py_DebugOffsets"));
	/* a changed value is taken from the interpreter, not the table */
	put64(b, 200, 168);
	ck_assert_int_eq(py_layout_from_debug(b, sizeof(b), 0, &l, err, sizeof(err)), 0);
	ck_assert_int_eq(l.ts_thread_id, 168);

	fake_debug(b);
	memcpy(b, "xdebugpz", 8);
	ck_assert_int_eq(py_layout_from_debug(b, sizeof(b), 0, &l, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "cookie"));
	fake_debug(b);
	put64(b, 8, 0x030e00f0);
	ck_assert_int_eq(py_layout_from_debug(b, sizeof(b), 0, &l, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "3.14"));
	fake_debug(b);
	ck_assert_int_eq(py_layout_from_debug(b, sizeof(b), 0x030c00f0, &l, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "disagrees"));
	fake_debug(b);
	put64(b, 16, 1);
	ck_assert_int_eq(py_layout_from_debug(b, sizeof(b), 0, &l, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "free-threaded"));
	fake_debug(b);
	put64(b, 224, 0);
	ck_assert_int_eq(py_layout_from_debug(b, sizeof(b), 0, &l, err, sizeof(err)), -1);
	fake_debug(b);
	put64(b, 232, 4096); /* frame.previous beyond the frame buffer */
	ck_assert_int_eq(py_layout_from_debug(b, sizeof(b), 0, &l, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "+232"));
	ck_assert_int_eq(py_layout_from_debug(b, 100, 0, &l, err, sizeof(err)), -1);
}
END_TEST

START_TEST(version_from_path)
{
	int a = 0, b = 0;

	ck_assert_int_eq(py_version_from_path("/usr/bin/python3.11", &a, &b), 0);
	ck_assert_int_eq(a, 3);
	ck_assert_int_eq(b, 11);
	ck_assert_int_eq(py_version_from_path("/x/lib/libpython3.12.so.1.0", &a, &b), 0);
	ck_assert_int_eq(b, 12);
	ck_assert_int_eq(py_version_from_path("/opt/python3.10/bin/python3", &a, &b), -1);
	ck_assert_int_eq(py_version_from_path("python", &a, &b), -1);
}
END_TEST

/* ---- maps and names ---- */

START_TEST(maps_parse)
{
	struct py_mapping m;

	ck_assert_int_eq(py_maps_parse("00400000-0041f000 r--p 00000000 fe:01 1234   "
				       "/usr/bin/python3.11\n", &m), 0);
	ck_assert_uint_eq(m.start, 0x400000);
	ck_assert_uint_eq(m.end, 0x41f000);
	ck_assert_uint_eq(m.off, 0);
	ck_assert_str_eq(m.perms, "r--p");
	ck_assert_str_eq(m.path, "/usr/bin/python3.11");
	ck_assert_int_eq(py_maps_parse("7f00-7f10 rw-p 00001000 00:00 0 \n", &m), 0);
	ck_assert_str_eq(m.path, "");
	ck_assert_uint_eq(m.off, 0x1000);
	ck_assert_int_eq(py_maps_parse("7f00-7f10 r-xp 0002f000 08:01 99 /a dir/lib x.so (deleted)\n", &m), 0);
	ck_assert_str_eq(m.path, "/a dir/lib x.so (deleted)");
	ck_assert_int_eq(py_maps_parse("garbage\n", &m), -1);
}
END_TEST

START_TEST(python_names)
{
	ck_assert(py_is_python_name("/usr/bin/python3.11"));
	ck_assert(py_is_python_name("/usr/bin/python3"));
	ck_assert(py_is_python_name("python"));
	ck_assert(py_is_python_name("/opt/lib/libpython3.12.so.1.0"));
	ck_assert(!py_is_python_name("/build/plugins/python/python.so"));
	ck_assert(!py_is_python_name("/usr/bin/pythonista"));
	ck_assert(!py_is_python_name("/usr/lib/libpthread.so.0"));
	ck_assert(!py_is_python_name("/usr/bin/bash"));
}
END_TEST

/* ---- objects laid out in our own memory, read with process_vm_readv ---- */

/* CPython 3.11 object layouts (offsets of the table row). */
struct fake_type {
	uint64_t refcnt, ob_type, ob_size;
	const char *tp_name;
};

struct fake_str311 {
	uint64_t refcnt, ob_type, length, hash;
	uint32_t state, pad;
	uint64_t wstr;
	char data[64]; /* at 48: compact ASCII data */
};

struct fake_ustr311 {
	uint64_t refcnt, ob_type, length, hash;
	uint32_t state, pad;
	uint64_t wstr, utf8_length, utf8, wstr_length;
	uint16_t data[16]; /* at 72: compact UCS2 data */
};

struct fake_bytes {
	uint64_t refcnt, ob_type, ob_size, hash;
	uint8_t data[16]; /* at 32 */
};

START_TEST(read_objects)
{
	const struct py_layout *l = py_layout_lookup(3, 11);
	static struct fake_type code_type = { 1, 0, 0, "code" };
	static struct fake_type str_type = { 1, 0, 0, "str" };
	static struct fake_str311 name, file;
	static struct fake_ustr311 uname;
	static struct fake_bytes lt;
	static uint8_t code[200];
	struct py_code c;
	uint64_t ct = 0, v;
	char buf[64];
	pid_t me = getpid();

	ck_assert_int_eq(offsetof(struct fake_str311, data), l->unicode_ascii_data);
	ck_assert_int_eq(offsetof(struct fake_ustr311, data), l->unicode_compact_data);
	ck_assert_int_eq(offsetof(struct fake_bytes, data), l->bytes_data);
	name.ob_type = (uint64_t)(uintptr_t)&str_type;
	name.length = 5;
	name.state = (1u << 2) | (1u << 5) | (1u << 6); /* kind 1, compact, ascii */
	memcpy(name.data, "Net.f", 6);
	file = name;
	file.length = 7;
	memcpy(file.data, "/m.py\0\0", 8);
	memcpy(file.data, "/net.py", 7);
	/* "Å→" in UCS2 */
	uname.ob_type = name.ob_type;
	uname.length = 2;
	uname.state = (2u << 2) | (1u << 5);
	uname.data[0] = 0xc5;
	uname.data[1] = 0x2192;
	lt.ob_size = 2;
	lt.data[0] = 0x80 | (13 << 3) | 0;
	lt.data[1] = 2; /* +1 */
	memset(code, 0, sizeof(code));
	v = (uint64_t)(uintptr_t)&code_type;
	memcpy(code + l->ob_type, &v, 8);
	v = (uint64_t)(uintptr_t)&name;
	memcpy(code + l->code_qualname, &v, 8);
	memcpy(code + l->code_name, &v, 8);
	v = (uint64_t)(uintptr_t)&file;
	memcpy(code + l->code_filename, &v, 8);
	v = (uint64_t)(uintptr_t)&lt;
	memcpy(code + l->code_linetable, &v, 8);
	int32_t first = 41;
	memcpy(code + l->code_firstlineno, &first, 4);

	ck_assert_int_eq(py_read_str(me, l, (uint64_t)(uintptr_t)&name, buf, sizeof(buf)), 5);
	ck_assert_str_eq(buf, "Net.f");
	ck_assert_int_eq(py_read_str(me, l, (uint64_t)(uintptr_t)&uname, buf, sizeof(buf)), 5);
	ck_assert_str_eq(buf, "\xc3\x85\xe2\x86\x92");
	ck_assert_int_eq(py_read_tp_name(me, l, (uint64_t)(uintptr_t)&code_type, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "code");

	ck_assert_int_eq(py_read_code(me, l, (uint64_t)(uintptr_t)code, &ct, &c), 0);
	ck_assert_uint_eq(ct, (uint64_t)(uintptr_t)&code_type);
	ck_assert_str_eq(c.qualname, "Net.f");
	ck_assert_str_eq(c.file, "/net.py");
	ck_assert_int_eq(c.firstlineno, 41);
	ck_assert_uint_eq(c.lt_len, 2);
	ck_assert_int_eq(py_addr2line(11, c.linetable, c.lt_len, c.firstlineno, 0), 42);
	ck_assert(py_code_same(me, l, (uint64_t)(uintptr_t)code, &c));
	v = (uint64_t)(uintptr_t)&uname;
	memcpy(code + l->code_qualname, &v, 8);
	ck_assert(!py_code_same(me, l, (uint64_t)(uintptr_t)code, &c));
	py_code_free(&c);

	/* not a code object: refused, by name and then by the cached type */
	v = (uint64_t)(uintptr_t)&str_type;
	memcpy(code + l->ob_type, &v, 8);
	ck_assert_int_eq(py_read_code(me, l, (uint64_t)(uintptr_t)code, &ct, &c), -EINVAL);
	ct = 0;
	ck_assert_int_eq(py_read_code(me, l, (uint64_t)(uintptr_t)code, &ct, &c), -EINVAL);
	ck_assert_uint_eq(ct, 0);
	/* unreadable address */
	ck_assert_int_lt(py_read_u64(me, 8, &v), 0);
	ck_assert_int_eq(py_read_u64(me, 0, &v), -EFAULT);
}
END_TEST

/* ---- aggregation ---- */

START_TEST(agg_folded)
{
	struct py_agg *a = py_agg_new(0);
	uint32_t f_mod = py_agg_frame(a, "<module>", "/t/abc.py", 22);
	uint32_t f_a = py_agg_frame(a, "a", "/t/abc.py", 15);
	uint32_t f_c = py_agg_frame(a, "c", "/t/abc.py", 8);
	uint32_t f_n = py_agg_frame(a, "memcpy", NULL, 0);
	uint32_t s1[] = { f_mod, f_a, f_c };
	uint32_t s2[] = { f_mod, f_a, f_c, f_n };
	char buf[256];

	ck_assert_uint_eq(py_agg_frame(a, "a", "/t/abc.py", 15), f_a);
	ck_assert_uint_ne(py_agg_frame(a, "a", "/t/abc.py", 16), f_a);
	uint32_t id1 = py_agg_stack(a, 10, 11, PY_ST_CPU, s1, 3, "main");
	uint32_t id2 = py_agg_stack(a, 10, 11, PY_ST_IDLE, s1, 3, "main");
	uint32_t id3 = py_agg_stack(a, 10, 11, PY_ST_CPU, s2, 4, "main");

	ck_assert_uint_ne(id1, id2);
	ck_assert_uint_eq(py_agg_stack(a, 10, 11, PY_ST_CPU, s1, 3, "main"), id1);
	py_agg_folded(a, id1, true, buf, sizeof(buf));
	ck_assert_str_eq(buf, "<module> (/t/abc.py:22);a (/t/abc.py:15);c (/t/abc.py:8)");
	py_agg_folded(a, id3, false, buf, sizeof(buf));
	ck_assert_str_eq(buf, "<module> (/t/abc.py);a (/t/abc.py);c (/t/abc.py);memcpy");
	/* truncation keeps a terminated prefix */
	ck_assert_uint_eq(py_agg_folded(a, id1, true, buf, 9), 8);
	ck_assert_str_eq(buf, "<module>");
	py_agg_free(a);
}
END_TEST

struct emitted {
	int n;
	uint64_t total;
	uint32_t last_pid;
};

static void count_emit(void *arg, uint32_t stack, uint32_t pid, uint32_t tid,
		       unsigned state, const char *comm, uint64_t delta)
{
	struct emitted *e = arg;

	(void)stack;
	(void)tid;
	(void)state;
	(void)comm;
	e->n++;
	e->total += delta;
	e->last_pid = pid;
}

START_TEST(agg_table_and_deltas)
{
	struct py_agg *a = py_agg_new(0);
	uint32_t m = py_agg_frame(a, "main", "/t.py", 1);
	uint32_t f = py_agg_frame(a, "f", "/t.py", 5);
	uint32_t g = py_agg_frame(a, "g", "/t.py", 9);
	uint32_t r1[] = { m, f, g };    /* main;f;g  x60 cpu */
	uint32_t r2[] = { m, f };       /* main;f    x30 idle */
	uint32_t r3[] = { m, f, f };    /* recursion main;f;f x10 cpu */
	uint32_t rc[] = { m, f, g };    /* cuda stacks are not in the table */
	struct py_func_row rows[8];
	uint64_t all = 0;
	struct emitted e = { 0 };
	char text[2048];

	py_agg_add(a, py_agg_stack(a, 7, 7, PY_ST_CPU, r1, 3, "t"), 60);
	py_agg_add(a, py_agg_stack(a, 7, 8, PY_ST_IDLE, r2, 2, "w"), 30);
	py_agg_add(a, py_agg_stack(a, 7, 7, PY_ST_CPU, r3, 3, "t"), 10);
	py_agg_add(a, py_agg_stack(a, 7, 7, PY_ST_CUDA, rc, 3, "t"), 1000);
	py_agg_add(a, py_agg_stack(a, 9, 9, PY_ST_CPU, r1, 3, "u"), 5);

	ck_assert_uint_eq(py_agg_top(a, 7, 8, rows, &all), 3);
	ck_assert_uint_eq(all, 100);
	ck_assert_str_eq(rows[0].func, "g");
	ck_assert_uint_eq(rows[0].self, 60);
	ck_assert_uint_eq(rows[0].total, 60);
	ck_assert_uint_eq(rows[0].self_cpu, 60);
	ck_assert_str_eq(rows[1].func, "f");
	ck_assert_uint_eq(rows[1].self, 40);     /* 30 idle + 10 recursive */
	ck_assert_uint_eq(rows[1].total, 100);   /* counted once per stack */
	ck_assert_uint_eq(rows[1].self_cpu, 10);
	ck_assert(rows[1].total_pct > 99.99 && rows[1].total_pct < 100.01);
	ck_assert_str_eq(rows[2].func, "main");
	ck_assert_uint_eq(rows[2].self, 0);
	ck_assert_uint_eq(py_agg_top(a, 7, 1, rows, NULL), 1);

	py_agg_report(a, 7, 8, text, sizeof(text));
	ck_assert_ptr_nonnull(strstr(text, "pid 7, 100 samples"));
	ck_assert_ptr_nonnull(strstr(text, "        60  60.00%         60  60.00%  100.0%  g (/t.py)"));
	ck_assert_ptr_nonnull(strstr(text, "        40  40.00%        100 100.00%   25.0%  f (/t.py)"));

	py_agg_emit(a, 7, count_emit, &e);
	ck_assert_int_eq(e.n, 4);
	ck_assert_uint_eq(e.total, 1100);
	memset(&e, 0, sizeof(e));
	py_agg_emit(a, 7, count_emit, &e); /* nothing new */
	ck_assert_int_eq(e.n, 0);
	py_agg_add(a, py_agg_stack(a, 7, 7, PY_ST_CPU, r1, 3, "t"), 2);
	py_agg_emit(a, 0, count_emit, &e);
	ck_assert_int_eq(e.n, 2); /* the grown stack and pid 9's */
	ck_assert_uint_eq(e.total, 7);

	py_agg_forget(a, 7);
	ck_assert_uint_eq(py_agg_top(a, 7, 8, rows, &all), 0);
	ck_assert_uint_eq(all, 0);
	ck_assert_uint_eq(py_agg_n_stacks(a), 1);
	ck_assert_uint_eq(py_agg_top(a, 9, 8, rows, &all), 3);
	ck_assert_uint_eq(all, 5);
	py_agg_free(a);
}
END_TEST

START_TEST(agg_bound)
{
	struct py_agg *a = py_agg_new(3);
	uint32_t ids[4];
	char buf[128];
	uint32_t s;

	for (int i = 0; i < 4; i++) {
		char n[8];

		snprintf(n, sizeof(n), "f%d", i);
		ids[i] = py_agg_frame(a, n, "/x.py", i);
	}
	for (int i = 0; i < 3; i++)
		py_agg_add(a, py_agg_stack(a, 1, 1, PY_ST_CPU, &ids[i], 1, NULL), 1);
	s = py_agg_stack(a, 1, 1, PY_ST_CPU, &ids[3], 1, NULL);
	ck_assert_uint_ne(s, UINT32_MAX);
	py_agg_folded(a, s, true, buf, sizeof(buf));
	ck_assert_str_eq(buf, "[other stacks]");
	/* the fourth stack went to the overflow stack: bound is exceeded by
	 * at most that one */
	ck_assert_uint_eq(py_agg_n_stacks(a), 4);
	ck_assert_uint_eq(py_agg_stack(a, 1, 1, PY_ST_CPU, &ids[2], 1, NULL),
			  py_agg_stack(a, 1, 1, PY_ST_CPU, &ids[2], 1, NULL));
	py_agg_free(a);
}
END_TEST

START_TEST(map_ops)
{
	struct py_map m = { 0 };
	struct py_map_it it = { 0 };
	uint32_t seen = 0;
	uint64_t k;
	void *v;

	for (uintptr_t i = 1; i <= 5000; i++)
		ck_assert_int_eq(py_map_put(&m, i * 7919, (void *)(i * 2)), 0);
	ck_assert_uint_eq(py_map_count(&m), 5000);
	for (uintptr_t i = 1; i <= 5000; i++)
		ck_assert_ptr_eq(py_map_get(&m, i * 7919), (void *)(i * 2));
	ck_assert_ptr_null(py_map_get(&m, 3));
	for (uintptr_t i = 1; i <= 5000; i += 2)
		ck_assert_ptr_eq(py_map_del(&m, i * 7919), (void *)(i * 2));
	ck_assert_ptr_null(py_map_del(&m, 7919));
	ck_assert_uint_eq(py_map_count(&m), 2500);
	while (py_map_next(&m, &it, &k, &v)) {
		ck_assert_uint_eq(k % 7919, 0);
		ck_assert_uint_eq((k / 7919) % 2, 0);
		seen++;
	}
	ck_assert_uint_eq(seen, 2500);
	/* reinsert after deletes, replace */
	for (uintptr_t i = 1; i <= 5000; i += 2)
		ck_assert_int_eq(py_map_put(&m, i * 7919, (void *)i), 0);
	ck_assert_int_eq(py_map_put(&m, 2 * 7919, (void *)99), 0);
	ck_assert_uint_eq(py_map_count(&m), 5000);
	ck_assert_ptr_eq(py_map_get(&m, 2 * 7919), (void *)99);
	ck_assert_ptr_eq(py_map_get(&m, 3 * 7919), (void *)3);
	py_map_free(&m);
	ck_assert_ptr_null(py_map_get(&m, 1));
}
END_TEST

/* ---- CUDA join ---- */

#define MS 1000000ull
#define T0 1000000000ull /* 1 s */

/* Synthetic BPF bookkeeping of the threads, as read at `read`. */
struct fake_off {
	uint32_t tid;
	struct py_offhist h;
	uint64_t cur_out, read;
	int calls;
};

static void off_add(struct fake_off *f, uint64_t out, uint64_t in)
{
	f->h.out[f->h.pos % PY_OFFHIST] = out;
	f->h.in[f->h.pos % PY_OFFHIST] = in;
	f->h.pos++;
}

static int fake_off_at(void *arg, uint32_t tid, uint64_t t, uint64_t *start)
{
	struct fake_off *f = arg;

	for (; f->tid; f++)
		if (f->tid == tid) {
			f->calls++;
			return pyj_off_at(&f->h, f->cur_out, false, f->read, t, start);
		}
	return -1;
}

START_TEST(join_off_at)
{
	struct py_offhist h = { 0 };
	uint64_t start = 0;

	/* nothing known */
	ck_assert_int_eq(pyj_off_at(NULL, 0, false, T0, T0 - MS, &start), -1);
	ck_assert_int_eq(pyj_off_at(&h, 0, false, T0, T0 - MS, &start), -1);
	/* off since T0 - 5 ms, still off at the read (T0) */
	ck_assert_int_eq(pyj_off_at(&h, T0 - 5 * MS, false, T0, T0 - MS, &start), 1);
	ck_assert_uint_eq(start, T0 - 5 * MS);
	/* ... but nothing can be said after the read */
	ck_assert_int_eq(pyj_off_at(&h, T0 - 5 * MS, false, T0, T0 + MS, &start), -1);
	/* completed periods: inside one, between two, before the oldest */
	/* PY_OFFHIST + 8 periods [i*10, i*10+4) ms: the ring wraps and the
	 * PY_OFFHIST newest are kept */
	for (uint64_t i = 0; i < PY_OFFHIST + 8; i++)
		h.out[h.pos % PY_OFFHIST] = T0 + i * 10 * MS,
		h.in[h.pos % PY_OFFHIST] = T0 + i * 10 * MS + 4 * MS, h.pos++;
	uint64_t last = T0 + (PY_OFFHIST + 7) * 10 * MS, rd = last + 100 * MS;

	ck_assert_int_eq(pyj_off_at(&h, 0, false, rd, last + 2 * MS, &start), 1);
	ck_assert_uint_eq(start, last);
	ck_assert_int_eq(pyj_off_at(&h, 0, false, rd, last + 5 * MS, &start), 0);
	ck_assert_int_eq(pyj_off_at(&h, 0, false, rd, T0 + 80 * MS, &start), 1);
	ck_assert_uint_eq(start, T0 + 80 * MS);
	/* periods 0..7 were overwritten: 75 ms is before the history */
	ck_assert_int_eq(pyj_off_at(&h, 0, false, rd, T0 + 75 * MS, &start), -1);
	/* a preempted thread is runnable, not waiting: not blocked */
	h.preempted[((PY_OFFHIST + 7) % PY_OFFHIST) / 64] |= 1ULL << ((PY_OFFHIST + 7) % 64);
	ck_assert_int_eq(pyj_off_at(&h, 0, false, rd, last + 2 * MS, &start), 0);
	ck_assert_int_eq(pyj_off_at(&h, 0, false, rd, T0 + 80 * MS, &start), 1);
	ck_assert_int_eq(pyj_off_at(&h, last + 50 * MS, true, rd, last + 60 * MS, &start), 0);
	ck_assert_int_eq(pyj_off_at(&h, last + 50 * MS, false, rd, last + 60 * MS, &start), 1);
}
END_TEST

START_TEST(join_cross_thread)
{
	/* pid 100: main thread 100 (Python) runs forward (stack 1), then
	 * blocks in backward() at T0+5 ms (idle walk: stack 2) until +9 ms,
	 * blocks again at +11..+14 ms (walk skipped: < a period after the
	 * last), runs, and blocks at +40..+50 ms where the walk found no
	 * Python frame.
	 * Thread 101 (Python, same pid) sleeps in a loader (stack 3) since
	 * T0+2 ms. Thread 200 of pid 100 has no Python thread state (the
	 * autograd engine's). pid 999 has thread 300, also not Python. */
	struct pyj_hist main_h = { 0 }, load_h = { 0 };
	struct fake_off off[4] = { { .tid = 100 }, { .tid = 101 }, { .tid = 0 } };
	struct pyj_thread thr[2] = { { 100, 100, &main_h }, { 100, 101, &load_h } };
	struct pyj_limits lim = { .own_max_ns = 1000 * MS, .period_ns = 10 * MS };
	struct pyj_result r;

	pyj_note(&main_h, T0, 1, PYJ_CPU);
	pyj_note(&main_h, T0 + 5 * MS + 20000, 2, PYJ_IDLE);
	pyj_note(&main_h, T0 + 30 * MS, 1, PYJ_CPU);
	off_add(&off[0], T0 + 5 * MS, T0 + 9 * MS);
	off_add(&off[0], T0 + 11 * MS, T0 + 14 * MS);
	off_add(&off[0], T0 + 40 * MS, T0 + 50 * MS);
	off[0].read = T0 + 60 * MS;
	off[1].cur_out = T0 + 2 * MS; /* loader: off since +2 ms, still */
	pyj_note(&load_h, T0 + 2 * MS + 10000, 3, PYJ_IDLE);
	off[1].read = T0 + 60 * MS;

	/* the main thread's own launch in forward: its own sample */
	pyj_join(100, 100, T0 + 3 * MS, &main_h, true, thr, 2, fake_off_at, NULL, off, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_OWN);
	ck_assert_uint_eq(r.stack, 1);
	/* autograd thread launching while main is blocked in backward():
	 * main's walk (+5.02 ms) is newer than the loader's (+2.01 ms) */
	pyj_join(100, 200, T0 + 7 * MS, NULL, false, thr, 2, fake_off_at, NULL, off, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_CROSS);
	ck_assert_uint_eq(r.stack, 2);
	ck_assert_uint_eq(r.donor, 100);
	/* the second block's walk was skipped by the rate limit: same stack */
	pyj_join(100, 200, T0 + 12 * MS, NULL, false, thr, 2, fake_off_at, NULL, off, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_CROSS);
	ck_assert_uint_eq(r.donor, 100);
	ck_assert_uint_eq(r.stack, 2);
	/* main running at +20.5 ms: only the loader is blocked */
	pyj_join(100, 200, T0 + 20 * MS + 500000, NULL, false, thr, 2, fake_off_at, NULL, off, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_CROSS);
	ck_assert_uint_eq(r.donor, 101);
	ck_assert_uint_eq(r.stack, 3);
	/* preempted in forward at +25 ms (walked: stack 1, on the preemption
	 * budget), then blocked at +27..+29 ms, walked (stack 2: blocking has
	 * its own budget); the preempted stack is never lent */
	pyj_note(&main_h, T0 + 25 * MS + 10000, 1, PYJ_PREEMPT);
	off_add(&off[0], T0 + 25 * MS, T0 + 26 * MS);
	off[0].h.preempted[((off[0].h.pos - 1) % PY_OFFHIST) / 64] |=
		1ULL << ((off[0].h.pos - 1) % 64);
	pyj_note(&main_h, T0 + 27 * MS + 10000, 2, PYJ_IDLE);
	off_add(&off[0], T0 + 27 * MS, T0 + 29 * MS);
	pyj_join(100, 200, T0 + 25 * MS + 500000, NULL, false, thr, 2, fake_off_at, NULL, off, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_CROSS);
	ck_assert_uint_eq(r.donor, 101); /* main only preempted: the loader */
	pyj_join(100, 200, T0 + 28 * MS, NULL, false, thr, 2, fake_off_at, NULL, off, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_CROSS);
	ck_assert_uint_eq(r.donor, 100);
	ck_assert_uint_eq(r.stack, 2);
	/* the +40 ms block had no walk of its own (a period after the last):
	 * main's old backward stack is not trusted; the loader's is */
	pyj_join(100, 200, T0 + 45 * MS, NULL, false, thr, 2, fake_off_at, NULL, off, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_CROSS);
	ck_assert_uint_eq(r.donor, 101);
	/* after the read: unknown, nothing joined */
	off[1].cur_out = 0;
	pyj_join(100, 200, T0 + 70 * MS, NULL, false, thr, 2, fake_off_at, NULL, off, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_NONE);
	ck_assert_uint_eq(r.stack, UINT32_MAX);
	ck_assert_int_eq(r.why, PYJ_WHY_UNKNOWN);
	off[1].cur_out = T0 + 2 * MS;
	/* another process's non-Python thread: never pid 100's stacks */
	off[0].calls = off[1].calls = 0;
	pyj_join(999, 300, T0 + 10 * MS, NULL, false, thr, 2, fake_off_at, NULL, off, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_NONE);
	ck_assert_int_eq(r.why, PYJ_WHY_NODONOR);
	ck_assert_int_eq(off[0].calls + off[1].calls, 0);
	/* a Python thread without a recent sample of its own is not lent
	 * another thread's stack */
	pyj_join(100, 102, T0 + 10 * MS, NULL, true, thr, 2, fake_off_at, NULL, off, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_NONE);
	ck_assert_int_eq(r.why, PYJ_WHY_PYTHON);
	/* without off-CPU bookkeeping (idle = false): no cross-thread join */
	pyj_join(100, 200, T0 + 10 * MS, NULL, false, thr, 2, NULL, NULL, NULL, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_NONE);
}
END_TEST

START_TEST(join_own_thread)
{
	struct pyj_hist h = { 0 };
	struct pyj_limits lim = { .own_max_ns = 1000 * MS, .period_ns = 10 * MS };
	struct pyj_result r;

	/* a launch before the thread's first sample: the first one after it,
	 * if within a period */
	pyj_note(&h, T0 + 8 * MS, 7, PYJ_CPU);
	pyj_join(1, 1, T0, &h, true, NULL, 0, NULL, NULL, NULL, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_OWN_AFTER);
	ck_assert_uint_eq(r.stack, 7);
	pyj_join(1, 1, T0 - 5 * MS, &h, true, NULL, 0, NULL, NULL, NULL, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_NONE);
	/* a newer sample (consumed before the launch) does not hide the one
	 * before the launch; records of two CPUs may come out of order */
	pyj_note(&h, T0 + 30 * MS, 9, PYJ_CPU);
	pyj_note(&h, T0 + 18 * MS, 8, PYJ_CPU);
	pyj_note(&h, T0 + 25 * MS, 5, PYJ_IDLE);
	pyj_join(1, 1, T0 + 29 * MS, &h, true, NULL, 0, NULL, NULL, NULL, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_OWN);
	ck_assert_uint_eq(r.stack, 8);
	/* a walk as it was preempted (runnable, so not sampled) is where it
	 * ran, as a sample; a walk as it blocked is not */
	pyj_note(&h, T0 + 28 * MS, 6, PYJ_PREEMPT);
	pyj_join(1, 1, T0 + 29 * MS, &h, true, NULL, 0, NULL, NULL, NULL, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_OWN);
	ck_assert_uint_eq(r.stack, 6);
	/* older than own_max_ns: not joined */
	pyj_join(1, 1, T0 + 1031 * MS, &h, true, NULL, 0, NULL, NULL, NULL, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_NONE);
	/* only the last PYJ_POINTS are kept */
	ck_assert(pyj_reaches(&h, T0 - 5 * MS));
	for (uint32_t i = 0; i < PYJ_POINTS; i++)
		pyj_note(&h, T0 + (100 + i) * MS, 100 + i, PYJ_CPU);
	ck_assert_ptr_null(pyj_before(&h, T0 + 99 * MS, PYJ_CPU | PYJ_IDLE));
	ck_assert_uint_eq(pyj_before(&h, T0 + 110 * MS, PYJ_CPU)->stack, 110);
	ck_assert_uint_eq(pyj_after(&h, T0 + 110 * MS, PYJ_CPU)->stack, 111);
	ck_assert(!pyj_reaches(&h, T0 + 99 * MS));
	ck_assert(pyj_reaches(&h, T0 + 100 * MS));
	/* joined after the history moved past the launch: said so */
	pyj_join(1, 1, T0 + 50 * MS, &h, true, NULL, 0, NULL, NULL, NULL, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_NONE);
	ck_assert_int_eq(r.why, PYJ_WHY_LATE);
}
END_TEST

static int fake_blocked(void *arg, uint32_t tid, uint64_t a, uint64_t b)
{
	struct fake_off *f = arg;

	for (; f->tid; f++)
		if (f->tid == tid)
			return pyj_blocked_in(&f->h, f->cur_out, false, f->read, a, b);
	return -1;
}

/* A thread's own sample is not its stack at a launch when the thread
 * blocked in between (it may have left that code): the helper's main
 * thread sampled in backward(), blocked there, came back and launched in
 * the next forward() before its next sample. */
START_TEST(join_own_moved)
{
	static struct pyj_hist h;
	struct fake_off off[2] = { { .tid = 1 }, { .tid = 0 } };
	struct pyj_limits lim = { .own_max_ns = 1000 * MS, .period_ns = 10 * MS };
	struct pyj_result r;

	memset(&h, 0, sizeof(h));
	pyj_note(&h, T0, 1, PYJ_CPU);               /* forward */
	pyj_note(&h, T0 + 20 * MS, 2, PYJ_CPU);     /* backward */
	off_add(&off[0], T0 + 21 * MS, T0 + 30 * MS); /* blocked in backward() */
	off_add(&off[0], T0 + 31 * MS, T0 + 32 * MS); /* preempted: no matter */
	off[0].h.preempted[0] |= 1ull << 1;
	off[0].read = T0 + 100 * MS;
	pyj_note(&h, T0 + 45 * MS, 3, PYJ_CPU);     /* the next forward */
	ck_assert_int_eq(pyj_blocked_in(&off[0].h, 0, false, off[0].read, T0 + 20 * MS,
					T0 + 35 * MS), 1);
	ck_assert_int_eq(pyj_blocked_in(&off[0].h, 0, false, off[0].read, T0 + 22 * MS,
					T0 + 35 * MS), 0);
	ck_assert_int_eq(pyj_blocked_in(&off[0].h, 0, false, off[0].read, T0 + 20 * MS,
					T0 + 200 * MS), -1);
	/* launch at +15 ms: +0 is the newest before, no block between */
	pyj_join(1, 1, T0 + 15 * MS, &h, true, NULL, 0, fake_off_at, fake_blocked, off, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_OWN);
	ck_assert_uint_eq(r.stack, 1);
	/* launch at +35 ms: the newest sample (+20, backward) is separated by
	 * the block; the next one (+45) is more than a period later */
	pyj_join(1, 1, T0 + 35 * MS, &h, true, NULL, 0, fake_off_at, fake_blocked, off, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_NONE);
	ck_assert_int_eq(r.why, PYJ_WHY_MOVED);
	/* launch at +40 ms: the next one (+45, no block between) is taken */
	pyj_join(1, 1, T0 + 40 * MS, &h, true, NULL, 0, fake_off_at, fake_blocked, off, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_OWN_AFTER);
	ck_assert_uint_eq(r.stack, 3);
	/* without the block query (idle = false): the newest sample, as before */
	pyj_join(1, 1, T0 + 35 * MS, &h, true, NULL, 0, NULL, NULL, NULL, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_OWN);
	ck_assert_uint_eq(r.stack, 2);
}
END_TEST

/* The history is kept in time order whatever order points come in, and
 * holds its last PYJ_POINTS across the ring's wrap. */
START_TEST(join_history_order)
{
	static struct pyj_hist h;
	const struct pyj_point *p;

	memset(&h, 0, sizeof(h));
	/* three passes over the ring; every 7th point is noted late, as a
	 * record of another CPU */
	for (uint32_t i = 0; i < 3 * PYJ_POINTS; i++) {
		uint64_t ts = T0 + (uint64_t)i * MS;

		if (i % 7 == 3)
			continue;
		pyj_note(&h, ts, i, i % 2 ? PYJ_IDLE : PYJ_CPU);
		if (i % 7 == 4)
			pyj_note(&h, ts - MS, i - 1, (i - 1) % 2 ? PYJ_IDLE : PYJ_CPU);
	}
	ck_assert_uint_eq(h.n, 3 * PYJ_POINTS);
	for (uint32_t i = 3 * PYJ_POINTS - PYJ_POINTS + 1; i < 3 * PYJ_POINTS; i++) {
		uint64_t ts = T0 + (uint64_t)i * MS;

		p = pyj_before(&h, ts, PYJ_CPU | PYJ_IDLE);
		ck_assert_ptr_nonnull(p);
		ck_assert_uint_eq(p->stack, i);
		p = pyj_after(&h, ts - 1, PYJ_CPU | PYJ_IDLE);
		ck_assert_uint_eq(p->stack, i);
		/* of a kind: the newest of it at or before */
		p = pyj_before(&h, ts, PYJ_IDLE);
		ck_assert_uint_eq(p->stack, i % 2 ? i : i - 1);
	}
	ck_assert_ptr_null(pyj_after(&h, T0 + 3 * PYJ_POINTS * MS, PYJ_CPU | PYJ_IDLE));
	ck_assert(!pyj_reaches(&h, T0 + (2 * PYJ_POINTS - 1) * MS));
	ck_assert(pyj_reaches(&h, T0 + 2 * PYJ_POINTS * MS));
}
END_TEST

/* A non-Python thread's launch joined after the blocked thread's walk at
 * that time was forgotten: "too late", not "no other thread walked". */
START_TEST(join_cross_late)
{
	static struct pyj_hist main_h;
	struct fake_off off[2] = { { .tid = 100 }, { .tid = 0 } };
	struct pyj_thread thr[1] = { { 100, 100, &main_h } };
	struct pyj_limits lim = { .own_max_ns = 1000 * MS, .period_ns = 10 * MS };
	struct pyj_result r;

	memset(&main_h, 0, sizeof(main_h));
	pyj_note(&main_h, T0 + 5 * MS, 2, PYJ_IDLE);
	off_add(&off[0], T0 + 5 * MS, T0 + 9 * MS);
	off[0].read = T0 + 10000 * MS;
	pyj_join(100, 200, T0 + 7 * MS, NULL, false, thr, 1, fake_off_at, NULL, off, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_CROSS);
	for (uint32_t i = 0; i < PYJ_POINTS; i++)
		pyj_note(&main_h, T0 + (20 + i) * MS, 1, PYJ_CPU);
	pyj_join(100, 200, T0 + 7 * MS, NULL, false, thr, 1, fake_off_at, NULL, off, &lim, &r);
	ck_assert_int_eq(r.how, PYJ_NONE);
	ck_assert_int_eq(r.why, PYJ_WHY_LATE);
	/* a thread with nothing kept before t and nothing forgotten: no donor */
	memset(&main_h, 0, sizeof(main_h));
	pyj_note(&main_h, T0 + 20 * MS, 1, PYJ_CPU);
	pyj_join(100, 200, T0 + 7 * MS, NULL, false, thr, 1, fake_off_at, NULL, off, &lim, &r);
	ck_assert_int_eq(r.why, PYJ_WHY_NODONOR);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("python");
	TCase *tc = tcase_create("pure");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, lines_310);
	tcase_add_test(tc, lines_311);
	tcase_add_test(tc, lines_312);
	tcase_add_test(tc, lines_313);
	tcase_add_test(tc, lines_edges);
	tcase_add_test(tc, layout_table);
	tcase_add_test(tc, debug_offsets);
	tcase_add_test(tc, version_from_path);
	tcase_add_test(tc, maps_parse);
	tcase_add_test(tc, python_names);
	tcase_add_test(tc, read_objects);
	tcase_add_test(tc, agg_folded);
	tcase_add_test(tc, agg_table_and_deltas);
	tcase_add_test(tc, agg_bound);
	tcase_add_test(tc, map_ops);
	tcase_add_test(tc, join_off_at);
	tcase_add_test(tc, join_cross_thread);
	tcase_add_test(tc, join_own_thread);
	tcase_add_test(tc, join_history_order);
	tcase_add_test(tc, join_cross_late);
	tcase_add_test(tc, join_own_moved);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
