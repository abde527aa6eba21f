// The fake's C functions by their NVML symbols (see cabi.go).
#include <string.h>

#include "_cgo_export.h"

static const struct {
	const char *name;
	void *fn;
} fns[] = {
	{ "nvmlDeviceGetFieldValues", (void *)fakeGetFieldValues },
	{ "nvmlDeviceGetTemperature", (void *)fakeGetTemperature },
	{ "nvmlDeviceGetPowerManagementLimit", (void *)fakeGetPowerManagementLimit },
	{ "nvmlDeviceGetPerformanceState", (void *)fakeGetPerformanceState },
	{ "nvmlDeviceGetClockInfo", (void *)fakeGetClockInfo },
	{ "nvmlDeviceGetUtilizationRates", (void *)fakeGetUtilizationRates },
	{ "nvmlDeviceGetMemoryInfo_v2", (void *)fakeGetMemoryInfo_v2 },
	{ "nvmlDeviceGetMemoryInfo", (void *)fakeGetMemoryInfo },
	{ "nvmlDeviceGetCurrentClocksEventReasons", (void *)fakeGetCurrentClocksEventReasons },
	{ "nvmlDeviceGetCurrentClocksThrottleReasons", (void *)fakeGetCurrentClocksThrottleReasons },
	{ "nvmlDeviceGetFanSpeed", (void *)fakeGetFanSpeed },
	{ "nvmlDeviceGetEncoderUtilization", (void *)fakeGetEncoderUtilization },
	{ "nvmlDeviceGetDecoderUtilization", (void *)fakeGetDecoderUtilization },
	{ "nvmlDeviceGetCurrPcieLinkGeneration", (void *)fakeGetCurrPcieLinkGeneration },
	{ "nvmlDeviceGetCurrPcieLinkWidth", (void *)fakeGetCurrPcieLinkWidth },
	{ "nvmlDeviceGetThermalSettings", (void *)fakeGetThermalSettings },
	{ "nvmlDeviceGetSramEccErrorStatus", (void *)fakeGetSramEccErrorStatus },
	{ "nvmlDeviceGetRepairStatus", (void *)fakeGetRepairStatus },
	{ "nvmlDeviceGetUnrepairableMemoryFlag_v1", (void *)fakeGetUnrepairableMemoryFlag_v1 },
	{ "nvmlDeviceGetPowerUsage", (void *)fakeGetPowerUsage },
	{ "nvmlDeviceGetEnforcedPowerLimit", (void *)fakeGetEnforcedPowerLimit },
	{ "nvmlDeviceGetTotalEnergyConsumption", (void *)fakeGetTotalEnergyConsumption },
	{ "nvmlDeviceGetPcieReplayCounter", (void *)fakeGetPcieReplayCounter },
	{ "nvmlDeviceGetFanSpeed_v2", (void *)fakeGetFanSpeed_v2 },
	{ "nvmlDeviceGetTargetFanSpeed", (void *)fakeGetTargetFanSpeed },
};

void *fake_sym(const char *name)
{
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		if (strcmp(fns[i].name, name) == 0)
			return fns[i].fn;
	return NULL;
}
