/* gemmctl: the operator's and benchmarker's tool for gemmd (docs/api.md §5). */
#include "client/gemmctl/gemmctl.h"

#include <grpc/support/log.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/gemmctl/ctl_parse.h"

static const char kUsage[] =
    "usage: gemmctl [--addr HOST:PORT[,HOST:PORT...]|unix:///PATH] [--timeout-ms N]\n"
    "               [--tls-ca FILE [--tls-cert FILE --tls-key FILE]] [--token-file FILE]\n"
    "               COMMAND ...\n"
    "\n"
    "Talks to gemmd over gRPC (HOST:PORT) or shared memory (unix:///PATH).\n"
    "\n"
    "global flags:\n"
    "  --addr ADDR      server address (default $GEMMD_ADDR, else localhost:50051)\n"
    "  --timeout-ms N   deadline of each call in ms (default 60000; 0 = none)\n"
    "  --tls-ca FILE    PEM file of CA certificates: use TLS (default plaintext)\n"
    "  --tls-cert FILE, --tls-key FILE  this client's certificate chain and key (PEM), for\n"
    "                   a gemmd that asks for them (--tls-client-ca): mutual TLS\n"
    "  --token-file FILE  bearer token for gemmd's --grpc-token-file: the file's first line\n"
    "                   that is not blank or a # comment (default $GEMMD_TOKEN_FILE)\n"
    "\n"
    "commands:\n"
    "  info             health and what the server runs on\n"
    "  stats [--json]   the server's counters and latencies\n"
    "  weights add|ls|rm  manage registered weights\n"
    "  gemm             one GEMM on random inputs (optionally checked)\n"
    "  bench            throughput and latency under concurrent load\n"
    "  ping [--count N] health-check round trips: the transport's own latency\n"
    "\n"
    "'gemmctl COMMAND --help' describes a command. Exit status: 0 ok, 1 failed, 2 bad usage.\n";

typedef struct {
  const char *name;
  ctl_command_fn fn;
} command_t;

static const command_t kCommands[] = {
    {"info", ctl_cmd_info}, {"stats", ctl_cmd_stats}, {"weights", ctl_cmd_weights},
    {"gemm", ctl_cmd_gemm}, {"bench", ctl_cmd_bench}, {"ping", ctl_cmd_ping},
};

int ctl_fail(const gemmd_status_t *st) {
  fprintf(stderr, "gemmctl: %s: %s\n", gemmd_status_name(st->code), st->message);
  return CTL_EXIT_FAIL;
}

int ctl_failf(int exit_code, int status_code, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "gemmctl: %s: ", gemmd_status_name(status_code));
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return exit_code;
}

int ctl_parse_command(ctl_args_t *a, int argc, char **argv, const char *usage, int *exit_code) {
  const int rc = ctl_parse_args(a, argc - 1, argv + 1);
  if (rc == CTL_ARGS_HELP) {
    fputs(usage, stdout);
    *exit_code = CTL_EXIT_OK;
    return -1;
  }
  if (rc == CTL_ARGS_ERROR) {
    *exit_code = ctl_failf(CTL_EXIT_USAGE, GEMMD_STATUS_INVALID_ARGUMENT, "%s: %s (see --help)",
                           argv[0], a->err);
    return -1;
  }
  return 0;
}

gemmd_client_t *ctl_open(const ctl_global_t *g) {
  const gemmd_client_options_t o = {g->timeout_ms, 0, g->tls_ca, g->token, g->tls_cert, g->tls_key};
  gemmd_client_t *c = NULL;
  gemmd_status_t st;
  if (gemmd_client_open(g->addr, &o, &c, &st) != 0) {
    ctl_fail(&st);
    return NULL;
  }
  return c;
}

/* The first line of path that is not blank or a '#' comment, trimmed, into buf; 0 or -1. */
static int read_token(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  int rc = -1;
  while (fgets(buf, (int)n, f) != NULL) {
    char *s = buf;
    while (*s == ' ' || *s == '\t') s++;
    size_t len = strlen(s);
    while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == ' ' || s[len - 1] == '\t')) s[--len] = '\0';
    if (len == 0 || s[0] == '#') continue;
    memmove(buf, s, len + 1);
    rc = 0;
    break;
  }
  fclose(f);
  return rc;
}

/* Global flags; *next is the index of the command. */
static int parse_global(int argc, char **argv, ctl_global_t *g, int *next) {
  const char *addr = getenv("GEMMD_ADDR"), *timeout = NULL, *tls = NULL, *cert = NULL, *key = NULL;
  const char *token_file = getenv("GEMMD_TOKEN_FILE");
  const ctl_flag_t flags[] = {{"addr", 1, &addr}, {"timeout-ms", 1, &timeout}, {"tls-ca", 1, &tls},
                              {"token-file", 1, &token_file}, {"tls-cert", 1, &cert}, {"tls-key", 1, &key}};
  ctl_args_t a = {.flags = flags, .n_flags = 6, .stop_at_positional = 1};
  const int rc = ctl_parse_args(&a, argc - 1, argv + 1);
  if (rc == CTL_ARGS_HELP) {
    fputs(kUsage, stdout);
    return CTL_EXIT_OK;
  }
  if (rc == CTL_ARGS_ERROR) {
    return ctl_failf(CTL_EXIT_USAGE, GEMMD_STATUS_INVALID_ARGUMENT, "%s (see --help)", a.err);
  }
  uint64_t ms = 60000;
  if (timeout != NULL && (ctl_parse_u64(timeout, &ms) != 0 || ms > INT64_MAX)) {
    return ctl_failf(CTL_EXIT_USAGE, GEMMD_STATUS_INVALID_ARGUMENT,
                     "--timeout-ms: '%s' is not a number of milliseconds", timeout);
  }
  g->addr = addr != NULL && addr[0] != '\0' ? addr : "localhost:50051";
  g->timeout_ms = (int64_t)ms;
  g->tls_ca = tls;
  g->tls_cert = cert;
  g->tls_key = key;
  g->token = NULL;
  if (token_file != NULL && token_file[0] != '\0') {
    static char token[4096];
    if (read_token(token_file, token, sizeof token) != 0) {
      return ctl_failf(CTL_EXIT_USAGE, GEMMD_STATUS_INVALID_ARGUMENT,
                       "--token-file: no token in '%s' (unreadable, or only blank and # lines)", token_file);
    }
    g->token = token;
  }
  *next = a.next + 1;
  return -1;
}

/* gRPC's own log lines would break "one line on stderr"; GRPC_VERBOSITY brings them back. */
static void quiet_grpc_log(gpr_log_func_args *args) { (void)args; }

int main(int argc, char **argv) {
  ctl_global_t g;
  int next = 0;
  if (getenv("GRPC_VERBOSITY") == NULL) gpr_set_log_function(quiet_grpc_log);
  const int rc = parse_global(argc, argv, &g, &next);
  if (rc >= 0) return rc;
  if (next >= argc) {
    return ctl_failf(CTL_EXIT_USAGE, GEMMD_STATUS_INVALID_ARGUMENT,
                     "no command: info, stats, weights, gemm, bench or ping (see --help)");
  }
  for (size_t i = 0; i < sizeof kCommands / sizeof kCommands[0]; i++) {
    if (strcmp(argv[next], kCommands[i].name) == 0) {
      return kCommands[i].fn(&g, argc - next, argv + next);
    }
  }
  if (strcmp(argv[next], "help") == 0) {
    fputs(kUsage, stdout);
    return CTL_EXIT_OK;
  }
  return ctl_failf(CTL_EXIT_USAGE, GEMMD_STATUS_INVALID_ARGUMENT,
                   "unknown command '%s' (see --help)", argv[next]);
}
