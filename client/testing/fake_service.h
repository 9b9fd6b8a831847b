/* Test-only: a stand-in for gemmd's GemmService and Health logic, so that the client can
 * be tested end to end without the daemon. GEMMs are computed with the FP64 reference;
 * weights are kept as sent (no quantization); a few names trigger errors. */
#ifndef GEMMD_CLIENT_TESTING_FAKE_SERVICE_H_
#define GEMMD_CLIENT_TESTING_FAKE_SERVICE_H_

#include <grpc/grpc.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fake_service_s fake_service_t;

fake_service_t *fake_service_create(void);
void fake_service_destroy(fake_service_t *s);

/* The answer to one call. */
typedef struct fake_reply_s {
  grpc_status_code code;
  char message[256];
  uint8_t *body; /* malloc'd response message when code is OK */
  size_t body_len;
} fake_reply_t;

/* Handles `method` given every request message of the call (one for unary calls). */
void fake_service_handle(fake_service_t *s, const char *method, const grpc_slice *msgs,
                         size_t n_msgs, fake_reply_t *reply);

/* Messages received by RegisterWeight calls so far (to check the client's chunking). */
size_t fake_service_register_messages(fake_service_t *s);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_TESTING_FAKE_SERVICE_H_ */
