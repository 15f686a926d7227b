/* SPDX-License-Identifier: MIT */
/*
 * nvlink: NVLink per link, on the NVML worker thread: link state
 * (nvmlDeviceGetNvLinkState) and, through field values with the link as
 * scope, data bytes sent and received (NVML counts KiB) and the data-link
 * replay, recovery and CRC error counters. A link NVML refuses is left out;
 * a GPU with no link NVML knows (a single PCIe GPU, a VM) is counted once
 * as unsupported and not asked again.
 */
#include <stdio.h>
#include <string.h>

#include "nvml_poll.h"

enum { LF_TX, LF_RX, LF_REPLAY, LF_RECOVERY, LF_CRC, LF_N };

static const unsigned int link_field_ids[LF_N] = {
	NVML_FI_NVLINK_THROUGHPUT_DATA_TX, NVML_FI_NVLINK_THROUGHPUT_DATA_RX,
	NVML_FI_NVLINK_ERROR_DL_REPLAY, NVML_FI_NVLINK_ERROR_DL_RECOVERY,
	NVML_FI_NVLINK_ERROR_DL_CRC,
};
static const char *const link_err_kind[LF_N] = { "", "", "replay", "recovery", "crc" };

static uint64_t fv_u64(const struct nvml_field_value *f)
{
	switch (f->value_type) {
	case NVML_VALUE_DOUBLE: return (uint64_t)f->value.d;
	case NVML_VALUE_UINT: return f->value.ui;
	case NVML_VALUE_ULONG: return f->value.ul;
	case NVML_VALUE_SLONGLONG: return f->value.sll < 0 ? 0 : (uint64_t)f->value.sll;
	default: return f->value.ull;
	}
}

static void read_states(struct nvml_poller *p, struct nvml_dev *d)
{
	for (unsigned int l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
		char ls[8];
		const char *lv[3] = { d->index_s, d->uuid, ls };
		nvml_return_t r;
		int state = 0;

		if (d->link_absent & (1u << l))
			continue;
		r = p->lib.nvlink_state(d->h, l, &state);
		if (r == NVML_ERR_NOT_SUPPORTED || r == NVML_ERR_INVALID_ARGUMENT ||
		    r == NVML_ERR_NOT_FOUND) {
			d->link_absent |= 1u << l;
			continue;
		}
		if (!nvml_ok(p, d, NQ_NVLINK_STATE, r))
			continue;
		snprintf(ls, sizeof(ls), "%u", l);
		p->host->metric_set(p->nm->m[NVM_LINK_UP], lv,
				    state == NVML_FEATURE_ENABLED ? 1 : 0);
	}
	if (d->link_absent == (1u << NVML_NVLINK_MAX_LINKS) - 1) {
		nvml_unsupported(p, d, NQ_NVLINK_STATE);
		nvml_unsupported(p, d, NQ_NVLINK_FIELDS);
	}
}

static void store_field(struct nvml_poller *p, struct nvml_dev *d,
			const struct nvml_field_value *f, int kind)
{
	char ls[8];
	const char *lv[4] = { d->index_s, d->uuid, ls, link_err_kind[kind] };
	uint64_t v = fv_u64(f);

	snprintf(ls, sizeof(ls), "%u", f->scope_id);
	if (kind == LF_TX || kind == LF_RX)
		p->host->metric_set(p->nm->m[kind == LF_TX ? NVM_LINK_TX : NVM_LINK_RX],
				    lv, (double)v * 1024.0);
	else
		p->host->metric_set(p->nm->m[NVM_LINK_ERRORS], lv, (double)v);
}

static void read_fields(struct nvml_poller *p, struct nvml_dev *d)
{
	struct nvml_field_value f[NVML_NVLINK_MAX_LINKS * LF_N];
	int kinds[NVML_NVLINK_MAX_LINKS * LF_N];
	int n = 0;

	for (unsigned int l = 0; l < NVML_NVLINK_MAX_LINKS; l++)
		for (int k = 0; k < LF_N && !(d->link_absent & (1u << l)); k++) {
			if (d->link_field_unsup & (1u << k))
				continue;
			memset(&f[n], 0, sizeof(f[n]));
			f[n].field_id = link_field_ids[k];
			f[n].scope_id = l;
			kinds[n++] = k;
		}
	if (!n || !nvml_ok(p, d, NQ_NVLINK_FIELDS, p->lib.field_values(d->h, n, f)))
		return;
	for (int i = 0; i < n; i++) {
		if (f[i].ret == NVML_ERR_NOT_SUPPORTED) {
			d->link_field_unsup |= 1u << kinds[i];
			continue;
		}
		if (f[i].ret == NVML_OK)
			store_field(p, d, &f[i], kinds[i]);
	}
	if (d->link_field_unsup == (1u << LF_N) - 1)
		nvml_unsupported(p, d, NQ_NVLINK_FIELDS);
}

void nvml_read_nvlink(struct nvml_poller *p, struct nvml_dev *d)
{
	if (nvml_want(p, d, NQ_NVLINK_STATE, p->lib.nvlink_state != NULL))
		read_states(p, d);
	if (nvml_want(p, d, NQ_NVLINK_FIELDS, p->lib.field_values != NULL))
		read_fields(p, d);
}
