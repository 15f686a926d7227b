/* SPDX-License-Identifier: MIT */
/*
 * net probe: the user-side logic that needs no kernel (config parsing,
 * address formatting, top-N tables, the report text). Compiled into net.so
 * and into tests/unit/test_net.c.
 */
#ifndef NTCORE_NET_LOGIC_H
#define NTCORE_NET_LOGIC_H

#include <stddef.h>
#include <stdint.h>

#include "net.h"

#define NET_PORTS_MAX 1024

/*
 * Parse `ports` entries ("443", "8000-8010") into a list of ports, sorted
 * and without duplicates. Returns how many (<= max), or -EINVAL with a
 * message in `err` naming the entry, or -E2BIG when they expand past max.
 */
int net_parse_ports(const char *const *v, uint32_t n, uint16_t *out,
		    size_t max, char *err, size_t errlen);

/* "10.0.0.1" for IPv4-mapped addresses, "fe80::1" otherwise. */
const char *net_fmt_addr(const uint8_t a[16], char *buf, size_t len);

/* "10.0.0.1:80" / "[::1]:80". */
const char *net_fmt_endpoint(const uint8_t a[16], uint16_t port, char *buf,
			     size_t len);

/*
 * The first cgroup v2 mount point in /proc/mounts-formatted text, written
 * to `out`; returns 0, or -ENOENT when there is none.
 */
int net_find_cgroup2(const char *mounts, char *out, size_t outlen);

/* A row of a top-N table: a connection, live or closed. */
struct net_top_row {
	uint64_t key;          /* socket cookie; rows with the same key merge */
	uint64_t bytes;        /* tx + rx, the sort key */
	uint32_t pid;
	char comm[NT_COMM_LEN + 1];
	char proto[4];
	uint8_t laddr[16], raddr[16];
	uint16_t lport, rport;
	uint64_t tx_bytes, rx_bytes;
	uint64_t tx_packets, rx_packets;
	uint32_t retransmits;
	uint64_t srtt_ns;
	int closed;
};

struct net_top {
	struct net_top_row *rows; /* sorted by bytes, largest first */
	size_t n, cap;
};

int net_top_init(struct net_top *t, size_t cap);
void net_top_free(struct net_top *t);
/* Keep `r` if it is among the `cap` largest (a row with the same key is
 * replaced). */
void net_top_offer(struct net_top *t, const struct net_top_row *r);

/* A per-process row of the report. */
struct net_proc_row {
	uint32_t pid;
	char comm[NT_COMM_LEN + 1];
	char proto[4];
	uint64_t tx_bytes, rx_bytes, tx_packets, rx_packets;
	uint64_t retransmits, resets;
};

/*
 * The net.report text: processes (largest traffic first, at most
 * `max_procs`), then connections (largest first). Returns the text length
 * (truncated to len - 1), like snprintf.
 */
size_t net_format_report(char *buf, size_t len, uint64_t active,
			 struct net_proc_row *procs, size_t n_procs,
			 size_t max_procs, const struct net_top *conns);

/* Bytes as "12.3 MiB". */
const char *net_fmt_bytes(uint64_t b, char *buf, size_t len);

#endif /* NTCORE_NET_LOGIC_H */
