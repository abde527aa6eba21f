/*
 * cost.c - what an NVML call costs on a real host: a latency per function
 * (fixed or with jitter), an optional driver-wide lock that serializes the
 * calls that take it across every GPU and thread, and occasional slow calls.
 *
 * The wait is real (clock_nanosleep): the calling thread blocks as it would
 * in the kernel driver or on the GPU's firmware. Set by "cost" statements in
 * the scenario or by SIMNVML_COST (README.md, "Cost profile"). With no profile
 * a call costs nothing and this file adds one predictable branch.
 */
#include "sim.h"

#include <errno.h>
#include <string.h>

struct sim_cost g_cost[FN_COUNT];
int g_cost_lock;
int g_cost_on;
unsigned long long sim_fn_wall_ns[FN_COUNT];
unsigned long long sim_fn_cpu_ns[FN_COUNT];

static pthread_mutex_t g_driver_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t g_overshoot; /* ns a sleep wakes late, on average (EWMA over calls) */

static inline int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

#define MS(x) ((int64_t)((x) * 1e6))

/* Functions that never cost: they are the library's own bookkeeping, or
 * already block by design (the event wait). */
static int free_fn(int fn)
{
	return fn == FN_nvmlErrorString || fn == FN_nvmlEventSetWait || fn == FN_nvmlEventSetWait_v2 ||
	       fn == FN_nvmlInit || fn == FN_nvmlInit_v2 || fn == FN_nvmlInitWithFlags || fn == FN_nvmlShutdown;
}

static void set_fn(int fn, int64_t lat, int64_t jitter)
{
	if (free_fn(fn))
		return;
	g_cost[fn].lat = lat;
	g_cost[fn].jitter = jitter;
}

/*
 * The named profiles (README.md gives the sources):
 *  realistic   getters 0.1-0.4 ms (0.25 +- 0.15), nvmlDeviceGetPowerUsage
 *              0.37 ms, field values 0.5-1.5 ms, process lists 1-3 ms, one
 *              call in 1000 takes 50 ms more; no driver lock.
 *  pessimistic the same, every latency doubled, the driver lock on for all.
 *  none        free calls (the default).
 */
int sim_cost_profile(const char *name)
{
	int i, pess = strcmp(name, "pessimistic") == 0;

	if (strcmp(name, "none") != 0 && strcmp(name, "realistic") != 0 && !pess)
		return -1;
	memset(g_cost, 0, sizeof(g_cost));
	g_cost_lock = 0;
	g_cost_on = 0;
	if (strcmp(name, "none") == 0)
		return 0;
	for (i = 0; i < FN_COUNT; i++) {
		set_fn(i, MS(0.25), MS(0.15));
		if (!free_fn(i)) {
			g_cost[i].slow_every = 1000;
			g_cost[i].slow = MS(50);
		}
	}
	set_fn(FN_nvmlDeviceGetPowerUsage, MS(0.37), 0);
	set_fn(FN_nvmlDeviceGetFieldValues, MS(1), MS(0.5));
	set_fn(FN_nvmlDeviceGetComputeRunningProcesses, MS(2), MS(1));
	set_fn(FN_nvmlDeviceGetComputeRunningProcesses_v2, MS(2), MS(1));
	set_fn(FN_nvmlDeviceGetComputeRunningProcesses_v3, MS(2), MS(1));
	set_fn(FN_nvmlDeviceGetGraphicsRunningProcesses, MS(2), MS(1));
	set_fn(FN_nvmlDeviceGetGraphicsRunningProcesses_v2, MS(2), MS(1));
	set_fn(FN_nvmlDeviceGetGraphicsRunningProcesses_v3, MS(2), MS(1));
	g_cost_on = 1;
	if (pess) {
		sim_cost_scale(2);
		g_cost_lock = 1;
	}
	return 0;
}

void sim_cost_scale(double x)
{
	int i;

	for (i = 0; i < FN_COUNT; i++) {
		g_cost[i].lat = (int64_t)((double)g_cost[i].lat * x);
		g_cost[i].jitter = (int64_t)((double)g_cost[i].jitter * x);
		g_cost[i].slow = (int64_t)((double)g_cost[i].slow * x);
	}
}

/* Per-thread xorshift: jitter and slow calls need no shared state. */
static __thread uint64_t t_rng;

static uint64_t rnd(void)
{
	uint64_t x = t_rng;

	if (x == 0)
		x = (uint64_t)(uintptr_t)&t_rng ^ ((uint64_t)sim_mono_ns() * 0x9e3779b97f4a7c15ULL) ^ g_host.seed;
	if (x == 0)
		x = 1;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	t_rng = x;
	return x;
}

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Waits what a call of fn costs (taking the driver lock first when it is on
 * and fn takes it) and accounts the time to fn. */
void sim_cost_wait(int fn)
{
	const struct sim_cost *c = &g_cost[fn];
	int64_t wait = c->lat, t0, c0, end, target;
	int locked = 0;
	struct timespec ts;

	if (!g_cost_on || (wait == 0 && c->slow_every == 0))
		return;
	if (c->jitter > 0)
		wait += (int64_t)(rnd() % (uint64_t)(2 * c->jitter + 1)) - c->jitter;
	if (c->slow_every > 0 && rnd() % c->slow_every == 0)
		wait += c->slow;
	if (wait < 0)
		wait = 0;
	t0 = sim_mono_ns();
	c0 = thread_cpu_ns();
	if (g_cost_lock && !c->nolock) {
		pthread_mutex_lock(&g_driver_mu);
		locked = 1;
	}
	/* The latency counts from when the driver is ours, not from the call.
	 * A sleep overshoots (timer slack, wake-up): wake that much earlier,
	 * learnt from the previous calls, so the average wait is the profile's. */
	end = sim_mono_ns() + wait;
	target = end - min64(__atomic_load_n(&g_overshoot, __ATOMIC_RELAXED), wait / 2);
	ts.tv_sec = target / 1000000000LL;
	ts.tv_nsec = target % 1000000000LL;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
	if (wait > 0) {
		int64_t over = sim_mono_ns() - target, est = __atomic_load_n(&g_overshoot, __ATOMIC_RELAXED);
		if (over >= 0 && over < 1000000) /* ignore preemptions of a millisecond or more */
			__atomic_store_n(&g_overshoot, est + (over - est) / 16, __ATOMIC_RELAXED);
	}
	if (locked)
		pthread_mutex_unlock(&g_driver_mu);
	__atomic_fetch_add(&sim_fn_cpu_ns[fn], (unsigned long long)(thread_cpu_ns() - c0), __ATOMIC_RELAXED);
	__atomic_fetch_add(&sim_fn_wall_ns[fn], (unsigned long long)(sim_mono_ns() - t0), __ATOMIC_RELAXED);
}
