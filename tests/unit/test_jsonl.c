/* JSON Lines rendering: escaping, every field type, metrics, folded stacks. */
#include <check.h>
#include <string.h>

#include "jsonl.h"
#include "jsonr.h"

static const char *render_string(const char *s, size_t n)
{
	static struct nt_buf b;

	b.len = 0;
	nt_json_string(&b, s, n);
	return b.p;
}

START_TEST(escapes)
{
	ck_assert_str_eq(render_string("plain", 5), "\"plain\"");
	ck_assert_str_eq(render_string("a\"b\\c", 5), "\"a\\\"b\\\\c\"");
	ck_assert_str_eq(render_string("l1\nl2\t\r", 7), "\"l1\\nl2\\t\\r\"");
	ck_assert_str_eq(render_string("\x01\x1f\x7f", 3), "\"\\u0001\\u001f\\u007f\"");
	/* valid UTF-8 passes through, invalid bytes become U+FFFD */
	ck_assert_str_eq(render_string("h\xc3\xa9", 3), "\"h\xc3\xa9\"");
	ck_assert_str_eq(render_string("\xff" "a", 2), "\"\\ufffda\"");
	ck_assert_str_eq(render_string("\xc3", 1), "\"\\ufffd\"");         /* truncated */
	ck_assert_str_eq(render_string("\xc0\xaf", 2), "\"\\ufffd\\ufffd\""); /* overlong */
	ck_assert_str_eq(render_string("\xed\xa0\x80", 3), "\"\\ufffd\\ufffd\\ufffd\""); /* surrogate */
	/* stops at NUL and at n */
	ck_assert_str_eq(render_string("ab\0cd", 5), "\"ab\"");
	ck_assert_str_eq(render_string("abcdef", 3), "\"abc\"");
}
END_TEST

struct rec {
	struct nt_event_hdr hdr;
	uint64_t bytes;
	int64_t delta;
	double ratio;
	uint32_t dev;
	int32_t err;
	uint64_t ptr;
	unsigned char addr[16];
	char name[8];
	struct nt_vstr text;
	uint8_t ok;
	uint8_t pad[7];
	char tail[32];
};

static const struct nt_field fields[] = {
	NT_FIELD(struct rec, bytes, NT_F_U64, "bytes", ""),
	NT_FIELD(struct rec, delta, NT_F_S64, "", ""),
	NT_FIELD(struct rec, ratio, NT_F_F64, "", ""),
	NT_FIELD(struct rec, dev, NT_F_DEVT, "", ""),
	NT_FIELD(struct rec, err, NT_F_ERRNO, "", ""),
	NT_FIELD(struct rec, ptr, NT_F_HEX64, "", ""),
	NT_FIELD(struct rec, addr, NT_F_INADDR, "", ""),
	NT_FIELD(struct rec, name, NT_F_STR, "", ""),
	NT_FIELD(struct rec, text, NT_F_VSTR, "", ""),
	NT_FIELD(struct rec, ok, NT_F_BOOL, "", ""),
};
static const struct nt_schema schema = {
	.name = "test.all", .fields = fields, .n_fields = NT_ARRAY_LEN(fields),
	.min_size = offsetof(struct rec, tail)};

static struct rec make(void)
{
	struct rec r = {0};

	r.hdr = (struct nt_event_hdr){.type = 1, .size = sizeof(r), .pid = 42, .tid = 43};
	memcpy(r.hdr.comm, "py\"thon", 8);
	r.bytes = 18446744073709551615ull;
	r.delta = -5;
	r.ratio = 0.25;
	r.dev = (8u << 20) | 16;
	r.err = -2;
	r.ptr = 0x7f00dead0000ull;
	r.addr[10] = r.addr[11] = 0xff;
	r.addr[12] = 127; r.addr[15] = 1;
	memcpy(r.name, "exactly8", 8); /* no NUL: must stop at 8 */
	memcpy(r.tail, "hello\nworld", 11);
	r.text = (struct nt_vstr){.off = offsetof(struct rec, tail), .len = 11};
	r.ok = 1;
	return r;
}

START_TEST(event_line)
{
	struct nt_buf b = {0};
	struct rec r = make();

	nt_jsonl_event(&b, &r.hdr, &schema, 1700000000123456789ull);
	ck_assert_str_eq(b.p,
		"{\"ts\":1700000000123456789,\"type\":\"test.all\",\"pid\":42,\"tid\":43,"
		"\"comm\":\"py\\\"thon\",\"bytes\":18446744073709551615,\"delta\":-5,"
		"\"ratio\":0.25,\"dev\":\"8:16\",\"err\":\"ENOENT\",\"ptr\":\"0x7f00dead0000\","
		"\"addr\":\"127.0.0.1\",\"name\":\"exactly8\",\"text\":\"hello\\nworld\",\"ok\":true}\n");
	nt_buf_free(&b);
}
END_TEST

START_TEST(bad_vstr_and_ipv6)
{
	struct nt_buf b = {0};
	struct rec r = make();

	r.text.off = 4000; /* outside the record */
	memset(r.addr, 0, 16);
	r.addr[15] = 1;
	r.ratio = 1.0 / 0.0;
	nt_jsonl_event(&b, &r.hdr, &schema, 1);
	ck_assert_ptr_nonnull(strstr(b.p, "\"text\":null"));
	ck_assert_ptr_nonnull(strstr(b.p, "\"addr\":\"::1\""));
	ck_assert_ptr_nonnull(strstr(b.p, "\"ratio\":null"));
	nt_buf_free(&b);
}
END_TEST

START_TEST(metric_lines)
{
	struct nt_buf b = {0};
	static const char *const names[] = {"pid"};
	static const double bounds[] = {0.5, 1};
	const char *vals[] = {"7"};
	const uint64_t counts[] = {1, 2, 3};
	struct nt_metric_desc hist = {.name = "ntcore_x_seconds", .type = NT_METRIC_HISTOGRAM,
				      .n_labels = 1, .label_names = names,
				      .buckets = bounds, .n_buckets = 2};
	struct nt_metric_series s = {.label_values = vals, .bucket_counts = counts,
				     .count = 6, .sum = 4.5};

	nt_jsonl_metric(&b, 9, &hist, &s, 1);
	ck_assert_str_eq(b.p,
		"{\"ts\":9,\"type\":\"metric\",\"name\":\"ntcore_x_seconds\",\"labels\":{\"pid\":\"7\"},"
		"\"buckets\":[[0.5,1],[1,3],[\"+Inf\",6]],\"sum\":4.5,\"count\":6}\n");
	b.len = 0;
	hist.type = NT_METRIC_COUNTER;
	s.value = 12;
	nt_jsonl_metric(&b, 9, &hist, &s, 1);
	ck_assert_str_eq(b.p,
		"{\"ts\":9,\"type\":\"metric\",\"name\":\"ntcore_x_seconds\",\"labels\":{\"pid\":\"7\"},\"value\":12}\n");
	nt_buf_free(&b);
}
END_TEST

struct stackrec {
	struct nt_event_hdr hdr;
	struct nt_vstr stack;
	uint64_t count;
	char frames[32];
};

/* Every field type, random bytes: the file sink's compiled renderer
 * (jsonr.c) writes exactly what the generic one does. */
struct allrec {
	struct nt_event_hdr hdr;
	uint8_t u8;
	uint8_t b;
	uint16_t u16;
	uint32_t u32;
	int32_t s32;
	uint64_t u64;
	int64_t s64;
	double f64;
	uint64_t hex;
	uint32_t devt;
	int32_t err;
	unsigned char in[16];
	char str[12];
	struct nt_vstr v1, v2;
	unsigned char odd[3];
	char text[64];
};

static const struct nt_field all_fields[] = {
	NT_FIELD(struct allrec, u8, NT_F_U8, "", ""),
	NT_FIELD(struct allrec, b, NT_F_BOOL, "", ""),
	NT_FIELD(struct allrec, u16, NT_F_U16, "", ""),
	NT_FIELD(struct allrec, u32, NT_F_U32, "", ""),
	NT_FIELD(struct allrec, s32, NT_F_S32, "", ""),
	NT_FIELD(struct allrec, u64, NT_F_U64, "", ""),
	NT_FIELD(struct allrec, s64, NT_F_S64, "", ""),
	NT_FIELD(struct allrec, f64, NT_F_F64, "", ""),
	NT_FIELD(struct allrec, hex, NT_F_HEX64, "", ""),
	NT_FIELD(struct allrec, devt, NT_F_DEVT, "", ""),
	NT_FIELD(struct allrec, err, NT_F_ERRNO, "", ""),
	NT_FIELD(struct allrec, in, NT_F_INADDR, "", ""),
	NT_FIELD(struct allrec, str, NT_F_STR, "", ""),
	NT_FIELD(struct allrec, v1, NT_F_VSTR, "", ""),
	NT_FIELD(struct allrec, v2, NT_F_VSTR, "", ""),
	{.name = "odd \"name\"", .type = 99, .offset = offsetof(struct allrec, odd),
	 .size = 3},
};

static const struct nt_schema all_schema = {
	.name = "t.all\"x", .fields = all_fields, .n_fields = NT_ARRAY_LEN(all_fields),
	.min_size = offsetof(struct allrec, text)};

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

START_TEST(fast_matches_generic)
{
	struct jr_cache cache = {0};
	struct nt_sb sb;
	struct nt_buf want = {0};
	static const int32_t errs[] = {0, -2, 2, -12, 5, INT32_MAX, -4095, -9999};

	nt_sb_init(&sb, 0);
	for (int i = 0; i < 20000; i++) {
		struct allrec r;
		unsigned char *raw = (unsigned char *)&r;
		for (size_t k = 0; k < sizeof(r); k++)
			raw[k] = (unsigned char)rnd();
		r.hdr.type = 3;
		/* mostly whole records, some cut inside the fixed part */
		r.hdr.size = (rnd() % 4) ? sizeof(r)
					 : (uint32_t)(sizeof(r.hdr) + rnd() % (sizeof(r) - sizeof(r.hdr)));
		if (rnd() % 2) { /* mostly plain text, where the fast paths run */
			for (size_t k = 0; k < sizeof(r.text); k++)
				r.text[k] = (char)(' ' + rnd() % 95);
			memcpy(r.hdr.comm, "python3.12\0\0\0\0\0", 16);
			memcpy(r.str, "abc\0", 4);
		}
		if (rnd() % 3) { /* in bounds */
			r.v1.off = offsetof(struct allrec, text) + (uint32_t)(rnd() % 32);
			r.v1.len = (uint32_t)(rnd() % 33);
			r.v2 = r.v1;
		}
		if (rnd() % 2)
			r.err = errs[rnd() % 8];
		if (rnd() % 2) {
			uint64_t pick[] = {0, 1, 9, 10, 99, 100, 12345678901234567890ull,
					   UINT64_MAX, 1ull << 63};
			r.u64 = pick[rnd() % 9];
			r.s64 = (int64_t)pick[rnd() % 9];
		}
		uint64_t wall = rnd();
		want.len = 0;
		nt_jsonl_event(&want, &r.hdr, &all_schema, wall);
		nt_sb_rewind(&sb, 0);
		ck_assert(jr_render(&cache, &sb, &r.hdr, &all_schema, wall));
		ck_assert_uint_eq(sb.len, want.len);
		ck_assert_str_eq(nt_sb_str(&sb), want.p);
	}
	nt_buf_free(&want);
	nt_sb_fini(&sb);
	jr_cache_free(&cache);
}
END_TEST

START_TEST(folded)
{
	static const struct nt_field f[] = {
		NT_FIELD(struct stackrec, stack, NT_F_VSTR, "", ""),
		NT_FIELD(struct stackrec, count, NT_F_U64, "", ""),
	};
	static const struct nt_schema s = {.name = "python.stack", .fields = f, .n_fields = 2,
					   .min_size = offsetof(struct stackrec, frames)};
	struct stackrec r = {.hdr = {.size = sizeof(r)}, .count = 97};
	struct nt_buf b = {0};

	strcpy(r.frames, "main;a;b;c");
	r.stack = (struct nt_vstr){offsetof(struct stackrec, frames), 10};
	ck_assert_int_eq(nt_folded_event(&b, &r.hdr, &s), 0);
	ck_assert_str_eq(b.p, "main;a;b;c 97\n");
	ck_assert_int_eq(nt_folded_event(&b, &r.hdr, &schema), -1);
	nt_buf_free(&b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("jsonl");
	TCase *tc = tcase_create("jsonl");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, escapes);
	tcase_add_test(tc, event_line);
	tcase_add_test(tc, bad_vstr_and_ipv6);
	tcase_add_test(tc, metric_lines);
	tcase_add_test(tc, folded);
	tcase_add_test(tc, fast_matches_generic);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
