/* SPDX-License-Identifier: MIT */
/* ntcore plugin kit: BPF links released in parallel (kit/links.h). */
#include "ntcore/kit/links.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include <bpf/libbpf.h>

/* The work shared by the release threads: item i < n_links is a link,
 * the rest are fds; each thread takes the next index until none is left.
 * The threads wait for `go` so that every close starts at the same
 * moment: the kernel's waits then end with the same grace period (started
 * one after the other, late ones waited for a second one). */
struct release_job {
	struct bpf_link *const *links;
	size_t n_links;
	const int *fds;
	size_t n_fds;
	size_t next; /* atomic */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool go;
};

static void release_one(struct release_job *job, size_t i)
{
	if (i < job->n_links) {
		if (job->links[i])
			bpf_link__destroy(job->links[i]);
	} else if (job->fds[i - job->n_links] >= 0) {
		close(job->fds[i - job->n_links]);
	}
}

static void *release_worker(void *arg)
{
	struct release_job *job = arg;
	size_t total = job->n_links + job->n_fds, i;

	pthread_mutex_lock(&job->lock);
	while (!job->go)
		pthread_cond_wait(&job->cond, &job->lock);
	pthread_mutex_unlock(&job->lock);
	while ((i = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED)) < total)
		release_one(job, i);
	return NULL;
}

void nt_links_release_parallel(struct bpf_link *const *links, size_t n,
			       const int *fds, size_t nfds)
{
	struct release_job job = {.links = links, .n_links = n, .fds = fds,
				  .n_fds = nfds,
				  .lock = PTHREAD_MUTEX_INITIALIZER,
				  .cond = PTHREAD_COND_INITIALIZER};
	pthread_t tids[NT_LINKSET_THREADS];
	size_t total = n + nfds, started = 0;

	/* the calling thread is one of the workers; where no thread can be
	 * started it does all of the work */
	while (started + 1 < total && started < NT_LINKSET_THREADS &&
	       pthread_create(&tids[started], NULL, release_worker, &job) == 0)
		started++;
	pthread_mutex_lock(&job.lock);
	job.go = true;
	pthread_cond_broadcast(&job.cond);
	pthread_mutex_unlock(&job.lock);
	release_worker(&job);
	for (size_t t = 0; t < started; t++)
		pthread_join(tids[t], NULL);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 16;
	void *n = realloc(*p, ncap * elem);
	if (!n)
		return -ENOMEM;
	*p = n;
	*cap = ncap;
	return 0;
}

int nt_linkset_add(struct nt_linkset *ls, struct bpf_link *link)
{
	if (!link)
		return 0;
	if (grow((void **)&ls->links, &ls->cap_links, ls->n_links + 1,
		 sizeof(*ls->links))) {
		bpf_link__destroy(link);
		return -ENOMEM;
	}
	ls->links[ls->n_links++] = link;
	return 0;
}

int nt_linkset_add_fd(struct nt_linkset *ls, int fd)
{
	if (fd < 0)
		return 0;
	if (grow((void **)&ls->fds, &ls->cap_fds, ls->n_fds + 1, sizeof(*ls->fds))) {
		close(fd);
		return -ENOMEM;
	}
	ls->fds[ls->n_fds++] = fd;
	return 0;
}

void nt_linkset_take_skeleton(struct nt_linkset *ls,
			      struct bpf_object_skeleton *s)
{
	for (int i = 0; s && i < s->prog_cnt; i++) {
		struct bpf_prog_skeleton *ps = (struct bpf_prog_skeleton *)
			((char *)s->progs + (size_t)i * (size_t)s->prog_skel_sz);
		if (ps->link && *ps->link) {
			nt_linkset_add(ls, *ps->link);
			*ps->link = NULL;
		}
	}
}

void nt_linkset_release(struct nt_linkset *ls)
{
	nt_links_release_parallel(ls->links, ls->n_links, ls->fds, ls->n_fds);
	free(ls->links);
	free(ls->fds);
	*ls = (struct nt_linkset){0};
}
