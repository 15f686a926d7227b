/* SPDX-License-Identifier: MIT */
/*
 * net probe: its event schemas (net.open, net.conn, net.reset,
 * net.connect_fail, net.report) and metric families, as data. Names and
 * fields are the probe's interface: sinks, dashboards and docs/net.md
 * depend on them.
 */
#include "net_int.h"

/* ---- event schemas ---------------------------------------------------- */

#define F(m, t, u, d) NT_FIELD(struct net_conn_ev, m, t, u, d)
#define TUPLE_FIELDS                                                           \
	F(proto, NT_F_STR, "", "\"tcp\" or \"udp\""),                          \
	F(family, NT_F_U8, "", "IP version, 4 or 6"),                          \
	F(laddr, NT_F_INADDR, "", "local address"),                            \
	F(lport, NT_F_U16, "", "local port"),                                  \
	F(raddr, NT_F_INADDR, "", "remote address (:: for unconnected UDP)"),  \
	F(rport, NT_F_U16, "", "remote port (0 for unconnected UDP)"),         \
	F(cookie, NT_F_U64, "", "socket cookie, unique per socket")

static const struct nt_field open_fields[] = {
	TUPLE_FIELDS,
	F(role, NT_F_STR, "", "active (connect), passive (accept), socket "
			      "(UDP), unknown"),
};

static const struct nt_field conn_fields[] = {
	TUPLE_FIELDS,
	F(role, NT_F_STR, "", "active, passive, socket or unknown"),
	F(closed, NT_F_BOOL, "", "false: still open when the run ended"),
	F(duration_ns, NT_F_U64, "ns", "open to close (0: opened before attach)"),
	F(tx_bytes, NT_F_U64, "bytes", "bytes sent by the owner (send syscalls)"),
	F(rx_bytes, NT_F_U64, "bytes", "bytes received by the owner (recv syscalls)"),
	F(tx_packets, NT_F_U64, "count", "TCP segments / UDP datagrams sent"),
	F(rx_packets, NT_F_U64, "count", "TCP segments / UDP datagrams received"),
	F(srtt_ns, NT_F_U64, "ns", "TCP smoothed RTT at close"),
	F(retransmits, NT_F_U32, "count", "TCP segments retransmitted"),
	F(resets, NT_F_U32, "count", "RSTs sent and received"),
};

static const struct nt_field reset_fields[] = {
	TUPLE_FIELDS,
	F(direction, NT_F_STR, "", "\"sent\" or \"received\""),
	F(tx_bytes, NT_F_U64, "bytes", "bytes sent on the connection so far"),
	F(rx_bytes, NT_F_U64, "bytes", "bytes received so far"),
};

static const struct nt_field fail_fields[] = {
	TUPLE_FIELDS,
	F(duration_ns, NT_F_U64, "ns", "connect() to failure"),
};
#undef F

const struct nt_schema net_schema_open = {
	.name = "net.open", .desc = "a TCP connection was established or a "
				    "UDP socket first used",
	.fields = open_fields, .n_fields = NT_ARRAY_LEN(open_fields),
	.min_size = sizeof(struct net_conn_ev),
};
const struct nt_schema net_schema_conn = {
	.name = "net.conn", .desc = "a connection closed: totals per direction",
	.fields = conn_fields, .n_fields = NT_ARRAY_LEN(conn_fields),
	.min_size = sizeof(struct net_conn_ev),
};
const struct nt_schema net_schema_reset = {
	.name = "net.reset", .desc = "a TCP RST sent or received on a "
				     "traced connection",
	.fields = reset_fields, .n_fields = NT_ARRAY_LEN(reset_fields),
	.min_size = sizeof(struct net_conn_ev),
};
const struct nt_schema net_schema_fail = {
	.name = "net.connect_fail", .desc = "a TCP connect() that never "
					    "reached ESTABLISHED",
	.fields = fail_fields, .n_fields = NT_ARRAY_LEN(fail_fields),
	.min_size = sizeof(struct net_conn_ev),
};

static const struct nt_field report_fields[] = {
	NT_FIELD(struct net_report_ev, text, NT_F_VSTR, "",
		 "per-process traffic and top connections, as a table"),
};
const struct nt_schema net_schema_report = {
	.name = "net.report", .desc = "traffic table for the live summary",
	.fields = report_fields, .n_fields = NT_ARRAY_LEN(report_fields),
	.min_size = sizeof(struct net_report_ev),
};

/* ---- metrics ---------------------------------------------------------- */

static const char *const lbl_proc[] = { "pid", "comm", "proto" };
static const char *const lbl_pid[] = { "pid", "comm" };
static const char *const lbl_proto[] = { "proto" };
static const char *const lbl_dir[] = { "direction" };
static const double srtt_buckets[] = { 10e-6, 50e-6, 100e-6, 250e-6, 500e-6,
				       1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
				       50e-3, 100e-3, 250e-3, 500e-3, 1.0 };


#define PROC_METRIC(n, h) { .name = n, .help = h, .type = NT_METRIC_COUNTER,  \
			    .n_labels = 3, .label_names = lbl_proc }
#define PID_METRIC(n, h) { .name = n, .help = h, .type = NT_METRIC_COUNTER,   \
			   .n_labels = 2, .label_names = lbl_pid }

const struct nt_metric_desc net_metrics[NET_M_COUNT] = {
	[NET_M_TX_BYTES] = PROC_METRIC("ntcore_net_tx_bytes_total",
				   "Bytes sent by the process (send syscalls)"),
	[NET_M_RX_BYTES] = PROC_METRIC("ntcore_net_rx_bytes_total",
				   "Bytes received by the process (recv syscalls)"),
	[NET_M_TX_PKTS] = PROC_METRIC("ntcore_net_tx_packets_total",
				  "TCP segments / UDP datagrams sent"),
	[NET_M_RX_PKTS] = PROC_METRIC("ntcore_net_rx_packets_total",
				  "TCP segments / UDP datagrams received"),
	[NET_M_OPENED] = PROC_METRIC("ntcore_net_connections_opened_total",
				 "Connections opened (TCP) or UDP sockets first used"),
	[NET_M_CLOSED] = PROC_METRIC("ntcore_net_connections_closed_total",
				 "Connections (TCP) or UDP sockets closed"),
	[NET_M_RETRANS] = PID_METRIC("ntcore_net_tcp_retransmits_total",
				 "TCP segments retransmitted on the process's connections"),
	[NET_M_RST_SENT] = PID_METRIC("ntcore_net_tcp_resets_sent_total",
				  "TCP RSTs sent on the process's connections"),
	[NET_M_RST_RECV] = PID_METRIC("ntcore_net_tcp_resets_received_total",
				  "TCP RSTs received on the process's connections"),
	[NET_M_FAIL] = PID_METRIC("ntcore_net_tcp_connect_failures_total",
			      "TCP connect() attempts that never got established"),
	[NET_M_ACTIVE] = { .name = "ntcore_net_connections_active",
		       .help = "Traced connections open now (TCP established "
			       "and not yet closed; UDP sockets in use)",
		       .type = NT_METRIC_GAUGE, .n_labels = 1,
		       .label_names = lbl_proto },
	[NET_M_SRTT] = { .name = "ntcore_net_tcp_srtt_seconds",
		     .help = "TCP smoothed RTT of connections at close",
		     .type = NT_METRIC_HISTOGRAM, .n_labels = 0,
		     .buckets = srtt_buckets,
		     .n_buckets = NT_ARRAY_LEN(srtt_buckets) },
	[NET_M_RST_UNOWNED] = { .name = "ntcore_net_tcp_resets_unowned_total",
			    .help = "RSTs for sockets not traced (host-wide only)",
			    .type = NT_METRIC_COUNTER, .n_labels = 1,
			    .label_names = lbl_dir },
};
