/*
 * The least Redis ACL a lock client needs, measured against real
 * redis-server nodes (docs/security.md). With key prefix P the client
 * touches P<resource>, the fences' buckets P\0fence:<n> (hashes), and
 * {P<resource>}:fence, :holder, :waiters, :waiting and the channel
 * {P<resource>}:released. What it calls depends on how it waits
 * (lockcore_options.wait_mode):
 *
 *   base     ~P* ~{P* -@all +eval +get +set +del +pexpire +pttl +zrange +zcard +time +hget +hset +persist
 *            every operation of a client that does not wait (LOCKCORE_WAIT_
 *            POLL, the default, and NOTIFY); status lists waiters with
 *            ZCARD and ZRANGE, and so does the release of a notified or fair
 *            client or of one that leaves holder info (a polling client
 *            without it releases with GET and DEL alone); a fenced acquire
 *            reads and raises its bucket with HGET and HSET
 *   + +zadd +zrem +hget +hset +hdel +time
 *                                   the queue of waiters (LOCKCORE_WAIT_FAIR
 *                                   always; NOTIFY once a client waits)
 *   + &{P* +subscribe +unsubscribe +publish
 *                                   the release notices of waiting
 *   + +hgetall +hexists +exists +zscore +zcount +zrangebyscore +zremrangebyscore
 *                                   the lock kinds: a reentrant lock's holds,
 *                                   a read-write lock's readers
 *   optional +evalsha +script|load +fcall +function|load
 *                                   scripts as functions of a library, or by
 *                                   sha, instead of whole
 *
 * Each node runs with an "admin" user (the harness's) and the test creates
 * the lock client's user with ACL SETUSER. The node's ACL LOG records every
 * refusal, top level or inside a script: for the rules above it must stay
 * empty (or hold only the SCRIPT LOAD and FUNCTION LOAD refusals without
 * the optional row).
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "fence_probe.h"
#include "redis_harness.h"
#include <lockcore/lockcore.h>

#define N 3
#define PREFIX "app:"
#define BASE                                                                                                 \
    "~app:* ~{app:* -@all +eval +get +set +del +pexpire +pttl +zrange +zcard +time +hget +hset +persist"
#define NO_RESEND "+evalsha +script|load +fcall +function|load"
#define QUEUE "+zadd +zrem +hget +hset +hdel +time"
#define CHANNELS "&{app:* +subscribe +unsubscribe +publish"
#define KINDS "+hgetall +hexists +exists +zscore +zcount +zrangebyscore +zremrangebyscore"
#define FULL BASE " " QUEUE " " CHANNELS " " NO_RESEND

struct fixture {
    struct rh_cluster *rc;
    char url_buf[N][256];
    const char *urls[N];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    struct rh_options ro;
    rh_options_init(&ro);
    ro.user = "admin";
    ro.password = "adminpw";
    assert_int_equal(rh_cluster_start(N, &ro, &f->rc), 0);
    for (int i = 0; i < N; i++) {
        snprintf(f->url_buf[i], sizeof(f->url_buf[i]), "redis://locker:lockpw@127.0.0.1:%d",
                 rh_port(f->rc, i));
        f->urls[i] = f->url_buf[i];
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    rh_cluster_free(f->rc);
    free(f);
    return 0;
}

/* (Re)create the user "locker" (password "lockpw") with exactly `rules` on
 * every node, and clear the ACL log and the command statistics. */
static void set_rules(struct fixture *f, const char *rules)
{
    for (int i = 0; i < N; i++) {
        char copy[1024];
        const char *argv[64] = {"ACL", "SETUSER", "locker", "reset", "on", ">lockpw"};
        int argc = 6;
        assert_true(strlen(rules) < sizeof(copy));
        snprintf(copy, sizeof(copy), "%s", rules);
        char *save = NULL;
        for (char *t = strtok_r(copy, " ", &save); t != NULL; t = strtok_r(NULL, " ", &save)) {
            assert_true(argc < 64); /* every rule goes in, or the test fails */
            argv[argc++] = t;
        }
        redisContext *ctx = redisConnect("127.0.0.1", rh_port(f->rc, i));
        assert_non_null(ctx);
        assert_int_equal(ctx->err, 0);
        redisReply *r = redisCommand(ctx, "AUTH admin adminpw");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STATUS);
        freeReplyObject(r);
        r = redisCommandArgv(ctx, argc, argv, NULL);
        assert_non_null(r);
        if (r->type != REDIS_REPLY_STATUS)
            fail_msg("ACL SETUSER %s: %s", rules, r->str);
        freeReplyObject(r);
        redisFree(ctx);
        r = rh_command(f->rc, i, "ACL LOG RESET");
        freeReplyObject(r);
        r = rh_command(f->rc, i, "CONFIG RESETSTAT");
        freeReplyObject(r);
    }
}

/* ACL LOG entries of user "locker" on all nodes whose object is not
 * `allowed` (NULL: none allowed); the first one described into why. */
/* Is word one of the space-separated words of list (NULL: none)? */
static int listed(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p != NULL && *p != '\0'; p += strcspn(p, " "), p += *p == ' ') {
        if (strncmp(p, word, n) == 0 && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    }
    return 0;
}

/* Refusals of the user "locker" in every node's ACL LOG, but those of the
 * commands named in allowed. */
static int acl_refusals(struct fixture *f, const char *allowed, char *why, size_t cap)
{
    int n = 0;
    why[0] = '\0';
    for (int i = 0; i < N; i++) {
        redisReply *r = rh_command(f->rc, i, "ACL LOG");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        for (size_t e = 0; e < r->elements; e++) {
            const redisReply *entry = r->element[e];
            const char *user = "", *object = "", *reason = "", *context = "";
            for (size_t k = 0; k + 1 < entry->elements; k += 2) {
                const char *name = entry->element[k]->str;
                const redisReply *v = entry->element[k + 1];
                if (v->type != REDIS_REPLY_STRING)
                    continue;
                if (strcmp(name, "username") == 0)
                    user = v->str;
                else if (strcmp(name, "object") == 0)
                    object = v->str;
                else if (strcmp(name, "reason") == 0)
                    reason = v->str;
                else if (strcmp(name, "context") == 0)
                    context = v->str;
            }
            if (strcmp(user, "locker") != 0 || listed(allowed, object))
                continue;
            if (n++ == 0)
                snprintf(why, cap, "node %d: %s '%s' refused (%s)", i, reason, object, context);
        }
        freeReplyObject(r);
    }
    return n;
}

/* Calls of `cmd` on node 0 since the last set_rules (INFO commandstats). */
static long long calls(struct fixture *f, const char *cmd)
{
    redisReply *r = rh_command(f->rc, 0, "INFO commandstats");
    assert_non_null(r);
    char key[64];
    snprintf(key, sizeof(key), "cmdstat_%s:calls=", cmd);
    const char *p = strstr(r->str, key);
    long long v = p ? strtoll(p + strlen(key), NULL, 10) : 0;
    freeReplyObject(r);
    return v;
}

/* Nodes where key == val, waiting up to a second for all N: an operation
 * ends as soon as a majority answered, the last node may still be at it. */
static unsigned holders(struct fixture *f, const char *key, const char *val)
{
    uint64_t deadline = lockcore_now_ms() + 1000;
    unsigned n;
    while ((n = rh_holders(f->rc, key, val)) != N && lockcore_now_ms() < deadline) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return n;
}

/* Nodes whose fence of res (under PREFIX) is token, waiting as holders(). */
static unsigned fence_holders(struct fixture *f, const char *res, uint64_t token)
{
    uint64_t deadline = lockcore_now_ms() + 1000;
    for (;;) {
        unsigned n = 0;
        for (int i = 0; i < N; i++)
            n += tf_fence(f->rc, i, PREFIX, res) == token;
        if (n == N || lockcore_now_ms() >= deadline)
            return n;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* waits: retry until the lock comes (8 s at most), else one attempt. */
/* 1: the clients run the scripts as functions (redis_functions). */
static int use_functions;

static lockcore_client *client(struct fixture *f, int wait_mode, int fencing, const char *info, int waits)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.redis_functions = use_functions;
    o.wait_mode = wait_mode;
    o.nodes = f->urls;
    o.n_nodes = N;
    o.key_prefix = PREFIX;
    o.fencing = fencing;
    o.holder_info = info;
    o.retry_count = waits > 0 ? -1 : 0;
    o.wait_ms = waits > 0 ? 8000 : 0;
    o.queue_ttl_ms = 30000; /* fallback timers 10 s away: a notice is seen */
    o.request_timeout_ms = 200;
    /* -1: every operation's client, whose keep-alive below has something
     * to do within seconds. */
    if (waits < 0)
        o.ttl_ms = 2000;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0)
        fail_msg("client: %s", err);
    return c;
}

/* Acquire, check the keys, extend, read status, keep alive, release: every
 * operation of the client, as the user "locker". */
static void every_operation(struct fixture *f, int wait_mode, int fencing, const char *info)
{
    char res[64], key[80], fkey[96], ikey[96];
    snprintf(res, sizeof(res), "res-%d-%d-%d", wait_mode, fencing, info != NULL);
    snprintf(key, sizeof(key), PREFIX "%s", res);
    snprintf(fkey, sizeof(fkey), "{%s}:fence", key);
    snprintf(ikey, sizeof(ikey), "{%s}:holder", key);
    lockcore_client *c = client(f, wait_mode, fencing, info, -1);
    struct lockcore_lock l;
    int rc = lockcore_acquire(c, res, &l);
    if (rc != 0)
        fail_msg("acquire (wait mode %d, fencing %d, info %s): %s: %s", wait_mode, fencing,
                 info ? info : "none", lockcore_strerror(rc), lockcore_errmsg(c));
    assert_int_equal(holders(f, key, l.id), N);
    if (fencing) {
        assert_true(l.token > 0);
        assert_int_equal(fence_holders(f, res, l.token), N);
    } else {
        assert_int_equal(l.token, 0);
        assert_int_equal(rh_pttl(f->rc, 0, fkey), -2);
        assert_true(tf_fence(f->rc, 0, PREFIX, res) == 0);
    }
    if (info != NULL)
        assert_int_equal(holders(f, ikey, info), N);
    else
        assert_int_equal(rh_pttl(f->rc, 0, ikey), -2);

    /* Up from its 2 s TTL (an extension never shortens a key): the node's
     * PTTL shows the extension. */
    rc = lockcore_extend(c, &l, 3000);
    if (rc != 0)
        fail_msg("extend: %s: %s", lockcore_strerror(rc), lockcore_errmsg(c));
    for (int i = 0; i < N; i++) {
        /* The last node may still be at it (see holders()). */
        long long pttl = rh_pttl(f->rc, i, key);
        uint64_t deadline = lockcore_now_ms() + 1000;
        while (pttl <= 2000 && lockcore_now_ms() < deadline)
            pttl = rh_pttl(f->rc, i, key);
        if (pttl <= 2000 || pttl > 3000)
            fail_msg("node %d: PTTL %lld after extending to 3 s", i, pttl);
    }

    struct lockcore_node_status st[N];
    assert_int_equal(lockcore_status(c, res, st, N), N);
    for (int i = 0; i < N; i++) {
        if (!st[i].reachable)
            fail_msg("status of node %d: %s", i, st[i].error);
        assert_string_equal(st[i].holder, l.id);
        assert_int_equal(st[i].fence, l.token);
        assert_string_equal(st[i].info, info ? info : "");
    }

    /* Keep-alive: extensions every ~200 ms, two of them. */
    lockcore_keepalive *k = NULL;
    assert_int_equal(lockcore_keepalive_start(c, &l, 600, 400, NULL, NULL, &k), 0);
    uint64_t deadline = lockcore_now_ms() + 5000;
    while (lockcore_keepalive_extensions(k) < 2 && lockcore_now_ms() < deadline)
        assert_true(lockcore_run(c, 50) >= 0);
    assert_true(lockcore_keepalive_extensions(k) >= 2);
    assert_int_equal(lockcore_keepalive_get(k, &l), 0);
    lockcore_keepalive_stop(k);

    rc = lockcore_release(c, &l);
    if (rc != 0)
        fail_msg("release: %s: %s", lockcore_strerror(rc), lockcore_errmsg(c));
    assert_int_equal(l.nodes_ok, N);
    assert_int_equal(rh_holders(f->rc, key, l.id), 0);
    assert_int_equal(rh_pttl(f->rc, 0, ikey), -2);
    lockcore_client_free(c);
}

/* All four: fencing on and off, holder info or none. */
static void every_combination(struct fixture *f, int wait_mode)
{
    const char *infos[] = {NULL, "host-1 pid 4242"};
    for (int fencing = 1; fencing >= 0; fencing--)
        for (int i = 0; i < 2; i++)
            every_operation(f, wait_mode, fencing, infos[i]);
}

static void no_refusals(struct fixture *f, const char *allowed)
{
    char why[256];
    int refused = acl_refusals(f, allowed, why, sizeof(why));
    if (refused != 0)
        fail_msg("%d ACL refusals, first: %s", refused, why);
}

static void test_acl_base_rules_allow_every_operation_when_polling(void **state)
{
    struct fixture *f = *state;
    set_rules(f, BASE " " NO_RESEND);
    every_combination(f, LOCKCORE_WAIT_POLL);
    no_refusals(f, NULL);
    /* The scripts were loaded once and then called by their sha. */
    assert_true(calls(f, "evalsha") > 0);
    assert_true(calls(f, "script|load") > 0);
}

static void test_acl_without_evalsha_scripts_are_sent_whole(void **state)
{
    struct fixture *f = *state;
    set_rules(f, BASE);
    every_combination(f, LOCKCORE_WAIT_POLL);
    /* SCRIPT LOAD and FUNCTION LOAD are refused (and logged); nothing
     * else is. */
    no_refusals(f, "script|load function|load");
    char why[256];
    assert_true(acl_refusals(f, NULL, why, sizeof(why)) > 0);
    assert_int_equal(calls(f, "evalsha"), 0);
    assert_int_equal(calls(f, "fcall"), 0);
    assert_true(calls(f, "eval") > 0);
}

static int every_kind(struct fixture *f, int wait_mode, char *err, size_t cap);

/* With redis_functions, the rules with the optional row are enough for
 * every operation of every kind in every wait mode: the commands inside
 * the functions are the scripts'. */
static void test_acl_functions_need_no_more_rules(void **state)
{
    struct fixture *f = *state;
    use_functions = 1;
    set_rules(f, FULL " " KINDS);
    every_combination(f, LOCKCORE_WAIT_POLL);
    every_combination(f, LOCKCORE_WAIT_NOTIFY);
    char err[512];
    static const int modes[] = {LOCKCORE_WAIT_POLL, LOCKCORE_WAIT_NOTIFY, LOCKCORE_WAIT_FAIR};
    for (int m = 0; m < 3; m++)
        if (every_kind(f, modes[m], err, sizeof(err)) != 0)
            fail_msg("wait mode %d: %s", modes[m], err);
    use_functions = 0;
    no_refusals(f, NULL);
    assert_true(calls(f, "fcall") > 0);
    assert_true(calls(f, "function|load") > 0);
}

static void test_acl_base_rules_allow_every_operation_when_notified(void **state)
{
    struct fixture *f = *state;
    set_rules(f, BASE " " NO_RESEND);
    every_combination(f, LOCKCORE_WAIT_NOTIFY);
    no_refusals(f, NULL);
}

static void test_acl_fair_lock_needs_the_queue(void **state)
{
    struct fixture *f = *state;
    set_rules(f, BASE " " QUEUE " " NO_RESEND);
    every_combination(f, LOCKCORE_WAIT_FAIR);
    no_refusals(f, NULL);
}

struct waiter {
    int done, rc;
    uint64_t at_ms;
};

static void on_acquired(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)c;
    (void)l;
    struct waiter *w = arg;
    w->done = 1;
    w->rc = rc;
    w->at_ms = lockcore_now_ms();
}

/* A holder, a waiter in another client, a release: the waiter is told and
 * gets the lock at once, long before the holder's TTL or its own queue
 * refresh would have woken it. */
static void waiter_is_notified(struct fixture *f, int wait_mode, int fencing)
{
    lockcore_client *a = client(f, wait_mode, fencing, NULL, 0);
    lockcore_client *b = client(f, wait_mode, fencing, "waiter", 1);
    struct lockcore_lock la;
    assert_int_equal(lockcore_acquire(a, "contended", &la), 0);
    struct waiter w = {0};
    assert_int_equal(lockcore_acquire_async(b, "contended", on_acquired, &w), 0);
    uint64_t until = lockcore_now_ms() + 300;
    while (!w.done && lockcore_now_ms() < until)
        assert_true(lockcore_run(b, 20) >= 0);
    assert_false(w.done); /* still waiting: the lock is held */
    assert_int_equal(lockcore_release(a, &la), 0);
    uint64_t released = lockcore_now_ms();
    until = released + 5000;
    while (!w.done && lockcore_now_ms() < until)
        assert_true(lockcore_run(b, 20) >= 0);
    if (!w.done || w.rc != 0)
        fail_msg("waiter (wait mode %d, fencing %d): %s: %s", wait_mode, fencing,
                 w.done ? lockcore_strerror(w.rc) : "still waiting", lockcore_errmsg(b));
    if (lockcore_notify_error(b) != NULL)
        fail_msg("notified waiting is off: %s", lockcore_notify_error(b));
    /* The fallback timers are a third of queue_ttl_ms (10 s) away. */
    assert_true(w.at_ms - released < 1000);
    lockcore_client_free(b);
    lockcore_client_free(a);
    rh_flushall(f->rc);
}

static void test_acl_waiters_need_the_queue_and_the_channel(void **state)
{
    struct fixture *f = *state;
    set_rules(f, FULL);
    for (int fencing = 1; fencing >= 0; fencing--) {
        waiter_is_notified(f, LOCKCORE_WAIT_NOTIFY, fencing);
        waiter_is_notified(f, LOCKCORE_WAIT_FAIR, fencing);
    }
    no_refusals(f, NULL);

    /* Without channel rights SUBSCRIBE is refused: the waiter falls back
     * to its timers and lockcore_notify_error says why. */
    set_rules(f, BASE " " QUEUE " +subscribe +unsubscribe +publish " NO_RESEND);
    lockcore_client *a = client(f, LOCKCORE_WAIT_NOTIFY, 1, NULL, 0);
    lockcore_client *b = client(f, LOCKCORE_WAIT_NOTIFY, 1, NULL, 1);
    struct lockcore_lock la;
    assert_int_equal(lockcore_acquire(a, "contended", &la), 0);
    struct waiter w = {0};
    assert_int_equal(lockcore_acquire_async(b, "contended", on_acquired, &w), 0);
    uint64_t until = lockcore_now_ms() + 2000;
    while (lockcore_notify_error(b) == NULL && lockcore_now_ms() < until)
        assert_true(lockcore_run(b, 20) >= 0);
    assert_non_null(lockcore_notify_error(b));
    assert_non_null(strstr(lockcore_notify_error(b), "NOPERM"));
    assert_false(w.done);
    lockcore_client_free(b); /* the waiter ends canceled */
    assert_true(w.done);
    assert_int_equal(w.rc, LOCKCORE_ECANCELED);
    assert_int_equal(lockcore_release(a, &la), 0);
    lockcore_client_free(a);
}

/* One rule set short of the minimum, the operation it breaks, and what the
 * client reports. */
struct refusal {
    const char *rules;
    int wait_mode;
    int fencing;
    const char *op;    /* "acquire", "extend", "release", "release-waited"
                          (a waiter queued on every node), "status" */
    int code;          /* what it returns */
    const char *words; /* in lockcore_errmsg / the status error */
};

#define POLL LOCKCORE_WAIT_POLL
#define NOTIFY LOCKCORE_WAIT_NOTIFY
#define FAIR LOCKCORE_WAIT_FAIR
#define CANT "can't run this command or subcommand"

static const struct refusal refusals[] = {
    /* Keys outside the user's patterns: refused before anything runs. */
    {"~other:* ~{other:* -@all +eval +get +set +del +pexpire +pttl " NO_RESEND, POLL, 1, "acquire",
     LOCKCORE_EPROTO, "NOPERM"},
    {"~other:* ~{other:* -@all +eval +get +set +del +pexpire +pttl " NO_RESEND, POLL, 0, "acquire",
     LOCKCORE_EPROTO, "NOPERM"},
    /* Without ~{P*: the fence key of a fenced acquire... */
    {"~app:* -@all +eval +get +set +del +pexpire +pttl +zrange +zcard " NO_RESEND, POLL, 1, "acquire",
     LOCKCORE_EPROTO, "NOPERM"},
    /* ...and, in plain mode, the holder key that extend and release name.
     * Every operation, the release too, says LOCKCORE_EPROTO when errors,
     * not silence, cost the majority. */
    {"~app:* -@all +eval +get +set +del +pexpire +pttl +zrange +zcard " NO_RESEND, POLL, 0, "extend",
     LOCKCORE_EPROTO, "NOPERM"},
    {"~app:* -@all +eval +get +set +del +pexpire +pttl +zrange +zcard " NO_RESEND, NOTIFY, 0, "release",
     LOCKCORE_EPROTO, "NOPERM"},
    /* Commands: EVAL itself, and SET of plain Redlock. */
    {"~app:* ~{app:* -@all +get +set +del +pexpire +pttl +zrange +zcard " NO_RESEND, POLL, 1, "acquire",
     LOCKCORE_EPROTO, "NOPERM"},
    {"~app:* ~{app:* -@all +eval +get +del +pexpire +pttl +zrange +zcard " NO_RESEND, POLL, 0, "acquire",
     LOCKCORE_EPROTO, "NOPERM"},
    /* A command refused inside a script: Redis 7.0 answers with ERR, not
     * NOPERM, and names the refusal in its own words. */
    {"~app:* ~{app:* -@all +eval +set +del +pexpire +pttl +zrange +zcard " NO_RESEND, POLL, 1, "acquire",
     LOCKCORE_EPROTO, CANT},
    {"~app:* ~{app:* -@all +eval +get +set +del +pttl +zrange +zcard " NO_RESEND, POLL, 1, "extend",
     LOCKCORE_EPROTO, CANT},
    {"~app:* ~{app:* -@all +eval +get +set +pexpire +pttl +zrange +zcard " NO_RESEND, POLL, 1, "release",
     LOCKCORE_EPROTO, CANT},
    {"~app:* ~{app:* -@all +eval +get +set +del +pexpire +zrange " NO_RESEND, POLL, 1, "status",
     LOCKCORE_EPROTO, CANT},
    /* The fence's bucket: read with HGET, raised with HSET. */
    {"~app:* ~{app:* -@all +eval +get +set +del +pexpire +pttl +zrange +zcard +time +hset " NO_RESEND, POLL,
     1, "acquire", LOCKCORE_EPROTO, CANT},
    {"~app:* ~{app:* -@all +eval +get +set +del +pexpire +pttl +zrange +zcard +time +hget " NO_RESEND, POLL,
     1, "acquire", LOCKCORE_EPROTO, CANT},
    /* A notified release reads the queue (ZRANGE) only where the mark
     * "{P<resource>}:wanted" says somebody waits: without +zrange it still
     * releases a lock nobody waits for, and fails one that a waiter wants. */
    {"~app:* ~{app:* -@all +eval +get +set +del +pexpire +pttl " QUEUE " " CHANNELS " " NO_RESEND, NOTIFY, 1,
     "release-waited", LOCKCORE_EPROTO, CANT},
    {"~app:* ~{app:* -@all +eval +get +set +del +pexpire +pttl " QUEUE " " CHANNELS " " NO_RESEND, NOTIFY, 0,
     "release-waited", LOCKCORE_EPROTO, CANT},
    /* A fair acquire always goes through the queue, and its release takes
     * the holder's place out of it. */
    {"~app:* ~{app:* -@all +eval +get +set +del +pexpire +pttl +zrange +zcard +zrem +hget +hset +hdel "
     "+time " CHANNELS " " NO_RESEND,
     FAIR, 1, "acquire", LOCKCORE_EPROTO, CANT},
    {"~app:* ~{app:* -@all +eval +get +set +del +pexpire +pttl +zrange +zcard +zadd +zrem +hget +hdel "
     "+time " CHANNELS " " NO_RESEND,
     FAIR, 1, "acquire", LOCKCORE_EPROTO, CANT},
    {"~app:* ~{app:* -@all +eval +get +set +del +pexpire +pttl +zrange +zcard +zadd +zrem +hget +hset "
     "+hdel " CHANNELS " " NO_RESEND,
     FAIR, 0, "acquire", LOCKCORE_EPROTO, CANT},
    {"~app:* ~{app:* -@all +eval +get +set +del +pexpire +pttl +zrange +zcard +zadd +hget +hset +hdel "
     "+time " CHANNELS " " NO_RESEND,
     FAIR, 1, "release", LOCKCORE_EPROTO, CANT},
    {"~app:* ~{app:* -@all +eval +get +set +del +pexpire +pttl +zrange +zcard +zadd +zrem +hget +hset "
     "+time " CHANNELS " " NO_RESEND,
     FAIR, 0, "release", LOCKCORE_EPROTO, CANT},
};

/* Every lock kind, in every wait mode: acquire, extend and release (a
 * reentrant hold nested in another; a set; a reader and a writer; a
 * permit), under the documented rules with the kinds' row, and none of
 * it refused. Without that row, the first kind's step is. */
static int every_kind(struct fixture *f, int wait_mode, char *err, size_t cap)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.redis_functions = use_functions;
    o.nodes = f->urls;
    o.n_nodes = N;
    o.key_prefix = PREFIX;
    o.fencing = 1;
    o.wait_mode = wait_mode;
    o.retry_count = 0;
    o.request_timeout_ms = 1000;
    lockcore_client *c = NULL;
    assert_int_equal(lockcore_client_new(&o, &c, err, cap), 0);
    struct lockcore_lock a, b;
    const char *set[] = {"k:s1", "k:s2"};
    int rc = lockcore_reentrant_acquire(c, "k:re", NULL, &a);
    if (rc == 0) {
        rc = lockcore_reentrant_acquire(c, "k:re", a.id, &b);
        if (rc == 0 && (rc = lockcore_extend(c, &b, 3000)) == 0)
            rc = lockcore_release(c, &b);
        int r2 = lockcore_release(c, &a);
        rc = rc ? rc : r2;
    }
    for (int k = 0; rc == 0 && k < 4; k++) {
        rc = k == 0   ? lockcore_multi_acquire(c, set, 2, &a)
             : k == 1 ? lockcore_rw_acquire(c, "k:rw", 0, &a)
             : k == 2 ? lockcore_rw_acquire(c, "k:rw", 1, &a)
                      : lockcore_sem_acquire(c, "k:sem", 2, &a);
        if (rc == 0 && (rc = lockcore_extend(c, &a, 3000)) == 0)
            rc = lockcore_release(c, &a);
    }
    if (rc != 0)
        snprintf(err, cap, "%s: %s", lockcore_strerror(rc), lockcore_errmsg(c));
    lockcore_client_free(c);
    return rc;
}

static void test_acl_lock_kinds_need_their_row(void **state)
{
    struct fixture *f = *state;
    char err[512];
    static const int modes[] = {LOCKCORE_WAIT_POLL, LOCKCORE_WAIT_NOTIFY, LOCKCORE_WAIT_FAIR};
    for (int m = 0; m < 3; m++) {
        set_rules(f, FULL " " KINDS);
        if (every_kind(f, modes[m], err, sizeof(err)) != 0)
            fail_msg("wait mode %d: %s", modes[m], err);
        no_refusals(f, NULL);
    }
    set_rules(f, FULL);
    assert_int_not_equal(every_kind(f, LOCKCORE_WAIT_NOTIFY, err, sizeof(err)), 0);
    char why[256];
    assert_true(acl_refusals(f, NULL, why, sizeof(why)) > 0);
}

static void test_acl_refusals_are_protocol_errors(void **state)
{
    struct fixture *f = *state;
    for (size_t t = 0; t < sizeof(refusals) / sizeof(refusals[0]); t++) {
        const struct refusal *x = &refusals[t];
        /* The lock is taken with the full rules, then the op under test
         * runs with the rules short of one thing. */
        set_rules(f, FULL);
        lockcore_client *c = client(f, x->wait_mode, x->fencing, NULL, 0);
        struct lockcore_lock l;
        if (strcmp(x->op, "acquire") != 0)
            assert_int_equal(lockcore_acquire(c, "refused", &l), 0);
        set_rules(f, x->rules);
        /* A new client: connections of the old user are not the point. */
        lockcore_client *d = client(f, x->wait_mode, x->fencing, NULL, 0);
        int rc;
        const char *msg;
        char buf[256];
        if (strcmp(x->op, "acquire") == 0) {
            rc = lockcore_acquire(d, "refused", &l);
            msg = lockcore_errmsg(d);
        } else if (strcmp(x->op, "extend") == 0) {
            rc = lockcore_extend(d, &l, 0);
            msg = lockcore_errmsg(d);
        } else if (strncmp(x->op, "release", 7) == 0) {
            if (strcmp(x->op, "release-waited") == 0)
                for (int i = 0; i < N; i++) {
                    /* As a waiter's refused attempt leaves it: its place,
                     * a live deadline, the mark. */
                    static const char w[] = "ffffffffffffffff000000000000000000000000";
                    redisReply *r[3] = {
                        rh_command(f->rc, i, "ZADD {app:refused}:waiters 1 %s", w),
                        rh_command(f->rc, i, "HSET {app:refused}:waiting %s 99999999999999", w),
                        rh_command(f->rc, i, "SET {app:refused}:wanted 1 PX 60000"),
                    };
                    for (int k = 0; k < 3; k++) {
                        assert_true(r[k] != NULL && r[k]->type != REDIS_REPLY_ERROR);
                        freeReplyObject(r[k]);
                    }
                }
            rc = lockcore_release(d, &l);
            msg = lockcore_errmsg(d);
        } else {
            struct lockcore_node_status st[N];
            assert_int_equal(lockcore_status(d, "refused", st, N), N);
            rc = st[0].reachable ? 0 : LOCKCORE_EPROTO;
            snprintf(buf, sizeof(buf), "%s", st[0].error);
            msg = buf;
        }
        if (rc != x->code || strstr(msg, x->words) == NULL)
            fail_msg("rules '%s', wait mode %d, fencing %d, %s: got %s (%s), want %s naming '%s'", x->rules,
                     x->wait_mode, x->fencing, x->op, lockcore_strerror(rc), msg, lockcore_strerror(x->code),
                     x->words);
        char why[256];
        assert_true(acl_refusals(f, NULL, why, sizeof(why)) > 0);
        lockcore_client_free(d);
        lockcore_client_free(c);
        rh_flushall(f->rc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_acl_base_rules_allow_every_operation_when_polling, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_acl_without_evalsha_scripts_are_sent_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acl_functions_need_no_more_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acl_base_rules_allow_every_operation_when_notified, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_acl_fair_lock_needs_the_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acl_waiters_need_the_queue_and_the_channel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acl_lock_kinds_need_their_row, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acl_refusals_are_protocol_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
