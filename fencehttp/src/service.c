/* What a service does at start-up and to its service manager: parse its
 * numbers and durations, resolve --listen, write --port-file, read its
 * secrets, tell systemd it is ready or stopping, and feed its watchdog. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <fencehttp/fencehttp.h>

int fencehttp_parse_num(const char *s, long long min, long long max, long long *out)
{
    if (s == NULL || out == NULL)
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

int fencehttp_parse_duration_ms(const char *s, long long *out)
{
    if (s == NULL || out == NULL)
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || v < 0 || *s == '-' || *s == '+' || *s == ' ')
        return -EINVAL;
    long long unit;
    if (strcmp(end, "ms") == 0)
        unit = 1;
    else if (strcmp(end, "s") == 0)
        unit = 1000;
    else if (strcmp(end, "m") == 0)
        unit = 60 * 1000;
    else if (strcmp(end, "h") == 0)
        unit = 3600 * 1000;
    else if (strcmp(end, "d") == 0)
        unit = 86400 * 1000;
    else if (*end == '\0' && v == 0)
        unit = 1;
    else
        return -EINVAL;
    if (v > 3650LL * 86400 * 1000 / unit)
        return -EINVAL;
    *out = v * unit;
    return 0;
}

FILE *fencehttp_fopen_regular(const char *path)
{
    if (path == NULL) {
        errno = EINVAL;
        return NULL;
    }
    /* O_NONBLOCK: opening a FIFO does not wait for a writer. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat sb;
    int e = fstat(fd, &sb) != 0 ? errno : !S_ISREG(sb.st_mode) ? EINVAL : 0;
    if (e != 0) {
        close(fd);
        errno = e;
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "r");
    if (f == NULL) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

const char *fencehttp_file_error(int e)
{
    return e == EINVAL ? "not a regular file" : strerror(e);
}

int fencehttp_read_file(const char *path, char **out)
{
    if (path == NULL || out == NULL)
        return -EINVAL;
    FILE *f = fencehttp_fopen_regular(path);
    if (f == NULL)
        return -errno;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    int rc = 0;
    while (buf != NULL) {
        len += fread(buf + len, 1, cap - len - 1, f);
        if (len < cap - 1)
            break;
        if (cap >= (1u << 20)) {
            rc = -EFBIG;
            break;
        }
        char *b = realloc(buf, cap * 2);
        if (b == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = b;
        cap *= 2;
    }
    if (buf == NULL)
        rc = -ENOMEM;
    else if (rc == 0 && ferror(f))
        rc = -EIO;
    fclose(f);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    buf[len] = '\0';
    *out = buf;
    return 0;
}

int fencehttp_resolve(const char *listen, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[256];
    const char *port;
    if (listen[0] == '[') {
        const char *end = strchr(listen, ']');
        if (end == NULL || end[1] != ':' || (size_t)(end - listen - 1) >= sizeof(host))
            return -EINVAL;
        memcpy(host, listen + 1, (size_t)(end - listen - 1));
        host[end - listen - 1] = '\0';
        port = end + 2;
    } else {
        const char *colon = strrchr(listen, ':');
        if (colon == NULL || colon == listen || (size_t)(colon - listen) >= sizeof(host))
            return -EINVAL;
        memcpy(host, listen, (size_t)(colon - listen));
        host[colon - listen] = '\0';
        port = colon + 1;
    }
    long long p;
    if (fencehttp_parse_num(port, 0, 65535, &p) != 0)
        return -EINVAL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, port, &hints, &res) != 0 || res == NULL)
        return -EINVAL;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/*
 * Write the port to path atomically, so a reader never sees half a number.
 * The temporary file is made by mkstemp next to path: a name nobody can
 * guess and plant a symlink at beforehand (a fixed PATH.tmp could be one,
 * and fopen would write through it). Its mode follows the umask.
 */
int fencehttp_check_writable_dir(const char *path)
{
    if (path == NULL || path[0] == '\0') {
        errno = EINVAL;
        return -1;
    }
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == path)
        snprintf(dir, sizeof(dir), "/");
    else if ((size_t)(slash - path) < sizeof(dir))
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    else {
        errno = ENAMETOOLONG;
        return -1;
    }
    return access(dir, W_OK | X_OK) == 0 ? 0 : -1;
}

int fencehttp_write_port_file(const char *path, unsigned port, mode_t mask)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    int fd = mkstemp(tmp);
    if (fd < 0)
        return -errno;
    char text[16];
    int n = snprintf(text, sizeof(text), "%u\n", port);
    int bad = fchmod(fd, 0666 & ~mask) != 0 || write(fd, text, (size_t)n) != n;
    int e = bad ? (errno ? errno : EIO) : 0;
    if (close(fd) != 0 && e == 0)
        e = errno;
    if (e == 0 && rename(tmp, path) != 0)
        e = errno;
    if (e != 0) {
        unlink(tmp);
        return -e;
    }
    return 0;
}

/* Warn when a file of secrets may be read by others. */
static void warn_if_open(const char *path, const char *what, const char *why)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && (sb.st_mode & 077) != 0)
        fencehttp_log(FENCEHTTP_LOG_WARN, "%s %s is mode %04o: others can read %s; chmod 600 it", what, path,
                      (unsigned)(sb.st_mode & 0777), why);
}

int fencehttp_load_secrets(const char *auth_file, fencehttp_auth **auth, const char *cert_file, char **cert,
                           const char *key_file, char **key)
{
    char err[512] = "";
    int rc;
    if (auth_file != NULL) {
        if ((rc = fencehttp_auth_load(auth_file, auth, err, sizeof(err))) != 0) {
            fencehttp_log(FENCEHTTP_LOG_ERROR, "auth file: %s", err);
            return -1;
        }
        warn_if_open(auth_file, "auth file", "the tokens");
    }
    if (cert_file != NULL) {
        if ((rc = fencehttp_read_file(cert_file, cert)) != 0) {
            fencehttp_log(FENCEHTTP_LOG_ERROR, "--tls-cert %s: %s", cert_file, fencehttp_file_error(-rc));
            return -1;
        }
    }
    if (key_file != NULL) {
        if ((rc = fencehttp_read_file(key_file, key)) != 0) {
            fencehttp_log(FENCEHTTP_LOG_ERROR, "--tls-key %s: %s", key_file, fencehttp_file_error(-rc));
            return -1;
        }
        warn_if_open(key_file, "TLS key", "it");
    }
    return 0;
}

void fencehttp_free_secrets(fencehttp_auth *auth, char *cert, char *key)
{
    fencehttp_auth_free(auth);
    if (key != NULL)
        memset(key, 0, strlen(key)); /* a secret: not left in freed memory */
    free(key);
    free(cert);
}

int fencehttp_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (state == NULL)
        return -EINVAL;
    if (path == NULL || path[0] == '\0')
        return 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
        return -EINVAL;
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@')
        sa.sun_path[0] = '\0'; /* the abstract namespace */
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    ssize_t n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (const struct sockaddr *)&sa,
                       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
    int rc = n < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* Half of the watchdog interval systemd asked for, in µs; 0 for none. */
static long long watchdog_half_us(void)
{
    const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    long long v = 0, p = 0;
    if (usec == NULL || fencehttp_parse_num(usec, 1, LLONG_MAX, &v) != 0)
        return 0;
    if (pid != NULL && (fencehttp_parse_num(pid, 1, INT_MAX, &p) != 0 || (pid_t)p != getpid()))
        return 0;
    return v / 2 > 0 ? v / 2 : 1;
}

int fencehttp_wait_signal(const sigset_t *set, int *sig)
{
    if (set == NULL || sig == NULL)
        return -EINVAL;
    long long half = watchdog_half_us();
    if (half > 0)
        fencehttp_notify("WATCHDOG=1");
    for (;;) {
        if (half == 0) {
            if (sigwait(set, sig) == 0)
                return 0;
            continue;
        }
        struct timespec ts = {.tv_sec = (time_t)(half / 1000000), .tv_nsec = (long)(half % 1000000) * 1000};
        int s = sigtimedwait(set, NULL, &ts);
        if (s > 0) {
            *sig = s;
            return 0;
        }
        if (errno == EAGAIN)
            fencehttp_notify("WATCHDOG=1");
    }
}

int fencehttp_reload_tls(fencehttp *h, const char *cert_file, const char *key_file)
{
    char *cert = NULL, *key = NULL, err[512] = "";
    int rc = -1;
    if (h == NULL || cert_file == NULL || key_file == NULL)
        snprintf(err, sizeof(err), "bad arguments");
    else if (fencehttp_load_secrets(NULL, NULL, cert_file, &cert, key_file, &key) != 0)
        snprintf(err, sizeof(err), "the files do not read");
    else if (fencehttp_set_tls(h, cert, key, err, sizeof(err)) == 0)
        rc = 0;
    if (rc == 0)
        fencehttp_log(FENCEHTTP_LOG_INFO, "TLS certificate %s and key %s reloaded: new connections use them",
                      cert_file, key_file);
    else
        fencehttp_log(FENCEHTTP_LOG_ERROR,
                      "TLS certificate %s and key %s refused (%s); the pair in use stays",
                      cert_file ? cert_file : "-", key_file ? key_file : "-", err);
    fencehttp_free_secrets(NULL, cert, key);
    return rc;
}

/* ---- the configuration file ------------------------------------------------ */

int fencehttp_conf_path(int argc, char **argv, const char **path)
{
    if (argv == NULL || path == NULL)
        return -EINVAL;
    *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strncmp(argv[i], "--config=", 9) == 0) {
            *path = argv[i] + 9;
        } else if (strcmp(argv[i], "--config") == 0) {
            if (i + 1 >= argc)
                return -EINVAL;
            *path = argv[++i];
        }
    }
    return *path != NULL && (*path)[0] == '\0' ? -EINVAL : 0;
}

void fencehttp_conf_free(struct fencehttp_conf *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->items[i].where);
        if (c->items[i].arg != NULL) /* may hold a password's path, or a token prefix: wipe */
            memset(c->items[i].arg, 0, strlen(c->items[i].arg));
        free(c->items[i].arg);
    }
    free(c->items);
    free(c);
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* yes/no and its kin: 1, 0, or -1 for anything else. */
static int conf_bool(const char *v)
{
    static const char *const yes[] = {"yes", "true", "on", "1"}, *const no[] = {"no", "false", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(v, yes[i]) == 0)
            return 1;
        if (strcmp(v, no[i]) == 0)
            return 0;
    }
    return -1;
}

/* One line, at where: append its argument to c (or nothing, for a flag set
 * to no). Returns 0 or -EINVAL / -ENOMEM with the reason in errbuf. */
static int conf_line(struct fencehttp_conf *c, const char *where, char *line, const struct option *opts,
                     char *errbuf, size_t errcap)
{
    char *s = trim(line);
    if (*s == '\0' || *s == '#')
        return 0;
    char *eq = strchr(s, '=');
    if (eq == NULL) {
        snprintf(errbuf, errcap, "%s: want key = value", where);
        return -EINVAL;
    }
    *eq = '\0';
    char *key = trim(s), *value = trim(eq + 1);
    if (value[0] == '"') { /* quoted: as written inside, then only a comment */
        char *end = strchr(value + 1, '"'), *rest = end != NULL ? end + 1 : NULL;
        while (rest != NULL && (*rest == ' ' || *rest == '\t'))
            rest++;
        if (rest == NULL || (*rest != '\0' && *rest != '#')) {
            snprintf(errbuf, errcap, "%s: %s: %s", where, key,
                     rest == NULL ? "a quote that does not end" : "after a quoted value, only a comment");
            return -EINVAL;
        }
        *end = '\0';
        value++;
    } else {
        /* A comment starts at a # after a space: a # inside a word stays. */
        for (char *p = value; *p != '\0'; p++)
            if (*p == '#' && (p == value || p[-1] == ' ' || p[-1] == '\t')) {
                *p = '\0';
                break;
            }
        value = trim(value);
        if (strchr(value, '"') != NULL) {
            snprintf(errbuf, errcap, "%s: %s: a quote inside a value not in quotes", where, key);
            return -EINVAL;
        }
    }
    const struct option *o = opts;
    while (o->name != NULL && strcmp(o->name, key) != 0)
        o++;
    if (o->name == NULL || strcmp(key, "config") == 0 || strcmp(key, "check-config") == 0 ||
        strcmp(key, "help") == 0 || strcmp(key, "version") == 0) {
        snprintf(errbuf, errcap, "%s: unknown key '%.64s'", where, key);
        return -EINVAL;
    }
    char *arg;
    if (o->has_arg == no_argument) {
        int on = conf_bool(value);
        if (on < 0) {
            snprintf(errbuf, errcap, "%s: %s wants yes or no", where, key);
            return -EINVAL;
        }
        if (!on)
            return 0;
        arg = malloc(strlen(key) + 3);
        if (arg != NULL)
            sprintf(arg, "--%s", key);
    } else {
        if (*value == '\0') {
            snprintf(errbuf, errcap, "%s: %s wants a value", where, key);
            return -EINVAL;
        }
        arg = malloc(strlen(key) + strlen(value) + 4);
        if (arg != NULL)
            sprintf(arg, "--%s=%s", key, value);
    }
    struct fencehttp_conf_item *v = arg != NULL ? realloc(c->items, (c->n + 1) * sizeof(*v)) : NULL;
    char *w = v != NULL ? strdup(where) : NULL;
    if (w == NULL) {
        if (v != NULL)
            c->items = v;
        free(arg);
        snprintf(errbuf, errcap, "out of memory");
        return -ENOMEM;
    }
    c->items = v;
    c->items[c->n].where = w;
    c->items[c->n++].arg = arg;
    return 0;
}

int fencehttp_conf_read(const char *path, const struct option *opts, struct fencehttp_conf **out,
                        char *errbuf, size_t errcap)
{
    if (path == NULL || opts == NULL || out == NULL) {
        snprintf(errbuf, errcap, "fencehttp_conf_read: bad arguments");
        return -EINVAL;
    }
    FILE *f = fencehttp_fopen_regular(path);
    if (f == NULL) {
        int e = errno;
        snprintf(errbuf, errcap, "%s: %s", path, fencehttp_file_error(e));
        return -e;
    }
    struct fencehttp_conf *c = calloc(1, sizeof(*c));
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned line = 0;
    int rc = c != NULL ? 0 : -ENOMEM;
    while (rc == 0 && (len = getline(&buf, &cap, f)) >= 0) {
        char where[512];
        snprintf(where, sizeof(where), "%s:%u", path, ++line);
        if (strlen(buf) != (size_t)len) {
            snprintf(errbuf, errcap, "%s: a NUL byte", where);
            rc = -EINVAL;
        } else {
            buf[strcspn(buf, "\n")] = '\0';
            rc = conf_line(c, where, buf, opts, errbuf, errcap);
        }
        memset(buf, 0, cap);
    }
    if (rc == 0 && ferror(f)) {
        snprintf(errbuf, errcap, "%s: read error", path);
        rc = -EIO;
    }
    if (rc == -ENOMEM)
        snprintf(errbuf, errcap, "out of memory");
    free(buf);
    fclose(f);
    if (rc != 0) {
        fencehttp_conf_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

int fencehttp_conf_load(int argc, char **argv, const struct option *opts, struct fencehttp_conf **out,
                        char *errbuf, size_t errcap)
{
    const char *path = NULL;
    if (out == NULL) {
        snprintf(errbuf, errcap, "fencehttp_conf_load: bad arguments");
        return -EINVAL;
    }
    *out = NULL;
    if (fencehttp_conf_path(argc, argv, &path) != 0) {
        snprintf(errbuf, errcap, "--config wants a file");
        return -EINVAL;
    }
    return path != NULL ? fencehttp_conf_read(path, opts, out, errbuf, errcap) : 0;
}

int fencehttp_conf_parse(const struct fencehttp_conf *conf, int argc, char **argv,
                         int (*parse)(int argc, char **argv, void *arg), void *arg, const char **where)
{
    if (argc < 1 || argv == NULL || parse == NULL || where == NULL)
        return 2;
    int rc;
    for (size_t i = 0; conf != NULL && i < conf->n; i++) {
        char *item[] = {argv[0], conf->items[i].arg, NULL};
        *where = conf->items[i].where;
        optind = 0; /* getopt starts again */
        rc = parse(2, item, arg);
        *where = NULL;
        if (rc >= 0)
            return rc;
    }
    optind = 0;
    return parse(argc, argv, arg);
}

int fencehttp_differ(const char *a, const char *b)
{
    return a != b && (a == NULL || b == NULL || strcmp(a, b) != 0);
}

void fencehttp_restart_if(struct fencehttp_restart *r, int changed, const char *name)
{
    if (r == NULL || name == NULL || !changed || r->len >= sizeof(r->list))
        return;
    int n = snprintf(r->list + r->len, sizeof(r->list) - r->len, "%s--%s", r->len ? ", " : "", name);
    r->len += n > 0 ? (size_t)n : 0;
}

void fencehttp_restart_log(const struct fencehttp_restart *r)
{
    if (r != NULL && r->len > 0)
        fencehttp_log(FENCEHTTP_LOG_WARN, "SIGHUP: changed, taking effect on restart: %s", r->list);
}
