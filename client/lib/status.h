/* Internal: filling a gemmd_status_t. Every setter accepts a NULL status. */
#ifndef GEMMD_CLIENT_LIB_STATUS_H_
#define GEMMD_CLIENT_LIB_STATUS_H_

#include "client/lib/gemmclient.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets code and a printf-formatted message (truncated to fit); returns code. */
int gemmd_status_set(gemmd_status_t *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* code OK, empty message. */
void gemmd_status_clear(gemmd_status_t *st);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_LIB_STATUS_H_ */
