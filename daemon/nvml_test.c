/* NVML through dlopen, against a stand-in library with fixed readings (fake_nvml.c): the
 * GPU is found by PCI address, readings are converted to SI units, one the driver does not
 * give stays NaN; a missing library, a GPU NVML does not know and no GPU are refused with
 * a reason. */
#include "daemon/nvml.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "daemon/test_check.h"

int main(void) {
  char why[256];
  const char *fake = "daemon/fake_nvml.so";
  gemmd_nvml_t *n = gemmd_nvml_open(fake, "0000:3B:00.0", why, sizeof why);
  CHECK(n != NULL);
  if (n == NULL) fprintf(stderr, "open: %s\n", why);
  const gemmd_gpu_sample_t s = gemmd_nvml_sample(n);
  CHECK(s.power_watts == 512.5 && s.power_limit_watts == 700.0);
  CHECK(s.sm_clock_hz == 1980e6 && s.utilization_ratio == 0.87);
  CHECK(s.memory_used_bytes == (double)(30ull << 30) && s.memory_total_bytes == (double)(141ull << 30));
  CHECK(isnan(s.temperature_celsius));
  gemmd_nvml_close(n);

  CHECK(gemmd_nvml_open(fake, "0000:AF:00.0", why, sizeof why) == NULL);
  CHECK(strstr(why, "no GPU at 0000:AF:00.0") != NULL);
  CHECK(gemmd_nvml_open("/nonexistent/libnvidia-ml.so.1", "0000:3B:00.0", why, sizeof why) == NULL);
  CHECK(strstr(why, "cannot load") != NULL);
  CHECK(gemmd_nvml_open(fake, "", why, sizeof why) == NULL);
  CHECK(isnan(gemmd_nvml_sample(NULL).power_watts));
  if (check_failures == 0) printf("nvml_test: ok\n");
  return check_failures != 0;
}
