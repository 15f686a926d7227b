/* SPDX-License-Identifier: MIT */
/*
 * ntcore python probe: the line of an instruction, decoded from a code
 * object's co_linetable (pure functions, no process access).
 */
#ifndef NTCORE_PYLINE_H
#define NTCORE_PYLINE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Line of the instruction at byte offset `addr` (instruction index * 2)
 * in a code object whose co_linetable is `lt` (len bytes) and whose
 * co_firstlineno is `first`. `minor` selects the format: 10 (3.10's
 * (byte delta, line delta) pairs) or >= 11 (the location table of 3.11+).
 * Returns the line, `first` for a negative addr, or -1 when the table
 * says the instruction has no line or addr lies past the table.
 */
int py_addr2line(int minor, const uint8_t *lt, size_t len, int first, int addr);

#endif
