/* SPDX-License-Identifier: MIT */
/*
 * net probe, user side: loads net.bpf.c, forwards connection events from its
 * ring buffer to the bus, copies the per-process counters from BPF maps into
 * the metric registry on a timer, and writes the net.report table.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/btf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/links.h"
#include "ntcore/plugin.h"

#include "net.bpf.skel.h"
#include "net.h"
#include "net_logic.h"

#define TOK_RING 1
#define TOK_TIMER 2

/* How long the series of a process that exited stay, so that the last
 * values reach every sink (the file sink's final dump included). */
#define NET_LINGER_MS 60000

struct net_cfg {
	bool tcp;
	bool udp;
	struct nt_strlist ports;
	int64_t interval_ms;
	int64_t max_connections;
	bool conn_events;
	int64_t report_interval_s;
	int64_t top_n;
};

static const struct nt_cfg_key net_cfg_keys[] = {
	{ .key = "tcp", .type = NT_CFG_BOOL,
	  .offset = offsetof(struct net_cfg, tcp), .def = "true",
	  .min = 1, .max = 0, .desc = "trace TCP sockets" },
	{ .key = "udp", .type = NT_CFG_BOOL,
	  .offset = offsetof(struct net_cfg, udp), .def = "true",
	  .min = 1, .max = 0, .desc = "trace UDP sockets" },
	{ .key = "ports", .type = NT_CFG_STRING_LIST,
	  .offset = offsetof(struct net_cfg, ports), .def = "[]",
	  .min = 1, .max = 0,
	  .desc = "only connections with a local or remote port in this list "
		  "(\"443\", \"8000-8100\"); empty: all" },
	{ .key = "interval_ms", .type = NT_CFG_INT,
	  .offset = offsetof(struct net_cfg, interval_ms), .def = "1000",
	  .min = 100, .max = 3600000,
	  .desc = "how often BPF counters are copied into the metrics" },
	{ .key = "max_connections", .type = NT_CFG_INT,
	  .offset = offsetof(struct net_cfg, max_connections), .def = "65536",
	  .min = 64, .max = 4194304,
	  .desc = "connections tracked at once (BPF hash size)" },
	{ .key = "conn_events", .type = NT_CFG_BOOL,
	  .offset = offsetof(struct net_cfg, conn_events), .def = "true",
	  .min = 1, .max = 0,
	  .desc = "publish net.open / net.conn / net.reset / net.connect_fail" },
	{ .key = "report_interval_s", .type = NT_CFG_INT,
	  .offset = offsetof(struct net_cfg, report_interval_s), .def = "10",
	  .min = 0, .max = 86400,
	  .desc = "publish net.report this often (0: only at exit)" },
	{ .key = "top_n", .type = NT_CFG_INT,
	  .offset = offsetof(struct net_cfg, top_n), .def = "10",
	  .min = 0, .max = 1000,
	  .desc = "rows per table in net.report" },
};

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

static const struct nt_schema schema_open = {
	.name = "net.open", .desc = "a TCP connection was established or a "
				    "UDP socket first used",
	.fields = open_fields, .n_fields = NT_ARRAY_LEN(open_fields),
	.min_size = sizeof(struct net_conn_ev),
};
static const struct nt_schema schema_conn = {
	.name = "net.conn", .desc = "a connection closed: totals per direction",
	.fields = conn_fields, .n_fields = NT_ARRAY_LEN(conn_fields),
	.min_size = sizeof(struct net_conn_ev),
};
static const struct nt_schema schema_reset = {
	.name = "net.reset", .desc = "a TCP RST sent or received on a "
				     "traced connection",
	.fields = reset_fields, .n_fields = NT_ARRAY_LEN(reset_fields),
	.min_size = sizeof(struct net_conn_ev),
};
static const struct nt_schema schema_fail = {
	.name = "net.connect_fail", .desc = "a TCP connect() that never "
					    "reached ESTABLISHED",
	.fields = fail_fields, .n_fields = NT_ARRAY_LEN(fail_fields),
	.min_size = sizeof(struct net_conn_ev),
};

struct net_report_ev {
	struct nt_event_hdr hdr;
	struct nt_vstr text;
};

static const struct nt_field report_fields[] = {
	NT_FIELD(struct net_report_ev, text, NT_F_VSTR, "",
		 "per-process traffic and top connections, as a table"),
};
static const struct nt_schema schema_report = {
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

enum {
	M_TX_BYTES, M_RX_BYTES, M_TX_PKTS, M_RX_PKTS, M_OPENED, M_CLOSED,
	M_RETRANS, M_RST_SENT, M_RST_RECV, M_FAIL, M_ACTIVE, M_SRTT,
	M_RST_UNOWNED, M_COUNT
};

#define PROC_METRIC(n, h) { .name = n, .help = h, .type = NT_METRIC_COUNTER,  \
			    .n_labels = 3, .label_names = lbl_proc }
#define PID_METRIC(n, h) { .name = n, .help = h, .type = NT_METRIC_COUNTER,   \
			   .n_labels = 2, .label_names = lbl_pid }

static const struct nt_metric_desc net_metrics[M_COUNT] = {
	[M_TX_BYTES] = PROC_METRIC("ntcore_net_tx_bytes_total",
				   "Bytes sent by the process (send syscalls)"),
	[M_RX_BYTES] = PROC_METRIC("ntcore_net_rx_bytes_total",
				   "Bytes received by the process (recv syscalls)"),
	[M_TX_PKTS] = PROC_METRIC("ntcore_net_tx_packets_total",
				  "TCP segments / UDP datagrams sent"),
	[M_RX_PKTS] = PROC_METRIC("ntcore_net_rx_packets_total",
				  "TCP segments / UDP datagrams received"),
	[M_OPENED] = PROC_METRIC("ntcore_net_connections_opened_total",
				 "Connections opened (TCP) or UDP sockets first used"),
	[M_CLOSED] = PROC_METRIC("ntcore_net_connections_closed_total",
				 "Connections (TCP) or UDP sockets closed"),
	[M_RETRANS] = PID_METRIC("ntcore_net_tcp_retransmits_total",
				 "TCP segments retransmitted on the process's connections"),
	[M_RST_SENT] = PID_METRIC("ntcore_net_tcp_resets_sent_total",
				  "TCP RSTs sent on the process's connections"),
	[M_RST_RECV] = PID_METRIC("ntcore_net_tcp_resets_received_total",
				  "TCP RSTs received on the process's connections"),
	[M_FAIL] = PID_METRIC("ntcore_net_tcp_connect_failures_total",
			      "TCP connect() attempts that never got established"),
	[M_ACTIVE] = { .name = "ntcore_net_connections_active",
		       .help = "Traced connections open now (TCP established "
			       "and not yet closed; UDP sockets in use)",
		       .type = NT_METRIC_GAUGE, .n_labels = 1,
		       .label_names = lbl_proto },
	[M_SRTT] = { .name = "ntcore_net_tcp_srtt_seconds",
		     .help = "TCP smoothed RTT of connections at close",
		     .type = NT_METRIC_HISTOGRAM, .n_labels = 0,
		     .buckets = srtt_buckets,
		     .n_buckets = NT_ARRAY_LEN(srtt_buckets) },
	[M_RST_UNOWNED] = { .name = "ntcore_net_tcp_resets_unowned_total",
			    .help = "RSTs for sockets not traced (host-wide only)",
			    .type = NT_METRIC_COUNTER, .n_labels = 1,
			    .label_names = lbl_dir },
};

/* ---- state ------------------------------------------------------------ */

struct net_dead {
	struct net_proc_key key;
	uint64_t since_ms;
};

struct net_state {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct net_cfg *cfg;
	int ev_open, ev_close, ev_reset, ev_fail, ev_report;
	struct nt_metric *m[M_COUNT];
	uint16_t ports[NET_PORTS_MAX];
	int n_ports;

	struct net_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link *cg_link;
	uint64_t drops_reported;
	uint64_t map_full_reported;
	uint64_t last_report_ms;
	bool final_done;

	struct net_top closed_top; /* largest closed connections of the run */
	struct net_dead *dead;
	size_t n_dead, cap_dead;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* comm as a label value: printable, NUL-terminated. */
static void comm_label(char out[NT_COMM_LEN + 1], const char *comm)
{
	size_t i;

	for (i = 0; i < NT_COMM_LEN && comm[i]; i++)
		out[i] = (comm[i] >= 0x20 && comm[i] < 0x7f) ? comm[i] : '?';
	out[i] = '\0';
}

static const char *proto_name(uint8_t p)
{
	return p == NET_PROTO_TCP ? "tcp" : p == NET_PROTO_UDP ? "udp" : "?";
}

/* ---- init ------------------------------------------------------------- */

/* Stop producing (ABI 1.6): the skeleton's links and the cgroup socket
 * program go, all at once; the ring and maps stay for the core's last read. */
static void net_quiesce(void *state)
{
	struct net_state *st = state;
	struct nt_linkset ls = {0};

	if (st->skel)
		nt_linkset_take_skeleton(&ls, st->skel->skeleton);
	nt_linkset_add(&ls, st->cg_link);
	st->cg_link = NULL;
	nt_linkset_release(&ls);
}

static void net_fini(void *state);

static int net_init(struct nt_instance *inst, const struct nt_host *host,
		    const void *config, void **state)
{
	const struct net_cfg *cfg = config;
	struct net_state *st;
	char err[160];
	int rc;

	if (!cfg->tcp && !cfg->udp)
		return host->config_error(inst, "udp",
					  "tcp and udp are both false: "
					  "nothing to trace");
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->inst = inst;
	st->host = host;
	st->cfg = cfg;
	rc = net_parse_ports(cfg->ports.v, cfg->ports.n, st->ports,
			     NET_PORTS_MAX, err, sizeof(err));
	if (rc < 0) {
		free(st);
		return host->config_error(inst, "ports", "%s", err);
	}
	st->n_ports = rc;
	if (net_top_init(&st->closed_top, (size_t)cfg->top_n) < 0) {
		free(st);
		return -ENOMEM;
	}

	st->ev_open = host->register_schema(inst, &schema_open);
	st->ev_close = host->register_schema(inst, &schema_conn);
	st->ev_reset = host->register_schema(inst, &schema_reset);
	st->ev_fail = host->register_schema(inst, &schema_fail);
	st->ev_report = host->register_schema(inst, &schema_report);
	if (st->ev_open < 0 || st->ev_close < 0 || st->ev_reset < 0 ||
	    st->ev_fail < 0 || st->ev_report < 0) {
		host->log(inst, NT_LOG_ERROR, "cannot register the net.* schemas");
		net_fini(st);
		return -EEXIST;
	}
	for (int i = 0; i < M_COUNT; i++) {
		st->m[i] = host->metric_register(inst, &net_metrics[i]);
		if (!st->m[i]) {
			host->log(inst, NT_LOG_ERROR, "cannot register metric %s",
				  net_metrics[i].name);
			net_fini(st);
			return -EINVAL;
		}
	}
	*state = st;
	return 0;
}

/* ---- ring buffer ------------------------------------------------------ */

static void row_from_ev(struct net_top_row *r, const struct net_conn_ev *e)
{
	memset(r, 0, sizeof(*r));
	r->key = e->cookie;
	r->bytes = e->tx_bytes + e->rx_bytes;
	r->pid = e->hdr.pid;
	comm_label(r->comm, e->hdr.comm);
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

static int net_on_record(void *ctx, void *data, size_t size)
{
	struct net_state *st = ctx;
	const struct net_conn_ev *e = data;
	char pid[16], comm[NT_COMM_LEN + 1];

	if (size < sizeof(*e))
		return 0;
	if (e->hdr.size > size) { /* it would be read past its end downstream */
		st->host->count_drop(st->inst, "bpf", 1);
		return 0;
	}
	if ((int)e->hdr.type == st->ev_close) {
		struct net_top_row r;

		row_from_ev(&r, e);
		net_top_offer(&st->closed_top, &r);
		if (e->proto[0] == 't' && e->srtt_ns)
			st->host->metric_observe(st->m[M_SRTT], NULL,
						 (double)e->srtt_ns / 1e9);
	} else if ((int)e->hdr.type == st->ev_fail) {
		snprintf(pid, sizeof(pid), "%u", e->hdr.pid);
		comm_label(comm, e->hdr.comm);
		const char *lv[] = { pid, comm };

		st->host->metric_add(st->m[M_FAIL], lv, 1);
	}
	if (st->cfg->conn_events)
		st->host->publish(st->inst, data);
	return 0;
}

/* ---- metrics copy ----------------------------------------------------- */

static bool proc_alive(uint32_t pid)
{
	return pid == 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

static void proc_labels(const struct net_proc_key *k, const struct net_proc *v,
			char pid[16], char comm[NT_COMM_LEN + 1])
{
	snprintf(pid, 16, "%u", k->tgid);
	comm_label(comm, v->comm);
}

static void proc_forget(struct net_state *st, const struct net_proc_key *k,
			const struct net_proc *v)
{
	char pid[16], comm[NT_COMM_LEN + 1];

	proc_labels(k, v, pid, comm);
	const char *l3[] = { pid, comm, proto_name(k->proto) };
	const char *l2[] = { pid, comm };

	for (int i = M_TX_BYTES; i <= M_CLOSED; i++)
		st->host->metric_remove(st->m[i], l3);
	for (int i = M_RETRANS; i <= M_FAIL; i++)
		st->host->metric_remove(st->m[i], l2);
	bpf_map_delete_elem(bpf_map__fd(st->skel->maps.procs), k);
}

static struct net_dead *dead_find(struct net_state *st,
				  const struct net_proc_key *k)
{
	for (size_t i = 0; i < st->n_dead; i++)
		if (st->dead[i].key.tgid == k->tgid &&
		    st->dead[i].key.proto == k->proto)
			return &st->dead[i];
	return NULL;
}

/* Is the process gone for longer than the linger time? */
static bool proc_expired(struct net_state *st, const struct net_proc_key *k,
			 uint64_t now)
{
	struct net_dead *d = dead_find(st, k);

	if (proc_alive(k->tgid)) {
		if (d)
			*d = st->dead[--st->n_dead];
		return false;
	}
	if (!d) {
		if (st->n_dead == st->cap_dead) {
			size_t cap = st->cap_dead ? st->cap_dead * 2 : 16;
			struct net_dead *nd = realloc(st->dead, cap * sizeof(*nd));

			if (!nd)
				return false;
			st->dead = nd;
			st->cap_dead = cap;
		}
		d = &st->dead[st->n_dead++];
		d->key = *k;
		d->since_ms = now;
		return false;
	}
	if (now - d->since_ms < NET_LINGER_MS)
		return false;
	*d = st->dead[--st->n_dead];
	return true;
}

/* Copy the per-process counters into the registry. With `rows`, also fill
 * report rows (caller frees *rows). */
static void net_copy_procs(struct net_state *st, bool expire,
			   struct net_proc_row **rows, size_t *n_rows)
{
	int fd = bpf_map__fd(st->skel->maps.procs);
	struct net_proc_key key, next, *prev = NULL;
	struct net_proc v;
	uint64_t now = now_ms();
	size_t cap = 0;

	if (rows) {
		*rows = NULL;
		*n_rows = 0;
	}
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &v) < 0)
			continue;
		if (expire && proc_expired(st, &key, now)) {
			proc_forget(st, &key, &v);
			continue;
		}
		char pid[16], comm[NT_COMM_LEN + 1];

		proc_labels(&key, &v, pid, comm);
		const char *l3[] = { pid, comm, proto_name(key.proto) };
		const char *l2[] = { pid, comm };
		const struct nt_host *h = st->host;

		h->metric_set(st->m[M_TX_BYTES], l3, (double)v.tx_bytes);
		h->metric_set(st->m[M_RX_BYTES], l3, (double)v.rx_bytes);
		h->metric_set(st->m[M_TX_PKTS], l3, (double)v.tx_packets);
		h->metric_set(st->m[M_RX_PKTS], l3, (double)v.rx_packets);
		h->metric_set(st->m[M_OPENED], l3, (double)v.opened);
		h->metric_set(st->m[M_CLOSED], l3, (double)v.closed);
		if (key.proto == NET_PROTO_TCP) {
			h->metric_set(st->m[M_RETRANS], l2, (double)v.retransmits);
			h->metric_set(st->m[M_RST_SENT], l2, (double)v.resets_sent);
			h->metric_set(st->m[M_RST_RECV], l2, (double)v.resets_recv);
		}
		if (rows) {
			if (*n_rows == cap) {
				size_t nc = cap ? cap * 2 : 32;
				struct net_proc_row *nr =
					realloc(*rows, nc * sizeof(*nr));

				if (!nr)
					continue;
				*rows = nr;
				cap = nc;
			}
			struct net_proc_row *r = &(*rows)[(*n_rows)++];

			memset(r, 0, sizeof(*r));
			r->pid = key.tgid;
			memcpy(r->comm, comm, sizeof(r->comm));
			snprintf(r->proto, sizeof(r->proto), "%s",
				 proto_name(key.proto));
			r->tx_bytes = v.tx_bytes;
			r->rx_bytes = v.rx_bytes;
			r->tx_packets = v.tx_packets;
			r->rx_packets = v.rx_packets;
			r->retransmits = v.retransmits;
			r->resets = v.resets_sent + v.resets_recv;
		}
	}
}

static uint64_t stat_sum(struct net_state *st, uint32_t which)
{
	return nt_bpf_percpu_sum_at(bpf_map__fd(st->skel->maps.stats), which);
}

/* Walk the live connections: count them per protocol and, with `top`,
 * offer each to it. With `emit_open`, publish a net.conn (closed = false)
 * for each: the run is ending. */
static uint64_t net_walk_conns(struct net_state *st, struct net_top *top,
			       bool emit_open)
{
	int fd = bpf_map__fd(st->skel->maps.conns);
	uint64_t key, next, *prev = NULL, n_tcp = 0, n_udp = 0;
	bool filtered = st->skel->rodata->nt_filter_on;
	uint64_t now = now_ns();
	struct net_conn c;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
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
		struct net_conn_ev e;

		memset(&e, 0, sizeof(e));
		e.hdr.type = (uint32_t)st->ev_close;
		e.hdr.size = sizeof(e);
		e.hdr.ts_ns = now;
		e.hdr.pid = c.pid;
		e.hdr.tid = c.tid;
		memcpy(e.hdr.comm, c.comm, NT_COMM_LEN);
		memcpy(e.laddr, c.laddr, 16);
		memcpy(e.raddr, c.raddr, 16);
		e.lport = c.lport;
		e.rport = c.rport;
		snprintf(e.proto, sizeof(e.proto), "%s", proto_name(c.proto));
		e.family = c.family;
		e.reason = NET_EV_CLOSE;
		e.closed = 0;
		snprintf(e.role, sizeof(e.role), "%s",
			 c.role == NET_ROLE_ACTIVE    ? "active"
			 : c.role == NET_ROLE_PASSIVE ? "passive"
			 : c.role == NET_ROLE_SOCKET  ? "socket"
						      : "unknown");
		e.cookie = key;
		e.duration_ns = c.ts_open && now > c.ts_open ? now - c.ts_open : 0;
		e.hdr.ts_ns = now - e.duration_ns; /* an interval: its start */
		e.tx_bytes = c.tx_bytes;
		e.rx_bytes = c.rx_bytes;
		e.tx_packets = c.tx_packets;
		e.rx_packets = c.rx_packets;
		e.srtt_ns = (uint64_t)c.srtt_us * 1000;
		e.retransmits = c.retransmits;
		e.resets = c.resets_sent + c.resets_recv;
		if (top) {
			struct net_top_row r;

			row_from_ev(&r, &e);
			net_top_offer(top, &r);
		}
		if (emit_open && st->cfg->conn_events && c.open_sent)
			st->host->publish(st->inst, &e.hdr);
	}
	const char *lt[] = { "tcp" }, *lu[] = { "udp" };

	if (st->cfg->tcp)
		st->host->metric_set(st->m[M_ACTIVE], lt, (double)n_tcp);
	if (st->cfg->udp)
		st->host->metric_set(st->m[M_ACTIVE], lu, (double)n_udp);
	return n_tcp + n_udp;
}

static void net_publish_report(struct net_state *st, struct net_proc_row *rows,
			       size_t n_rows)
{
	struct net_top top;
	uint64_t active;
	size_t len, cap = 4096 + (size_t)st->cfg->top_n * 400;
	struct net_report_ev *ev;

	if (net_top_init(&top, (size_t)st->cfg->top_n) < 0)
		return;
	for (size_t i = 0; i < st->closed_top.n; i++)
		net_top_offer(&top, &st->closed_top.rows[i]);
	active = net_walk_conns(st, &top, false);
	ev = calloc(1, sizeof(*ev) + cap);
	if (!ev) {
		net_top_free(&top);
		return;
	}
	len = net_format_report((char *)(ev + 1), cap, active, rows, n_rows,
				(size_t)st->cfg->top_n, &top);
	if (len >= cap)
		len = cap - 1;
	ev->hdr.type = (uint32_t)st->ev_report;
	ev->hdr.size = (uint32_t)(sizeof(*ev) + len);
	ev->hdr.ts_ns = now_ns();
	ev->hdr.pid = (uint32_t)getpid();
	ev->hdr.tid = ev->hdr.pid;
	snprintf(ev->hdr.comm, sizeof(ev->hdr.comm), "ntcore");
	ev->text.off = sizeof(*ev);
	ev->text.len = (uint32_t)len;
	st->host->publish(st->inst, &ev->hdr);
	free(ev);
	net_top_free(&top);
}

/* ---- loop ------------------------------------------------------------- */

static void net_tick(struct net_state *st, bool final)
{
	const struct nt_host *h = st->host;
	uint64_t full, rs, rr;
	bool report = false;
	struct net_proc_row *rows = NULL;
	size_t n_rows = 0;
	uint64_t now = now_ms();

	nt_bpf_report_drops(h, st->inst, bpf_map__fd(st->skel->maps.nt_drops),
			    &st->drops_reported);
	full = stat_sum(st, NET_STAT_CONN_MAP_FULL) +
	       stat_sum(st, NET_STAT_PROC_MAP_FULL);
	if (full > st->map_full_reported) {
		h->count_drop(st->inst, "map_full", full - st->map_full_reported);
		if (!st->map_full_reported)
			h->log(st->inst, NT_LOG_WARN,
			       "connection table full: raise max_connections "
			       "(now %lld)", (long long)st->cfg->max_connections);
		st->map_full_reported = full;
	}
	rs = stat_sum(st, NET_STAT_RST_SENT_NOSOCK);
	rr = stat_sum(st, NET_STAT_RST_RECV_NOSOCK);
	if (!st->skel->rodata->nt_filter_on && st->cfg->tcp) {
		const char *ls[] = { "sent" }, *lr[] = { "received" };

		h->metric_set(st->m[M_RST_UNOWNED], ls, (double)rs);
		h->metric_set(st->m[M_RST_UNOWNED], lr, (double)rr);
	}
	if (final || (st->cfg->report_interval_s &&
		      now - st->last_report_ms >=
			      (uint64_t)st->cfg->report_interval_s * 1000))
		report = true;
	net_copy_procs(st, !final, report ? &rows : NULL, &n_rows);
	if (report) {
		st->last_report_ms = now;
		net_publish_report(st, rows, n_rows);
	} else {
		net_walk_conns(st, NULL, false);
	}
	free(rows);
}

static int net_poll(void *state, uint32_t token, uint32_t budget)
{
	struct net_state *st = state;
	int n;

	(void)budget; /* libbpf 1.1 has no bounded consume */
	if (!st->rb)
		return 0;
	if (token == TOK_RING) {
		n = ring_buffer__consume(st->rb);
		return n < 0 ? 0 : n;
	}
	if (token == TOK_TIMER) {
		ring_buffer__consume(st->rb);
		net_tick(st, false);
	}
	return 0;
}

/* ---- attach / detach -------------------------------------------------- */

static int cgroup2_root_fd(struct net_state *st)
{
	char buf[16384], dir[512];
	int fd = open("/proc/self/mounts", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	buf[n] = '\0';
	if (net_find_cgroup2(buf, dir, sizeof(dir)) < 0)
		return -ENOENT;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	st->host->log(st->inst, NT_LOG_DEBUG, "cgroup v2 root: %s", dir);
	return fd;
}

static void net_detach(void *state);

static int net_attach(void *state)
{
	struct net_state *st = state;
	const struct nt_host *h = st->host;
	const struct net_cfg *cfg = st->cfg;
	struct btf *vmlinux = btf__load_vmlinux_btf();
	int err;

	if (!nt_bpf_kernel_has_tp(vmlinux, "sock_send_length") ||
	    !nt_bpf_kernel_has_tp(vmlinux, "sock_recv_length") ||
	    !nt_bpf_kernel_has_tp(vmlinux, "inet_sock_set_state")) {
		h->log(st->inst, NT_LOG_ERROR,
		       "this kernel lacks the sock:sock_send_length / "
		       "sock_recv_length tracepoints (Linux 6.3+) or kernel "
		       "BTF (/sys/kernel/btf/vmlinux): net cannot count bytes");
		btf__free(vmlinux);
		return -ENOTSUP;
	}
	st->skel = net_bpf__open();
	if (!st->skel) {
		err = -errno;
		h->log(st->inst, NT_LOG_ERROR, "cannot open the BPF object: %s",
		       strerror(-err));
		btf__free(vmlinux);
		return err;
	}
	static const struct { const char *tp; size_t off; } optional[] = {
		{ "tcp_retransmit_skb", offsetof(struct net_bpf, progs.net_retransmit) },
		{ "tcp_send_reset", offsetof(struct net_bpf, progs.net_reset_sent) },
		{ "tcp_receive_reset", offsetof(struct net_bpf, progs.net_reset_recv) },
	};
	if (!cfg->udp || !nt_bpf_kernel_has_tp(vmlinux, "sk_data_ready"))
		bpf_program__set_autoload(st->skel->progs.net_data_ready, false);
	for (size_t i = 0; i < NT_ARRAY_LEN(optional); i++) {
		struct bpf_program *p =
			*(struct bpf_program **)((char *)st->skel + optional[i].off);

		if (!cfg->tcp || !nt_bpf_kernel_has_tp(vmlinux, optional[i].tp)) {
			bpf_program__set_autoload(p, false);
			if (cfg->tcp)
				h->log(st->inst, NT_LOG_WARN,
				       "kernel lacks tracepoint %s: not counted",
				       optional[i].tp);
		}
	}
	btf__free(vmlinux);
	if (!cfg->udp)
		bpf_program__set_autoload(st->skel->progs.net_sock_release, false);

	st->skel->rodata->ev_open_type = (uint32_t)st->ev_open;
	st->skel->rodata->ev_close_type = (uint32_t)st->ev_close;
	st->skel->rodata->ev_reset_type = (uint32_t)st->ev_reset;
	st->skel->rodata->ev_fail_type = (uint32_t)st->ev_fail;
	st->skel->rodata->want_tcp = cfg->tcp;
	st->skel->rodata->want_udp = cfg->udp;
	st->skel->rodata->port_filter_on = st->n_ports > 0;
	bpf_map__set_max_entries(st->skel->maps.conns,
				 (uint32_t)cfg->max_connections);
	err = nt_bpf_use_targets(h, st->inst, st->skel->maps.nt_targets,
				 &st->skel->rodata->nt_filter_on);
	if (err)
		goto fail;
	err = net_bpf__load(st->skel);
	if (err) {
		h->log(st->inst, NT_LOG_ERROR, "cannot load the BPF programs: %s",
		       strerror(-err));
		goto fail;
	}
	for (int i = 0; i < st->n_ports; i++) {
		uint8_t one = 1;

		bpf_map_update_elem(bpf_map__fd(st->skel->maps.ports),
				    &st->ports[i], &one, BPF_ANY);
	}
	err = net_bpf__attach(st->skel);
	if (err) {
		h->log(st->inst, NT_LOG_ERROR, "cannot attach the tracepoints: %s",
		       strerror(-err));
		goto fail;
	}
	if (cfg->udp) {
		int cg = cgroup2_root_fd(st);

		if (cg >= 0) {
			st->cg_link = bpf_program__attach_cgroup(
				st->skel->progs.net_sock_release, cg);
			if (!st->cg_link)
				err = -errno;
			close(cg);
		} else {
			err = cg;
		}
		if (!st->cg_link) {
			h->log(st->inst, NT_LOG_WARN,
			       "cannot hook socket release on the cgroup v2 root "
			       "(%s): the end of a UDP socket is not seen; UDP "
			       "flows are reported when the run ends",
			       strerror(-err));
		}
		err = 0;
	}
	err = nt_bpf_ring_open(h, st->inst, st->skel->maps.events, net_on_record, st,
			       TOK_RING, &st->rb);
	if (err)
		goto fail;
	err = h->add_timer(st->inst, (uint64_t)cfg->interval_ms, TOK_TIMER);
	if (err) {
		h->log(st->inst, NT_LOG_ERROR, "cannot register with the loop: %s",
		       strerror(-err));
		goto fail;
	}
	st->last_report_ms = now_ms();
	st->final_done = false;
	h->log(st->inst, NT_LOG_INFO, "tracing%s%s%s, %s, %d port filter(s)",
	       cfg->tcp ? " tcp" : "", cfg->udp ? " udp" : "",
	       st->skel->rodata->nt_filter_on ? " of the targets" : " host-wide",
	       st->cg_link ? "udp close via cgroup" : "no udp close hook",
	       st->n_ports);
	return 0;
fail:
	net_detach(st);
	return err < 0 ? err : -EINVAL;
}

/* Last words: drain the ring, copy the final counters, announce the
 * connections still open and publish the final report. Runs once, from
 * flush (shutdown) or from detach when the core has no flush for probes. */
static void net_final(struct net_state *st)
{
	if (st->final_done || !st->skel || !st->rb)
		return;
	st->final_done = true;
	ring_buffer__consume(st->rb);
	net_walk_conns(st, NULL, true);
	net_tick(st, true);
}

static void net_flush(void *state)
{
	net_final(state);
}

static void net_detach(void *state)
{
	struct net_state *st = state;

	net_final(st);
	ring_buffer__free(st->rb);
	st->rb = NULL;
	bpf_link__destroy(st->cg_link);
	st->cg_link = NULL;
	net_bpf__destroy(st->skel);
	st->skel = NULL;
	free(st->dead);
	st->dead = NULL;
	st->n_dead = st->cap_dead = 0;
}

static void net_fini(void *state)
{
	struct net_state *st = state;

	if (!st)
		return;
	if (st->skel)
		net_detach(st);
	net_top_free(&st->closed_top);
	free(st);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "net",
	.kind = NT_KIND_PROBE,
	.description = "TCP/UDP bytes and packets per process and connection, "
		       "connection lifecycle, retransmits, resets, RTT",
	.version = "0.1.0",
	.config = net_cfg_keys,
	.n_config = NT_ARRAY_LEN(net_cfg_keys),
	.config_size = sizeof(struct net_cfg),
	.init = net_init,
	.attach = net_attach,
	.poll = net_poll,
	.detach = net_detach,
	.quiesce = net_quiesce,
	.fini = net_fini,
	.flush = net_flush,
};
