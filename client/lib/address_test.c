/* Address -> transport: unix: addresses are the shared-memory transport, everything else
 * is a gRPC target passed through whole; empty ones are refused. */
#include "client/lib/address.h"

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
  CHECK(strcmp(gemmd_transport_name(GEMMD_TRANSPORT_GRPC), "grpc") == 0, "grpc");
  CHECK(strcmp(gemmd_transport_name(GEMMD_TRANSPORT_SHM), "shm") == 0, "shm");
  printf("address_test: ok\n");
  return 0;
}
