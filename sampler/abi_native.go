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
// Each line fails to compile unless both sides are equal (a negative or
// positive difference is an index out of range).
var (
	_ = [1]struct{}{}[unsafe.Sizeof(C.struct_gt_nvml_field_value{})-unsafe.Sizeof(nvml.FieldValue{})]
	_ = [1]struct{}{}[unsafe.Sizeof(nvml.FieldValue{})-unsafe.Sizeof(C.struct_gt_nvml_field_value{})]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_field_value{}.scope_id)-unsafe.Offsetof(nvml.FieldValue{}.ScopeId)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.FieldValue{}.ScopeId)-unsafe.Offsetof(C.struct_gt_nvml_field_value{}.scope_id)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_field_value{}.timestamp)-unsafe.Offsetof(nvml.FieldValue{}.Timestamp)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.FieldValue{}.Timestamp)-unsafe.Offsetof(C.struct_gt_nvml_field_value{}.timestamp)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_field_value{}.latency_usec)-unsafe.Offsetof(nvml.FieldValue{}.LatencyUsec)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.FieldValue{}.LatencyUsec)-unsafe.Offsetof(C.struct_gt_nvml_field_value{}.latency_usec)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_field_value{}.value_type)-unsafe.Offsetof(nvml.FieldValue{}.ValueType)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.FieldValue{}.ValueType)-unsafe.Offsetof(C.struct_gt_nvml_field_value{}.value_type)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_field_value{}.nvml_return)-unsafe.Offsetof(nvml.FieldValue{}.NvmlReturn)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.FieldValue{}.NvmlReturn)-unsafe.Offsetof(C.struct_gt_nvml_field_value{}.nvml_return)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_field_value{}.value)-unsafe.Offsetof(nvml.FieldValue{}.Value)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.FieldValue{}.Value)-unsafe.Offsetof(C.struct_gt_nvml_field_value{}.value)]
	_ = [1]struct{}{}[unsafe.Sizeof(C.struct_gt_nvml_field_value{}.value)-unsafe.Sizeof(nvml.FieldValue{}.Value)]
	_ = [1]struct{}{}[unsafe.Sizeof(nvml.FieldValue{}.Value)-unsafe.Sizeof(C.struct_gt_nvml_field_value{}.value)]

	_ = [1]struct{}{}[unsafe.Sizeof(C.struct_gt_nvml_utilization{})-unsafe.Sizeof(nvml.Utilization{})]
	_ = [1]struct{}{}[unsafe.Sizeof(nvml.Utilization{})-unsafe.Sizeof(C.struct_gt_nvml_utilization{})]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_utilization{}.memory)-unsafe.Offsetof(nvml.Utilization{}.Memory)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.Utilization{}.Memory)-unsafe.Offsetof(C.struct_gt_nvml_utilization{}.memory)]

	_ = [1]struct{}{}[unsafe.Sizeof(C.struct_gt_nvml_memory_v2{})-unsafe.Sizeof(nvml.Memory_v2{})]
	_ = [1]struct{}{}[unsafe.Sizeof(nvml.Memory_v2{})-unsafe.Sizeof(C.struct_gt_nvml_memory_v2{})]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_memory_v2{}.total)-unsafe.Offsetof(nvml.Memory_v2{}.Total)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.Memory_v2{}.Total)-unsafe.Offsetof(C.struct_gt_nvml_memory_v2{}.total)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_memory_v2{}.reserved)-unsafe.Offsetof(nvml.Memory_v2{}.Reserved)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.Memory_v2{}.Reserved)-unsafe.Offsetof(C.struct_gt_nvml_memory_v2{}.reserved)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_memory_v2{}.free)-unsafe.Offsetof(nvml.Memory_v2{}.Free)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.Memory_v2{}.Free)-unsafe.Offsetof(C.struct_gt_nvml_memory_v2{}.free)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_memory_v2{}.used)-unsafe.Offsetof(nvml.Memory_v2{}.Used)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.Memory_v2{}.Used)-unsafe.Offsetof(C.struct_gt_nvml_memory_v2{}.used)]

	_ = [1]struct{}{}[unsafe.Sizeof(C.struct_gt_nvml_memory{})-unsafe.Sizeof(nvml.Memory{})]
	_ = [1]struct{}{}[unsafe.Sizeof(nvml.Memory{})-unsafe.Sizeof(C.struct_gt_nvml_memory{})]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_memory{}.free)-unsafe.Offsetof(nvml.Memory{}.Free)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.Memory{}.Free)-unsafe.Offsetof(C.struct_gt_nvml_memory{}.free)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_memory{}.used)-unsafe.Offsetof(nvml.Memory{}.Used)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.Memory{}.Used)-unsafe.Offsetof(C.struct_gt_nvml_memory{}.used)]

	_ = [1]struct{}{}[unsafe.Sizeof(C.struct_gt_nvml_thermal_settings{})-unsafe.Sizeof(nvml.GpuThermalSettings{})]
	_ = [1]struct{}{}[unsafe.Sizeof(nvml.GpuThermalSettings{})-unsafe.Sizeof(C.struct_gt_nvml_thermal_settings{})]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_thermal_settings{}.sensor)-unsafe.Offsetof(nvml.GpuThermalSettings{}.Sensor)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.GpuThermalSettings{}.Sensor)-unsafe.Offsetof(C.struct_gt_nvml_thermal_settings{}.sensor)]
	_ = [1]struct{}{}[unsafe.Sizeof(C.struct_gt_nvml_thermal_sensor{})-unsafe.Sizeof(nvml.GpuThermalSettingsSensor{})]
	_ = [1]struct{}{}[unsafe.Sizeof(nvml.GpuThermalSettingsSensor{})-unsafe.Sizeof(C.struct_gt_nvml_thermal_sensor{})]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_thermal_sensor{}.default_min_temp)-unsafe.Offsetof(nvml.GpuThermalSettingsSensor{}.DefaultMinTemp)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.GpuThermalSettingsSensor{}.DefaultMinTemp)-unsafe.Offsetof(C.struct_gt_nvml_thermal_sensor{}.default_min_temp)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_thermal_sensor{}.default_max_temp)-unsafe.Offsetof(nvml.GpuThermalSettingsSensor{}.DefaultMaxTemp)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.GpuThermalSettingsSensor{}.DefaultMaxTemp)-unsafe.Offsetof(C.struct_gt_nvml_thermal_sensor{}.default_max_temp)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_thermal_sensor{}.current_temp)-unsafe.Offsetof(nvml.GpuThermalSettingsSensor{}.CurrentTemp)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.GpuThermalSettingsSensor{}.CurrentTemp)-unsafe.Offsetof(C.struct_gt_nvml_thermal_sensor{}.current_temp)]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_gt_nvml_thermal_sensor{}.target)-unsafe.Offsetof(nvml.GpuThermalSettingsSensor{}.Target)]
	_ = [1]struct{}{}[unsafe.Offsetof(nvml.GpuThermalSettingsSensor{}.Target)-unsafe.Offsetof(C.struct_gt_nvml_thermal_sensor{}.target)]
)
