/* systemd's readiness protocol (sd_notify), without libsystemd: when $NOTIFY_SOCKET is set
 * (a unit with Type=notify), gemmd tells the service manager "READY=1" once its weights
 * are loaded and it serves, "STOPPING=1" when it starts draining, and "STATUS=..." lines a
 * `systemctl status` shows. Without the variable these do nothing. */
#ifndef GEMMD_DAEMON_NOTIFY_H_
#define GEMMD_DAEMON_NOTIFY_H_

/* Sends one datagram of newline-separated assignments; 0, or -1 (not under systemd, or
 * the send failed: gemmd goes on either way). */
int gemmd_notify(const char *state);

#endif /* GEMMD_DAEMON_NOTIFY_H_ */
