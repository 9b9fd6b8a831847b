/* ServerStats -> struct -> JSON: every field, gemm.proto's names and order, exact text;
 * strings escaped; non-finite doubles as proto3 JSON strings; absent sub-messages as
 * zeros; the JSON writer places commas and refuses unbalanced documents. */
#include <math.h>
#include <string.h>

#include "client/lib/gemmclient.h"
#include "client/lib/json_writer.h"
#include "client/lib/server_stats.h"
#include "client/testing/testing.h"

static char *render(const Gemmd__V1__ServerStats *pb) {
  gemmd_server_stats_t s;
  gemmd_status_t st;
  CHECK(gemmd_server_stats_from_pb(pb, &s, &st) == 0, "from_pb: %s", st.message);
  char *json = NULL;
  CHECK(gemmd_server_stats_json(&s, &json) == 0 && json != NULL, "json");
  gemmd_server_stats_free(&s);
  CHECK(s.version == NULL && s.requests_by_code == NULL, "free clears");
  return json;
}

static void expect_json(const char *got, const char *want) {
  if (strcmp(got, want) != 0) {
    size_t i = 0;
    while (got[i] && got[i] == want[i]) i++;
    CHECK(0, "JSON differs at byte %zu\n   got: %s\n  want: %s", i, got + i, want + i);
  }
}

static void check_full(void) {
  Gemmd__V1__CodeCount ok = GEMMD__V1__CODE_COUNT__INIT, nf = GEMMD__V1__CODE_COUNT__INIT;
  ok.transport = "grpc";
  ok.code = "OK";
  ok.count = 1000;
  nf.transport = "shm";
  nf.code = "NOT_FOUND";
  nf.count = 3;
  Gemmd__V1__CodeCount *codes[2] = {&ok, &nf};
  Gemmd__V1__LatencySummary req = GEMMD__V1__LATENCY_SUMMARY__INIT;
  req.count = 1003;
  req.mean_us = 61.5;
  req.p50_us = 60;
  req.p90_us = 70.25;
  req.p99_us = 99.125;
  req.p999_us = 150;
  req.max_us = 1234.5;
  Gemmd__V1__ServerStats pb = GEMMD__V1__SERVER_STATS__INIT;
  pb.version = "0.3.0";
  pb.backend = "cuda";
  pb.device = "NVIDIA H200 (sm_90, 132 SMs)";
  pb.gemm_kernel = "sm90_grouped_fp8";
  pb.uptime_ns = 18446744073709551615ull;
  pb.ready = 1;
  pb.draining = 0;
  pb.requests_total = 1003;
  pb.requests_failed = 3;
  pb.batches_total = 250;
  pb.flops_total = 1.5e15;
  pb.input_bytes_total = 4096;
  pb.output_bytes_total = 8192;
  pb.graph_replays_total = 249;
  pb.graph_captures_total = 1;
  pb.n_requests_by_code = 2;
  pb.requests_by_code = codes;
  pb.request_latency = &req;
  pb.mean_batch_requests = 4.012;
  pb.queue_depth = 2;
  pb.inflight_requests = 5;
  pb.shm_clients = 1;
  pb.weights = 3;
  pb.weight_bytes = 50331648;
  pb.weight_budget_bytes = 68719476736ull;
  pb.device_memory_used_bytes = 1;
  pb.device_memory_total_bytes = 150754820096ull;
  char *json = render(&pb);
  expect_json(json,
              "{\"version\":\"0.3.0\",\"backend\":\"cuda\","
              "\"device\":\"NVIDIA H200 (sm_90, 132 SMs)\",\"gemm_kernel\":\"sm90_grouped_fp8\","
              "\"uptime_ns\":18446744073709551615,\"ready\":true,\"draining\":false,"
              "\"requests_total\":1003,\"requests_failed\":3,\"batches_total\":250,"
              "\"flops_total\":1.5e+15,\"input_bytes_total\":4096,\"output_bytes_total\":8192,"
              "\"graph_replays_total\":249,\"graph_captures_total\":1,"
              "\"requests_by_code\":[{\"transport\":\"grpc\",\"code\":\"OK\",\"count\":1000},"
              "{\"transport\":\"shm\",\"code\":\"NOT_FOUND\",\"count\":3}],"
              "\"request_latency\":{\"count\":1003,\"mean_us\":61.5,\"p50_us\":60,"
              "\"p90_us\":70.25,\"p99_us\":99.125,\"p999_us\":150,\"max_us\":1234.5},"
              "\"queue_latency\":{\"count\":0,\"mean_us\":0,\"p50_us\":0,\"p90_us\":0,"
              "\"p99_us\":0,\"p999_us\":0,\"max_us\":0},"
              "\"batch_latency\":{\"count\":0,\"mean_us\":0,\"p50_us\":0,\"p90_us\":0,"
              "\"p99_us\":0,\"p999_us\":0,\"max_us\":0},"
              "\"mean_batch_requests\":4.012,\"queue_depth\":2,\"inflight_requests\":5,"
              "\"shm_clients\":1,\"weights\":3,\"weight_bytes\":50331648,"
              "\"weight_budget_bytes\":68719476736,\"device_memory_used_bytes\":1,"
              "\"device_memory_total_bytes\":150754820096,\"loading\":false,\"startup_files\":0,"
              "\"startup_files_loaded\":0,\"startup_weights_loaded\":0}");
  free(json);
}

static void check_empty_and_odd_values(void) {
  Gemmd__V1__LatencySummary lat = GEMMD__V1__LATENCY_SUMMARY__INIT;
  lat.mean_us = NAN;
  lat.p50_us = INFINITY;
  lat.p90_us = -INFINITY;
  lat.p99_us = 0.1;
  lat.p999_us = 1.0 / 3.0;
  lat.max_us = -0.0;
  Gemmd__V1__ServerStats pb = GEMMD__V1__SERVER_STATS__INIT;
  pb.device = "quote\" backslash\\ nl\n tab\t bell\a";
  pb.batch_latency = &lat;
  char *json = render(&pb);
  CHECK(strstr(json, "\"version\":\"\",\"backend\":\"\",") == json + 1, "empty strings: %s", json);
  CHECK(strstr(json, "\"device\":\"quote\\\" backslash\\\\ nl\\n tab\\t bell\\u0007\"") != NULL,
        "escaping: %s", json);
  CHECK(strstr(json, "\"requests_by_code\":[],") != NULL, "empty array: %s", json);
  CHECK(strstr(json,
               "\"batch_latency\":{\"count\":0,\"mean_us\":\"NaN\",\"p50_us\":\"Infinity\","
               "\"p90_us\":\"-Infinity\",\"p99_us\":0.1,"
               "\"p999_us\":0.3333333333333333,\"max_us\":-0}") != NULL,
        "doubles: %s", json);
  free(json);
}

static void check_writer(void) {
  gemmd_json_writer_t j;
  char *out = NULL;
  gemmd_json_init(&j);
  gemmd_json_begin_array(&j);
  gemmd_json_begin_object(&j);
  gemmd_json_key(&j, "a");
  gemmd_json_begin_array(&j);
  gemmd_json_i64(&j, -5);
  gemmd_json_u64(&j, 6);
  gemmd_json_begin_array(&j);
  gemmd_json_end_array(&j);
  gemmd_json_end_array(&j);
  gemmd_json_key(&j, "b");
  gemmd_json_string(&j, NULL);
  gemmd_json_end_object(&j);
  gemmd_json_bool(&j, 0);
  gemmd_json_double(&j, 2.5e-8);
  gemmd_json_end_array(&j);
  CHECK(gemmd_json_finish(&j, &out) == 0, "finish");
  expect_json(out, "[{\"a\":[-5,6,[]],\"b\":\"\"},false,2.5e-08]");
  free(out);

  gemmd_json_init(&j);
  gemmd_json_begin_object(&j);
  CHECK(gemmd_json_finish(&j, &out) == -1 && out == NULL, "unclosed object refused");
  gemmd_json_init(&j);
  gemmd_json_end_array(&j);
  CHECK(gemmd_json_finish(&j, &out) == -1, "close without open refused");
  gemmd_json_init(&j);
  gemmd_json_begin_object(&j);
  gemmd_json_key(&j, "dangling");
  gemmd_json_end_object(&j);
  CHECK(gemmd_json_finish(&j, &out) == -1, "key without value refused");
}

int main(void) {
  check_full();
  check_empty_and_odd_values();
  check_writer();
  printf("stats_json_test: ok\n");
  return 0;
}
