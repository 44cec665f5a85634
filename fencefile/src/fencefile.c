/*
 * Fenced file writes. Every write runs the same steps under an OFD lock on
 * the fence's lock file: read the fence, fencing_check(), raise the fence,
 * publish the data. The order of the last two is what makes a crash safe:
 *
 *   - The invariant: the fence (the token stored for a file or directory)
 *     is never below the token of any write whose data is visible.
 *   - Replace, file fence in the xattr: the temporary file gets the data
 *     and the new token as its own xattr, is fsynced, and is renamed over
 *     the file. Data and fence are one inode, swapped in by one rename:
 *     before it the old pair is visible, after it the new pair.
 *   - Replace otherwise (sidecar, or a directory fence): the fence is
 *     raised and made durable first, then the data is renamed in. A crash
 *     in between leaves the old data under a raised fence, which refuses
 *     no write the caller's token could not have refused anyway.
 *   - Append: the fence is raised and made durable first, then the data is
 *     appended and fsynced. A crash leaves a prefix of the data, under the
 *     raised fence.
 * The fence only ever goes up (reads take the larger of the xattr and the
 * sidecar), and a kill -9 releases the lock with the process.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <fencefile/fencefile.h>

#define ERRMSG_MAX 768
#define SIDECAR_LEN 21 /* 20 digits and a newline */
#define LOCK_SUFFIX ".fencelock"
#define DIR_LOCK ".fencelock"

struct fencefile {
    struct fencefile_options o;
    char *dir_fence; /* realpath of the fenced directory, or NULL */
    char errmsg[ERRMSG_MAX];
};

static void fmt(char *buf, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t cap, const char *f, ...)
{
    if (buf == NULL || cap == 0)
        return;
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, cap, f, ap);
    va_end(ap);
}

#define fail(f, rc, ...) (fmt((f)->errmsg, sizeof((f)->errmsg), __VA_ARGS__), (rc))

/* A system call failed: -errno with "what path: strerror". */
static int sys_fail(fencefile *f, const char *what, const char *path)
{
    int e = errno ? errno : EIO;
    fmt(f->errmsg, sizeof(f->errmsg), "%s %s: %s", what, path, strerror(e));
    return -e;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

const char *fencefile_strerror(int err)
{
    return fencing_strerror(err);
}

int fencefile_options_init(struct fencefile_options *o)
{
    if (o == NULL)
        return -EINVAL;
    memset(o, 0, sizeof(*o));
    o->mode = 0666;
    o->store = FENCEFILE_STORE_AUTO;
    o->lock_timeout_ms = 10000;
    return 0;
}

int fencefile_new(const struct fencefile_options *o, fencefile **out, char *errbuf, size_t errcap)
{
    struct fencefile_options def;
    if (out == NULL) {
        fmt(errbuf, errcap, "fencefile_new: out is NULL");
        return -EINVAL;
    }
    if (o == NULL) {
        fencefile_options_init(&def);
        o = &def;
    }
    if (o->mode > 07777) {
        fmt(errbuf, errcap, "fencefile_new: mode %o has bits beyond 07777", o->mode);
        return -EINVAL;
    }
    if (o->store != FENCEFILE_STORE_AUTO && o->store != FENCEFILE_STORE_XATTR &&
        o->store != FENCEFILE_STORE_SIDECAR) {
        fmt(errbuf, errcap, "fencefile_new: store must be AUTO, XATTR or SIDECAR");
        return -EINVAL;
    }
    if (o->dir_fence != NULL && o->dir_fence[0] == '\0') {
        fmt(errbuf, errcap, "fencefile_new: dir_fence is empty");
        return -EINVAL;
    }
    fencefile *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        fmt(errbuf, errcap, "fencefile_new: out of memory");
        return -ENOMEM;
    }
    f->o = *o;
    if (o->dir_fence != NULL) {
        f->dir_fence = realpath(o->dir_fence, NULL);
        struct stat st;
        int e = f->dir_fence == NULL          ? errno
                : stat(f->dir_fence, &st) < 0 ? errno
                : S_ISDIR(st.st_mode)         ? 0
                                              : ENOTDIR;
        if (e != 0) {
            fmt(errbuf, errcap, "fencefile_new: directory fence %s: %s", o->dir_fence, strerror(e));
            fencefile_free(f);
            return -e;
        }
    }
    f->o.dir_fence = f->dir_fence;
    *out = f;
    return 0;
}

void fencefile_free(fencefile *f)
{
    if (f == NULL)
        return;
    free(f->dir_fence);
    free(f);
}

const char *fencefile_errmsg(const fencefile *f)
{
    return f == NULL ? "no handle" : f->errmsg;
}

/* ---- the pieces of one step ---- */

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Copy fd to its end into out. Returns 0, or -1 with errno and *read_side
 * telling which side failed. */
static int copy_fd(int in, int out, int *read_side)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            *read_side = 1;
            return -1;
        }
        if (n == 0)
            return 0;
        if (write_all(out, buf, (size_t)n) < 0) {
            *read_side = 0;
            return -1;
        }
    }
}

/* Read fd to its end into a new buffer (the caller frees *buf). */
static int slurp_fd(int in, char **buf, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *b = malloc(cap);
    if (b == NULL)
        return -1;
    for (;;) {
        if (n == cap) {
            char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(b, cap * 2);
            if (nb == NULL) {
                free(b);
                errno = ENOMEM;
                return -1;
            }
            b = nb;
            cap *= 2;
        }
        ssize_t r = read(in, b + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(b);
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    *buf = b;
    *len = n;
    return 0;
}

/* Take the OFD lock of the fence's lock file lockname in dirfd: exclusive
 * (creating the file) for a write, shared for a read. *fd is -1 after a
 * shared request when there is no lock file yet (nothing to read from it). */
static int lock_fence(fencefile *f, int dirfd, const char *lockname, const char *shown, int exclusive,
                      int *fd)
{
    *fd = -1;
    int lfd = -1;
    for (int tries = 0; lfd < 0 && tries < 10; tries++) {
        lfd = openat(dirfd, lockname, (exclusive ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC);
        if (lfd >= 0 || errno != ENOENT)
            break;
        if (!exclusive)
            return 0;
        lfd = openat(dirfd, lockname, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (lfd < 0 && errno != EEXIST)
            break;
    }
    if (lfd < 0)
        return sys_fail(f, "open fence lock", shown);
    struct flock fl;
    memset(&fl, 0, sizeof(fl));
    fl.l_type = exclusive ? F_WRLCK : F_RDLCK;
    fl.l_whence = SEEK_SET;
    uint64_t deadline = now_ms() + f->o.lock_timeout_ms;
    long pause = 1;
    /* Bounded by lock_timeout_ms. OFD locks go with the open file, so a
     * writer killed with -9 releases its lock when its files close. */
    while (fcntl(lfd, F_OFD_SETLK, &fl) < 0) {
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EACCES) {
            int rc = sys_fail(f, "lock", shown);
            close(lfd);
            return rc;
        }
        if (now_ms() >= deadline) {
            close(lfd);
            return fail(f, -ETIMEDOUT, "the fence %s stayed locked by another writer for %llu ms", shown,
                        (unsigned long long)f->o.lock_timeout_ms);
        }
        sleep_ms(pause);
        pause = pause < 10 ? pause * 2 : 10;
    }
    *fd = lfd;
    return 0;
}

/* A stored token: decimal digits, zero-padded in the sidecar. */
static int parse_token(const char *s, size_t len, uint64_t *out)
{
    if (len == 0)
        return -1;
    while (len > 1 && *s == '0')
        s++, len--;
    return fencing_token_parse(s, len, out) == 0 ? 0 : -1;
}

/* The token in a sidecar lock file; 0 when it is empty. */
static int read_sidecar(fencefile *f, int lfd, const char *shown, uint64_t *out)
{
    char buf[64];
    *out = 0;
    if (lfd < 0)
        return 0;
    ssize_t n = pread(lfd, buf, sizeof(buf), 0);
    if (n < 0)
        return sys_fail(f, "read fence", shown);
    if (n == 0)
        return 0;
    if (n != SIDECAR_LEN || buf[SIDECAR_LEN - 1] != '\n' || parse_token(buf, SIDECAR_LEN - 1, out) < 0)
        return fail(f, FENCING_ESTORE, "the fence in %s is not a token: refusing to guess", shown);
    return 0;
}

static int write_sidecar(fencefile *f, int lfd, const char *shown, uint64_t token)
{
    char buf[SIDECAR_LEN + 1];
    snprintf(buf, sizeof(buf), "%020llu\n", (unsigned long long)token);
    ssize_t n;
    do
        n = pwrite(lfd, buf, SIDECAR_LEN, 0);
    while (n < 0 && errno == EINTR);
    if (n != SIDECAR_LEN) {
        if (n >= 0)
            errno = EIO;
        return sys_fail(f, "write fence", shown);
    }
    if (fdatasync(lfd) < 0)
        return sys_fail(f, "fsync fence", shown);
    return 0;
}

/* The token in fd's xattr. *supported is 0 where the file system has no
 * user xattrs. fd -1 reads as no token. */
static int read_xattr(fencefile *f, int fd, const char *shown, uint64_t *out, int *supported)
{
    char buf[32];
    *out = 0;
    *supported = 1;
    if (fd < 0)
        return 0;
    ssize_t n = fgetxattr(fd, FENCEFILE_XATTR, buf, sizeof(buf));
    if (n < 0) {
        if (errno == ENODATA)
            return 0;
        if (errno == ENOTSUP) {
            *supported = 0;
            return 0;
        }
        if (errno == ERANGE)
            return fail(f, FENCING_ESTORE, "the fence %s on %s is not a token", FENCEFILE_XATTR, shown);
        return sys_fail(f, "read " FENCEFILE_XATTR " of", shown);
    }
    if (parse_token(buf, (size_t)n, out) < 0)
        return fail(f, FENCING_ESTORE, "the fence %s on %s is not a token: refusing to guess",
                    FENCEFILE_XATTR, shown);
    return 0;
}

static int write_xattr(fencefile *f, int fd, const char *shown, uint64_t token)
{
    char buf[24];
    int len = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)token);
    if (fsetxattr(fd, FENCEFILE_XATTR, buf, (size_t)len, 0) < 0)
        return sys_fail(f, "set " FENCEFILE_XATTR " on", shown);
    return 0;
}

/* Whether the fence goes to the xattr, given what the file system said. */
static int choose_xattr(fencefile *f, int supported, const char *shown, int *use)
{
    *use = 0;
    if (f->o.store == FENCEFILE_STORE_SIDECAR)
        return 0;
    if (!supported && f->o.store == FENCEFILE_STORE_XATTR)
        return fail(f, -ENOTSUP, "%s: the file system has no user extended attributes", shown);
    *use = supported;
    return 0;
}

/* ---- paths ---- */

/* A file path split into its directory (opened) and its last name. */
struct target {
    const char *path; /* as the caller gave it, for messages */
    char dir[PATH_MAX];
    char base[NAME_MAX + 1];
    int dirfd;
    int ddirfd;                              /* the fenced directory, or -1 */
    char lockname[NAME_MAX + 1];             /* lock file, in dirfd or ddirfd */
    char lockshown[PATH_MAX + NAME_MAX + 2]; /* the lock file, for messages */
};

static int is_lock_name(const char *base)
{
    size_t n = strlen(base), s = strlen(LOCK_SUFFIX);
    return base[0] == '.' && n >= s && strcmp(base + n - s, LOCK_SUFFIX) == 0;
}

/* Is the real path of dir (an open directory) under the fenced one? */
static int under_fence(fencefile *f, const char *dir, const char *shown)
{
    char *real = realpath(dir, NULL);
    if (real == NULL)
        return sys_fail(f, "resolve", dir);
    size_t n = strlen(f->dir_fence);
    int ok = strncmp(real, f->dir_fence, n) == 0 &&
             (real[n] == '\0' || real[n] == '/' || (n == 1 && f->dir_fence[0] == '/'));
    free(real);
    if (!ok)
        return fail(f, -EINVAL, "%s is not under the directory fence %s", shown, f->dir_fence);
    return 0;
}

static void target_close(struct target *t)
{
    if (t->dirfd >= 0)
        close(t->dirfd);
    if (t->ddirfd >= 0)
        close(t->ddirfd);
    t->dirfd = t->ddirfd = -1;
}

static int target_open(fencefile *f, const char *path, struct target *t)
{
    t->path = path;
    t->dirfd = t->ddirfd = -1;
    size_t len = strlen(path);
    if (len == 0 || len >= PATH_MAX)
        return fail(f, -EINVAL, "the path must be 1 to %d bytes", PATH_MAX - 1);
    if (path[len - 1] == '/')
        return fail(f, -EISDIR, "%s names a directory, not a file", path);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (strlen(base) > NAME_MAX - 40)
        return fail(f, -ENAMETOOLONG, "%s: the file name is longer than %d bytes", path, NAME_MAX - 40);
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return fail(f, -EISDIR, "%s names a directory, not a file", path);
    if (is_lock_name(base))
        return fail(f, -EINVAL, "%s is the name of a fence lock file", path);
    strcpy(t->base, base);
    if (slash == NULL)
        strcpy(t->dir, ".");
    else if (slash == path)
        strcpy(t->dir, "/");
    else
        snprintf(t->dir, sizeof(t->dir), "%.*s", (int)(slash - path), path);
    t->dirfd = open(t->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (t->dirfd < 0)
        return sys_fail(f, "open directory", t->dir);
    if (f->dir_fence != NULL) {
        int rc = under_fence(f, t->dir, path);
        if (rc != 0)
            return rc;
        t->ddirfd = open(f->dir_fence, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (t->ddirfd < 0)
            return sys_fail(f, "open directory", f->dir_fence);
        strcpy(t->lockname, DIR_LOCK);
        snprintf(t->lockshown, sizeof(t->lockshown), "%s/%s", f->dir_fence, DIR_LOCK);
    } else {
        snprintf(t->lockname, sizeof(t->lockname), ".%s%s", base, LOCK_SUFFIX);
        snprintf(t->lockshown, sizeof(t->lockshown), "%s/%s", t->dir, t->lockname);
    }
    return 0;
}

static int check_call(fencefile *f, const char *path, uint64_t token, const void *data, size_t len)
{
    if (f == NULL)
        return -EINVAL;
    f->errmsg[0] = '\0';
    if (path == NULL)
        return fail(f, -EINVAL, "path is NULL");
    if (data == NULL && len > 0)
        return fail(f, -EINVAL, "data is NULL");
    if (token == 0)
        return fail(f, FENCING_ENOTOKEN, "no fencing token (0) for %s", path);
    if (token >= FENCING_TOKEN_MAX)
        return fail(f, -EINVAL, "token %llu is not below 2^53", (unsigned long long)token);
    return 0;
}

/* The fence of t under its lock (lfd): the larger of the xattr (*xtok) and
 * the sidecar (*stok). xfd is the file or directory that carries the xattr
 * (-1: none yet). */
static int read_fence(fencefile *f, struct target *t, int lfd, int xfd, const char *xshown, uint64_t *last,
                      int *xsupported, uint64_t *xtok, uint64_t *stok)
{
    int rc = read_xattr(f, xfd, xshown, xtok, xsupported);
    if (rc == 0)
        rc = read_sidecar(f, lfd, t->lockshown, stok);
    *last = *xtok > *stok ? *xtok : *stok;
    return rc;
}

static int refuse(fencefile *f, const char *op, const char *path, uint64_t token, uint64_t last, int rc)
{
    if (rc == FENCING_ESTALE && f->dir_fence != NULL)
        return fail(f, rc, "%s %s refused: token %llu is older than %llu, the last token that wrote under %s",
                    op, path, (unsigned long long)token, (unsigned long long)last, f->dir_fence);
    if (rc == FENCING_ESTALE)
        return fail(f, rc, "%s %s refused: token %llu is older than %llu, the last token that wrote it", op,
                    path, (unsigned long long)token, (unsigned long long)last);
    return fail(f, rc, "%s %s: %s", op, path, fencing_strerror(rc));
}

/* ---- replace ---- */

static int make_temp(fencefile *f, struct target *t, unsigned mode, char *name, size_t cap, int *fd)
{
    static unsigned counter; /* atomic: handles may live in several threads */
    for (int i = 0; i < 100; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned long r = (unsigned long)ts.tv_nsec ^ ((unsigned long)getpid() << 16) ^
                          (__atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED) * 2654435761u);
        int n = snprintf(name, cap, ".%s.%08lx.fencetmp", t->base, r & 0xffffffffUL);
        if (n < 0 || (size_t)n >= cap || n > NAME_MAX)
            return fail(f, -ENAMETOOLONG, "%s: the file name is too long", t->path);
        *fd = openat(t->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (*fd >= 0)
            return 0;
        if (errno != EEXIST)
            break;
    }
    return sys_fail(f, "create a temporary file in", t->dir);
}

static int do_write(fencefile *f, const char *path, uint64_t token, const void *data, size_t len, int src,
                    uint64_t *last_out)
{
    int rc = check_call(f, path, token, data, len);
    if (rc != 0)
        return rc;
    struct target t;
    char tmp[2 * NAME_MAX] = "";
    int tfd = -1, lfd = -1, cur = -1;
    rc = target_open(f, path, &t);
    if (rc != 0)
        goto out;

    /* The data goes to the temporary file before the lock: a slow producer
     * never holds up other writers, and the check happens at the last
     * moment, right before the rename. */
    rc = make_temp(f, &t, f->o.mode, tmp, sizeof(tmp), &tfd);
    if (rc != 0)
        goto out;
    if (src >= 0) {
        int read_side = 0;
        if (copy_fd(src, tfd, &read_side) < 0) {
            rc = read_side ? sys_fail(f, "read the data for", path)
                           : sys_fail(f, "write a temporary file for", path);
            goto out;
        }
    } else if (write_all(tfd, data, len) < 0) {
        rc = sys_fail(f, "write a temporary file for", path);
        goto out;
    }

    rc = lock_fence(f, t.ddirfd >= 0 ? t.ddirfd : t.dirfd, t.lockname, t.lockshown, 1, &lfd);
    if (rc != 0)
        goto out;
    cur = openat(t.dirfd, t.base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (cur < 0 && errno != ENOENT) {
        rc = errno == ELOOP ? fail(f, -ELOOP, "%s is a symbolic link: give the file it points to", path)
                            : sys_fail(f, "open", path);
        goto out;
    }
    struct stat st;
    if (cur >= 0) {
        if (fstat(cur, &st) < 0) {
            rc = sys_fail(f, "stat", path);
            goto out;
        }
        if (!S_ISREG(st.st_mode)) {
            rc = fail(f, -EINVAL, "%s is not a regular file", path);
            goto out;
        }
    }
    uint64_t last = 0, xtok = 0, stok = 0;
    int xsupported = 1;
    if (t.ddirfd >= 0)
        rc = read_fence(f, &t, lfd, t.ddirfd, f->dir_fence, &last, &xsupported, &xtok, &stok);
    else
        rc = read_fence(f, &t, lfd, cur >= 0 ? cur : tfd, path, &last, &xsupported, &xtok, &stok);
    if (rc != 0)
        goto out;
    if (last_out != NULL)
        *last_out = last;
    rc = fencing_check(last, token);
    if (rc != 0) {
        rc = refuse(f, "write", path, token, last, rc);
        goto out;
    }
    int use_xattr = 0;
    rc = choose_xattr(f, xsupported, t.ddirfd >= 0 ? f->dir_fence : path, &use_xattr);
    if (rc != 0)
        goto out;
    /* A replaced file keeps its permission bits (the umask shaped the
     * temporary file's). */
    if (cur >= 0 && fchmod(tfd, st.st_mode & 07777) < 0) {
        rc = sys_fail(f, "chmod a temporary file for", path);
        goto out;
    }

    /* Raise the fence. A file fence in the xattr travels with the data, so
     * it is raised by the rename itself; any other fence is raised and made
     * durable before the data becomes visible. */
    if (use_xattr && t.ddirfd < 0) {
        rc = write_xattr(f, tfd, path, token);
    } else if (use_xattr) {
        if (token > xtok && (rc = write_xattr(f, t.ddirfd, f->dir_fence, token)) == 0 && fsync(t.ddirfd) < 0)
            rc = sys_fail(f, "fsync", f->dir_fence);
    } else if (token > stok) {
        /* Compared with the sidecar, not the fence: a file fence that was in
         * the old file's xattr goes away with the old file. */
        rc = write_sidecar(f, lfd, t.lockshown, token);
        /* The lock file's first fence must survive a power loss as well as
         * the data: its directory entry may be as new as this call. */
        if (rc == 0 && stok == 0 && fsync(t.ddirfd >= 0 ? t.ddirfd : t.dirfd) < 0)
            rc = sys_fail(f, "fsync", t.ddirfd >= 0 ? f->dir_fence : t.dir);
    }
    if (rc != 0)
        goto out;
    if (fsync(tfd) < 0) {
        rc = sys_fail(f, "fsync a temporary file for", path);
        goto out;
    }
    if (renameat(t.dirfd, tmp, t.dirfd, t.base) < 0) {
        rc = sys_fail(f, "rename a temporary file to", path);
        goto out;
    }
    tmp[0] = '\0';
    if (fsync(t.dirfd) < 0)
        rc = sys_fail(f, "fsync", t.dir);
out:
    if (tmp[0] != '\0' && t.dirfd >= 0)
        unlinkat(t.dirfd, tmp, 0);
    if (tfd >= 0)
        close(tfd);
    if (cur >= 0)
        close(cur);
    if (lfd >= 0)
        close(lfd); /* releases the lock, after the rename is durable */
    target_close(&t);
    return rc;
}

int fencefile_write(fencefile *f, const char *path, uint64_t token, const void *data, size_t len,
                    uint64_t *last_out)
{
    return do_write(f, path, token, data, len, -1, last_out);
}

int fencefile_write_fd(fencefile *f, const char *path, uint64_t token, int fd, uint64_t *last_out)
{
    if (f != NULL && fd < 0)
        return fail(f, -EINVAL, "fd %d is not a file descriptor", fd);
    return do_write(f, path, token, NULL, 0, fd, last_out);
}

/* ---- append ---- */

static int do_append(fencefile *f, const char *path, uint64_t token, const void *data, size_t len,
                     uint64_t *last_out)
{
    int rc = check_call(f, path, token, data, len);
    if (rc != 0)
        return rc;
    struct target t;
    int lfd = -1, fd = -1, made = 0;
    rc = target_open(f, path, &t);
    if (rc != 0)
        goto out;
    rc = lock_fence(f, t.ddirfd >= 0 ? t.ddirfd : t.dirfd, t.lockname, t.lockshown, 1, &lfd);
    if (rc != 0)
        goto out;
    fd = openat(t.dirfd, t.base, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno != ENOENT) {
        rc = errno == ELOOP ? fail(f, -ELOOP, "%s is a symbolic link: give the file it points to", path)
                            : sys_fail(f, "open", path);
        goto out;
    }
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
        rc = fail(f, -EINVAL, "%s is not a regular file", path);
        goto out;
    }
    uint64_t last = 0, xtok = 0, stok = 0;
    int xsupported = 1;
    int xfd = t.ddirfd >= 0 ? t.ddirfd : fd;
    const char *xshown = t.ddirfd >= 0 ? f->dir_fence : path;
    rc = read_fence(f, &t, lfd, xfd, xshown, &last, &xsupported, &xtok, &stok);
    if (rc != 0)
        goto out;
    if (last_out != NULL)
        *last_out = last;
    rc = fencing_check(last, token);
    if (rc != 0) {
        rc = refuse(f, "append to", path, token, last, rc);
        goto out;
    }
    if (fd < 0) {
        /* Created only once admitted: a refused append leaves no file. */
        fd = openat(t.dirfd, t.base, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    f->o.mode);
        if (fd < 0) {
            rc = sys_fail(f, "create", path);
            goto out;
        }
        made = 1;
        if (t.ddirfd < 0) {
            xfd = fd;
            rc = read_xattr(f, fd, path, &xtok, &xsupported);
            if (rc != 0)
                goto out;
        }
    }
    int use_xattr = 0;
    rc = choose_xattr(f, xsupported, xshown, &use_xattr);
    if (rc != 0)
        goto out;

    /* Raise the fence and make it durable before any byte of the data. */
    if (use_xattr) {
        if (token > xtok && (rc = write_xattr(f, xfd, xshown, token)) == 0 && fsync(xfd) < 0)
            rc = sys_fail(f, "fsync", xshown);
    } else if (token > stok) {
        rc = write_sidecar(f, lfd, t.lockshown, token);
        if (rc == 0 && stok == 0 && fsync(t.ddirfd >= 0 ? t.ddirfd : t.dirfd) < 0)
            rc = sys_fail(f, "fsync", t.ddirfd >= 0 ? f->dir_fence : t.dir);
    }
    if (rc != 0)
        goto out;
    if (made && fsync(t.dirfd) < 0) {
        rc = sys_fail(f, "fsync", t.dir);
        goto out;
    }
    if (write_all(fd, data, len) < 0) {
        rc = sys_fail(f, "append to", path);
        goto out;
    }
    if (fsync(fd) < 0)
        rc = sys_fail(f, "fsync", path);
out:
    if (fd >= 0)
        close(fd);
    if (lfd >= 0)
        close(lfd);
    target_close(&t);
    return rc;
}

int fencefile_append(fencefile *f, const char *path, uint64_t token, const void *data, size_t len,
                     uint64_t *last_out)
{
    return do_append(f, path, token, data, len, last_out);
}

int fencefile_append_fd(fencefile *f, const char *path, uint64_t token, int fd, uint64_t *last_out)
{
    int rc = check_call(f, path, token, NULL, 0);
    if (rc != 0)
        return rc;
    if (fd < 0)
        return fail(f, -EINVAL, "fd %d is not a file descriptor", fd);
    char *buf = NULL;
    size_t len = 0;
    /* Read before the lock: a slow producer must not hold up other writers. */
    if (slurp_fd(fd, &buf, &len) < 0)
        return sys_fail(f, "read the data for", path);
    rc = do_append(f, path, token, buf, len, last_out);
    free(buf);
    return rc;
}

/* ---- reading a fence ---- */

static int last_of_dir(fencefile *f, const char *dir, struct fencefile_fence *out)
{
    int lfd = -1, supported = 1;
    uint64_t xtok = 0, stok = 0;
    char shown[PATH_MAX + 32];
    snprintf(shown, sizeof(shown), "%s/%s", dir, DIR_LOCK);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return sys_fail(f, "open directory", dir);
    int rc = lock_fence(f, dfd, DIR_LOCK, shown, 0, &lfd);
    if (rc == 0)
        rc = read_xattr(f, dfd, dir, &xtok, &supported);
    if (rc == 0)
        rc = read_sidecar(f, lfd, shown, &stok);
    if (rc == 0) {
        out->directory = 1;
        out->token = xtok > stok ? xtok : stok;
        out->store = out->token == 0 ? FENCEFILE_STORE_NONE
                     : xtok >= stok  ? FENCEFILE_STORE_XATTR
                                     : FENCEFILE_STORE_SIDECAR;
    }
    if (lfd >= 0)
        close(lfd);
    close(dfd);
    return rc;
}

int fencefile_last(fencefile *f, const char *path, struct fencefile_fence *out)
{
    if (f == NULL)
        return -EINVAL;
    f->errmsg[0] = '\0';
    if (out == NULL)
        return fail(f, -EINVAL, "out is NULL");
    memset(out, 0, sizeof(*out));
    out->store = FENCEFILE_STORE_NONE;
    if (f->dir_fence != NULL) {
        if (path != NULL) {
            struct stat st;
            int isdir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
            char *copy = strdup(path);
            if (copy == NULL)
                return fail(f, -ENOMEM, "out of memory");
            char *slash = strrchr(copy, '/');
            const char *dir = isdir           ? copy
                              : slash == NULL ? "."
                              : slash == copy ? "/"
                                              : (*slash = '\0', copy);
            int rc = under_fence(f, dir, path);
            free(copy);
            if (rc != 0)
                return rc;
        }
        return last_of_dir(f, f->dir_fence, out);
    }
    if (path == NULL)
        return fail(f, -EINVAL, "path is NULL");
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return last_of_dir(f, path, out);

    struct target t;
    int lfd = -1, fd = -1, supported = 1;
    uint64_t xtok = 0, stok = 0;
    int rc = target_open(f, path, &t);
    if (rc != 0)
        goto out;
    rc = lock_fence(f, t.dirfd, t.lockname, t.lockshown, 0, &lfd);
    if (rc != 0)
        goto out;
    fd = openat(t.dirfd, t.base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno != ENOENT) {
        rc = sys_fail(f, "open", path);
        goto out;
    }
    rc = read_xattr(f, fd, path, &xtok, &supported);
    if (rc == 0)
        rc = read_sidecar(f, lfd, t.lockshown, &stok);
    if (rc == 0) {
        out->token = xtok > stok ? xtok : stok;
        out->store = out->token == 0 ? FENCEFILE_STORE_NONE
                     : xtok >= stok  ? FENCEFILE_STORE_XATTR
                                     : FENCEFILE_STORE_SIDECAR;
    }
out:
    if (fd >= 0)
        close(fd);
    if (lfd >= 0)
        close(lfd);
    target_close(&t);
    return rc;
}
