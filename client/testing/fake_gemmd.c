/* Test-only: the fake gemmd as a process. Prints "listening 127.0.0.1:PORT" and serves
 * until SIGTERM or SIGINT. Usage: fake_gemmd [PORT] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "client/testing/fake_server.h"

int main(int argc, char **argv) {
  sigset_t set;
  int sig, port = 0;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread starts */
  fake_server_t *s = fake_server_start(argc > 1 ? atoi(argv[1]) : 0, &port);
  printf("listening 127.0.0.1:%d\n", port);
  fflush(stdout);
  sigwait(&set, &sig);
  fake_server_stop(s);
  return 0;
}
