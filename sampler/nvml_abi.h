// nvml_abi: the parts of NVIDIA's nvml.h that batch.c and evthread.c use,
// copied in one place (the getters' structs are not: batch.c is handed their
// sizes and offsets from go-nvml's generated types, sampler/batch.go). NVML is loaded at run time (dlsym), so its header is
// not needed to build. The structs are pinned against nvml.h itself (the copy
// in the go-nvml module) by make csan (test/csan/harness.c), part of make
// test: every struct size, field offset and field size. The codes are pinned
// by batch_native.go against go-nvml's constants (generated from that nvml.h),
// which the Go side checks the batch's results against, in every build. A
// difference does not compile.
#ifndef GPU_TELEMETRY_NVML_ABI_H
#define GPU_TELEMETRY_NVML_ABI_H

#include <stdint.h>

// nvmlReturn_t values.
#define GT_NVML_SUCCESS 0
#define GT_NVML_ERROR_NOT_SUPPORTED 3
#define GT_NVML_ERROR_TIMEOUT 10
#define GT_NVML_ERROR_FUNCTION_NOT_FOUND 13
#define GT_NVML_ERROR_GPU_IS_LOST 15
#define GT_NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25

// NVML_STRUCT_VERSION(data, ver) for a struct of size sz.
#define GT_NVML_STRUCT_VERSION(sz, ver) ((unsigned int)(sz) | ((unsigned int)(ver) << 24))

// nvmlFieldValue_t.
struct gt_nvml_field_value {
	uint32_t field_id;
	uint32_t scope_id;
	int64_t timestamp;
	int64_t latency_usec;
	int32_t value_type;
	int32_t nvml_return;
	union { double d; uint32_t ui; unsigned long ul; unsigned long long ull; long long sll; int32_t si; uint16_t us; } value;
};

// nvmlEventData_t (what nvmlEventSetWait_v2 fills; v1 stops after data).
struct gt_nvml_event_data {
	void *device;
	unsigned long long type;
	unsigned long long data;
	unsigned int gpu_instance_id;
	unsigned int compute_instance_id;
};

// GPU Operational Events (driver R615+): nvmlGpuOperationalEventConfig_v1_t,
// nvmlEventSetWait_v3_t and the context records' parameter structs.
#define GT_NVML_UUID_V2_SIZE 96
#define GT_NVML_EVENT_DATA_TYPE_GPU_OPERATIONAL_EVENT 1
#define GT_NVML_OPEV_CONTEXT_TYPE_LEGACY_XID 1

struct gt_nvml_opev_config {
	char uuid[GT_NVML_UUID_V2_SIZE];
	unsigned int min_log_level;
	unsigned int min_severity;
};

struct gt_nvml_wait_v3 {
	unsigned int timeout_ms;
	unsigned int data_type;
	char uuid[GT_NVML_UUID_V2_SIZE];
	char source_module[16];
	unsigned long long event_type;
	unsigned long long event_data;
	unsigned long long group_cursor;
	unsigned long long instance_id;
	unsigned long long timestamp_usec;
	unsigned long long trace_id;
	unsigned int gpu_instance_id;
	unsigned int compute_instance_id;
	unsigned int severity;
	unsigned int category_id;
	unsigned int module_event_code;
	unsigned int scope;
	unsigned int originator;
	unsigned int module_instance;
	unsigned int chiplet_id;
	unsigned int log_level;
	unsigned int attributes;
	unsigned int group_cper_size;
	unsigned int group_attributes;
	unsigned char group_size;
	unsigned char group_index;
};

struct gt_nvml_context_count {
	unsigned int count;
};

struct gt_nvml_context_info {
	unsigned int index;
	unsigned int nvml_type;
	unsigned int source_type;
	unsigned int data_size;
	unsigned short data_format_version;
};

struct gt_nvml_context_legacy_xid {
	unsigned int index;
	unsigned int xid_code;
};

#endif
