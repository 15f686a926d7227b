/* SPDX-License-Identifier: MIT */
/*
 * Content negotiation of a scrape: OpenMetrics when it is allowed and the
 * Accept header ranks application/openmetrics-text at least as high (q)
 * as text/plain or its wildcards (text/ *, * / *, written without the
 * spaces), else the text format 0.0.4.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "expo.h"

static int blank(char c)
{
	return c == ' ' || c == '\t';
}

/* The q of the parameters between `semi` (the first ';', or NULL) and
 * `end`; 1 when none is given. */
static double range_q(const char *semi, const char *end)
{
	double q = 1.0;

	for (const char *a = semi; a && a < end;) {
		a++;
		while (a < end && blank(*a))
			a++;
		if (end - a > 2 && (a[0] == 'q' || a[0] == 'Q') && a[1] == '=')
			q = strtod(a + 2, NULL);
		a = memchr(a, ';', (size_t)(end - a));
	}
	return q;
}

static int is_om(const char *t, size_t n)
{
	return n == 28 && strncasecmp(t, "application/openmetrics-text", 28) == 0;
}

static int is_text(const char *t, size_t n)
{
	return (n == 10 && strncasecmp(t, "text/plain", 10) == 0) ||
	       (n == 6 && strncasecmp(t, "text/*", 6) == 0) ||
	       (n == 3 && strncmp(t, "*/*", 3) == 0);
}

enum pe_format pe_negotiate(const char *accept, int allow_om)
{
	double q_om = 0, q_text = 0;
	const char *p = accept;

	if (!allow_om || !accept)
		return PE_FMT_TEXT;
	while (*p) {
		const char *end = strchr(p, ','), *semi;
		size_t tlen;
		double q;

		if (!end)
			end = p + strlen(p);
		while (p < end && blank(*p))
			p++;
		semi = memchr(p, ';', (size_t)(end - p));
		tlen = (size_t)((semi ? semi : end) - p);
		while (tlen && blank(p[tlen - 1]))
			tlen--;
		q = range_q(semi, end);
		if (is_om(p, tlen) && q > q_om)
			q_om = q;
		else if (is_text(p, tlen) && q > q_text)
			q_text = q;
		p = *end ? end + 1 : end;
	}
	return q_om > 0 && q_om >= q_text ? PE_FMT_OPENMETRICS : PE_FMT_TEXT;
}
