/* SPDX-License-Identifier: MIT */
/*
 * The `listen` key: "HOST:PORT", "[IPV6]:PORT" or ":PORT" (every address,
 * IPv6 and IPv4), parsed without I/O (unit-tested), then bound here so that
 * a port in use is an error that names the address.
 */
#ifndef NT_PROM_LISTEN_H
#define NT_PROM_LISTEN_H

#include <stddef.h>

#define PL_HOST_MAX 256

struct pl_addr {
	char host[PL_HOST_MAX]; /* "" means every address */
	unsigned port;          /* 0: any free port (tests) */
};

/* 0, or -EINVAL with *why set to a static explanation. */
int pl_parse(const char *s, struct pl_addr *out, const char **why);

/*
 * Resolve and bind a listening TCP socket (close-on-exec, SO_REUSEADDR,
 * backlog 128). Returns the fd, or a negative errno; `desc` receives the
 * bound address as "127.0.0.1:9478" / "[::1]:9478" (the real port when 0
 * was asked for), or on failure a message naming host:port and the reason.
 */
int pl_bind(const struct pl_addr *a, char *desc, size_t descsz);

#endif /* NT_PROM_LISTEN_H */
