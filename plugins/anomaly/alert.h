/* SPDX-License-Identifier: MIT */
/*
 * alert.anomaly records and the words in them: the record (NT_ALERT_FIELDS,
 * then the kind of anomaly, the training step, the value and its normal
 * level), human names of series ("data-loader read latency" for
 * ntcore_io_process_service_seconds{comm="pt_data_worker",op="read"}) from
 * a table of known families and the `comm_names` aliases, and values in
 * their units ("2.4 ms", "12.0 MiB/s").
 */
#ifndef AN_ALERT_H
#define AN_ALERT_H

#include <stddef.h>
#include <stdint.h>

#include "ntcore/plugin.h"

#include "an_util.h"
#include "anomaly.h"
#include "view.h"

struct an_alert_rec {
	struct nt_event_hdr hdr;
	uint32_t severity;
	uint32_t subject_pid;
	struct nt_vstr message;
	struct nt_vstr evidence;
	struct nt_vstr kind; /* step, series, drift, joint, rule */
	uint64_t step;       /* training step (kind step), else 0 */
	double value;        /* the anomalous value (kind series/step/rule) */
	double baseline;     /* its normal level */
};

extern const struct nt_schema an_alert_schema;

struct an_alert {
	const char *kind;
	uint32_t severity;
	uint32_t pid;
	const char *comm; /* may be NULL */
	uint64_t step;
	double value, baseline;
	const char *message, *evidence;
};

/* Publishes one alert, counts it, logs its message. Returns publish's
 * result or -ENOMEM. */
int an_alert_publish(struct an *a, const struct an_alert *al);
/* The same with the message and evidence built in msg and ev, which are
 * freed (the detectors' common ending). */
int an_alert_publish_sb(struct an *a, struct an_alert *al, struct an_sb *msg,
			struct an_sb *ev);

/* A human name for a series; writes into buf and returns it. */
const char *an_series_name(const struct an *a, const struct an_series *s,
			   char *buf, size_t len);
/* The series as family{label="value",...}. */
const char *an_series_id(const struct an_series *s, char *buf, size_t len);
/* A value of a family's derived series in its unit ("2.4 ms"). */
const char *an_fmt_value(const char *family, uint32_t type, double v,
			 char *buf, size_t len);
/* "x6", "x1.4", "x0.25" (after / before), or "from 0". */
const char *an_fmt_ratio(double before, double after, char *buf, size_t len);
/* A process name through `comm_names` ("pt_data_worker" -> "data-loader"). */
const char *an_comm_name(const struct an *a, const char *comm, char *buf,
			 size_t len);
/* severity from its config word (info, warning, critical) */
uint32_t an_severity(const char *word);

#endif
