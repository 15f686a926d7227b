// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * net probe, kernel side. No kprobes and no fentry: everything hangs off
 * BTF tracepoints and one cgroup hook.
 *
 *  sock_send_length / sock_recv_length   bytes and datagrams per send/recv
 *      syscall, in the calling process's context (so received bytes belong
 *      to the receiver, not to the softirq that queued them); TCP segment
 *      counts are the deltas of tcp_sock.segs_out/segs_in seen at each call.
 *  inet_sock_set_state                   TCP lifecycle: SYN_SENT (connect,
 *      owner = caller), ESTABLISHED (open), CLOSE (close, totals).
 *  tcp_retransmit_skb, tcp_send_reset, tcp_receive_reset
 *  cgroup/sock_release (on the cgroup v2 root)   end of a UDP socket.
 *
 * Connections are keyed by the socket cookie, which is unique for the life
 * of the socket and never reused.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "common.bpf.h"
#include "net.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define AF_INET 2
#define AF_INET6 10
#define SOCK_STREAM 1
#define SOCK_DGRAM 2
#define MSG_PEEK 2
#define MSG_ERRQUEUE 0x2000

/* Set by the user side before load. */
const volatile __u32 ev_open_type = 0;
const volatile __u32 ev_close_type = 0;
const volatile __u32 ev_reset_type = 0;
const volatile __u32 ev_fail_type = 0;
const volatile bool want_tcp = true;
const volatile bool want_udp = true;
const volatile bool port_filter_on = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	NT_MAP_LAZY;
	__uint(max_entries, 65536); /* max_connections */
	__type(key, __u64);
	__type(value, struct net_conn);
} conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	NT_MAP_LAZY;
	__uint(max_entries, 16384);
	__type(key, struct net_proc_key);
	__type(value, struct net_proc);
} procs SEC(".maps");

/* ports = [...]: a connection is traced when its local or remote port is in. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16);
	__type(value, __u8);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NET_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

static __always_inline void stat_inc(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &which);

	if (v)
		*v += 1;
}

/*
 * The tracepoints hand us BTF-typed socket pointers, so fields are read with
 * plain (CO-RE relocated) loads, not bpf_probe_read_kernel calls: this is the
 * per-syscall hot path.
 */

/* TCP or UDP over IPv4/IPv6, 0 for anything else (unix, netlink, raw...). */
static __always_inline __u8 sk_proto(const struct sock *sk)
{
	__u16 family = sk->__sk_common.skc_family;
	__u16 proto, type;

	if (family != AF_INET && family != AF_INET6)
		return 0;
	proto = sk->sk_protocol;
	type = sk->sk_type;
	if (proto == NET_PROTO_TCP && type == SOCK_STREAM)
		return want_tcp ? NET_PROTO_TCP : 0;
	if (proto == NET_PROTO_UDP && type == SOCK_DGRAM)
		return want_udp ? NET_PROTO_UDP : 0;
	return 0;
}

static __always_inline void v4_mapped(__u8 *dst, __be32 a)
{
	__builtin_memset(dst, 0, 10);
	dst[10] = 0xff;
	dst[11] = 0xff;
	__builtin_memcpy(dst + 12, &a, 4);
}

static __always_inline void fill_tuple(struct net_conn *c, const struct sock *sk)
{
	if (sk->__sk_common.skc_family == AF_INET) {
		c->family = 4;
		v4_mapped(c->laddr, sk->__sk_common.skc_rcv_saddr);
		v4_mapped(c->raddr, sk->__sk_common.skc_daddr);
	} else {
		c->family = 6;
		BPF_CORE_READ_INTO(&c->laddr, sk, __sk_common.skc_v6_rcv_saddr);
		BPF_CORE_READ_INTO(&c->raddr, sk, __sk_common.skc_v6_daddr);
	}
	c->lport = sk->__sk_common.skc_num;
	c->rport = bpf_ntohs(sk->__sk_common.skc_dport);
}

static __always_inline bool ports_ok(const struct sock *sk)
{
	__u16 lport, rport;

	if (!port_filter_on)
		return true;
	lport = sk->__sk_common.skc_num;
	rport = bpf_ntohs(sk->__sk_common.skc_dport);
	return bpf_map_lookup_elem(&ports, &lport) ||
	       bpf_map_lookup_elem(&ports, &rport);
}

/* segs_out, segs_in and the smoothed RTT (us) of a TCP socket. */
static __always_inline void tcp_info3(const struct sock *sk, __u32 *out,
				      __u32 *in, __u32 *srtt_us)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock((void *)sk);

	if (!tp) {
		*out = *in = 0;
		if (srtt_us)
			*srtt_us = 0;
		return;
	}
	*out = tp->segs_out;
	*in = tp->segs_in;
	if (srtt_us)
		*srtt_us = tp->srtt_us >> 3;
}

static __always_inline void tcp_segs(const struct sock *sk, __u32 *out, __u32 *in)
{
	tcp_info3(sk, out, in, NULL);
}

static __always_inline void set_owner_current(struct net_conn *c)
{
	__u64 id = bpf_get_current_pid_tgid();

	c->pid = id >> 32;
	c->tid = (__u32)id;
	bpf_get_current_comm(c->comm, sizeof(c->comm));
}

static __always_inline struct net_conn *conn_insert(__u64 cookie,
						    struct net_conn *c)
{
	if (bpf_map_update_elem(&conns, &cookie, c, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&conns, &cookie)) {
		stat_inc(NET_STAT_CONN_MAP_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(&conns, &cookie);
}

/* The process's record; a new one takes `comm`, or the current task's name
 * when comm is NULL. */
static __always_inline struct net_proc *proc_get(__u32 tgid, __u8 proto,
						 const char *comm)
{
	struct net_proc_key k = { .tgid = tgid, .proto = proto };
	struct net_proc *p = bpf_map_lookup_elem(&procs, &k);

	if (p)
		return p;
	{
		struct net_proc zero = {};

		if (comm)
			__builtin_memcpy(zero.comm, comm, NT_COMM_LEN);
		else
			bpf_get_current_comm(zero.comm, sizeof(zero.comm));
		if (bpf_map_update_elem(&procs, &k, &zero, BPF_NOEXIST) &&
		    !bpf_map_lookup_elem(&procs, &k)) {
			stat_inc(NET_STAT_PROC_MAP_FULL);
			return NULL;
		}
	}
	return bpf_map_lookup_elem(&procs, &k);
}

static __always_inline void role_name(char *dst, __u8 role)
{
	switch (role) {
	case NET_ROLE_ACTIVE: __builtin_memcpy(dst, "active\0", 8); break;
	case NET_ROLE_PASSIVE: __builtin_memcpy(dst, "passive", 8); break;
	case NET_ROLE_SOCKET: __builtin_memcpy(dst, "socket\0", 8); break;
	default: __builtin_memcpy(dst, "unknown", 8); break;
	}
}

/* Publish one connection record; the header names the owner, not the
 * current task (closes and resets often run in softirq context). */
static __always_inline void emit(const struct net_conn *c, __u64 cookie,
				 __u32 type, __u8 reason, __u8 closed,
				 __u64 ts, __u64 srtt_us, __u32 retrans)
{
	struct net_conn_ev *e;

	if (!type)
		return;
	e = nt_reserve(&events, sizeof(*e));
	if (!e)
		return;
	e->hdr.type = type;
	e->hdr.size = sizeof(*e);
	e->hdr.ts_ns = ts;
	e->hdr.pid = c->pid;
	e->hdr.tid = c->tid;
	__builtin_memcpy(e->hdr.comm, c->comm, NT_COMM_LEN);
	__builtin_memcpy(e->laddr, c->laddr, 16);
	__builtin_memcpy(e->raddr, c->raddr, 16);
	e->lport = c->lport;
	e->rport = c->rport;
	if (c->proto == NET_PROTO_TCP)
		__builtin_memcpy(e->proto, "tcp", 4);
	else
		__builtin_memcpy(e->proto, "udp", 4);
	e->family = c->family;
	e->reason = reason;
	e->closed = closed;
	e->pad = 0;
	role_name(e->role, c->role);
	__builtin_memset(e->direction, 0, sizeof(e->direction));
	if (reason == NET_EV_RESET_SENT)
		__builtin_memcpy(e->direction, "sent", 5);
	else if (reason == NET_EV_RESET_RECV)
		__builtin_memcpy(e->direction, "received", 9);
	e->cookie = cookie;
	e->duration_ns = c->ts_open && ts > c->ts_open ? ts - c->ts_open : 0;
	/* An event with a duration is stamped with its start (docs/core.md):
	 * net.conn and net.connect_fail carry one; a reset's is the age. */
	if (reason != NET_EV_RESET_SENT && reason != NET_EV_RESET_RECV)
		e->hdr.ts_ns = ts - e->duration_ns;
	e->tx_bytes = c->tx_bytes;
	e->rx_bytes = c->rx_bytes;
	e->tx_packets = c->tx_packets;
	e->rx_packets = c->rx_packets;
	e->srtt_ns = srtt_us * 1000;
	e->retransmits = retrans;
	e->resets = c->resets_sent + c->resets_recv;
	bpf_ringbuf_submit(e, 0);
}

/*
 * The connection of a send or recv on `sk`: the one known, or a new one
 * (a UDP socket's first use; a TCP connection established before attach).
 * NULL when it is not traced or the table is full.
 */
static __always_inline struct net_conn *msg_conn(struct sock *sk, __u64 cookie,
						 __u8 proto)
{
	struct net_conn *c = bpf_map_lookup_elem(&conns, &cookie);
	struct net_conn n = {};
	__u8 state;

	if (c)
		return c;
	state = sk->__sk_common.skc_state;
	if (proto == NET_PROTO_TCP &&
	    (state == TCP_LISTEN || state == TCP_CLOSE || state == TCP_SYN_SENT))
		return NULL;
	if (!ports_ok(sk))
		return NULL;
	n.proto = proto;
	fill_tuple(&n, sk);
	set_owner_current(&n);
	if (proto == NET_PROTO_UDP) {
		/* A UDP socket is a flow from its first send/recv. */
		n.role = NET_ROLE_SOCKET;
		n.ts_open = bpf_ktime_get_ns();
	} else {
		/* Established before we attached: no open event. */
		n.role = NET_ROLE_UNKNOWN;
		n.open_sent = 1;
		n.established = 1;
		tcp_segs(sk, &n.segs_out_last, &n.segs_in_last);
	}
	return conn_insert(cookie, &n);
}

/* Announce the connection once, with its owner set; true when it was
 * announced now. */
static __always_inline bool msg_announce(struct sock *sk, struct net_conn *c,
					 __u64 cookie, __u8 proto)
{
	if (!c->pid) {
		/* Passive TCP: established in softirq context; the first
		 * process to send or receive on it owns it. */
		set_owner_current(c);
	}
	if (!c->open_sent && proto == NET_PROTO_UDP) {
		__u16 rport = c->rport;
		__u8 raddr[16];

		/* Refresh the local side (bound by now); keep a peer heard
		 * from on an unconnected socket. */
		__builtin_memcpy(raddr, c->raddr, 16);
		fill_tuple(c, sk);
		if (!sk->__sk_common.skc_dport && rport) {
			__builtin_memcpy(c->raddr, raddr, 16);
			c->rport = rport;
		}
	}
	if (c->open_sent)
		return false;
	c->open_sent = 1;
	emit(c, cookie, ev_open_type, NET_EV_OPEN, 0,
	     c->ts_open ? c->ts_open : bpf_ktime_get_ns(), 0, 0);
	return true;
}

/* The connection's packets: TCP segments since the last look, or one UDP
 * datagram; the deltas go to *d_out / *d_in for the process. */
static __always_inline void msg_packets(struct sock *sk, struct net_conn *c,
					__u8 proto, bool tx, __u32 *d_out,
					__u32 *d_in)
{
	__u32 segs_out = 0, segs_in = 0, srtt;

	if (proto != NET_PROTO_TCP) {
		if (tx)
			__sync_fetch_and_add(&c->tx_packets, 1);
		else
			__sync_fetch_and_add(&c->rx_packets, 1);
		if (tx)
			*d_out = 1;
		else
			*d_in = 1;
		return;
	}
	tcp_info3(sk, &segs_out, &segs_in, &srtt);
	*d_out = segs_out - c->segs_out_last;
	*d_in = segs_in - c->segs_in_last;
	/* Several threads may race here; the delta is bounded by the last
	 * value each saw, and only ever moves forward. */
	if ((__s32)*d_out < 0)
		*d_out = 0;
	if ((__s32)*d_in < 0)
		*d_in = 0;
	c->segs_out_last = segs_out;
	c->segs_in_last = segs_in;
	c->srtt_us = srtt;
	__sync_fetch_and_add(&c->tx_packets, *d_out);
	__sync_fetch_and_add(&c->rx_packets, *d_in);
}

/* The caller's per-process counts. */
static __always_inline void msg_proc(__u32 tgid, __u8 proto, bool tx, int ret,
				     __u32 d_out, __u32 d_in, bool just_opened)
{
	struct net_proc *p = proc_get(tgid, proto, NULL);

	if (!p)
		return;
	if (tx)
		__sync_fetch_and_add(&p->tx_bytes, ret);
	else
		__sync_fetch_and_add(&p->rx_bytes, ret);
	if (d_out)
		__sync_fetch_and_add(&p->tx_packets, d_out);
	if (d_in)
		__sync_fetch_and_add(&p->rx_packets, d_in);
	if (just_opened)
		__sync_fetch_and_add(&p->opened, 1);
}

/*
 * One send or recv syscall on a socket, in the caller's context: find or
 * create the connection, take ownership when it has none yet, announce it
 * once, and count bytes and packets for both the connection and the caller.
 */
static __always_inline int on_msg(struct sock *sk, int ret, int flags,
				  bool tx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	__u32 d_out = 0, d_in = 0;
	struct net_conn *c;
	bool just_opened;
	__u64 cookie;
	__u8 proto;

	if (!nt_target_ok(tgid))
		return 0;
	if (ret < 0 || !sk)
		return 0;
	if (!tx && (flags & (MSG_PEEK | MSG_ERRQUEUE)))
		return 0;
	proto = sk_proto(sk);
	if (!proto)
		return 0;
	if (proto == NET_PROTO_TCP && ret == 0 && tx)
		return 0;

	cookie = bpf_get_socket_cookie(sk);
	c = msg_conn(sk, cookie, proto);
	if (!c)
		return 0;
	just_opened = msg_announce(sk, c, cookie, proto);
	msg_packets(sk, c, proto, tx, &d_out, &d_in);
	if (tx)
		__sync_fetch_and_add(&c->tx_bytes, ret);
	else
		__sync_fetch_and_add(&c->rx_bytes, ret);
	msg_proc(tgid, proto, tx, ret, d_out, d_in, just_opened);
	return 0;
}

/*
 * A datagram was queued on a UDP socket (softirq): for an unconnected
 * socket we trace, the peer becomes the source of that datagram, the one
 * at the tail of the receive queue. So a UDP server's flow shows the client
 * it last heard from.
 */
/* The source of the datagram just queued on `sk` (the queue's last skb),
 * into raddr/rport; false when the queue is already empty. */
static __always_inline bool udp_last_peer(const struct sock *sk, __u8 *raddr,
					  __u16 *rport)
{
	struct sk_buff *skb = BPF_CORE_READ(sk, sk_receive_queue.prev);
	unsigned char *head;
	__u16 nh, th, port;
	__u8 b0 = 0;

	if (!skb || (void *)skb == (void *)&sk->sk_receive_queue)
		return false;
	head = BPF_CORE_READ(skb, head);
	nh = BPF_CORE_READ(skb, network_header);
	th = BPF_CORE_READ(skb, transport_header);
	if (bpf_probe_read_kernel(&b0, 1, head + nh))
		return false;
	if ((b0 >> 4) == 4) {
		__be32 a = 0;

		bpf_probe_read_kernel(&a, 4, head + nh + 12);
		v4_mapped(raddr, a);
	} else if ((b0 >> 4) == 6) {
		bpf_probe_read_kernel(raddr, 16, head + nh + 8);
	} else {
		return false;
	}
	if (bpf_probe_read_kernel(&port, 2, head + th))
		return false;
	*rport = bpf_ntohs(port);
	return true;
}

SEC("tp_btf/sk_data_ready")
int BPF_PROG(net_data_ready, const struct sock *sk)
{
	struct net_conn *c;
	__u8 raddr[16] = {};
	__u16 rport = 0;
	__u64 cookie;
	bool peer;

	if (!sk || sk->sk_protocol != NET_PROTO_UDP || sk->__sk_common.skc_dport)
		return 0;
	if (!sk_proto(sk))
		return 0;
	/* The peer first: a receiver on another CPU may take the datagram
	 * off the queue while the flow's entry is made, and its first recv
	 * would then announce the flow without its peer. */
	peer = udp_last_peer(sk, raddr, &rport);
	cookie = bpf_get_socket_cookie((void *)sk);
	c = bpf_map_lookup_elem(&conns, &cookie);
	if (!c) {
		/* The first datagram: the flow starts now; its owner is the
		 * first process to receive (or send) on the socket. */
		struct net_conn n = {};

		if (!ports_ok(sk))
			return 0;
		n.proto = NET_PROTO_UDP;
		n.role = NET_ROLE_SOCKET;
		n.ts_open = bpf_ktime_get_ns();
		fill_tuple(&n, sk);
		c = conn_insert(cookie, &n);
		if (!c)
			return 0;
	}
	if (peer) {
		__builtin_memcpy(c->raddr, raddr, 16);
		c->rport = rport;
	}
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(net_send, struct sock *sk, int ret, int flags)
{
	return on_msg(sk, ret, flags, true);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(net_recv, struct sock *sk, int ret, int flags)
{
	return on_msg(sk, ret, flags, false);
}

/* Owner's per-process record (for counts that arrive in softirq context). */
static __always_inline struct net_proc *owner_proc(const struct net_conn *c)
{
	if (!c->pid)
		return NULL;
	return proc_get(c->pid, c->proto, c->comm);
}

static __always_inline void tcp_close(const struct sock *sk, __u64 cookie,
				      struct net_conn *c, int oldstate)
{
	struct tcp_sock *tp;
	__u64 now = bpf_ktime_get_ns();
	__u32 segs_out, segs_in, d_out, d_in, srtt, retrans = 0;
	struct net_proc *p;

	if (!c->established) {
		/* connect() that never completed (refused, timed out). */
		if (oldstate == TCP_SYN_SENT && c->role == NET_ROLE_ACTIVE) {
			fill_tuple(c, sk);
			emit(c, cookie, ev_fail_type, NET_EV_CONNECT_FAIL, 1,
			     now, 0, 0);
		}
		bpf_map_delete_elem(&conns, &cookie);
		return;
	}
	if (!c->pid && nt_filter_on) {
		/* Accepted but never used by any traced process. */
		bpf_map_delete_elem(&conns, &cookie);
		return;
	}
	tcp_info3(sk, &segs_out, &segs_in, &srtt);
	d_out = segs_out - c->segs_out_last;
	d_in = segs_in - c->segs_in_last;
	if ((__s32)d_out < 0)
		d_out = 0;
	if ((__s32)d_in < 0)
		d_in = 0;
	c->tx_packets += d_out;
	c->rx_packets += d_in;
	tp = bpf_skc_to_tcp_sock((void *)sk);
	if (tp)
		retrans = tp->total_retrans;
	p = owner_proc(c);
	if (p) {
		__sync_fetch_and_add(&p->tx_packets, d_out);
		__sync_fetch_and_add(&p->rx_packets, d_in);
		__sync_fetch_and_add(&p->closed, 1);
	}
	if (!c->open_sent && c->pid) {
		/* Passive connection that was used, but whose open we could
		 * not announce (no syscall ran on it): announce it now. */
		c->open_sent = 1;
		emit(c, cookie, ev_open_type, NET_EV_OPEN, 0, c->ts_open, 0, 0);
	}
	if (!c->pid) {
		/* Host-wide: accepted and closed without a send or recv. */
		emit(c, cookie, ev_open_type, NET_EV_OPEN, 0, c->ts_open, 0, 0);
	}
	emit(c, cookie, ev_close_type, NET_EV_CLOSE, 1, now, srtt, retrans);
	bpf_map_delete_elem(&conns, &cookie);
}

/* connect(): the caller owns the connection. The local port is not bound
 * yet; the tuple is filled at ESTABLISHED. */
static __always_inline void tcp_syn_sent(const struct sock *sk, __u64 cookie)
{
	struct net_conn n = {};
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (!nt_target_ok(tgid) || !sk_proto(sk))
		return;
	if (port_filter_on) {
		__u16 rport = bpf_ntohs(sk->__sk_common.skc_dport);

		if (!bpf_map_lookup_elem(&ports, &rport))
			return;
	}
	n.proto = NET_PROTO_TCP;
	n.role = NET_ROLE_ACTIVE;
	n.ts_open = bpf_ktime_get_ns();
	fill_tuple(&n, sk);
	set_owner_current(&n);
	bpf_map_delete_elem(&conns, &cookie);
	conn_insert(cookie, &n);
}

/* connect() completed: the connection opens. */
static __always_inline void tcp_connected(const struct sock *sk, __u64 cookie)
{
	struct net_conn *c = bpf_map_lookup_elem(&conns, &cookie);
	struct net_proc *p;

	if (!c)
		return;
	fill_tuple(c, sk);
	c->ts_open = bpf_ktime_get_ns();
	c->established = 1;
	tcp_segs(sk, &c->segs_out_last, &c->segs_in_last);
	/* The SYN this side sent and the SYN-ACK it got. */
	c->tx_packets = c->segs_out_last;
	c->rx_packets = c->segs_in_last;
	p = owner_proc(c);
	if (p) {
		__sync_fetch_and_add(&p->tx_packets, c->segs_out_last);
		__sync_fetch_and_add(&p->rx_packets, c->segs_in_last);
		__sync_fetch_and_add(&p->opened, 1);
	}
	c->open_sent = 1;
	emit(c, cookie, ev_open_type, NET_EV_OPEN, 0, c->ts_open, 0, 0);
}

/* Accepted: runs in softirq context, so the owner is whoever sends or
 * receives on it first. */
static __always_inline void tcp_accepted(const struct sock *sk, __u64 cookie)
{
	struct net_conn n = {};

	if (!sk_proto(sk) || !ports_ok(sk))
		return;
	n.proto = NET_PROTO_TCP;
	n.role = NET_ROLE_PASSIVE;
	n.ts_open = bpf_ktime_get_ns();
	n.established = 1;
	fill_tuple(&n, sk);
	/* Segments before this point were the handshake of the request
	 * socket; count from here. */
	tcp_segs(sk, &n.segs_out_last, &n.segs_in_last);
	bpf_map_delete_elem(&conns, &cookie);
	conn_insert(cookie, &n);
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(net_state, const struct sock *sk, int oldstate, int newstate)
{
	struct net_conn *c;
	__u64 cookie;

	if (!sk || sk->sk_protocol != NET_PROTO_TCP || !want_tcp)
		return 0;
	cookie = bpf_get_socket_cookie((void *)sk);

	if (newstate == TCP_SYN_SENT) {
		tcp_syn_sent(sk, cookie);
	} else if (newstate == TCP_ESTABLISHED) {
		if (oldstate == TCP_SYN_SENT)
			tcp_connected(sk, cookie);
		else if (oldstate == TCP_SYN_RECV)
			tcp_accepted(sk, cookie);
	} else if (newstate == TCP_CLOSE) {
		c = bpf_map_lookup_elem(&conns, &cookie);
		if (c)
			tcp_close(sk, cookie, c, oldstate);
	}
	return 0;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(net_retransmit, const struct sock *sk)
{
	struct net_conn *c;
	struct net_proc *p;
	__u64 cookie;

	if (!sk)
		return 0;
	cookie = bpf_get_socket_cookie((void *)sk);
	c = bpf_map_lookup_elem(&conns, &cookie);
	if (!c)
		return 0;
	__sync_fetch_and_add(&c->retransmits, 1);
	p = owner_proc(c);
	if (p)
		__sync_fetch_and_add(&p->retransmits, 1);
	return 0;
}

static __always_inline int on_reset(const struct sock *sk, bool sent)
{
	struct net_conn *c = NULL;
	struct net_proc *p;
	__u64 cookie = 0;
	__u8 state;

	if (sk) {
		state = sk->__sk_common.skc_state;
		/* Time-wait and request socks are not full sockets. */
		if (state != TCP_TIME_WAIT && state != TCP_NEW_SYN_RECV) {
			cookie = bpf_get_socket_cookie((void *)sk);
			c = bpf_map_lookup_elem(&conns, &cookie);
		}
	}
	if (!c) {
		if (!nt_filter_on)
			stat_inc(sent ? NET_STAT_RST_SENT_NOSOCK
				      : NET_STAT_RST_RECV_NOSOCK);
		return 0;
	}
	if (sent)
		__sync_fetch_and_add(&c->resets_sent, 1);
	else
		__sync_fetch_and_add(&c->resets_recv, 1);
	p = owner_proc(c);
	if (p) {
		if (sent)
			__sync_fetch_and_add(&p->resets_sent, 1);
		else
			__sync_fetch_and_add(&p->resets_recv, 1);
	}
	if (c->pid || !nt_filter_on)
		emit(c, cookie, ev_reset_type,
		     sent ? NET_EV_RESET_SENT : NET_EV_RESET_RECV, 0,
		     bpf_ktime_get_ns(), 0, 0);
	return 0;
}

SEC("tp_btf/tcp_send_reset")
int BPF_PROG(net_reset_sent, const struct sock *sk)
{
	return on_reset(sk, true);
}

SEC("tp_btf/tcp_receive_reset")
int BPF_PROG(net_reset_recv, const struct sock *sk)
{
	return on_reset(sk, false);
}

/* The end of a UDP socket (close(), or the last fd going at exit). */
SEC("cgroup/sock_release")
int net_sock_release(struct bpf_sock *ctx)
{
	struct net_conn *c;
	__u64 cookie;

	if (ctx->protocol != NET_PROTO_UDP)
		return 1;
	cookie = bpf_get_socket_cookie(ctx);
	c = bpf_map_lookup_elem(&conns, &cookie);
	if (!c)
		return 1;
	if (c->proto == NET_PROTO_UDP) {
		struct net_proc *p = owner_proc(c);
		__u64 now = bpf_ktime_get_ns();

		if (!c->pid && nt_filter_on) {
			/* Data arrived, but no traced process ever used it. */
			bpf_map_delete_elem(&conns, &cookie);
			return 1;
		}
		if (!c->open_sent) /* host-wide, never read: no owner */
			emit(c, cookie, ev_open_type, NET_EV_OPEN, 0, c->ts_open, 0, 0);
		if (p)
			__sync_fetch_and_add(&p->closed, 1);
		emit(c, cookie, ev_close_type, NET_EV_CLOSE, 1, now, 0, 0);
		bpf_map_delete_elem(&conns, &cookie);
	}
	return 1;
}
