/*
 * Logging of the storage-guard program: one line per event on stderr, with
 * a UTC timestamp and a level. Thread-safe (one fprintf per line).
 */
#ifndef SG_LOG_H
#define SG_LOG_H

enum sg_log_level {
    SG_LOG_ERROR = 0,
    SG_LOG_WARN,
    SG_LOG_INFO,
    SG_LOG_DEBUG,
};

/* Parse "error", "warn", "info" or "debug". Returns 0 or -EINVAL. */
int sg_log_parse_level(const char *s, enum sg_log_level *out);

/* Set the most verbose level printed; SG_LOG_INFO until called. */
void sg_log_set_level(enum sg_log_level level);

/* Whether a message at level would be printed. */
int sg_log_enabled(enum sg_log_level level);

/* Print one line at level, printf-style. */
void sg_log(enum sg_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
