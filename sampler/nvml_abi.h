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

#endif
