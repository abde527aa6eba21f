package sampler

/*
#include "nvml_abi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The NVML structs batch.c copies by hand (nvml_abi.h) have the layouts of
// go-nvml's types, which are generated from nvml.h: every size and field
// offset is compared here, and a difference does not compile. (nvmlEventData_t
// has no exported go-nvml twin; make csan checks it, and all of these, against
// nvml.h itself.)
// Each line fails to compile unless both sides are equal: a positive
// difference is an index out of range, a negative one overflows uintptr.
var (
	_ = [1]struct{}{}[unsafe.Sizeof(C.struct_gt_nvml_field_value{})-unsafe.Sizeof(nvml.FieldValue{})]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_field_value{}.scope_id)-unsafe.Offsetof(nvml.FieldValue{}.ScopeId)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_field_value{}.timestamp)-unsafe.Offsetof(nvml.FieldValue{}.Timestamp)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_field_value{}.latency_usec)-unsafe.Offsetof(nvml.FieldValue{}.LatencyUsec)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_field_value{}.value_type)-unsafe.Offsetof(nvml.FieldValue{}.ValueType)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_field_value{}.nvml_return)-unsafe.Offsetof(nvml.FieldValue{}.NvmlReturn)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_field_value{}.value)-unsafe.Offsetof(nvml.FieldValue{}.Value)]
	_ = [1]struct{}{}[unsafe.Sizeof(C.struct_gt_nvml_field_value{}.value)-unsafe.Sizeof(nvml.FieldValue{}.Value)]

	_ = [1]struct{}{}[unsafe.Sizeof(C.struct_gt_nvml_utilization{})-unsafe.Sizeof(nvml.Utilization{})]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_utilization{}.memory)-unsafe.Offsetof(nvml.Utilization{}.Memory)]

	_ = [1]struct{}{}[unsafe.Sizeof(C.struct_gt_nvml_memory_v2{})-unsafe.Sizeof(nvml.Memory_v2{})]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_memory_v2{}.total)-unsafe.Offsetof(nvml.Memory_v2{}.Total)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_memory_v2{}.reserved)-unsafe.Offsetof(nvml.Memory_v2{}.Reserved)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_memory_v2{}.free)-unsafe.Offsetof(nvml.Memory_v2{}.Free)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_memory_v2{}.used)-unsafe.Offsetof(nvml.Memory_v2{}.Used)]

	_ = [1]struct{}{}[unsafe.Sizeof(C.struct_gt_nvml_memory{})-unsafe.Sizeof(nvml.Memory{})]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_memory{}.free)-unsafe.Offsetof(nvml.Memory{}.Free)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_memory{}.used)-unsafe.Offsetof(nvml.Memory{}.Used)]

	_ = [1]struct{}{}[unsafe.Sizeof(C.struct_gt_nvml_thermal_settings{})-unsafe.Sizeof(nvml.GpuThermalSettings{})]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_thermal_settings{}.sensor)-unsafe.Offsetof(nvml.GpuThermalSettings{}.Sensor)]
	_ = [1]struct{}{}[unsafe.Sizeof(C.struct_gt_nvml_thermal_sensor{})-unsafe.Sizeof(nvml.GpuThermalSettingsSensor{})]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_thermal_sensor{}.default_min_temp)-unsafe.Offsetof(nvml.GpuThermalSettingsSensor{}.DefaultMinTemp)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_thermal_sensor{}.default_max_temp)-unsafe.Offsetof(nvml.GpuThermalSettingsSensor{}.DefaultMaxTemp)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_thermal_sensor{}.current_temp)-unsafe.Offsetof(nvml.GpuThermalSettingsSensor{}.CurrentTemp)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_thermal_sensor{}.target)-unsafe.Offsetof(nvml.GpuThermalSettingsSensor{}.Target)]
)
