/* SPDX-License-Identifier: MIT */
/*
 * The gRPC sink's endpoint syntax: "host:port", "[v6addr]:port",
 * "http://host:port", "https://host:port" (TLS), "unix:/path" or
 * "unix:///path", checked at init with a one-line reason for the config
 * error, and turned into the target string gRPC takes.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "grpc_sink.h"

static int parse_port(const char *p, char *err, size_t elen)
{
	long v = 0;

	if (!*p) {
		snprintf(err, elen, "missing port after ':'");
		return -1;
	}
	for (const char *c = p; *c; c++) {
		if (!isdigit((unsigned char)*c)) {
			snprintf(err, elen, "port \"%s\" is not a number", p);
			return -1;
		}
		v = v * 10 + (*c - '0');
		if (v > 65535)
			break;
	}
	if (v < 1 || v > 65535) {
		snprintf(err, elen, "port %s is out of range 1..65535", p);
		return -1;
	}
	return 0;
}

/* Not empty, not too long, no blanks or control characters. */
static int check_text(const char *in, size_t tlen, char *err, size_t elen)
{
	if (!in || !*in) {
		snprintf(err, elen, "endpoint is empty (expected \"host:port\")");
		return -1;
	}
	if (strlen(in) >= 512 || strlen(in) >= tlen) {
		snprintf(err, elen, "endpoint is too long");
		return -1;
	}
	for (const char *c = in; *c; c++) {
		if (isspace((unsigned char)*c) || !isprint((unsigned char)*c)) {
			snprintf(err, elen, "endpoint contains a blank or control character");
			return -1;
		}
	}
	return 0;
}

/* "unix:/path" or "unix:///path" (s points past "unix:"). */
static int parse_unix(const char *path, char *target, size_t tlen, char *err,
		      size_t elen)
{
	if (strncmp(path, "//", 2) == 0)
		path += 2;
	if (path[0] != '/' || path[1] == '\0') {
		snprintf(err, elen, "unix endpoint needs an absolute socket path (\"unix:/run/otel.sock\")");
		return -1;
	}
	snprintf(target, tlen, "unix:%s", path);
	return 0;
}

/* Past "http://" or "https://" (setting *scheme_tls); NULL for another
 * scheme. */
static const char *skip_scheme(const char *s, int *scheme_tls, char *err, size_t elen)
{
	if (strncmp(s, "https://", 8) == 0) {
		*scheme_tls = 1;
		return s + 8;
	}
	if (strncmp(s, "http://", 7) == 0) {
		*scheme_tls = 0;
		return s + 7;
	}
	if (strstr(s, "://")) {
		snprintf(err, elen, "unknown scheme (use \"host:port\", \"http://host:port\", \"https://host:port\" or \"unix:/path\")");
		return NULL;
	}
	return s;
}

/* "[v6addr]:port": the port's text, or NULL. */
static char *split_v6(char *hostport, char *err, size_t elen)
{
	char *close = strchr(hostport, ']');

	if (!close || close == hostport + 1) {
		snprintf(err, elen, "unterminated or empty IPv6 address in brackets");
		return NULL;
	}
	for (char *c = hostport + 1; c < close; c++) {
		if (!isxdigit((unsigned char)*c) && *c != ':' && *c != '.') {
			snprintf(err, elen, "invalid character '%c' in IPv6 address", *c);
			return NULL;
		}
	}
	if (close[1] != ':') {
		snprintf(err, elen, "missing port (expected \"[addr]:port\", e.g. \"[::1]:4317\")");
		return NULL;
	}
	return close + 2;
}

/* "host:port": the port's text, or NULL. */
static char *split_host(char *hostport, char *err, size_t elen)
{
	char *port = strrchr(hostport, ':');

	if (!port) {
		snprintf(err, elen, "missing port (expected \"host:port\", e.g. \"%s:4317\")", hostport);
		return NULL;
	}
	if (port == hostport) {
		snprintf(err, elen, "missing host before ':'");
		return NULL;
	}
	if (memchr(hostport, ':', (size_t)(port - hostport))) {
		snprintf(err, elen, "IPv6 addresses must be in brackets (\"[::1]:4317\")");
		return NULL;
	}
	for (char *c = hostport; c < port; c++) {
		if (!isalnum((unsigned char)*c) && *c != '.' && *c != '-' && *c != '_') {
			snprintf(err, elen, "invalid character '%c' in host name", *c);
			return NULL;
		}
	}
	return port + 1;
}

int gs_parse_endpoint(const char *in, char *target, size_t tlen,
		      int *scheme_tls, char *err, size_t elen)
{
	char buf[512];
	const char *s;
	char *port;
	size_t n;

	*scheme_tls = -1;
	if (check_text(in, tlen, err, elen) < 0)
		return -1;
	if (strncmp(in, "unix:", 5) == 0)
		return parse_unix(in + 5, target, tlen, err, elen);
	s = skip_scheme(in, scheme_tls, err, elen);
	if (!s)
		return -1;
	snprintf(buf, sizeof(buf), "%s", s);
	n = strlen(buf);
	if (n > 0 && buf[n - 1] == '/')
		buf[--n] = '\0';
	if (strchr(buf, '/')) {
		snprintf(err, elen, "endpoint must not have a path (OTLP/gRPC uses fixed service paths)");
		return -1;
	}
	port = buf[0] == '[' ? split_v6(buf, err, elen) : split_host(buf, err, elen);
	if (!port || parse_port(port, err, elen) < 0)
		return -1;
	snprintf(target, tlen, "%s", buf);
	return 0;
}
