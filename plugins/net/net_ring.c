/* SPDX-License-Identifier: MIT */
/*
 * net probe: the ring buffer's records to events. Every connection record
 * (net.open, net.conn, net.reset, net.connect_fail) is published when
 * conn_events is on; a closed connection also enters the run's table of
 * the largest connections and the RTT histogram, a failed connect() the
 * per-process failure count. A record that claims more bytes than the
 * ring holds is dropped and counted; a short one is ignored.
 */
#include <stdio.h>
#include <string.h>

#include "ntcore/kit/utf8.h"

#include "net_int.h"

void net_comm_label(char out[NET_COMM_LABEL_LEN], const char *comm)
{
	nt_utf8_repair(comm, strnlen(comm, NT_COMM_LEN), out,
		       NET_COMM_LABEL_LEN);
}

const char *net_proto_name(uint8_t p)
{
	return p == NET_PROTO_TCP ? "tcp" : p == NET_PROTO_UDP ? "udp" : "?";
}

void net_row_from_ev(struct net_top_row *r, const struct net_conn_ev *e)
{
	memset(r, 0, sizeof(*r));
	r->key = e->cookie;
	r->bytes = e->tx_bytes + e->rx_bytes;
	r->pid = e->hdr.pid;
	net_comm_label(r->comm, e->hdr.comm);
	memcpy(r->proto, e->proto, sizeof(r->proto));
	r->proto[3] = '\0';
	memcpy(r->laddr, e->laddr, 16);
	memcpy(r->raddr, e->raddr, 16);
	r->lport = e->lport;
	r->rport = e->rport;
	r->tx_bytes = e->tx_bytes;
	r->rx_bytes = e->rx_bytes;
	r->tx_packets = e->tx_packets;
	r->rx_packets = e->rx_packets;
	r->retransmits = e->retransmits;
	r->srtt_ns = e->srtt_ns;
	r->closed = e->closed;
}

void net_top_offer(struct nt_topn *t, const struct net_top_row *r)
{
	nt_topn_offer_keyed(t, r->key, r->bytes, r);
}

int net_on_record(void *ctx, void *data, size_t size)
{
	struct net_state *st = ctx;
	const struct net_conn_ev *e = data;
	char pid[16], comm[NET_COMM_LABEL_LEN];

	if (size < sizeof(*e))
		return 0;
	if (e->hdr.size > size) { /* it would be read past its end downstream */
		st->host->count_drop(st->inst, "bpf", 1);
		return 0;
	}
	if ((int)e->hdr.type == st->ev_close) {
		struct net_top_row r;

		net_row_from_ev(&r, e);
		net_top_offer(&st->closed_top, &r);
		if (e->proto[0] == 't' && e->srtt_ns)
			st->host->metric_observe(st->m[NET_M_SRTT], NULL,
						 (double)e->srtt_ns / 1e9);
	} else if ((int)e->hdr.type == st->ev_fail) {
		snprintf(pid, sizeof(pid), "%u", e->hdr.pid);
		net_comm_label(comm, e->hdr.comm);
		const char *lv[] = { pid, comm };

		st->host->metric_add(st->m[NET_M_FAIL], lv, 1);
	}
	if (st->cfg->conn_events)
		st->host->publish(st->inst, data);
	return 0;
}
