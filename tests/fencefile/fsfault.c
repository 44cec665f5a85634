/* A preload shim for tests: faults that a file system or the scheduler
 * bring, chosen by environment variables, in a fencelock process. Loaded
 * with LD_PRELOAD; never linked into anything.
 *   FSFAULT_NOTMPFILE=1  opening with O_TMPFILE fails with EOPNOTSUPP, as
 *                        on NFS: the named temporary file is used instead.
 *   FSFAULT_PAUSE_MS=N   sleep N ms right after each read of a fence's
 *                        xattr: a writer paused between reading the fence
 *                        and acting on it, made certain.
 *   FSFAULT_PAUSED=PATH  create PATH when such a pause starts, so that the
 *                        test knows the fence has been read. */
/* open and open64 are both defined here: no redirection of one to the
 * other. */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

/* Every open goes through the real openat (open(p) is openat(AT_FDCWD, p)). */
static int shim_open(int dirfd, const char *path, int flags, va_list ap)
{
    mode_t mode = (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
    const char *v = getenv("FSFAULT_NOTMPFILE");
    if ((flags & O_TMPFILE) == O_TMPFILE && v != NULL && strcmp(v, "1") == 0) {
        errno = EOPNOTSUPP;
        return -1;
    }
    int (*real)(int, const char *, int, ...);
    *(void **)&real = dlsym(RTLD_NEXT, "openat");
    return real(dirfd, path, flags, mode);
}

#define SHIM(decl, dirfd)                                                                                    \
    API int decl                                                                                             \
    {                                                                                                        \
        va_list ap;                                                                                          \
        va_start(ap, flags);                                                                                 \
        int fd = shim_open(dirfd, path, flags, ap);                                                          \
        va_end(ap);                                                                                          \
        return fd;                                                                                           \
    }

SHIM(openat(int dirfd, const char *path, int flags, ...), dirfd)
SHIM(openat64(int dirfd, const char *path, int flags, ...), dirfd)
SHIM(open(const char *path, int flags, ...), AT_FDCWD)
SHIM(open64(const char *path, int flags, ...), AT_FDCWD)

API ssize_t fgetxattr(int fd, const char *name, void *value, size_t size)
{
    ssize_t (*real)(int, const char *, void *, size_t);
    *(void **)&real = dlsym(RTLD_NEXT, "fgetxattr");
    ssize_t n = real(fd, name, value, size);
    int saved = errno;
    const char *ms = getenv("FSFAULT_PAUSE_MS");
    if (ms != NULL && strcmp(name, "user.fencelock.token") == 0) {
        const char *mark = getenv("FSFAULT_PAUSED");
        int m = mark != NULL ? open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600) : -1;
        if (m >= 0)
            close(m);
        long v = atol(ms);
        struct timespec ts = {v / 1000, (v % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
    errno = saved;
    return n;
}
