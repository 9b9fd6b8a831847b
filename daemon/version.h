/* gemmd's version, reported by --version, ServerStats and gemmd_build_info. */
#ifndef GEMMD_DAEMON_VERSION_H_
#define GEMMD_DAEMON_VERSION_H_

#define GEMMD_VERSION "0.1.0"

#endif /* GEMMD_DAEMON_VERSION_H_ */
