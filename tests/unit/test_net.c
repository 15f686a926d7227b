/* SPDX-License-Identifier: MIT */
/* Unit tests of the net probe's user-side logic (plugins/net/net_logic.c). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net_logic.h"

START_TEST(ports_single_and_ranges)
{
	const char *v[] = { "443", "8000-8003", "80", "8001", "65535" };
	uint16_t out[NET_PORTS_MAX];
	char err[128];
	int n = net_parse_ports(v, 5, out, NET_PORTS_MAX, err, sizeof(err));

	ck_assert_int_eq(n, 7);
	const uint16_t want[] = { 80, 443, 8000, 8001, 8002, 8003, 65535 };
	for (int i = 0; i < 7; i++)
		ck_assert_uint_eq(out[i], want[i]);
}
END_TEST

START_TEST(ports_rejects_bad_entries)
{
	const char *bad[] = { "0", "65536", "http", "10-5", "1-", "-3", "8080x",
			      "", " 80" };
	uint16_t out[NET_PORTS_MAX];
	char err[128];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *v[] = { bad[i] };

		err[0] = '\0';
		ck_assert_int_eq(net_parse_ports(v, 1, out, NET_PORTS_MAX, err,
						 sizeof(err)), -EINVAL);
		ck_assert_ptr_nonnull(strstr(err, bad[i]));
	}
}
END_TEST

START_TEST(ports_too_many)
{
	const char *v[] = { "1-2000" };
	uint16_t out[NET_PORTS_MAX];
	char err[128];

	ck_assert_int_eq(net_parse_ports(v, 1, out, NET_PORTS_MAX, err,
					 sizeof(err)), -E2BIG);
	ck_assert_int_eq(net_parse_ports(NULL, 0, out, NET_PORTS_MAX, err,
					 sizeof(err)), 0);
}
END_TEST

START_TEST(addr_formatting)
{
	uint8_t v4[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3 };
	uint8_t v6[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 };
	uint8_t any[16] = { 0 };
	char b[64];

	ck_assert_str_eq(net_fmt_addr(v4, b, sizeof(b)), "10.1.2.3");
	ck_assert_str_eq(net_fmt_addr(v6, b, sizeof(b)), "fe80::1");
	ck_assert_str_eq(net_fmt_endpoint(v4, 443, b, sizeof(b)), "10.1.2.3:443");
	ck_assert_str_eq(net_fmt_endpoint(v6, 22, b, sizeof(b)), "[fe80::1]:22");
	ck_assert_str_eq(net_fmt_endpoint(any, 0, b, sizeof(b)), "[::]:0");
}
END_TEST

START_TEST(cgroup2_mount)
{
	const char *hybrid =
		"sysfs /sys sysfs rw 0 0\n"
		"cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n"
		"cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
	const char *none = "proc /proc proc rw 0 0\ncgroup /x cgroup rw 0 0";
	char out[64];

	ck_assert_int_eq(net_find_cgroup2(hybrid, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "/sys/fs/cgroup/unified");
	ck_assert_int_eq(net_find_cgroup2(none, out, sizeof(out)), -ENOENT);
	ck_assert_int_eq(net_find_cgroup2("", out, sizeof(out)), -ENOENT);
}
END_TEST

static struct net_top_row row(uint64_t key, uint64_t bytes)
{
	struct net_top_row r;

	memset(&r, 0, sizeof(r));
	r.key = key;
	r.bytes = bytes;
	r.tx_bytes = bytes;
	return r;
}

START_TEST(top_keeps_largest)
{
	struct net_top t;

	ck_assert_int_eq(net_top_init(&t, 3), 0);
	for (uint64_t k = 1; k <= 6; k++) {
		struct net_top_row r = row(k, k * 100);

		net_top_offer(&t, &r);
	}
	ck_assert_uint_eq(t.n, 3);
	ck_assert_uint_eq(t.rows[0].key, 6);
	ck_assert_uint_eq(t.rows[1].key, 5);
	ck_assert_uint_eq(t.rows[2].key, 4);
	/* A smaller row does not get in. */
	struct net_top_row small = row(7, 50);
	net_top_offer(&t, &small);
	ck_assert_uint_eq(t.rows[2].key, 4);
	/* The same key replaces its row and re-sorts. */
	struct net_top_row grown = row(4, 1000);
	net_top_offer(&t, &grown);
	ck_assert_uint_eq(t.n, 3);
	ck_assert_uint_eq(t.rows[0].key, 4);
	ck_assert_uint_eq(t.rows[0].bytes, 1000);
	ck_assert_uint_eq(t.rows[1].key, 6);
	ck_assert_uint_eq(t.rows[2].key, 5);
	/* Shrinking an entry moves it down, and it is not lost. */
	struct net_top_row shrunk = row(6, 10);
	net_top_offer(&t, &shrunk);
	ck_assert_uint_eq(t.n, 3);
	ck_assert_uint_eq(t.rows[2].key, 6);
	net_top_free(&t);

	ck_assert_int_eq(net_top_init(&t, 0), 0);
	net_top_offer(&t, &small);
	ck_assert_uint_eq(t.n, 0);
	net_top_free(&t);
}
END_TEST

START_TEST(bytes_formatting)
{
	char b[32];

	ck_assert_str_eq(net_fmt_bytes(0, b, sizeof(b)), "0 B");
	ck_assert_str_eq(net_fmt_bytes(1023, b, sizeof(b)), "1023 B");
	ck_assert_str_eq(net_fmt_bytes(1536, b, sizeof(b)), "1.5 KiB");
	ck_assert_str_eq(net_fmt_bytes(5ull << 20, b, sizeof(b)), "5.0 MiB");
}
END_TEST

START_TEST(report_text)
{
	struct net_proc_row procs[3];
	struct net_top t;
	char buf[4096];
	size_t n;

	memset(procs, 0, sizeof(procs));
	procs[0].pid = 10;
	strcpy(procs[0].comm, "small");
	strcpy(procs[0].proto, "udp");
	procs[0].tx_bytes = 100;
	procs[1].pid = 20;
	strcpy(procs[1].comm, "big");
	strcpy(procs[1].proto, "tcp");
	procs[1].rx_bytes = 3 << 20;
	procs[1].retransmits = 7;
	procs[2].pid = 30;
	strcpy(procs[2].comm, "mid");
	strcpy(procs[2].proto, "tcp");
	procs[2].tx_bytes = 5000;

	ck_assert_int_eq(net_top_init(&t, 2), 0);
	struct net_top_row r = row(1, 4096);
	r.pid = 20;
	strcpy(r.comm, "big");
	strcpy(r.proto, "tcp");
	r.laddr[10] = r.laddr[11] = 0xff;
	r.laddr[12] = 127;
	r.laddr[15] = 1;
	memcpy(r.raddr, r.laddr, 16);
	r.lport = 5000;
	r.rport = 40000;
	r.srtt_ns = 55000;
	r.closed = 1;
	net_top_offer(&t, &r);

	n = net_format_report(buf, sizeof(buf), 4, procs, 3, 2, &t);
	ck_assert_uint_eq(n, strlen(buf));
	ck_assert_ptr_nonnull(strstr(buf, "net: 4 active connections\n"));
	/* Sorted by traffic, cut at 2 rows: big, mid; small is left out. */
	char *big = strstr(buf, "\n20 "), *mid = strstr(buf, "\n30 ");
	ck_assert_ptr_nonnull(big);
	ck_assert_ptr_nonnull(mid);
	ck_assert(big < mid);
	ck_assert_ptr_null(strstr(buf, "small"));
	ck_assert_ptr_nonnull(strstr(buf, "3.0 MiB"));
	ck_assert_ptr_nonnull(strstr(buf, "127.0.0.1:5000"));
	ck_assert_ptr_nonnull(strstr(buf, "127.0.0.1:40000"));
	ck_assert_ptr_nonnull(strstr(buf, " 55 closed"));

	/* Truncation behaves like snprintf. */
	char tiny[16];
	size_t m = net_format_report(tiny, sizeof(tiny), 4, procs, 3, 2, &t);
	ck_assert_uint_eq(m, n);
	ck_assert_uint_eq(strlen(tiny), sizeof(tiny) - 1);
	net_top_free(&t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("net");
	TCase *tc = tcase_create("logic");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, ports_single_and_ranges);
	tcase_add_test(tc, ports_rejects_bad_entries);
	tcase_add_test(tc, ports_too_many);
	tcase_add_test(tc, addr_formatting);
	tcase_add_test(tc, cgroup2_mount);
	tcase_add_test(tc, top_keeps_largest);
	tcase_add_test(tc, bytes_formatting);
	tcase_add_test(tc, report_text);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
