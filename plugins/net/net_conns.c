/* SPDX-License-Identifier: MIT */
/*
 * net probe: the live connections in the BPF `conns` map. Each walk sets
 * ntcore_net_connections_active; the report offers each to its table of
 * the largest; the last walk of the run publishes a net.conn (closed =
 * false) for each connection still open.
 */
#include <stdio.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/kit/clock.h"

#include "net.bpf.skel.h"
#include "net_int.h"

static const char *role_name(uint8_t role)
{
	return role == NET_ROLE_ACTIVE    ? "active"
	       : role == NET_ROLE_PASSIVE ? "passive"
	       : role == NET_ROLE_SOCKET  ? "socket"
					  : "unknown";
}

/* The net.conn record of a connection still open at `now`. */
static void conn_event(struct net_state *st, struct net_conn_ev *e,
		       uint64_t cookie, const struct net_conn *c, uint64_t now)
{
	memset(e, 0, sizeof(*e));
	e->hdr.type = (uint32_t)st->ev_close;
	e->hdr.size = sizeof(*e);
	e->hdr.pid = c->pid;
	e->hdr.tid = c->tid;
	memcpy(e->hdr.comm, c->comm, NT_COMM_LEN);
	memcpy(e->laddr, c->laddr, 16);
	memcpy(e->raddr, c->raddr, 16);
	e->lport = c->lport;
	e->rport = c->rport;
	snprintf(e->proto, sizeof(e->proto), "%s", net_proto_name(c->proto));
	e->family = c->family;
	e->reason = NET_EV_CLOSE;
	e->closed = 0;
	snprintf(e->role, sizeof(e->role), "%s", role_name(c->role));
	e->cookie = cookie;
	e->duration_ns = c->ts_open && now > c->ts_open ? now - c->ts_open : 0;
	e->hdr.ts_ns = now - e->duration_ns; /* an interval: its start */
	e->tx_bytes = c->tx_bytes;
	e->rx_bytes = c->rx_bytes;
	e->tx_packets = c->tx_packets;
	e->rx_packets = c->rx_packets;
	e->srtt_ns = (uint64_t)c->srtt_us * 1000;
	e->retransmits = c->retransmits;
	e->resets = c->resets_sent + c->resets_recv;
}

static void set_active(struct net_state *st, uint64_t n_tcp, uint64_t n_udp)
{
	const char *lt[] = { "tcp" }, *lu[] = { "udp" };

	if (st->cfg->tcp)
		st->host->metric_set(st->m[NET_M_ACTIVE], lt, (double)n_tcp);
	if (st->cfg->udp)
		st->host->metric_set(st->m[NET_M_ACTIVE], lu, (double)n_udp);
}

uint64_t net_walk_conns(struct net_state *st, struct nt_topn *top,
			bool emit_open)
{
	int fd = bpf_map__fd(st->skel->maps.conns);
	uint64_t key, next, *prev = NULL, n_tcp = 0, n_udp = 0;
	bool filtered = st->skel->rodata->nt_filter_on;
	uint64_t now = nt_clock_mono_ns();
	struct net_conn c;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		struct net_conn_ev e;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &c) < 0)
			continue;
		if (filtered && !c.pid)
			continue; /* accepted, not yet used by a target */
		if (c.proto == NET_PROTO_TCP && !c.established)
			continue; /* connect() in progress */
		if (c.proto == NET_PROTO_TCP)
			n_tcp++;
		else
			n_udp++;
		conn_event(st, &e, key, &c, now);
		if (top) {
			struct net_top_row r;

			net_row_from_ev(&r, &e);
			net_top_offer(top, &r);
		}
		if (emit_open && st->cfg->conn_events && c.open_sent)
			st->host->publish(st->inst, &e.hdr);
	}
	set_active(st, n_tcp, n_udp);
	return n_tcp + n_udp;
}
