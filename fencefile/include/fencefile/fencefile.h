/*
 * fencefile: fenced file writes. Replace or append to a file only if the
 * caller's fencing token is not older than the last token that wrote it, so
 * that a lock holder that paused past its lease cannot overwrite the work
 * of the next holder.
 *
 * The fence (the last admitted token) is kept in two places, and reads
 * take the larger:
 *   - the fence's lock file (the "sidecar", see below), written by every
 *     writer, so that a writer that sees no xattrs (an NFS client without
 *     them) still sees the fence;
 *   - the extended attribute `user.fencelock.token` (a decimal string) of
 *     the file itself for a file fence, or of the directory for a directory
 *     fence (which covers every file under it), where the file system keeps
 *     user xattrs and the options do not ask for the sidecar only.
 * Fenced writers exclude each other with an OFD lock (fcntl F_OFD_SETLK) on
 * a lock file: `.NAME.fencelock` next to the file for a file fence,
 * `DIR/.fencelock` for a directory fence. The check, the write and the
 * raising of the fence are one step under that lock: a replace writes a
 * private temporary file in the same directory, fsyncs it, and renames it
 * over the file; an append raises the fence first and then appends. One
 * file has one fence: a file with several hard links, a file fence under a
 * directory fence and the reverse are refused. The crash argument and the
 * rules are in docs/fenced-files.md.
 *
 * Tokens, fencing_check() and the error codes FENCING_ESTALE,
 * FENCING_ENOTOKEN and FENCING_ESTORE come from <fencing/fencing.h>.
 *
 * Thread safety: a handle is used by one thread at a time. OFD locks belong
 * to an open file, not to a process, so handles in different threads of one
 * process exclude each other like different processes do.
 */
#ifndef FENCEFILE_FENCEFILE_H
#define FENCEFILE_FENCEFILE_H

#include <stddef.h>
#include <stdint.h>

#include <fencing/fencing.h>

#if defined(FENCEFILE_BUILD) && defined(__GNUC__)
#define FENCEFILE_API __attribute__((visibility("default")))
#else
#define FENCEFILE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The extended attribute that holds a fence. */
#define FENCEFILE_XATTR "user.fencelock.token"

/* Where a fence is kept. */
enum fencefile_store {
    FENCEFILE_STORE_AUTO = 0, /* options: the xattr; the sidecar where ENOTSUP */
    FENCEFILE_STORE_XATTR,    /* options: the xattr only (-ENOTSUP without) */
    FENCEFILE_STORE_SIDECAR,  /* options: always the lock file's content */
    FENCEFILE_STORE_NONE,     /* fencefile_last: no token stored yet */
};

struct fencefile_options {
    /* NULL: every file has its own fence. Else a directory whose one fence
     * covers every file under it (any depth); copied by fencefile_new. */
    const char *dir_fence;
    /* Permission bits of a file the call creates, before the umask.
     * Default 0666. A replaced file keeps its own permission bits. */
    unsigned mode;
    /* Where to keep the fence; default FENCEFILE_STORE_AUTO. */
    int store;
    /* How long to wait for another fenced writer's step on the same fence
     * (check, rename or append, and their fsyncs); default 10000. */
    uint64_t lock_timeout_ms;
};

/* A fence as fencefile_last reads it. */
struct fencefile_fence {
    uint64_t token; /* the last token admitted; 0 if none */
    int directory;  /* 1: the fence of a directory */
    int store;      /* FENCEFILE_STORE_XATTR, _SIDECAR or _NONE */
};

typedef struct fencefile fencefile;

/* Fill o with the defaults above. Returns 0 or -EINVAL for NULL. */
FENCEFILE_API int fencefile_options_init(struct fencefile_options *o);

/*
 * A handle for fenced writes with these options (o may be NULL for the
 * defaults; it is copied). With a directory fence the directory must exist.
 * Writes *out only on success. Returns 0, -EINVAL, -ENOMEM, or the -errno
 * of resolving dir_fence; the detail goes to errbuf if errbuf != NULL.
 */
FENCEFILE_API int fencefile_new(const struct fencefile_options *o, fencefile **out, char *errbuf,
                                size_t errcap);

/* Free a handle. Accepts NULL. */
FENCEFILE_API void fencefile_free(fencefile *f);

/*
 * Replace the file at path with data[0..len), if token is admitted by its
 * fence: the file then holds either its old content or all of data, never
 * a mix, also after a crash. path (borrowed for the call) names a regular
 * file or nothing yet, not a symbolic link; with a directory fence it must
 * be under the fenced directory. data may be NULL when len is 0.
 * *last_out (if not NULL) receives the fence before the call, on success
 * and on FENCING_ESTALE.
 * The new file gets the old one's owner and group (where this process may
 * set them), extended attributes and ACL, and mode; a new file gets
 * o.mode minus the umask. The temporary file is private (0600, and
 * unnamed where the file system allows) until then.
 * Returns 0, -EINVAL, FENCING_ENOTOKEN (token 0), FENCING_ESTALE (refused:
 * the file is unchanged), FENCING_ESTORE (a stored fence cannot be read),
 * -ETIMEDOUT (another fenced writer held the fence past lock_timeout_ms),
 * -EMLINK (the file, or the fence's lock file, has several hard links),
 * -EEXIST (the file is under another fence too: a file fence and a
 * directory fence, or two directory fences), or another -errno of the
 * file system; see fencefile_errmsg.
 */
FENCEFILE_API int fencefile_write(fencefile *f, const char *path, uint64_t token, const void *data,
                                  size_t len, uint64_t *last_out);

/* Like fencefile_write, with the data read from fd to its end (not closed).
 * The data is read into the temporary file before the fence is checked. */
FENCEFILE_API int fencefile_write_fd(fencefile *f, const char *path, uint64_t token, int fd,
                                     uint64_t *last_out);

/*
 * Append data[0..len) to the file at path (created if missing), if token
 * is admitted by its fence. The fence is raised before the data is written:
 * a crash can leave part of the data appended, never data whose token is
 * above the fence. Same arguments and errors as fencefile_write.
 */
FENCEFILE_API int fencefile_append(fencefile *f, const char *path, uint64_t token, const void *data,
                                   size_t len, uint64_t *last_out);

/* Like fencefile_append, with the data read from fd to its end (not
 * closed). The data is read before the fence's lock is taken, into an
 * unnamed temporary file (in the file's directory, else $TMPDIR or /tmp),
 * not into memory: any size in bounded memory. */
FENCEFILE_API int fencefile_append_fd(fencefile *f, const char *path, uint64_t token, int fd,
                                      uint64_t *last_out);

/*
 * Read a fence into *out. With a directory fence: the directory's (path may
 * be NULL, the directory itself or a file under it). Without: a directory
 * path gives that directory's fence, any other path its file fence; a
 * missing file has token 0. Creates nothing.
 * Returns 0, -EINVAL, FENCING_ESTORE, -ETIMEDOUT or another -errno.
 */
FENCEFILE_API int fencefile_last(fencefile *f, const char *path, struct fencefile_fence *out);

/* The detail of the last error on this handle; valid until the next call. */
FENCEFILE_API const char *fencefile_errmsg(const fencefile *f);

/* A static message for an error code (fencing_strerror's, for -errno too). */
FENCEFILE_API const char *fencefile_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif
