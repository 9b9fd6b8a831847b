/* What one --preload entry names: the safetensors files to read, in order.
 *   - a path ending in ".json": a safetensors index (Hugging Face's
 *     model.safetensors.index.json): the distinct files its "weight_map" names, in the
 *     index's own directory (a name with a '/' in it is refused);
 *   - a directory: every "*.safetensors" file in it (symlinks followed, as in a Hugging
 *     Face cache);
 *   - any other path: that one file.
 * A checkpoint of any number of shards is one entry. */
#ifndef GEMMD_DAEMON_PRELOAD_H_
#define GEMMD_DAEMON_PRELOAD_H_

#include <stddef.h>

/* *paths (n of them, sorted, each once) is malloc'd, as is each path: free them with
 * gemmd_preload_free. 0, or GEMMD_EIO (unreadable) / GEMMD_EINVAL (a malformed index, a
 * directory without safetensors files) with err set. */
int gemmd_preload_expand(const char *entry, char ***paths, size_t *n, char *err, size_t errlen);

void gemmd_preload_free(char **paths, size_t n);

#endif /* GEMMD_DAEMON_PRELOAD_H_ */
