#include "kernels/errors.h"

const char *gemmd_strerror(int err) {
  switch (err) {
    case GEMMD_OK:
      return "success";
#define GEMMD_STRERROR_CASE_(name, value, text) \
  case GEMMD_##name:                            \
    return text;
      GEMMD_ERRNO_MAP(GEMMD_STRERROR_CASE_)
#undef GEMMD_STRERROR_CASE_
    default:
      return "unknown error";
  }
}

const char *gemmd_err_name(int err) {
  switch (err) {
    case GEMMD_OK:
      return "GEMMD_OK";
#define GEMMD_ERR_NAME_CASE_(name, value, text) \
  case GEMMD_##name:                            \
    return "GEMMD_" #name;
      GEMMD_ERRNO_MAP(GEMMD_ERR_NAME_CASE_)
#undef GEMMD_ERR_NAME_CASE_
    default:
      return "GEMMD_UNKNOWN";
  }
}
