/*
 * Fenced file writes. Every write runs the same steps under an OFD lock on
 * the fence's lock file: read the fence, fencing_check(), raise the fence,
 * publish the data. The order of the last two is what makes a crash safe:
 *
 *   - The invariant: the fence (the token stored for a file or directory)
 *     is never below the token of any write whose data is visible.
 *   - The fence is kept in the lock file (the sidecar) by every writer,
 *     and also in the xattr where the file system has user xattrs. Reads
 *     take the larger of the two, so a writer that sees no xattrs (an NFS
 *     client without them) still sees a fence another one raised.
 *   - Replace: the temporary file gets the data, is fsynced, and is renamed
 *     over the file. The sidecar is raised and made durable before the
 *     rename; a file fence's xattr is set on the temporary file and so
 *     arrives with the data, by one rename.
 *   - Append: the fence is raised and made durable first, then the data is
 *     appended and fsynced. A crash leaves a prefix of the data, under the
 *     raised fence.
 *   - One file, one fence: a file with several names (hard links), a file
 *     under a directory fence written with a file fence, and the reverse,
 *     are refused; see check_one_fence.
 * The fence only ever goes up, and a kill -9 releases the lock with the
 * process.
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
/* The byte of a data file that an append locks (an OFD lock): far past any
 * real size, so that it meets no lock an application takes on its data. */
#define INODE_LOCK_AT ((off_t)1 << 62)
#define WALK_MAX 4096 /* directories between a file and the root, at most */

struct fencefile {
    struct fencefile_options o;
    char *dir_fence; /* the fenced directory as resolved, for messages */
    int dfd;         /* the fenced directory, opened once; -1 without */
    dev_t ddev;
    ino_t dino;
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

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
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
    f->dfd = -1;
    if (o->dir_fence != NULL) {
        /* Opened once: every call checks its files against this directory
         * itself, never against its path resolved again. */
        f->dfd = open(o->dir_fence, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat st;
        int e = f->dfd < 0 ? errno : fstat(f->dfd, &st) < 0 ? errno : 0;
        if (e == 0) {
            f->ddev = st.st_dev;
            f->dino = st.st_ino;
            f->dir_fence = realpath(o->dir_fence, NULL);
            if (f->dir_fence == NULL)
                f->dir_fence = strdup(o->dir_fence);
            e = f->dir_fence == NULL ? ENOMEM : 0;
        }
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
    close_fd(&f->dfd);
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

/* Copy fd to its end into out, 64 KiB at a time. Returns 0, or -1 with
 * errno and *read_side telling which side failed. */
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

/* An OFD lock of type on one byte at start (len 0: from start to the end
 * of any file), waited for until deadline. OFD locks go with the open
 * file, so a writer killed with -9 releases its locks when its files close. */
static int ofd_lock(fencefile *f, int fd, short type, off_t start, off_t len, const char *shown,
                    uint64_t deadline)
{
    struct flock fl;
    memset(&fl, 0, sizeof(fl));
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = start;
    fl.l_len = len;
    long pause = 1;
    while (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EACCES)
            return sys_fail(f, "lock", shown);
        if (now_ms() >= deadline)
            return fail(f, -ETIMEDOUT, "%s stayed locked by another writer for %llu ms", shown,
                        (unsigned long long)f->o.lock_timeout_ms);
        sleep_ms(pause);
        pause = pause < 10 ? pause * 2 : 10;
    }
    return 0;
}

/* A lock file must be a regular file of its own: a FIFO would hang the
 * open or the read, and a second link would put the sidecar into another
 * file. */
static int check_lock_file(fencefile *f, const struct stat *st, const char *shown)
{
    if (!S_ISREG(st->st_mode))
        return fail(f, -EINVAL, "the fence lock %s is not a regular file: refusing to use it", shown);
    if (st->st_nlink > 1)
        return fail(f, -EMLINK, "the fence lock %s has %lu links: refusing to keep a fence in another file",
                    shown, (unsigned long)st->st_nlink);
    return 0;
}

/*
 * Take the OFD lock of the fence's lock file lockname in dirfd: exclusive
 * (creating the file) for a write, shared for a read. *fd is -1 after a
 * shared request when there is no lock file yet (nothing to read from it);
 * *created tells that this call made the file. Once locked, the file must
 * still be the one at lockname: a call that made it and was refused removes
 * it again (drop_new_lock), and a waiter holding the lock of a removed file
 * would exclude no one.
 */
static int lock_fence(fencefile *f, int dirfd, const char *lockname, const char *shown, int exclusive,
                      int *fd, int *created)
{
    *fd = -1;
    *created = 0;
    uint64_t deadline = now_ms() + f->o.lock_timeout_ms;
    for (int tries = 0;; tries++) {
        struct stat st, now;
        int lfd, made = 0, rc;
        if (fstatat(dirfd, lockname, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            if ((rc = check_lock_file(f, &st, shown)) != 0)
                return rc;
            lfd = openat(dirfd, lockname,
                         (exclusive ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        } else if (errno != ENOENT) {
            return sys_fail(f, "stat fence lock", shown);
        } else if (!exclusive) {
            return 0;
        } else {
            lfd = openat(dirfd, lockname, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                         0666);
            made = lfd >= 0;
        }
        if (lfd < 0) {
            /* Made or removed by another writer in between: look again. */
            if ((errno == ENOENT || errno == EEXIST) && tries < 1000 && now_ms() < deadline)
                continue;
            return sys_fail(f, "open fence lock", shown);
        }
        /* What was opened is checked again: it may not be what was looked
         * at a moment before. */
        rc = fstat(lfd, &st) < 0 ? sys_fail(f, "stat fence lock", shown) : check_lock_file(f, &st, shown);
        if (rc != 0) {
            close(lfd);
            return rc;
        }
        rc = ofd_lock(f, lfd, exclusive ? F_WRLCK : F_RDLCK, 0, 0, shown, deadline);
        if (rc != 0) {
            close(lfd);
            return rc == -ETIMEDOUT ? fail(f, rc, "the fence %s stayed locked by another writer for %llu ms",
                                           shown, (unsigned long long)f->o.lock_timeout_ms)
                                    : rc;
        }
        if (fstatat(dirfd, lockname, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st.st_dev &&
            now.st_ino == st.st_ino) {
            *fd = lfd;
            *created = made;
            return 0;
        }
        close(lfd);
        if (now_ms() >= deadline || tries >= 1000)
            return fail(f, -ETIMEDOUT, "the fence lock %s kept being replaced for %llu ms", shown,
                        (unsigned long long)f->o.lock_timeout_ms);
    }
}

/* A refused call that made the lock file leaves nothing behind: the file
 * is removed while still locked, if no fence went into it. */
static void drop_new_lock(int dirfd, const char *lockname, int lfd, int created)
{
    struct stat st;
    if (created && lfd >= 0 && fstat(lfd, &st) == 0 && st.st_size == 0)
        unlinkat(dirfd, lockname, 0);
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

/* Whether the fence goes to the xattr too, given what the file system
 * said. The sidecar gets it in every case. */
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

/* A data file is a regular file with one name. Two names would be two lock
 * files and two sidecars for one file, which exclude nothing: an append
 * through one name could land below a fence raised through the other. */
static int check_data_file(fencefile *f, const struct stat *st, const char *path)
{
    if (!S_ISREG(st->st_mode))
        return fail(f, -EINVAL, "%s is not a regular file", path);
    if (st->st_nlink > 1)
        return fail(f, -EMLINK,
                    "%s has %lu hard links: a fenced file must have one name (copy it to break the links)",
                    path, (unsigned long)st->st_nlink);
    return 0;
}

/* ---- paths ---- */

/* A file path split into its directory (opened) and its last name. */
struct target {
    const char *path; /* as the caller gave it, for messages */
    char dir[PATH_MAX];
    char base[NAME_MAX + 1];
    int dirfd;
    int ddirfd;                              /* the fenced directory (the handle's), or -1 */
    int lockdir;                             /* where the lock file is: dirfd or ddirfd */
    char lockname[NAME_MAX + 1];             /* lock file, in lockdir */
    char lockshown[PATH_MAX + NAME_MAX + 2]; /* the lock file, for messages */
};

static int is_lock_name(const char *base)
{
    size_t n = strlen(base), s = strlen(LOCK_SUFFIX);
    return base[0] == '.' && n >= s && strcmp(base + n - s, LOCK_SUFFIX) == 0;
}

static void target_close(struct target *t)
{
    close_fd(&t->dirfd);
    t->ddirfd = -1; /* the handle's */
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
    /* The directory is opened once; everything after goes through dirfd,
     * whatever its path comes to name meanwhile. */
    t->dirfd = open(t->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (t->dirfd < 0)
        return sys_fail(f, "open directory", t->dir);
    if (f->dfd >= 0) {
        t->ddirfd = t->lockdir = f->dfd;
        strcpy(t->lockname, DIR_LOCK);
        snprintf(t->lockshown, sizeof(t->lockshown), "%s/%s", f->dir_fence, DIR_LOCK);
    } else {
        t->lockdir = t->dirfd;
        snprintf(t->lockname, sizeof(t->lockname), ".%s%s", base, LOCK_SUFFIX);
        snprintf(t->lockshown, sizeof(t->lockshown), "%s/%s", t->dir, t->lockname);
    }
    return 0;
}

/* The path of an open directory, for a message only. */
static void fd_path(int fd, const char *fallback, char *buf, size_t cap)
{
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, buf, cap - 1);
    if (n <= 0)
        n = (ssize_t)(stpncpy(buf, fallback, cap - 1) - buf);
    buf[n] = '\0';
}

/*
 * Walk from the directory dirfd up to the root through "..": on the
 * directories themselves, never by their names, so that no symbolic link
 * swung meanwhile can change the answer. *under: the handle's fenced
 * directory is on the way (dirfd itself included). *other: the path of the
 * first other directory on the way that has a directory fence's lock file,
 * or "" if none. A directory this process may not search ends the walk.
 */
static int walk_up(fencefile *f, int dirfd, int *under, char *other, size_t cap)
{
    *under = 0;
    other[0] = '\0';
    int cur = openat(dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0)
        return sys_fail(f, "open directory of", "a file");
    for (int depth = 0; depth < WALK_MAX; depth++) {
        struct stat st, up_st, lk;
        if (fstat(cur, &st) < 0)
            break;
        if (f->dfd >= 0 && st.st_dev == f->ddev && st.st_ino == f->dino)
            *under = 1;
        else if (other[0] == '\0' && fstatat(cur, DIR_LOCK, &lk, AT_SYMLINK_NOFOLLOW) == 0)
            fd_path(cur, "a directory above it", other, cap);
        if (other[0] != '\0' && (*under || f->dfd < 0))
            break;
        int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (up < 0)
            break;
        if (fstat(up, &up_st) < 0 || (up_st.st_dev == st.st_dev && up_st.st_ino == st.st_ino)) {
            close(up);
            break; /* the root */
        }
        close(cur);
        cur = up;
    }
    close(cur);
    return 0;
}

/*
 * One file, one fence. A file under a directory fence written with a file
 * fence of its own (or the reverse, or under two directory fences) would be
 * checked against two fences that know nothing of each other: token 5 over
 * a file fence of 100, then file-fence writes admitted below 100. So a
 * file-fence write refuses a file under a directory that has a directory
 * fence's lock file; a directory-fence write refuses a file that has its
 * own lock file (or, see the callers, its own xattr fence), or that is
 * under a second fenced directory.
 *
 * Why the two kinds cannot both pass at once: each writer creates its own
 * lock file (lock_fence) before it looks for the other's, so of two
 * writers racing the second to look sees the first one's lock file. A
 * refused call removes a lock file it made (drop_new_lock), so a mistake
 * leaves nothing that refuses the right kind later.
 */
static int check_one_fence(fencefile *f, struct target *t)
{
    int under = 0;
    char other[PATH_MAX];
    int rc = walk_up(f, t->dirfd, &under, other, sizeof(other));
    if (rc != 0)
        return rc;
    if (f->dfd >= 0 && !under)
        return fail(f, -EINVAL, "%s is not under the directory fence %s", t->path, f->dir_fence);
    if (other[0] != '\0' && f->dfd >= 0)
        return fail(f, -EEXIST, "%s is also under the directory fence %s: a file takes one fence", t->path,
                    other);
    if (other[0] != '\0')
        return fail(
            f, -EEXIST,
            "%s is under the directory fence %s: write it with that fence (--dir), not a fence of its own",
            t->path, other);
    char own[sizeof(t->base) + sizeof(LOCK_SUFFIX) + 1];
    struct stat st;
    snprintf(own, sizeof(own), ".%s%s", t->base, LOCK_SUFFIX);
    if (f->dfd >= 0 && fstatat(t->dirfd, own, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return fail(f, -EEXIST, "%s has a fence of its own (%s/%s): a file takes one fence", t->path, t->dir,
                    own);
    return 0;
}

/* A directory-fence write over a file that carries a file fence in its
 * xattr (copied with it, or from a file-fence write). */
static int refuse_own_xattr(fencefile *f, struct target *t, int fd)
{
    uint64_t tok = 0;
    int supported = 1;
    int rc = read_xattr(f, fd, t->path, &tok, &supported);
    if (rc == 0 && tok > 0)
        rc = fail(f, -EEXIST, "%s has a fence of its own (%s %llu): a file takes one fence", t->path,
                  FENCEFILE_XATTR, (unsigned long long)tok);
    return rc;
}

/*
 * Open the data file (flags: O_RDONLY, or O_WRONLY | O_APPEND) into *fd and
 * *st; *fd is -1 (and 0 returned) when there is none. Anything but a regular
 * file is refused before it is opened: opening a FIFO or a device can block
 * or act. A write (one_name) also refuses a file with several links.
 */
static int open_data(fencefile *f, struct target *t, int flags, int one_name, int *fd, struct stat *st)
{
    *fd = -1;
    if (fstatat(t->dirfd, t->base, st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : sys_fail(f, "stat", t->path);
    if (S_ISLNK(st->st_mode))
        return fail(f, -ELOOP, "%s is a symbolic link: give the file it points to", t->path);
    if (!S_ISREG(st->st_mode))
        return fail(f, -EINVAL, "%s is not a regular file", t->path);
    *fd = openat(t->dirfd, t->base, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0)
        return errno == ENOENT ? 0 : sys_fail(f, "open", t->path);
    /* What was opened is looked at again: it may not be what was stat'ed. */
    if (fstat(*fd, st) < 0)
        return sys_fail(f, "stat", t->path);
    if (!S_ISREG(st->st_mode))
        return fail(f, -EINVAL, "%s is not a regular file", t->path);
    return one_name ? check_data_file(f, st, t->path) : 0;
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

/* The fence under its lock (lfd): the larger of the xattr of xfd (the
 * file, or the fenced directory; -1: none yet) and the sidecar. */
static int read_fence(fencefile *f, struct target *t, int lfd, int xfd, const char *xshown, uint64_t *last,
                      int *xsupported, uint64_t *xtok, uint64_t *stok)
{
    int rc = read_xattr(f, xfd, xshown, xtok, xsupported);
    if (rc == 0)
        rc = read_sidecar(f, lfd, t->lockshown, stok);
    *last = *xtok > *stok ? *xtok : *stok;
    return rc;
}

/* Raise the sidecar to token, durably, before any data shows. A new lock
 * file's directory entry is made durable too: it may be as new as the
 * call. The sidecar is the durable fence: once it holds the token, an
 * xattr raised alongside needs no fsync of its own (reads take the larger
 * of the two, so an xattr a crash took back changes nothing). */
static int raise_sidecar(fencefile *f, struct target *t, int lfd, uint64_t token, uint64_t stok)
{
    if (token <= stok)
        return 0;
    int rc = write_sidecar(f, lfd, t->lockshown, token);
    if (rc == 0 && stok == 0 && fsync(t->lockdir) < 0)
        rc = sys_fail(f, "fsync", t->ddirfd >= 0 ? f->dir_fence : t->dir);
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

/* The temporary file of a replace: unnamed (O_TMPFILE) where the file
 * system and /proc allow it, else named; created 0600 either way. */
struct temp {
    int fd;
    int unnamed;
    char name[2 * NAME_MAX]; /* its name once it has one, "" else */
};

static int temp_name(fencefile *f, struct target *t, char *name, size_t cap)
{
    static unsigned counter; /* atomic: handles may live in several threads */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long r = (unsigned long)ts.tv_nsec ^ ((unsigned long)getpid() << 16) ^
                      (__atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED) * 2654435761u);
    int n = snprintf(name, cap, ".%s.%08lx.fencetmp", t->base, r & 0xffffffffUL);
    if (n < 0 || (size_t)n >= cap || n > NAME_MAX)
        return fail(f, -ENAMETOOLONG, "%s: the file name is too long", t->path);
    return 0;
}

/* Private from the start: nobody but its owner (and root) can open it
 * while the data goes in, and a writer killed meanwhile leaves nothing
 * (unnamed) or a 0600 file (named). */
static int make_temp(fencefile *f, struct target *t, struct temp *tp)
{
    tp->name[0] = '\0';
    tp->unnamed = 0;
    /* An unnamed file is given a name by linkat through /proc/self/fd. */
    if (access("/proc/self/fd", X_OK) == 0) {
        tp->fd = openat(t->dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
        if (tp->fd >= 0) {
            tp->unnamed = 1;
            return 0;
        }
    }
    for (int i = 0; i < 100; i++) {
        int rc = temp_name(f, t, tp->name, sizeof(tp->name));
        if (rc != 0)
            return rc;
        tp->fd = openat(t->dirfd, tp->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (tp->fd >= 0)
            return 0;
        if (errno != EEXIST)
            break;
    }
    tp->name[0] = '\0';
    return sys_fail(f, "create a temporary file in", t->dir);
}

/* Put the temporary file in place of the file: an unnamed one gets a name
 * first (linkat cannot replace), then one rename. */
static int publish_temp(fencefile *f, struct target *t, struct temp *tp)
{
    for (int i = 0; tp->unnamed && tp->name[0] == '\0' && i < 100; i++) {
        char proc[64];
        int rc = temp_name(f, t, tp->name, sizeof(tp->name));
        if (rc != 0)
            return rc;
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", tp->fd);
        if (linkat(AT_FDCWD, proc, t->dirfd, tp->name, AT_SYMLINK_FOLLOW) == 0)
            break;
        tp->name[0] = '\0';
        if (errno != EEXIST)
            return sys_fail(f, "link a temporary file in", t->dir);
    }
    if (tp->name[0] == '\0')
        return fail(f, -EEXIST, "%s: no free temporary name", t->dir);
    if (renameat(t->dirfd, tp->name, t->dirfd, t->base) < 0)
        return sys_fail(f, "rename a temporary file to", t->path);
    tp->name[0] = '\0';
    return 0;
}

/* The process's umask, without changing it (umask(2) would, for every
 * thread): from /proc; 077, the most private, where that cannot be read. */
static mode_t process_umask(void)
{
    mode_t m = 077;
    FILE *fp = fopen("/proc/self/status", "re");
    if (fp == NULL)
        return m;
    char line[256];
    while (fgets(line, sizeof(line), fp) != NULL) {
        unsigned v;
        if (sscanf(line, "Umask: %o", &v) == 1) {
            m = (mode_t)(v & 0777);
            break;
        }
    }
    fclose(fp);
    return m;
}

/* Give fd the owner and group of st where this process may (root: both;
 * anyone: a group it is in). Otherwise it stays the writer's, as any file
 * written by rename does. */
static void set_owner(int fd, const struct stat *st)
{
    if (fchown(fd, st->st_uid, st->st_gid) == 0)
        return;
    if (fchown(fd, (uid_t)-1, st->st_gid) != 0) {
        /* Not in that group either: the writer's group stays, as said. */
    }
}

/* Copy the extended attributes of from to the temporary file, but the
 * fence: the ACL (system.posix_acl_access) and user.*, and security.* and
 * trusted.* where this process may set them. An ACL that cannot be copied
 * fails the write: the group bits of the mode mean the ACL's mask, and
 * without the ACL they would open the file to its group. */
static int copy_xattrs(fencefile *f, int from, int to, const char *path)
{
    ssize_t n = flistxattr(from, NULL, 0);
    if (n < 0)
        return errno == ENOTSUP ? 0 : sys_fail(f, "list the attributes of", path);
    if (n == 0)
        return 0;
    char *names = malloc((size_t)n + 1);
    char *val = malloc(XATTR_SIZE_MAX);
    int rc = 0;
    if (names == NULL || val == NULL) {
        rc = fail(f, -ENOMEM, "out of memory");
        goto out;
    }
    n = flistxattr(from, names, (size_t)n);
    if (n < 0) {
        rc = sys_fail(f, "list the attributes of", path);
        goto out;
    }
    names[n] = '\0';
    for (char *name = names; name < names + n && rc == 0; name += strlen(name) + 1) {
        if (strcmp(name, FENCEFILE_XATTR) == 0)
            continue;
        int acl = strncmp(name, "system.posix_acl", 16) == 0;
        ssize_t len = fgetxattr(from, name, val, XATTR_SIZE_MAX);
        if (len >= 0 && fsetxattr(to, name, val, (size_t)len, 0) == 0)
            continue;
        if (errno == ENODATA)
            continue; /* removed meanwhile */
        if (acl || (errno != EPERM && errno != EACCES && errno != ENOTSUP))
            rc = sys_fail(f, name, path);
    }
out:
    free(names);
    free(val);
    return rc;
}

static int do_write(fencefile *f, const char *path, uint64_t token, const void *data, size_t len, int src,
                    uint64_t *last_out)
{
    int rc = check_call(f, path, token, data, len);
    if (rc != 0)
        return rc;
    struct target t;
    struct temp tmp = {.fd = -1};
    int lfd = -1, made_lock = 0, cur = -1;
    struct stat pre, st;
    memset(&pre, 0, sizeof(pre));
    rc = target_open(f, path, &t);
    if (rc != 0)
        goto out;

    /* The data goes to the temporary file before the lock: a slow producer
     * never holds up other writers, and the check happens at the last
     * moment, right before the rename. The temporary file has the file's
     * owner and group before any data goes in, and is private (0600)
     * until its final mode is set under the lock. */
    int had = fstatat(t.dirfd, t.base, &pre, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(pre.st_mode);
    rc = make_temp(f, &t, &tmp);
    if (rc != 0)
        goto out;
    if (had)
        set_owner(tmp.fd, &pre);
    if (src >= 0) {
        int read_side = 0;
        if (copy_fd(src, tmp.fd, &read_side) < 0) {
            rc = read_side ? sys_fail(f, "read the data for", path)
                           : sys_fail(f, "write a temporary file for", path);
            goto out;
        }
    } else if (write_all(tmp.fd, data, len) < 0) {
        rc = sys_fail(f, "write a temporary file for", path);
        goto out;
    }

    rc = lock_fence(f, t.lockdir, t.lockname, t.lockshown, 1, &lfd, &made_lock);
    if (rc == 0)
        rc = check_one_fence(f, &t);
    if (rc != 0)
        goto out;
    rc = open_data(f, &t, O_RDONLY, 1, &cur, &st);
    if (rc == 0 && cur >= 0 && t.ddirfd >= 0)
        rc = refuse_own_xattr(f, &t, cur);
    if (rc != 0)
        goto out;
    uint64_t last = 0, xtok = 0, stok = 0;
    int xsupported = 1;
    if (t.ddirfd >= 0)
        rc = read_fence(f, &t, lfd, t.ddirfd, f->dir_fence, &last, &xsupported, &xtok, &stok);
    else
        rc = read_fence(f, &t, lfd, cur >= 0 ? cur : tmp.fd, path, &last, &xsupported, &xtok, &stok);
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

    /* The new file takes what the old one had: owner and group (as far as
     * this process may set them; the file may have changed since the data
     * went in), attributes and ACL, then the mode (after chown, which
     * clears set-id bits, and after the ACL, whose mask it sets). A new
     * file gets the handle's mode minus the umask. */
    if (cur >= 0 && (!had || st.st_uid != pre.st_uid || st.st_gid != pre.st_gid))
        set_owner(tmp.fd, &st);
    if (cur >= 0 && (rc = copy_xattrs(f, cur, tmp.fd, path)) != 0)
        goto out;
    if (fchmod(tmp.fd, cur >= 0 ? st.st_mode & 07777 : f->o.mode & ~process_umask() & 07777) < 0) {
        rc = sys_fail(f, "chmod a temporary file for", path);
        goto out;
    }

    /* Raise the fence before the data becomes visible: the sidecar durably
     * now; a file fence's xattr goes with the temporary file and arrives
     * with the data, by the rename; a directory's is set alongside. */
    rc = raise_sidecar(f, &t, lfd, token, stok);
    if (rc == 0 && use_xattr && t.ddirfd < 0)
        rc = write_xattr(f, tmp.fd, path, token);
    else if (rc == 0 && use_xattr && token > xtok)
        rc = write_xattr(f, t.ddirfd, f->dir_fence, token);
    if (rc != 0)
        goto out;
    if (fsync(tmp.fd) < 0) {
        rc = sys_fail(f, "fsync a temporary file for", path);
        goto out;
    }
    if ((rc = publish_temp(f, &t, &tmp)) != 0)
        goto out;
    if (fsync(t.dirfd) < 0)
        rc = sys_fail(f, "fsync", t.dir);
out:
    if (tmp.name[0] != '\0' && t.dirfd >= 0)
        unlinkat(t.dirfd, tmp.name, 0);
    close_fd(&tmp.fd);
    close_fd(&cur);
    if (rc != 0)
        drop_new_lock(t.lockdir, t.lockname, lfd, made_lock);
    close_fd(&lfd); /* releases the lock, after the rename is durable */
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

#define APPEND_INLINE 65536

/* Read fd into buf until cap bytes or its end; *got says how many. */
static int read_full(int fd, char *buf, size_t cap, size_t *got)
{
    *got = 0;
    while (*got < cap) {
        ssize_t n = read(fd, buf + *got, cap - *got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        *got += (size_t)n;
    }
    return 0;
}

/*
 * The data of an append from a descriptor, read to its end before the lock
 * (a slow producer holds up no writer) in bounded memory: up to
 * APPEND_INLINE bytes stay in buf (*len); beyond that, all of it goes to an
 * unnamed private file (*out, else -1): in the file's directory, whose file
 * system takes the data next, else in $TMPDIR or /tmp.
 */
static int take_input(fencefile *f, struct target *t, int src, char *buf, size_t *len, int *out)
{
    *out = -1;
    if (read_full(src, buf, APPEND_INLINE, len) < 0)
        return sys_fail(f, "read the data for", t->path);
    if (*len < APPEND_INLINE)
        return 0;
    const char *tmpdir = getenv("TMPDIR");
    if (tmpdir == NULL || tmpdir[0] == '\0')
        tmpdir = "/tmp";
    int fd = openat(t->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        fd = open(tmpdir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        char name[PATH_MAX];
        snprintf(name, sizeof(name), "%s/.fencelock-append-XXXXXX", tmpdir);
        fd = mkostemp(name, O_CLOEXEC);
        if (fd >= 0)
            unlink(name);
    }
    if (fd < 0)
        return sys_fail(f, "create a temporary file for the data of", t->path);
    int read_side = 0;
    if (write_all(fd, buf, *len) < 0 || copy_fd(src, fd, &read_side) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
        int rc = read_side ? sys_fail(f, "read the data for", t->path)
                           : sys_fail(f, "write a temporary file for", t->path);
        close(fd);
        return rc;
    }
    *out = fd;
    *len = 0;
    return 0;
}

static int do_append(fencefile *f, const char *path, uint64_t token, const void *data, size_t len, int src,
                     uint64_t *last_out)
{
    int rc = check_call(f, path, token, data, len);
    if (rc != 0)
        return rc;
    struct target t;
    int lfd = -1, made_lock = 0, fd = -1, made = 0, spfd = -1;
    char *inline_buf = NULL;
    rc = target_open(f, path, &t);
    if (rc == 0 && src >= 0) {
        inline_buf = malloc(APPEND_INLINE);
        rc = inline_buf == NULL ? fail(f, -ENOMEM, "out of memory")
                                : take_input(f, &t, src, inline_buf, &len, &spfd);
        data = inline_buf;
    }
    if (rc == 0)
        rc = lock_fence(f, t.lockdir, t.lockname, t.lockshown, 1, &lfd, &made_lock);
    if (rc == 0)
        rc = check_one_fence(f, &t);
    if (rc != 0)
        goto out;
    /* The file itself is locked too: whatever name another fenced writer
     * reached it by (it was renamed meanwhile, say), appends to one file
     * are one at a time. Its link count is looked at again once locked. */
    struct stat st;
    rc = open_data(f, &t, O_WRONLY | O_APPEND, 1, &fd, &st);
    if (rc != 0)
        goto out;
    if (fd >= 0) {
        rc = ofd_lock(f, fd, F_WRLCK, INODE_LOCK_AT, 1, path, now_ms() + f->o.lock_timeout_ms);
        if (rc == 0)
            rc = fstat(fd, &st) < 0 ? sys_fail(f, "stat", path) : check_data_file(f, &st, path);
        if (rc == 0 && t.ddirfd >= 0)
            rc = refuse_own_xattr(f, &t, fd);
        if (rc != 0)
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
        rc = ofd_lock(f, fd, F_WRLCK, INODE_LOCK_AT, 1, path, now_ms() + f->o.lock_timeout_ms);
        if (rc == 0 && t.ddirfd < 0) {
            xfd = fd;
            rc = read_xattr(f, fd, path, &xtok, &xsupported);
        }
        if (rc != 0)
            goto out;
    }
    int use_xattr = 0;
    rc = choose_xattr(f, xsupported, xshown, &use_xattr);
    if (rc != 0)
        goto out;

    /* Raise the fence, durably in the sidecar, before any byte of the data;
     * the file's xattr reaches the disk with the data's fsync. */
    rc = raise_sidecar(f, &t, lfd, token, stok);
    if (rc == 0 && use_xattr && token > xtok)
        rc = write_xattr(f, xfd, xshown, token);
    if (rc != 0)
        goto out;
    if (made && fsync(t.dirfd) < 0) {
        rc = sys_fail(f, "fsync", t.dir);
        goto out;
    }
    int read_side = 0;
    if (spfd >= 0 ? copy_fd(spfd, fd, &read_side) < 0 : write_all(fd, data, len) < 0) {
        rc = read_side ? sys_fail(f, "read the spooled data for", path) : sys_fail(f, "append to", path);
        goto out;
    }
    if (fsync(fd) < 0)
        rc = sys_fail(f, "fsync", path);
out:
    close_fd(&fd);
    close_fd(&spfd);
    free(inline_buf);
    if (rc != 0)
        drop_new_lock(t.lockdir, t.lockname, lfd, made_lock);
    close_fd(&lfd);
    target_close(&t);
    return rc;
}

int fencefile_append(fencefile *f, const char *path, uint64_t token, const void *data, size_t len,
                     uint64_t *last_out)
{
    return do_append(f, path, token, data, len, -1, last_out);
}

int fencefile_append_fd(fencefile *f, const char *path, uint64_t token, int fd, uint64_t *last_out)
{
    if (f != NULL && fd < 0)
        return fail(f, -EINVAL, "fd %d is not a file descriptor", fd);
    return do_append(f, path, token, NULL, 0, fd, last_out);
}

/* ---- reading a fence ---- */

static void fill_fence(struct fencefile_fence *out, int directory, uint64_t xtok, uint64_t stok)
{
    out->directory = directory;
    out->token = xtok > stok ? xtok : stok;
    out->store = out->token == 0 ? FENCEFILE_STORE_NONE
                 : xtok >= stok  ? FENCEFILE_STORE_XATTR
                                 : FENCEFILE_STORE_SIDECAR;
}

static int last_of_dir(fencefile *f, int dfd, const char *dir, struct fencefile_fence *out)
{
    int lfd = -1, made = 0, supported = 1;
    uint64_t xtok = 0, stok = 0;
    char shown[PATH_MAX + 32];
    snprintf(shown, sizeof(shown), "%s/%s", dir, DIR_LOCK);
    int rc = lock_fence(f, dfd, DIR_LOCK, shown, 0, &lfd, &made);
    if (rc == 0)
        rc = read_xattr(f, dfd, dir, &xtok, &supported);
    if (rc == 0)
        rc = read_sidecar(f, lfd, shown, &stok);
    if (rc == 0)
        fill_fence(out, 1, xtok, stok);
    close_fd(&lfd);
    return rc;
}

/* The directory a path is in, or the path itself if it is a directory,
 * opened. */
static int open_dir_of(fencefile *f, const char *path, int *dfd)
{
    *dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*dfd >= 0)
        return 0;
    char *copy = strdup(path);
    if (copy == NULL)
        return fail(f, -ENOMEM, "out of memory");
    char *slash = strrchr(copy, '/');
    const char *dir = slash == NULL ? "." : slash == copy ? "/" : (*slash = '\0', copy);
    *dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = *dfd < 0 ? sys_fail(f, "open directory", dir) : 0;
    free(copy);
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
    if (f->dfd >= 0) {
        if (path != NULL) {
            int pfd = -1, under = 0;
            char other[PATH_MAX];
            int rc = open_dir_of(f, path, &pfd);
            if (rc == 0)
                rc = walk_up(f, pfd, &under, other, sizeof(other));
            close_fd(&pfd);
            if (rc == 0 && !under)
                rc = fail(f, -EINVAL, "%s is not under the directory fence %s", path, f->dir_fence);
            if (rc != 0)
                return rc;
        }
        return last_of_dir(f, f->dfd, f->dir_fence, out);
    }
    if (path == NULL)
        return fail(f, -EINVAL, "path is NULL");
    /* O_DIRECTORY refuses anything else before opening it (a FIFO too). */
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        int rc = last_of_dir(f, dfd, path, out);
        close(dfd);
        return rc;
    }

    struct target t;
    int lfd = -1, made = 0, fd = -1, supported = 1;
    uint64_t xtok = 0, stok = 0;
    int rc = target_open(f, path, &t);
    if (rc == 0)
        rc = lock_fence(f, t.dirfd, t.lockname, t.lockshown, 0, &lfd, &made);
    if (rc != 0)
        goto out;
    struct stat st;
    rc = open_data(f, &t, O_RDONLY, 0, &fd, &st);
    if (rc == 0)
        rc = read_xattr(f, fd, path, &xtok, &supported);
    if (rc == 0)
        rc = read_sidecar(f, lfd, t.lockshown, &stok);
    if (rc == 0)
        fill_fence(out, 0, xtok, stok);
out:
    close_fd(&fd);
    close_fd(&lfd);
    target_close(&t);
    return rc;
}
