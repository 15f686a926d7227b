/* SPDX-License-Identifier: MIT */
/* Unit tests of the io probe's bucketing (io.h, shared with the BPF side)
 * and user-side logic (plugins/io/io_logic.c). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_logic.h"

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
	struct io_slow_top t;
	uint64_t lats[] = { 5, 50, 0, 20, 40, 10, 30 };

	ck_assert_int_eq(io_slow_top_init(&t, 3), 0);
	for (size_t i = 0; i < sizeof(lats) / sizeof(lats[0]); i++) {
		struct io_slowest s = slow(lats[i], (uint32_t)i);

		io_slow_top_offer(&t, &s);
	}
	ck_assert_uint_eq(t.n, 3);
	ck_assert_uint_eq(t.rows[0].latency_ns, 50);
	ck_assert_uint_eq(t.rows[1].latency_ns, 40);
	ck_assert_uint_eq(t.rows[2].latency_ns, 30);
	io_slow_top_free(&t);
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
	struct io_slow_top t;
	char buf[8192];
	size_t n;

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

	ck_assert_int_eq(io_slow_top_init(&t, 2), 0);
	struct io_slowest s = slow(12500000, 42);
	s.queue_ns = 500000;
	s.service_ns = 12000000;
	s.sector = 2048;
	io_slow_top_offer(&t, &s);

	n = io_format_report(buf, sizeof(buf), devs, 2, procs, 2, 1, &t,
			     names_cb, NULL);
	ck_assert_uint_eq(n, strlen(buf));
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
	io_slow_top_free(&t);
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
	suite_add_tcase(s, tc);
	suite_add_tcase(s, fs);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
