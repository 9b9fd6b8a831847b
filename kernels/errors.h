/* Error codes shared by kernels/ and daemon/: 0 is success, failures are negative.
 * One X-macro table generates the enum and gemmd_strerror(). */
#ifndef GEMMD_KERNELS_ERRORS_H_
#define GEMMD_KERNELS_ERRORS_H_

#ifdef __cplusplus
extern "C" {
#endif

#define GEMMD_ERRNO_MAP(XX)                                          \
  XX(EINVAL, -1, "invalid argument")                                 \
  XX(ENOMEM, -2, "out of memory")                                    \
  XX(ERANGE, -3, "value out of range")                               \
  XX(ENOTSUP, -4, "not supported")                                   \
  XX(ENOENT, -5, "not found")                                        \
  XX(EEXIST, -6, "already exists")                                   \
  XX(EAGAIN, -7, "resource temporarily exhausted")                   \
  XX(EIO, -8, "input/output error")                                  \
  XX(EDEVICE, -9, "device error")                                    \
  XX(ESHUTDOWN, -10, "shutting down")                                \
  XX(ETIMEDOUT, -11, "deadline exceeded")                            \
  XX(EINTERNAL, -12, "internal error")

typedef enum {
  GEMMD_OK = 0,
#define GEMMD_ERRNO_ENUM_(name, value, text) GEMMD_##name = value,
  GEMMD_ERRNO_MAP(GEMMD_ERRNO_ENUM_)
#undef GEMMD_ERRNO_ENUM_
} gemmd_errno_t;

/* A static string for any code (unknown codes included). */
const char *gemmd_strerror(int err);
/* The symbolic name ("GEMMD_EINVAL"), for logs. */
const char *gemmd_err_name(int err);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_KERNELS_ERRORS_H_ */
