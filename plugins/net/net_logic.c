/* SPDX-License-Identifier: MIT */
#include "net_logic.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_u16(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

static int parse_port(const char *s, const char **end, long *out)
{
	char *e;
	long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtol(s, &e, 10);
	if (errno || v < 1 || v > 65535)
		return -EINVAL;
	*out = v;
	*end = e;
	return 0;
}

int net_parse_ports(const char *const *v, uint32_t n, uint16_t *out,
		    size_t max, char *err, size_t errlen)
{
	size_t k = 0, w;

	for (uint32_t i = 0; i < n; i++) {
		const char *s = v[i], *e;
		long lo, hi;

		if (parse_port(s, &e, &lo) < 0)
			goto bad;
		hi = lo;
		if (*e == '-') {
			if (parse_port(e + 1, &e, &hi) < 0 || hi < lo)
				goto bad;
		}
		if (*e != '\0')
			goto bad;
		for (long p = lo; p <= hi; p++) {
			if (k >= max) {
				snprintf(err, errlen,
					 "more than %zu ports (\"%s\")", max, s);
				return -E2BIG;
			}
			out[k++] = (uint16_t)p;
		}
		continue;
bad:
		snprintf(err, errlen,
			 "\"%s\" is not a port (1-65535) or a range \"lo-hi\"",
			 s);
		return -EINVAL;
	}
	if (k > 1)
		qsort(out, k, sizeof(*out), cmp_u16);
	for (size_t i = w = 0; i < k; i++)
		if (w == 0 || out[w - 1] != out[i])
			out[w++] = out[i];
	return (int)w;
}

static int is_v4_mapped(const uint8_t a[16])
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return memcmp(a, prefix, 12) == 0;
}

const char *net_fmt_addr(const uint8_t a[16], char *buf, size_t len)
{
	if (is_v4_mapped(a)) {
		if (!inet_ntop(AF_INET, a + 12, buf, (socklen_t)len))
			snprintf(buf, len, "?");
	} else if (!inet_ntop(AF_INET6, a, buf, (socklen_t)len)) {
		snprintf(buf, len, "?");
	}
	return buf;
}

const char *net_fmt_endpoint(const uint8_t a[16], uint16_t port, char *buf,
			     size_t len)
{
	char ab[INET6_ADDRSTRLEN];

	net_fmt_addr(a, ab, sizeof(ab));
	if (is_v4_mapped(a))
		snprintf(buf, len, "%s:%u", ab, port);
	else
		snprintf(buf, len, "[%s]:%u", ab, port);
	return buf;
}

int net_find_cgroup2(const char *mounts, char *out, size_t outlen)
{
	const char *line = mounts;

	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t ll = nl ? (size_t)(nl - line) : strlen(line);
		char dev[64], dir[512], type[64];
		char tmp[1024];

		if (ll < sizeof(tmp)) {
			memcpy(tmp, line, ll);
			tmp[ll] = '\0';
			if (sscanf(tmp, "%63s %511s %63s", dev, dir, type) == 3 &&
			    strcmp(type, "cgroup2") == 0) {
				if (strlen(dir) >= outlen)
					return -ENAMETOOLONG;
				strcpy(out, dir);
				return 0;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}

int net_top_init(struct net_top *t, size_t cap)
{
	t->n = 0;
	t->cap = cap;
	t->rows = cap ? calloc(cap, sizeof(*t->rows)) : NULL;
	return cap && !t->rows ? -ENOMEM : 0;
}

void net_top_free(struct net_top *t)
{
	free(t->rows);
	t->rows = NULL;
	t->n = t->cap = 0;
}

void net_top_offer(struct net_top *t, const struct net_top_row *r)
{
	size_t i;

	if (!t->cap)
		return;
	for (i = 0; i < t->n; i++) {
		if (t->rows[i].key == r->key) {
			memmove(&t->rows[i], &t->rows[i + 1],
				(t->n - i - 1) * sizeof(*t->rows));
			t->n--;
			break;
		}
	}
	if (t->n == t->cap && t->rows[t->n - 1].bytes >= r->bytes)
		return;
	for (i = 0; i < t->n && t->rows[i].bytes >= r->bytes; i++)
		;
	if (t->n == t->cap)
		t->n--;
	memmove(&t->rows[i + 1], &t->rows[i], (t->n - i) * sizeof(*t->rows));
	t->rows[i] = *r;
	t->n++;
}

const char *net_fmt_bytes(uint64_t b, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)b);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
	return buf;
}

static int cmp_proc_row(const void *a, const void *b)
{
	const struct net_proc_row *x = a, *y = b;
	uint64_t tx = x->tx_bytes + x->rx_bytes, ty = y->tx_bytes + y->rx_bytes;

	if (tx != ty)
		return tx > ty ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

#define APPEND(...)                                                            \
	do {                                                                   \
		int n_ = snprintf(buf + (pos < len ? pos : len),               \
				  pos < len ? len - pos : 0, __VA_ARGS__);     \
		if (n_ > 0)                                                    \
			pos += (size_t)n_;                                     \
	} while (0)

size_t net_format_report(char *buf, size_t len, uint64_t active,
			 struct net_proc_row *procs, size_t n_procs,
			 size_t max_procs, const struct net_top *conns)
{
	size_t pos = 0;
	char b1[32], b2[32], ep1[64], ep2[64];

	if (len)
		buf[0] = '\0';
	if (n_procs > 1) /* qsort's array must not be NULL, even empty (UBSan) */
		qsort(procs, n_procs, sizeof(*procs), cmp_proc_row);
	APPEND("net: %llu active connections\n", (unsigned long long)active);
	APPEND("%-8s %-16s %-5s %12s %12s %10s %10s %7s %6s\n", "PID", "COMM",
	       "PROTO", "TX", "RX", "TX_PKTS", "RX_PKTS", "RETRANS", "RESETS");
	for (size_t i = 0; i < n_procs && i < max_procs; i++) {
		const struct net_proc_row *p = &procs[i];

		APPEND("%-8u %-16s %-5s %12s %12s %10llu %10llu %7llu %6llu\n",
		       p->pid, p->comm, p->proto,
		       net_fmt_bytes(p->tx_bytes, b1, sizeof(b1)),
		       net_fmt_bytes(p->rx_bytes, b2, sizeof(b2)),
		       (unsigned long long)p->tx_packets,
		       (unsigned long long)p->rx_packets,
		       (unsigned long long)p->retransmits,
		       (unsigned long long)p->resets);
	}
	if (conns && conns->n) {
		APPEND("top connections by bytes:\n");
		APPEND("%-8s %-16s %-5s %-24s %-24s %12s %12s %8s %s\n", "PID",
		       "COMM", "PROTO", "LOCAL", "REMOTE", "TX", "RX", "SRTT_US",
		       "STATE");
		for (size_t i = 0; i < conns->n; i++) {
			const struct net_top_row *r = &conns->rows[i];

			APPEND("%-8u %-16s %-5s %-24s %-24s %12s %12s %8llu %s\n",
			       r->pid, r->comm, r->proto,
			       net_fmt_endpoint(r->laddr, r->lport, ep1, sizeof(ep1)),
			       net_fmt_endpoint(r->raddr, r->rport, ep2, sizeof(ep2)),
			       net_fmt_bytes(r->tx_bytes, b1, sizeof(b1)),
			       net_fmt_bytes(r->rx_bytes, b2, sizeof(b2)),
			       (unsigned long long)(r->srtt_ns / 1000),
			       r->closed ? "closed" : "open");
		}
	}
	return pos;
}
