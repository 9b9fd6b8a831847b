/* gemmctl: what its command files share. Every command returns the process exit code:
 * 0 success, 1 failure (one line on stderr), 2 bad usage. */
#ifndef GEMMD_CLIENT_GEMMCTL_GEMMCTL_H_
#define GEMMD_CLIENT_GEMMCTL_GEMMCTL_H_

#include <stdint.h>

#include "client/gemmctl/ctl_flags.h"
#include "client/lib/gemmclient.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { CTL_EXIT_OK = 0, CTL_EXIT_FAIL = 1, CTL_EXIT_USAGE = 2 };

/* The global flags. */
typedef struct ctl_global_s {
  const char *addr;
  int64_t timeout_ms;
  const char *tls_ca;
  const char *tls_cert, *tls_key; /* mutual TLS: this client's certificate and key */
  const char *token; /* bearer token from --token-file, or NULL */
} ctl_global_t;

/* A command: argv[0] is its name. */
typedef int (*ctl_command_fn)(const ctl_global_t *g, int argc, char **argv);

int ctl_cmd_info(const ctl_global_t *g, int argc, char **argv);
int ctl_cmd_stats(const ctl_global_t *g, int argc, char **argv);
int ctl_cmd_weights(const ctl_global_t *g, int argc, char **argv);
int ctl_cmd_gemm(const ctl_global_t *g, int argc, char **argv);
int ctl_cmd_bench(const ctl_global_t *g, int argc, char **argv);
int ctl_cmd_ping(const ctl_global_t *g, int argc, char **argv);

/* Prints "gemmctl: CODE: message" and returns CTL_EXIT_FAIL. */
int ctl_fail(const gemmd_status_t *st);
/* The same for a local error ("gemmctl: INVALID_ARGUMENT: ...") with exit code `exit_code`. */
int ctl_failf(int exit_code, int status_code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parses a command's flags (argv[0] is the command name): prints `usage` on --help
 * (then *exit_code = 0) or the error (*exit_code = 2); returns 0 to go on. */
int ctl_parse_command(ctl_args_t *a, int argc, char **argv, const char *usage, int *exit_code);

/* Opens a client for g; prints the error and returns NULL on failure. */
gemmd_client_t *ctl_open(const ctl_global_t *g);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_GEMMCTL_GEMMCTL_H_ */
