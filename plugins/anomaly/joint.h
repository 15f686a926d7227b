/* SPDX-License-Identifier: MIT */
/*
 * The multivariate check: the series of the watches of one `group` (step
 * time, GPU busy, the loader's I/O, NCCL time, ...) are combined each
 * snapshot into one score, S = mean z over the members that got a value,
 * z being a member's residual in its bad direction over its own alarm
 * level (z = 1 on its alarm line). Noise of independent members averages
 * out in S (its spread falls as 1/sqrt(members)) while a move they share
 * does not; one member's spike is diluted, which is right: it alarms by
 * itself. (sqrt(mean z^2), tried first, keeps the noise: on the unit
 * test's four series a shared 3.5 sd shift stayed under its threshold.)
 * S gets a detector of its own (DSPOT, no drift test). When S alarms while no member alarmed by itself,
 * several related series moved together, each too little to alarm alone:
 * that is a `joint` alert naming the members that moved most.
 */
#ifndef AN_JOINT_H
#define AN_JOINT_H

#include <stddef.h>
#include <stdint.h>

#include "anomaly.h"
#include "det.h"
#include "view.h"

/* The combined score of z[0..n): their mean. */
double joint_score(const double *z, size_t n);

struct an_joint;

/* One detector per distinct non-empty group name of the watches. */
struct an_joint *an_joint_new(struct an *a);
void an_joint_free(struct an_joint *j);
/* The index of a group, -1 none. */
int an_joint_group(const struct an_joint *j, const char *name);
/* A member's new value in this snapshot. */
void an_joint_member(struct an_joint *j, int group, struct an_series *s,
		     double z, enum det_verdict v);
/* A member that is no series (the step time): `name` stays valid until
 * the end of the snapshot. */
void an_joint_member_named(struct an_joint *j, int group, const char *name,
			   double value, double z, enum det_verdict v);
/* After a snapshot: scores the groups, alerts, forgets the members. */
void an_joint_tick_end(struct an_joint *j, uint64_t now_ns);

#endif
