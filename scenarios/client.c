/*
 * fencelock-scenario-client: one client of a scenario replay, as its own
 * process so that it can really be paused (SIGSTOP) or delayed.
 *
 * It acquires a lock, checks that the lock is still valid, optionally
 * waits for a line "go" on stdin (the replay decides when it writes), then
 * writes its value to storage-guard with its fencing token, and releases.
 * Each step is reported on stdout as one JSON line with the CLOCK_MONOTONIC
 * time in ms, which the replay shares (the clock is system-wide).
 *
 * With --no-validity-check it acquires the way a careless Redlock client
 * does: it sends its request to every node, counts the grants, and takes
 * the lock as valid for a whole TTL from the moment it reads them, without
 * asking how long the acquisition took. The acquire-pause replay uses it to
 * show what the elapsed-time check is for.
 *
 * With --elect it is a candidate of the election of the resource instead
 * (lockcore_campaign): elected, it writes with its epoch as the fencing
 * token (the Fencing-Token header), and resigns at the end. The
 * zombie-leader replay uses it.
 *
 * docs/testing.md ("The replay client protocol") is the contract.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/hiredis.h>
#include <jansson.h>

#include "http.h"
#include <fencing/fencing.h>
#include <lockcore/lockcore.h>

struct args {
    const char *name, *nodes, *resource, *storage, *key, *value;
    uint64_t ttl_ms, wait_ms;
    int fencing;
    int validity_check;      /* 0: --no-validity-check */
    int elect;               /* --elect: campaign to lead the resource instead */
    const char *first_value; /* --first-value V: written as soon as elected */
    const char *go;          /* NULL, "before-check", "before-write" or "before-release" */
};

static void emit(json_t *ev)
{
    json_object_set_new(ev, "t", json_integer((json_int_t)lockcore_now_ms()));
    char *s = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (s == NULL)
        return;
    printf("%s\n", s);
    fflush(stdout);
    free(s);
}

static int split_nodes(char *list, const char **out, size_t cap)
{
    size_t n = 0;
    for (char *tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ",")) {
        if (n == cap)
            return -1;
        out[n++] = tok;
    }
    return (int)n;
}

static int parse(int argc, char **argv, struct args *a)
{
    static const struct option opts[] = {
        {"name", required_argument, NULL, 'n'},        {"nodes", required_argument, NULL, 'N'},
        {"resource", required_argument, NULL, 'r'},    {"storage", required_argument, NULL, 's'},
        {"key", required_argument, NULL, 'k'},         {"value", required_argument, NULL, 'v'},
        {"ttl", required_argument, NULL, 't'},         {"wait", required_argument, NULL, 'w'},
        {"no-fencing", no_argument, NULL, 'F'},        {"go", required_argument, NULL, 'g'},
        {"no-validity-check", no_argument, NULL, 'V'}, {"elect", no_argument, NULL, 'E'},
        {"first-value", required_argument, NULL, 'f'}, {NULL, 0, NULL, 0},
    };
    *a = (struct args){.name = "A",
                       .resource = "ledger",
                       .key = "ledger",
                       .ttl_ms = 10000,
                       .fencing = 1,
                       .validity_check = 1};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            a->name = optarg;
            break;
        case 'N':
            a->nodes = optarg;
            break;
        case 'r':
            a->resource = optarg;
            break;
        case 's':
            a->storage = optarg;
            break;
        case 'k':
            a->key = optarg;
            break;
        case 'v':
            a->value = optarg;
            break;
        case 't':
            a->ttl_ms = strtoull(optarg, NULL, 10);
            break;
        case 'w':
            a->wait_ms = strtoull(optarg, NULL, 10);
            break;
        case 'F':
            a->fencing = 0;
            break;
        case 'g':
            a->go = optarg;
            break;
        case 'V':
            a->validity_check = 0;
            break;
        case 'E':
            a->elect = 1;
            break;
        case 'f':
            a->first_value = optarg;
            break;
        default:
            return -1;
        }
    }
    if (a->nodes == NULL || a->storage == NULL || a->value == NULL || a->ttl_ms == 0 ||
        (a->go && strcmp(a->go, "before-check") != 0 && strcmp(a->go, "before-write") != 0 &&
         strcmp(a->go, "before-release") != 0) ||
        (a->elect && !a->validity_check) || (a->first_value && !a->elect)) {
        fprintf(stderr, "usage: fencelock-scenario-client --nodes URL,... --storage HOST:PORT --value V\n"
                        "         [--name N] [--resource R] [--key K] [--ttl MS] [--wait MS] [--no-fencing]\n"
                        "         [--no-validity-check | --elect [--first-value V]]\n"
                        "         [--go before-check|before-write|before-release]\n"
                        "         (--go: wait for a line on stdin there)\n");
        return -1;
    }
    return 0;
}

/* ---- Redlock without the elapsed-time check (--no-validity-check) ---- */

#define NAIVE_FENCE_LEGACY "-" /* lockcore's default: the buckets alone */

static const char release_script[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

/* "redis://[user:password@]host:port[/db]" or "host:port": host and port
 * only; the replays use neither credentials nor databases. */
static int node_addr(const char *url, char *host, size_t cap, int *port)
{
    const char *p = strncmp(url, "redis://", 8) == 0 ? url + 8 : url;
    const char *at = strrchr(p, '@');
    if (at)
        p = at + 1;
    const char *colon = strrchr(p, ':');
    if (colon == NULL || (size_t)(colon - p) >= cap)
        return -EINVAL;
    memcpy(host, p, (size_t)(colon - p));
    host[colon - p] = '\0';
    *port = atoi(colon + 1);
    return *port > 0 && *port < 65536 ? 0 : -EINVAL;
}

static void naive_close(redisContext **ctx, int n)
{
    for (int i = 0; i < n; i++)
        if (ctx[i])
            redisFree(ctx[i]);
}

/* Send the lock request to every node first, then read the answers: a
 * pause between the two (the acquire-pause replay stops us there) leaves
 * the grants unread in the socket buffers. A grant counts only with its
 * token accepted too (no second round: a careless client gives up). */
static int naive_acquire(const struct args *a, const char **nodes, int n, redisContext **ctx,
                         struct lockcore_lock *l)
{
    unsigned char rnd[LOCKCORE_ID_LEN / 2];
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return -EIO;
    memset(l, 0, sizeof(*l));
    snprintf(l->resource, sizeof(l->resource), "%s", a->resource);
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(l->id + 2 * i, 3, "%02x", rnd[i]);
    char ttl[24], prop[24], fkey[LOCKCORE_RESOURCE_MAX + 16], bkey[32], field[4];
    int bkey_len = 0;
    snprintf(ttl, sizeof(ttl), "%llu", (unsigned long long)a->ttl_ms);
    uint64_t proposal = 0;
    if (a->fencing) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t now_us = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
        unsigned bucket = fencing_bucket(a->resource, strlen(a->resource));
        if (fencing_propose(now_us, 0, &proposal) != 0 ||
            fencing_fence_key(a->resource, strlen(a->resource), fkey, sizeof(fkey)) < 0 ||
            (bkey_len = fencing_bucket_key("", 0, bucket, bkey, sizeof(bkey))) < 0 ||
            fencing_bucket_field(bucket, field, sizeof(field)) < 0)
            return -EINVAL;
        snprintf(prop, sizeof(prop), "%llu", (unsigned long long)proposal);
    }
    for (int i = 0; i < n; i++) {
        char host[256];
        int port;
        struct timeval tv = {.tv_sec = 2};
        if (node_addr(nodes[i], host, sizeof(host), &port) != 0)
            return -EINVAL;
        ctx[i] = redisConnectWithTimeout(host, port, tv);
        if (ctx[i] == NULL || ctx[i]->err)
            continue;
        if (a->fencing)
            redisAppendCommand(ctx[i], "EVAL %s 3 %s %b %s %s %s %s %s 0 %s", fencing_script_acquire,
                               a->resource, bkey, (size_t)bkey_len, fkey, l->id, ttl, prop,
                               NAIVE_FENCE_LEGACY, field);
        else
            redisAppendCommand(ctx[i], "SET %s %s NX PX %s", a->resource, l->id, ttl);
        int done = 0;
        while (!done && redisBufferWrite(ctx[i], &done) == REDIS_OK)
            ;
    }
    unsigned granted = 0, accepted = 0;
    for (int i = 0; i < n; i++) {
        redisReply *r = NULL;
        if (ctx[i] == NULL || ctx[i]->err || redisGetReply(ctx[i], (void **)&r) != REDIS_OK || r == NULL)
            continue;
        if (!a->fencing) {
            granted += r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
        } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 3) {
            granted += r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == 1;
            accepted += r->element[1]->type == REDIS_REPLY_INTEGER && r->element[1]->integer == 1;
        }
        freeReplyObject(r);
    }
    unsigned quorum = fencing_quorum((unsigned)n);
    if (granted < quorum || (a->fencing && accepted < quorum))
        return LOCKCORE_ELOCKED;
    /* The careless part: the lease is taken to start now, whatever time
     * passed since the request went out. */
    uint64_t drift = a->ttl_ms / 100 + 2;
    l->token = a->fencing ? proposal : 0;
    l->ttl_ms = a->ttl_ms;
    l->validity_ms = a->ttl_ms - drift;
    l->valid_until_ms = lockcore_now_ms() + l->validity_ms;
    l->nodes = (unsigned)n;
    l->nodes_ok = granted;
    l->attempts = 1;
    return 0;
}

/* Delete the key where it still holds our id; returns how many did, and
 * how many nodes answered in *answered. */
static unsigned naive_release(const struct args *a, redisContext **ctx, int n, const struct lockcore_lock *l,
                              unsigned *answered)
{
    unsigned deleted = 0;
    *answered = 0;
    for (int i = 0; i < n; i++) {
        if (ctx[i] == NULL || ctx[i]->err)
            continue;
        redisReply *r = redisCommand(ctx[i], "EVAL %s 1 %s %s", release_script, a->resource, l->id);
        *answered += r && r->type == REDIS_REPLY_INTEGER;
        deleted += r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        if (r)
            freeReplyObject(r);
    }
    return deleted;
}

/* PUT the value with the token (a leader's: its epoch, in the
 * Fencing-Token header); report the answer. */
static void write_value(const struct args *a, const struct lockcore_lock *l, const char *value)
{
    /* storage-guard (or the proxy in front of it) is on loopback. */
    const char *colon = strrchr(a->storage, ':');
    int port = colon ? atoi(colon + 1) : 0;
    json_t *body = json_pack("{s:s,s:s}", "value", value, "resource", a->resource);
    char header[64] = "";
    if (a->fencing && a->elect)
        snprintf(header, sizeof(header), "Fencing-Token: %" PRIu64 "\r\n", l->token);
    else if (a->fencing)
        json_object_set_new(body, "token", json_integer((json_int_t)l->token));
    char *b = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char path[512];
    snprintf(path, sizeof(path), "/v1/records/%s", a->key);
    uint64_t token = a->fencing ? l->token : 0;
    emit(json_pack("{s:s,s:s,s:I}", "ev", "writing", "value", value, "token", (json_int_t)token));
    struct hc_response r;
    int rc =
        port > 0 && port < 65536 ? hc_put((uint16_t)port, path, b, header[0] ? header : NULL, &r) : -EINVAL;
    free(b);
    if (rc != 0) {
        emit(json_pack("{s:s,s:i,s:s}", "ev", "written", "status", 0, "error", strerror(-rc)));
        return;
    }
    emit(json_pack("{s:s,s:i,s:s}", "ev", "written", "status", r.status, "body", r.body));
    hc_response_clear(&r);
}

/* Wait for a line on stdin if the replay stops us at this point. */
static int wait_go(const struct args *a, const char *point)
{
    char line[16];
    if (a->go == NULL || strcmp(a->go, point) != 0)
        return 0;
    return fgets(line, sizeof(line), stdin) == NULL ? -1 : 0;
}

int main(int argc, char **argv)
{
    struct args a;
    if (parse(argc, argv, &a) != 0)
        return 64;
    char *list = strdup(a.nodes);
    const char *nodes[LOCKCORE_NODES_MAX];
    redisContext *ctx[LOCKCORE_NODES_MAX] = {NULL};
    int n = list ? split_nodes(list, nodes, LOCKCORE_NODES_MAX) : -1;
    if (n <= 0) {
        fprintf(stderr, "%s: bad --nodes\n", a.name);
        free(list);
        return 64;
    }
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = nodes;
    o.n_nodes = (size_t)n;
    o.ttl_ms = a.ttl_ms;
    /* An election's epoch is a token: a leader has one even where its
     * writes carry none (--no-fencing). */
    o.fencing = a.fencing || a.elect;
    o.retry_count = a.wait_ms ? -1 : 0;
    o.wait_ms = a.wait_ms;
    o.retry_delay_ms = 50;
    o.retry_jitter_ms = 50;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s: %s\n", a.name, err);
        free(list);
        return 64;
    }
    struct lockcore_lock l;
    int status = 4; /* stdin closed while waiting for "go" */
    int rc;
    if (a.elect) {
        struct lockcore_call call;
        lockcore_call_init(c, &call);
        rc = lockcore_campaign(c, a.resource, a.name, &call, &l);
    } else {
        rc = a.validity_check ? lockcore_acquire(c, a.resource, &l) : naive_acquire(&a, nodes, n, ctx, &l);
    }
    if (rc != 0) {
        const char *why = a.validity_check ? lockcore_errmsg(c) : lockcore_strerror(rc);
        emit(json_pack("{s:s,s:s}", "ev", "acquire_failed", "error", why));
        status = 3;
        goto out;
    }
    /* A leader reports its epoch, and as its token what its writes carry. */
    json_t *got = json_pack("{s:s,s:I,s:I,s:I,s:i,s:i}", "ev", a.elect ? "elected" : "acquired", "token",
                            (json_int_t)(a.fencing ? l.token : 0), "validity_ms", (json_int_t)l.validity_ms,
                            "valid_until", (json_int_t)l.valid_until_ms, "nodes_ok", (int)l.nodes_ok,
                            "attempts", (int)l.attempts);
    if (a.elect)
        json_object_set_new(got, "epoch", json_integer((json_int_t)l.token));
    emit(got);
    if (a.first_value != NULL)
        write_value(&a, &l, a.first_value);
    /* The client checks its lease, as a careful client does, and writes
     * only if it is still valid. In the replays, the world may stop for
     * it before the check or between the check and the write. */
    if (wait_go(&a, "before-check") != 0)
        goto out;
    uint64_t left = lockcore_remaining_ms(&l);
    emit(json_pack("{s:s,s:I}", "ev", "checked", "remaining_ms", (json_int_t)left));
    if (left == 0)
        goto release;
    if (wait_go(&a, "before-write") != 0)
        goto out;
    write_value(&a, &l, a.value);
    if (wait_go(&a, "before-release") != 0)
        goto out;
release:
    if (a.elect) {
        rc = lockcore_resign(c, &l);
    } else if (a.validity_check) {
        rc = lockcore_release(c, &l);
    } else {
        unsigned answered;
        l.nodes_ok = naive_release(&a, ctx, n, &l, &answered);
        rc = answered >= fencing_quorum((unsigned)n) ? 0 : LOCKCORE_ENOQUORUM;
    }
    emit(json_pack("{s:s,s:i,s:i,s:b}", "ev", "released", "rc", rc, "nodes_ok", (int)l.nodes_ok, "resigned",
                   a.elect));
    status = 0;
out:
    naive_close(ctx, n);
    lockcore_client_free(c);
    free(list);
    return status;
}
