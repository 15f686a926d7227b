/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the plugin kit's pure pieces: config-key macros, the log
 * macros through a stand-in host, clocks, UTF-8, the string builder and
 * the top-N table. Exact outcomes throughout.
 */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ntcore/kit.h"

/* ---- config keys ---------------------------------------------------- */

struct sub_cfg {
	const char *name;
};

struct all_cfg {
	bool on;
	int64_t interval_ms;
	double ratio;
	const char *path;
	const char *mode;
	const char *must;
	struct nt_strlist funcs;
	struct nt_cfg_array groups;
};

#define KIT_TEST_DEPTH 32

static const char *const modes[] = {"auto", "tp_btf", "raw_tp", NULL};
static const struct nt_cfg_key sub_keys[] = {
	NT_KEY_STR(struct sub_cfg, name, "x", "a name"),
};
static const struct nt_cfg_key all_keys[] = {
	NT_KEY_BOOL(struct all_cfg, on, true, "switch"),
	NT_KEY_INT(struct all_cfg, interval_ms, KIT_TEST_DEPTH, -5, 1099511627776,
		   "period"),
	NT_KEY_FLOAT(struct all_cfg, ratio, 0.25, 0.0, 1.0, "share"),
	NT_KEY_STR(struct all_cfg, path, "/var/log/a \"b\".jsonl", "file"),
	NT_KEY_CHOICE(struct all_cfg, mode, "auto", modes, "flavour"),
	NT_KEY_STR_REQUIRED(struct all_cfg, must, "required"),
	NT_KEY_STRLIST(struct all_cfg, funcs, "[\"malloc\", \"free\"]", "fns"),
	NT_KEY_GROUPS(struct all_cfg, groups, struct sub_cfg, sub_keys, "list"),
};

START_TEST(test_cfg_macros)
{
	const struct nt_cfg_key *k = all_keys;

	ck_assert_str_eq(k[0].key, "on");
	ck_assert_uint_eq(k[0].type, NT_CFG_BOOL);
	ck_assert_uint_eq(k[0].offset, offsetof(struct all_cfg, on));
	ck_assert_str_eq(k[0].def, "true");
	ck_assert(k[0].min > k[0].max);

	ck_assert_str_eq(k[1].key, "interval_ms");
	ck_assert_uint_eq(k[1].type, NT_CFG_INT);
	ck_assert_uint_eq(k[1].offset, offsetof(struct all_cfg, interval_ms));
	ck_assert_str_eq(k[1].def, "32"); /* the macro's value, not its name */
	ck_assert(k[1].min == -5.0 && k[1].max == 1099511627776.0);

	ck_assert_uint_eq(k[2].type, NT_CFG_FLOAT);
	ck_assert_str_eq(k[2].def, "0.25");
	ck_assert(k[2].min == 0.0 && k[2].max == 1.0);

	ck_assert_uint_eq(k[3].offset, offsetof(struct all_cfg, path));
	ck_assert_str_eq(k[3].def, "\"/var/log/a \\\"b\\\".jsonl\"");
	ck_assert_ptr_eq(k[3].choices, NULL);

	ck_assert_str_eq(k[4].def, "\"auto\"");
	ck_assert_ptr_eq(k[4].choices, modes);

	ck_assert_str_eq(k[5].key, "must");
	ck_assert_ptr_eq(k[5].def, NULL);

	ck_assert_uint_eq(k[6].type, NT_CFG_STRING_LIST);
	ck_assert_str_eq(k[6].def, "[\"malloc\", \"free\"]");

	ck_assert_uint_eq(k[7].type, NT_CFG_GROUP_LIST);
	ck_assert_ptr_eq(k[7].sub, sub_keys);
	ck_assert_uint_eq(k[7].n_sub, 1);
	ck_assert_uint_eq(k[7].sub_size, sizeof(struct sub_cfg));
	ck_assert_ptr_eq(k[7].def, NULL);
	ck_assert_str_eq(sub_keys[0].def, "\"x\"");
}
END_TEST

/* ---- log ------------------------------------------------------------ */

/* What the stand-in host saw; the instance pointer points at it. */
struct log_seen {
	int calls, vcalls, level;
	char text[256];
};

static void fake_log(struct nt_instance *inst, int level, const char *fmt, ...)
{
	struct log_seen *s = (struct log_seen *)(void *)inst;
	va_list ap;

	s->calls++;
	s->level = level;
	va_start(ap, fmt);
	vsnprintf(s->text, sizeof(s->text), fmt, ap);
	va_end(ap);
}

static void fake_vlog(struct nt_instance *inst, int level, const char *fmt,
		      va_list ap)
{
	struct log_seen *s = (struct log_seen *)(void *)inst;

	s->vcalls++;
	s->level = level;
	vsnprintf(s->text, sizeof(s->text), fmt, ap);
}

START_TEST(test_log_macros)
{
	struct log_seen seen = {0};
	struct nt_host old_host = {.abi_major = 1, .abi_minor = 1,
				   .size = offsetof(struct nt_host, vlog),
				   .log = fake_log, .vlog = fake_vlog};
	struct nt_host new_host = old_host;
	struct nt_ctx ctx = {&old_host, (struct nt_instance *)(void *)&seen};

	/* A 1.1 host: vlog lies past its size, so log is used. */
	nt_log_err(&ctx, "cannot open %s: %d", "x", -2);
	ck_assert_int_eq(seen.calls, 1);
	ck_assert_int_eq(seen.vcalls, 0);
	ck_assert_int_eq(seen.level, NT_LOG_ERROR);
	ck_assert_str_eq(seen.text, "cannot open x: -2");

	new_host.abi_minor = 2;
	new_host.size = sizeof(struct nt_host);
	ctx.host = &new_host;
	nt_log_warn(&ctx, "w%d", 1);
	ck_assert_int_eq(seen.level, NT_LOG_WARN);
	nt_log_info(&ctx, "i");
	ck_assert_int_eq(seen.level, NT_LOG_INFO);
	nt_log_dbg(&ctx, "%s %u", "debug", 7u);
	ck_assert_int_eq(seen.calls, 1);
	ck_assert_int_eq(seen.vcalls, 3);
	ck_assert_int_eq(seen.level, NT_LOG_DEBUG);
	ck_assert_str_eq(seen.text, "debug 7");
}
END_TEST

/* ---- clock ---------------------------------------------------------- */

START_TEST(test_clock)
{
	struct timespec ts;
	uint64_t a = nt_clock_mono_ns(), b, wall = nt_clock_wall_ns();

	clock_gettime(CLOCK_MONOTONIC, &ts);
	b = nt_clock_mono_ns();
	uint64_t ref = (uint64_t)ts.tv_sec * NT_NS_PER_SEC + (uint64_t)ts.tv_nsec;
	ck_assert(a <= ref && ref <= b);
	/* Generous: valgrind on a loaded 2-core CI machine can stall a thread. */
	ck_assert(b - a < NT_NS_PER_SEC);
	/* time() reads the coarse realtime clock, which lags the precise one by
	 * up to a tick: just after a second boundary it may still say the last
	 * second, so one second of slack either way (CI saw this flake). */
	uint64_t now_s = (uint64_t)time(NULL), wall_s = wall / NT_NS_PER_SEC;
	ck_assert(wall_s + 1 >= now_s && wall_s <= now_s + 1);
}
END_TEST

/* ---- UTF-8 ---------------------------------------------------------- */

START_TEST(test_utf8_seq)
{
	ck_assert_uint_eq(nt_utf8_seq("a", 1), 1);
	ck_assert_uint_eq(nt_utf8_seq("\xc3\xa9", 2), 2);         /* é */
	ck_assert_uint_eq(nt_utf8_seq("\xe2\x82\xac", 3), 3);     /* € */
	ck_assert_uint_eq(nt_utf8_seq("\xf0\x9f\x98\x80", 4), 4); /* 😀 */
	ck_assert_uint_eq(nt_utf8_seq("\xf4\x8f\xbf\xbf", 4), 4); /* U+10FFFF */
	ck_assert_uint_eq(nt_utf8_seq("\xc0\x80", 2), 0);         /* overlong */
	ck_assert_uint_eq(nt_utf8_seq("\xe0\x80\x80", 3), 0);     /* overlong */
	ck_assert_uint_eq(nt_utf8_seq("\xf0\x8f\xbf\xbf", 4), 0); /* overlong */
	ck_assert_uint_eq(nt_utf8_seq("\xed\xa0\x80", 3), 0);     /* surrogate */
	ck_assert_uint_eq(nt_utf8_seq("\xf4\x90\x80\x80", 4), 0); /* > 10FFFF */
	ck_assert_uint_eq(nt_utf8_seq("\xf5\x80\x80\x80", 4), 0);
	ck_assert_uint_eq(nt_utf8_seq("\x80", 1), 0);             /* stray */
	ck_assert_uint_eq(nt_utf8_seq("\xe2\x82\xac", 2), 0);     /* cut */
	ck_assert_uint_eq(nt_utf8_seq("\xe2\x41\xac", 3), 0);
	ck_assert_uint_eq(nt_utf8_seq("", 0), 0);

	ck_assert(nt_utf8_valid("h\xc3\xa9llo \xe2\x82\xac", 10));
	ck_assert(nt_utf8_valid("a\0b", 3));
	ck_assert(nt_utf8_valid("", 0));
	ck_assert(!nt_utf8_valid("ab\xff", 3));
	ck_assert(!nt_utf8_valid("\xc3", 1));
}
END_TEST

START_TEST(test_utf8_repair_encode_cut)
{
	char out[16], enc[4];

	ck_assert_uint_eq(nt_utf8_repair("a\xff" "b\xc3\xa9", 5, out, sizeof(out)), 7);
	ck_assert_str_eq(out, "a\xef\xbf\xbd" "b\xc3\xa9");
	/* "a" and U+FFFD need 1 + 3 + 1 bytes: with 4 only "a" fits. */
	ck_assert_uint_eq(nt_utf8_repair("a\xff", 2, out, 4), 1);
	ck_assert_str_eq(out, "a");
	/* 3n + 1 always suffices. */
	ck_assert_uint_eq(nt_utf8_repair("\x80\x80\x80", 3, out, 10), 9);
	ck_assert_str_eq(out, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	ck_assert_uint_eq(nt_utf8_repair("abc", 3, out, 1), 0);
	ck_assert_str_eq(out, "");

	ck_assert_uint_eq(nt_utf8_encode(0x41, enc), 1);
	ck_assert_int_eq(enc[0], 'A');
	ck_assert_uint_eq(nt_utf8_encode(0xe9, enc), 2);
	ck_assert_int_eq(memcmp(enc, "\xc3\xa9", 2), 0);
	ck_assert_uint_eq(nt_utf8_encode(0x20ac, enc), 3);
	ck_assert_int_eq(memcmp(enc, "\xe2\x82\xac", 3), 0);
	ck_assert_uint_eq(nt_utf8_encode(0x1f600, enc), 4);
	ck_assert_int_eq(memcmp(enc, "\xf0\x9f\x98\x80", 4), 0);
	ck_assert_uint_eq(nt_utf8_encode(0xd800, enc), 0);
	ck_assert_uint_eq(nt_utf8_encode(0x110000, enc), 0);

	ck_assert_uint_eq(nt_utf8_cut("a\xc3\xa9", 3, 2), 1);
	ck_assert_uint_eq(nt_utf8_cut("a\xc3\xa9", 3, 3), 3);
	ck_assert_uint_eq(nt_utf8_cut("a\xc3\xa9", 3, 1), 1);
	ck_assert_uint_eq(nt_utf8_cut("\xe2\x82\xac" "x", 4, 1), 0);
	ck_assert_uint_eq(nt_utf8_cut("\xe2\x82\xac" "x", 4, 3), 3);
	ck_assert_uint_eq(nt_utf8_cut("abc", 3, 2), 2);
	ck_assert_uint_eq(nt_utf8_cut("\xc3\xa9\xa9", 3, 2), 2); /* stray after */
}
END_TEST

/* ---- string builder --------------------------------------------------- */

START_TEST(test_sb_numbers)
{
	struct nt_sb b;

	nt_sb_init(&b, 0);
	ck_assert_str_eq(nt_sb_str(&b), "");
	nt_sb_u64(&b, 0);
	nt_sb_putc(&b, ' ');
	nt_sb_u64(&b, 9);
	nt_sb_putc(&b, ' ');
	nt_sb_u64(&b, 10);
	nt_sb_putc(&b, ' ');
	nt_sb_u64(&b, 99);
	nt_sb_putc(&b, ' ');
	nt_sb_u64(&b, 100);
	nt_sb_putc(&b, ' ');
	nt_sb_u64(&b, UINT64_MAX);
	ck_assert_str_eq(nt_sb_str(&b), "0 9 10 99 100 18446744073709551615");
	nt_sb_reset(&b);
	nt_sb_i64(&b, INT64_MIN);
	nt_sb_putc(&b, ' ');
	nt_sb_i64(&b, -1);
	nt_sb_putc(&b, ' ');
	nt_sb_i64(&b, 0);
	nt_sb_putc(&b, ' ');
	nt_sb_i64(&b, INT64_MAX);
	ck_assert_str_eq(nt_sb_str(&b),
			 "-9223372036854775808 -1 0 9223372036854775807");
	nt_sb_reset(&b);
	nt_sb_hex(&b, 0);
	nt_sb_putc(&b, ' ');
	nt_sb_hex(&b, 0xdeadbeef);
	nt_sb_putc(&b, ' ');
	nt_sb_hex(&b, UINT64_MAX);
	ck_assert_str_eq(nt_sb_str(&b), "0 deadbeef ffffffffffffffff");
	ck_assert_uint_eq(b.len, strlen(nt_sb_str(&b)));

	/* Every power of ten and its neighbours, and a spread of others,
	 * against printf (the 8-digit chunks meet at 10^8 and 10^16). */
	uint64_t p10 = 1, rng = 88172645463325252ull;
	char want[64];
	for (int i = 0; i < 20; i++, p10 *= 10)
		for (int d = -1; d <= 1; d++) {
			uint64_t v = p10 + (uint64_t)(int64_t)d;
			nt_sb_reset(&b);
			nt_sb_u64(&b, v);
			nt_sb_i64(&b, -(int64_t)(v >> 1));
			snprintf(want, sizeof(want), "%llu%lld", (unsigned long long)v,
				 -(long long)(v >> 1));
			ck_assert_str_eq(nt_sb_str(&b), want);
		}
	for (int i = 0; i < 10000; i++) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		uint64_t v = rng >> (i % 64);
		nt_sb_reset(&b);
		nt_sb_u64(&b, v);
		nt_sb_hex(&b, v);
		snprintf(want, sizeof(want), "%llu%llx", (unsigned long long)v,
			 (unsigned long long)v);
		ck_assert_str_eq(nt_sb_str(&b), want);
	}
	nt_sb_fini(&b);
}
END_TEST

/* Byte counts for people, the one formatter of net's, mem's and cuda's
 * reports: bytes exact below 1 KiB, then one decimal, up to TiB. */
START_TEST(test_fmt_bytes)
{
	char b[32];

	ck_assert_str_eq(nt_fmt_bytes(0, b, sizeof(b)), "0 B");
	ck_assert_str_eq(nt_fmt_bytes(1023, b, sizeof(b)), "1023 B");
	ck_assert_str_eq(nt_fmt_bytes(1536, b, sizeof(b)), "1.5 KiB");
	ck_assert_str_eq(nt_fmt_bytes(64ull << 20, b, sizeof(b)), "64.0 MiB");
	ck_assert_str_eq(nt_fmt_bytes(3ull << 30, b, sizeof(b)), "3.0 GiB");
	ck_assert_str_eq(nt_fmt_bytes(5ull << 50, b, sizeof(b)), "5120.0 TiB");
	ck_assert_str_eq(nt_fmt_bytes(1536, b, 4), "1.5");
}
END_TEST

START_TEST(test_sb_json)
{
	struct nt_sb b;

	nt_sb_init(&b, 0);
	nt_sb_json_str(&b, "a\"b\\c\n\r\t\b\f\x01\x1f\x7f", 13);
	ck_assert_str_eq(nt_sb_str(&b),
			 "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\\u007f\"");
	nt_sb_reset(&b);
	nt_sb_json_str(&b, "\xff" "\xc3\xa9" "\xe2\x82", 5);
	ck_assert_str_eq(nt_sb_str(&b), "\"\\ufffd\xc3\xa9\\ufffd\\ufffd\"");
	nt_sb_reset(&b);
	nt_sb_json_str(&b, "ab\0cd", 5); /* a NUL ends it */
	ck_assert_str_eq(nt_sb_str(&b), "\"ab\"");
	nt_sb_reset(&b);
	nt_sb_json_str(&b, "abcdef", 3);
	ck_assert_str_eq(nt_sb_str(&b), "\"abc\"");
	nt_sb_reset(&b);
	nt_sb_json_str(&b, "", 0);
	ck_assert_str_eq(nt_sb_str(&b), "\"\"");
	nt_sb_fini(&b);
}
END_TEST

/* The reference escaping, one byte at a time, to check the word-at-a-time
 * scanner against. */
static size_t ref_json(const unsigned char *u, size_t n, char *out)
{
	size_t o = 0;

	out[o++] = '"';
	for (size_t i = 0; i < n && u[i];) {
		size_t k;
		unsigned char c = u[i];
		if (c == '"' || c == '\\') {
			o += (size_t)sprintf(out + o, "\\%c", c);
			i++;
		} else if (c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f') {
			o += (size_t)sprintf(out + o, "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r'
					   : c == '\t' ? 't' : c == '\b' ? 'b' : 'f');
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			o += (size_t)sprintf(out + o, "\\u%04x", c);
			i++;
		} else if (c < 0x80) {
			out[o++] = (char)c;
			i++;
		} else if ((k = nt_utf8_seq(u + i, n - i))) {
			memcpy(out + o, u + i, k);
			o += k;
			i += k;
		} else {
			o += (size_t)sprintf(out + o, "\\ufffd");
			i++;
		}
	}
	out[o++] = '"';
	out[o] = '\0';
	return o;
}

START_TEST(test_sb_json_random)
{
	/* Plain letters mostly, and every kind of byte the scanner must stop
	 * at, anywhere in an 8-byte word. */
	static const unsigned char alphabet[] = "abcdefgh \"\\\n\x01\x1f\x7f\x80"
						"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xff";
	uint64_t rng = 0x2545f4914f6cdd1dull;
	unsigned char in[40];
	char want[6 * 40 + 3];
	struct nt_sb b;

	nt_sb_init(&b, 0);
	for (int round = 0; round < 20000; round++) {
		size_t n = (size_t)(rng % 40);
		for (size_t i = 0; i < n; i++) {
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			/* 3 in 4 bytes plain, so long plain runs occur */
			in[i] = (rng >> 40) % 4 ? (unsigned char)('a' + rng % 26)
						: alphabet[rng % (sizeof(alphabet) - 1)];
		}
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		size_t want_len = ref_json(in, n, want);
		nt_sb_reset(&b);
		nt_sb_json_str(&b, (const char *)in, n);
		ck_assert_uint_eq(b.len, want_len);
		ck_assert_str_eq(nt_sb_str(&b), want);
		/* the cursor writer writes the same */
		nt_sb_reset(&b);
		char *p = nt_sb_cursor(&b, 6 * n + 2);
		ck_assert_ptr_nonnull(p);
		nt_sb_advance(&b, nt_fmt_json_str(p, (const char *)in, n));
		ck_assert_str_eq(nt_sb_str(&b), want);
	}
	nt_sb_fini(&b);
}
END_TEST

/* The cursor's integer writers against printf: every power of ten and
 * its neighbours (where the digit count changes), and random values. */
START_TEST(test_fmt_numbers)
{
	char got[32], want[32];
	uint64_t rng = 0x9e3779b97f4a7c15ull, p10 = 1;

	for (int k = 0; k < 20; k++, p10 *= (k < 20 ? 10 : 1)) {
		for (uint64_t v = p10 - 1; v <= p10 + 1; v++) {
			*nt_fmt_u64(got, v) = '\0';
			snprintf(want, sizeof(want), "%llu", (unsigned long long)v);
			ck_assert_str_eq(got, want);
		}
	}
	for (int i = 0; i < 200000; i++) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		uint64_t v = rng >> (rng & 63);
		*nt_fmt_u64(got, v) = '\0';
		snprintf(want, sizeof(want), "%llu", (unsigned long long)v);
		ck_assert_str_eq(got, want);
		*nt_fmt_i64(got, (int64_t)v) = '\0';
		snprintf(want, sizeof(want), "%lld", (long long)v);
		ck_assert_str_eq(got, want);
		*nt_fmt_hex(got, v) = '\0';
		snprintf(want, sizeof(want), "%llx", (unsigned long long)v);
		ck_assert_str_eq(got, want);
	}
	*nt_fmt_u64(got, UINT64_MAX) = '\0';
	ck_assert_str_eq(got, "18446744073709551615");
	*nt_fmt_i64(got, INT64_MIN) = '\0';
	ck_assert_str_eq(got, "-9223372036854775808");
	*nt_fmt_hex(got, 0) = '\0';
	ck_assert_str_eq(got, "0");
}
END_TEST

START_TEST(test_sb_json_exact_fit)
{
	char buf[7];
	struct nt_sb b;

	/* "a\"b" escapes to 6 bytes: a 7-byte buffer is exactly enough, though
	 * the worst case (6 * 3 + 2) is not. */
	nt_sb_init_buf(&b, buf, sizeof(buf));
	nt_sb_json_str(&b, "a\"b", 3);
	ck_assert(!b.failed);
	ck_assert_str_eq(buf, "\"a\\\"b\"");
	nt_sb_rewind(&b, 0);
	nt_sb_json_str(&b, "a\"bc", 4);
	ck_assert(b.failed);
	ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(test_sb_bound)
{
	struct nt_sb b;
	char fixed[8];

	nt_sb_init(&b, 10);
	nt_sb_puts(&b, "12345");
	nt_sb_puts(&b, "678901"); /* 11 > 10: nothing of it */
	ck_assert(b.failed);
	ck_assert_str_eq(nt_sb_str(&b), "12345");
	nt_sb_putc(&b, 'x'); /* dropped: the builder failed */
	nt_sb_u64(&b, 7);
	ck_assert_str_eq(nt_sb_str(&b), "12345");
	nt_sb_rewind(&b, 5);
	ck_assert(!b.failed);
	nt_sb_puts(&b, "67890");
	ck_assert_str_eq(nt_sb_str(&b), "1234567890");
	ck_assert_uint_eq(b.len, 10);
	ck_assert(b.cap <= 11);
	nt_sb_printf(&b, "%d", 1);
	ck_assert(b.failed);
	ck_assert_str_eq(nt_sb_str(&b), "1234567890");
	nt_sb_rewind(&b, 3);
	ck_assert_str_eq(nt_sb_str(&b), "123");
	nt_sb_json_str(&b, "abcdefgh", 8); /* 10 bytes quoted: all or nothing */
	ck_assert(b.failed);
	ck_assert_str_eq(nt_sb_str(&b), "123");
	nt_sb_fini(&b);

	nt_sb_init_buf(&b, fixed, sizeof(fixed));
	nt_sb_printf(&b, "%s-%d", "ab", 42);
	ck_assert_str_eq(fixed, "ab-42");
	nt_sb_printf(&b, "%s", "xyz"); /* 8 > 7 */
	ck_assert(b.failed);
	ck_assert_str_eq(fixed, "ab-42");
	nt_sb_rewind(&b, 0);
	nt_sb_hex(&b, 0xabcdef1);
	ck_assert_str_eq(fixed, "abcdef1");
	nt_sb_fini(&b); /* the caller's buffer is not freed */
	ck_assert_ptr_eq(b.buf, NULL);
}
END_TEST

START_TEST(test_sb_growth)
{
	struct nt_sb b;
	char expect[10001];

	nt_sb_init(&b, 0);
	for (int i = 0; i < 10000; i++) {
		expect[i] = (char)('a' + i % 26);
		nt_sb_putc(&b, expect[i]);
	}
	expect[10000] = '\0';
	ck_assert_uint_eq(b.len, 10000);
	ck_assert_str_eq(nt_sb_str(&b), expect);
	nt_sb_reset(&b);
	nt_sb_printf(&b, "%0600d|%.3f", 5, 1.5); /* longer than the first cap */
	ck_assert_uint_eq(b.len, 606);
	ck_assert_str_eq(nt_sb_str(&b) + 595, "00005|1.500");
	ck_assert(!b.failed);
	nt_sb_fini(&b);

	/* take: the text is the caller's, the builder starts over */
	size_t len = 0;
	char *text;
	nt_sb_init(&b, 100);
	text = nt_sb_take(&b, &len);
	ck_assert_str_eq(text, "");
	ck_assert_uint_eq(len, 0);
	free(text);
	nt_sb_puts(&b, "abc");
	text = nt_sb_take(&b, &len);
	ck_assert_str_eq(text, "abc");
	ck_assert_uint_eq(len, 3);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_uint_eq(b.max, 100);
	nt_sb_puts(&b, "de");
	ck_assert_str_eq(nt_sb_str(&b), "de");
	free(text);
	nt_sb_fini(&b);
	nt_sb_init_buf(&b, expect, 8);
	ck_assert_ptr_eq(nt_sb_take(&b, &len), NULL);
}
END_TEST

/* ---- top-N ---------------------------------------------------------- */

struct row {
	char name[8];
};

static const char *row_name(const struct nt_topn *t, size_t i, uint64_t *score)
{
	const struct row *r = nt_topn_at(t, i, score);

	return r ? r->name : NULL;
}

START_TEST(test_topn)
{
	static const struct {
		uint64_t score;
		const char *name;
		bool kept;
	} offers[] = {
		{5, "a", true}, {1, "b", true}, {9, "c", true}, {7, "d", true},
		{9, "e", true}, {7, "f", false}, {2, "g", false},
	};
	struct nt_topn t;
	uint64_t score;

	ck_assert_int_eq(nt_topn_init(&t, 3, sizeof(struct row)), 0);
	for (size_t i = 0; i < NT_ARRAY_LEN(offers); i++) {
		struct row r = {{0}};
		snprintf(r.name, sizeof(r.name), "%s", offers[i].name);
		ck_assert_int_eq(nt_topn_offer(&t, offers[i].score, &r), offers[i].kept);
	}
	ck_assert_uint_eq(nt_topn_count(&t), 3);
	ck_assert_str_eq(row_name(&t, 0, &score), "c");
	ck_assert_uint_eq(score, 9);
	ck_assert_str_eq(row_name(&t, 1, &score), "e"); /* offered after c */
	ck_assert_uint_eq(score, 9);
	ck_assert_str_eq(row_name(&t, 2, &score), "d");
	ck_assert_uint_eq(score, 7);
	ck_assert_ptr_eq(nt_topn_at(&t, 3, NULL), NULL);
	nt_topn_reset(&t);
	ck_assert_uint_eq(nt_topn_count(&t), 0);
	nt_topn_fini(&t);

	ck_assert_int_eq(nt_topn_init(&t, 0, 4), 0);
	ck_assert(!nt_topn_offer(&t, 1, "abc"));
	nt_topn_fini(&t);
	ck_assert_int_eq(nt_topn_init(&t, 3, 0), -EINVAL);
}
END_TEST

START_TEST(test_topn_keyed)
{
	struct nt_topn t;
	struct row r1 = {"k1"}, r2 = {"k2"}, r3 = {"k3"}, r4 = {"k4"};
	uint64_t score;

	ck_assert_int_eq(nt_topn_init(&t, 3, sizeof(struct row)), 0);
	nt_topn_offer_keyed(&t, 1, 10, &r1);
	nt_topn_offer_keyed(&t, 2, 20, &r2);
	nt_topn_offer_keyed(&t, 3, 5, &r3);
	nt_topn_offer_keyed(&t, 1, 30, &r1); /* k1 grew: replaced, not added */
	ck_assert_uint_eq(nt_topn_count(&t), 3);
	ck_assert_str_eq(row_name(&t, 0, &score), "k1");
	ck_assert_uint_eq(score, 30);
	ck_assert_str_eq(row_name(&t, 1, NULL), "k2");
	ck_assert_str_eq(row_name(&t, 2, NULL), "k3");
	ck_assert(nt_topn_offer_keyed(&t, 4, 6, &r4)); /* k3 (5) falls out */
	ck_assert_str_eq(row_name(&t, 2, &score), "k4");
	nt_topn_offer_keyed(&t, 2, 1, &r2); /* k2 shrank: last now */
	ck_assert_str_eq(row_name(&t, 0, NULL), "k1");
	ck_assert_str_eq(row_name(&t, 1, NULL), "k4");
	ck_assert_str_eq(row_name(&t, 2, &score), "k2");
	ck_assert_uint_eq(score, 1);
	nt_topn_fini(&t);
}
END_TEST

static Suite *kit_suite(void)
{
	Suite *s = suite_create("kit");
	TCase *t = tcase_create("pure");

	/* under valgrind on a loaded 2-CPU machine the formatter checks against
	 * printf (every power of ten, random values) take longer than check's 4 s */
	tcase_set_timeout(t, 120);

	tcase_add_test(t, test_cfg_macros);
	tcase_add_test(t, test_log_macros);
	tcase_add_test(t, test_clock);
	tcase_add_test(t, test_utf8_seq);
	tcase_add_test(t, test_utf8_repair_encode_cut);
	tcase_add_test(t, test_sb_numbers);
	tcase_add_test(t, test_fmt_bytes);
	tcase_add_test(t, test_sb_json);
	tcase_add_test(t, test_sb_json_random);
	tcase_add_test(t, test_fmt_numbers);
	tcase_add_test(t, test_sb_json_exact_fit);
	tcase_add_test(t, test_sb_bound);
	tcase_add_test(t, test_sb_growth);
	tcase_add_test(t, test_topn);
	tcase_add_test(t, test_topn_keyed);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(kit_suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
