/* SPDX-License-Identifier: MIT */
/*
 * Loopback request/response workload for bench/net.sh: a client and a
 * server process exchange ROUNDS messages of SIZE bytes over TCP (or UDP)
 * on 127.0.0.1, one send and one recv per message on each side, so the run
 * is dominated by socket syscalls (4 per round) - the path the net probe's
 * tracepoints sit on. Prints the wall time of the exchange in seconds.
 *
 *   netbench tcp|udp ROUNDS SIZE
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void full_recv(int fd, char *buf, size_t n, int tcp)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = recv(fd, buf + got, n - got, 0);

		if (r <= 0)
			die("recv");
		got += (size_t)r;
		if (!tcp)
			return;
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	int tcp, lfd, one = 1;
	long rounds;
	size_t size;
	char *buf;
	pid_t pid;
	struct timespec t0, t1;

	if (argc != 4) {
		fprintf(stderr, "usage: netbench tcp|udp ROUNDS SIZE\n");
		return 2;
	}
	tcp = strcmp(argv[1], "tcp") == 0;
	rounds = atol(argv[2]);
	size = (size_t)atol(argv[3]);
	buf = calloc(1, size ? size : 1);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
	if (lfd < 0 || bind(lfd, (void *)&a, sizeof(a)) < 0 ||
	    getsockname(lfd, (void *)&a, &alen) < 0)
		die("server socket");
	if (tcp && listen(lfd, 1) < 0)
		die("listen");

	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) { /* server: echo */
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		int fd = lfd;

		if (tcp) {
			fd = accept(lfd, NULL, NULL);
			if (fd < 0)
				die("accept");
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		}
		for (long i = 0; i < rounds; i++) {
			if (tcp) {
				full_recv(fd, buf, size, 1);
				if (send(fd, buf, size, 0) != (ssize_t)size)
					die("send");
			} else {
				if (recvfrom(fd, buf, size, 0, (void *)&peer, &plen) < 0)
					die("recvfrom");
				if (sendto(fd, buf, size, 0, (void *)&peer, plen) < 0)
					die("sendto");
			}
		}
		_exit(0);
	}

	int c = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);

	if (c < 0 || connect(c, (void *)&a, sizeof(a)) < 0)
		die("connect");
	if (tcp)
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < rounds; i++) {
		if (send(c, buf, size, 0) != (ssize_t)size)
			die("send");
		full_recv(c, buf, size, tcp);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(c);
	waitpid(pid, NULL, 0);
	printf("%.6f\n", (double)(t1.tv_sec - t0.tv_sec) +
				 (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}
