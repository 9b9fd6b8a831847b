/* sd_notify over $NOTIFY_SOCKET. See notify.h. */
#include "daemon/notify.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int gemmd_notify(const char *state) {
  const char *path = getenv("NOTIFY_SOCKET");
  if (path == NULL || path[0] == '\0') return -1;
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  const size_t len = strlen(path);
  if ((path[0] != '/' && path[0] != '@') || len >= sizeof addr.sun_path) return -1;
  memcpy(addr.sun_path, path, len);
  if (path[0] == '@') addr.sun_path[0] = '\0'; /* the abstract namespace */
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
  const ssize_t sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&addr, alen);
  close(fd);
  return sent == (ssize_t)strlen(state) ? 0 : -1;
}
