/* Internal: reading the caller's files (TLS roots, weight data, scales). Errors are
 * statuses naming the file: NOT_FOUND (missing), PERMISSION_DENIED, INVALID_ARGUMENT
 * (wrong size), else UNKNOWN with strerror. */
#ifndef GEMMD_CLIENT_LIB_FILES_H_
#define GEMMD_CLIENT_LIB_FILES_H_

#include <stddef.h>
#include <stdint.h>

#include "client/lib/gemmclient.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The whole file, NUL-terminated, malloc'd. */
int gemmd_file_read_text(const char *path, char **out, gemmd_status_t *status);

/* A read-only mapping of a file that must hold exactly `want` bytes. */
typedef struct gemmd_file_map_s {
  void *addr;
  size_t len;
} gemmd_file_map_t;

int gemmd_file_map(const char *path, uint64_t want, const char *what, gemmd_file_map_t *map,
                   gemmd_status_t *status);
void gemmd_file_unmap(gemmd_file_map_t *map);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_LIB_FILES_H_ */
