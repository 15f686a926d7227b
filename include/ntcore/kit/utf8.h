/* SPDX-License-Identifier: MIT */
/*
 * ntcore plugin kit: UTF-8 checks and repair.
 *
 * Text from the kernel and from traced processes (comm, file names, Python
 * strings, kernel names) is bytes; JSON, OTLP and Prometheus want valid
 * UTF-8. Valid means RFC 3629: no overlong forms, no surrogates, nothing
 * past U+10FFFF. Lengths are exact: a NUL byte is U+0000 (pass
 * strnlen(s, size) for a NUL-padded array).
 */
#ifndef NTCORE_KIT_UTF8_H
#define NTCORE_KIT_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length (1..4) of the valid sequence starting at s, of at most n bytes;
 * 0 when it is invalid, cut short, or n is 0. */
size_t nt_utf8_seq(const void *s, size_t n);
/* Whether all n bytes are valid UTF-8. */
bool nt_utf8_valid(const void *s, size_t n);
/*
 * Copy n bytes of `in` to out[size] (size >= 1), each byte that does not
 * start a valid sequence replaced by U+FFFD; stops before a character that
 * would not fit, NUL-terminates, and returns the bytes written. 3 * n + 1
 * bytes always suffice.
 */
size_t nt_utf8_repair(const void *in, size_t n, char *out, size_t size);
/* Encode code point cp; returns its length, or 0 for a surrogate or a
 * value past U+10FFFF. */
size_t nt_utf8_encode(uint32_t cp, char out[4]);
/* The longest prefix of s[n], at most max bytes, that does not end in the
 * middle of a character: where to cut a name that must fit a field. */
size_t nt_utf8_cut(const void *s, size_t n, size_t max);

#endif /* NTCORE_KIT_UTF8_H */
