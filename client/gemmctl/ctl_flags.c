/* gemmctl flag parsing. */
#include "client/gemmctl/ctl_flags.h"

#include <stdio.h>
#include <string.h>

static const ctl_flag_t *find_flag(const ctl_args_t *a, const char *name, size_t len) {
  for (size_t i = 0; i < a->n_flags; i++) {
    if (strlen(a->flags[i].name) == len && strncmp(a->flags[i].name, name, len) == 0) {
      return &a->flags[i];
    }
  }
  return NULL;
}

static int add_positional(ctl_args_t *a, char *arg) {
  if (a->n_positional >= a->max_positional) {
    snprintf(a->err, sizeof a->err, "unexpected argument '%s'", arg);
    return CTL_ARGS_ERROR;
  }
  a->positional[a->n_positional++] = arg;
  return CTL_ARGS_OK;
}

/* One "--name[=value]" at argv[*i]; may consume argv[*i + 1]. */
static int parse_flag(ctl_args_t *a, int argc, char **argv, int *i) {
  const char *name = argv[*i] + 2;
  const char *eq = strchr(name, '=');
  const size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
  if (len == 4 && strncmp(name, "help", 4) == 0) return CTL_ARGS_HELP;
  const ctl_flag_t *f = find_flag(a, name, len);
  if (f == NULL) {
    snprintf(a->err, sizeof a->err, "unknown flag '--%.*s'", (int)len, name);
    return CTL_ARGS_ERROR;
  }
  if (!f->takes_value) {
    if (eq != NULL) {
      snprintf(a->err, sizeof a->err, "--%s takes no value", f->name);
      return CTL_ARGS_ERROR;
    }
    *f->value = "true";
    return CTL_ARGS_OK;
  }
  if (eq != NULL) {
    *f->value = eq + 1;
  } else if (*i + 1 < argc) {
    *f->value = argv[++*i];
  } else {
    snprintf(a->err, sizeof a->err, "--%s needs a value", f->name);
    return CTL_ARGS_ERROR;
  }
  return CTL_ARGS_OK;
}

int ctl_parse_args(ctl_args_t *a, int argc, char **argv) {
  int i = 0, rc = CTL_ARGS_OK, flags_done = 0;
  a->n_positional = 0;
  a->err[0] = '\0';
  for (; i < argc && rc == CTL_ARGS_OK; i++) {
    char *arg = argv[i];
    const int is_flag = !flags_done && arg[0] == '-' && arg[1] != '\0';
    if (!is_flag && a->stop_at_positional) break;
    if (!is_flag) {
      rc = add_positional(a, arg);
    } else if (strcmp(arg, "--") == 0) {
      flags_done = 1;
    } else if (strcmp(arg, "-h") == 0) {
      rc = CTL_ARGS_HELP;
    } else if (arg[1] != '-') {
      snprintf(a->err, sizeof a->err, "unknown flag '%s' (flags start with --)", arg);
      rc = CTL_ARGS_ERROR;
    } else {
      rc = parse_flag(a, argc, argv, &i);
    }
  }
  a->next = i;
  return rc;
}
