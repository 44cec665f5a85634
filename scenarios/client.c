/*
 * fencelock-scenario-client: one client of a scenario replay, as its own
 * process so that it can really be paused (SIGSTOP) or delayed.
 *
 * It acquires a lock, checks that the lock is still valid, optionally
 * waits for a line "go" on stdin (the replay decides when it writes), then
 * writes its value to storage-guard with its fencing token, and releases.
 * Each step is reported on stdout as one JSON line with the CLOCK_MONOTONIC
 * time in ms, which the replay shares (the clock is system-wide).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "http.h"
#include <lockcore/lockcore.h>

struct args {
    const char *name, *nodes, *resource, *storage, *key, *value;
    uint64_t ttl_ms, wait_ms;
    int fencing;
    const char *go; /* NULL, "before-check" or "before-write" */
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
        {"name", required_argument, NULL, 'n'},
        {"nodes", required_argument, NULL, 'N'},
        {"resource", required_argument, NULL, 'r'},
        {"storage", required_argument, NULL, 's'},
        {"key", required_argument, NULL, 'k'},
        {"value", required_argument, NULL, 'v'},
        {"ttl", required_argument, NULL, 't'},
        {"wait", required_argument, NULL, 'w'},
        {"no-fencing", no_argument, NULL, 'F'},
        {"go", required_argument, NULL, 'g'},
        {NULL, 0, NULL, 0},
    };
    *a = (struct args){.name = "A", .resource = "ledger", .key = "ledger", .ttl_ms = 10000, .fencing = 1};
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
        default:
            return -1;
        }
    }
    if (a->nodes == NULL || a->storage == NULL || a->value == NULL || a->ttl_ms == 0 ||
        (a->go && strcmp(a->go, "before-check") != 0 && strcmp(a->go, "before-write") != 0)) {
        fprintf(stderr, "usage: fencelock-scenario-client --nodes URL,... --storage HOST:PORT --value V\n"
                        "         [--name N] [--resource R] [--key K] [--ttl MS] [--wait MS] [--no-fencing]\n"
                        "         [--go before-check|before-write]   (wait for a line on stdin there)\n");
        return -1;
    }
    return 0;
}

/* PUT the value with the token; report the answer. */
static void write_value(const struct args *a, const struct lockcore_lock *l)
{
    /* storage-guard (or the proxy in front of it) is on loopback. */
    const char *colon = strrchr(a->storage, ':');
    int port = colon ? atoi(colon + 1) : 0;
    json_t *body = json_pack("{s:s,s:s}", "value", a->value, "resource", a->resource);
    if (a->fencing)
        json_object_set_new(body, "token", json_integer((json_int_t)l->token));
    char *b = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char path[512];
    snprintf(path, sizeof(path), "/v1/records/%s", a->key);
    emit(json_pack("{s:s,s:s,s:I}", "ev", "writing", "value", a->value, "token", (json_int_t)l->token));
    struct hc_response r;
    int rc = port > 0 && port < 65536 ? hc_put((uint16_t)port, path, b, NULL, &r) : -EINVAL;
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
    o.fencing = a.fencing;
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
    int rc = lockcore_acquire(c, a.resource, &l);
    if (rc != 0) {
        emit(json_pack("{s:s,s:s}", "ev", "acquire_failed", "error", lockcore_errmsg(c)));
        lockcore_client_free(c);
        free(list);
        return 3;
    }
    emit(json_pack("{s:s,s:I,s:I,s:I,s:i,s:i}", "ev", "acquired", "token", (json_int_t)l.token, "validity_ms",
                   (json_int_t)l.validity_ms, "valid_until", (json_int_t)l.valid_until_ms, "nodes_ok",
                   (int)l.nodes_ok, "attempts", (int)l.attempts));
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
    write_value(&a, &l);
release:
    rc = lockcore_release(c, &l);
    emit(json_pack("{s:s,s:i,s:i}", "ev", "released", "rc", rc, "nodes_ok", (int)l.nodes_ok));
    status = 0;
out:
    lockcore_client_free(c);
    free(list);
    return status;
}
