/* SPDX-License-Identifier: MIT */
/*
 * Small helpers shared by the CUDA detectors: JSON and XML text on the
 * kit's string builder (nt_sb), byte formatting, stack frames, monotonic
 * time and a /proc liveness check. Compiled into every detector and the
 * unit tests.
 */
#ifndef CUDA_DET_UTIL_H
#define CUDA_DET_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ntcore/kit/clock.h"
#include "ntcore/kit/sb.h"

/* Text is built with the kit's nt_sb (heap builders, nt_sb_init(b, 0)). */

/* Appends the C string s (NULL: "") as a quoted JSON string. */
static inline void sb_json_str(struct nt_sb *b, const char *s)
{
	nt_sb_json_str(b, s ? s : "", s ? strlen(s) : 0);
}
/* Appends `s` escaped for XML text/attribute content. */
void sb_xml_str(struct nt_sb *b, const char *s);
/* Stack texts are the cuda probe's: frames root (outermost) first,
 * separated by STACK_SEP, the probed API function last. The helpers below
 * count frames from that innermost end: frame 0 is the API function,
 * frame 1 its caller. */
#define STACK_SEP ';'
/* Appends a JSON array of strings, one per frame, root first as in the
 * text; at most max_frames, the innermost ones. */
void sb_json_stack(struct nt_sb *b, const char *stack, unsigned max_frames);

/* "1.50 MiB", "512 B", ...: writes into buf (at least 32 bytes). */
const char *fmt_bytes(uint64_t v, char *buf, size_t len);

/* Frame `idx` of a stack text copied into out ("" when absent). */
const char *stack_frame(const char *stack, unsigned idx, char *out, size_t len);
/* The innermost frame of a stack text (the probed API function). */
const char *stack_top(const char *stack, char *out, size_t len);
/* The caller's frame, "where in the user's code": the first frame after the
 * last CUDA frame among the innermost 16 (a CUDA API function: "cuda" or
 * "cu" followed by a capital; or a frame inside libcudart/libcuda); frames equal
 * to `skip` (a kernel's name: its host stub) or nvcc's __device_stub__
 * wrappers are passed over too. Frame 0 when nothing else is left. */
const char *stack_caller(const char *stack, const char *skip, char *out,
			 size_t len);
const char *stack_user_frame(const char *stack, char *out, size_t len);

/* A function name for a one-line message: the demangled name without its
 * parameter list ("ns::f(int, char*) const" -> "ns::f"); "(anonymous
 * namespace)" stays. Writes into buf, returns it. */
const char *short_fn(const char *fn, char *buf, size_t len);


/* Process state from /proc/PID/stat: 1 runs (any state but zombie/dead),
 * 0 gone or zombie. `proc_root` is normally "/proc" (tests pass another). */
int proc_alive(const char *proc_root, uint32_t pid);
/* The process's state letter (R, S, D, T, Z, ...), or 0 when gone. */
char proc_state(const char *proc_root, uint32_t pid);
/* utime+stime of the process in clock ticks, or -1. */
int64_t proc_cpu_ticks(const char *proc_root, uint32_t pid);

#endif
