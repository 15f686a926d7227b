/* SPDX-License-Identifier: MIT */
/*
 * ntcore python probe: CPython layouts. A table of the offsets of each
 * supported minor version (3.10 .. 3.13), each row saying where it came
 * from, and a reader of the interpreter's own _Py_DebugOffsets (3.13+).
 * Pure functions: no process access here.
 */
#ifndef NTCORE_PYOFFSETS_H
#define NTCORE_PYOFFSETS_H

#include <stddef.h>
#include <stdint.h>

#include "python.h"

struct py_layout {
	int major, minor;
	const char *source; /* where the numbers came from */
	uint16_t runtime_interp_head, interp_next, interp_threads_head;
	uint16_t ts_next, ts_interp, ts_frame, ts_thread_id;
	uint8_t tid_is_pthread;
	uint16_t cframe_current;
	uint16_t frame_code, frame_previous, frame_instr, frame_owner, frame_read;
	uint16_t code_qualname, code_adaptive, code_filename, code_name;
	uint16_t code_firstlineno, code_linetable;
	uint16_t bytes_size, bytes_data;
	uint16_t unicode_state, unicode_length, unicode_ascii_data;
	uint16_t unicode_compact_data;
	uint16_t ts_exc, ts_exc_tb;
	uint8_t exc_is_type;
	uint16_t exc_traceback, ob_type, type_name;
};

/* Size of the 3.13 _Py_DebugOffsets this reader understands. */
#define PY_DEBUG_OFFSETS_313_SIZE 584

/* The table row for major.minor, or NULL for a version we do not know. */
const struct py_layout *py_layout_lookup(int major, int minor);

/* "3.10, 3.11, 3.12, 3.13" */
const char *py_layout_known(void);

/*
 * Parse a 3.13 _Py_DebugOffsets (the first `len` bytes of _PyRuntime) into
 * *out, starting from the 3.13 table row for the fields it does not carry.
 * `py_version` is the Py_Version hex of the process (0 if unknown). Returns
 * 0, or -1 with a message in err.
 */
int py_layout_from_debug(const uint8_t *buf, size_t len, uint64_t py_version,
			 struct py_layout *out, char *err, size_t errlen);

/* The part of a layout the BPF walker needs. */
void py_layout_to_bpf(const struct py_layout *l, struct py_bpf_offsets *o);

/* Version from a file name: ".../python3.11", "libpython3.12.so.1.0". */
int py_version_from_path(const char *path, int *major, int *minor);

#endif
