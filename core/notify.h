/* SPDX-License-Identifier: MIT */
/*
 * systemd's service protocol (sd_notify, libsystemd): READY=1 once every
 * plugin is attached, RELOADING=1 and READY=1 around a reload, STOPPING=1,
 * and WATCHDOG=1 from the event loop at half the unit's WatchdogSec, so a
 * wedged loop gets the service restarted. Outside systemd (no
 * NOTIFY_SOCKET) every call does nothing.
 */
#ifndef NTCORE_CORE_NOTIFY_H
#define NTCORE_CORE_NOTIFY_H

#include <ev.h>

void nt_notify_ready(const char *status);
void nt_notify_reloading(void);
void nt_notify_stopping(void);

/* Starts `timer` on `loop` when the service has a watchdog for this
 * process (WATCHDOG_USEC, WATCHDOG_PID); it sends WATCHDOG=1. */
void nt_notify_watchdog_start(struct ev_loop *loop, ev_timer *timer);

#endif
