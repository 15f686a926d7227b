/* SPDX-License-Identifier: MIT */
/*
 * ntcore plugin kit: a bounded string builder for hot paths.
 *
 * Text is appended with typed calls (bytes, decimal and hex integers, JSON
 * string literals) that cost a copy, not an snprintf per field; printf is
 * there for the rare field that needs it (a double). The text is always
 * NUL-terminated.
 *
 * Bounded: `len` never passes `max`. Every append is all or nothing: one
 * that does not fit (the bound, or memory) appends nothing and sets
 * `failed`, after which every append is dropped, so the text is always a
 * prefix of what was asked that ends at a whole append. A caller renders a
 * record, checks `failed`, and rewinds to the record's start
 * (nt_sb_rewind) to keep only whole records.
 *
 *   struct nt_sb sb;
 *   nt_sb_init(&sb, 1 << 20);          // heap, grows up to 1 MiB of text
 *   size_t start = sb.len;
 *   nt_sb_puts(&sb, "{\"pid\":"); nt_sb_u64(&sb, pid);
 *   nt_sb_puts(&sb, ",\"comm\":"); nt_sb_json_str(&sb, comm, sizeof(comm));
 *   nt_sb_putc(&sb, '}');
 *   if (sb.failed) nt_sb_rewind(&sb, start);   // and count the drop
 *   ...
 *   nt_sb_fini(&sb);
 *
 * Ownership: a builder made by nt_sb_init owns its buffer (freed by
 * nt_sb_fini); one made by nt_sb_init_buf writes into the caller's array
 * and never allocates. Not thread-safe: one builder per thread.
 */
#ifndef NTCORE_KIT_SB_H
#define NTCORE_KIT_SB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct nt_sb {
	char *buf;   /* the text, NUL-terminated once anything is appended */
	size_t len;  /* bytes of text */
	size_t cap;  /* bytes of buf, the NUL included */
	size_t max;  /* len never passes this */
	bool owned;  /* buf is the builder's (heap), else the caller's */
	bool failed; /* an append did not fit; appends are dropped until rewind */
};

/* A heap builder of at most `max` bytes of text (0: no bound but memory).
 * Allocates nothing until the first append. */
void nt_sb_init(struct nt_sb *b, size_t max);
/* A builder writing into buf[size] (size >= 1): at most size - 1 bytes. */
void nt_sb_init_buf(struct nt_sb *b, char *buf, size_t size);
void nt_sb_fini(struct nt_sb *b);
/* Back to `len` bytes (<= b->len) and not failed; memory is kept. */
void nt_sb_rewind(struct nt_sb *b, size_t len);
static inline void nt_sb_reset(struct nt_sb *b) { nt_sb_rewind(b, 0); }
/* Hand a heap builder's text over (NUL-terminated; the caller frees it)
 * and *len its length; the builder is empty and usable again. NULL when
 * memory runs out or the builder writes into a caller's buffer. */
char *nt_sb_take(struct nt_sb *b, size_t *len);
/* The text ("" before the first append). */
static inline const char *nt_sb_str(const struct nt_sb *b)
{
	return b->buf && b->cap ? b->buf : "";
}

/* Slow path of every append: make room for n more bytes, growing the heap
 * buffer if allowed; false (and failed set) when they cannot fit. */
bool nt_sb_reserve(struct nt_sb *b, size_t n);

static inline bool nt_sb__room(struct nt_sb *b, size_t n)
{
	if (!b->failed && b->cap - b->len > n)
		return true;
	return nt_sb_reserve(b, n);
}

static inline void nt_sb_put(struct nt_sb *b, const void *s, size_t n)
{
	if (!nt_sb__room(b, n))
		return;
	memcpy(b->buf + b->len, s, n);
	b->len += n;
	b->buf[b->len] = '\0';
}

static inline void nt_sb_puts(struct nt_sb *b, const char *s)
{
	nt_sb_put(b, s, strlen(s));
}

static inline void nt_sb_putc(struct nt_sb *b, char c)
{
	if (!nt_sb__room(b, 1))
		return;
	b->buf[b->len++] = c;
	b->buf[b->len] = '\0';
}

/* Decimal and lowercase hex (no "0x", no leading zeros) integers. */
void nt_sb_u64(struct nt_sb *b, uint64_t v);
void nt_sb_i64(struct nt_sb *b, int64_t v);
void nt_sb_hex(struct nt_sb *b, uint64_t v);
/*
 * A JSON string literal, quotes included, of at most n bytes of s, stopping
 * at a NUL (event strings are NUL-padded arrays): `"` `\` and control bytes
 * are escaped, each byte that does not start a valid UTF-8 sequence
 * becomes \ufffd, so the output is always valid JSON and valid UTF-8.
 */
void nt_sb_json_str(struct nt_sb *b, const char *s, size_t n);
/* A byte count for people into buf: "512 B", "1.5 KiB", "5.0 MiB", up to
 * TiB (one decimal past bytes). Returns buf. */
const char *nt_fmt_bytes(uint64_t bytes, char *buf, size_t len);
/* printf for what has no typed append (doubles); all or nothing too. */
void nt_sb_printf(struct nt_sb *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Hot paths (a sink rendering millions of records a second): make room for
 * a record's worst case once, write it through a cursor with no check per
 * piece, then set the end.
 *
 *   char *p = nt_sb_cursor(&sb, worst);     // NULL: it does not fit (failed)
 *   if (p) {
 *       p = nt_fmt_put(p, "{\"pid\":", 7);
 *       p = nt_fmt_u64(p, pid);
 *       p = nt_fmt_json_str(p, comm, 16);
 *       nt_sb_advance(&sb, p);              // p - cursor <= worst
 *   }
 *
 * The nt_fmt_* writers write at the cursor and return the new end; each
 * says how much it may write: the caller's `worst` must cover the sum.
 */
char *nt_sb_cursor(struct nt_sb *b, size_t worst);
static inline void nt_sb_advance(struct nt_sb *b, char *end)
{
	b->len = (size_t)(end - b->buf);
	b->buf[b->len] = '\0';
}
static inline char *nt_fmt_put(char *p, const void *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}
/* At most 20 bytes. */
char *nt_fmt_u64(char *p, uint64_t v);
/* At most 20 bytes. */
char *nt_fmt_i64(char *p, int64_t v);
/* Lowercase, no "0x": at most 16 bytes. */
char *nt_fmt_hex(char *p, uint64_t v);
/* nt_sb_json_str's text at the cursor: at most 6 * n + 2 bytes. */
char *nt_fmt_json_str(char *p, const char *s, size_t n);

#endif /* NTCORE_KIT_SB_H */
