/* SPDX-License-Identifier: MIT */
/*
 * net probe: structs shared between net.bpf.c (kernel side) and net.c (user
 * side). Plain fixed-width C so that both compilers lay them out the same.
 */
#ifndef NTCORE_NET_H
#define NTCORE_NET_H

#include "ntcore/event.h"

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define NET_PROTO_TCP 6
#define NET_PROTO_UDP 17

/* How a connection came to be (conn.role, net_conn_ev.role). */
enum net_role {
	NET_ROLE_UNKNOWN = 0, /* existed before the probe attached */
	NET_ROLE_ACTIVE = 1,  /* connect() */
	NET_ROLE_PASSIVE = 2, /* accepted from a listener */
	NET_ROLE_SOCKET = 3,  /* UDP: the socket itself is the flow */
};

/* Why a net_conn_ev was written (net_conn_ev.reason). */
enum net_conn_reason {
	NET_EV_OPEN = 1,
	NET_EV_CLOSE = 2,
	NET_EV_RESET_SENT = 3,
	NET_EV_RESET_RECV = 4,
	NET_EV_CONNECT_FAIL = 5, /* SYN_SENT -> CLOSE without ESTABLISHED */
};

/*
 * Per-connection state, kept in the `conns` hash keyed by the socket cookie
 * (bpf_get_socket_cookie: unique for the socket's lifetime, never reused).
 * Byte counts come from the sock_send_length / sock_recv_length
 * tracepoints (what the application moved through send/recv syscalls);
 * packet counts are TCP segments (tcp_sock.segs_out/segs_in deltas) or UDP
 * datagrams (successful send/recv calls).
 */
struct net_conn {
	__u32 pid;             /* owning process (tgid), 0 = not known yet */
	__u32 tid;
	char comm[NT_COMM_LEN];
	__u8 laddr[16];        /* IPv6 or IPv4-mapped */
	__u8 raddr[16];
	__u16 lport;           /* host order */
	__u16 rport;
	__u8 proto;            /* NET_PROTO_* */
	__u8 family;           /* 4 or 6 */
	__u8 role;             /* enum net_role */
	__u8 open_sent;        /* net.open was published */
	__u8 established;      /* TCP reached ESTABLISHED while traced */
	__u8 pad[7];
	__u64 ts_open;         /* CLOCK_MONOTONIC ns, 0 = before attach */
	__u64 tx_bytes;
	__u64 rx_bytes;
	__u64 tx_packets;
	__u64 rx_packets;
	__u32 segs_out_last;   /* TCP: last tcp_sock.segs_out seen */
	__u32 segs_in_last;
	__u32 retransmits;     /* tcp_retransmit_skb hits */
	__u32 resets_sent;
	__u32 resets_recv;
	__u32 srtt_us;         /* last smoothed RTT seen, us */
};

/* Per-process aggregate, `procs` hash. */
struct net_proc_key {
	__u32 tgid;
	__u8 proto;
	__u8 pad[3];
};

struct net_proc {
	char comm[NT_COMM_LEN];
	__u64 tx_bytes;
	__u64 rx_bytes;
	__u64 tx_packets;
	__u64 rx_packets;
	__u64 retransmits;
	__u64 resets_sent;
	__u64 resets_recv;
	__u64 opened;
	__u64 closed;
};

/*
 * Host-wide counters, one per-CPU array slot each (`stats` map), for what
 * has no owner: connection attempts that failed, resets of sockets we never
 * saw, conns map overflow.
 */
enum net_stat {
	NET_STAT_CONNECT_FAIL = 0,
	NET_STAT_RST_SENT_NOSOCK,
	NET_STAT_RST_RECV_NOSOCK,
	NET_STAT_CONN_MAP_FULL,
	NET_STAT_PROC_MAP_FULL,
	NET_STAT_MAX,
};

/*
 * The one record layout of the probe's connection events: net.open,
 * net.conn (close), net.reset and net.connect_fail share it; each schema
 * names the fields that carry meaning for it.
 */
struct net_conn_ev {
	struct nt_event_hdr hdr; /* pid/tid/comm: the connection's owner */
	__u8 laddr[16];
	__u8 raddr[16];
	__u16 lport;
	__u16 rport;
	char proto[4];           /* "tcp" / "udp" */
	__u8 family;             /* 4 or 6 */
	__u8 reason;             /* enum net_conn_reason */
	__u8 closed;             /* net.conn: 1 closed, 0 still open at exit */
	__u8 pad;
	char role[8];            /* "active" "passive" "socket" "unknown" */
	char direction[12];      /* net.reset: "sent" / "received" */
	__u64 cookie;            /* socket cookie */
	__u64 duration_ns;       /* close: since open (0 = open before attach) */
	__u64 tx_bytes;
	__u64 rx_bytes;
	__u64 tx_packets;
	__u64 rx_packets;
	__u64 srtt_ns;           /* TCP smoothed RTT at close, ns */
	__u32 retransmits;       /* TCP: tcp_sock.total_retrans at close */
	__u32 resets;            /* RSTs sent + received on this connection */
};

#endif /* NTCORE_NET_H */
