/* Any protobuf-c message as JSON, from its descriptor: field names as in the .proto,
 * enums by name, 64-bit integers as numbers, bytes as base64, non-finite doubles as
 * strings ("NaN", "Infinity"), unset proto3 scalars included with their zero values. */
#ifndef GEMMD_DAEMON_PBJSON_H_
#define GEMMD_DAEMON_PBJSON_H_

#include <protobuf-c/protobuf-c.h>

/* malloc'd, NUL-terminated; NULL when out of memory. */
char *gemmd_pbjson(const ProtobufCMessage *msg);

#endif /* GEMMD_DAEMON_PBJSON_H_ */
