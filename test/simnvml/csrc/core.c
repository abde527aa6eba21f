/*
 * core.c - init/shutdown, system queries, error strings, call counters and
 * the background thread that refreshes the SIMNVML_CALLS file.
 */
#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const sim_fn_names[FN_COUNT] = {
#define SIMFN(name) #name,
#include "fns.h"
#undef SIMFN
};

unsigned long long sim_fn_calls[FN_COUNT];

struct sim_host g_host;
int64_t g_t0;
int64_t g_real_offset;
int g_refcount;

static pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_loaded; /* scenario loaded (once per process) */
static nvmlReturn_t g_load_result;

static pthread_mutex_t g_dump_mu = PTHREAD_MUTEX_INITIALIZER;
static const char *g_calls_path;

/* ---- helpers ------------------------------------------------------------- */

void sim_sleep_until(int64_t t)
{
	struct timespec ts;
	int64_t abs = t + g_t0;

	if (abs < 0)
		abs = 0;
	ts.tv_sec = abs / 1000000000LL;
	ts.tv_nsec = abs % 1000000000LL;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Starts a detached thread with every signal blocked, so the host process
 * (a Go runtime, typically) never sees a signal delivered to our threads. */
int sim_start_thread(void *(*fn)(void *), void *arg)
{
	pthread_t th;
	pthread_attr_t attr;
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

const char *sim_recovery_name(int action)
{
	switch (action) {
	case NVML_GPU_RECOVERY_ACTION_NONE:
		return "None";
	case NVML_GPU_RECOVERY_ACTION_GPU_RESET:
		return "GPU Reset Required";
	case NVML_GPU_RECOVERY_ACTION_NODE_REBOOT:
		return "Node Reboot Required";
	case NVML_GPU_RECOVERY_ACTION_DRAIN_P2P:
		return "Drain P2P";
	case NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET:
		return "Drain and Reset";
	default:
		return "Unknown";
	}
}

/* ---- call counts file ---------------------------------------------------- */

struct namecount {
	const char *name;
	unsigned long long n;
	unsigned long long wall, cpu; /* ns inside the cost wait (modelled functions) */
};

static int cmp_namecount(const void *a, const void *b)
{
	return strcmp(((const struct namecount *)a)->name, ((const struct namecount *)b)->name);
}

void sim_dump_calls(void)
{
	struct namecount *v;
	size_t n = 0, i, cap;
	char tmp[4096];
	FILE *f;

	if (g_calls_path == NULL)
		return;
	cap = FN_COUNT + simnvml_nstubs;
	v = malloc(cap * sizeof(*v));
	if (v == NULL)
		return;
	for (i = 0; i < FN_COUNT; i++) {
		unsigned long long c = __atomic_load_n(&sim_fn_calls[i], __ATOMIC_RELAXED);
		if (c != 0) {
			v[n].name = sim_fn_names[i];
			v[n].wall = __atomic_load_n(&sim_fn_wall_ns[i], __ATOMIC_RELAXED);
			v[n].cpu = __atomic_load_n(&sim_fn_cpu_ns[i], __ATOMIC_RELAXED);
			v[n++].n = c;
		}
	}
	for (i = 0; i < simnvml_nstubs; i++) {
		unsigned long long c = __atomic_load_n(&simnvml_stub_calls[i], __ATOMIC_RELAXED);
		if (c != 0) {
			v[n].name = simnvml_stub_names[i];
			v[n].wall = v[n].cpu = 0;
			v[n++].n = c;
		}
	}
	if (n > 0)
		qsort(v, n, sizeof(*v), cmp_namecount);

	pthread_mutex_lock(&g_dump_mu);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", g_calls_path, (int)getpid());
	f = fopen(tmp, "w");
	if (f != NULL) {
		/* With a cost profile: also the time inside the driver (wall and
		 * thread CPU, ns), so a benchmark can tell the driver's share. */
		for (i = 0; i < n; i++)
			if (g_cost_on)
				fprintf(f, "%s %llu %llu %llu\n", v[i].name, v[i].n, v[i].wall, v[i].cpu);
			else
				fprintf(f, "%s %llu\n", v[i].name, v[i].n);
		if (fclose(f) == 0)
			rename(tmp, g_calls_path);
		else
			unlink(tmp);
	}
	pthread_mutex_unlock(&g_dump_mu);
	free(v);
}

static void *calls_thread(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts = { 1, 0 };
		while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
			;
		sim_dump_calls();
	}
	return NULL;
}

__attribute__((destructor)) static void sim_at_exit(void)
{
	/* Runs at exit() (the library is linked -z nodelete, so dlclose never
	 * unloads it). Go's os.Exit skips it; the 1 s refresh covers that. */
	sim_dump_calls();
}

/* ---- init / shutdown ----------------------------------------------------- */

static void load_once(void)
{
	struct timespec mono, real;
	const char *calls, *offset;

	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	g_t0 = (int64_t)mono.tv_sec * 1000000000LL + mono.tv_nsec;
	g_real_offset = ((int64_t)real.tv_sec * 1000000000LL + real.tv_nsec) - g_t0;

	/* Testing aid: start the scenario clock this many seconds in. */
	offset = getenv("SIMNVML_TIME_OFFSET");
	if (offset != NULL && offset[0] != '\0') {
		char *end;
		double sec = strtod(offset, &end);
		if (end != offset && *end == '\0' && sec >= 0 && sec < 1e6)
			g_t0 -= (int64_t)(sec * 1e9);
		else
			fprintf(stderr, "simnvml: ignoring bad SIMNVML_TIME_OFFSET=%s\n", offset);
	}

	calls = getenv("SIMNVML_CALLS");
	if (calls != NULL && calls[0] != '\0') {
		g_calls_path = strdup(calls);
		if (g_calls_path != NULL)
			sim_start_thread(calls_thread, NULL);
	}

	g_load_result = sim_load_scenario(getenv("SIMNVML_SCENARIO"));
	if (g_load_result != NVML_ERROR_UNKNOWN) {
		sim_start_kmsg();
		sim_start_thermal();
	}
	g_loaded = 1;
}

static nvmlReturn_t do_init(void)
{
	nvmlReturn_t r;

	pthread_mutex_lock(&g_init_mu);
	if (!g_loaded)
		load_once();
	r = g_load_result;
	if (r == NVML_SUCCESS)
		r = g_host.init_result;
	if (r == NVML_SUCCESS)
		__atomic_add_fetch(&g_refcount, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&g_init_mu);
	return r;
}

nvmlReturn_t nvmlInit_v2(void)
{
	SIM_COUNT(nvmlInit_v2);
	return do_init();
}

nvmlReturn_t nvmlInit(void)
{
	SIM_COUNT(nvmlInit);
	return do_init();
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
	SIM_COUNT(nvmlInitWithFlags);
	(void)flags; /* zero GPUs never fail init in the simulator */
	return do_init();
}

nvmlReturn_t nvmlShutdown(void)
{
	nvmlReturn_t r = NVML_SUCCESS;

	SIM_COUNT(nvmlShutdown);
	pthread_mutex_lock(&g_init_mu);
	if (__atomic_load_n(&g_refcount, __ATOMIC_ACQUIRE) <= 0)
		r = NVML_ERROR_UNINITIALIZED;
	else
		__atomic_sub_fetch(&g_refcount, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&g_init_mu);
	sim_dump_calls();
	return r;
}

/* ---- error strings (NVML's wording) -------------------------------------- */

const char *nvmlErrorString(nvmlReturn_t result)
{
	SIM_COUNT(nvmlErrorString);
	switch ((int)result) {
	case NVML_SUCCESS:
		return "Success";
	case NVML_ERROR_UNINITIALIZED:
		return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT:
		return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED:
		return "Not Supported";
	case NVML_ERROR_NO_PERMISSION:
		return "Insufficient Permissions";
	case NVML_ERROR_ALREADY_INITIALIZED:
		return "Already Initialized";
	case NVML_ERROR_NOT_FOUND:
		return "Not Found";
	case NVML_ERROR_INSUFFICIENT_SIZE:
		return "Insufficient Size";
	case NVML_ERROR_INSUFFICIENT_POWER:
		return "Insufficient External Power";
	case NVML_ERROR_DRIVER_NOT_LOADED:
		return "Driver Not Loaded";
	case NVML_ERROR_TIMEOUT:
		return "Timeout";
	case NVML_ERROR_IRQ_ISSUE:
		return "Interrupt Request Issue";
	case NVML_ERROR_LIBRARY_NOT_FOUND:
		return "NVML Shared Library Not Found";
	case NVML_ERROR_FUNCTION_NOT_FOUND:
		return "Function Not Found";
	case NVML_ERROR_CORRUPTED_INFOROM:
		return "Corrupted infoROM";
	case NVML_ERROR_GPU_IS_LOST:
		return "GPU is lost";
	case NVML_ERROR_RESET_REQUIRED:
		return "GPU requires restart";
	case NVML_ERROR_OPERATING_SYSTEM:
		return "The operating system has blocked the request.";
	case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
		return "RM has detected an NVML/RM version mismatch.";
	case NVML_ERROR_IN_USE:
		return "In use by another client";
	case NVML_ERROR_MEMORY:
		return "Insufficient Memory";
	case NVML_ERROR_NO_DATA:
		return "No data";
	case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
		return "The requested vgpu operation is not available on target device, becasue ECC is enabled";
	case NVML_ERROR_INSUFFICIENT_RESOURCES:
		return "Ran out of critical resources, other than memory";
	case NVML_ERROR_FREQ_NOT_SUPPORTED:
		return "The requested frequency is not supported";
	case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
		return "Argument version mismatch";
	case NVML_ERROR_DEPRECATED:
		return "The requested functionality has been deprecated";
	case NVML_ERROR_NOT_READY:
		return "The system is not ready for the request";
	case NVML_ERROR_GPU_NOT_FOUND:
		return "No GPUs were found";
	case NVML_ERROR_INVALID_STATE:
		return "Resource not in correct state to perform requested operation";
	case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED:
		return "Reset not supported for given device/parameters";
	default:
		return "Unknown Error";
	}
}

/* ---- system queries ------------------------------------------------------ */

nvmlReturn_t sim_copy_str(char *dst, unsigned int len, const char *src)
{
	size_t n = strlen(src);

	if (dst == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (len < n + 1)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(dst, src, n + 1);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	SIM_COUNT(nvmlSystemGetDriverVersion);
	if (!sim_initialized())
		return NVML_ERROR_UNINITIALIZED;
	return sim_copy_str(version, length, g_host.driver);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
	SIM_COUNT(nvmlSystemGetNVMLVersion);
	if (!sim_initialized())
		return NVML_ERROR_UNINITIALIZED;
	return sim_copy_str(version, length, g_host.nvml);
}

static nvmlReturn_t cuda_version(int *v)
{
	if (!sim_initialized())
		return NVML_ERROR_UNINITIALIZED;
	if (v == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*v = g_host.cuda;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
	SIM_COUNT(nvmlSystemGetCudaDriverVersion);
	return cuda_version(cudaDriverVersion);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
	SIM_COUNT(nvmlSystemGetCudaDriverVersion_v2);
	return cuda_version(cudaDriverVersion);
}
