/* SPDX-License-Identifier: MIT */
#include "io_logic.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	buf[n] = '\0';
	return (int)n;
}

static int parse_majmin(const char *s, uint32_t *dev)
{
	unsigned long ma, mi;
	char *e;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	ma = strtoul(s, &e, 10);
	if (*e != ':' || e[1] < '0' || e[1] > '9')
		return -EINVAL;
	mi = strtoul(e + 1, &e, 10);
	if ((*e != '\0' && *e != '\n') || ma > 4095 || mi > 0xfffff)
		return -EINVAL;
	*dev = IO_MKDEV(ma, mi);
	return 0;
}

int io_resolve_device(const char *sysfs, const char *spec, uint32_t *dev,
		      char *err, size_t errlen)
{
	char path[512], buf[64];
	struct stat sb;

	if (!spec[0] || strchr(spec, '/') || strcmp(spec, ".") == 0 ||
	    strcmp(spec, "..") == 0) {
		snprintf(err, errlen,
			 "\"%s\" is not a block device name (\"sda\", "
			 "\"nvme0n1p2\") or \"MAJOR:MINOR\"", spec);
		return -EINVAL;
	}
	if (spec[0] >= '0' && spec[0] <= '9' && strchr(spec, ':')) {
		if (parse_majmin(spec, dev) < 0) {
			snprintf(err, errlen,
				 "\"%s\" is not a valid \"MAJOR:MINOR\"", spec);
			return -EINVAL;
		}
		snprintf(path, sizeof(path), "%s/dev/block/%s", sysfs, spec);
		if (stat(path, &sb) < 0) {
			snprintf(err, errlen,
				 "no block device %s exists (no %s)", spec, path);
			return -ENODEV;
		}
		return 0;
	}
	snprintf(path, sizeof(path), "%s/class/block/%s/dev", sysfs, spec);
	if (read_small(path, buf, sizeof(buf)) < 0) {
		snprintf(err, errlen,
			 "no block device \"%s\" exists (no %s; see lsblk)",
			 spec, path);
		return -ENODEV;
	}
	if (parse_majmin(buf, dev) < 0) {
		snprintf(err, errlen, "%s holds \"%s\", not MAJOR:MINOR", path,
			 buf);
		return -EINVAL;
	}
	return 0;
}

const char *io_dev_name(const char *sysfs, uint32_t dev, char *buf, size_t len)
{
	char path[512], text[1024];
	const char *p;

	snprintf(path, sizeof(path), "%s/dev/block/%u:%u/uevent", sysfs,
		 IO_DEV_MAJOR(dev), IO_DEV_MINOR(dev));
	if (read_small(path, text, sizeof(text)) > 0 &&
	    (p = strstr(text, "DEVNAME="))) {
		size_t n = strcspn(p + 8, "\n");

		if (n && n < len) {
			memcpy(buf, p + 8, n);
			buf[n] = '\0';
			return buf;
		}
	}
	snprintf(buf, len, "%u:%u", IO_DEV_MAJOR(dev), IO_DEV_MINOR(dev));
	return buf;
}

const char *io_op_str(uint32_t op)
{
	static const char *const names[IO_OP_MAX] = { "read", "write", "flush",
						      "discard", "other" };

	return op < IO_OP_MAX ? names[op] : "other";
}

void io_stats_add(struct io_stats *dst, const struct io_stats *src)
{
	if (!dst->comm[0])
		memcpy(dst->comm, src->comm, sizeof(dst->comm));
	dst->ops += src->ops;
	dst->bytes += src->bytes;
	dst->small_ops += src->small_ops;
	dst->completed += src->completed;
	dst->queue_ns_sum += src->queue_ns_sum;
	dst->service_ns_sum += src->service_ns_sum;
	for (int i = 0; i <= IO_LAT_SLOTS; i++) {
		dst->queue_hist[i] += src->queue_hist[i];
		dst->service_hist[i] += src->service_hist[i];
	}
	for (int i = 0; i <= IO_SIZE_SLOTS; i++)
		dst->size_hist[i] += src->size_hist[i];
}

#define US(k) ((double)(1ull << (k)) * 1e-6)
const double io_lat_bounds_s[IO_LAT_SLOTS] = {
	US(0), US(1), US(2), US(3), US(4), US(5), US(6), US(7), US(8),
	US(9), US(10), US(11), US(12), US(13), US(14), US(15), US(16),
	US(17), US(18), US(19), US(20), US(21), US(22), US(23), US(24),
	US(25), US(26),
};
#define SZ(k) ((double)(512ull << (k)))
const double io_size_bounds_b[IO_SIZE_SLOTS] = {
	SZ(0), SZ(1), SZ(2), SZ(3), SZ(4), SZ(5), SZ(6), SZ(7), SZ(8),
	SZ(9), SZ(10), SZ(11), SZ(12), SZ(13), SZ(14),
};

uint64_t io_lat_quantile_ns(const __u64 hist[IO_LAT_SLOTS + 1], double q)
{
	uint64_t total = 0, seen = 0, rank;

	for (int i = 0; i <= IO_LAT_SLOTS; i++)
		total += hist[i];
	if (!total)
		return 0;
	rank = (uint64_t)(q * (double)total + 0.999999);
	if (rank < 1)
		rank = 1;
	for (int i = 0; i < IO_LAT_SLOTS; i++) {
		seen += hist[i];
		if (seen >= rank)
			return (1ull << i) * 1000;
	}
	return UINT64_MAX;
}

int io_slow_top_init(struct io_slow_top *t, size_t cap)
{
	t->n = 0;
	t->cap = cap;
	t->rows = cap ? calloc(cap, sizeof(*t->rows)) : NULL;
	return cap && !t->rows ? -ENOMEM : 0;
}

void io_slow_top_free(struct io_slow_top *t)
{
	free(t->rows);
	t->rows = NULL;
	t->n = t->cap = 0;
}

void io_slow_top_offer(struct io_slow_top *t, const struct io_slowest *r)
{
	size_t i;

	if (!t->cap || !r->latency_ns)
		return;
	if (t->n == t->cap && t->rows[t->n - 1].latency_ns >= r->latency_ns)
		return;
	for (i = 0; i < t->n && t->rows[i].latency_ns >= r->latency_ns; i++)
		;
	if (t->n == t->cap)
		t->n--;
	memmove(&t->rows[i + 1], &t->rows[i], (t->n - i) * sizeof(*t->rows));
	t->rows[i] = *r;
	t->n++;
}

#define APPEND(...)                                                            \
	do {                                                                   \
		int n_ = snprintf(buf + (pos < len ? pos : len),               \
				  pos < len ? len - pos : 0, __VA_ARGS__);     \
		if (n_ > 0)                                                    \
			pos += (size_t)n_;                                     \
	} while (0)

static const char *fmt_ns(uint64_t ns, char *b, size_t len)
{
	if (ns == UINT64_MAX)
		snprintf(b, len, ">67s");
	else if (ns < 1000000)
		snprintf(b, len, "%lluus", (unsigned long long)((ns + 999) / 1000));
	else if (ns < 10000000)
		snprintf(b, len, "%.1fms", (double)ns / 1e6);
	else if (ns < 10000000000ull)
		snprintf(b, len, "%.0fms", (double)ns / 1e6);
	else
		snprintf(b, len, "%.1fs", (double)ns / 1e9);
	return b;
}

static const char *fmt_bytes(uint64_t b, char *out, size_t len)
{
	if (b < 1024)
		snprintf(out, len, "%lluB", (unsigned long long)b);
	else if (b < 1048576)
		snprintf(out, len, "%.1fKiB", (double)b / 1024);
	else if (b < 1073741824ull)
		snprintf(out, len, "%.1fMiB", (double)b / 1048576);
	else
		snprintf(out, len, "%.1fGiB", (double)b / 1073741824);
	return out;
}

static int cmp_row_bytes(const void *a, const void *b)
{
	const struct io_row *x = a, *y = b;

	if (x->st.bytes != y->st.bytes)
		return x->st.bytes > y->st.bytes ? -1 : 1;
	if (x->st.ops != y->st.ops)
		return x->st.ops > y->st.ops ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static int cmp_row_dev(const void *a, const void *b)
{
	const struct io_row *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->op < y->op ? -1 : x->op > y->op;
}

static void row_line(char *buf, size_t len, size_t *ppos, const struct io_row *r,
		     bool with_proc)
{
	size_t pos = *ppos;
	char b[24], q50[16], q99[16], s50[16], s99[16], id[64];
	double small = r->st.ops ? 100.0 * (double)r->st.small_ops /
					   (double)r->st.ops : 0;

	if (with_proc)
		snprintf(id, sizeof(id), "%-8u %-16s", r->pid, r->comm);
	else
		id[0] = '\0';
	APPEND("%s%-10s %-7s %8llu %10s %6.1f%% %8s %8s %8s %8s\n", id,
	       r->name, io_op_str(r->op), (unsigned long long)r->st.ops,
	       fmt_bytes(r->st.bytes, b, sizeof(b)), small,
	       fmt_ns(io_lat_quantile_ns(r->st.queue_hist, 0.5), q50, sizeof(q50)),
	       fmt_ns(io_lat_quantile_ns(r->st.queue_hist, 0.99), q99, sizeof(q99)),
	       fmt_ns(io_lat_quantile_ns(r->st.service_hist, 0.5), s50, sizeof(s50)),
	       fmt_ns(io_lat_quantile_ns(r->st.service_hist, 0.99), s99, sizeof(s99)));
	*ppos = pos;
}

size_t io_format_report(char *buf, size_t len, struct io_row *devs,
			size_t n_devs, struct io_row *procs, size_t n_procs,
			size_t max_procs, const struct io_slow_top *slow,
			const char *(*dev_name)(void *arg, uint32_t dev),
			void *arg)
{
	static const char *hdr = "%-10s %-7s %8s %10s %7s %8s %8s %8s %8s\n";
	size_t pos = 0;

	if (len)
		buf[0] = '\0';
	/* qsort's array must not be NULL, even empty (UBSan) */
	if (n_devs > 1)
		qsort(devs, n_devs, sizeof(*devs), cmp_row_dev);
	if (n_procs > 1)
		qsort(procs, n_procs, sizeof(*procs), cmp_row_bytes);
	APPEND("io: block requests issued (queue = created to issued, service "
	       "= issued to completed; p50/p99 are bucket bounds)\n");
	APPEND(hdr, "DEVICE", "OP", "REQS", "BYTES", "<SMALL", "Q_P50",
	       "Q_P99", "SVC_P50", "SVC_P99");
	for (size_t i = 0; i < n_devs; i++)
		row_line(buf, len, &pos, &devs[i], false);
	if (n_procs && max_procs) {
		APPEND("busiest processes:\n%-8s %-16s", "PID", "COMM");
		APPEND(hdr, "DEVICE", "OP", "REQS", "BYTES", "<SMALL", "Q_P50",
		       "Q_P99", "SVC_P50", "SVC_P99");
		for (size_t i = 0; i < n_procs && i < max_procs; i++)
			row_line(buf, len, &pos, &procs[i], true);
	}
	if (slow && slow->n) {
		APPEND("slowest requests:\n%-8s %-16s %-10s %-7s %10s %14s %8s %8s %8s\n",
		       "PID", "COMM", "DEVICE", "OP", "BYTES", "SECTOR", "TOTAL",
		       "QUEUE", "SERVICE");
		for (size_t i = 0; i < slow->n; i++) {
			const struct io_slowest *s = &slow->rows[i];
			char comm[NT_COMM_LEN + 1], nb[32], b[24], t1[16], t2[16], t3[16];

			memcpy(comm, s->comm, NT_COMM_LEN);
			comm[NT_COMM_LEN] = '\0';
			if (dev_name)
				snprintf(nb, sizeof(nb), "%s", dev_name(arg, s->dev));
			else
				snprintf(nb, sizeof(nb), "%u:%u", IO_DEV_MAJOR(s->dev),
					 IO_DEV_MINOR(s->dev));
			APPEND("%-8u %-16s %-10s %-7s %10s %14llu %8s %8s %8s\n",
			       s->pid, comm, nb, io_op_str(s->op),
			       fmt_bytes(s->bytes, b, sizeof(b)),
			       (unsigned long long)s->sector,
			       fmt_ns(s->latency_ns, t1, sizeof(t1)),
			       fmt_ns(s->queue_ns, t2, sizeof(t2)),
			       fmt_ns(s->service_ns, t3, sizeof(t3)));
		}
	}
	return pos;
}
