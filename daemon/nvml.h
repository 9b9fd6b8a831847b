/* The GPU as the driver reports it (NVML): power and its limit, SM clock, utilisation,
 * memory and temperature, for /metrics (gemmd_gpu_*). The H200's 700 W cap sets the
 * clocks the kernels run at, and operators need to see it.
 *
 * libnvidia-ml.so.1 is opened at run time with dlopen, so gemmd builds and runs without a
 * driver; the GPU is found by its PCI address (the CUDA device ordinal and NVML's index
 * may differ). A thread samples once a second; readers get the last sample. */
#ifndef GEMMD_DAEMON_NVML_H_
#define GEMMD_DAEMON_NVML_H_

#include <stddef.h>
#include <stdint.h>

typedef struct gemmd_nvml_s gemmd_nvml_t;

/* What one sample holds; NaN for what the driver did not give. */
typedef struct {
  double power_watts, power_limit_watts;
  double sm_clock_hz;
  double utilization_ratio; /* the share of the last sample period a kernel ran */
  double memory_used_bytes, memory_total_bytes;
  double temperature_celsius;
} gemmd_gpu_sample_t;

/* Opens `library` (NULL: libnvidia-ml.so.1) for the GPU at pci_bus_id and starts sampling.
 * NULL with why set when the library, its functions or the GPU cannot be had. */
gemmd_nvml_t *gemmd_nvml_open(const char *library, const char *pci_bus_id, char *why, size_t n);

/* The last sample (all NaN before the first, or with n == NULL). Any thread. */
gemmd_gpu_sample_t gemmd_nvml_sample(gemmd_nvml_t *n);

/* Stops sampling and closes the library. NULL is ignored. */
void gemmd_nvml_close(gemmd_nvml_t *n);

#endif /* GEMMD_DAEMON_NVML_H_ */
