/* SPDX-License-Identifier: MIT */
/*
 * CPython layouts. Every row below was printed by tools/pyoffsets-dump.c,
 * compiled against that CPython's own headers (Include/, Include/cpython/,
 * Include/internal/ with Py_BUILD_CORE) on x86-64 Linux, default (GIL)
 * build; the row's `source` names the exact release. The 3.11 row is the
 * same for Debian's 3.11.2 (/usr/include/python3.11) and 3.11.7. The
 * structs are internal and may change between minor versions only, which
 * is why the table is keyed by major.minor and every attach re-checks the
 * numbers against the live interpreter (pyproc.c: thread state ->
 * interpreter back-pointer, a code object's type name).
 *
 * For 3.13 the interpreter publishes _Py_DebugOffsets at the start of
 * _PyRuntime ("xdebugpy"): py_layout_from_debug() takes every offset it
 * carries from there and only the exception fields (which it lacks) and
 * the compact-unicode data offset from the 3.13 row.
 */
#include "pyoffsets.h"

#include <stdio.h>
#include <string.h>

#define NO_OFF PY_NO_OFF

static const struct py_layout layouts[] = {
	/* CPython 3.10.13, offsetof() on its own headers (tools/pyoffsets-dump.c) */
	{ .major = 3, .minor = 10,
	  .source = "offsetof() on CPython 3.10.13 headers",
	  .runtime_interp_head = 32, .interp_next = 0, .interp_threads_head = 8,
	  .ts_next = 8, .ts_interp = 16,
	  .ts_frame = 24, .ts_thread_id = 176, .tid_is_pthread = 1,
	  .cframe_current = NO_OFF,
	  .frame_code = 32, .frame_previous = 24, .frame_instr = 96,
	  .frame_owner = NO_OFF, .frame_read = 100,
	  .code_qualname = NO_OFF, .code_adaptive = NO_OFF,
	  .code_filename = 104, .code_name = 112, .code_firstlineno = 40,
	  .code_linetable = 120,
	  .bytes_size = 16, .bytes_data = 32,
	  .unicode_state = 32, .unicode_length = 16, .unicode_ascii_data = 48,
	  .unicode_compact_data = 72,
	  .ts_exc = 88, .ts_exc_tb = 104, .exc_is_type = 1,
	  .exc_traceback = 32, .ob_type = 8,
	  .type_name = 24 },
	/* CPython 3.11.7, offsetof() on its own headers (tools/pyoffsets-dump.c);
	 * identical for Debian's 3.11.2 */
	{ .major = 3, .minor = 11,
	  .source = "offsetof() on CPython 3.11.7 and Debian 3.11.2 headers",
	  .runtime_interp_head = 40, .interp_next = 0, .interp_threads_head = 16,
	  .ts_next = 8, .ts_interp = 16,
	  .ts_thread_id = 160, .tid_is_pthread = 0,
	  .ts_frame = 56, .cframe_current = 8,
	  .frame_code = 32, .frame_previous = 48, .frame_instr = 56,
	  .frame_owner = 69, .frame_read = 72,
	  .code_qualname = 128, .code_adaptive = 184,
	  .code_filename = 112, .code_name = 120, .code_firstlineno = 72,
	  .code_linetable = 136,
	  .bytes_size = 16, .bytes_data = 32,
	  .unicode_state = 32, .unicode_length = 16, .unicode_ascii_data = 48,
	  .unicode_compact_data = 72,
	  .ts_exc = 96, .ts_exc_tb = 112, .exc_is_type = 1,
	  .exc_traceback = 40, .ob_type = 8,
	  .type_name = 24 },
	/* CPython 3.12.1, offsetof() on its own headers (tools/pyoffsets-dump.c) */
	{ .major = 3, .minor = 12,
	  .source = "offsetof() on CPython 3.12.1 headers",
	  .runtime_interp_head = 40, .interp_next = 0, .interp_threads_head = 72,
	  .ts_next = 8, .ts_interp = 16,
	  .ts_thread_id = 144, .tid_is_pthread = 0,
	  .ts_frame = 56, .cframe_current = 0,
	  .frame_code = 0, .frame_previous = 8, .frame_instr = 56,
	  .frame_owner = 70, .frame_read = 72,
	  .code_qualname = 128, .code_adaptive = 192,
	  .code_filename = 112, .code_name = 120, .code_firstlineno = 68,
	  .code_linetable = 136,
	  .bytes_size = 16, .bytes_data = 32,
	  .unicode_state = 32, .unicode_length = 16, .unicode_ascii_data = 40,
	  .unicode_compact_data = 56,
	  .ts_exc = 96, .ts_exc_tb = NO_OFF, .exc_is_type = 0,
	  .exc_traceback = 40, .ob_type = 8,
	  .type_name = 24 },
	/* CPython 3.13.0, offsetof() on its own headers (tools/pyoffsets-dump.c).
	 * At attach the live _Py_DebugOffsets replace every field they carry. */
	{ .major = 3, .minor = 13,
	  .source = "offsetof() on CPython 3.13.0 headers",
	  .runtime_interp_head = 632, .interp_next = 7264, .interp_threads_head = 7344,
	  .ts_next = 8, .ts_interp = 16,
	  .ts_thread_id = 160, .tid_is_pthread = 0,
	  .ts_frame = 72, .cframe_current = NO_OFF,
	  .frame_code = 0, .frame_previous = 8, .frame_instr = 56,
	  .frame_owner = 70, .frame_read = 72,
	  .code_qualname = 128, .code_adaptive = 200,
	  .code_filename = 112, .code_name = 120, .code_firstlineno = 68,
	  .code_linetable = 136,
	  .bytes_size = 16, .bytes_data = 32,
	  .unicode_state = 32, .unicode_length = 16, .unicode_ascii_data = 40,
	  .unicode_compact_data = 56,
	  .ts_exc = 112, .ts_exc_tb = NO_OFF, .exc_is_type = 0,
	  .exc_traceback = 40, .ob_type = 8,
	  .type_name = 24 },
};

const struct py_layout *py_layout_lookup(int major, int minor)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].major == major && layouts[i].minor == minor)
			return &layouts[i];
	return NULL;
}

const char *py_layout_known(void)
{
	return "3.10, 3.11, 3.12, 3.13";
}

static uint64_t u64_at(const uint8_t *b, size_t off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

/* Offsets inside the 3.13 _Py_DebugOffsets (all uint64_t fields). */
enum {
	DO_COOKIE = 0, DO_VERSION = 8, DO_FREE_THREADED = 16,
	DO_RT_SIZE = 24, DO_RT_INTERP_HEAD = 40,
	DO_IS_SIZE = 48, DO_IS_NEXT = 64, DO_IS_THREADS_HEAD = 72,
	DO_TS_SIZE = 152, DO_TS_NEXT = 168, DO_TS_INTERP = 176,
	DO_TS_CURRENT_FRAME = 184, DO_TS_NATIVE_THREAD_ID = 200,
	DO_IF_SIZE = 224, DO_IF_PREVIOUS = 232, DO_IF_EXECUTABLE = 240,
	DO_IF_INSTR_PTR = 248, DO_IF_LOCALSPLUS = 256, DO_IF_OWNER = 264,
	DO_CO_SIZE = 272, DO_CO_FILENAME = 280, DO_CO_NAME = 288,
	DO_CO_QUALNAME = 296, DO_CO_LINETABLE = 304, DO_CO_FIRSTLINENO = 312,
	DO_CO_ADAPTIVE = 344,
	DO_OB_TYPE = 360, DO_TP_NAME = 376,
	DO_BY_SIZE = 520, DO_BY_SVAL = 528,
	DO_UN_STATE = 544, DO_UN_LENGTH = 552, DO_UN_ASCII_SIZE = 560,
};

/* The checks of a _Py_DebugOffsets header: size, cookie, version (3.13,
 * agreeing with Py_Version), a GIL build, non-zero struct sizes. 0 or -1
 * with err said. */
static int debug_header_ok(const uint8_t *buf, size_t len, uint64_t py_version,
			   char *err, size_t errlen)
{
	uint64_t v, f;

	if (len < PY_DEBUG_OFFSETS_313_SIZE) {
		snprintf(err, errlen, "debug offsets: %zu bytes read, %d needed",
			 len, PY_DEBUG_OFFSETS_313_SIZE);
		return -1;
	}
	if (memcmp(buf + DO_COOKIE, "xdebugpy", 8) != 0) {
		snprintf(err, errlen,
			 "no \"xdebugpy\" cookie at the start of _PyRuntime");
		return -1;
	}
	v = u64_at(buf, DO_VERSION);
	if ((v >> 24) != 3 || ((v >> 16) & 0xff) != 13) {
		snprintf(err, errlen,
			 "debug offsets are for %u.%u, this reader knows 3.13 only",
			 (unsigned)(v >> 24), (unsigned)((v >> 16) & 0xff));
		return -1;
	}
	if (py_version && (py_version >> 16) != (v >> 16)) {
		snprintf(err, errlen,
			 "debug offsets version 0x%llx disagrees with Py_Version 0x%llx",
			 (unsigned long long)v, (unsigned long long)py_version);
		return -1;
	}
	f = u64_at(buf, DO_FREE_THREADED);
	if (f != 0) {
		snprintf(err, errlen,
			 "free-threaded (no-GIL) build: its frames are not supported");
		return -1;
	}
	if (u64_at(buf, DO_RT_SIZE) == 0 || u64_at(buf, DO_TS_SIZE) == 0 ||
	    u64_at(buf, DO_IF_SIZE) == 0 || u64_at(buf, DO_CO_SIZE) == 0 ||
	    u64_at(buf, DO_IS_SIZE) == 0) {
		snprintf(err, errlen, "debug offsets carry a zero struct size");
		return -1;
	}
	return 0;
}

int py_layout_from_debug(const uint8_t *buf, size_t len, uint64_t py_version,
			 struct py_layout *out, char *err, size_t errlen)
{
	const struct py_layout *base = py_layout_lookup(3, 13);
	struct {
		int off;
		uint16_t *dst;
		uint64_t max; /* sanity bound of the value */
	} map[] = {
		{ DO_RT_INTERP_HEAD, &out->runtime_interp_head, 65535 },
		{ DO_IS_NEXT, &out->interp_next, 65535 },
		{ DO_IS_THREADS_HEAD, &out->interp_threads_head, 65535 },
		{ DO_TS_NEXT, &out->ts_next, 4096 },
		{ DO_TS_INTERP, &out->ts_interp, 4096 },
		{ DO_TS_CURRENT_FRAME, &out->ts_frame, 4096 },
		{ DO_TS_NATIVE_THREAD_ID, &out->ts_thread_id, 4096 },
		{ DO_IF_PREVIOUS, &out->frame_previous, PY_FRAME_BUF - 8 },
		{ DO_IF_EXECUTABLE, &out->frame_code, PY_FRAME_BUF - 8 },
		{ DO_IF_INSTR_PTR, &out->frame_instr, PY_FRAME_BUF - 8 },
		{ DO_IF_OWNER, &out->frame_owner, PY_FRAME_BUF - 1 },
		{ DO_IF_LOCALSPLUS, &out->frame_read, PY_FRAME_BUF },
		{ DO_CO_FILENAME, &out->code_filename, 4096 },
		{ DO_CO_NAME, &out->code_name, 4096 },
		{ DO_CO_QUALNAME, &out->code_qualname, 4096 },
		{ DO_CO_LINETABLE, &out->code_linetable, 4096 },
		{ DO_CO_FIRSTLINENO, &out->code_firstlineno, 4096 },
		{ DO_CO_ADAPTIVE, &out->code_adaptive, 4096 },
		{ DO_OB_TYPE, &out->ob_type, 64 },
		{ DO_TP_NAME, &out->type_name, 4096 },
		{ DO_BY_SIZE, &out->bytes_size, 64 },
		{ DO_BY_SVAL, &out->bytes_data, 64 },
		{ DO_UN_STATE, &out->unicode_state, 64 },
		{ DO_UN_LENGTH, &out->unicode_length, 64 },
		{ DO_UN_ASCII_SIZE, &out->unicode_ascii_data, 64 },
	};

	if (debug_header_ok(buf, len, py_version, err, errlen))
		return -1;
	*out = *base;
	out->source = "_Py_DebugOffsets of the running interpreter "
		      "(exception fields: CPython 3.13.0 headers)";
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		uint64_t x = u64_at(buf, (size_t)map[i].off);

		if (x > map[i].max) {
			snprintf(err, errlen,
				 "debug offset at +%d is %llu, beyond %llu",
				 map[i].off, (unsigned long long)x,
				 (unsigned long long)map[i].max);
			return -1;
		}
		*map[i].dst = (uint16_t)x;
	}
	/* PyCompactUnicodeObject = PyASCIIObject + utf8_length + utf8. */
	out->unicode_compact_data = out->unicode_ascii_data + 16;
	if (out->frame_read < out->frame_owner + 1)
		out->frame_read = PY_FRAME_BUF;
	return 0;
}

void py_layout_to_bpf(const struct py_layout *l, struct py_bpf_offsets *o)
{
	memset(o, 0, sizeof(*o));
	o->runtime_interp_head = l->runtime_interp_head;
	o->interp_next = l->interp_next;
	o->interp_threads_head = l->interp_threads_head;
	o->ts_next = l->ts_next;
	o->ts_frame = l->ts_frame;
	o->ts_thread_id = l->ts_thread_id;
	o->cframe_current = l->cframe_current;
	o->frame_code = l->frame_code;
	o->frame_previous = l->frame_previous;
	o->frame_instr = l->frame_instr;
	o->frame_owner = l->frame_owner;
	o->frame_read = l->frame_read;
	o->ts_exc = l->ts_exc;
	o->ts_exc_tb = l->ts_exc_tb;
	o->exc_traceback = l->exc_traceback;
	o->ob_type = l->ob_type;
	o->tid_is_pthread = l->tid_is_pthread;
	o->instr_is_int = l->minor == 10;
	/* FRAME_OWNED_BY_CSTACK = 3 in 3.12 and 3.13 (pycore_frame.h); 3.11
	 * has no shim frames. */
	o->owner_cstack = l->minor >= 12 ? 3 : 0xff;
	o->exc_is_type = l->exc_is_type;
}

int py_version_from_path(const char *path, int *major, int *minor)
{
	const char *base = strrchr(path, '/');
	const char *p;

	base = base ? base + 1 : path;
	p = strstr(base, "python");
	while (p) {
		int a, b, n = 0;

		if (sscanf(p, "python%d.%d%n", &a, &b, &n) == 2 && n > 0) {
			*major = a;
			*minor = b;
			return 0;
		}
		p = strstr(p + 1, "python");
	}
	return -1;
}
