/*
 * One campaign client, run as `fencelock-campaign --client ...` in a child
 * process: lock, fenced read, increment, fenced write, release, until the
 * deadline, with one history line per event in its history file.
 *
 * After each read it looks for a trigger file in the run directory: the
 * campaign's way of catching a client inside its critical section, right
 * after the read. "stop-<id>" is for this client, "stop-any" for whichever
 * client takes it first (the rename makes that one client). Taking a
 * trigger, the client stops itself (SIGSTOP); the campaign then resumes it
 * late, delays its write, or kills it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fencelock-testkit/testkit.h>
#include <lockcore/lockcore.h>

#include "campaign.h"

static int hist_fd = -1;

/* One line per event, written with one write() to an O_APPEND file: a
 * client killed -9 leaves whole lines only (hp_log_line). */
#define hist(...) ((void)hp_log_line(hist_fd, __VA_ARGS__))

/* Take a trigger file if there is one for us: rename succeeds for one
 * client only. A trigger that says "work MS" asks the client, once
 * resumed, to work MS ms before its write while it keeps its lock alive
 * (*work_ms; 0 otherwise). */
static int take_trigger(const struct cc_client_args *a, long *work_ms)
{
    char path[600], mine[600];
    *work_ms = 0;
    snprintf(mine, sizeof(mine), "%s/taken-%d-%lld", a->run_dir, a->id, hp_now_ms());
    snprintf(path, sizeof(path), "%s/stop-%d", a->run_dir, a->id);
    if (rename(path, mine) != 0) {
        snprintf(path, sizeof(path), "%s/stop-any", a->run_dir);
        if (rename(path, mine) != 0)
            return 0;
    }
    FILE *f = fopen(mine, "r");
    if (f != NULL) {
        if (fscanf(f, "work %ld", work_ms) != 1)
            *work_ms = 0;
        fclose(f);
    }
    return 1;
}

/* The client's wall clock in microseconds: what a first-round token
 * proposal is made of (libfaketime moves it in the client-clock fault). */
static uint64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* GET the counter; fenced with ?token= unless plain. Returns the HTTP
 * status (404 reads as value 0, version 0) or a negative errno. */
static int read_counter(const struct cc_client_args *a, uint64_t token, long long *value, uint64_t *version)
{
    char path[128];
    if (token != 0)
        snprintf(path, sizeof(path), "/v1/records/%s?token=%" PRIu64, CC_KEY, token);
    else
        snprintf(path, sizeof(path), "/v1/records/%s", CC_KEY);
    struct hc_response r = {0};
    int rc = hc_get(a->sg_port, path, &r);
    if (rc != 0)
        return rc;
    int status = r.status;
    *value = 0;
    *version = 0;
    if (status == 200) {
        *value = json_integer_value(json_object_get(r.json, "value"));
        *version = (uint64_t)json_integer_value(json_object_get(r.json, "version"));
    }
    hc_response_clear(&r);
    return status;
}

static int write_counter(const struct cc_client_args *a, uint64_t token, long long value, uint64_t *version)
{
    char path[64], body[128];
    snprintf(path, sizeof(path), "/v1/records/%s", CC_KEY);
    if (token != 0)
        snprintf(body, sizeof(body), "{\"value\": %lld, \"token\": %" PRIu64 "}", value, token);
    else
        snprintf(body, sizeof(body), "{\"value\": %lld}", value);
    struct hc_response r = {0};
    int rc = hc_put(a->sg_port, path, body, NULL, &r);
    if (rc != 0)
        return rc;
    int status = r.status;
    *version = (uint64_t)json_integer_value(json_object_get(r.json, "version"));
    hc_response_clear(&r);
    return status;
}

/* Run the fencelock command with args after the common options; its
 * first line of output goes to out. Returns its exit status, or -1. */
static int run_cli(const struct cc_client_args *a, const char *const *args, char *out, size_t cap)
{
    char nodes[512] = "", ttl[32];
    for (int i = 0; i < a->n_nodes; i++) {
        size_t n = strlen(nodes);
        snprintf(nodes + n, sizeof(nodes) - n, "%s%s", i ? "," : "", a->nodes[i]);
    }
    snprintf(ttl, sizeof(ttl), "%" PRIu64 "ms", a->ttl_ms);
    char *argv[24];
    int n = 0;
    argv[n++] = (char *)a->cli;
    argv[n++] = "--nodes";
    argv[n++] = nodes;
    argv[n++] = "--ttl";
    argv[n++] = ttl;
    argv[n++] = "--retry-delay";
    argv[n++] = "20ms";
    if (!a->fencing)
        argv[n++] = "--no-fencing";
    for (int i = 0; args[i] != NULL && n < 23; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    int fd = -1;
    pid_t pid = hp_spawn_io(argv, NULL, NULL, NULL, &fd);
    if (pid < 0)
        return -1;
    size_t got = 0;
    ssize_t r;
    while (got + 1 < cap && (r = read(fd, out + got, cap - 1 - got)) > 0)
        got += (size_t)r;
    out[got] = '\0';
    close(fd);
    int st = 0;
    if (hp_wait(pid, 30000, &st) != 0) {
        hp_signal(pid, SIGKILL, 0);
        return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Work for ms while keeping the lock alive with `fencelock extend` every
 * TTL / 3, as a client of the command would; stop extending at the first
 * refusal. One K line: the first failure's exit status (0: kept), the
 * extensions and the lease's end. */
static void cli_work(const struct cc_client_args *a, const char *id, uint64_t token, long long until, long ms)
{
    long long end = hp_now_ms() + ms;
    int rc = 0;
    unsigned ext = 0;
    while (hp_now_ms() < end) {
        long long left = end - hp_now_ms();
        long step = (long)a->ttl_ms / 3;
        hp_sleep_ms(left < step ? (long)left : step);
        if (rc != 0 || hp_now_ms() >= end)
            continue;
        char out[1024];
        const char *ext_args[] = {"extend", CC_RESOURCE, id, NULL};
        rc = run_cli(a, ext_args, out, sizeof(out));
        if (rc == 0) {
            json_t *j = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
            until = (long long)json_integer_value(json_object_get(j, "valid_until_mono_ms"));
            json_decref(j);
            ext++;
        } else if (rc < 0) {
            rc = 1;
        }
    }
    if (rc == 0 && until < hp_now_ms())
        rc = 1; /* no refusal, but the lease ran out all the same */
    hist("K %d %" PRIu64 " %d %u %lld %lld", a->id, token, rc, ext, until, hp_now_ms());
}

/* The client loop over the fencelock command: acquire, read, write,
 * release, each lock operation a fencelock process. */
static int cli_loop(const struct cc_client_args *a)
{
    char wait[32];
    snprintf(wait, sizeof(wait), "%" PRIu64 "ms", 2 * a->ttl_ms + 1000);
    while (hp_now_ms() < a->until_ms) {
        char out[1024];
        const char *acq[] = {"--wait", wait, "acquire", CC_RESOURCE, NULL};
        long long t0 = hp_now_ms();
        int rc = run_cli(a, acq, out, sizeof(out));
        long long t1 = hp_now_ms();
        if (rc != 0) {
            hist("N %d %lld %lld %d", a->id, t0, t1, rc);
            hp_sleep_ms(10);
            continue;
        }
        json_t *j = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
        char id[64];
        snprintf(id, sizeof(id), "%s",
                 json_string_value(json_object_get(j, "lock_id"))
                     ? json_string_value(json_object_get(j, "lock_id"))
                     : "");
        uint64_t token = (uint64_t)json_integer_value(json_object_get(j, "token"));
        /* The lease's end as fencelock counted it (from the start of the
         * round that granted it), on the clock of hp_now_ms. */
        long long until = (long long)json_integer_value(json_object_get(j, "valid_until_mono_ms"));
        json_decref(j);
        hist("G %d %" PRIu64 " %lld %lld %lld 0 %" PRIu64, a->id, token, t0, t1, until, wall_us());
        long long value = 0;
        uint64_t rver = 0;
        int st = read_counter(a, a->fencing ? token : 0, &value, &rver);
        if (st == 200 || st == 404) {
            hist("D %d %" PRIu64 " %lld %" PRIu64 " %lld", a->id, token, value, rver, hp_now_ms());
            long work_ms = 0;
            if (take_trigger(a, &work_ms))
                raise(SIGSTOP);
            if (work_ms > 0)
                cli_work(a, id, token, until, work_ms);
            uint64_t wver = 0;
            long long tw = hp_now_ms();
            st = write_counter(a, token, value + 1, &wver);
            long long ta = hp_now_ms();
            if (st == 200)
                hist("A %d %" PRIu64 " %lld %" PRIu64 " %" PRIu64 " %lld %lld", a->id, token, value, rver,
                     wver, tw, ta);
            else if (st == 409)
                hist("R %d %" PRIu64 " %lld %lld", a->id, token, tw, ta);
            else
                hist("U %d %" PRIu64 " %lld %lld %d", a->id, token, tw, ta, st);
        } else {
            hist("S %d %" PRIu64 " %d", a->id, token, st);
        }
        hist("L %d %" PRIu64 " %lld", a->id, token, hp_now_ms());
        const char *rel[] = {"release", CC_RESOURCE, id, NULL};
        run_cli(a, rel, out, sizeof(out));
    }
    return 0;
}

/* Work for ms while a keep-alive extends the lock (lockcore_run), as a
 * client with a long critical section would. The write that follows does
 * not look at the keep-alive: it stands for a write already under way
 * when the loss was reported. One K line: the keep-alive's state at the
 * end (0: held, else the code it was lost with), the extensions and the
 * lease's end. */
static void keep_working(const struct cc_client_args *a, lockcore_client *c, struct lockcore_lock *lk,
                         long ms)
{
    long long end = hp_now_ms() + ms;
    unsigned ext = 0;
    lockcore_keepalive *k = NULL;
    int rc = lockcore_keepalive_start(c, lk, 0, 0, NULL, NULL, &k);
    if (rc == 0) {
        while (hp_now_ms() < end) {
            long long left = end - hp_now_ms();
            lockcore_run(c, left < 50 ? (int)left : 50);
        }
        struct lockcore_lock now = *lk;
        rc = lockcore_keepalive_get(k, &now);
        ext = lockcore_keepalive_extensions(k);
        if (now.valid_until_ms > lk->valid_until_ms)
            lk->valid_until_ms = now.valid_until_ms;
        lockcore_keepalive_stop(k);
    } else {
        hp_sleep_ms(ms);
    }
    hist("K %d %" PRIu64 " %d %u %" PRIu64 " %lld", a->id, lk->token, rc, ext, lk->valid_until_ms,
         hp_now_ms());
}

int cc_client_main(const struct cc_client_args *a)
{
    hist_fd = open(a->history, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (hist_fd < 0)
        return 70;
    if (a->cli != NULL) {
        hist("B %d %lld", a->id, hp_now_ms());
        int rc = cli_loop(a);
        hist("E %d %lld", a->id, hp_now_ms());
        close(hist_fd);
        return rc;
    }
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = (const char *const *)a->nodes;
    o.n_nodes = (size_t)a->n_nodes;
    o.ttl_ms = a->ttl_ms;
    o.fencing = a->fencing;
    o.retry_count = -1;
    o.retry_delay_ms = 20;
    o.retry_jitter_ms = 20;
    /* Each acquisition gives up after a while, so that the client ends
     * near its deadline even while someone else holds the lock. */
    o.wait_ms = 2 * a->ttl_ms + 1000;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0) {
        fprintf(stderr, "client %d: %s\n", a->id, err);
        close(hist_fd);
        return 70;
    }
    hist("B %d %lld", a->id, hp_now_ms());
    while (hp_now_ms() < a->until_ms) {
        struct lockcore_lock lk;
        long long t0 = hp_now_ms();
        int rc = lockcore_acquire(c, CC_RESOURCE, &lk);
        long long t1 = hp_now_ms();
        if (rc != 0) {
            hist("N %d %lld %lld %d", a->id, t0, t1, rc);
            hp_sleep_ms(10);
            continue;
        }
        hist("G %d %" PRIu64 " %lld %lld %" PRIu64 " %u %" PRIu64, a->id, lk.token, t0, t1, lk.valid_until_ms,
             lk.nodes_ok, wall_us());
        long long value = 0;
        uint64_t rver = 0;
        int st = read_counter(a, a->fencing ? lk.token : 0, &value, &rver);
        if (st != 200 && st != 404) {
            /* Refused as stale, or storage-guard is down: nothing read,
             * nothing written. */
            hist("S %d %" PRIu64 " %d", a->id, lk.token, st);
            hist("L %d %" PRIu64 " %lld", a->id, lk.token, hp_now_ms());
            lockcore_release(c, &lk);
            continue;
        }
        hist("D %d %" PRIu64 " %lld %" PRIu64 " %lld", a->id, lk.token, value, rver, hp_now_ms());
        long work_ms = 0;
        if (take_trigger(a, &work_ms))
            raise(SIGSTOP); /* the campaign resumes, delays or kills us */
        if (work_ms > 0)
            keep_working(a, c, &lk, work_ms);
        uint64_t wver = 0;
        long long tw = hp_now_ms();
        st = write_counter(a, lk.token, value + 1, &wver);
        long long ta = hp_now_ms();
        if (st == 200)
            hist("A %d %" PRIu64 " %lld %" PRIu64 " %" PRIu64 " %lld %lld", a->id, lk.token, value, rver,
                 wver, tw, ta);
        else if (st == 409)
            hist("R %d %" PRIu64 " %lld %lld", a->id, lk.token, tw, ta);
        else
            hist("U %d %" PRIu64 " %lld %lld %d", a->id, lk.token, tw, ta, st);
        hist("L %d %" PRIu64 " %lld", a->id, lk.token, hp_now_ms());
        lockcore_release(c, &lk);
    }
    hist("E %d %lld", a->id, hp_now_ms());
    lockcore_client_free(c);
    close(hist_fd);
    return 0;
}
