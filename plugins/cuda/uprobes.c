/* SPDX-License-Identifier: MIT */
/* ntcore cuda: a file's uprobe links (see uprobes.h). */
#include "uprobes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/links.h"

static int add_link(struct nt_uprobes *u, struct bpf_link *link)
{
	if (u->nlinks == u->caplinks) {
		size_t ncap = u->caplinks ? u->caplinks * 2 : 32;
		struct bpf_link **n = realloc(u->links, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		u->links = n;
		u->caplinks = ncap;
	}
	u->links[u->nlinks++] = link;
	return 0;
}

int nt_uprobes_attach(struct nt_uprobes *u, struct bpf_program *prog,
		      const char *path, bool ret, bool multi,
		      const uint64_t *offs, const uint64_t *cookies,
		      const char *const *names, size_t n,
		      nt_uprobes_warn_fn warn, void *arg)
{
	int attached = 0;

	if (!n)
		return 0;
	if (multi && u->nmfds < sizeof(u->mfds) / sizeof(u->mfds[0])) {
		int fd = nt_bpf_uprobe_multi(bpf_program__fd(prog), path, ret,
					     offs, cookies, n);

		if (fd < 0)
			return fd;
		u->mfds[u->nmfds++] = fd;
		u->nprobes += n;
		return (int)n;
	}
	for (size_t i = 0; i < n; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, o, .bpf_cookie = cookies[i],
			    .retprobe = ret);
		struct bpf_link *link =
			bpf_program__attach_uprobe_opts(prog, -1, path, offs[i], &o);

		if (!link) {
			if (warn)
				warn(arg, path, names ? names[i] : "?", ret, errno);
			continue;
		}
		if (add_link(u, link)) {
			bpf_link__destroy(link);
			continue;
		}
		u->nprobes++;
		attached++;
	}
	return attached;
}

void nt_uprobes_release(struct nt_uprobes *u)
{
	/* each release waits for a grace period: together they share one */
	nt_links_release_parallel(u->links, u->nlinks, u->mfds, u->nmfds);
	free(u->links);
	memset(u, 0, sizeof(*u));
}

void nt_uprobes_move(struct nt_uprobes *u, struct nt_linkset *ls)
{
	for (size_t k = 0; k < u->nlinks; k++)
		nt_linkset_add(ls, u->links[k]);
	for (size_t k = 0; k < u->nmfds; k++)
		nt_linkset_add_fd(ls, u->mfds[k]);
	free(u->links);
	memset(u, 0, sizeof(*u));
}
