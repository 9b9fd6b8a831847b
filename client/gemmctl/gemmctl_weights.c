/* gemmctl weights add | ls | rm. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/gemmctl/ctl_parse.h"
#include "client/gemmctl/gemmctl.h"
#include "client/lib/json_writer.h"
#include "daemon/safetensors.h"

static const char kUsage[] =
    "usage: gemmctl [global flags] weights add NAME --file F --shape NxK --dtype DTYPE\n"
    "                                       [--layout LAYOUT --scales FILE]\n"
    "       gemmctl [global flags] weights add NAME --safetensors F [--tensor T]\n"
    "       gemmctl [global flags] weights ls [--json]\n"
    "       gemmctl [global flags] weights rm NAME | --id ID\n"
    "\n"
    "add: registers the N×K weight B of D = A·Bᵀ from F (N·K elements of DTYPE, row-major,\n"
    "     little-endian). DTYPE: e4m3 | e5m2 | bf16 | fp16 | fp32 (bf16 and fp32 are\n"
    "     quantized by the server to e4m3 with 128x128 scales). LAYOUT: none (default) |\n"
    "     tensor | row | 128x128; its scales are float32 values in FILE, row-major.\n"
    "     With --safetensors: the 2-D FP8 tensor T (default NAME) of an FP8 checkpoint file,\n"
    "     with its scales from the tensor T_scale_inv or T_scale (F32; [] tensor, [N] row,\n"
    "     [ceil(N/128), ceil(K/128)] 128x128), as gemmd's --preload reads them.\n"
    "ls:  lists the registered weights (--json: an array of WeightInfo objects).\n"
    "rm:  unregisters a weight by name or by id; waits for requests using it.\n";

static void print_info_line(const gemmd_weight_info_t *w) {
  char size[32];
  printf("%-6" PRIu64 " %-32s %7u %7u  %-5s %-8s %-10s %s\n", w->weight_id, w->name, w->n, w->k,
         ctl_dtype_short(w->dtype), ctl_layout_short(w->scale_layout),
         ctl_format_bytes(w->bytes, size, sizeof size), w->source);
}

static int add_usage_error(const char *what) {
  return ctl_failf(CTL_EXIT_USAGE, GEMMD_STATUS_INVALID_ARGUMENT, "weights add: %s", what);
}

/* gemmd_safetensors_load's visitor: keeps the tensor named `want`, frees the others. */
typedef struct {
  const char *want;
  gemmd_weight_t *found;
} pick_t;

static void pick_tensor(void *ctx, gemmd_weight_t *w) {
  pick_t *p = ctx;
  if (p->found == NULL && strcmp(w->name, p->want) == 0) {
    p->found = w;
  } else {
    gemmd_weight_free(w);
  }
}

/* weights add NAME --safetensors FILE [--tensor T]. */
static int add_from_safetensors(const ctl_global_t *g, const char *name, const char *path,
                                const char *tensor) {
  pick_t p = {tensor != NULL ? tensor : name, NULL};
  char err[512];
  int skipped = 0;
  if (gemmd_safetensors_load(path, pick_tensor, &p, &skipped, err, sizeof err) < 0) {
    return ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_INVALID_ARGUMENT, "weights add: %s", err);
  }
  if (p.found == NULL) {
    return ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_NOT_FOUND,
                     "weights add: %s has no 2-D FP8 tensor named '%s'", path, p.want);
  }
  const gemmd_operand_t op = gemmd_weight_operand(p.found);
  gemmd_client_t *c = ctl_open(g);
  if (c == NULL) {
    gemmd_weight_free(p.found);
    return CTL_EXIT_FAIL;
  }
  gemmd_weight_info_t info;
  gemmd_status_t st;
  const int rc = gemmd_client_register_weight(c, name, &op, &info, &st);
  gemmd_client_close(c);
  gemmd_weight_free(p.found);
  if (rc != 0) return ctl_fail(&st);
  print_info_line(&info);
  return CTL_EXIT_OK;
}

static int cmd_add(const ctl_global_t *g, int argc, char **argv) {
  const char *file = NULL, *shape = NULL, *dtype_s = NULL, *layout_s = "none", *scales = NULL;
  const char *safetensors = NULL, *tensor = NULL;
  const ctl_flag_t flags[] = {{"file", 1, &file},
                              {"shape", 1, &shape},
                              {"dtype", 1, &dtype_s},
                              {"layout", 1, &layout_s},
                              {"scales", 1, &scales},
                              {"safetensors", 1, &safetensors},
                              {"tensor", 1, &tensor}};
  char *pos[1];
  ctl_args_t a = {.flags = flags, .n_flags = 7, .positional = pos, .max_positional = 1};
  int exit_code;
  if (ctl_parse_command(&a, argc, argv, kUsage, &exit_code) != 0) return exit_code;
  uint32_t nk[2];
  gemmd_dtype_t dtype;
  gemmd_scale_layout_t layout;
  if (a.n_positional != 1) return add_usage_error("name the weight");
  if (safetensors != NULL) {
    if (file != NULL || shape != NULL || dtype_s != NULL || scales != NULL) {
      return add_usage_error("--safetensors takes the shape, dtype and scales from the file: "
                             "no --file, --shape, --dtype or --scales with it");
    }
    return add_from_safetensors(g, pos[0], safetensors, tensor);
  }
  if (tensor != NULL) return add_usage_error("--tensor goes with --safetensors");
  if (file == NULL) return add_usage_error("--file is required");
  if (shape == NULL || ctl_parse_shape(shape, nk, 2) != 0) {
    return add_usage_error("--shape must be NxK, e.g. 4096x7168");
  }
  if (dtype_s == NULL || ctl_parse_dtype(dtype_s, &dtype) != 0) {
    return add_usage_error("--dtype must be e4m3, e5m2, bf16, fp16 or fp32");
  }
  if (ctl_parse_layout(layout_s, &layout) != 0) {
    return add_usage_error("--layout must be none, tensor, row or 128x128");
  }
  if ((layout != GEMMD_SCALE_NONE) != (scales != NULL)) {
    return add_usage_error("--scales FILE goes with a --layout other than none");
  }
  gemmd_client_t *c = ctl_open(g);
  if (c == NULL) return CTL_EXIT_FAIL;
  gemmd_weight_info_t info;
  gemmd_status_t st;
  const int rc = gemmd_client_register_weight_file(c, pos[0], nk[0], nk[1], dtype, file, layout,
                                                   scales, &info, &st);
  gemmd_client_close(c);
  if (rc != 0) return ctl_fail(&st);
  print_info_line(&info);
  return CTL_EXIT_OK;
}

static int print_json(const gemmd_weight_info_t *w, size_t n) {
  gemmd_json_writer_t j;
  char *out;
  gemmd_json_init(&j);
  gemmd_json_begin_array(&j);
  for (size_t i = 0; i < n; i++) {
    gemmd_json_begin_object(&j);
    gemmd_json_key(&j, "weight_id");
    gemmd_json_u64(&j, w[i].weight_id);
    gemmd_json_key(&j, "name");
    gemmd_json_string(&j, w[i].name);
    gemmd_json_key(&j, "n");
    gemmd_json_u64(&j, w[i].n);
    gemmd_json_key(&j, "k");
    gemmd_json_u64(&j, w[i].k);
    gemmd_json_key(&j, "dtype");
    gemmd_json_string(&j, gemmd_dtype_name(w[i].dtype));
    gemmd_json_key(&j, "scale_layout");
    gemmd_json_string(&j, gemmd_scale_layout_name(w[i].scale_layout));
    gemmd_json_key(&j, "bytes");
    gemmd_json_u64(&j, w[i].bytes);
    gemmd_json_key(&j, "source");
    gemmd_json_string(&j, w[i].source);
    gemmd_json_end_object(&j);
  }
  gemmd_json_end_array(&j);
  if (gemmd_json_finish(&j, &out) != 0) {
    return ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  }
  printf("%s\n", out);
  free(out);
  return CTL_EXIT_OK;
}

static int cmd_ls(const ctl_global_t *g, int argc, char **argv) {
  const char *json = NULL;
  const ctl_flag_t flags[] = {{"json", 0, &json}};
  ctl_args_t a = {.flags = flags, .n_flags = 1};
  int exit_code;
  if (ctl_parse_command(&a, argc, argv, kUsage, &exit_code) != 0) return exit_code;
  gemmd_client_t *c = ctl_open(g);
  if (c == NULL) return CTL_EXIT_FAIL;
  gemmd_weight_info_t *w = NULL;
  size_t n = 0;
  gemmd_status_t st;
  const int rc = gemmd_client_list_weights(c, &w, &n, &st);
  gemmd_client_close(c);
  if (rc != 0) return ctl_fail(&st);
  if (json != NULL) {
    exit_code = print_json(w, n);
  } else {
    printf("%-6s %-32s %7s %7s  %-5s %-8s %-10s %s\n", "id", "name", "n", "k", "dtype", "layout", "size",
           "source");
    for (size_t i = 0; i < n; i++) print_info_line(&w[i]);
    exit_code = CTL_EXIT_OK;
  }
  free(w);
  return exit_code;
}

static int cmd_rm(const ctl_global_t *g, int argc, char **argv) {
  const char *id_s = NULL;
  const ctl_flag_t flags[] = {{"id", 1, &id_s}};
  char *pos[1];
  ctl_args_t a = {.flags = flags, .n_flags = 1, .positional = pos, .max_positional = 1};
  int exit_code;
  if (ctl_parse_command(&a, argc, argv, kUsage, &exit_code) != 0) return exit_code;
  uint64_t id = 0;
  if ((id_s != NULL) == (a.n_positional == 1)) {
    return ctl_failf(CTL_EXIT_USAGE, GEMMD_STATUS_INVALID_ARGUMENT,
                     "weights rm: give a NAME or --id ID");
  }
  if (id_s != NULL && (ctl_parse_u64(id_s, &id) != 0 || id == 0)) {
    return ctl_failf(CTL_EXIT_USAGE, GEMMD_STATUS_INVALID_ARGUMENT,
                     "weights rm: --id '%s' is not a weight id", id_s);
  }
  gemmd_client_t *c = ctl_open(g);
  if (c == NULL) return CTL_EXIT_FAIL;
  gemmd_status_t st;
  const int rc = gemmd_client_unregister_weight(c, id, id ? NULL : pos[0], &st);
  gemmd_client_close(c);
  if (rc != 0) return ctl_fail(&st);
  if (id != 0) {
    printf("unregistered weight %" PRIu64 "\n", id);
  } else {
    printf("unregistered '%s'\n", pos[0]);
  }
  return CTL_EXIT_OK;
}

int ctl_cmd_weights(const ctl_global_t *g, int argc, char **argv) {
  if (argc < 2) {
    return ctl_failf(CTL_EXIT_USAGE, GEMMD_STATUS_INVALID_ARGUMENT,
                     "weights: add, ls or rm (see weights --help)");
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    fputs(kUsage, stdout);
    return CTL_EXIT_OK;
  }
  if (strcmp(argv[1], "add") == 0) return cmd_add(g, argc - 1, argv + 1);
  if (strcmp(argv[1], "ls") == 0) return cmd_ls(g, argc - 1, argv + 1);
  if (strcmp(argv[1], "rm") == 0) return cmd_rm(g, argc - 1, argv + 1);
  return ctl_failf(CTL_EXIT_USAGE, GEMMD_STATUS_INVALID_ARGUMENT,
                   "unknown weights command '%s' (add, ls, rm)", argv[1]);
}
