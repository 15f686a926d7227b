/* SPDX-License-Identifier: MIT */
/*
 * nvlink: the part of NVML's C API this plugin uses, declared here so that
 * nothing of NVIDIA's is needed to build (the library is dlopened at run
 * time). Types, enum values, struct layouts and field ids are facts of the
 * published nvml.h (API version 11+, driver R525 and later); names are ours
 * (nvml_*), so this header never clashes with a real nvml.h.
 *
 * The same declarations serve the stand-in libnvidia-ml.so.1 of the tests
 * (tests/fixtures/nvlink/fake_nvml.c), which exports the real symbol names.
 */
#ifndef NVLINK_NVML_API_H
#define NVLINK_NVML_API_H

#include <stdint.h>

typedef struct nvml_device_st *nvml_device_t;
typedef struct nvml_event_set_st *nvml_event_set_t;
typedef int nvml_return_t; /* nvmlReturn_t: a C enum, int-sized */

enum {
	NVML_OK = 0,
	NVML_ERR_UNINITIALIZED = 1,
	NVML_ERR_INVALID_ARGUMENT = 2,
	NVML_ERR_NOT_SUPPORTED = 3,
	NVML_ERR_NO_PERMISSION = 4,
	NVML_ERR_NOT_FOUND = 6,
	NVML_ERR_INSUFFICIENT_SIZE = 7,
	NVML_ERR_DRIVER_NOT_LOADED = 9,
	NVML_ERR_TIMEOUT = 10,
	NVML_ERR_FUNCTION_NOT_FOUND = 13,
	NVML_ERR_GPU_IS_LOST = 15,
	NVML_ERR_NO_DATA = 21,
	NVML_ERR_UNKNOWN = 999,
};

/* Buffer sizes (NVML_DEVICE_*_BUFFER_SIZE, v2 where there is one). */
#define NVML_UUID_LEN 96
#define NVML_NAME_LEN 96
#define NVML_BUSID_LEN 32
#define NVML_NVLINK_MAX_LINKS 18

/* nvmlPciInfo_t (nvmlDeviceGetPciInfo_v3) */
struct nvml_pci_info {
	char bus_id_legacy[16];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pci_device_id;
	unsigned int pci_subsystem_id;
	char bus_id[NVML_BUSID_LEN];
};

/* nvmlUtilization_t: percent over the driver's last sample period */
struct nvml_utilization {
	unsigned int gpu;
	unsigned int memory;
};

/* nvmlMemory_t (v1) */
struct nvml_memory {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
};

/* nvmlMemory_v2_t: `used` excludes `reserved` (what nvidia-smi shows as
 * used since R510); `version` must be NVML_MEMORY_V2_VERSION */
struct nvml_memory_v2 {
	unsigned int version;
	unsigned long long total;
	unsigned long long reserved;
	unsigned long long free;
	unsigned long long used;
};

#define NVML_MEMORY_V2_VERSION                                                 \
	((unsigned int)(sizeof(struct nvml_memory_v2) | (2u << 24)))

/* nvmlProcessInfo_t as filled by nvmlDeviceGetComputeRunningProcesses_v3 */
struct nvml_process_info {
	unsigned int pid;
	unsigned long long used_gpu_memory;
	unsigned int gpu_instance_id;
	unsigned int compute_instance_id;
};

/* nvmlProcessUtilizationSample_t (nvmlDeviceGetProcessUtilization) */
struct nvml_process_util {
	unsigned int pid;
	unsigned long long timestamp_us;
	unsigned int sm_util;
	unsigned int mem_util;
	unsigned int enc_util;
	unsigned int dec_util;
};

/* nvmlValue_t */
union nvml_value {
	double d;
	unsigned int ui;
	unsigned long ul;
	unsigned long long ull;
	signed long long sll;
};

enum {
	NVML_VALUE_DOUBLE = 0,
	NVML_VALUE_UINT = 1,
	NVML_VALUE_ULONG = 2,
	NVML_VALUE_ULONGLONG = 3,
	NVML_VALUE_SLONGLONG = 4,
};

/* nvmlFieldValue_t: 40 bytes */
struct nvml_field_value {
	unsigned int field_id;
	unsigned int scope_id;   /* the link for per-link NVLink fields */
	long long timestamp_us;
	long long latency_us;
	int value_type;          /* NVML_VALUE_* */
	nvml_return_t ret;
	union nvml_value value;
};

/* Field ids (NVML_FI_DEV_*) */
enum {
	NVML_FI_NVLINK_LINK_COUNT = 91,
	NVML_FI_NVLINK_THROUGHPUT_DATA_TX = 138, /* KiB, scope = link */
	NVML_FI_NVLINK_THROUGHPUT_DATA_RX = 139,
	NVML_FI_NVLINK_ERROR_DL_REPLAY = 161,    /* scope = link */
	NVML_FI_NVLINK_ERROR_DL_RECOVERY = 162,
	NVML_FI_NVLINK_ERROR_DL_CRC = 163,
	NVML_FI_PCIE_COUNT_TX_BYTES = 197,       /* bytes since driver load */
	NVML_FI_PCIE_COUNT_RX_BYTES = 198,
};

/* nvmlEventData_t */
struct nvml_event_data {
	nvml_device_t device;
	unsigned long long event_type;
	unsigned long long event_data; /* the XID for XidCriticalError */
	unsigned int gpu_instance_id;
	unsigned int compute_instance_id;
};

#define NVML_EVENT_XID_CRITICAL 0x8ULL

/* Enum arguments */
enum { NVML_TEMPERATURE_GPU = 0 };
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
enum { NVML_PCIE_UTIL_TX = 0, NVML_PCIE_UTIL_RX = 1 };
enum { NVML_ECC_CORRECTED = 0, NVML_ECC_UNCORRECTED = 1 };
enum { NVML_ECC_VOLATILE = 0, NVML_ECC_AGGREGATE = 1 };
enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };

/* Clock event (throttle) reason bits, nvmlClocksEventReason* */
#define NVML_CLOCK_REASON_GPU_IDLE 0x1ULL
#define NVML_CLOCK_REASON_APP_SETTING 0x2ULL
#define NVML_CLOCK_REASON_SW_POWER_CAP 0x4ULL
#define NVML_CLOCK_REASON_HW_SLOWDOWN 0x8ULL
#define NVML_CLOCK_REASON_SYNC_BOOST 0x10ULL
#define NVML_CLOCK_REASON_SW_THERMAL 0x20ULL
#define NVML_CLOCK_REASON_HW_THERMAL 0x40ULL
#define NVML_CLOCK_REASON_HW_POWER_BRAKE 0x80ULL
#define NVML_CLOCK_REASON_DISPLAY_SETTING 0x100ULL

/*
 * The functions returning nvmlReturn_t, as (member, exported symbol,
 * parameters); nvmlErrorString (const char *(nvmlReturn_t)) is the one
 * other. One list serves the dlsym table (nvml_load.c) and documents the
 * signatures. All but init, shutdown, device_count and device_by_index are
 * optional: missing from an older library, their pointer is NULL and the
 * reading they serve is left out.
 */
#define NVML_FUNCS(X)                                                          \
	X(init, "nvmlInit_v2", (void))                                         \
	X(shutdown, "nvmlShutdown", (void))                                    \
	X(device_count, "nvmlDeviceGetCount_v2", (unsigned int *))             \
	X(device_by_index, "nvmlDeviceGetHandleByIndex_v2",                    \
	  (unsigned int, nvml_device_t *))                                     \
	X(uuid, "nvmlDeviceGetUUID", (nvml_device_t, char *, unsigned int))    \
	X(name, "nvmlDeviceGetName", (nvml_device_t, char *, unsigned int))    \
	X(pci_info, "nvmlDeviceGetPciInfo_v3",                                 \
	  (nvml_device_t, struct nvml_pci_info *))                             \
	X(utilization, "nvmlDeviceGetUtilizationRates",                        \
	  (nvml_device_t, struct nvml_utilization *))                          \
	X(memory, "nvmlDeviceGetMemoryInfo",                                   \
	  (nvml_device_t, struct nvml_memory *))                               \
	X(memory_v2, "nvmlDeviceGetMemoryInfo_v2",                             \
	  (nvml_device_t, struct nvml_memory_v2 *))                            \
	X(power, "nvmlDeviceGetPowerUsage", (nvml_device_t, unsigned int *))   \
	X(energy, "nvmlDeviceGetTotalEnergyConsumption",                       \
	  (nvml_device_t, unsigned long long *))                               \
	X(temperature, "nvmlDeviceGetTemperature",                             \
	  (nvml_device_t, int, unsigned int *))                                \
	X(clock, "nvmlDeviceGetClockInfo",                                     \
	  (nvml_device_t, int, unsigned int *))                                \
	X(clock_reasons, "nvmlDeviceGetCurrentClocksEventReasons",             \
	  (nvml_device_t, unsigned long long *))                               \
	X(throttle_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons",       \
	  (nvml_device_t, unsigned long long *))                               \
	X(pcie_throughput, "nvmlDeviceGetPcieThroughput",                      \
	  (nvml_device_t, int, unsigned int *))                                \
	X(pcie_replay, "nvmlDeviceGetPcieReplayCounter",                       \
	  (nvml_device_t, unsigned int *))                                     \
	X(nvlink_state, "nvmlDeviceGetNvLinkState",                            \
	  (nvml_device_t, unsigned int, int *))                                \
	X(field_values, "nvmlDeviceGetFieldValues",                            \
	  (nvml_device_t, int, struct nvml_field_value *))                     \
	X(ecc_total, "nvmlDeviceGetTotalEccErrors",                            \
	  (nvml_device_t, int, int, unsigned long long *))                     \
	X(compute_procs, "nvmlDeviceGetComputeRunningProcesses_v3",            \
	  (nvml_device_t, unsigned int *, struct nvml_process_info *))         \
	X(process_util, "nvmlDeviceGetProcessUtilization",                     \
	  (nvml_device_t, struct nvml_process_util *, unsigned int *,          \
	   unsigned long long))                                                \
	X(event_set_create, "nvmlEventSetCreate", (nvml_event_set_t *))        \
	X(register_events, "nvmlDeviceRegisterEvents",                         \
	  (nvml_device_t, unsigned long long, nvml_event_set_t))               \
	X(supported_events, "nvmlDeviceGetSupportedEventTypes",                \
	  (nvml_device_t, unsigned long long *))                               \
	X(event_wait, "nvmlEventSetWait_v2",                                   \
	  (nvml_event_set_t, struct nvml_event_data *, unsigned int))          \
	X(event_set_free, "nvmlEventSetFree", (nvml_event_set_t))

#endif /* NVLINK_NVML_API_H */
