/* SPDX-License-Identifier: MIT */
/*
 * bench/overhead: a CPU-only stand-in for a training job, for measuring
 * what each probe costs where a real job would pay it. One step:
 *  - THREADS compute threads each run WORK_US of arithmetic, then meet at
 *    a barrier (futex waits and wake-ups, context switches);
 *  - every 4th step each thread maps, touches and unmaps 8 MiB (page
 *    faults and RSS changes, as activation memory comes and goes);
 *  - LOADERS forked worker processes each pread a 1 MiB slice of the data
 *    file (block I/O past the page cache when the file is cold) and send a
 *    4 KiB batch through a pipe; the main thread reads the batches;
 *  - a loopback TCP round trip of 256 bytes (a heartbeat to a rank 0);
 *  - a log line appended to a file.
 * Prints one line per run: "steps=N median_ms=M p10_ms=A p90_ms=B".
 * usage: trainlike DATAFILE LOGFILE [STEPS [THREADS [LOADERS [WORK_US]]]]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int steps = 200, nthreads = 4, nloaders = 2, work_us = 2000;
static pthread_barrier_t start_bar, end_bar;
static volatile int step_no;
static volatile double sink;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void compute(int us)
{
	double end = now_s() + us / 1e6, x = 1.0;

	while (now_s() < end)
		for (int i = 0; i < 2000; i++)
			x = x * 1.0000001 + 0.5 / (x + 1.0);
	sink = x;
}

static void churn_memory(void)
{
	size_t len = 8u << 20;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return;
	for (size_t i = 0; i < len; i += 4096)
		p[i] = (char)i;
	munmap(p, len);
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_barrier_wait(&start_bar);
		if (step_no < 0)
			return NULL;
		compute(work_us);
		if (step_no % 4 == 0)
			churn_memory();
		pthread_barrier_wait(&end_bar);
	}
}

/* A loader process: each request byte on `req` asks for one batch. */
static void loader(int id, const char *data, int req, int out)
{
	int fd = open(data, O_RDONLY);
	struct stat st;
	static char buf[1 << 20];
	char c;
	off_t off = (off_t)id << 20;

	if (fd < 0 || fstat(fd, &st) || st.st_size < (2 << 20))
		_exit(2);
	while (read(req, &c, 1) == 1) {
		ssize_t n = pread(fd, buf, sizeof(buf), off);
		if (n <= 0)
			_exit(3);
		off = (off + (off_t)sizeof(buf) * nloaders) % (st.st_size - (1 << 20));
		if (write(out, buf, 4096) != 4096)
			_exit(4);
	}
	_exit(0);
}

static int tcp_pair(int *a, int *b)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);

	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&sa, &len))
		return -1;
	*a = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(*a, (struct sockaddr *)&sa, sizeof(sa)))
		return -1;
	*b = accept(l, NULL, NULL);
	close(l);
	setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return *b < 0 ? -1 : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int req[8][2], out[8][2], s1, s2, logfd;
	pthread_t th[64];
	double *t;
	char msg[256] = {0}, batch[4096];

	if (argc < 3)
		return 2;
	if (argc > 3) steps = atoi(argv[3]);
	if (argc > 4) nthreads = atoi(argv[4]);
	if (argc > 5) nloaders = atoi(argv[5]);
	if (argc > 6) work_us = atoi(argv[6]);
	if (nthreads < 1 || nthreads > 64 || nloaders < 1 || nloaders > 8 || steps < 1)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < nloaders; i++) {
		if (pipe(req[i]) || pipe(out[i]))
			return 3;
		if (fork() == 0) {
			close(req[i][1]);
			close(out[i][0]);
			loader(i, argv[1], req[i][0], out[i][1]);
		}
		close(req[i][0]);
		close(out[i][1]);
	}
	if (tcp_pair(&s1, &s2) || (logfd = open(argv[2], O_WRONLY | O_CREAT | O_APPEND, 0600)) < 0)
		return 4;
	pthread_barrier_init(&start_bar, NULL, (unsigned)nthreads + 1);
	pthread_barrier_init(&end_bar, NULL, (unsigned)nthreads + 1);
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	t = calloc((size_t)steps, sizeof(*t));
	for (int s = 0; s < steps; s++) {
		double t0 = now_s();
		char line[128];
		int n;

		step_no = s;
		for (int i = 0; i < nloaders; i++)
			if (write(req[i][1], "x", 1) != 1)
				return 5;
		pthread_barrier_wait(&start_bar);
		pthread_barrier_wait(&end_bar);
		for (int i = 0; i < nloaders; i++)
			for (int got = 0; got < 4096; got += n)
				if ((n = (int)read(out[i][0], batch + got, (size_t)(4096 - got))) <= 0)
					return 6;
		if (write(s1, msg, sizeof(msg)) != sizeof(msg))
			return 7;
		for (int got = 0; got < (int)sizeof(msg); got += n)
			if ((n = (int)read(s2, msg + got, sizeof(msg) - (size_t)got)) <= 0)
				return 8;
		n = snprintf(line, sizeof(line), "step %d loss %.4f\n", s, 1.0 / (s + 1));
		if (write(logfd, line, (size_t)n) != n)
			return 9;
		t[s] = (now_s() - t0) * 1e3;
	}
	step_no = -1;
	pthread_barrier_wait(&start_bar);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < nloaders; i++)
		close(req[i][1]);
	while (wait(NULL) > 0)
		;
	qsort(t, (size_t)steps, sizeof(*t), cmp_double);
	printf("steps=%d median_ms=%.3f p10_ms=%.3f p90_ms=%.3f\n", steps, t[steps / 2],
	       t[steps / 10], t[steps * 9 / 10]);
	return 0;
}
