/* gemmd's configuration (config.h): the input up to its first NUL is a config file's text,
 * read as --config reads it; the NUL-separated strings after it are the command line
 * (argv[1..]) and, those that start with GEMMD_, the environment. --config and
 * GEMMD_CONFIG are left out (they name a file to open). Every string field must come out
 * NUL-terminated inside its buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/config.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/fuzz_util.h"
#include "kernels/errors.h"

enum { MAX_ARGS = 64 };

static void check_config(const gemmd_config_t *cfg) {
  fuzz_check(cfg->n_preload >= 0 && cfg->n_preload <= GEMMD_CONFIG_MAX_PRELOAD);
  const char *strings[] = {cfg->grpc_listen, cfg->metrics_listen, cfg->grpc_poller, cfg->tls_cert,
                           cfg->tls_key, cfg->tls_client_ca, cfg->shm_socket, cfg->shm_allow_uids,
                           cfg->shm_allow_gids, cfg->shm_pin_arenas, cfg->backend, cfg->gemm_kernel,
                           cfg->cuda_graphs, cfg->weight_dir, cfg->log_level, cfg->config_file};
  const size_t sizes[] = {sizeof cfg->grpc_listen, sizeof cfg->metrics_listen, sizeof cfg->grpc_poller,
                          sizeof cfg->tls_cert, sizeof cfg->tls_key, sizeof cfg->tls_client_ca,
                          sizeof cfg->shm_socket, sizeof cfg->shm_allow_uids, sizeof cfg->shm_allow_gids,
                          sizeof cfg->shm_pin_arenas, sizeof cfg->backend, sizeof cfg->gemm_kernel,
                          sizeof cfg->cuda_graphs, sizeof cfg->weight_dir, sizeof cfg->log_level,
                          sizeof cfg->config_file};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) fuzz_check(memchr(strings[i], '\0', sizes[i]) != NULL);
  for (int i = 0; i < cfg->n_preload; i++) fuzz_check(memchr(cfg->preload[i], '\0', sizeof cfg->preload[i]) != NULL);
  fuzz_check(cfg->max_m >= 1 && cfg->max_n >= 1 && cfg->max_k >= 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A NUL-terminated copy: the text, then the strings. */
  char *copy = malloc(size + 1);
  gemmd_config_t *cfg = malloc(sizeof *cfg);
  fuzz_check(copy != NULL && cfg != NULL);
  memcpy(copy, data, size);
  copy[size] = '\0';
  const size_t text_len = strlen(copy);
  char err[1024];

  gemmd_config_defaults(cfg);
  if (text_len > 0) {
    FILE *f = fmemopen(copy, text_len, "r");
    fuzz_check(f != NULL);
    if (gemmd_config_read(cfg, f, "fuzz.conf", err, sizeof err) != GEMMD_OK) fuzz_check_message(err, sizeof err);
    fclose(f);
  }
  check_config(cfg);

  char *argv[MAX_ARGS + 2], *envp[MAX_ARGS + 1];
  int argc = 0, envc = 0;
  argv[argc++] = (char *)"gemmd";
  for (size_t at = text_len + 1; at < size + 1 && argc <= MAX_ARGS && envc < MAX_ARGS;) {
    char *s = copy + at;
    at += strlen(s) + 1;
    if (strncmp(s, "GEMMD_", 6) == 0) {
      if (strncmp(s, "GEMMD_CONFIG=", 13) != 0) envp[envc++] = s;
    } else if (strncmp(s, "--config", 8) != 0) {
      argv[argc++] = s;
    }
  }
  argv[argc] = NULL;
  envp[envc] = NULL;
  const int rc = gemmd_config_load(cfg, argc, argv, envp, err, sizeof err);
  fuzz_check(rc == GEMMD_OK || rc == GEMMD_EINVAL || rc == GEMMD_CONFIG_HELP || rc == GEMMD_CONFIG_VERSION);
  if (rc == GEMMD_EINVAL) fuzz_check_message(err, sizeof err);
  check_config(cfg);
  uint64_t v;
  if (argc > 1) (void)gemmd_config_parse_size(argv[1], &v);

  free(cfg);
  free(copy);
  return 0;
}
