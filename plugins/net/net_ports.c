/* SPDX-License-Identifier: MIT */
/*
 * net probe: the `ports` config entries ("443", "8000-8010") into the sorted
 * list of ports the BPF side filters on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "net_int.h"

static int cmp_u16(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

static int parse_port(const char *s, const char **end, long *out)
{
	char *e;
	long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtol(s, &e, 10);
	if (errno || v < 1 || v > 65535)
		return -EINVAL;
	*out = v;
	*end = e;
	return 0;
}

int net_parse_ports(const char *const *v, uint32_t n, uint16_t *out,
		    size_t max, char *err, size_t errlen)
{
	size_t k = 0, w;

	for (uint32_t i = 0; i < n; i++) {
		const char *s = v[i], *e;
		long lo, hi;

		if (parse_port(s, &e, &lo) < 0)
			goto bad;
		hi = lo;
		if (*e == '-') {
			if (parse_port(e + 1, &e, &hi) < 0 || hi < lo)
				goto bad;
		}
		if (*e != '\0')
			goto bad;
		for (long p = lo; p <= hi; p++) {
			if (k >= max) {
				snprintf(err, errlen,
					 "more than %zu ports (\"%s\")", max, s);
				return -E2BIG;
			}
			out[k++] = (uint16_t)p;
		}
		continue;
bad:
		snprintf(err, errlen,
			 "\"%s\" is not a port (1-65535) or a range \"lo-hi\"",
			 s);
		return -EINVAL;
	}
	if (k > 1)
		qsort(out, k, sizeof(*out), cmp_u16);
	for (size_t i = w = 0; i < k; i++)
		if (w == 0 || out[w - 1] != out[i])
			out[w++] = out[i];
	return (int)w;
}
