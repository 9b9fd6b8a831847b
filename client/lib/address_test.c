/* Address -> transport: unix: addresses are the shared-memory transport, everything else
 * is a gRPC target passed through whole; empty ones are refused. A gRPC target's
 * comma-separated endpoints are split, but gRPC's own ipv4:/ipv6: lists are not. */
#include "client/lib/address.h"

#include <stdlib.h>
#include <string.h>

#include "client/testing/testing.h"

static void expect(const char *addr, gemmd_transport_t t, const char *target) {
  gemmd_address_t a;
  gemmd_status_t st;
  const int rc = gemmd_address_parse(addr, &a, &st);
  CHECK(rc == 0, "%s: rc %d %s", addr, rc, st.message);
  CHECK(a.transport == t, "%s: transport %d", addr, (int)a.transport);
  CHECK(strcmp(a.target, target) == 0, "%s: target '%s', want '%s'", addr, a.target, target);
}

static void expect_bad(const char *addr) {
  gemmd_address_t a;
  gemmd_status_t st;
  const int rc = gemmd_address_parse(addr, &a, &st);
  CHECK(rc == GEMMD_STATUS_INVALID_ARGUMENT, "%s: rc %d", addr ? addr : "(null)", rc);
  CHECK(st.code == rc && st.message[0] != '\0', "a message for %s", addr ? addr : "(null)");
}

/* The endpoints of a gRPC target, joined by '|' for comparing. */
static void expect_endpoints(const char *target, int want_rc, const char *want) {
  char *ep[GEMMD_MAX_ENDPOINTS];
  size_t n = 99;
  gemmd_status_t st;
  const int rc = gemmd_address_endpoints(target, ep, &n, &st);
  CHECK(rc == want_rc, "%s: rc %d %s", target, rc, st.message);
  if (rc != 0) {
    CHECK(n == 0 && st.message[0] != '\0', "%s: nothing kept, and a message", target);
    return;
  }
  char joined[512] = "";
  for (size_t i = 0; i < n; i++) {
    if (i) strcat(joined, "|");
    strcat(joined, ep[i]);
    free(ep[i]);
  }
  CHECK(strcmp(joined, want) == 0, "%s: '%s', want '%s'", target, joined, want);
}

int main(void) {
  expect("localhost:50051", GEMMD_TRANSPORT_GRPC, "localhost:50051");
  expect("dns:///gemmd.svc:50051", GEMMD_TRANSPORT_GRPC, "dns:///gemmd.svc:50051");
  expect("ipv4:10.0.0.1:50051,10.0.0.2:50051", GEMMD_TRANSPORT_GRPC,
         "ipv4:10.0.0.1:50051,10.0.0.2:50051");
  expect("[::1]:50051", GEMMD_TRANSPORT_GRPC, "[::1]:50051");
  expect("127.0.0.1:1", GEMMD_TRANSPORT_GRPC, "127.0.0.1:1");
  expect("unixish:1", GEMMD_TRANSPORT_GRPC, "unixish:1");
  expect("unix:///run/gemmd/gemmd.sock", GEMMD_TRANSPORT_SHM, "/run/gemmd/gemmd.sock");
  expect("unix:/run/gemmd/gemmd.sock", GEMMD_TRANSPORT_SHM, "/run/gemmd/gemmd.sock");
  expect("unix:gemmd.sock", GEMMD_TRANSPORT_SHM, "gemmd.sock");
  expect_bad("");
  expect_bad(NULL);
  expect_bad("unix:");
  expect_bad("unix://");
  expect_endpoints("localhost:50051", 0, "localhost:50051");
  expect_endpoints("a:1,b:2,dns:///c:3", 0, "a:1|b:2|dns:///c:3");
  expect_endpoints("ipv4:10.0.0.1:1,10.0.0.2:1", 0, "ipv4:10.0.0.1:1,10.0.0.2:1");
  expect_endpoints("a:1,,b:2", GEMMD_STATUS_INVALID_ARGUMENT, "");
  expect_endpoints("a:1,", GEMMD_STATUS_INVALID_ARGUMENT, "");
  expect_endpoints("a:1,unix:///run/gemmd/gemmd.sock", GEMMD_STATUS_INVALID_ARGUMENT, "");
  expect_endpoints("a:1,a:2,a:3,a:4,a:5,a:6,a:7,a:8,a:9,a:10,a:11,a:12,a:13,a:14,a:15,a:16", 0,
                   "a:1|a:2|a:3|a:4|a:5|a:6|a:7|a:8|a:9|a:10|a:11|a:12|a:13|a:14|a:15|a:16");
  expect_endpoints("a:1,a:2,a:3,a:4,a:5,a:6,a:7,a:8,a:9,a:10,a:11,a:12,a:13,a:14,a:15,a:16,a:17",
                   GEMMD_STATUS_INVALID_ARGUMENT, "");
  CHECK(strcmp(gemmd_transport_name(GEMMD_TRANSPORT_GRPC), "grpc") == 0, "grpc");
  CHECK(strcmp(gemmd_transport_name(GEMMD_TRANSPORT_SHM), "shm") == 0, "shm");
  printf("address_test: ok\n");
  return 0;
}
