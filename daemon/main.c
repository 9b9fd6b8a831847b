/* gemmd: an FP8 GEMM service. Parses the configuration, then runs the server until it
 * has drained after SIGTERM/SIGINT. The only place that exits. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/lifecycle.h"
#include "daemon/log.h"
#include "daemon/version.h"

extern char **environ;

int main(int argc, char **argv) {
  /* A peer that resets mid-response must not kill gemmd: writes report EPIPE instead. */
  signal(SIGPIPE, SIG_IGN);
  static gemmd_config_t cfg;
  char err[1024];
  const int rc = gemmd_config_load(&cfg, argc, argv, environ, err, sizeof err);
  if (rc == GEMMD_CONFIG_HELP) {
    gemmd_config_print_help(stdout);
    return 0;
  }
  if (rc == GEMMD_CONFIG_VERSION) {
    printf("gemmd %s\n", GEMMD_VERSION);
    return 0;
  }
  if (rc != 0) {
    fprintf(stderr, "gemmd: %s\n", err);
    return 2;
  }
  gemmd_log_level_t level;
  gemmd_log_parse_level(cfg.log_level, &level);
  gemmd_log_set_level(level);
  gemmd_log(GEMMD_LOG_INFO, "starting", "version=%s pid=%d", GEMMD_VERSION, (int)getpid());
  gemmd_config_log(&cfg);
  return gemmd_run(&cfg);
}
