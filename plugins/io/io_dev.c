/* SPDX-License-Identifier: MIT */
/*
 * io probe: block devices. The `devices` config entries resolved against
 * sysfs (names or MAJOR:MINOR), and device names for labels and the
 * report, read from sysfs once per device and cached.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ntcore/kit/log.h"
#include "ntcore/kit/proc.h"

#include "io_int.h"

static int parse_majmin(const char *s, uint32_t *dev)
{
	unsigned long ma, mi;
	char *e;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	ma = strtoul(s, &e, 10);
	if (*e != ':' || e[1] < '0' || e[1] > '9')
		return -EINVAL;
	mi = strtoul(e + 1, &e, 10);
	if ((*e != '\0' && *e != '\n') || ma > 4095 || mi > 0xfffff)
		return -EINVAL;
	*dev = IO_MKDEV(ma, mi);
	return 0;
}

/* "MAJOR:MINOR" given: it must be a block device of this sysfs. */
static int resolve_majmin(const char *sysfs, const char *spec, uint32_t *dev,
			  char *err, size_t errlen)
{
	char path[512];
	struct stat sb;

	if (parse_majmin(spec, dev) < 0) {
		snprintf(err, errlen, "\"%s\" is not a valid \"MAJOR:MINOR\"",
			 spec);
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "%s/dev/block/%s", sysfs, spec);
	if (stat(path, &sb) < 0) {
		snprintf(err, errlen, "no block device %s exists (no %s)", spec,
			 path);
		return -ENODEV;
	}
	return 0;
}

int io_resolve_device(const char *sysfs, const char *spec, uint32_t *dev,
		      char *err, size_t errlen)
{
	char path[512], buf[64];

	if (!spec[0] || strchr(spec, '/') || strcmp(spec, ".") == 0 ||
	    strcmp(spec, "..") == 0) {
		snprintf(err, errlen,
			 "\"%s\" is not a block device name (\"sda\", "
			 "\"nvme0n1p2\") or \"MAJOR:MINOR\"", spec);
		return -EINVAL;
	}
	if (spec[0] >= '0' && spec[0] <= '9' && strchr(spec, ':'))
		return resolve_majmin(sysfs, spec, dev, err, errlen);
	snprintf(path, sizeof(path), "%s/class/block/%s/dev", sysfs, spec);
	if (nt_file_read(path, buf, sizeof(buf)) < 0) {
		snprintf(err, errlen,
			 "no block device \"%s\" exists (no %s; see lsblk)",
			 spec, path);
		return -ENODEV;
	}
	if (parse_majmin(buf, dev) < 0) {
		snprintf(err, errlen, "%s holds \"%s\", not MAJOR:MINOR", path,
			 buf);
		return -EINVAL;
	}
	return 0;
}

const char *io_dev_majmin(uint32_t dev, char buf[24])
{
	snprintf(buf, 24, "%u:%u", IO_DEV_MAJOR(dev), IO_DEV_MINOR(dev));
	return buf;
}

const char *io_dev_name(const char *sysfs, uint32_t dev, char *buf, size_t len)
{
	char path[512], text[1024];
	const char *p;

	snprintf(path, sizeof(path), "%s/dev/block/%u:%u/uevent", sysfs,
		 IO_DEV_MAJOR(dev), IO_DEV_MINOR(dev));
	if (nt_file_read(path, text, sizeof(text)) > 0 &&
	    (p = strstr(text, "DEVNAME="))) {
		size_t n = strcspn(p + 8, "\n");

		if (n && n < len) {
			memcpy(buf, p + 8, n);
			buf[n] = '\0';
			return buf;
		}
	}
	snprintf(buf, len, "%u:%u", IO_DEV_MAJOR(dev), IO_DEV_MINOR(dev));
	return buf;
}

const char *io_dev_cached_name(struct io_state *st, uint32_t dev)
{
	char *name = nt_hmap_get(&st->names, &dev);
	bool created;

	if (name)
		return name;
	name = nt_hmap_put(&st->names, &dev, &created);
	if (!name)
		return "?";
	io_dev_name(st->sysfs, dev, name, IO_DEV_NAME_LEN);
	return name;
}

/* One entry that does not resolve: a config error (malformed: init fails)
 * or a missing device (logged with the config's FILE:LINE, skipped). */
static int device_missing(struct io_state *st, int rc, const char *err)
{
	const struct nt_host *host = st->host;
	int line = 0;
	const char *file;

	if (rc == -EINVAL)
		return host->config_error(st->inst, "devices", "%s", err);
	file = host->config_file(st->inst, &line);
	nt_log_err(st, "%s:%d: devices: %s", file ? file : "?", line, err);
	return 0;
}

int io_devices_setup(struct io_state *st)
{
	const struct io_cfg *cfg = st->cfg;
	size_t missing = 0;

	for (uint32_t i = 0; i < cfg->devices.n; i++) {
		char err[320];
		uint32_t dev;
		int rc = io_resolve_device(st->sysfs, cfg->devices.v[i], &dev,
					   err, sizeof(err));

		if (rc == 0) {
			st->devs[st->n_devs++] = dev;
			continue;
		}
		if (device_missing(st, rc, err) < 0)
			return -EINVAL;
		missing++;
	}
	if (cfg->devices.n && !st->n_devs) {
		nt_log_err(st, "none of the configured devices exists: nothing "
			       "to trace");
		return -ENODEV;
	}
	if (missing)
		nt_log_warn(st, "tracing the %zu device(s) that exist; %zu "
				"configured one(s) missing", st->n_devs, missing);
	return 0;
}
