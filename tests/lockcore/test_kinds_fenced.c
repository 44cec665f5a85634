/* Every lock kind fenced off by storage-guard: a holder (a child process)
 * takes a lock of the kind and writes, is stopped with SIGSTOP past its
 * TTL (no keep-alive runs), another client takes the same kind and
 * resource and writes with its token, and the stopped holder, resumed,
 * writes with its old token. storage-guard must answer 409 stale_token and
 * the record must keep the second writer's value. Each scenario also runs
 * with fencing off in the clients and an --unfenced storage-guard: there
 * the late write lands, so the test fails where fencing would be off. A
 * reader's token checks reads as docs/fencing.md defines it. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "proc.h"
#include "redis_harness.h"
#include <lockcore/lockcore.h>

#define NODES 3
#define TTL_MS 800
#define MAX_RECORDS 3

struct fixture {
    struct rh_cluster *rc;
    const char *urls[NODES];
    char url_buf[NODES][256];
    struct tk_sg *fenced; /* storage-guard as deployed */
    struct tk_sg *loose;  /* --unfenced: the store without the token check */
    lockcore_client *own; /* the test's client made before a fork: kept here,
                             reachable, so that a child under valgrind does
                             not count it as its own leak */
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(rh_cluster_start(NODES, NULL, &f->rc), 0);
    for (int i = 0; i < NODES; i++) {
        snprintf(f->url_buf[i], sizeof(f->url_buf[i]), "%s", rh_url(f->rc, i));
        f->urls[i] = f->url_buf[i];
    }
    assert_int_equal(tk_sg_start(NULL, &f->fenced), 0);
    struct tk_sg_options o;
    tk_sg_options_init(&o);
    o.unfenced = 1;
    assert_int_equal(tk_sg_start(&o, &f->loose), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    lockcore_client_free(f->own); /* a test that failed with it */
    tk_sg_free(f->fenced);
    tk_sg_free(f->loose);
    rh_cluster_free(f->rc);
    free(f);
    return 0;
}

/* A client with no keep-alive: nothing extends a stopped holder's lease. */
static lockcore_client *client_on(const struct fixture *f, int fencing, uint64_t ttl_ms)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = NODES;
    o.ttl_ms = ttl_ms;
    o.fencing = fencing;
    o.retry_count = -1;
    o.retry_delay_ms = 20;
    o.retry_jitter_ms = 20;
    o.wait_ms = 5000;
    o.request_timeout_ms = 300;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0) {
        fprintf(stderr, "client: %s\n", err);
        return NULL;
    }
    return c;
}

/* ---- storage-guard ---- */

/* PUT value into record key under token (no token when 0: a client
 * without fencing). Returns the HTTP status, or a negative errno. */
static int put(uint16_t port, const char *key, const char *value, uint64_t token)
{
    char *esc = hc_escape(key, strlen(key));
    char path[512], body[256];
    snprintf(path, sizeof(path), "/v1/records/%s", esc);
    free(esc);
    if (token > 0)
        snprintf(body, sizeof(body), "{\"value\":\"%s\",\"token\":%llu}", value, (unsigned long long)token);
    else
        snprintf(body, sizeof(body), "{\"value\":\"%s\"}", value);
    struct hc_response r = {0};
    int rc = hc_put(port, path, body, NULL, &r);
    int status = rc < 0 ? rc : r.status;
    hc_response_clear(&r);
    return status;
}

/* GET path; on 200 copy its "value" (a string) into value and its
 * "token"/"last_token" into *token. Returns the HTTP status or -errno. */
static int get(uint16_t port, const char *path, char *value, size_t cap, uint64_t *token)
{
    struct hc_response r = {0};
    int rc = hc_get(port, path, &r);
    int status = rc < 0 ? rc : r.status;
    if (value != NULL && cap > 0)
        value[0] = '\0';
    if (token != NULL)
        *token = 0;
    if (status == 200 && r.json != NULL) {
        const char *v = json_string_value(json_object_get(r.json, "value"));
        if (value != NULL && v != NULL)
            snprintf(value, cap, "%s", v);
        json_t *t = json_object_get(r.json, "token");
        if (t == NULL)
            t = json_object_get(r.json, "last_token");
        if (token != NULL && json_is_integer(t))
            *token = (uint64_t)json_integer_value(t);
    }
    hc_response_clear(&r);
    return status;
}

static int get_record(uint16_t port, const char *key, char *value, size_t cap, uint64_t *token)
{
    char *esc = hc_escape(key, strlen(key));
    char path[512];
    snprintf(path, sizeof(path), "/v1/records/%s", esc);
    free(esc);
    return get(port, path, value, cap, token);
}

/* The resource's last admitted token, read without raising it. */
static uint64_t last_token(uint16_t port, const char *resource)
{
    char *esc = hc_escape(resource, strlen(resource));
    char path[512];
    snprintf(path, sizeof(path), "/v1/fences/%s", esc);
    free(esc);
    uint64_t t = 0;
    assert_int_equal(get(port, path, NULL, 0, &t), 200);
    return t;
}

/* ---- the stopped holder ---- */

enum kind { K_REENTRANT, K_MULTI, K_WRITER, K_PERMIT };

#define ROOM_PERMITS 2

struct scenario {
    enum kind kind;
    int fencing;       /* the clients issue tokens, storage-guard checks them */
    uint16_t port;     /* storage-guard */
    char resource[64]; /* the lock's resource (a set: its first member) */
    const char *members[MAX_RECORDS];
    unsigned n_members;
    char member_buf[MAX_RECORDS][80];
    int up[2], go[2]; /* holder -> test, test -> holder */
};

/* Read one line from fd within ms. Returns its length, or -1. */
static int read_line(int fd, char *buf, size_t cap, int ms)
{
    size_t n = 0;
    long long end = hp_now_ms() + ms;
    while (n + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        long long left = end - hp_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return -1;
        if (read(fd, buf + n, 1) != 1)
            return -1;
        if (buf[n] == '\n')
            break;
        n++;
    }
    buf[n] = '\0';
    return (int)n;
}

static void say(int fd, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (len > 0 && write(fd, line, (size_t)len) != len)
        perror("say");
}

/* A lock's resource on one line (a set's names are joined by '\n'). */
static const char *one_line(const struct lockcore_lock *l, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", l->resource);
    for (char *p = buf; *p; p++)
        if (*p == '\n')
            *p = ',';
    return buf;
}

static int acquire_kind(lockcore_client *c, const struct scenario *s, const char *id, struct lockcore_lock *l)
{
    switch (s->kind) {
    case K_REENTRANT:
        return lockcore_reentrant_acquire(c, s->resource, id, l);
    case K_MULTI:
        return lockcore_multi_acquire(c, s->members, s->n_members, l);
    case K_WRITER:
        return lockcore_rw_acquire(c, s->resource, 1, l);
    case K_PERMIT:
        return lockcore_sem_acquire(c, s->resource, ROOM_PERMITS, l);
    }
    return -EINVAL;
}

/* The records a lock's holder writes: a set's members, a permit's own
 * resource (docs/fencing.md: fence per permit), else the resource. */
static unsigned records_of(const struct scenario *s, const struct lockcore_lock *l, const char **rec)
{
    if (s->kind == K_MULTI) {
        for (unsigned i = 0; i < s->n_members; i++)
            rec[i] = s->members[i];
        return s->n_members;
    }
    rec[0] = s->kind == K_PERMIT ? l->resource : s->resource;
    return 1;
}

/* The child: acquire, write "first", report "R <token> <resource>", wait
 * (it is stopped in here), then write "late" with the same token and
 * report each answer "S <status>...". The token of a reentrant holder is
 * that of its inner, re-entered lock. */
static int holder_run(const struct fixture *f, const struct scenario *s)
{
    lockcore_client *c = client_on(f, s->fencing, TTL_MS);
    if (c == NULL)
        return 2;
    struct lockcore_lock l, inner;
    int rc = acquire_kind(c, s, NULL, &l);
    if (rc != 0) {
        fprintf(stderr, "holder: %s: %s\n", lockcore_strerror(rc), lockcore_errmsg(c));
        return 3;
    }
    uint64_t token = l.token;
    if (s->kind == K_REENTRANT) {
        /* Re-enter: the hold keeps its token, and the late write below
         * is made with the re-entered lock's. */
        if (lockcore_reentrant_acquire(c, s->resource, l.id, &inner) != 0 || inner.token != l.token)
            return 4;
        token = inner.token;
    }
    const char *rec[MAX_RECORDS];
    unsigned n = records_of(s, &l, rec);
    for (unsigned i = 0; i < n; i++)
        if (put(s->port, rec[i], "first", token) != 200)
            return 5;
    char name[LOCKCORE_RESOURCE_MAX + 1];
    say(s->up[1], "R %llu %s\n", (unsigned long long)token, one_line(&l, name, sizeof(name)));
    char line[16];
    if (read_line(s->go[0], line, sizeof(line), 20000) < 0)
        return 6;
    /* Resumed: the holder does not know it was stopped, and writes. */
    char st[64] = "S";
    for (unsigned i = 0; i < n; i++)
        snprintf(st + strlen(st), sizeof(st) - strlen(st), " %d", put(s->port, rec[i], "late", token));
    say(s->up[1], "%s\n", st);
    lockcore_client_free(c);
    return 0;
}

static pid_t spawn_holder(struct fixture *f, struct scenario *s)
{
    assert_int_equal(pipe(s->up), 0);
    assert_int_equal(pipe(s->go), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(99);
        close(s->up[0]);
        close(s->go[1]);
        _exit(holder_run(f, s));
    }
    close(s->up[1]);
    close(s->go[0]);
    return pid;
}

/*
 * Run the scenario of s->kind: the holder acquires and writes, is stopped
 * past its TTL, the second client acquires the same kind and resource and
 * writes "second", the holder is resumed and writes "late". Fills late[]
 * with the holder's late answers and value[] with what each record holds
 * at the end; *old_token and *new_token the two tokens.
 */
static unsigned run_scenario(struct fixture *f, struct scenario *s, int late[MAX_RECORDS],
                             char value[MAX_RECORDS][32], uint64_t *old_token, uint64_t *new_token)
{
    lockcore_client *other = f->own = client_on(f, s->fencing, 10000);
    assert_non_null(other);
    struct lockcore_lock keeper = {0};
    if (s->kind == K_PERMIT)
        /* The room's other permit stays held (10 s TTL): the second client
         * can only get the permit the stopped holder loses. */
        assert_int_equal(lockcore_sem_acquire(other, s->resource, ROOM_PERMITS, &keeper), 0);

    pid_t pid = spawn_holder(f, s);
    char line[512], held[512];
    assert_true(read_line(s->up[0], line, sizeof(line), 15000) > 0);
    unsigned long long ot = 0;
    assert_int_equal(sscanf(line, "R %llu %511s", &ot, held), 2);
    *old_token = ot;

    /* The pause: longer than the TTL and the clock drift allowance. */
    long long stopped = hp_now_ms();
    assert_int_equal(hp_signal(pid, SIGSTOP, 1000), 0);
    hp_sleep_ms(TTL_MS + 300);

    lockcore_client *second = client_on(f, s->fencing, 10000);
    assert_non_null(second);
    struct lockcore_lock l;
    assert_int_equal(acquire_kind(second, s, NULL, &l), 0);
    /* The second client really got what the stopped holder had. */
    char name[LOCKCORE_RESOURCE_MAX + 1];
    assert_string_equal(one_line(&l, name, sizeof(name)), held);
    *new_token = l.token;
    const char *rec[MAX_RECORDS];
    unsigned n = records_of(s, &l, rec);
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(put(s->port, rec[i], "second", l.token), 200);
    long long paused = hp_now_ms() - stopped;
    assert_true(paused > TTL_MS);

    assert_int_equal(hp_signal(pid, SIGCONT, 1000), 0);
    say(s->go[1], "go\n");
    assert_true(read_line(s->up[0], line, sizeof(line), 15000) > 0);
    int st[MAX_RECORDS] = {0}, got = sscanf(line, "S %d %d %d", &st[0], &st[1], &st[2]);
    assert_int_equal(got, (int)n);
    int status = 0;
    assert_int_equal(hp_wait(pid, 15000, &status), 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(s->up[0]);
    close(s->go[1]);

    for (unsigned i = 0; i < n; i++) {
        late[i] = st[i];
        uint64_t t = 0;
        assert_int_equal(get_record(s->port, rec[i], value[i], 32, &t), 200);
    }
    if (s->kind == K_PERMIT) {
        /* The keeper still holds the other permit legitimately, with a
         * token older than the second client's: its own permit's record
         * admits its write. */
        assert_string_not_equal(keeper.resource, l.resource);
        assert_int_equal(put(s->port, keeper.resource, "keeper", keeper.token), 200);
        if (s->fencing) {
            /* Why not one record for the whole room: there the second
             * client's larger token refuses the keeper, a legitimate
             * holder (tokens of different permits are not ordered). */
            assert_true(keeper.token < l.token);
            assert_int_equal(put(s->port, s->resource, "second", l.token), 200);
            assert_int_equal(put(s->port, s->resource, "keeper", keeper.token), 409);
        }
        lockcore_release(other, &keeper);
    }
    lockcore_release(second, &l);
    lockcore_client_free(second);
    lockcore_client_free(other);
    f->own = NULL;
    return n;
}

static void scenario_init(struct scenario *s, enum kind kind, int fencing, const struct fixture *f,
                          const char *name)
{
    memset(s, 0, sizeof(*s));
    s->kind = kind;
    s->fencing = fencing;
    s->port = tk_sg_port(fencing ? f->fenced : f->loose);
    snprintf(s->resource, sizeof(s->resource), "%s-%s", fencing ? "fenced" : "loose", name);
    if (kind == K_MULTI) {
        for (unsigned i = 0; i < MAX_RECORDS; i++) {
            snprintf(s->member_buf[i], sizeof(s->member_buf[i]), "%s-%c", s->resource, 'a' + i);
            s->members[i] = s->member_buf[i];
        }
        s->n_members = MAX_RECORDS;
        snprintf(s->resource, sizeof(s->resource), "%s", s->members[0]);
    }
}

/* Fenced: every late write refused with 409, every record keeps
 * "second", the second token larger. Unfenced: the late writes land. */
static void fenced_and_not(struct fixture *f, enum kind kind, const char *name)
{
    for (int fencing = 1; fencing >= 0; fencing--) {
        struct scenario s;
        scenario_init(&s, kind, fencing, f, name);
        int late[MAX_RECORDS];
        char value[MAX_RECORDS][32];
        uint64_t old_token = 0, new_token = 0;
        unsigned n = run_scenario(f, &s, late, value, &old_token, &new_token);
        for (unsigned i = 0; i < n; i++) {
            if (fencing) {
                assert_true(old_token > 0);
                assert_true(new_token > old_token);
                assert_int_equal(late[i], 409);
                assert_string_equal(value[i], "second");
            } else {
                /* The control: without tokens the stopped holder's late
                 * write overwrites the second writer's. */
                assert_int_equal(old_token, 0);
                assert_int_equal(late[i], 200);
                assert_string_equal(value[i], "late");
            }
        }
    }
}

static void test_kinds_fenced_reentrant(void **state)
{
    fenced_and_not(*state, K_REENTRANT, "doc");
}

static void test_kinds_fenced_multi(void **state)
{
    fenced_and_not(*state, K_MULTI, "acct");
}

static void test_kinds_fenced_writer(void **state)
{
    fenced_and_not(*state, K_WRITER, "catalog");
}

static void test_kinds_fenced_permit(void **state)
{
    fenced_and_not(*state, K_PERMIT, "room");
}

/* ---- a reader ----
 * A reader's token is no new token: the largest fence value its granting
 * round saw, at least the token of every write granted before the read
 * began. docs/fencing.md: check a read against the resource's last token
 * without raising it. With storage-guard: GET /v1/records/{key}?token=T&
 * raise=0, answered only while no newer token was admitted. */

/* The reader's checked read: 1 answered, 0 stale (409). value gets the
 * record as a plain read sees it, to show what changed under the reader. */
static int reader_check(uint16_t port, const char *key, uint64_t token, char *value, size_t cap)
{
    if (get_record(port, key, value, cap, NULL) != 200)
        return -1;
    char *esc = hc_escape(key, strlen(key));
    char path[600];
    snprintf(path, sizeof(path), "/v1/records/%s?token=%llu&raise=0", esc, (unsigned long long)token);
    free(esc);
    int st = get(port, path, NULL, 0, NULL);
    return st == 200 ? 1 : st == 409 ? 0 : -1;
}

static int reader_run(const struct fixture *f, struct scenario *s)
{
    lockcore_client *c = client_on(f, 1, TTL_MS);
    if (c == NULL)
        return 2;
    struct lockcore_lock l;
    if (lockcore_rw_acquire(c, s->resource, 0, &l) != 0 || !(l.flags & LOCKCORE_LOCK_READ))
        return 3;
    char value[32];
    int ok = reader_check(s->port, s->resource, l.token, value, sizeof(value));
    say(s->up[1], "R %llu %d %s\n", (unsigned long long)l.token, ok, value);
    char line[16];
    if (read_line(s->go[0], line, sizeof(line), 20000) < 0)
        return 6;
    /* Resumed, past its lease: the same check, and storage-guard's own
     * fenced read (?token=, which would raise the fence if admitted). */
    ok = reader_check(s->port, s->resource, l.token, value, sizeof(value));
    char path[256];
    snprintf(path, sizeof(path), "/v1/records/%s?token=%llu", s->resource, (unsigned long long)l.token);
    int raised = get(s->port, path, NULL, 0, NULL);
    say(s->up[1], "S %d %d %s\n", ok, raised, value);
    lockcore_client_free(c);
    return 0;
}

static void test_kinds_fenced_reader(void **state)
{
    struct fixture *f = *state;
    struct scenario s;
    scenario_init(&s, K_WRITER, 1, f, "shelf");
    lockcore_client *w = f->own = client_on(f, 1, 10000);
    assert_non_null(w);
    struct lockcore_lock w1, w2;
    assert_int_equal(lockcore_rw_acquire(w, s.resource, 1, &w1), 0);
    assert_int_equal(put(s.port, s.resource, "first", w1.token), 200);
    assert_int_equal(lockcore_release(w, &w1), 0);

    assert_int_equal(pipe(s.up), 0);
    assert_int_equal(pipe(s.go), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(99);
        close(s.up[0]);
        close(s.go[1]);
        _exit(reader_run(f, &s));
    }
    close(s.up[1]);
    close(s.go[0]);
    char line[512], value[32];
    unsigned long long r = 0;
    int ok = -1, raised = 0;
    assert_true(read_line(s.up[0], line, sizeof(line), 15000) > 0);
    assert_int_equal(sscanf(line, "R %llu %d %31s", &r, &ok, value), 3);
    /* Under its lease the reader's read stands: its token is at least
     * the write before it, and checking did not raise the fence. */
    assert_true(r >= w1.token);
    assert_int_equal(ok, 1);
    assert_string_equal(value, "first");
    assert_int_equal(last_token(s.port, s.resource), w1.token);

    assert_int_equal(hp_signal(pid, SIGSTOP, 1000), 0);
    hp_sleep_ms(TTL_MS + 300);
    /* A writer is admitted only once the stopped reader's lease ran out. */
    assert_int_equal(lockcore_rw_acquire(w, s.resource, 1, &w2), 0);
    assert_true(w2.token > r);
    assert_int_equal(put(s.port, s.resource, "second", w2.token), 200);
    assert_int_equal(hp_signal(pid, SIGCONT, 1000), 0);
    say(s.go[1], "go\n");
    assert_true(read_line(s.up[0], line, sizeof(line), 15000) > 0);
    assert_int_equal(sscanf(line, "S %d %d %31s", &ok, &raised, value), 3);
    int status = 0;
    assert_int_equal(hp_wait(pid, 15000, &status), 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(s.up[0]);
    close(s.go[1]);
    /* The control: the record changed under the stopped reader ("second"
     * where it read "first"), and only the token check tells it. */
    assert_string_equal(value, "second");
    assert_int_equal(ok, 0);
    assert_int_equal(raised, 409);
    /* Nothing the reader did moved the fence. */
    assert_int_equal(last_token(s.port, s.resource), w2.token);
    lockcore_release(w, &w2);
    lockcore_client_free(w);
    f->own = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kinds_fenced_reentrant, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_fenced_multi, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_fenced_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_fenced_permit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_fenced_reader, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
