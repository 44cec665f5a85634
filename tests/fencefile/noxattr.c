/* A preload shim for tests: the extended-attribute calls fencefile makes
 * answer ENOTSUP, as on a file system without user xattrs, so that the
 * automatic fallback to the sidecar runs for real. Loaded with LD_PRELOAD
 * into a fencelock process; never linked into anything. */
#include <errno.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/xattr.h>

__attribute__((visibility("default"))) ssize_t fgetxattr(int fd, const char *name, void *value, size_t size)
{
    (void)fd, (void)name, (void)value, (void)size;
    errno = ENOTSUP;
    return -1;
}

__attribute__((visibility("default"))) int fsetxattr(int fd, const char *name, const void *value, size_t size,
                                                     int flags)
{
    (void)fd, (void)name, (void)value, (void)size, (void)flags;
    errno = ENOTSUP;
    return -1;
}
