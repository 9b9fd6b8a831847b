/* Test-only: the fake service (fake_service.h) behind a real gRPC server on 127.0.0.1,
 * serving one call at a time on its own thread. */
#ifndef GEMMD_CLIENT_TESTING_FAKE_SERVER_H_
#define GEMMD_CLIENT_TESTING_FAKE_SERVER_H_

#include "client/testing/fake_service.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fake_server_s fake_server_t;

/* Listens on 127.0.0.1 (port 0 picks one; *bound_port says which). NULL on failure. */
fake_server_t *fake_server_start(int port, int *bound_port);
fake_service_t *fake_server_service(fake_server_t *s);
void fake_server_stop(fake_server_t *s);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_TESTING_FAKE_SERVER_H_ */
