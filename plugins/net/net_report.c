/* SPDX-License-Identifier: MIT */
/*
 * net probe: the net.report table for the live summary. Processes by
 * traffic, then the largest connections of the run (closed ones and those
 * still open), with their endpoints and smoothed RTT.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntcore/kit/clock.h"
#include "ntcore/kit/sb.h"

#include "net_int.h"

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

static int cmp_proc_row(const void *a, const void *b)
{
	const struct net_proc_row *x = a, *y = b;
	uint64_t tx = x->tx_bytes + x->rx_bytes, ty = y->tx_bytes + y->rx_bytes;

	if (tx != ty)
		return tx > ty ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static void proc_lines(struct nt_sb *sb, const struct net_proc_row *procs,
		       size_t n)
{
	char b1[32], b2[32];

	nt_sb_printf(sb, "%-8s %-16s %-5s %12s %12s %10s %10s %7s %6s\n", "PID",
		     "COMM", "PROTO", "TX", "RX", "TX_PKTS", "RX_PKTS",
		     "RETRANS", "RESETS");
	for (size_t i = 0; i < n; i++) {
		const struct net_proc_row *p = &procs[i];

		nt_sb_printf(sb, "%-8u %-16s %-5s %12s %12s %10llu %10llu "
				 "%7llu %6llu\n",
			     p->pid, p->comm, p->proto,
			     nt_fmt_bytes(p->tx_bytes, b1, sizeof(b1)),
			     nt_fmt_bytes(p->rx_bytes, b2, sizeof(b2)),
			     (unsigned long long)p->tx_packets,
			     (unsigned long long)p->rx_packets,
			     (unsigned long long)p->retransmits,
			     (unsigned long long)p->resets);
	}
}

static void conn_line(struct nt_sb *sb, const struct net_top_row *r)
{
	char b1[32], b2[32], ep1[64], ep2[64];

	nt_sb_printf(sb, "%-8u %-16s %-5s %-24s %-24s %12s %12s %8llu %s\n",
		     r->pid, r->comm, r->proto,
		     net_fmt_endpoint(r->laddr, r->lport, ep1, sizeof(ep1)),
		     net_fmt_endpoint(r->raddr, r->rport, ep2, sizeof(ep2)),
		     nt_fmt_bytes(r->tx_bytes, b1, sizeof(b1)),
		     nt_fmt_bytes(r->rx_bytes, b2, sizeof(b2)),
		     (unsigned long long)(r->srtt_ns / 1000),
		     r->closed ? "closed" : "open");
}

void net_format_report(struct nt_sb *sb, uint64_t active,
		       struct net_proc_row *procs, size_t n_procs,
		       size_t max_procs, const struct nt_topn *conns)
{
	if (n_procs > 1) /* qsort's array must not be NULL, even empty (UBSan) */
		qsort(procs, n_procs, sizeof(*procs), cmp_proc_row);
	nt_sb_printf(sb, "net: %llu active connections\n",
		     (unsigned long long)active);
	proc_lines(sb, procs, n_procs < max_procs ? n_procs : max_procs);
	if (!conns || !nt_topn_count(conns))
		return;
	nt_sb_puts(sb, "top connections by bytes:\n");
	nt_sb_printf(sb, "%-8s %-16s %-5s %-24s %-24s %12s %12s %8s %s\n", "PID",
		     "COMM", "PROTO", "LOCAL", "REMOTE", "TX", "RX", "SRTT_US",
		     "STATE");
	for (size_t i = 0; i < nt_topn_count(conns); i++)
		conn_line(sb, nt_topn_at(conns, i, NULL));
}

void net_publish_report(struct net_state *st, struct net_proc_row *rows,
			size_t n_rows, uint64_t active, const struct nt_topn *top)
{
	size_t cap = 4096 + (size_t)st->cfg->top_n * 400;
	struct net_report_ev *ev;
	struct nt_sb sb;

	nt_sb_init(&sb, cap - 1);
	net_format_report(&sb, active, rows, n_rows, (size_t)st->cfg->top_n,
			  top);
	ev = calloc(1, sizeof(*ev) + sb.len + 1);
	if (ev) {
		memcpy(ev + 1, nt_sb_str(&sb), sb.len);
		ev->hdr.type = (uint32_t)st->ev_report;
		ev->hdr.size = (uint32_t)(sizeof(*ev) + sb.len);
		ev->hdr.ts_ns = nt_clock_mono_ns();
		ev->hdr.pid = (uint32_t)getpid();
		ev->hdr.tid = ev->hdr.pid;
		snprintf(ev->hdr.comm, sizeof(ev->hdr.comm), "ntcore");
		ev->text.off = sizeof(*ev);
		ev->text.len = (uint32_t)sb.len;
		st->host->publish(st->inst, &ev->hdr);
		free(ev);
	}
	nt_sb_fini(&sb);
}
