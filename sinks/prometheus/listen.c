/* SPDX-License-Identifier: MIT */
#include "listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int pl_parse(const char *s, struct pl_addr *out, const char **why)
{
	const char *colon, *host, *port;
	size_t hlen;
	char *end;
	long p;

	memset(out, 0, sizeof(*out));
	if (!s || !*s) {
		*why = "empty; expected HOST:PORT, [IPV6]:PORT or :PORT";
		return -EINVAL;
	}
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (!rb || rb[1] != ':') {
			*why = "expected [IPV6]:PORT";
			return -EINVAL;
		}
		host = s + 1;
		hlen = (size_t)(rb - host);
		port = rb + 2;
		if (hlen == 0) {
			*why = "empty IPv6 address in brackets";
			return -EINVAL;
		}
	} else {
		colon = strrchr(s, ':');
		if (!colon) {
			*why = "missing port; expected HOST:PORT, [IPV6]:PORT or :PORT";
			return -EINVAL;
		}
		if (memchr(s, ':', (size_t)(colon - s))) {
			*why = "an IPv6 address needs brackets: [::1]:9478";
			return -EINVAL;
		}
		host = s;
		hlen = (size_t)(colon - s);
		port = colon + 1;
	}
	if (hlen >= sizeof(out->host)) {
		*why = "host name too long";
		return -EINVAL;
	}
	if (!*port || *port == '-' || *port == '+' || *port == ' ') {
		*why = "missing port; expected HOST:PORT, [IPV6]:PORT or :PORT";
		return -EINVAL;
	}
	errno = 0;
	p = strtol(port, &end, 10);
	if (errno || *end || p < 0 || p > 65535) {
		*why = "port must be a number from 0 to 65535";
		return -EINVAL;
	}
	memcpy(out->host, host, hlen);
	out->host[hlen] = '\0';
	out->port = (unsigned)p;
	return 0;
}

static void fmt_sockaddr(const struct sockaddr *sa, char *o, size_t n)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)sa;

		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		snprintf(o, n, "[%s]:%u", ip, ntohs(s6->sin6_port));
	} else {
		const struct sockaddr_in *s4 = (const void *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		snprintf(o, n, "%s:%u", ip, ntohs(s4->sin_port));
	}
}

static void fmt_asked(const struct pl_addr *a, char *o, size_t n)
{
	if (strchr(a->host, ':'))
		snprintf(o, n, "[%s]:%u", a->host, a->port);
	else
		snprintf(o, n, "%s:%u", a->host, a->port);
}

static int bind_one(const struct addrinfo *ai, int dual)
{
	int one = 1, zero = 0, fd;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ai->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual ? &zero : &one,
			   sizeof(int));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

int pl_bind(const struct pl_addr *a, char *desc, size_t descsz)
{
	struct addrinfo hints = { 0 }, *res = NULL;
	char portstr[8], asked[PL_HOST_MAX + 16];
	int rc, fd = -EADDRNOTAVAIL;
	const int any = a->host[0] == '\0';

	snprintf(portstr, sizeof(portstr), "%u", a->port);
	fmt_asked(a, asked, sizeof(asked));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (any ? AI_PASSIVE : 0);
	/* Every address: one IPv6 socket that also takes IPv4 when the host
	 * has IPv6, else IPv4 alone. */
	hints.ai_family = any ? AF_INET6 : AF_UNSPEC;
	rc = getaddrinfo(any ? NULL : a->host, portstr, &hints, &res);
	if (rc && any) {
		hints.ai_family = AF_INET;
		rc = getaddrinfo(NULL, portstr, &hints, &res);
	}
	if (rc) {
		snprintf(desc, descsz, "cannot resolve %s: %s", asked,
			 gai_strerror(rc));
		return -EADDRNOTAVAIL;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int r = bind_one(ai, any);

		if (r >= 0) {
			struct sockaddr_storage ss;
			socklen_t sl = sizeof(ss);

			fd = r;
			if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
				fmt_sockaddr((struct sockaddr *)&ss, desc, descsz);
			else
				snprintf(desc, descsz, "%s", asked);
			break;
		}
		if (fd == -EADDRNOTAVAIL || r == -EADDRINUSE)
			fd = r; /* report the first, or "in use" */
	}
	freeaddrinfo(res);
	if (fd < 0) {
		if (fd == -EADDRINUSE)
			snprintf(desc, descsz,
				 "cannot listen on %s: address already in use "
				 "(another exporter or ntcore instance? set "
				 "`listen` to a free port)",
				 asked);
		else
			snprintf(desc, descsz, "cannot listen on %s: %s", asked,
				 strerror(-fd));
	}
	return fd;
}
