/*
 * Child processes for tests: start one with its output in a log file, stop
 * it by the PID we got, and never leave it running. Every child started here
 * is SIGKILLed when the test process exits (atexit) or dies (PR_SET_PDEATHSIG),
 * and only ever by its own PID.
 */
#ifndef FENCELOCK_PROC_H
#define FENCELOCK_PROC_H

#include <sys/types.h>

/*
 * Start argv[0] (searched in PATH) with argv, the environment plus
 * env_extra ("NAME=value" strings, NULL-terminated; may be NULL), stdin from
 * /dev/null and stdout+stderr appended to log_path (NULL: inherited).
 * Returns the PID, or a negative errno (and prints why on stderr).
 */
pid_t hp_spawn(char *const argv[], char *const env_extra[], const char *log_path);

/* Like hp_spawn, and when in_fd / out_fd are not NULL, the child's stdin /
 * stdout are pipes whose other ends are written there (close-on-exec; the
 * caller closes them). stderr still goes to log_path. */
pid_t hp_spawn_io(char *const argv[], char *const env_extra[], const char *log_path, int *in_fd, int *out_fd);

/* Send sig to pid. SIGKILL and SIGTERM also reap it (SIGTERM waits up to
 * timeout_ms, then SIGKILLs). Returns 0 or a negative errno. */
int hp_signal(pid_t pid, int sig, int timeout_ms);

/* Wait up to timeout_ms for pid to exit; *status gets waitpid's status.
 * Returns 0, -ETIMEDOUT (still running) or a negative errno. */
int hp_wait(pid_t pid, int timeout_ms, int *status);

/* Monotonic milliseconds, and a sleep in milliseconds. */
long long hp_now_ms(void);
void hp_sleep_ms(long ms);

#endif
