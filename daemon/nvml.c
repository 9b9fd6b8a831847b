/* NVML by dlopen. See nvml.h; the entry points are nvml_abi.h's, resolved with dlsym. */
#include "daemon/nvml.h"

#include "daemon/nvml_abi.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { SAMPLE_PERIOD_MS = 1000 };

struct gemmd_nvml_s {
  void *lib;
  nvml_device_t dev;
  int (*shutdown)(void);
  int (*power)(nvml_device_t, unsigned int *);
  int (*power_limit)(nvml_device_t, unsigned int *);
  int (*clock)(nvml_device_t, int, unsigned int *);
  int (*utilization)(nvml_device_t, nvml_utilization_t *);
  int (*memory)(nvml_device_t, nvml_memory_t *);
  int (*temperature)(nvml_device_t, int, unsigned int *);
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop;
  gemmd_gpu_sample_t last;
};

static gemmd_gpu_sample_t empty_sample(void) {
  return (gemmd_gpu_sample_t){NAN, NAN, NAN, NAN, NAN, NAN, NAN};
}

static gemmd_gpu_sample_t take_sample(gemmd_nvml_t *n) {
  gemmd_gpu_sample_t s = empty_sample();
  unsigned int v;
  nvml_utilization_t u;
  nvml_memory_t m;
  if (n->power(n->dev, &v) == NVML_SUCCESS) s.power_watts = v / 1000.0;
  if (n->power_limit(n->dev, &v) == NVML_SUCCESS) s.power_limit_watts = v / 1000.0;
  if (n->clock(n->dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS) s.sm_clock_hz = v * 1e6;
  if (n->utilization(n->dev, &u) == NVML_SUCCESS) s.utilization_ratio = u.gpu / 100.0;
  if (n->memory(n->dev, &m) == NVML_SUCCESS) {
    s.memory_used_bytes = (double)m.used;
    s.memory_total_bytes = (double)m.total;
  }
  if (n->temperature(n->dev, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS) s.temperature_celsius = v;
  return s;
}

static void *sampler(void *arg) {
  gemmd_nvml_t *n = arg;
  pthread_mutex_lock(&n->mu);
  while (!n->stop) {
    pthread_mutex_unlock(&n->mu);
    const gemmd_gpu_sample_t s = take_sample(n); /* NVML calls may take a while: unlocked */
    pthread_mutex_lock(&n->mu);
    n->last = s;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += SAMPLE_PERIOD_MS / 1000;
    while (!n->stop && pthread_cond_timedwait(&n->cv, &n->mu, &until) == 0) {
    }
  }
  pthread_mutex_unlock(&n->mu);
  return NULL;
}

/* dlsym into *fn; 0, or -1 with why set. */
static int bind_fn(gemmd_nvml_t *n, void *fn, const char *name, char *why, size_t len) {
  void *p = dlsym(n->lib, name);
  if (p == NULL) {
    snprintf(why, len, "%s has no %s", "libnvidia-ml", name);
    return -1;
  }
  memcpy(fn, &p, sizeof p);
  return 0;
}

gemmd_nvml_t *gemmd_nvml_open(const char *library, const char *pci_bus_id, char *why, size_t len) {
  if (pci_bus_id == NULL || pci_bus_id[0] == '\0') {
    snprintf(why, len, "no GPU");
    return NULL;
  }
  gemmd_nvml_t *n = calloc(1, sizeof *n);
  if (n == NULL) {
    snprintf(why, len, "out of memory");
    return NULL;
  }
  const char *path = library != NULL ? library : "libnvidia-ml.so.1";
  n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (n->lib == NULL) {
    snprintf(why, len, "cannot load %s: %s", path, dlerror());
    free(n);
    return NULL;
  }
  int (*init)(void) = NULL;
  int (*by_pci)(const char *, nvml_device_t *) = NULL;
  int bad = bind_fn(n, &init, "nvmlInit_v2", why, len) || bind_fn(n, &n->shutdown, "nvmlShutdown", why, len) ||
            bind_fn(n, &by_pci, "nvmlDeviceGetHandleByPciBusId_v2", why, len) ||
            bind_fn(n, &n->power, "nvmlDeviceGetPowerUsage", why, len) ||
            bind_fn(n, &n->power_limit, "nvmlDeviceGetEnforcedPowerLimit", why, len) ||
            bind_fn(n, &n->clock, "nvmlDeviceGetClockInfo", why, len) ||
            bind_fn(n, &n->utilization, "nvmlDeviceGetUtilizationRates", why, len) ||
            bind_fn(n, &n->memory, "nvmlDeviceGetMemoryInfo", why, len) ||
            bind_fn(n, &n->temperature, "nvmlDeviceGetTemperature", why, len);
  int rc = -1;
  if (!bad && (rc = init()) != NVML_SUCCESS) snprintf(why, len, "nvmlInit_v2 failed (%d)", rc);
  if (!bad && rc == NVML_SUCCESS && (rc = by_pci(pci_bus_id, &n->dev)) != NVML_SUCCESS) {
    snprintf(why, len, "NVML has no GPU at %s (%d)", pci_bus_id, rc);
    n->shutdown();
  }
  if (bad || rc != NVML_SUCCESS) {
    dlclose(n->lib);
    free(n);
    return NULL;
  }
  n->last = take_sample(n);
  pthread_mutex_init(&n->mu, NULL);
  pthread_cond_init(&n->cv, NULL);
  if (pthread_create(&n->thread, NULL, sampler, n) != 0) {
    snprintf(why, len, "cannot start the sampling thread");
    n->shutdown();
    dlclose(n->lib);
    free(n);
    return NULL;
  }
  pthread_setname_np(n->thread, "gemmd-nvml");
  return n;
}

gemmd_gpu_sample_t gemmd_nvml_sample(gemmd_nvml_t *n) {
  if (n == NULL) return empty_sample();
  pthread_mutex_lock(&n->mu);
  const gemmd_gpu_sample_t s = n->last;
  pthread_mutex_unlock(&n->mu);
  return s;
}

void gemmd_nvml_close(gemmd_nvml_t *n) {
  if (n == NULL) return;
  pthread_mutex_lock(&n->mu);
  n->stop = 1;
  pthread_cond_signal(&n->cv);
  pthread_mutex_unlock(&n->mu);
  pthread_join(n->thread, NULL);
  n->shutdown();
  dlclose(n->lib);
  pthread_mutex_destroy(&n->mu);
  pthread_cond_destroy(&n->cv);
  free(n);
}
