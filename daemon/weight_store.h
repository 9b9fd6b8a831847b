/* --weight-dir persistence: one file per registered weight, so that a restarted gemmd
 * has every weight back under the same id and name.
 *
 * File "<id>.gemmdw", little-endian:
 *   "GEMMDW01"                         8 bytes, magic and format version
 *   u64 id, u32 n, u32 k, u32 dtype, u32 scale_layout, u32 name_len, u32 reserved
 *   u64 n_scales, u64 data_bytes
 *   name (name_len bytes), scales (n_scales f32), data (data_bytes)
 *   u32 CRC-32 (IEEE) of everything before it
 * Written to ".<id>.tmp", flushed with fsync, then renamed: a crash leaves either the old
 * state or the new one. These calls block on disk I/O: run them off the loop thread. */
#ifndef GEMMD_DAEMON_WEIGHT_STORE_H_
#define GEMMD_DAEMON_WEIGHT_STORE_H_

#include <stddef.h>
#include <stdint.h>

#include "daemon/weight.h"

/* Creates dir if needed and checks it is writable. 0 or GEMMD_EIO with err set. */
int gemmd_weight_store_open(const char *dir, char *err, size_t errlen);

/* Takes dir for this process (an flock on "<dir>/.lock", which names the holder's pid): two
 * gemmd writing one directory would overwrite each other's files. The lock lasts as long
 * as the returned fd is open (close it, or exit). -1 with err set when another process
 * holds it or the file cannot be opened. */
int gemmd_weight_store_lock(const char *dir, char *err, size_t errlen);

int gemmd_weight_store_save(const char *dir, const gemmd_weight_t *w, char *err, size_t errlen);
int gemmd_weight_store_delete(const char *dir, uint64_t id, char *err, size_t errlen);

/* Reads one file into a new weight (refs = 1, name set). */
int gemmd_weight_store_read(const char *path, gemmd_weight_t **out, char *err, size_t errlen);

/* The weight files in dir ("<dir>/<id>.gemmdw"), in id order: *paths (malloc'd, as each
 * path; *count of them). 0, GEMMD_EIO when dir cannot be read, GEMMD_ENOMEM. */
int gemmd_weight_store_list(const char *dir, char ***paths, size_t *count);

/* CRC-32 (IEEE 802.3, zlib's), continued from crc (0 to start). */
uint32_t gemmd_crc32(uint32_t crc, const void *data, size_t n);

#endif /* GEMMD_DAEMON_WEIGHT_STORE_H_ */
