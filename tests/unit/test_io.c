/* SPDX-License-Identifier: MIT */
/* Unit tests of the io probe's bucketing (io.h, shared with the BPF side),
 * its user-side logic (plugins/io/io_*.c) and its ring handler, fed with
 * synthetic records through a stand-in host (probe_host.h), no kernel. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntcore/kit/sb.h"
#include "ntcore/kit/topn.h"

#include "io_int.h"
#include "probe_host.h"

START_TEST(lat_slots_match_bounds)
{
	ck_assert_uint_eq(io_lat_slot(0), 0);
	ck_assert_uint_eq(io_lat_slot(1), 0);
	ck_assert_uint_eq(io_lat_slot(1000), 0);
	ck_assert_uint_eq(io_lat_slot(1001), 1);
	ck_assert_uint_eq(io_lat_slot(2000), 1);
	ck_assert_uint_eq(io_lat_slot(2001), 2);
	ck_assert_uint_eq(io_lat_slot(1000ull << 26), 26);
	ck_assert_uint_eq(io_lat_slot((1000ull << 26) + 1), IO_LAT_SLOTS);
	ck_assert_uint_eq(io_lat_slot(~0ull / 2), IO_LAT_SLOTS);
	/* The exported bounds are the slots' upper edges: a latency exactly
	 * on bound k lands in k, one ns above it in k + 1 (le semantics). */
	for (int k = 0; k < IO_LAT_SLOTS; k++) {
		uint64_t edge_ns = (uint64_t)(io_lat_bounds_s[k] * 1e9 + 0.5);

		ck_assert_uint_eq(edge_ns, 1000ull << k);
		ck_assert_uint_eq(io_lat_slot(edge_ns), (uint32_t)k);
		ck_assert_uint_eq(io_lat_slot(edge_ns + 1), (uint32_t)k + 1);
	}
}
END_TEST

START_TEST(size_slots_match_bounds)
{
	ck_assert_uint_eq(io_size_slot(0), 0);
	ck_assert_uint_eq(io_size_slot(512), 0);
	ck_assert_uint_eq(io_size_slot(513), 1);
	ck_assert_uint_eq(io_size_slot(4095), 3);
	ck_assert_uint_eq(io_size_slot(4096), 3);
	ck_assert_uint_eq(io_size_slot(4097), 4);
	ck_assert_uint_eq(io_size_slot(1 << 20), 11);
	ck_assert_uint_eq(io_size_slot(8u << 20), 14);
	ck_assert_uint_eq(io_size_slot((8u << 20) + 1), IO_SIZE_SLOTS);
	for (int k = 0; k < IO_SIZE_SLOTS; k++) {
		ck_assert(io_size_bounds_b[k] == (double)(512ull << k));
		ck_assert_uint_eq(io_size_slot(512ull << k), (uint32_t)k);
	}
}
END_TEST

START_TEST(ops)
{
	ck_assert_uint_eq(io_op_of(0, 4096), IO_OP_READ);
	ck_assert_uint_eq(io_op_of(1, 4096), IO_OP_WRITE);
	/* Flags above the op byte (REQ_SYNC, REQ_FUA...) do not matter. */
	ck_assert_uint_eq(io_op_of(1 | (1u << 11) | (1u << 17), 512), IO_OP_WRITE);
	/* The empty PREFLUSH write of fsync() is a flush. */
	ck_assert_uint_eq(io_op_of(1 | (1u << 18), 0), IO_OP_FLUSH);
	ck_assert_uint_eq(io_op_of(2, 0), IO_OP_FLUSH);
	ck_assert_uint_eq(io_op_of(3, 1 << 20), IO_OP_DISCARD);
	ck_assert_uint_eq(io_op_of(5, 4096), IO_OP_DISCARD);
	ck_assert_uint_eq(io_op_of(9, 4096), IO_OP_OTHER);
	ck_assert_uint_eq(io_op_of(35, 0), IO_OP_OTHER);
	ck_assert_str_eq(io_op_str(IO_OP_READ), "read");
	ck_assert_str_eq(io_op_str(IO_OP_WRITE), "write");
	ck_assert_str_eq(io_op_str(IO_OP_DISCARD), "discard");
	ck_assert_str_eq(io_op_str(77), "other");
}
END_TEST

/* A fake sysfs: vda (254:0) with partition vda1 (254:1). */
static char sysfs[64];

static void put(const char *rel, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", sysfs, rel);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void mk(const char *rel)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", sysfs, rel);
	ck_assert_int_eq(mkdir(path, 0755), 0);
}

static void sysfs_setup(void)
{
	snprintf(sysfs, sizeof(sysfs), "/tmp/ntcore-test-io.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(sysfs));
	mk("class");
	mk("class/block");
	mk("class/block/vda");
	mk("class/block/vda1");
	mk("class/block/odd");
	put("class/block/vda/dev", "254:0\n");
	put("class/block/vda1/dev", "254:1\n");
	put("class/block/odd/dev", "garbage\n");
	mk("dev");
	mk("dev/block");
	mk("dev/block/254:0");
	mk("dev/block/254:1");
	put("dev/block/254:0/uevent", "MAJOR=254\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\n");
	put("dev/block/254:1/uevent", "MAJOR=254\nMINOR=1\nDEVNAME=vda1\nDEVTYPE=partition\n");
}

static void sysfs_teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sysfs);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(resolve_devices)
{
	uint32_t dev = 0;
	char err[320];

	ck_assert_int_eq(io_resolve_device(sysfs, "vda", &dev, err, sizeof(err)), 0);
	ck_assert_uint_eq(dev, IO_MKDEV(254, 0));
	ck_assert_int_eq(io_resolve_device(sysfs, "vda1", &dev, err, sizeof(err)), 0);
	ck_assert_uint_eq(dev, IO_MKDEV(254, 1));
	ck_assert_int_eq(io_resolve_device(sysfs, "254:1", &dev, err, sizeof(err)), 0);
	ck_assert_uint_eq(dev, (254u << 20) | 1);

	ck_assert_int_eq(io_resolve_device(sysfs, "sdz", &dev, err, sizeof(err)), -ENODEV);
	ck_assert_ptr_nonnull(strstr(err, "no block device \"sdz\" exists"));
	ck_assert_int_eq(io_resolve_device(sysfs, "254:7", &dev, err, sizeof(err)), -ENODEV);
	ck_assert_ptr_nonnull(strstr(err, "254:7"));

	const char *bad[] = { "", "a/b", "..", "254:", "254:x", "99999:1", "1:2:3" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(io_resolve_device(sysfs, bad[i], &dev, err,
						sizeof(err)) == -EINVAL,
			      "'%s' accepted", bad[i]);
	ck_assert_int_eq(io_resolve_device(sysfs, "odd", &dev, err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(device_names)
{
	char b[32];

	ck_assert_str_eq(io_dev_name(sysfs, IO_MKDEV(254, 0), b, sizeof(b)), "vda");
	ck_assert_str_eq(io_dev_name(sysfs, IO_MKDEV(254, 1), b, sizeof(b)), "vda1");
	ck_assert_str_eq(io_dev_name(sysfs, IO_MKDEV(8, 16), b, sizeof(b)), "8:16");
}
END_TEST

START_TEST(stats_sum)
{
	struct io_stats a, b;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	strcpy(b.comm, "dd");
	b.ops = 3;
	b.bytes = 12288;
	b.small_ops = 1;
	b.completed = 2;
	b.queue_ns_sum = 100;
	b.service_ns_sum = 200;
	b.queue_hist[2] = 3;
	b.service_hist[IO_LAT_SLOTS] = 1;
	b.size_hist[IO_SIZE_SLOTS] = 2;
	io_stats_add(&a, &b);
	io_stats_add(&a, &b);
	ck_assert_str_eq(a.comm, "dd");
	ck_assert_uint_eq(a.ops, 6);
	ck_assert_uint_eq(a.bytes, 24576);
	ck_assert_uint_eq(a.small_ops, 2);
	ck_assert_uint_eq(a.completed, 4);
	ck_assert_uint_eq(a.queue_ns_sum, 200);
	ck_assert_uint_eq(a.service_ns_sum, 400);
	ck_assert_uint_eq(a.queue_hist[2], 6);
	ck_assert_uint_eq(a.service_hist[IO_LAT_SLOTS], 2);
	ck_assert_uint_eq(a.size_hist[IO_SIZE_SLOTS], 4);
	ck_assert_int_eq(sizeof(struct io_stats) % 8, 0);
}
END_TEST

START_TEST(quantiles)
{
	__u64 h[IO_LAT_SLOTS + 1] = { 0 };

	ck_assert_uint_eq(io_lat_quantile_ns(h, 0.5), 0);
	h[3] = 90;  /* <= 8 us */
	h[10] = 10; /* <= 1024 us */
	ck_assert_uint_eq(io_lat_quantile_ns(h, 0.5), 8000);
	ck_assert_uint_eq(io_lat_quantile_ns(h, 0.9), 8000);
	ck_assert_uint_eq(io_lat_quantile_ns(h, 0.91), 1024000);
	ck_assert_uint_eq(io_lat_quantile_ns(h, 0.99), 1024000);
	ck_assert_uint_eq(io_lat_quantile_ns(h, 1.0), 1024000);
	h[IO_LAT_SLOTS] = 100;
	ck_assert_uint_eq(io_lat_quantile_ns(h, 0.99), UINT64_MAX);
}
END_TEST

static struct io_slowest slow(uint64_t lat, uint32_t pid)
{
	struct io_slowest s;

	memset(&s, 0, sizeof(s));
	s.latency_ns = lat;
	s.pid = pid;
	s.dev = IO_MKDEV(254, 0);
	s.op = IO_OP_WRITE;
	s.bytes = 1 << 20;
	strcpy(s.comm, "writer");
	return s;
}

START_TEST(slow_top)
{
	struct nt_topn t;
	uint64_t lats[] = { 5, 50, 0, 20, 40, 10, 30 };

	ck_assert_int_eq(nt_topn_init(&t, 3, sizeof(struct io_slowest)), 0);
	for (size_t i = 0; i < sizeof(lats) / sizeof(lats[0]); i++) {
		struct io_slowest s = slow(lats[i], (uint32_t)i);

		io_slow_offer(&t, &s);
	}
	ck_assert_uint_eq(nt_topn_count(&t), 3);
	ck_assert_uint_eq(((const struct io_slowest *)nt_topn_at(&t, 0, NULL))->latency_ns, 50);
	ck_assert_uint_eq(((const struct io_slowest *)nt_topn_at(&t, 1, NULL))->latency_ns, 40);
	ck_assert_uint_eq(((const struct io_slowest *)nt_topn_at(&t, 2, NULL))->latency_ns, 30);
	/* An empty per-CPU slot (no latency) is never kept. */
	nt_topn_reset(&t);
	struct io_slowest none = slow(0, 1);
	io_slow_offer(&t, &none);
	ck_assert_uint_eq(nt_topn_count(&t), 0);
	nt_topn_fini(&t);
}
END_TEST

START_TEST(slowest_victim)
{
	struct io_slowest_set set;

	memset(&set, 0, sizeof(set));
	ck_assert_uint_eq(io_slowest_victim(&set), 0);
	set.s[0].latency_ns = 50;
	ck_assert_uint_eq(io_slowest_victim(&set), 1);
	set.s[1].latency_ns = 40;
	set.s[2].latency_ns = 60;
	set.s[3].latency_ns = 70;
	ck_assert_uint_eq(io_slowest_victim(&set), 1);
	set.s[1].latency_ns = 80;
	ck_assert_uint_eq(io_slowest_victim(&set), 0);
	ck_assert_int_eq(sizeof(struct io_slowest) % 8, 0);
}
END_TEST

static const char *names_cb(void *arg, uint32_t dev)
{
	(void)arg;
	return dev == IO_MKDEV(254, 0) ? "vda" : "?";
}

START_TEST(report_text)
{
	struct io_row devs[2], procs[2];
	struct nt_topn t;
	struct nt_sb sb;
	const char *buf;

	memset(devs, 0, sizeof(devs));
	memset(procs, 0, sizeof(procs));
	devs[0].dev = IO_MKDEV(254, 0);
	devs[0].op = IO_OP_WRITE;
	strcpy(devs[0].name, "vda");
	devs[0].st.ops = 4;
	devs[0].st.small_ops = 1;
	devs[0].st.bytes = 3 << 20;
	devs[0].st.queue_hist[0] = 4;
	devs[0].st.service_hist[9] = 4; /* <= 512 us */
	devs[1] = devs[0];
	devs[1].op = IO_OP_READ;
	devs[1].st.small_ops = 0;
	procs[0] = devs[0];
	procs[0].pid = 42;
	strcpy(procs[0].comm, "dd");
	procs[1] = devs[1];
	procs[1].pid = 7;
	procs[1].st.bytes = 1;
	strcpy(procs[1].comm, "cat");

	ck_assert_int_eq(nt_topn_init(&t, 2, sizeof(struct io_slowest)), 0);
	struct io_slowest s = slow(12500000, 42);
	s.queue_ns = 500000;
	s.service_ns = 12000000;
	s.sector = 2048;
	io_slow_offer(&t, &s);

	struct io_rows rows = { .devs = devs, .n_devs = 2, .procs = procs,
				.n_procs = 2 };
	nt_sb_init(&sb, 8191);
	io_format_report(&sb, &rows, 1, &t, names_cb, NULL);
	ck_assert(!sb.failed);
	buf = nt_sb_str(&sb);
	ck_assert_uint_eq(sb.len, strlen(buf));
	/* Devices sorted by op: read before write. */
	char *rd = strstr(buf, "vda        read"), *wr = strstr(buf, "vda        write");
	ck_assert_ptr_nonnull(rd);
	ck_assert_ptr_nonnull(wr);
	ck_assert(rd < wr);
	ck_assert_ptr_nonnull(strstr(wr, "25.0%"));
	ck_assert_ptr_nonnull(strstr(wr, "3.0MiB"));
	ck_assert_ptr_nonnull(strstr(wr, "512us"));
	/* One process row: the busiest (dd), not cat. */
	ck_assert_ptr_nonnull(strstr(buf, "42       dd"));
	ck_assert_ptr_null(strstr(buf, "cat"));
	ck_assert_ptr_nonnull(strstr(buf, "slowest requests:"));
	ck_assert_ptr_nonnull(strstr(buf, "writer           vda        write"));
	ck_assert_ptr_nonnull(strstr(buf, "12ms"));
	ck_assert_ptr_nonnull(strstr(buf, " 2048 "));
	nt_sb_fini(&sb);
	nt_topn_fini(&t);
}
END_TEST

/* ---- the ring handler, on synthetic records ------------------------- */

static struct io_cfg ring_cfg;

/* A state as init and attach leave it, with the stand-in host. */
static void ring_state(struct io_state *st)
{
	memset(st, 0, sizeof(*st));
	memset(&ring_cfg, 0, sizeof(ring_cfg));
	ring_cfg.top_n = 10;
	st->inst = &PH.inst;
	st->host = &probe_host;
	st->cfg = &ring_cfg;
	st->sysfs = sysfs;
	st->ev_slow = 3;
	st->ev_request = 4;
	st->ev_report = 5;
	st->m[IO_M_SLOW] = probe_host.metric_register(st->inst,
						      &io_metrics[IO_M_SLOW]);
	ck_assert_int_eq(nt_hmap_init(&st->names, sizeof(uint32_t),
				      IO_DEV_NAME_LEN, 0), 0);
	ph_reset();
}

static struct io_slow_ev slow_rec(uint32_t type, uint32_t dev, const char *op)
{
	struct io_slow_ev e;

	memset(&e, 0, sizeof(e));
	e.hdr.type = type;
	e.hdr.size = sizeof(e);
	e.hdr.ts_ns = 123456789;
	e.hdr.pid = 4242;
	e.hdr.tid = 4243;
	strcpy(e.hdr.comm, "dd");
	e.dev = dev;
	e.bytes = 4096;
	snprintf(e.op, sizeof(e.op), "%s", op);
	e.sector = 2048;
	e.queue_ns = 1000;
	e.service_ns = 60000000;
	e.latency_ns = 60001000;
	e.error = -5;
	return e;
}

START_TEST(ring_slow_record)
{
	struct io_state st;
	struct io_slow_ev e, e2;

	ring_state(&st);
	e = slow_rec(3, IO_MKDEV(254, 1), "write");
	ck_assert_int_eq(io_on_record(&st, &e, sizeof(e)), 0);
	ck_assert_uint_eq(PH.n_events, 1);
	ck_assert_int_eq(memcmp(PH.events[0], &e, sizeof(e)), 0);
	ck_assert_uint_eq(PH.n_updates, 1);
	ck_assert_int_eq(ph_find("add", "ntcore_io_slow_requests_total{254:1,vda1,write}"), 0);
	ck_assert(PH.updates[0].value == 1.0);
	/* A device sysfs does not name is labelled MAJOR:MINOR. */
	e2 = slow_rec(3, IO_MKDEV(8, 16), "read");
	io_on_record(&st, &e2, sizeof(e2));
	ck_assert_int_eq(ph_find("add", "ntcore_io_slow_requests_total{8:16,8:16,read}"), 1);
	ck_assert_uint_eq(PH.n_events, 2);
	ck_assert_uint_eq(PH.drops_bpf, 0);
	ph_reset();
	nt_hmap_fini(&st.names);
}
END_TEST

START_TEST(ring_request_record)
{
	struct io_state st;
	struct io_request_ev r;

	ring_state(&st);
	memset(&r, 0, sizeof(r));
	r.hdr.type = 4;
	r.hdr.size = sizeof(r);
	r.dev = IO_MKDEV(254, 0);
	r.bytes = 512;
	strcpy(r.op, "read");
	r.queue_ns = 77;
	io_on_record(&st, &r, sizeof(r));
	ck_assert_uint_eq(PH.n_events, 1);
	ck_assert_int_eq(memcmp(PH.events[0], &r, sizeof(r)), 0);
	ck_assert_uint_eq(PH.n_updates, 0); /* requests count in BPF maps */
	ph_reset();
	nt_hmap_fini(&st.names);
}
END_TEST

START_TEST(ring_bad_records)
{
	struct io_state st;
	struct io_slow_ev e;

	ring_state(&st);
	/* A header that claims more than the ring holds: dropped, counted. */
	e = slow_rec(3, IO_MKDEV(254, 0), "write");
	e.hdr.size = sizeof(e) + 1;
	io_on_record(&st, &e, sizeof(e));
	ck_assert_uint_eq(PH.drops_bpf, 1);
	/* Too short for io.slow, and too short for a header: ignored. */
	e = slow_rec(3, IO_MKDEV(254, 0), "write");
	e.hdr.size = sizeof(struct io_request_ev);
	io_on_record(&st, &e, sizeof(struct io_request_ev));
	io_on_record(&st, &e, 3);
	/* A type this instance did not register: ignored. */
	e = slow_rec(99, IO_MKDEV(254, 0), "write");
	io_on_record(&st, &e, sizeof(e));
	ck_assert_uint_eq(PH.n_events, 0);
	ck_assert_uint_eq(PH.n_updates, 0);
	ck_assert_uint_eq(PH.drops_bpf, 1);
	nt_hmap_fini(&st.names);
}
END_TEST

START_TEST(comm_labels)
{
	char out[IO_COMM_LABEL_LEN];
	char comm[NT_COMM_LEN] = "kworker/u8:2";

	io_comm_label(out, comm);
	ck_assert_str_eq(out, "kworker/u8:2");
	/* A byte that is not UTF-8 becomes U+FFFD; a full 16 bytes stop. */
	memcpy(comm, "ab\xff" "cdefghijklmnop", NT_COMM_LEN);
	io_comm_label(out, comm);
	ck_assert_str_eq(out, "ab\xef\xbf\xbd" "cdefghijklmno");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("io");
	TCase *tc = tcase_create("logic");
	TCase *fs = tcase_create("sysfs");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, lat_slots_match_bounds);
	tcase_add_test(tc, size_slots_match_bounds);
	tcase_add_test(tc, ops);
	tcase_add_test(tc, stats_sum);
	tcase_add_test(tc, quantiles);
	tcase_add_test(tc, slow_top);
	tcase_add_test(tc, slowest_victim);
	tcase_add_test(tc, report_text);
	tcase_add_checked_fixture(fs, sysfs_setup, sysfs_teardown);
	tcase_add_test(fs, resolve_devices);
	tcase_add_test(fs, device_names);
	tcase_add_test(fs, ring_slow_record);
	tcase_add_test(fs, ring_request_record);
	tcase_add_test(fs, ring_bad_records);
	tcase_add_test(tc, comm_labels);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, fs);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
