/* SPDX-License-Identifier: MIT */
/* What to try for a CUDA error (runtime or driver spelling of its name). */
#ifndef CUDA_DET_CUERR_H
#define CUDA_DET_CUERR_H

/* A generic line when the name is unknown or NULL. */
const char *cuerr_hint(const char *name);
/* Errors after which the CUDA context is unusable, or the job is lost
 * (sticky kernel faults, hardware errors, out of memory). */
int cuerr_severe(const char *name);

#endif
