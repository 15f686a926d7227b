/* SPDX-License-Identifier: MIT */
/*
 * net probe, user side: what its files share. The config and the state, the
 * metric table's indexes, and each file's entry points:
 *   net.c          descriptor and ops (init, poll, flush, detach, fini)
 *   net_schema.c   event schemas and metric families (data)
 *   net_ports.c    the `ports` config entries
 *   net_attach.c   tracepoint choice, BPF load and attach, the cgroup hook
 *   net_cgroup.c   the cgroup v2 root that hook attaches to
 *   net_ring.c     ring records to events and the closed-connection table
 *   net_procs.c    per-process counters to metrics, processes that exited
 *   net_conns.c    the live connections (gauge, report rows, last words)
 *   net_report.c   the net.report table
 * Ownership: net.c's init allocates the state, fini frees it and all it
 * holds; the BPF skeleton, ring and cgroup link belong to attach/detach.
 */
#ifndef NTCORE_NET_INT_H
#define NTCORE_NET_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/kit/hmap.h"
#include "ntcore/kit/ring.h"
#include "ntcore/kit/sb.h"
#include "ntcore/kit/topn.h"
#include "ntcore/plugin.h"

#include "net.h"

#define NET_PORTS_MAX 1024
/* How long the series of a process that exited stay, so that the last
 * values reach every sink (the file sink's final dump included). */
#define NET_LINGER_MS 60000
/* A comm as a label: NT_COMM_LEN bytes, each bad one U+FFFD (3 bytes). */
#define NET_COMM_LABEL_LEN (3 * NT_COMM_LEN + 1)

#define NET_TOK_RING 1
#define NET_TOK_TIMER 2

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

enum net_metric {
	NET_M_TX_BYTES, NET_M_RX_BYTES, NET_M_TX_PKTS, NET_M_RX_PKTS,
	NET_M_OPENED, NET_M_CLOSED, NET_M_RETRANS, NET_M_RST_SENT,
	NET_M_RST_RECV, NET_M_FAIL, NET_M_ACTIVE, NET_M_SRTT, NET_M_RST_UNOWNED,
	NET_M_COUNT
};

struct net_bpf;
struct nt_ring;
struct bpf_link;

struct net_state {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct net_cfg *cfg;
	int ev_open, ev_close, ev_reset, ev_fail, ev_report;
	struct nt_metric *m[NET_M_COUNT];
	uint16_t ports[NET_PORTS_MAX];
	int n_ports;

	struct net_bpf *skel;
	struct nt_ring *rb;
	struct bpf_link *cg_link;
	uint64_t drops_reported;
	uint64_t map_full_reported;
	uint64_t last_report_ms;
	bool final_done;

	struct nt_topn closed_top; /* struct net_top_row: largest closed
				    * connections of the run, by cookie */
	struct nt_hmap dead;       /* struct net_proc_key -> mono ms first
				    * seen gone */
};

/* A row of a top-N table: a connection, live or closed. */
struct net_top_row {
	uint64_t key;          /* socket cookie; rows with the same key merge */
	uint64_t bytes;        /* tx + rx, the sort key */
	uint32_t pid;
	char comm[NET_COMM_LABEL_LEN];
	char proto[4];
	uint8_t laddr[16], raddr[16];
	uint16_t lport, rport;
	uint64_t tx_bytes, rx_bytes;
	uint64_t tx_packets, rx_packets;
	uint32_t retransmits;
	uint64_t srtt_ns;
	int closed;
};

/* A per-process row of the report. */
struct net_proc_row {
	uint32_t pid;
	char comm[NET_COMM_LABEL_LEN];
	char proto[4];
	uint64_t tx_bytes, rx_bytes, tx_packets, rx_packets;
	uint64_t retransmits, resets;
};

struct net_report_ev {
	struct nt_event_hdr hdr;
	struct nt_vstr text;
};

/* net_schema.c */
extern const struct nt_schema net_schema_open, net_schema_conn,
	net_schema_reset, net_schema_fail, net_schema_report;
extern const struct nt_metric_desc net_metrics[NET_M_COUNT];

/* net_ports.c */
/*
 * Parse `ports` entries ("443", "8000-8010") into a list of ports, sorted
 * and without duplicates. Returns how many (<= max), or -EINVAL with a
 * message in `err` naming the entry, or -E2BIG when they expand past max.
 */
int net_parse_ports(const char *const *v, uint32_t n, uint16_t *out,
		    size_t max, char *err, size_t errlen);

/* net_cgroup.c */
/*
 * The first cgroup v2 mount point in /proc/mounts-formatted text, written
 * to `out`; returns 0, or -ENOENT when there is none.
 */
int net_find_cgroup2(const char *mounts, char *out, size_t outlen);
/* An O_DIRECTORY fd of this mount namespace's cgroup v2 root, or -errno. */
int net_cgroup2_root_fd(struct net_state *st);

/* net_attach.c */
int net_attach(void *state);

/* net_ring.c */
/* The ring buffer's callback (libbpf's ring_buffer_sample_fn). */
int net_on_record(void *ctx, void *data, size_t size);
/* comm (NUL-padded, NT_COMM_LEN) as a label value: valid UTF-8. */
void net_comm_label(char out[NET_COMM_LABEL_LEN], const char *comm);
const char *net_proto_name(uint8_t proto);
/* A report row from a net.conn record. */
void net_row_from_ev(struct net_top_row *r, const struct net_conn_ev *e);
/* Keep r among the largest by bytes; a row with the same cookie is
 * replaced. */
void net_top_offer(struct nt_topn *t, const struct net_top_row *r);

/* net_procs.c */
/* Copy the per-process counters into the registry; with `expire`, forget
 * processes gone for NET_LINGER_MS. With rows, also hand back report rows
 * (the caller frees *rows). */
void net_copy_procs(struct net_state *st, bool expire,
		    struct net_proc_row **rows, size_t *n_rows);

/* net_conns.c */
/* Walk the live connections: set the active gauge and, with `top`, offer
 * each to it. With `emit_open`, publish a net.conn (closed = false) for
 * each: the run is ending. Returns how many there are. */
uint64_t net_walk_conns(struct net_state *st, struct nt_topn *top,
			bool emit_open);

/* net_report.c */
/* "10.0.0.1" for IPv4-mapped addresses, "fe80::1" otherwise. */
const char *net_fmt_addr(const uint8_t a[16], char *buf, size_t len);
/* "10.0.0.1:80" / "[::1]:80". */
const char *net_fmt_endpoint(const uint8_t a[16], uint16_t port, char *buf,
			     size_t len);
/*
 * The net.report text: processes (largest traffic first, at most
 * `max_procs`; sorts them), then connections (`conns`, rows of struct
 * net_top_row, largest first).
 */
void net_format_report(struct nt_sb *sb, uint64_t active,
		       struct net_proc_row *procs, size_t n_procs,
		       size_t max_procs, const struct nt_topn *conns);
/* Publish net.report: process rows, `active` connections and the largest
 * ones (`top`). */
void net_publish_report(struct net_state *st, struct net_proc_row *rows,
			size_t n_rows, uint64_t active, const struct nt_topn *top);

/* net.c: undo attach (the last words first). */
void net_detach(void *state);

#endif /* NTCORE_NET_INT_H */
