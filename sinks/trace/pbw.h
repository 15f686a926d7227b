/* SPDX-License-Identifier: MIT */
/*
 * Protocol-buffers wire encoding straight into a growable buffer: varints,
 * tags, fixed64, doubles, length-delimited bytes and nested messages.
 *
 * Why by hand and not protobuf-c (which the grpc sink uses for OTLP): a
 * trace is a stream of small packets written once each; protobuf-c would
 * build a message struct per packet (allocations, then a sizing pass and a
 * packing pass) from code generated out of Perfetto's large .proto tree.
 * Writing the few fields we use directly into the output buffer costs a few
 * instructions per field and needs no generated code. Nested messages are
 * written in place: a one-byte length is reserved and, in the rare case the
 * message grows past 127 bytes, the body is moved right to make room, so
 * lengths stay minimal varints.
 */
#ifndef NTCORE_TRACE_PBW_H
#define NTCORE_TRACE_PBW_H

#include <stddef.h>
#include <stdint.h>

#include "jsonl.h" /* struct nt_buf */

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

void pbw_varint(struct nt_buf *b, uint64_t v);
static inline void pbw_tag(struct nt_buf *b, uint32_t field, uint32_t wire)
{
	pbw_varint(b, ((uint64_t)field << 3) | wire);
}
/* uint32/uint64/int32/int64/bool/enum fields (negative ints: pass the
 * two's complement, as protobuf does for int64). */
void pbw_uint(struct nt_buf *b, uint32_t field, uint64_t v);
void pbw_fixed64(struct nt_buf *b, uint32_t field, uint64_t v);
void pbw_double(struct nt_buf *b, uint32_t field, double v);
void pbw_bytes(struct nt_buf *b, uint32_t field, const void *p, size_t n);
static inline void pbw_str(struct nt_buf *b, uint32_t field, const char *s)
{
	pbw_bytes(b, field, s, __builtin_strlen(s));
}
/* Open a nested message; returns the offset pbw_end needs. */
size_t pbw_begin(struct nt_buf *b, uint32_t field);
void pbw_end(struct nt_buf *b, size_t mark);

/* Size of v as a varint (1..10). */
static inline size_t pbw_varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

#endif
