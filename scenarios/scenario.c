/*
 * The six replays. Each run builds its own world (redis-server nodes,
 * storage-guard, proxies), drives two client processes through the story
 * of the critique, records what happened on one shared monotonic clock,
 * and tears everything down by PID.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "fault_proxy.h"
#include "http.h"
#include "proc.h"
#include "redis_harness.h"
#include "scenario.h"
#include <fencelock-testkit/testkit.h>

#define NODES_MAX 5
#define RESOURCE "ledger"

const char *const sc_scenarios[] = {"gc-pause",      "network-delay", "clock-jump", "node-restart",
                                    "acquire-pause", "zombie-leader", NULL};

/* The story of an election's leaders rather than a lock's holders. */
static int election(const char *scenario)
{
    return strcmp(scenario, "zombie-leader") == 0;
}

/* Scenarios whose story makes two clients hold the lock at once. */
static int two_holders(const char *scenario)
{
    return strcmp(scenario, "clock-jump") == 0 || strcmp(scenario, "node-restart") == 0 ||
           strcmp(scenario, "acquire-pause") == 0;
}

int sc_modes(const char *scenario, enum sc_mode modes[3])
{
    for (int i = 0; scenario && sc_scenarios[i]; i++) {
        if (strcmp(scenario, sc_scenarios[i]) != 0)
            continue;
        modes[0] = SC_UNFENCED;
        modes[1] = SC_FENCED;
        if (strcmp(scenario, "node-restart") == 0) {
            modes[2] = SC_DELAYED;
            return 3;
        }
        if (strcmp(scenario, "acquire-pause") == 0) {
            modes[2] = SC_CHECKED;
            return 3;
        }
        return 2;
    }
    return 0;
}

const char *sc_mode_name(enum sc_mode m)
{
    switch (m) {
    case SC_UNFENCED:
        return "unfenced";
    case SC_FENCED:
        return "fenced";
    case SC_DELAYED:
        return "delayed restart";
    case SC_CHECKED:
        return "validity check";
    }
    return "?";
}

/* ---- one run's world ---- */

struct client {
    char name[2];
    pid_t pid;
    int in, out;
    char buf[8192];
    size_t len;
    char value[16];
    char writing[64]; /* the value of the write under way */
};

struct world {
    const struct sc_config *cfg;
    struct sc_result *r;
    char *err;
    size_t errcap;
    long long t0;
    char dir[256];
    struct rh_cluster *rc;
    struct tk_sg *sg; /* storage-guard, from the test kit */
    int sg_port;
    struct fp_proxy *to_storage;         /* A -> storage-guard (network-delay) */
    struct fp_proxy *to_node[NODES_MAX]; /* A -> node i: dropping (split-majority), holding (acquire-pause) */
    struct client a, b;
    long long b_valid_until; /* when B's lease ends, run ms */
    int b_released;
};

static long long now_run(const struct world *w)
{
    return hp_now_ms() - w->t0;
}

static void fail(struct world *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (w->err && w->errcap)
        vsnprintf(w->err, w->errcap, fmt, ap);
    va_end(ap);
}

static struct sc_event *event(struct world *w, long long t, long long end, const char *lane, const char *kind,
                              const char *fmt, ...)
{
    struct sc_result *r = w->r;
    if (r->n_ev == SC_EVENTS_MAX)
        return NULL;
    struct sc_event *e = &r->ev[r->n_ev++];
    e->t_ms = t;
    e->end_ms = end;
    snprintf(e->lane, sizeof(e->lane), "%s", lane);
    snprintf(e->kind, sizeof(e->kind), "%s", kind);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->text, sizeof(e->text), fmt, ap);
    va_end(ap);
    return e;
}

static int start_storage(struct world *w)
{
    struct tk_sg_options o;
    tk_sg_options_init(&o);
    o.exe = w->cfg->storage_guard_bin;
    o.unfenced = w->r->mode == SC_UNFENCED;
    o.start_timeout_ms = 10000;
    int rc = tk_sg_start(&o, &w->sg);
    if (rc < 0) {
        fail(w, "cannot start %s: %s", w->cfg->storage_guard_bin, strerror(-rc));
        return rc;
    }
    w->sg_port = tk_sg_port(w->sg);
    return 0;
}

/* The node list a client sees: direct URLs, or a dropping proxy where the
 * client "cannot reach" a node. */
static void node_list(struct world *w, int for_a, char *buf, size_t cap)
{
    size_t off = 0;
    for (int i = 0; i < rh_size(w->rc); i++) {
        int n;
        if (for_a && w->to_node[i])
            n = snprintf(buf + off, cap - off, "%s127.0.0.1:%d", i ? "," : "", fp_port(w->to_node[i]));
        else
            n = snprintf(buf + off, cap - off, "%s%s", i ? "," : "", rh_url(w->rc, i));
        if (n < 0 || (size_t)n >= cap - off)
            return;
        off += (size_t)n;
    }
}

/* Start client A or B. go_point: NULL (no stop), "before-check" or
 * "before-write": where it waits for a line on stdin. careless: acquire
 * without the elapsed-time check. */
static int spawn_client(struct world *w, struct client *c, const char *name, const char *go_point,
                        uint64_t wait_ms, int careless)
{
    char nodes[2048], storage[64], ttl[24], wait[24], logf[300];
    node_list(w, name[0] == 'A', nodes, sizeof(nodes));
    int port = name[0] == 'A' && w->to_storage ? fp_port(w->to_storage) : w->sg_port;
    snprintf(storage, sizeof(storage), "127.0.0.1:%d", port);
    snprintf(ttl, sizeof(ttl), "%llu", (unsigned long long)w->r->ttl_ms);
    snprintf(wait, sizeof(wait), "%llu", (unsigned long long)wait_ms);
    snprintf(logf, sizeof(logf), "%s/client-%s.log", w->dir, name);
    snprintf(c->name, sizeof(c->name), "%s", name);
    snprintf(c->value, sizeof(c->value), "written by %s", name);
    const char *argv[24];
    int k = 0;
    argv[k++] = w->cfg->client_bin;
    argv[k++] = "--name";
    argv[k++] = name;
    argv[k++] = "--nodes";
    argv[k++] = nodes;
    argv[k++] = "--storage";
    argv[k++] = storage;
    argv[k++] = "--resource";
    argv[k++] = RESOURCE;
    argv[k++] = "--key";
    argv[k++] = RESOURCE;
    argv[k++] = "--value";
    argv[k++] = c->value;
    argv[k++] = "--ttl";
    argv[k++] = ttl;
    argv[k++] = "--wait";
    argv[k++] = wait;
    if (w->r->mode == SC_UNFENCED)
        argv[k++] = "--no-fencing";
    if (careless)
        argv[k++] = "--no-validity-check";
    /* A leader's story: A writes once as soon as it is elected, then its
     * write of "written by A" is the one the pause makes late. */
    if (election(w->r->scenario)) {
        argv[k++] = "--elect";
        if (name[0] == 'A') {
            argv[k++] = "--first-value";
            argv[k++] = "first write by A";
        }
    }
    if (go_point) {
        argv[k++] = "--go";
        argv[k++] = go_point;
    }
    argv[k] = NULL;
    pid_t pid = hp_spawn_io((char *const *)argv, NULL, logf, &c->in, &c->out);
    if (pid < 0) {
        fail(w, "cannot start %s: %s", w->cfg->client_bin, strerror((int)-pid));
        return (int)pid;
    }
    c->pid = pid;
    c->len = 0;
    c->writing[0] = '\0';
    return 0;
}

static void client_go(struct client *c)
{
    /* A client that has already exited must not take the replay down with
     * SIGPIPE: block it for this write and drop the one the write raised. */
    sigset_t pipe, old;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, &old);
    if (write(c->in, "go\n", 3) < 0 && errno == EPIPE) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Put one client event on the timeline. A client that cannot read
 * CLOCK_MONOTONIC leaves out "t" (and "valid_until"): the event is then
 * stamped when it is read, and the lease ends validity_ms after that. */
static void record(struct world *w, struct client *c, json_t *ev)
{
    const char *kind = json_string_value(json_object_get(ev, "ev"));
    json_t *jt = json_object_get(ev, "t");
    long long t = (json_is_integer(jt) ? json_integer_value(jt) : hp_now_ms()) - w->t0;
    int is_a = c->name[0] == 'A';
    struct sc_result *r = w->r;
    if (kind == NULL)
        return;
    if (strcmp(kind, "acquired") == 0 || strcmp(kind, "elected") == 0) {
        uint64_t token = (uint64_t)json_integer_value(json_object_get(ev, "token"));
        json_t *ju = json_object_get(ev, "valid_until");
        long long until = json_is_integer(ju) ? json_integer_value(ju) - w->t0
                                              : t + json_integer_value(json_object_get(ev, "validity_ms"));
        int both = 0;
        if (is_a) {
            r->token_a = token;
            r->a_valid_until = until;
            both = r->b_acquired >= 0 && !w->b_released && w->b_valid_until > t;
        } else {
            r->token_b = token;
            r->b_acquired = t;
            w->b_valid_until = until;
            both = r->a_valid_until > t;
        }
        r->double_grant |= both;
        char tok[80] = "no token";
        json_t *epoch = json_object_get(ev, "epoch");
        if (json_is_integer(epoch) && token == 0)
            snprintf(tok, sizeof(tok), "epoch %llu (its writes carry none)",
                     (unsigned long long)json_integer_value(epoch));
        else if (json_is_integer(epoch))
            snprintf(tok, sizeof(tok), "epoch %llu", (unsigned long long)token);
        else if (token)
            snprintf(tok, sizeof(tok), "token %llu", (unsigned long long)token);
        event(w, t, until, c->name, "lease", "%s (%lld/%d nodes), %s, valid %lld ms",
              json_is_integer(epoch) ? "is elected leader" : "acquires the lock",
              (long long)json_integer_value(json_object_get(ev, "nodes_ok")), r->n_nodes, tok,
              (long long)json_integer_value(json_object_get(ev, "validity_ms")));
        if (both)
            event(w, t, -1, c->name, "note", "two clients hold the lock: %s's lease runs %lld ms more",
                  is_a ? "B" : "A", (is_a ? w->b_valid_until : r->a_valid_until) - t);
    } else if (strcmp(kind, "acquire_failed") == 0) {
        if (is_a)
            r->a_refused = 1;
        event(w, t, -1, c->name, "note", "cannot acquire: %s",
              json_string_value(json_object_get(ev, "error")));
    } else if (strcmp(kind, "checked") == 0) {
        long long left = json_integer_value(json_object_get(ev, "remaining_ms"));
        if (left > 0)
            event(w, t, -1, c->name, "step", "checks its lease: %lld ms left, goes on to write", left);
        else
            event(w, t, -1, c->name, "note", "checks its lease: expired, does not write");
    } else if (strcmp(kind, "writing") == 0) {
        const char *v = json_string_value(json_object_get(ev, "value"));
        snprintf(c->writing, sizeof(c->writing), "%s", v != NULL ? v : c->value);
        event(w, t, -1, c->name, "step", "sends its write");
    } else if (strcmp(kind, "written") == 0) {
        int status = (int)json_integer_value(json_object_get(ev, "status"));
        uint64_t token = is_a ? r->token_a : r->token_b;
        if (is_a)
            r->status_a = status;
        else
            r->status_b = status;
        char with[48] = "";
        if (token)
            snprintf(with, sizeof(with), " with token %llu", (unsigned long long)token);
        const char *value = c->writing[0] ? c->writing : c->value;
        if (status == 200)
            event(w, t, -1, "storage", "write-ok", "accepts \"%s\"%s", value, with);
        else if (status == 409)
            event(w, t, -1, "storage", "write-refused", "refuses \"%s\": token %llu is stale (409)", value,
                  (unsigned long long)token);
        else
            event(w, t, -1, "storage", "write-refused", "answers %d to \"%s\"", status, value);
    } else if (strcmp(kind, "released") == 0) {
        if (!is_a)
            w->b_released = 1;
        event(w, t, -1, c->name, "step", "%s: %lld nodes still held its lock",
              json_is_true(json_object_get(ev, "resigned")) ? "resigns" : "releases",
              (long long)json_integer_value(json_object_get(ev, "nodes_ok")));
    }
}

/* Read client events until one of kind `want` (or the client exits).
 * Every event read goes on the timeline. */
static int await(struct world *w, struct client *c, const char *want, int timeout_ms)
{
    long long deadline = hp_now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(c->buf, '\n', c->len);
        if (nl != NULL) {
            *nl = '\0';
            json_t *ev = json_loads(c->buf, 0, NULL);
            size_t used = (size_t)(nl - c->buf) + 1;
            memmove(c->buf, c->buf + used, c->len - used);
            c->len -= used;
            if (ev == NULL)
                continue;
            record(w, c, ev);
            const char *kind = json_string_value(json_object_get(ev, "ev"));
            int hit = kind && (strcmp(kind, want) == 0 || strcmp(kind, "acquire_failed") == 0);
            int failed = kind && strcmp(kind, "acquire_failed") == 0;
            json_decref(ev);
            if (hit)
                return failed ? -ENOLCK : 0;
            continue;
        }
        long long left = deadline - hp_now_ms();
        if (left <= 0) {
            fail(w, "client %s: no '%s' within %d ms", c->name, want, timeout_ms);
            return -ETIMEDOUT;
        }
        struct pollfd p = {.fd = c->out, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        ssize_t n = read(c->out, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
        if (n <= 0) {
            fail(w, "client %s exited before '%s'; see %s/client-%s.log", c->name, want, w->dir, c->name);
            return -EPIPE;
        }
        c->len += (size_t)n;
    }
}

static void client_end(struct client *c)
{
    if (c->pid > 0) {
        /* Let it finish its release; never leave it behind. */
        if (hp_wait(c->pid, 5000, NULL) != 0)
            hp_signal(c->pid, SIGKILL, 0);
        c->pid = 0;
    }
    if (c->in > 0)
        close(c->in);
    if (c->out > 0)
        close(c->out);
    c->in = c->out = -1;
}

static void read_final_value(struct world *w)
{
    struct hc_response resp;
    snprintf(w->r->final_value, sizeof(w->r->final_value), "(none)");
    if (hc_get((uint16_t)w->sg_port, "/v1/records/" RESOURCE, &resp) != 0)
        return;
    const char *v = resp.status == 200 ? json_string_value(json_object_get(resp.json, "value")) : NULL;
    if (v)
        snprintf(w->r->final_value, sizeof(w->r->final_value), "%s", v);
    hc_response_clear(&resp);
    event(w, now_run(w), -1, "storage", "note", "holds \"%s\"", w->r->final_value);
}

/* Stop a client and wait until it is stopped: kill() returns before the
 * stop takes effect, and a client woken meanwhile could still read what the
 * replay sends or releases next. */
static int stop_client(struct world *w, struct client *c)
{
    int rc = hp_signal(c->pid, SIGSTOP, 0);
    if (rc != 0)
        return rc;
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)c->pid);
    for (long long deadline = hp_now_ms() + 5000; hp_now_ms() < deadline; hp_sleep_ms(1)) {
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = '\0';
        const char *paren = strrchr(buf, ')'); /* the state follows the command name */
        if (paren && paren[1] == ' ' && (paren[2] == 'T' || paren[2] == 't'))
            return 0;
    }
    fail(w, "client %s did not stop within 5 s", c->name);
    return -ETIMEDOUT;
}

static void sleep_until_run(struct world *w, long long t)
{
    long long d = t - now_run(w);
    if (d > 0)
        hp_sleep_ms(d);
}

/* ---- the scenarios ---- */

/* Kleppmann's figure: A's lease expires during a stop-the-world pause
 * between its check and its write; B acquires and writes; A resumes and
 * writes what it computed under a lease it no longer has. */
static int gc_pause(struct world *w)
{
    int rc;
    if ((rc = spawn_client(w, &w->a, "A", "before-write", 0, 0)) || (rc = await(w, &w->a, "checked", 10000)))
        return rc;
    long long paused = now_run(w);
    if ((rc = stop_client(w, &w->a)) != 0)
        return rc;
    client_go(&w->a); /* it will write as soon as it runs again */
    sleep_until_run(w, w->r->a_valid_until + 100);
    if ((rc = spawn_client(w, &w->b, "B", NULL, 5000, 0)) || (rc = await(w, &w->b, "released", 10000)))
        return rc;
    client_end(&w->b);
    long long resumed = now_run(w);
    event(w, paused, resumed, "A", "pause", "stopped (SIGSTOP) for %lld ms: a GC pause", resumed - paused);
    if ((rc = hp_signal(w->a.pid, SIGCONT, 0)) != 0)
        return rc;
    return await(w, &w->a, "released", 10000);
}

/* A's write is held in the network until after its lease expired, and
 * arrives after B's. */
static int network_delay(struct world *w)
{
    int rc = fp_new(w->sg_port, &w->to_storage);
    if (rc != 0) {
        fail(w, "proxy: %s", strerror(-rc));
        return rc;
    }
    if ((rc = spawn_client(w, &w->a, "A", "before-write", 0, 0)) || (rc = await(w, &w->a, "checked", 10000)))
        return rc;
    long long held = now_run(w);
    fp_set_hold(w->to_storage, FP_UP, 1);
    client_go(&w->a);
    if ((rc = await(w, &w->a, "writing", 10000)) != 0)
        return rc;
    sleep_until_run(w, w->r->a_valid_until + 100);
    if ((rc = spawn_client(w, &w->b, "B", NULL, 5000, 0)) || (rc = await(w, &w->b, "released", 10000)))
        return rc;
    client_end(&w->b);
    long long released = now_run(w);
    event(w, held, released, "network", "hold", "holds A's packets to storage for %lld ms", released - held);
    fp_set_hold(w->to_storage, FP_UP, 0);
    return await(w, &w->a, "released", 10000);
}

/* Five nodes; A reaches only 1, 2, 3 (4 and 5 drop its packets) and gets a
 * majority there. Then node 3 loses A's key: its clock jumps (clock-jump)
 * or it restarts without data (node-restart). B gets 3, 4, 5: a majority,
 * while A's lease still runs. */
static int split_majority(struct world *w, int restart)
{
    int rc;
    for (int i = 3; i < 5; i++) {
        if ((rc = fp_new(rh_port(w->rc, i), &w->to_node[i])) != 0) {
            fail(w, "proxy: %s", strerror(-rc));
            return rc;
        }
        fp_set_drop(w->to_node[i], FP_BOTH, 1);
    }
    event(w, now_run(w), -1, "network", "note", "A cannot reach redis 4 and 5");
    if ((rc = spawn_client(w, &w->a, "A", "before-check", 0, 0)) || (rc = await(w, &w->a, "acquired", 10000)))
        return rc;
    if (!restart) {
        long long t = now_run(w);
        long jump = (long)(w->r->ttl_ms / 1000) + 30;
        if ((rc = rh_clock_offset(w->rc, 2, jump)) != 0) {
            fail(w, "clock jump on redis 3 failed: %s", strerror(-rc));
            return rc;
        }
        event(w, t, now_run(w), "redis 3", "node", "wall clock jumps %+ld s: A's key expires", jump);
    } else if (w->r->mode != SC_DELAYED) {
        long long t = now_run(w);
        if ((rc = rh_restart(w->rc, 2, 0)) != 0) {
            fail(w, "restart of redis 3 failed");
            return rc;
        }
        event(w, t, now_run(w), "redis 3", "node", "crashes and restarts at once without its data");
    } else {
        /* The Redlock rule: stay down longer than the TTL. B keeps
         * retrying meanwhile. */
        long long t = now_run(w);
        if ((rc = rh_kill(w->rc, 2)) != 0)
            return rc;
        if ((rc = spawn_client(w, &w->b, "B", NULL, 4 * w->r->ttl_ms, 0)) != 0)
            return rc;
        hp_sleep_ms((long)w->r->ttl_ms + 200);
        if ((rc = rh_restart(w->rc, 2, 0)) != 0) {
            fail(w, "restart of redis 3 failed");
            return rc;
        }
        event(w, t, now_run(w), "redis 3", "node", "crashes, stays down for a TTL, restarts without data");
    }
    if (w->b.pid == 0 && (rc = spawn_client(w, &w->b, "B", NULL, 5000, 0)) != 0)
        return rc;
    if ((rc = await(w, &w->b, "released", 4 * (int)w->r->ttl_ms + 10000)) != 0)
        return rc;
    client_end(&w->b);
    client_go(&w->a); /* A, unaware, checks its lease and writes */
    return await(w, &w->a, "released", 10000);
}

/* Kleppmann's second pause: A sends its lock request to every node and is
 * stopped while the grants are on their way back; they wait, unread, in
 * A's socket buffers until its keys have expired and B holds the lock.
 * A careless client (UNFENCED, FENCED) then takes them for a fresh lock;
 * fencelock's client (CHECKED) measures how long the acquisition took and
 * refuses the grant. The proxies hold the grants until A is stopped, so
 * that A cannot read them first, then deliver them to A's sockets. */
static int acquire_pause(struct world *w)
{
    int rc, n = rh_size(w->rc), careless = w->r->mode != SC_CHECKED;
    for (int i = 0; i < n; i++) {
        if ((rc = fp_new(rh_port(w->rc, i), &w->to_node[i])) != 0) {
            fail(w, "proxy: %s", strerror(-rc));
            return rc;
        }
        fp_set_hold(w->to_node[i], FP_DOWN, 1);
    }
    event(w, now_run(w), -1, "network", "note", "A reaches the nodes through proxies; A %s",
          careless ? "does not check how long its acquisition took" : "is fencelock's client");
    if ((rc = spawn_client(w, &w->a, "A", "before-write", 0, careless)) != 0)
        return rc;
    /* A's request has been carried out once its key is on every node. */
    long long deadline = hp_now_ms() + 10000;
    int have = 0;
    while (have < n && hp_now_ms() < deadline) {
        int status;
        if (hp_wait(w->a.pid, 0, &status) == 0) {
            w->a.pid = 0;
            fail(w,
                 "client A exited (status %d) before its lock request reached the nodes; see %s/client-A.log",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, w->dir);
            return -EPIPE;
        }
        have = 0;
        for (int i = 0; i < n; i++)
            have += rh_pttl(w->rc, i, RESOURCE) >= 0;
        if (have < n)
            hp_sleep_ms(1);
    }
    if (have < n) {
        fail(w, "A's lock request reached %d of %d nodes; see %s/client-A.log", have, n, w->dir);
        return -ETIMEDOUT;
    }
    long long sent = now_run(w);
    if ((rc = stop_client(w, &w->a)) != 0)
        return rc;
    event(w, sent, -1, "A", "note",
          "its lock request is granted by all %d nodes; the grants are on their way", n);
    for (int i = 0; i < n; i++)
        fp_set_hold(w->to_node[i], FP_DOWN, 0);
    event(w, now_run(w), -1, "network", "note", "delivers the grants into A's socket buffers, unread");
    sleep_until_run(w, sent + (long long)w->r->ttl_ms + 100); /* A's keys have expired */
    if ((rc = spawn_client(w, &w->b, "B", "before-write", 5000, 0)) ||
        (rc = await(w, &w->b, "checked", 10000)))
        return rc;
    long long resumed = now_run(w);
    event(w, sent, resumed, "A", "pause", "stopped (SIGSTOP) for %lld ms with its grants unread",
          resumed - sent);
    if ((rc = hp_signal(w->a.pid, SIGCONT, 0)) != 0)
        return rc;
    rc = await(w, &w->a, "checked", 10000);
    if (rc != 0 && rc != -ENOLCK)
        return rc;
    int a_writes = rc == 0;
    client_go(&w->b); /* B writes first, A after it */
    if ((rc = await(w, &w->b, "released", 10000)) != 0)
        return rc;
    client_end(&w->b);
    if (!a_writes)
        return 0;
    client_go(&w->a);
    return await(w, &w->a, "released", 10000);
}

/* The zombie leader: leader A (epoch eA) writes, and is stopped with
 * SIGSTOP between the check of its lease and its next write; its
 * leadership runs out, and B, which campaigns as A stops and waits in
 * line, is elected (eB > eA) and writes; A goes on and writes what it was about to.
 * B resigns only after A's late write, so that B leads throughout. */
static int zombie_leader(struct world *w)
{
    int rc;
    if ((rc = spawn_client(w, &w->a, "A", "before-write", 0, 0)) || (rc = await(w, &w->a, "checked", 10000)))
        return rc;
    if ((rc = spawn_client(w, &w->b, "B", "before-release", 5000, 0)) != 0)
        return rc;
    event(w, now_run(w), -1, "B", "note", "campaigns: waits in line while A leads");
    long long paused = now_run(w);
    if ((rc = stop_client(w, &w->a)) != 0)
        return rc;
    client_go(&w->a); /* it will write as soon as it runs again */
    if ((rc = await(w, &w->b, "written", 10000)) != 0)
        return rc;
    long long resumed = now_run(w);
    event(w, paused, resumed, "A", "pause", "stopped (SIGSTOP) for %lld ms: a GC pause", resumed - paused);
    event(w, resumed, -1, "A", "note", "goes on, unaware that it was deposed, and writes");
    if ((rc = hp_signal(w->a.pid, SIGCONT, 0)) != 0 || (rc = await(w, &w->a, "released", 10000)) != 0)
        return rc;
    client_go(&w->b);
    rc = await(w, &w->b, "released", 10000);
    client_end(&w->b);
    return rc;
}

static void judge(struct sc_result *r)
{
    /* A lost update: A's last write accepted after B's, and it stands. */
    int a_last = -1, b_first = -1;
    for (int i = 0; i < r->n_ev; i++) {
        const struct sc_event *e = &r->ev[i];
        if (strcmp(e->lane, "storage") != 0 || strncmp(e->kind, "write", 5) != 0)
            continue;
        if (strstr(e->text, "by A") != NULL)
            a_last = i;
        else if (b_first < 0)
            b_first = i;
    }
    r->lost_update = r->status_b == 200 && r->status_a == 200 && a_last > b_first && b_first >= 0 &&
                     strcmp(r->final_value, "written by A") == 0;
    const char *grant = r->double_grant ? "two clients held the lock; " : "";
    if (r->mode == SC_CHECKED) {
        if (r->a_refused && r->status_a == 0 && !r->double_grant &&
            strcmp(r->final_value, "written by B") == 0)
            snprintf(r->verdict, sizeof(r->verdict),
                     "validity check: A's late grant refused, A did not write; B's write stands");
        else
            snprintf(r->verdict, sizeof(r->verdict), "validity check: UNEXPECTED: A's write %d, final \"%s\"",
                     r->status_a, r->final_value);
    } else if (r->mode == SC_DELAYED) {
        if (!r->double_grant && r->b_acquired >= 0)
            snprintf(r->verdict, sizeof(r->verdict),
                     "delayed restart: no double grant (B granted %lld ms after A's lease ended)",
                     r->b_acquired - r->a_valid_until);
        else
            snprintf(r->verdict, sizeof(r->verdict), "delayed restart: UNEXPECTED double grant");
    } else if (r->lost_update && election(r->scenario)) {
        snprintf(r->verdict, sizeof(r->verdict),
                 "%s: lost update (deposed leader A's late write overwrote leader B's)",
                 sc_mode_name(r->mode));
    } else if (r->lost_update) {
        snprintf(r->verdict, sizeof(r->verdict), "%s: %slost update (A's late write overwrote B's)",
                 sc_mode_name(r->mode), grant);
    } else if (r->status_a == 409 && strcmp(r->final_value, "written by B") == 0 && election(r->scenario)) {
        snprintf(r->verdict, sizeof(r->verdict),
                 "%s: stale write refused (deposed leader A's epoch %llu < leader B's %llu)",
                 sc_mode_name(r->mode), (unsigned long long)r->token_a, (unsigned long long)r->token_b);
    } else if (r->status_a == 409 && strcmp(r->final_value, "written by B") == 0) {
        snprintf(r->verdict, sizeof(r->verdict), "%s: %sstale write refused (A's token %llu < B's %llu)",
                 sc_mode_name(r->mode), grant, (unsigned long long)r->token_a,
                 (unsigned long long)r->token_b);
    } else {
        snprintf(r->verdict, sizeof(r->verdict), "%s: UNEXPECTED: A's write %d, B's write %d, final \"%s\"",
                 sc_mode_name(r->mode), r->status_a, r->status_b, r->final_value);
    }
}

int sc_as_predicted(const struct sc_result *r)
{
    int two = two_holders(r->scenario);
    switch (r->mode) {
    case SC_UNFENCED:
        return r->lost_update && (!two || r->double_grant);
    case SC_FENCED:
        return r->status_b == 200 && r->status_a == 409 && r->token_a < r->token_b &&
               strcmp(r->final_value, "written by B") == 0 && (!two || r->double_grant);
    case SC_DELAYED:
        return !r->double_grant && r->b_acquired >= r->a_valid_until && r->status_b == 200;
    case SC_CHECKED:
        return r->a_refused && !r->double_grant && r->status_a == 0 && r->status_b == 200 &&
               strcmp(r->final_value, "written by B") == 0;
    }
    return 0;
}

/* Events in time order; equal times keep the order they were recorded in. */
static void sort_events(struct sc_result *r)
{
    for (int i = 1; i < r->n_ev; i++) {
        struct sc_event e = r->ev[i];
        int j = i;
        while (j > 0 && r->ev[j - 1].t_ms > e.t_ms) {
            r->ev[j] = r->ev[j - 1];
            j--;
        }
        r->ev[j] = e;
    }
}

int sc_run(const char *scenario, enum sc_mode mode, const struct sc_config *cfg, struct sc_result *out,
           char *err, size_t errcap)
{
    enum sc_mode modes[3];
    int nm = sc_modes(scenario, modes), known = 0;
    for (int i = 0; i < nm; i++)
        known |= modes[i] == mode;
    if (!known || cfg == NULL || cfg->client_bin == NULL || cfg->storage_guard_bin == NULL || out == NULL) {
        if (err && errcap)
            snprintf(err, errcap, "unknown scenario or mode, or missing configuration");
        return -EINVAL;
    }
    memset(out, 0, sizeof(*out));
    snprintf(out->scenario, sizeof(out->scenario), "%s", scenario);
    out->mode = mode;
    out->b_acquired = -1;
    int split = strcmp(scenario, "clock-jump") == 0 || strcmp(scenario, "node-restart") == 0;
    out->n_nodes = split ? 5 : 3;
    /* Short leases where the story waits for one to run out; long ones
     * where both clients must hold the lock at once. */
    out->ttl_ms = mode == SC_DELAYED ? 2000 : split ? 10000 : 1000;

    struct world w = {.cfg = cfg, .r = out, .err = err, .errcap = errcap};
    w.a.in = w.a.out = w.b.in = w.b.out = -1;
    int rc = rh_mkdtemp("replay", w.dir, sizeof(w.dir));
    if (rc != 0) {
        fail(&w, "temp dir: %s", strerror(-rc));
        return rc;
    }
    struct rh_options ro;
    rh_options_init(&ro);
    ro.faketime = strcmp(scenario, "clock-jump") == 0;
    w.t0 = hp_now_ms();
    if ((rc = rh_cluster_start(out->n_nodes, &ro, &w.rc)) != 0) {
        fail(&w, "redis-server nodes did not start: %s", strerror(-rc));
        goto out;
    }
    if ((rc = start_storage(&w)) != 0)
        goto out;
    w.t0 = hp_now_ms(); /* the story starts with everything up */
    event(&w, 0, -1, "network", "note", "%d redis-server nodes, storage-guard%s, lease TTL %llu ms",
          out->n_nodes, mode == SC_UNFENCED ? " (not checking tokens)" : "", (unsigned long long)out->ttl_ms);
    if (strcmp(scenario, "gc-pause") == 0)
        rc = gc_pause(&w);
    else if (strcmp(scenario, "network-delay") == 0)
        rc = network_delay(&w);
    else if (strcmp(scenario, "acquire-pause") == 0)
        rc = acquire_pause(&w);
    else if (election(scenario))
        rc = zombie_leader(&w);
    else
        rc = split_majority(&w, strcmp(scenario, "node-restart") == 0);
    if (rc == 0) {
        read_final_value(&w);
        sort_events(out);
        judge(out);
    }
out:
    if (w.a.pid > 0)
        hp_signal(w.a.pid, SIGCONT, 0);
    client_end(&w.a);
    client_end(&w.b);
    fp_free(w.to_storage);
    for (int i = 0; i < NODES_MAX; i++)
        fp_free(w.to_node[i]);
    if (w.sg != NULL)
        tk_sg_stop(w.sg);
    tk_sg_free(w.sg);
    rh_cluster_free(w.rc);
    if (rc == 0 && getenv("FENCELOCK_KEEP_TMP") == NULL)
        rh_rmtree(w.dir);
    return rc;
}
