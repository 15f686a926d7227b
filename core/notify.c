/* SPDX-License-Identifier: MIT */
/* systemd readiness, reload, stop and watchdog notifications (notify.h).
 * libsystemd's sd_notify speaks the protocol; nothing here is by hand. */
#include "notify.h"

#include <stdint.h>

#include <systemd/sd-daemon.h>

void nt_notify_ready(const char *status)
{
	sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

void nt_notify_reloading(void)
{
	sd_notify(0, "RELOADING=1\nSTATUS=reloading the configuration");
}

void nt_notify_stopping(void)
{
	sd_notify(0, "STOPPING=1\nSTATUS=draining and stopping");
}

static void on_watchdog(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	sd_notify(0, "WATCHDOG=1");
}

void nt_notify_watchdog_start(struct ev_loop *loop, ev_timer *timer)
{
	uint64_t usec = 0;

	if (sd_watchdog_enabled(0, &usec) <= 0 || !usec)
		return;
	/* Half the period, as sd_watchdog_enabled(3) advises. */
	double every = (double)usec / 2e6;
	ev_timer_init(timer, on_watchdog, every, every);
	ev_timer_start(loop, timer);
}
