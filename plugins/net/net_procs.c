/* SPDX-License-Identifier: MIT */
/*
 * net probe: the per-process counters of the BPF `procs` map into the
 * metric registry, on the timer. A process gone for NET_LINGER_MS is
 * forgotten: its series and its BPF entry go (the linger lets the last
 * values reach every sink).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/kit/clock.h"
#include "ntcore/kit/proc.h"

#include "net.bpf.skel.h"
#include "net_int.h"

/* Label values of a process: pid[16] and comm. */
static void proc_labels(const struct net_proc_key *k, const struct net_proc *v,
			char pid[16], char comm[NET_COMM_LABEL_LEN])
{
	snprintf(pid, 16, "%u", k->tgid);
	net_comm_label(comm, v->comm);
}

static void proc_forget(struct net_state *st, const struct net_proc_key *k,
			const struct net_proc *v)
{
	char pid[16], comm[NET_COMM_LABEL_LEN];

	proc_labels(k, v, pid, comm);
	const char *l3[] = { pid, comm, net_proto_name(k->proto) };
	const char *l2[] = { pid, comm };

	for (int i = NET_M_TX_BYTES; i <= NET_M_CLOSED; i++)
		st->host->metric_remove(st->m[i], l3);
	for (int i = NET_M_RETRANS; i <= NET_M_FAIL; i++)
		st->host->metric_remove(st->m[i], l2);
	bpf_map_delete_elem(bpf_map__fd(st->skel->maps.procs), k);
}

/* Is the process gone for longer than the linger time? */
static bool proc_expired(struct net_state *st, const struct net_proc_key *k,
			 uint64_t now)
{
	uint64_t *since;
	bool created;

	if (nt_proc_alive(k->tgid)) {
		nt_hmap_del(&st->dead, k);
		return false;
	}
	since = nt_hmap_put(&st->dead, k, &created);
	if (!since)
		return false;
	if (created) {
		*since = now;
		return false;
	}
	if (now - *since < NET_LINGER_MS)
		return false;
	nt_hmap_del(&st->dead, k);
	return true;
}

static void proc_series(struct net_state *st, const struct net_proc_key *k,
			const struct net_proc *v, const char *pid,
			const char *comm)
{
	const char *l3[] = { pid, comm, net_proto_name(k->proto) };
	const char *l2[] = { pid, comm };
	const struct nt_host *h = st->host;

	h->metric_set(st->m[NET_M_TX_BYTES], l3, (double)v->tx_bytes);
	h->metric_set(st->m[NET_M_RX_BYTES], l3, (double)v->rx_bytes);
	h->metric_set(st->m[NET_M_TX_PKTS], l3, (double)v->tx_packets);
	h->metric_set(st->m[NET_M_RX_PKTS], l3, (double)v->rx_packets);
	h->metric_set(st->m[NET_M_OPENED], l3, (double)v->opened);
	h->metric_set(st->m[NET_M_CLOSED], l3, (double)v->closed);
	if (k->proto != NET_PROTO_TCP)
		return;
	h->metric_set(st->m[NET_M_RETRANS], l2, (double)v->retransmits);
	h->metric_set(st->m[NET_M_RST_SENT], l2, (double)v->resets_sent);
	h->metric_set(st->m[NET_M_RST_RECV], l2, (double)v->resets_recv);
}

/* Append a report row; false when memory runs out. */
static bool proc_row(struct net_proc_row **rows, size_t *n, size_t *cap,
		     const struct net_proc_key *k, const struct net_proc *v,
		     const char *comm)
{
	struct net_proc_row *r;

	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 32;
		struct net_proc_row *nr = realloc(*rows, nc * sizeof(*nr));

		if (!nr)
			return false;
		*rows = nr;
		*cap = nc;
	}
	r = &(*rows)[(*n)++];
	memset(r, 0, sizeof(*r));
	r->pid = k->tgid;
	snprintf(r->comm, sizeof(r->comm), "%s", comm);
	snprintf(r->proto, sizeof(r->proto), "%s", net_proto_name(k->proto));
	r->tx_bytes = v->tx_bytes;
	r->rx_bytes = v->rx_bytes;
	r->tx_packets = v->tx_packets;
	r->rx_packets = v->rx_packets;
	r->retransmits = v->retransmits;
	r->resets = v->resets_sent + v->resets_recv;
	return true;
}

void net_copy_procs(struct net_state *st, bool expire,
		    struct net_proc_row **rows, size_t *n_rows)
{
	int fd = bpf_map__fd(st->skel->maps.procs);
	struct net_proc_key key, next, *prev = NULL;
	uint64_t now = nt_clock_mono_ns() / NT_NS_PER_MS;
	struct net_proc v;
	size_t cap = 0;

	if (rows) {
		*rows = NULL;
		*n_rows = 0;
	}
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		char pid[16], comm[NET_COMM_LABEL_LEN];

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &v) < 0)
			continue;
		if (expire && proc_expired(st, &key, now)) {
			proc_forget(st, &key, &v);
			continue;
		}
		proc_labels(&key, &v, pid, comm);
		proc_series(st, &key, &v, pid, comm);
		if (rows)
			proc_row(rows, n_rows, &cap, &key, &v, comm);
	}
}
