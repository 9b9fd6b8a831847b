/* The status codes every transport answers with: gRPC's (grpc/status.h numbers them the
 * same), over gRPC as the call's status, over shared memory in each completion, in the
 * metrics' `code` label (metrics.h gemmd_code_name). docs/api.md §2 says which means what. */
#ifndef GEMMD_DAEMON_STATUS_H_
#define GEMMD_DAEMON_STATUS_H_

enum {
  GEMMD_CODE_OK = 0,
  GEMMD_CODE_CANCELLED = 1,
  GEMMD_CODE_INVALID_ARGUMENT = 3,
  GEMMD_CODE_DEADLINE_EXCEEDED = 4,
  GEMMD_CODE_NOT_FOUND = 5,
  GEMMD_CODE_ALREADY_EXISTS = 6,
  GEMMD_CODE_PERMISSION_DENIED = 7,
  GEMMD_CODE_RESOURCE_EXHAUSTED = 8,
  GEMMD_CODE_FAILED_PRECONDITION = 9,
  GEMMD_CODE_UNIMPLEMENTED = 12,
  GEMMD_CODE_INTERNAL = 13,
  GEMMD_CODE_UNAVAILABLE = 14,
};

#endif /* GEMMD_DAEMON_STATUS_H_ */
