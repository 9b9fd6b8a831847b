/* gemmctl: command-line flags ("--name value", "--name=value", switches, "--", -h/--help)
 * and positional arguments. */
#ifndef GEMMD_CLIENT_GEMMCTL_CTL_FLAGS_H_
#define GEMMD_CLIENT_GEMMCTL_CTL_FLAGS_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ctl_flag_s {
  const char *name;   /* without the leading "--" */
  int takes_value;    /* 0: a switch, whose value is "true" when given */
  const char **value; /* the value (the last one given); left alone when absent */
} ctl_flag_t;

typedef struct ctl_args_s {
  const ctl_flag_t *flags;
  size_t n_flags;
  int stop_at_positional; /* stop at the first positional (global flags before a command) */
  char **positional;      /* room for max_positional */
  size_t max_positional;
  /* results */
  size_t n_positional;
  int next; /* index of the first argument not consumed */
  char err[256];
} ctl_args_t;

enum { CTL_ARGS_OK = 0, CTL_ARGS_HELP = 1, CTL_ARGS_ERROR = -1 };

/* Parses argv[0..argc). CTL_ARGS_HELP when -h or --help is seen; CTL_ARGS_ERROR with
 * a->err for an unknown flag, a missing value, a value given to a switch, or too many
 * positionals. */
int ctl_parse_args(ctl_args_t *a, int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_GEMMCTL_CTL_FLAGS_H_ */
