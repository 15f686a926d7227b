/* SPDX-License-Identifier: MIT */
/* Unit tests of the net probe's user-side logic (plugins/net/net_*.c) and
 * its ring handler, fed with synthetic records through a stand-in host
 * (probe_host.h), no kernel. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/sb.h"
#include "ntcore/kit/topn.h"

#include "net_int.h"
#include "probe_host.h"

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

#define ROW(t, i) ((const struct net_top_row *)nt_topn_at(&(t), (i), NULL))

START_TEST(top_keeps_largest)
{
	struct nt_topn t;

	ck_assert_int_eq(nt_topn_init(&t, 3, sizeof(struct net_top_row)), 0);
	for (uint64_t k = 1; k <= 6; k++) {
		struct net_top_row r = row(k, k * 100);

		net_top_offer(&t, &r);
	}
	ck_assert_uint_eq(nt_topn_count(&t), 3);
	ck_assert_uint_eq(ROW(t, 0)->key, 6);
	ck_assert_uint_eq(ROW(t, 1)->key, 5);
	ck_assert_uint_eq(ROW(t, 2)->key, 4);
	/* A smaller row does not get in. */
	struct net_top_row small = row(7, 50);
	net_top_offer(&t, &small);
	ck_assert_uint_eq(ROW(t, 2)->key, 4);
	/* The same key replaces its row and re-sorts. */
	struct net_top_row grown = row(4, 1000);
	net_top_offer(&t, &grown);
	ck_assert_uint_eq(nt_topn_count(&t), 3);
	ck_assert_uint_eq(ROW(t, 0)->key, 4);
	ck_assert_uint_eq(ROW(t, 0)->bytes, 1000);
	ck_assert_uint_eq(ROW(t, 1)->key, 6);
	ck_assert_uint_eq(ROW(t, 2)->key, 5);
	/* Shrinking an entry moves it down, and it is not lost. */
	struct net_top_row shrunk = row(6, 10);
	net_top_offer(&t, &shrunk);
	ck_assert_uint_eq(nt_topn_count(&t), 3);
	ck_assert_uint_eq(ROW(t, 2)->key, 6);
	nt_topn_fini(&t);

	ck_assert_int_eq(nt_topn_init(&t, 0, sizeof(struct net_top_row)), 0);
	net_top_offer(&t, &small);
	ck_assert_uint_eq(nt_topn_count(&t), 0);
	nt_topn_fini(&t);
}
END_TEST

START_TEST(bytes_formatting)
{
	char b[32];

	ck_assert_str_eq(nt_fmt_bytes(0, b, sizeof(b)), "0 B");
	ck_assert_str_eq(nt_fmt_bytes(1023, b, sizeof(b)), "1023 B");
	ck_assert_str_eq(nt_fmt_bytes(1536, b, sizeof(b)), "1.5 KiB");
	ck_assert_str_eq(nt_fmt_bytes(5ull << 20, b, sizeof(b)), "5.0 MiB");
}
END_TEST

START_TEST(report_text)
{
	struct net_proc_row procs[3];
	struct nt_topn t;
	struct nt_sb sb;
	const char *buf;

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

	ck_assert_int_eq(nt_topn_init(&t, 2, sizeof(struct net_top_row)), 0);
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

	nt_sb_init(&sb, 4095);
	net_format_report(&sb, 4, procs, 3, 2, &t);
	ck_assert(!sb.failed);
	buf = nt_sb_str(&sb);
	ck_assert_uint_eq(sb.len, strlen(buf));
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

	/* Cut short, the text ends at a whole append (the kit's builder):
	 * here the first line does not fit, so nothing is kept. */
	char tiny[16];
	struct nt_sb small;
	nt_sb_init_buf(&small, tiny, sizeof(tiny));
	net_format_report(&small, 4, procs, 3, 2, &t);
	ck_assert(small.failed);
	ck_assert_uint_eq(small.len, 0);
	/* With room for the first line only, that line is kept whole. */
	char some[40];
	nt_sb_init_buf(&small, some, sizeof(some));
	net_format_report(&small, 4, procs, 3, 2, &t);
	ck_assert_str_eq(some, "net: 4 active connections\n");
	nt_sb_fini(&sb);
	nt_topn_fini(&t);
}
END_TEST

/* ---- the ring handler, on synthetic records ------------------------- */

static struct net_cfg ring_cfg;

/* A state as init and attach leave it, with the stand-in host. */
static void ring_state(struct net_state *st)
{
	memset(st, 0, sizeof(*st));
	memset(&ring_cfg, 0, sizeof(ring_cfg));
	ring_cfg.tcp = ring_cfg.udp = true;
	ring_cfg.conn_events = true;
	ring_cfg.top_n = 2;
	st->inst = &PH.inst;
	st->host = &probe_host;
	st->cfg = &ring_cfg;
	st->ev_open = 1;
	st->ev_close = 2;
	st->ev_reset = 3;
	st->ev_fail = 4;
	for (int i = 0; i < NET_M_COUNT; i++)
		st->m[i] = probe_host.metric_register(st->inst, &net_metrics[i]);
	ck_assert_int_eq(nt_topn_init(&st->closed_top, 2,
				      sizeof(struct net_top_row)), 0);
	ph_reset();
}

static struct net_conn_ev conn_rec(uint32_t type, uint64_t cookie,
				   uint64_t tx, uint64_t rx)
{
	struct net_conn_ev e;

	memset(&e, 0, sizeof(e));
	e.hdr.type = type;
	e.hdr.size = sizeof(e);
	e.hdr.pid = 777;
	e.hdr.tid = 778;
	strcpy(e.hdr.comm, "curl");
	e.laddr[10] = e.laddr[11] = 0xff;
	e.laddr[12] = 127;
	e.laddr[15] = 1;
	memcpy(e.raddr, e.laddr, 16);
	e.lport = 40000;
	e.rport = 443;
	strcpy(e.proto, "tcp");
	e.family = 4;
	e.reason = NET_EV_CLOSE;
	e.closed = 1;
	strcpy(e.role, "active");
	e.cookie = cookie;
	e.tx_bytes = tx;
	e.rx_bytes = rx;
	e.srtt_ns = 55000;
	return e;
}

START_TEST(ring_close_record)
{
	struct net_state st;
	struct net_conn_ev e, grown;
	const struct net_top_row *r;

	ring_state(&st);
	e = conn_rec(2, 0xc0ffee, 100, 900);
	ck_assert_int_eq(net_on_record(&st, &e, sizeof(e)), 0);
	ck_assert_uint_eq(PH.n_events, 1);
	ck_assert_int_eq(memcmp(PH.events[0], &e, sizeof(e)), 0);
	ck_assert_int_eq(ph_find("observe", "ntcore_net_tcp_srtt_seconds{}"), 0);
	ck_assert(PH.updates[0].value == 55e-6);
	ck_assert_uint_eq(nt_topn_count(&st.closed_top), 1);
	r = nt_topn_at(&st.closed_top, 0, NULL);
	ck_assert_uint_eq(r->key, 0xc0ffee);
	ck_assert_uint_eq(r->bytes, 1000);
	ck_assert_uint_eq(r->pid, 777);
	ck_assert_str_eq(r->comm, "curl");
	ck_assert_str_eq(r->proto, "tcp");
	ck_assert_int_eq(r->closed, 1);
	/* The same socket again replaces its row. */
	grown = conn_rec(2, 0xc0ffee, 5000, 5000);
	net_on_record(&st, &grown, sizeof(grown));
	ck_assert_uint_eq(nt_topn_count(&st.closed_top), 1);
	ck_assert_uint_eq(((const struct net_top_row *)
			   nt_topn_at(&st.closed_top, 0, NULL))->bytes, 10000);
	/* A UDP close has no RTT to observe. */
	e = conn_rec(2, 0xbeef, 1, 1);
	strcpy(e.proto, "udp");
	net_on_record(&st, &e, sizeof(e));
	ck_assert_uint_eq(PH.n_updates, 2);
	ck_assert_uint_eq(PH.n_events, 3);
	ck_assert_uint_eq(nt_topn_count(&st.closed_top), 2);
	ph_reset();
	nt_topn_fini(&st.closed_top);
}
END_TEST

START_TEST(ring_fail_record)
{
	struct net_state st;
	struct net_conn_ev e;

	ring_state(&st);
	e = conn_rec(4, 1, 0, 0);
	e.reason = NET_EV_CONNECT_FAIL;
	memcpy(e.hdr.comm, "bad\xfe", 5);
	net_on_record(&st, &e, sizeof(e));
	net_on_record(&st, &e, sizeof(e));
	ck_assert_int_eq(ph_find("add", "ntcore_net_tcp_connect_failures_total{777,bad\xef\xbf\xbd}"), 0);
	ck_assert_int_eq(ph_find("add", "ntcore_net_tcp_connect_failures_total{777,bad\xef\xbf\xbd}"), 0);
	ck_assert_uint_eq(PH.n_updates, 2);
	ck_assert_uint_eq(PH.n_events, 2);
	ck_assert_uint_eq(nt_topn_count(&st.closed_top), 0);
	/* conn_events = false: counted, not published. */
	ring_cfg.conn_events = false;
	net_on_record(&st, &e, sizeof(e));
	ck_assert_uint_eq(PH.n_updates, 3);
	ck_assert_uint_eq(PH.n_events, 2);
	ph_reset();
	nt_topn_fini(&st.closed_top);
}
END_TEST

START_TEST(ring_bad_records)
{
	struct net_state st;
	struct net_conn_ev e;

	ring_state(&st);
	e = conn_rec(2, 9, 10, 10);
	e.hdr.size = sizeof(e) + 8; /* more than the ring holds: counted */
	net_on_record(&st, &e, sizeof(e));
	ck_assert_uint_eq(PH.drops_bpf, 1);
	e.hdr.size = sizeof(e);
	net_on_record(&st, &e, sizeof(e) - 1); /* short: ignored */
	net_on_record(&st, &e, 0);
	ck_assert_uint_eq(PH.n_events, 0);
	ck_assert_uint_eq(PH.n_updates, 0);
	ck_assert_uint_eq(PH.drops_bpf, 1);
	ck_assert_uint_eq(nt_topn_count(&st.closed_top), 0);
	nt_topn_fini(&st.closed_top);
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
	tcase_add_test(tc, ring_close_record);
	tcase_add_test(tc, ring_fail_record);
	tcase_add_test(tc, ring_bad_records);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
