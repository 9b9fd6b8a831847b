/* A stand-in for libnvidia-ml.so.1 (tests only, nvml_test): one GPU at PCI address
 * 0000:3B:00.0 with fixed readings: 512.5 W of a 700 W limit, SM clock 1980 MHz, 87%
 * busy, 30 of 141 GiB used, and no temperature (NOT_SUPPORTED). */
#include <string.h>

#include "daemon/nvml_abi.h"

static int the_gpu;
static int initialized;

int nvmlInit_v2(void) {
  initialized = 1;
  return 0;
}
int nvmlShutdown(void) {
  initialized = 0;
  return 0;
}
int nvmlDeviceGetHandleByPciBusId_v2(const char *pci, nvml_device_t *dev) {
  if (!initialized) return 1; /* NVML_ERROR_UNINITIALIZED */
  if (strcmp(pci, "0000:3B:00.0") != 0) return 6; /* NVML_ERROR_NOT_FOUND */
  *dev = &the_gpu;
  return 0;
}
int nvmlDeviceGetPowerUsage(nvml_device_t dev, unsigned int *mw) {
  *mw = 512500;
  return dev == &the_gpu ? 0 : 2;
}
int nvmlDeviceGetEnforcedPowerLimit(nvml_device_t dev, unsigned int *mw) {
  *mw = 700000;
  return dev == &the_gpu ? 0 : 2;
}
int nvmlDeviceGetClockInfo(nvml_device_t dev, int type, unsigned int *mhz) {
  *mhz = 1980;
  return dev == &the_gpu && type == 1 ? 0 : 2;
}
int nvmlDeviceGetUtilizationRates(nvml_device_t dev, nvml_utilization_t *u) {
  u->gpu = 87;
  u->memory = 40;
  return dev == &the_gpu ? 0 : 2;
}
int nvmlDeviceGetMemoryInfo(nvml_device_t dev, nvml_memory_t *m) {
  m->total = 141ull << 30;
  m->used = 30ull << 30;
  m->free = m->total - m->used;
  return dev == &the_gpu ? 0 : 2;
}
int nvmlDeviceGetTemperature(nvml_device_t dev, int sensor, unsigned int *c) {
  (void)sensor;
  (void)dev;
  return 3; /* NVML_ERROR_NOT_SUPPORTED: a reading the driver does not give */
}
