/*
 * fans.c - fan queries, the fan setters a fan guard calls, and the log of
 * those calls (SIMNVML_SETLOG).
 *
 * A fan is controlled by the firmware (its speed and target are the
 * scenario's "fan" and "fan_target" tracks) until SetFanSpeed_v2 commands a
 * speed: from then on the fan runs at the command and its policy reads
 * manual, while GetTargetFanSpeed still reports what the firmware wants.
 * SetDefaultFanSpeed_v2 (or SetFanControlPolicy auto) hands it back.
 */
#include "sim.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define FAN_FIRMWARE (-1) /* fan_cmd: no command, the firmware controls the fan */

static inline int fan_cmd(const struct nvmlDevice_st *d, unsigned int fan)
{
	return __atomic_load_n(&d->fan_cmd[fan], __ATOMIC_RELAXED);
}

/* firmware_speed is what fan runs at without a command, and
 * firmware_target what the firmware asks of it. */
static double firmware_speed(const struct nvmlDevice_st *d, unsigned int fan, int64_t now)
{
	return sim_eval(d, M_FAN0 + (int)fan, now);
}

static double firmware_target(const struct nvmlDevice_st *d, unsigned int fan, int64_t now)
{
	return sim_eval(d, M_FANT0 + (int)fan, now);
}

/* fan_speed is what fan runs at now: the command, or the firmware's speed. */
static double fan_speed(const struct nvmlDevice_st *d, unsigned int fan, int64_t now)
{
	int c = fan_cmd(d, fan);

	return c != FAN_FIRMWARE ? c : firmware_speed(d, fan, now);
}

double sim_temp(struct nvmlDevice_st *d, int64_t now)
{
	return sim_eval(d, M_TEMP, now);
}

/* ---- queries -------------------------------------------------------------- */

/* fan_check answers what every per-fan call answers first: a fanless GPU
 * does not support fan calls, an index past its fans is an invalid argument. */
static nvmlReturn_t fan_check(const struct nvmlDevice_st *d, unsigned int fan)
{
	if (d->fans == 0)
		return NVML_ERROR_NOT_SUPPORTED;
	if (fan >= d->fans)
		return NVML_ERROR_INVALID_ARGUMENT;
	return NVML_SUCCESS;
}

enum fan_query { Q_SPEED, Q_TARGET, Q_POLICY };

static nvmlReturn_t fan_query(struct nvmlDevice_st *d, int64_t now, enum fan_query q, unsigned int fan, unsigned int *out)
{
	nvmlReturn_t r;

	NEED(out);
	if ((r = fan_check(d, fan)) != NVML_SUCCESS)
		return r;
	switch (q) {
	case Q_SPEED:
		*out = to_u32(fan_speed(d, fan, now));
		break;
	case Q_TARGET:
		*out = to_u32(firmware_target(d, fan, now));
		break;
	case Q_POLICY:
		*out = fan_cmd(d, fan) != FAN_FIRMWARE ? NVML_FAN_POLICY_MANUAL : to_u32(sim_eval(d, M_FANP0 + (int)fan, now));
		break;
	}
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
	ENTER(nvmlDeviceGetFanSpeed);
	return fan_query(d, now, Q_SPEED, 0, speed);
}

#ifndef SIMNVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetNumFans(nvmlDevice_t device, unsigned int *numFans)
{
	ENTER(nvmlDeviceGetNumFans);
	NEED(numFans);
	*numFans = d->fans;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan, unsigned int *speed)
{
	ENTER(nvmlDeviceGetFanSpeed_v2);
	return fan_query(d, now, Q_SPEED, fan, speed);
}

nvmlReturn_t nvmlDeviceGetTargetFanSpeed(nvmlDevice_t device, unsigned int fan, unsigned int *targetSpeed)
{
	ENTER(nvmlDeviceGetTargetFanSpeed);
	return fan_query(d, now, Q_TARGET, fan, targetSpeed);
}

nvmlReturn_t nvmlDeviceGetFanControlPolicy_v2(nvmlDevice_t device, unsigned int fan, nvmlFanControlPolicy_t *policy)
{
	ENTER(nvmlDeviceGetFanControlPolicy_v2);
	return fan_query(d, now, Q_POLICY, fan, policy);
}

nvmlReturn_t nvmlDeviceGetMinMaxFanSpeed(nvmlDevice_t device, unsigned int *minSpeed, unsigned int *maxSpeed)
{
	ENTER(nvmlDeviceGetMinMaxFanSpeed);
	NEED(minSpeed);
	NEED(maxSpeed);
	if (d->fans == 0)
		return NVML_ERROR_NOT_SUPPORTED;
	*minSpeed = d->fan_min;
	*maxSpeed = d->fan_max;
	return NVML_SUCCESS;
}
#endif

/* ---- setters -------------------------------------------------------------- */

static int g_setlog_fd = -1;
static pthread_once_t g_setlog_once = PTHREAD_ONCE_INIT;

static void setlog_open(void)
{
	const char *path = getenv("SIMNVML_SETLOG");

	if (path != NULL && path[0] != '\0') {
		g_setlog_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		if (g_setlog_fd < 0)
			perror("simnvml: SIMNVML_SETLOG");
	}
}

enum fan_op { OP_SPEED, OP_POLICY, OP_DEFAULT };

/* setlog appends one line per setter call to SIMNVML_SETLOG, written when the
 * call returns (one write(2), O_APPEND: lines never interleave, and a logger
 * killed right after the call has its line on disk):
 *
 *	SECONDS gpu INDEX FUNCTION fan F [speed S | policy P] ret CODE
 *
 * SECONDS is scenario time, INDEX the GPU's scenario index (? for a handle
 * that is not one). A call still blocked in a hang has no line yet. */
static void setlog(int fn, nvmlDevice_t device, unsigned int fan, enum fan_op op, unsigned int value, nvmlReturn_t r)
{
	const struct nvmlDevice_st *d = sim_dev_of(device);
	char line[256], gpu[16], val[32] = "";
	int n;

	pthread_once(&g_setlog_once, setlog_open);
	if (g_setlog_fd < 0)
		return;
	if (d != NULL)
		snprintf(gpu, sizeof(gpu), "%u", d->index);
	else
		snprintf(gpu, sizeof(gpu), "?");
	if (op != OP_DEFAULT)
		snprintf(val, sizeof(val), " %s %u", op == OP_SPEED ? "speed" : "policy", value);
	n = snprintf(line, sizeof(line), "%.6f gpu %s %s fan %u%s ret %d\n", (double)sim_now() / 1e9, gpu,
		     sim_fn_names[fn], fan, val, (int)r);
	if (n > 0 && (size_t)n < sizeof(line) && write(g_setlog_fd, line, (size_t)n) < 0)
		return;
}

/* fan_apply checks a setter's call the way the driver does (a fanless GPU:
 * not supported; a fan, speed or policy out of range: invalid argument; not
 * root: no permission), then changes the fan's command. */
static nvmlReturn_t fan_apply(struct nvmlDevice_st *d, int64_t now, unsigned int fan, enum fan_op op, unsigned int value)
{
	nvmlReturn_t r;
	int cmd = FAN_FIRMWARE;

	if ((r = fan_check(d, fan)) != NVML_SUCCESS)
		return r;
	switch (op) {
	case OP_SPEED:
		if (value < d->fan_min || value > d->fan_max)
			return NVML_ERROR_INVALID_ARGUMENT;
		cmd = (int)value;
		break;
	case OP_POLICY:
		/* manual without a command holds the fan where it runs */
		if (value == NVML_FAN_POLICY_MANUAL)
			cmd = (int)to_u32(fan_speed(d, fan, now));
		else if (value != NVML_FAN_POLICY_TEMPERATURE_CONTINOUS_SW)
			return NVML_ERROR_INVALID_ARGUMENT;
		break;
	case OP_DEFAULT:
		break;
	}
	if (g_host.nonroot)
		return NVML_ERROR_NO_PERMISSION;
	__atomic_store_n(&d->fan_cmd[fan], cmd, __ATOMIC_RELAXED);
	return NVML_SUCCESS;
}

/* fan_setter runs setter fn: counted and entered like every device call (so
 * hang, fail and lost rules apply to it), applied, logged. */
static nvmlReturn_t fan_setter(int fn, nvmlDevice_t device, unsigned int fan, enum fan_op op, unsigned int value)
{
	struct nvmlDevice_st *d;
	int64_t now;
	nvmlReturn_t r;

	__atomic_fetch_add(&sim_fn_calls[fn], 1, __ATOMIC_RELAXED);
	r = sim_dev_enter(fn, device, &d, &now);
	if (r == NVML_SUCCESS)
		r = fan_apply(d, now, fan, op, value);
	setlog(fn, device, fan, op, value, r);
	return r;
}

#ifndef SIMNVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceSetFanSpeed_v2(nvmlDevice_t device, unsigned int fan, unsigned int speed)
{
	return fan_setter(FN_nvmlDeviceSetFanSpeed_v2, device, fan, OP_SPEED, speed);
}

nvmlReturn_t nvmlDeviceSetFanControlPolicy(nvmlDevice_t device, unsigned int fan, nvmlFanControlPolicy_t policy)
{
	return fan_setter(FN_nvmlDeviceSetFanControlPolicy, device, fan, OP_POLICY, policy);
}
#endif

nvmlReturn_t nvmlDeviceSetDefaultFanSpeed_v2(nvmlDevice_t device, unsigned int fan)
{
	return fan_setter(FN_nvmlDeviceSetDefaultFanSpeed_v2, device, fan, OP_DEFAULT, 0);
}
