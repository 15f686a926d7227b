/* SPDX-License-Identifier: MIT */
#include "det_alert.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "det_util.h"

const struct nt_field det_alert_fields[4] = { NT_ALERT_FIELDS(struct nt_alert) };
const struct nt_field det_report_fields[2] = {
	NT_FIELD(struct det_report, subject_pid, NT_F_U32, "",
		 "process the report is about"),
	NT_FIELD(struct det_report, text, NT_F_VSTR, "", "report text"),
};

static void fill_hdr(struct nt_event_hdr *h, uint32_t type, uint32_t size,
		     const struct det_subject *s)
{
	h->type = type;
	h->size = size;
	h->ts_ns = s->ts_ns ? s->ts_ns : nt_clock_mono_ns();
	h->pid = s->pid;
	h->tid = s->tid ? s->tid : s->pid;
	if (s->comm) {
		size_t n = strnlen(s->comm, NT_COMM_LEN);

		memcpy(h->comm, s->comm, n);
	}
}

struct nt_event_hdr *det_alert_build(uint32_t type, const struct det_subject *s,
				     uint32_t severity, const char *message,
				     const char *evidence)
{
	size_t ml = message ? strlen(message) : 0;
	size_t el = evidence ? strlen(evidence) : 0;
	size_t size = sizeof(struct nt_alert) + ml + el;
	struct nt_alert *a;

	if (size > UINT32_MAX)
		return NULL;
	a = calloc(1, size);
	if (!a)
		return NULL;
	fill_hdr(&a->hdr, type, (uint32_t)size, s);
	a->severity = severity;
	a->subject_pid = s->pid;
	a->message.off = sizeof(*a);
	a->message.len = (uint32_t)ml;
	a->evidence.off = (uint32_t)(sizeof(*a) + ml);
	a->evidence.len = (uint32_t)el;
	if (ml)
		memcpy((char *)a + a->message.off, message, ml);
	if (el)
		memcpy((char *)a + a->evidence.off, evidence, el);
	return &a->hdr;
}

struct nt_event_hdr *det_report_build(uint32_t type, const struct det_subject *s,
				      const char *text)
{
	size_t tl = text ? strlen(text) : 0;
	size_t size = sizeof(struct det_report) + tl;
	struct det_report *r;

	if (size > UINT32_MAX)
		return NULL;
	r = calloc(1, size);
	if (!r)
		return NULL;
	fill_hdr(&r->hdr, type, (uint32_t)size, s);
	r->subject_pid = s->pid;
	r->text.off = sizeof(*r);
	r->text.len = (uint32_t)tl;
	if (tl)
		memcpy((char *)r + r->text.off, text, tl);
	return &r->hdr;
}

int det_alert_publish(const struct nt_host *host, struct nt_instance *inst,
		      uint32_t type, const struct det_subject *s,
		      uint32_t severity, const char *message,
		      const char *evidence)
{
	struct nt_event_hdr *h = det_alert_build(type, s, severity, message,
						 evidence);
	int ret;

	if (!h)
		return -ENOMEM;
	ret = host->publish(inst, h);
	free(h);
	return ret;
}

int det_report_publish(const struct nt_host *host, struct nt_instance *inst,
		       uint32_t type, const struct det_subject *s,
		       const char *text)
{
	struct nt_event_hdr *h = det_report_build(type, s, text);
	int ret;

	if (!h)
		return -ENOMEM;
	ret = host->publish(inst, h);
	free(h);
	return ret;
}

const char *det_severity_name(uint32_t sev)
{
	switch (sev) {
	case NT_SEV_CRITICAL: return "critical";
	case NT_SEV_WARNING: return "warning";
	default: return "info";
	}
}
