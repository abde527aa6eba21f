/*
 * fans.c - fan queries, the fan setters a fan guard calls, the log of those
 * calls (SIMNVML_SETLOG), and the thermal model.
 *
 * A fan is controlled by the firmware until SetFanSpeed_v2 commands a speed:
 * from then on the fan runs at the command and its policy reads manual,
 * while GetTargetFanSpeed still reports what the firmware wants.
 * SetDefaultFanSpeed_v2 (or SetFanControlPolicy auto) hands it back.
 *
 * Without "thermal" the firmware's speed and target are the scenario's
 * "fan" and "fan_target" tracks and the die temperature its "temp" track: a
 * command moves the fan and nothing else. With "thermal" the die temperature
 * follows power and fan speed (a first-order lag), the firmware sets its
 * target from the temperature (or, broken, holds it), and a crash rule turns
 * a die held too hot into Xid 62 and the GSP crash chain: what
 * NVIDIA/open-gpu-kernel-modules issue 1045 measured on the RTX PRO 6000
 * Blackwell, so a fan guard can be shown to prevent it.
 */
#include "sim.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAN_FIRMWARE (-1) /* fan_cmd: no command, the firmware controls the fan */

static inline int fan_cmd(const struct nvmlDevice_st *d, unsigned int fan)
{
	return __atomic_load_n(&d->fan_cmd[fan], __ATOMIC_RELAXED);
}

/* ---- thermal model -------------------------------------------------------- */

/*
 * The die at temperature T under power P (W) with the fans at mean speed f
 * (%) heads for
 *
 *	Tss = ambient + P / (g0 + gfan * f)
 *
 * with time constant tau: T(t + h) = Tss + (T(t) - Tss) * exp(-h / tau),
 * stepped on a fixed 100 ms grid from time 0 (so the history does not
 * depend on when callers ask; a command takes effect at the next step).
 *
 * The defaults are fitted to issue 1045's figures for the RTX PRO 6000 at a
 * 500 W workload: 73 C with fans at 78 % (25 + 500 / 10.42), and 95 C at
 * the broken firmware's 53 % (25 + 500 / 7.15; the real card read 87-92 C
 * because the driver throttled it, SwPowerCap and SwThermalSlowdown, which
 * the model leaves out). A fan guard's curve of 40 % at 60 C to 100 % at
 * 85 C then settles near 75 C, the firmware's own curve (30 % at 50 C to
 * 100 % at 85 C) near 73 C, and an idle 32 W GPU at 30 % near 33 C. tau is
 * 15 s, shorter than a real heatsink's, so a demo crashes within a minute.
 */
#define TH_STEP 100000000LL /* ns */

struct sim_thermal {
	pthread_mutex_t mu;
	/* the scenario's parameters */
	double ambient, g0, gfan, tau; /* C, W/C, W/C per %, s */
	int broken; /* the firmware holds its target at hold % whatever the temperature */
	double hold;
	double c0, p0, c1, p1; /* else its target: p0 % at c0 C .. p1 % at c1 C, linear, clamped */
	double crash_above; /* C */
	int64_t crash_for; /* ns; 0: no crash rule */
	/* the state, under mu */
	int started;
	int64_t t; /* ns: the state is the die's at t, on the grid */
	double temp; /* C */
	int64_t above_since; /* ns; -1: not above crash_above */
	int crashed;
};

/* th_target is the firmware's fan target for a die at temp. */
static double th_target(const struct nvmlDevice_st *d, double temp)
{
	const struct sim_thermal *th = d->th;
	double p;

	if (th->broken)
		return th->hold;
	p = th->p0 + (th->p1 - th->p0) * (temp - th->c0) / (th->c1 - th->c0);
	return fmin(fmax(p, fmin(th->p0, th->p1)), fmax(th->p0, th->p1));
}

/* th_fans is the fans' mean speed: each at its command or the firmware's
 * target. A fanless GPU is cooled by the chassis' airflow: 100. */
static double th_fans(const struct nvmlDevice_st *d, double temp)
{
	double sum = 0;
	unsigned int i;

	if (d->fans == 0)
		return 100;
	for (i = 0; i < d->fans; i++) {
		int c = fan_cmd(d, i);
		sum += c != FAN_FIRMWARE ? c : th_target(d, temp);
	}
	return sum / d->fans;
}

/* The GSP crash chain (scenarios/gsp-crash.scn from 13 s on), from the
 * moment the crash rule fires: Xid 62 (events and kmsg), 45 a second later,
 * 119 (kmsg only), 154 with recovery action 1 (GPU Reset Required), then
 * Xid 79 (kmsg only) and the GPU lost. */
static void th_crash(struct nvmlDevice_st *d, int64_t t)
{
	const int64_t s = 1000000000LL;
	unsigned int g = d->index;
	int64_t lost = t + 5 * s;

	sim_add_event(t, g, nvmlEventTypeXidCriticalError, 62);
	sim_add_kmsg(t, g, 62, 0);
	sim_add_event(t + s, g, nvmlEventTypeXidCriticalError, 45);
	sim_add_kmsg(t + s, g, 45, 0);
	sim_add_kmsg(t + 2 * s, g, 119, 0);
	sim_add_event(t + 3 * s, g, nvmlEventTypeXidCriticalError, 154);
	sim_add_event(t + 3 * s, g, nvmlEventTypeGpuRecoveryAction, NVML_GPU_RECOVERY_ACTION_GPU_RESET);
	sim_add_kmsg(t + 3 * s, g, 154, NVML_GPU_RECOVERY_ACTION_GPU_RESET);
	sim_add_kmsg(lost, g, 79, 0);
	if (lost < __atomic_load_n(&d->lost_at, __ATOMIC_RELAXED))
		__atomic_store_n(&d->lost_at, lost, __ATOMIC_RELAXED);
}

/* th_advance steps the model up to now (th->mu held). It starts at the
 * scenario's "temp" at time 0. */
static void th_advance(struct nvmlDevice_st *d, int64_t now)
{
	struct sim_thermal *th = d->th;
	double decay = exp(-(double)TH_STEP / 1e9 / th->tau);

	if (!th->started) {
		th->started = 1;
		th->t = 0;
		th->temp = sim_eval(d, M_TEMP, 0);
		th->above_since = -1;
	}
	while (th->t + TH_STEP <= now) {
		double watts = sim_eval(d, M_POWER, th->t) / 1000;
		double ss = th->ambient + watts / (th->g0 + th->gfan * th_fans(d, th->temp));

		th->temp = ss + (th->temp - ss) * decay;
		th->t += TH_STEP;
		if (th->crash_for == 0 || th->crashed)
			continue;
		if (th->temp <= th->crash_above) {
			th->above_since = -1;
		} else if (th->above_since < 0) {
			th->above_since = th->t;
		} else if (th->t - th->above_since >= th->crash_for) {
			th->crashed = 1;
			th_crash(d, th->t);
		}
	}
}

/* th_temp is the die temperature at now. */
static double th_temp(struct nvmlDevice_st *d, int64_t now)
{
	double temp;

	pthread_mutex_lock(&d->th->mu);
	th_advance(d, now);
	temp = d->th->temp;
	pthread_mutex_unlock(&d->th->mu);
	return temp;
}

double sim_temp(struct nvmlDevice_st *d, int64_t now)
{
	return d->th != NULL ? th_temp(d, now) : sim_eval(d, M_TEMP, now);
}

static void *thermal_thread(void *arg)
{
	unsigned int g;

	(void)arg;
	for (;;) {
		struct timespec ts = { 0, TH_STEP };
		int64_t now;

		while (nanosleep(&ts, &ts) == -1)
			;
		now = sim_now();
		for (g = 0; g < g_host.ngpus; g++)
			if (g_devs[g].th != NULL)
				th_temp(&g_devs[g], now);
		sim_write_due_kmsgs(now);
	}
	return NULL;
}

/* sim_start_thermal runs the model every step even when nobody asks, so a
 * crash's events and kernel log records come on time. */
void sim_start_thermal(void)
{
	unsigned int g;

	for (g = 0; g < g_host.ngpus; g++) {
		if (g_devs[g].th != NULL) {
			sim_start_thread(thermal_thread, NULL);
			return;
		}
	}
}

static int th_err(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "%s; expected: gpu SEL thermal [on] [ambient C] [tau DURATION] [cooling G0 GFAN] "
			      "[firmware broken PCT | firmware curve C0:P0,C1:P1] [crash C for DURATION]",
		 what);
	return -1;
}

/* th_point parses "C:P" (a temperature and a fan speed). */
static int th_point(const char *s, double *c, double *p)
{
	char buf[64], *colon;

	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	colon = strchr(buf, ':');
	if (colon == NULL)
		return -1;
	*colon = '\0';
	return sim_parse_number(buf, c) != 0 || sim_parse_number(colon + 1, p) != 0 || *p < 0 || *p > 100 ? -1 : 0;
}

/*
 * gpu SEL thermal [on] [ambient C] [tau DURATION] [cooling G0 GFAN]
 *                 [firmware broken PCT | firmware curve C0:P0,C1:P1] [crash C for DURATION]
 * tok[0] is "thermal". Turns the model on for the GPUs; later lines change
 * the parameters they name.
 */
int sim_stmt_thermal(char *err, size_t errlen, uint32_t mask, char **tok, int n)
{
	struct sim_thermal p;
	unsigned int g;
	int i, set[5] = { 0 }; /* which of ambient, tau, cooling, firmware, crash were given */
	int64_t dur;

	memset(&p, 0, sizeof(p));
	for (i = 1; i < n; i++) {
		const char *w = tok[i];
		if (strcmp(w, "on") == 0)
			continue;
		if (strcmp(w, "ambient") == 0 && i + 1 < n) {
			if (sim_parse_number(tok[++i], &p.ambient) != 0 || p.ambient < -50 || p.ambient > 150)
				return th_err(err, errlen, "bad ambient temperature");
			set[0] = 1;
		} else if (strcmp(w, "tau") == 0 && i + 1 < n) {
			if (sim_parse_duration(tok[++i], &dur) != 0 || dur < 1000000)
				return th_err(err, errlen, "bad time constant (at least 1ms)");
			p.tau = (double)dur / 1e9;
			set[1] = 1;
		} else if (strcmp(w, "cooling") == 0 && i + 2 < n) {
			if (sim_parse_number(tok[i + 1], &p.g0) != 0 || sim_parse_number(tok[i + 2], &p.gfan) != 0 ||
			    p.g0 < 0 || p.gfan < 0 || p.g0 + p.gfan <= 0)
				return th_err(err, errlen, "bad cooling (W/C at no fan, W/C per % of fan)");
			i += 2;
			set[2] = 1;
		} else if (strcmp(w, "firmware") == 0 && i + 2 < n && strcmp(tok[i + 1], "broken") == 0) {
			if (sim_parse_number(tok[i + 2], &p.hold) != 0 || p.hold < 0 || p.hold > 100)
				return th_err(err, errlen, "bad held fan speed");
			p.broken = 1;
			i += 2;
			set[3] = 1;
		} else if (strcmp(w, "firmware") == 0 && i + 2 < n && strcmp(tok[i + 1], "curve") == 0) {
			char buf[128], *comma;
			if (strlen(tok[i + 2]) >= sizeof(buf))
				return th_err(err, errlen, "bad firmware curve");
			strcpy(buf, tok[i + 2]);
			comma = strchr(buf, ',');
			if (comma == NULL)
				return th_err(err, errlen, "bad firmware curve");
			*comma = '\0';
			if (th_point(buf, &p.c0, &p.p0) != 0 || th_point(comma + 1, &p.c1, &p.p1) != 0 || p.c1 <= p.c0)
				return th_err(err, errlen, "bad firmware curve (two points C:PCT, rising temperature)");
			p.broken = 0;
			i += 2;
			set[3] = 1;
		} else if (strcmp(w, "crash") == 0 && i + 3 < n && strcmp(tok[i + 2], "for") == 0) {
			if (sim_parse_number(tok[i + 1], &p.crash_above) != 0 || sim_parse_duration(tok[i + 3], &dur) != 0 ||
			    dur < TH_STEP)
				return th_err(err, errlen, "bad crash rule (a temperature, for at least 100ms)");
			p.crash_for = dur;
			i += 3;
			set[4] = 1;
		} else {
			snprintf(err, errlen, "unexpected \"%s\" in thermal statement", w);
			return -1;
		}
	}
	for (g = 0; g < g_host.ngpus; g++) {
		struct sim_thermal *th;
		if (!(mask & (1u << g)))
			continue;
		th = g_devs[g].th;
		if (th == NULL) {
			th = calloc(1, sizeof(*th));
			if (th == NULL)
				return th_err(err, errlen, "out of memory");
			pthread_mutex_init(&th->mu, NULL);
			th->ambient = 25;
			th->g0 = 0.2086;
			th->gfan = 0.1309;
			th->tau = 15;
			th->c0 = 50, th->p0 = 30, th->c1 = 85, th->p1 = 100;
			g_devs[g].th = th;
		}
		if (set[0])
			th->ambient = p.ambient;
		if (set[1])
			th->tau = p.tau;
		if (set[2])
			th->g0 = p.g0, th->gfan = p.gfan;
		if (set[3]) {
			th->broken = p.broken;
			th->hold = p.hold;
			if (!p.broken)
				th->c0 = p.c0, th->p0 = p.p0, th->c1 = p.c1, th->p1 = p.p1;
		}
		if (set[4])
			th->crash_above = p.crash_above, th->crash_for = p.crash_for;
	}
	return 0;
}

/* ---- fan speeds ----------------------------------------------------------- */

/* firmware_target is what the firmware asks of fan, and firmware_speed what
 * fan runs at without a command: with the thermal model, the target. */
static double firmware_target(struct nvmlDevice_st *d, unsigned int fan, int64_t now)
{
	if (d->th != NULL)
		return th_target(d, th_temp(d, now));
	return sim_eval(d, M_FANT0 + (int)fan, now);
}

static double firmware_speed(struct nvmlDevice_st *d, unsigned int fan, int64_t now)
{
	if (d->th != NULL)
		return firmware_target(d, fan, now);
	return sim_eval(d, M_FAN0 + (int)fan, now);
}

/* fan_speed is what fan runs at now: the command, or the firmware's speed. */
static double fan_speed(struct nvmlDevice_st *d, unsigned int fan, int64_t now)
{
	int c = fan_cmd(d, fan);

	return c != FAN_FIRMWARE ? c : firmware_speed(d, fan, now);
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
	if (d->th == NULL) {
		__atomic_store_n(&d->fan_cmd[fan], cmd, __ATOMIC_RELAXED);
		return NVML_SUCCESS;
	}
	/* The model runs up to now with the fan as it was. */
	pthread_mutex_lock(&d->th->mu);
	th_advance(d, now);
	__atomic_store_n(&d->fan_cmd[fan], cmd, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&d->th->mu);
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
