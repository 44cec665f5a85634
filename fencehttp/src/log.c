/* One line per event on stderr; the level is read without a lock because a
 * torn read of an int cannot happen and a stale one only affects verbosity. */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <fencehttp/fencehttp.h>

static atomic_int current_level = FENCEHTTP_LOG_INFO;
static const char *program = "fencelock";

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int fencehttp_log_parse_level(const char *s, enum fencehttp_log_level *out)
{
    if (s == NULL || out == NULL)
        return -EINVAL;
    for (int i = 0; i <= FENCEHTTP_LOG_DEBUG; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum fencehttp_log_level)i;
            return 0;
        }
    }
    return -EINVAL;
}

void fencehttp_log_set_program(const char *name)
{
    if (name != NULL)
        program = name;
}

void fencehttp_log_set_level(enum fencehttp_log_level level)
{
    atomic_store(&current_level, (int)level);
}

int fencehttp_log_enabled(enum fencehttp_log_level level)
{
    return (int)level <= atomic_load(&current_level);
}

void fencehttp_log(enum fencehttp_log_level level, const char *fmt, ...)
{
    if (!fencehttp_log_enabled(level))
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* One line per message, whatever a message quotes (a resource with a
     * newline would otherwise write a line of its own). */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    /* One call per line so lines from worker threads do not interleave. */
    fprintf(stderr, "%s.%03ldZ %s %s: %s\n", when, ts.tv_nsec / 1000000L, program, level_names[level], msg);
}
