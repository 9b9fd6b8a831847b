/* The part of NVML's C API (nvml.h of the CUDA toolkit) that gemmd uses, declared as NVML
 * defines it, so that neither gemmd (nvml.c, which resolves these with dlsym) nor its test
 * stand-in (fake_nvml.c, which implements them) needs the driver's headers to build. */
#ifndef GEMMD_DAEMON_NVML_ABI_H_
#define GEMMD_DAEMON_NVML_ABI_H_

typedef void *nvml_device_t;

typedef struct {
  unsigned int gpu, memory; /* percent of the last sample period */
} nvml_utilization_t;

typedef struct {
  unsigned long long total, free, used; /* bytes */
} nvml_memory_t;

enum { NVML_SUCCESS = 0, NVML_CLOCK_SM = 1, NVML_TEMPERATURE_GPU = 0 };

int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetHandleByPciBusId_v2(const char *pci_bus_id, nvml_device_t *device);
int nvmlDeviceGetPowerUsage(nvml_device_t device, unsigned int *milliwatts);
int nvmlDeviceGetEnforcedPowerLimit(nvml_device_t device, unsigned int *milliwatts);
int nvmlDeviceGetClockInfo(nvml_device_t device, int clock_type, unsigned int *mhz);
int nvmlDeviceGetUtilizationRates(nvml_device_t device, nvml_utilization_t *utilization);
int nvmlDeviceGetMemoryInfo(nvml_device_t device, nvml_memory_t *memory);
int nvmlDeviceGetTemperature(nvml_device_t device, int sensor, unsigned int *celsius);

#endif /* GEMMD_DAEMON_NVML_ABI_H_ */
