/* Clocks, randomness, messages and the plain Redlock scripts. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>

#include "internal.h"

/* Compare-then-act scripts of the standard Redlock layout: a key holds the
 * lock id of its holder, and only that holder may delete or extend it. The
 * same layout is used by node-redlock and redsync, so their clients and
 * fencelock exclude each other. The keys beside it (the fence key and the
 * holder info key) are fencelock's own; other clients never read them. */
const char *const lockcore__scripts[SCRIPT_COUNT] = {
    /* KEYS[1] lock, KEYS[2] holder info, KEYS[3] waiters' queue, KEYS[4]
     * their deadlines, KEYS[5] the mark that anyone waits; ARGV[1] lock id,
     * ARGV[2] what to do: "r" a rollback (of a waiter's failed attempt: it
     * keeps its place), "" a release that tells nobody, or a release that
     * tells the next waiter and keeps the lock for it so many ms (0: none).
     * Where nobody waits this is the classic compare-and-delete: the one DEL
     * of the lock, the holder info and the mark tells by its count whether
     * the mark was there (3: certainly; 2: the mark or the info). Else a
     * release leaves the queue (also where it does not hold the lock:
     * granted on a majority, its place on the other nodes would otherwise
     * stay first until it lapses) and, where it held, names the first live
     * waiter (dead ones are dropped from the head first) on its client's
     * channel, "{" KEYS[1] "}:released:" and the first 16 digits of its id,
     * with pcall so that a user without PUBLISH rights still releases. The
     * named waiter's reservation is the lock key itself, set to its id:
     * every SET NX (node-redlock's, a polling client's, a kind's) is refused,
     * and only that waiter's attempt turns it into its lock. The mark is set
     * again while the queue is not empty (docs/fairness.md). */
    [SCRIPT_RELEASE] = "local held = redis.call('GET', KEYS[1]) == ARGV[1]\n"
                       "if ARGV[2] == 'r' then\n"
                       "  if not held then return 0 end\n"
                       "  redis.call('DEL', KEYS[1], KEYS[2])\n"
                       "  return 1\n"
                       "end\n"
                       "if not held then\n"
                       "  if redis.call('ZCARD', KEYS[3]) > 0 then\n"
                       "    redis.call('ZREM', KEYS[3], ARGV[1])\n"
                       "    redis.call('HDEL', KEYS[4], ARGV[1])\n"
                       "  end\n"
                       "  return 0\n"
                       "end\n"
                       "if redis.call('DEL', KEYS[1], KEYS[2], KEYS[5]) == 1 then return 1 end\n"
                       "local q = redis.call('ZRANGE', KEYS[3], 0, 1)\n"
                       "if not q[1] then return 1 end\n"
                       "redis.call('ZREM', KEYS[3], ARGV[1])\n"
                       "redis.call('HDEL', KEYS[4], ARGV[1])\n"
                       "local h = q[1]\n"
                       "if h == ARGV[1] then h = q[2] end\n"
                       "if not h then return 1 end\n"
                       "redis.call('SET', KEYS[5], '1', 'PX', math.max(redis.call('PTTL', KEYS[3]), 1))\n"
                       "if ARGV[2] == '' then return 1 end\n"
                       "local chan = '{' .. KEYS[1] .. '}:released:'\n"
                       "local t = redis.call('TIME')\n"
                       "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
                       "for i = 1, 64 do\n"
                       "  if (tonumber(redis.call('HGET', KEYS[4], h) or '0') or 0) >= now then\n"
                       "    if ARGV[2] ~= '0' then redis.call('SET', KEYS[1], h, 'PX', ARGV[2]) end\n"
                       "    redis.pcall('PUBLISH', chan .. string.sub(h, 1, 16), h)\n"
                       "    return 1\n"
                       "  end\n"
                       "  redis.call('ZREM', KEYS[3], h)\n"
                       "  redis.call('HDEL', KEYS[4], h)\n"
                       "  h = redis.call('ZRANGE', KEYS[3], 0, 0)[1]\n"
                       "  if not h then\n"
                       "    redis.call('DEL', KEYS[5])\n"
                       "    return 1\n"
                       "  end\n"
                       "end\n"
                       "return 1\n",
    /* KEYS[1] lock, KEYS[2] fence, KEYS[3] holder info; ARGV[1] lock id,
     * ARGV[2] ttl ms, ARGV[3] fence expiry ms (0: the fence never expires),
     * ARGV[4] the lock's token (0: unknown or plain Redlock).
     * A lock kept alive for longer than the fence's idle expiry must not
     * outlive its fence key: every extension pushes the fence's expiry out
     * (never in), and puts the lock's own token back where the fence is
     * lower (a node that forgot it). That is a "set if greater" of a token
     * a majority already accepted, so it can only make later proposals
     * larger (docs/fencing.md, T1 and T2). */
    [SCRIPT_EXTEND] =
        "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
        "redis.call('PEXPIRE', KEYS[3], ARGV[2])\n"
        "local t = tonumber(ARGV[4])\n"
        "local f = tonumber(redis.call('GET', KEYS[2]) or '0') or 0\n"
        "if t > f then\n"
        "  if ARGV[3] ~= '0' then redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[3])\n"
        "  else redis.call('SET', KEYS[2], ARGV[4]) end\n"
        "elseif ARGV[3] ~= '0' then\n"
        "  local pt = redis.call('PTTL', KEYS[2])\n"
        "  if pt >= 0 and pt < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end\n"
        "end\n"
        "return redis.call('PEXPIRE', KEYS[1], ARGV[2])\n",
    [SCRIPT_ACQUIRE_FENCED] = fencing_script_acquire,
    [SCRIPT_RAISE] = fencing_script_raise,
    /* Read-only view for diagnostics: holder, remaining ms, fence value,
     * holder info, the number of waiters and the first 8 with their
     * tickets (16 elements: within lockcore's reply bounds). */
    [SCRIPT_STATUS] =
        "return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),\n"
        "        redis.call('GET', KEYS[2]) or '', redis.call('GET', KEYS[3]) or '',\n"
        "        redis.call('ZCARD', KEYS[4]), redis.call('ZRANGE', KEYS[4], 0, 7, 'WITHSCORES')}\n",
    /* KEYS[1] lock, KEYS[2] holder info; ARGV[1] lock id, ARGV[2] info,
     * ARGV[3] ttl ms. Sent right behind the acquire on each connection, so
     * it runs after it and stores the info only where the lock was set. */
    [SCRIPT_SET_INFO] = "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
                        "  return redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])\n"
                        "end\n"
                        "return 0\n",
    /* The acquire of a waiter. Its place in this node's queue is a member
     * of a sorted set scored by its ticket, with a deadline per member; when
     * it takes or refreshes it, dead waiters before it are dropped from the
     * head. A lock key that holds the waiter's own id is the reservation a
     * release made for it (or its own key from an earlier attempt of this
     * acquisition): the waiter takes it over, with a fresh TTL.
     * ARGV[7] = 2, the first attempt of a notified waiter: SET NX PX, as a
     * polling client does; refused, it takes its place. Granted, it is in
     * no queue at all, so a lock nobody waits for costs what it costs a
     * polling client.
     * ARGV[7] = 0, a notified waiter's later attempt: the lock first;
     * refused, the place is refreshed; granted, the place's deadline is cut
     * to the lock's TTL, so that a holder that dies is not first for long
     * (the acquisition may still fail on the majority: it keeps its place
     * until its release).
     * ARGV[7] = 1, fair: the place first, then the lock only as the head
     * (or when reserved for it: the release named it as the head).
     * The fence steps are those of fencing_script_acquire (none with
     * ARGV[3] = 0).
     * Taking or refreshing the place also sets the mark that anyone waits,
     * which tells a release to look at the queue.
     * KEYS[1] lock, KEYS[2] fence, KEYS[3] queue, KEYS[4] deadlines,
     * KEYS[5] the mark, KEYS[6] (a reentrant waiter) the hold count, which
     * a grant starts at 1 with the accepted proposal as the hold's token
     * (reentrant.c); ARGV[1] id, ARGV[2] ttl, ARGV[3] proposal, ARGV[4] fence idle,
     * ARGV[5] ticket, ARGV[6] queue ttl ms, ARGV[7] 0, 1 or 2 as above.
     * Returns {granted, accepted, fence, holder, holder pttl, head}. */
    [SCRIPT_ACQUIRE_QUEUED] =
        "local id, mode = ARGV[1], ARGV[7]\n"
        "local granted, head, now\n"
        "if mode == '2' then granted = redis.call('SET', KEYS[1], id, 'NX', 'PX', ARGV[2]) end\n"
        "if not granted then\n"
        "  local v = mode ~= '2' and redis.call('GET', KEYS[1])\n"
        "  if v ~= id and (mode ~= '0' or v) then\n"
        "    local t = redis.call('TIME')\n"
        "    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
        "    local qttl = tonumber(ARGV[6])\n"
        "    redis.call('ZADD', KEYS[3], ARGV[5], id)\n"
        "    redis.call('HSET', KEYS[4], id, now + qttl)\n"
        "    redis.call('PEXPIRE', KEYS[3], 2 * qttl)\n"
        "    redis.call('PEXPIRE', KEYS[4], 2 * qttl)\n"
        "    redis.call('SET', KEYS[5], '1', 'PX', 2 * qttl)\n"
        "    for i = 1, 65 do\n"
        "      head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]\n"
        "      if i == 65 or head == id or\n"
        "         (tonumber(redis.call('HGET', KEYS[4], head) or '0') or 0) >= now then break end\n"
        "      redis.call('ZREM', KEYS[3], head)\n"
        "      redis.call('HDEL', KEYS[4], head)\n"
        "    end\n"
        "  end\n"
        "  if mode ~= '2' and (v == id or (not v and (mode == '0' or head == id))) then\n"
        "    redis.call('SET', KEYS[1], id, 'PX', ARGV[2])\n"
        "    if redis.call('HGET', KEYS[4], id) then\n"
        "      if not now then\n"
        "        local t = redis.call('TIME')\n"
        "        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
        "      end\n"
        "      redis.call('HSET', KEYS[4], id, now + tonumber(ARGV[2]))\n"
        "    end\n"
        "    granted = true\n"
        "  end\n"
        "end\n"
        "local f = tonumber(redis.call('GET', KEYS[2]) or '0') or 0\n"
        "if not granted then\n"
        "  return {0, 0, string.format('%.0f', f), redis.call('GET', KEYS[1]) or '', redis.call('PTTL', "
        "KEYS[1]), head}\n"
        "end\n"
        "local acc = ARGV[3] ~= '0' and tonumber(ARGV[3]) > f\n"
        "if acc then\n"
        "  if ARGV[4] ~= '0' then redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])\n"
        "  else redis.call('SET', KEYS[2], ARGV[3]) end\n"
        "end\n"
        "if KEYS[6] then\n"
        "  redis.call('DEL', KEYS[6])\n"
        "  redis.call('HSET', KEYS[6], 'n', 1, 't', acc and ARGV[3] or '0')\n"
        "  redis.call('PEXPIRE', KEYS[6], ARGV[2])\n"
        "end\n"
        "if ARGV[3] == '0' then return {1, 1, string.format('%.0f', f)} end\n"
        "if acc then return {1, 1, ARGV[3]} end\n"
        "return {1, 0, string.format('%.0f', f)}\n",
    /* The release of a polling client without holder info: the classic
     * compare-and-delete, and nothing else. Every extra call here is Redis
     * CPU on every release (W2 measured it). KEYS[1] lock; ARGV[1] id. */
    [SCRIPT_RELEASE_PLAIN] = "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
                             "  return redis.call('DEL', KEYS[1])\n"
                             "end\n"
                             "return 0\n",
    /* KEYS[1] queue, KEYS[2] deadlines; ARGV[1] id: leave the queue. */
    [SCRIPT_DEQUEUE] = "redis.call('ZREM', KEYS[1], ARGV[1])\n"
                       "return redis.call('HDEL', KEYS[2], ARGV[1])\n",
};

void lockcore__hex(char *out, const unsigned char *in, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[in[i] >> 4];
        out[2 * i + 1] = hex[in[i] & 15];
    }
    out[2 * n] = '\0';
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
