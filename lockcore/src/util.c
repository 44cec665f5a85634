/* Clocks, randomness, messages and the table of the plain lock's scripts. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>

#include <openssl/evp.h>

#include "internal.h"
#include "lockcore_lua.h"

/* Compare-then-act scripts of the standard Redlock layout: a key holds the
 * lock id of its holder, and only that holder may delete or extend it. The
 * same layout is used by node-redlock and redsync, so their clients and
 * fencelock exclude each other. The keys beside it (the fence key, the
 * holder info, the waiters' queue) are fencelock's own; other clients never
 * read them. Each script is a file of lockcore/lua/ (its KEYS, ARGV and
 * invariant at its top), composed at build time. */
const char *const lockcore__scripts[SCRIPT_COUNT] = {
    [SCRIPT_RELEASE] = lockcore__lua_release,
    [SCRIPT_EXTEND] = lockcore__lua_extend,
    [SCRIPT_ACQUIRE_FENCED] = fencing_script_acquire,
    [SCRIPT_RAISE] = fencing_script_raise,
    [SCRIPT_STATUS] = lockcore__lua_status,
    [SCRIPT_SET_INFO] = lockcore__lua_set_info,
    [SCRIPT_ACQUIRE_QUEUED] = lockcore__lua_acquire_queued,
    [SCRIPT_RELEASE_PLAIN] = lockcore__lua_release_plain,
    [SCRIPT_DEQUEUE] = lockcore__lua_dequeue,
    [SCRIPT_FENCE_REPAIR] = lockcore__lua_fence_repair,
};

void lockcore__fence_bucket(const lockcore_client *c, const char *resource, size_t len, char *hash,
                            size_t *hash_len, char *field)
{
    unsigned b = fencing_bucket(resource, len);
    int n = fencing_bucket_key(c->prefix, c->prefix_len, b, hash, FENCE_HASH_MAX + 1);
    *hash_len = n > 0 ? (size_t)n : 0; /* cannot fail: the prefix is at most LOCKCORE_PREFIX_MAX */
    fencing_bucket_field(b, field, 4);
}

void lockcore__qid(const char *id, char *out)
{
    size_t keep = LOCKCORE_ID_LEN - LOCKCORE__ATTEMPT_DIGITS;
    memcpy(out, id, keep);
    memset(out + keep, '0', LOCKCORE__ATTEMPT_DIGITS);
    out[LOCKCORE_ID_LEN] = '\0';
}

void lockcore__hex(char *out, const unsigned char *in, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[in[i] >> 4];
        out[2 * i + 1] = hex[in[i] & 15];
    }
    out[2 * n] = '\0';
}

int lockcore__sha256(const void *in, size_t n, unsigned char md[32])
{
    unsigned len = 0;
    return EVP_Digest(in, n, md, &len, EVP_sha256(), NULL) == 1 && len == 32 ? 0 : -ENOMEM;
}

uint64_t lockcore_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t lockcore_remaining_ms(const struct lockcore_lock *lock)
{
    if (lock == NULL)
        return 0;
    uint64_t now = lockcore_now_ms();
    return lock->valid_until_ms > now ? lock->valid_until_ms - now : 0;
}

uint64_t lockcore__wall_us(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int lockcore__random_bytes(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Lock ids come from the OS random source, read a page at a time: one
 * getrandom() per ~200 acquisitions instead of one each. The page is marked
 * MADV_WIPEONFORK, so a forked child finds it zeroed ("nothing left") and
 * reads fresh bytes instead of repeating its parent's ids. Where the kernel
 * cannot wipe on fork there is no pool and every id is read directly. */
struct lockcore__idpool {
    size_t left; /* unread bytes at the end of buf; 0 after a fork */
    unsigned char buf[4096 - sizeof(size_t)];
};

struct lockcore__idpool *lockcore__idpool_new(void)
{
    void *p = mmap(NULL, sizeof(struct lockcore__idpool), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (madvise(p, sizeof(struct lockcore__idpool), MADV_WIPEONFORK) != 0) {
        munmap(p, sizeof(struct lockcore__idpool));
        return NULL;
    }
    return p;
}

void lockcore__idpool_free(struct lockcore__idpool *pool)
{
    if (pool != NULL)
        munmap(pool, sizeof(*pool));
}

int lockcore__id_bytes(struct lockcore__idpool *pool, void *out, size_t n)
{
    if (pool == NULL || n > sizeof(pool->buf))
        return lockcore__random_bytes(out, n);
    if (pool->left < n) {
        int rc = lockcore__random_bytes(pool->buf, sizeof(pool->buf));
        if (rc < 0)
            return rc;
        pool->left = sizeof(pool->buf);
    }
    unsigned char *src = pool->buf + sizeof(pool->buf) - pool->left;
    memcpy(out, src, n);
    memset(src, 0, n); /* an id handed out is not kept */
    pool->left -= n;
    return 0;
}

/* xorshift64*: retry jitter only needs to differ between clients. */
uint64_t lockcore__rand64(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

void lockcore__fmt(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

const char *lockcore_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
    case LOCKCORE_ELOCKED:
        return "not acquired: held by another client";
    case LOCKCORE_ENOQUORUM:
        return "no quorum: a majority of nodes unreachable";
    case LOCKCORE_ELOST:
        return "lock lost";
    case LOCKCORE_EPROTO:
        return "protocol or server error";
    case LOCKCORE_EFENCE:
        return "no fencing token could be agreed";
    case LOCKCORE_ECANCELED:
        return "operation canceled";
    default:
        if (err <= FENCING_ESTALE && err >= FENCING_ENOTOKEN)
            return fencing_strerror(err);
        return err < 0 && err > -4096 ? strerror(-err) : "unknown error";
    }
}
