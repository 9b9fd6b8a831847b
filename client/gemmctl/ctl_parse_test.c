/* gemmctl's flags and values: numbers with overflow and junk refused, every dtype and
 * layout name both ways, shapes and shape lists, and the flag parser's forms, errors,
 * help and positionals. */
#include "client/gemmctl/ctl_parse.h"

#include <string.h>

#include "client/gemmctl/ctl_flags.h"
#include "client/testing/testing.h"

static void check_numbers(void) {
  uint64_t u;
  uint32_t d;
  double s;
  CHECK(ctl_parse_u64("0", &u) == 0 && u == 0, "0");
  CHECK(ctl_parse_u64("18446744073709551615", &u) == 0 && u == UINT64_MAX, "max");
  static const char *const bad_u64[] = {
      "18446744073709551616", "", "-1", "+1", " 1", "1 ", "1e3", "0x10", "12a"};
  for (size_t i = 0; i < sizeof bad_u64 / sizeof bad_u64[0]; i++) {
    u = 77;
    CHECK(ctl_parse_u64(bad_u64[i], &u) == -1 && u == 77, "'%s' accepted", bad_u64[i]);
  }
  CHECK(ctl_parse_u64(NULL, &u) == -1, "NULL");
  CHECK(ctl_parse_dim("4294967295", &d) == 0 && d == UINT32_MAX, "dim max");
  CHECK(ctl_parse_dim("4294967296", &d) == -1 && ctl_parse_dim("0", &d) == -1, "dim range");
  CHECK(ctl_parse_seconds("10", &s) == 0 && s == 10, "10 s");
  CHECK(ctl_parse_seconds("0.25", &s) == 0 && s == 0.25, "0.25 s");
  CHECK(ctl_parse_seconds(".5", &s) == 0 && s == 0.5, ".5 s");
  static const char *const bad_s[] = {"", "-1", "inf", "nan", "1e999", "5s", "x"};
  for (size_t i = 0; i < sizeof bad_s / sizeof bad_s[0]; i++) {
    CHECK(ctl_parse_seconds(bad_s[i], &s) == -1, "'%s' accepted as seconds", bad_s[i]);
  }
}

static void check_names(void) {
  static const char *const dtypes[] = {"e4m3", "e5m2", "bf16", "fp16", "fp32"};
  for (int i = 0; i < 5; i++) {
    gemmd_dtype_t t;
    CHECK(ctl_parse_dtype(dtypes[i], &t) == 0 && (int)t == i + 1, "%s", dtypes[i]);
    CHECK(strcmp(ctl_dtype_short(t), dtypes[i]) == 0, "%s back", dtypes[i]);
  }
  static const char *const layouts[] = {"none", "tensor", "row", "1x128", "128x128"};
  for (int i = 0; i < 5; i++) {
    gemmd_scale_layout_t l;
    CHECK(ctl_parse_layout(layouts[i], &l) == 0 && (int)l == i, "%s", layouts[i]);
    CHECK(strcmp(ctl_layout_short(l), layouts[i]) == 0, "%s back", layouts[i]);
  }
  gemmd_dtype_t t = GEMMD_DTYPE_FP32;
  CHECK(ctl_parse_dtype("E4M3", &t) == -1 && ctl_parse_dtype("fp8", &t) == -1, "unknown dtype");
  CHECK(t == GEMMD_DTYPE_FP32, "untouched on failure");
  gemmd_scale_layout_t l;
  CHECK(ctl_parse_layout("128", &l) == -1 && ctl_parse_layout(NULL, &l) == -1, "bad layout");
  CHECK(strcmp(ctl_dtype_short(GEMMD_DTYPE_UNSPECIFIED), "?") == 0, "unspecified");
}

static void check_shapes(void) {
  uint32_t d[3] = {0, 0, 0};
  CHECK(ctl_parse_shape("4096x7168", d, 2) == 0 && d[0] == 4096 && d[1] == 7168, "NxK");
  CHECK(ctl_parse_shape("1x2x3", d, 3) == 0 && d[0] == 1 && d[1] == 2 && d[2] == 3, "MxNxK");
  static const char *const bad2[] = {"4096", "4096x",     "x7168",     "4096x7168x1",
                                     "0x5",  "4096X7168", "4096*7168", "4096x7168 ",
                                     "",     "1x-2"};
  for (size_t i = 0; i < sizeof bad2 / sizeof bad2[0]; i++) {
    d[0] = 99;
    CHECK(ctl_parse_shape(bad2[i], d, 2) == -1 && d[0] == 99, "'%s' accepted as NxK", bad2[i]);
  }
  ctl_shape_t shapes[4];
  size_t n = 0;
  CHECK(ctl_parse_shape_list("1x128x128", shapes, 4, &n) == 0 && n == 1, "one shape");
  CHECK(shapes[0].m == 1 && shapes[0].n == 128 && shapes[0].k == 128, "values");
  CHECK(ctl_parse_shape_list("1x2x3,4x5x6,7x8x9", shapes, 4, &n) == 0 && n == 3, "three");
  CHECK(shapes[2].m == 7 && shapes[2].n == 8 && shapes[2].k == 9 && shapes[1].k == 6, "order");
  static const char *const bad3[] = {
      "", "1x2", "1x2x3,", ",1x2x3", "1x2x3,,4x5x6", "1x2x3;4x5x6", "1x2x3,4x5"};
  for (size_t i = 0; i < sizeof bad3 / sizeof bad3[0]; i++) {
    CHECK(ctl_parse_shape_list(bad3[i], shapes, 4, &n) == -1, "'%s' accepted", bad3[i]);
  }
  CHECK(ctl_parse_shape_list("1x1x1,1x1x1,1x1x1", shapes, 2, &n) == -1, "over max");
}

typedef struct {
  const char *addr, *count, *json;
  char *pos[2];
  ctl_args_t a;
} parsed_t;

static int parse(parsed_t *p, int stop, int argc, char **argv) {
  static ctl_flag_t flags[3];
  memset(p, 0, sizeof *p);
  flags[0] = (ctl_flag_t){"addr", 1, &p->addr};
  flags[1] = (ctl_flag_t){"count", 1, &p->count};
  flags[2] = (ctl_flag_t){"json", 0, &p->json};
  p->a = (ctl_args_t){.flags = flags,
                      .n_flags = 3,
                      .stop_at_positional = stop,
                      .positional = p->pos,
                      .max_positional = 2};
  return ctl_parse_args(&p->a, argc, argv);
}

#define ARGV(...) (sizeof((char *[]){__VA_ARGS__}) / sizeof(char *)), ((char *[]){__VA_ARGS__})

static void check_flags(void) {
  parsed_t p;
  CHECK(parse(&p, 0, ARGV("--addr", "h:1", "x", "--count=5", "--json", "y")) == CTL_ARGS_OK, "%s",
        p.a.err);
  CHECK(strcmp(p.addr, "h:1") == 0 && strcmp(p.count, "5") == 0 && p.json != NULL, "values");
  CHECK(p.a.n_positional == 2 && strcmp(p.pos[0], "x") == 0 && strcmp(p.pos[1], "y") == 0,
        "positionals");
  CHECK(parse(&p, 0, ARGV("--count", "1", "--count", "2")) == 0 && strcmp(p.count, "2") == 0,
        "last wins");
  CHECK(parse(&p, 0, ARGV("--addr=", "--count", "-3")) == 0 && p.addr[0] == '\0' &&
            strcmp(p.count, "-3") == 0,
        "empty value and a value that looks like a flag");
  CHECK(parse(&p, 0, ARGV("--", "--json")) == 0 && p.json == NULL && p.a.n_positional == 1,
        "-- ends flags");
  CHECK(parse(&p, 0, ARGV("-")) == 0 && p.a.n_positional == 1, "'-' is positional");

  CHECK(parse(&p, 0, ARGV("--bogus")) == CTL_ARGS_ERROR && strstr(p.a.err, "--bogus"), "unknown");
  CHECK(parse(&p, 0, ARGV("--add", "x")) == CTL_ARGS_ERROR, "no prefix matching");
  CHECK(parse(&p, 0, ARGV("--addr")) == CTL_ARGS_ERROR && strstr(p.a.err, "needs a value"),
        "missing value: %s", p.a.err);
  CHECK(parse(&p, 0, ARGV("--json=1")) == CTL_ARGS_ERROR && strstr(p.a.err, "no value"),
        "switch with value: %s", p.a.err);
  CHECK(parse(&p, 0, ARGV("-j")) == CTL_ARGS_ERROR, "single dash");
  CHECK(parse(&p, 0, ARGV("a", "b", "c")) == CTL_ARGS_ERROR && strstr(p.a.err, "'c'"),
        "too many positionals: %s", p.a.err);
  CHECK(parse(&p, 0, ARGV("x", "--help", "--bogus")) == CTL_ARGS_HELP, "--help");
  CHECK(parse(&p, 0, ARGV("-h")) == CTL_ARGS_HELP, "-h");

  char *argv[] = {"--addr", "h:2", "info", "--json"};
  CHECK(parse(&p, 1, 4, argv) == CTL_ARGS_OK && p.a.next == 2 && p.json == NULL,
        "stops at the command (next %d)", p.a.next);
  CHECK(strcmp(p.addr, "h:2") == 0 && p.a.n_positional == 0, "global value");
  CHECK(parse(&p, 1, 0, argv) == CTL_ARGS_OK && p.a.next == 0, "no arguments");
}

int main(void) {
  check_numbers();
  check_names();
  check_shapes();
  check_flags();
  printf("ctl_parse_test: ok\n");
  return 0;
}
