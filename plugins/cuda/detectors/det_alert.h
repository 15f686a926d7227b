/* SPDX-License-Identifier: MIT */
/*
 * Building and publishing alert.<detector> records (NT_ALERT_FIELDS: severity,
 * subject pid, one-line message, JSON evidence) and <detector>.report text
 * records (a VSTR `text` that the stdout sink prints verbatim).
 */
#ifndef CUDA_DET_ALERT_H
#define CUDA_DET_ALERT_H

#include <stdint.h>

#include "ntcore/plugin.h"

/* The schema every CUDA detector registers for its alerts. */
extern const struct nt_field det_alert_fields[4];
/* The layout of <detector>.report. */
struct det_report {
	struct nt_event_hdr hdr;
	uint32_t subject_pid;
	uint32_t pad;
	struct nt_vstr text;
};
extern const struct nt_field det_report_fields[2];

struct det_subject {
	uint32_t pid, tid;
	const char *comm; /* may be NULL */
	uint64_t ts_ns;   /* 0: now (CLOCK_MONOTONIC) */
};

/* Lays out an alert record in a malloc'd buffer: header, nt_alert fixed
 * part, then message and evidence bytes. Returns NULL on ENOMEM. */
struct nt_event_hdr *det_alert_build(uint32_t type, const struct det_subject *s,
				     uint32_t severity, const char *message,
				     const char *evidence);
struct nt_event_hdr *det_report_build(uint32_t type, const struct det_subject *s,
				      const char *text);

/* Build + host->publish + free. Returns publish's result or -ENOMEM. */
int det_alert_publish(const struct nt_host *host, struct nt_instance *inst,
		      uint32_t type, const struct det_subject *s,
		      uint32_t severity, const char *message,
		      const char *evidence);
int det_report_publish(const struct nt_host *host, struct nt_instance *inst,
		       uint32_t type, const struct det_subject *s,
		       const char *text);

const char *det_severity_name(uint32_t sev);

#endif
