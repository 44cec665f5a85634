/*
 * Seed 002's roulette, runnable: 10 prizes, one prize per customer at most,
 * 40 customers spinning 3 times each, all at once. A spin reads the stock,
 * and if a prize is left and the customer has none yet, rolls the wheel
 * (a win in 3 spins of 10); a winner takes a prize off the stock and is
 * written down as a winner. Three runs, each against its own storage-guard:
 *
 *   naive   no lock, the store runs --unfenced: more winners than prizes,
 *           and customers who win twice.
 *   locked  every spin under the fencelock lock "roulette": a fenced read of
 *           the stock, then one storage-guard batch with the lock's token
 *           that takes the prize only if the stock is still at the version
 *           read, and creates the winner record only if there is none.
 *   faults  as locked, with customer-00 frozen (SIGSTOP) past its TTL in
 *           the middle of a winning spin and resumed later, and a redis
 *           node killed mid-run and restarted (without its data) after one
 *           TTL.
 *
 * Checked after each run, from the store and from what the spinners say:
 * winners + prizes left = 10, no customer in the list twice, every spin
 * that was told "you won" is in the list. Exit status 0 when every run came
 * out so (and the naive one showed the race), 1 if not, 2 if the nodes or
 * storage-guard could not be started.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lockcore/lockcore.h>

#include "example.h"

#define PRIZES 10
#define CUSTOMERS 40
#define SPINS 3
#define WIN_PERCENT 30
#define NODES 3
#define TTL_MS 1000
#define NAIVE_DELAY_MS 20 /* between the naive spin's read and its write */
#define RUN_MS 30000      /* each run ends within this, whatever happens (it takes 1 to 3 s) */

/* What a spin came to; one letter per spin goes back to the parent. */
enum {
    WON = 'W',
    LOST = 'L',
    SOLD_OUT = 'S',
    ALREADY = 'A',
    STALE = 'R',
    MISMATCH = 'M',
    NOLOCK = 'N',
    ERROR = 'E'
};

struct run {
    const char *mode; /* "naive", "locked", "faults" */
    uint16_t port;
    const char **urls;
    struct ex_barrier start;
    int report_fd; /* each customer writes "NN:XYZ\n", one letter per spin */
    int index;
};

/* The stock: {"left": n, "winners": [...]}. */
static int read_stock(uint16_t port, const char *path, json_int_t *left, json_t **winners, uint64_t *version)
{
    json_t *body = NULL;
    int st = ex_http(port, "GET", path, NULL, &body, version);
    *left = 0;
    *winners = json_array();
    if (st == 200) {
        json_t *v = json_object_get(body, "value");
        *left = json_integer_value(json_object_get(v, "left"));
        json_t *w = json_object_get(v, "winners");
        if (json_is_array(w)) {
            json_decref(*winners);
            *winners = json_copy(w);
        }
    }
    json_decref(body);
    return st;
}

static int has(json_t *winners, const char *name)
{
    size_t i;
    json_t *w;
    json_array_foreach(winners, i, w) if (strcmp(json_string_value(w), name) == 0) return 1;
    return 0;
}

static int roll(void)
{
    return rand() % 100 < WIN_PERCENT;
}

static int naive_spin(struct run *r, const char *name)
{
    json_int_t left;
    json_t *winners;
    uint64_t version;
    int st = read_stock(r->port, "/v1/records/stock", &left, &winners, &version);
    int outcome = ERROR;
    if (st != 200)
        goto out;
    if (left <= 0) {
        outcome = SOLD_OUT;
        goto out;
    }
    if (has(winners, name)) {
        outcome = ALREADY;
        goto out;
    }
    if (!roll()) {
        outcome = LOST;
        goto out;
    }
    ex_sleep_ms(NAIVE_DELAY_MS); /* paying out takes a moment */
    json_array_append_new(winners, json_string(name));
    json_t *stock = json_pack("{s:{s:I, s:O}}", "value", "left", left - 1, "winners", winners);
    st = ex_http(r->port, "PUT", "/v1/records/stock", stock, NULL, NULL);
    json_decref(stock);
    outcome = st == 200 ? WON : ERROR;
out:
    json_decref(winners);
    return outcome;
}

/* One spin under the lock: a fenced read of the stock (raises the fence to
 * our token), then, for a win, one batch under the token that takes the
 * prize if the stock is still at the version read and creates the winner
 * record if there is none. */
static int locked_spin(struct run *r, lockcore_client *c, const char *name, int freeze)
{
    struct lockcore_lock lock;
    if (lockcore_acquire(c, "roulette", &lock) != 0) {
        fprintf(stderr, "%s: no lock: %s\n", name, lockcore_errmsg(c));
        return NOLOCK;
    }
    int outcome = ERROR;
    char path[96];
    snprintf(path, sizeof(path), "/v1/records/stock?token=%llu", (unsigned long long)lock.token);
    json_int_t left;
    json_t *winners;
    uint64_t version;
    int st = read_stock(r->port, path, &left, &winners, &version);
    if (st == 409) {
        outcome = STALE;
        goto release;
    }
    if (st != 200)
        goto release;
    if (left <= 0) {
        outcome = SOLD_OUT;
        goto release;
    }
    if (has(winners, name)) {
        outcome = ALREADY;
        goto release;
    }
    if (!freeze && !roll()) {
        outcome = LOST;
        goto release;
    }
    if (freeze) {
        printf("  %s wins (%lld prizes left, stock version %llu, token %llu), then freezes (SIGSTOP)\n", name,
               (long long)left, (unsigned long long)version, (unsigned long long)lock.token);
        kill(getpid(), SIGSTOP);
        printf("  %s resumed %llu ms past its lease (TTL %d ms), takes its prize\n", name,
               (unsigned long long)(lockcore_now_ms() - lock.valid_until_ms), TTL_MS);
    }
    json_array_append_new(winners, json_string(name));
    char key[64];
    snprintf(key, sizeof(key), "winners/%s", name);
    json_t *batch =
        json_pack("{s:I, s:[{s:s, s:s, s:{s:I, s:O}, s:I}, {s:s, s:s, s:s, s:{s:I}, s:i}]}", "token",
                  (json_int_t)lock.token, "ops", "op", "put", "key", "stock", "value", "left", left - 1,
                  "winners", winners, "if_version", (json_int_t)version, "op", "put", "key", key, "resource",
                  "roulette", "value", "prize", PRIZES - left + 1, "if_version", 0);
    st = ex_http(r->port, "POST", "/v1/batch", batch, NULL, NULL);
    json_decref(batch);
    outcome = st == 200 ? WON : st == 409 ? STALE : st == 412 ? MISMATCH : ERROR;
    if (freeze)
        printf("  %s: storage-guard answered %d%s\n", name, st,
               st == 409   ? ": stale token, no prize"
               : st == 200 ? ": PRIZE TAKEN WITH A STALE TOKEN"
                           : "");
release:
    json_decref(winners);
    lockcore_release(c, &lock); /* a lock lost meanwhile releases nothing */
    return outcome;
}

static int customer_main(void *arg)
{
    struct run *r = arg;
    char name[32];
    snprintf(name, sizeof(name), "customer-%02d", r->index);
    srand((unsigned)getpid() ^ (unsigned)ex_now_ms());
    int naive = strcmp(r->mode, "naive") == 0, freeze = strcmp(r->mode, "faults") == 0 && r->index == 0;
    if (!freeze)
        ex_barrier_wait(&r->start, RUN_MS);
    lockcore_client *c = NULL;
    if (!naive) {
        struct lockcore_options o;
        lockcore_options_init(&o);
        o.nodes = r->urls;
        o.n_nodes = NODES;
        o.ttl_ms = TTL_MS;
        o.retry_count = -1;
        o.wait_ms = RUN_MS - 5000;
        /* Seed 002's lock is a queue: spins are served in the order they
         * arrived, and a newcomer cannot cut in (docs/fairness.md). */
        o.wait_mode = LOCKCORE_WAIT_FAIR;
        char err[256];
        if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0) {
            fprintf(stderr, "%s: %s\n", name, err);
            return 1;
        }
    }
    char line[16];
    int n = snprintf(line, sizeof(line), "%02d:", r->index);
    for (int s = 0; s < SPINS; s++)
        line[n++] = (char)(naive ? naive_spin(r, name) : locked_spin(r, c, name, freeze && s == 0));
    line[n++] = '\n';
    lockcore_client_free(c);
    return write(r->report_fd, line, (size_t)n) == n ? 0 : 1; /* one write below PIPE_BUF: not interleaved */
}

/* Set up the stock: 10 prizes, no winners. Under the lock too. */
static int init_stock(uint16_t port, const char **urls, int naive)
{
    json_int_t token = 0;
    lockcore_client *c = NULL;
    struct lockcore_lock lock;
    if (!naive) {
        struct lockcore_options o;
        lockcore_options_init(&o);
        o.nodes = urls;
        o.n_nodes = NODES;
        char err[256];
        if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0 ||
            lockcore_acquire(c, "roulette", &lock) != 0) {
            fprintf(stderr, "cannot take the lock to set up the stock\n");
            lockcore_client_free(c);
            return -1;
        }
        token = (json_int_t)lock.token;
    }
    json_t *body =
        json_pack("{s:{s:i, s:[]}, s:s}", "value", "left", PRIZES, "winners", "resource", "roulette");
    if (token != 0)
        json_object_set_new(body, "token", json_integer(token));
    int st = ex_http(port, "PUT", "/v1/records/stock", body, NULL, NULL);
    json_decref(body);
    if (c != NULL)
        lockcore_release(c, &lock);
    lockcore_client_free(c);
    return st == 200 ? 0 : -1;
}

static int run(const char *mode, const char **urls, struct rh_cluster *redis)
{
    int naive = strcmp(mode, "naive") == 0, faults = strcmp(mode, "faults") == 0;
    struct ex_store store;
    if (ex_store_start(&store, "example-roulette", naive) != 0)
        exit(2);
    printf("== %s: %d customers x %d spins, %d prizes%s ==\n", mode, CUSTOMERS, SPINS, PRIZES,
           naive ? ", no lock (read the stock, pay out 20 ms later)"
           : faults
               ? ", fair lock + one batch; customer-00 frozen past its TTL, redis node 2 killed and restarted"
               : ", fair fencelock lock + one storage-guard batch");
    if (init_stock(store.port, urls, naive) != 0) {
        fprintf(stderr, "cannot set up the stock\n");
        exit(2);
    }
    struct run r = {.mode = mode, .port = store.port, .urls = urls};
    int rep[2];
    if (ex_barrier_init(&r.start) != 0 || pipe2(rep, O_CLOEXEC) != 0) {
        perror("pipe");
        exit(2);
    }
    r.report_fd = rep[1];
    pid_t pids[CUSTOMERS];
    int status[CUSTOMERS];
    long long t0 = ex_now_ms(), deadline = t0 + RUN_MS;
    int first = 0;
    if (faults) {
        r.index = 0;
        pids[0] = ex_fork(customer_main, &r, &r.start);
        if (ex_wait_stopped(pids[0], 10000) != 0)
            printf("  customer-00 did not freeze\n");
        first = 1;
    }
    for (int i = first; i < CUSTOMERS; i++) {
        r.index = i;
        pids[i] = ex_fork(customer_main, &r, &r.start);
    }
    close(rep[1]);
    ex_barrier_open(&r.start);
    if (faults) {
        long long go = ex_now_ms();
        ex_sleep_ms(300);
        rh_kill(redis, 2);
        printf("  %lld ms: redis node 2 killed\n", ex_now_ms() - go);
        ex_sleep_ms(TTL_MS + 200); /* Redlock: a node without its data stays down longer than the TTL */
        if (rh_restart(redis, 2, 0) != 0)
            printf("  redis node 2 did not restart\n");
        else
            printf("  %lld ms: redis node 2 restarted, empty\n", ex_now_ms() - go);
        ex_sleep_ms(500);
        kill(pids[0], SIGCONT);
    }
    ex_wait_all(pids, status, CUSTOMERS, deadline);
    /* What the spinners said. */
    char reports[CUSTOMERS * 16 + 1];
    size_t got = 0;
    ssize_t k;
    while (got < sizeof(reports) - 1 && (k = read(rep[0], reports + got, sizeof(reports) - 1 - got)) > 0)
        got += (size_t)k;
    reports[got] = '\0';
    close(rep[0]);
    close(r.start.fd[0]);
    int told_won[CUSTOMERS] = {0}, tally[128] = {0}, reported = 0;
    for (char *line = strtok(reports, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        int who = atoi(line);
        if (who < 0 || who >= CUSTOMERS || strlen(line) != 3 + SPINS)
            continue;
        reported++;
        for (int s = 0; s < SPINS; s++) {
            tally[(unsigned char)line[3 + s]]++;
            told_won[who] += line[3 + s] == WON;
        }
    }
    /* What the store holds. */
    json_int_t left;
    json_t *winners;
    uint64_t version;
    read_stock(store.port, "/v1/records/stock", &left, &winners, &version);
    int twice = 0, won_total = 0, missing = 0, records = 0;
    size_t nw = json_array_size(winners);
    for (size_t i = 0; i < nw; i++)
        for (size_t j = i + 1; j < nw; j++)
            twice += strcmp(json_string_value(json_array_get(winners, i)),
                            json_string_value(json_array_get(winners, j))) == 0;
    for (int i = 0; i < CUSTOMERS; i++) {
        char name[32];
        snprintf(name, sizeof(name), "customer-%02d", i);
        won_total += told_won[i];
        twice += told_won[i] > 1;
        if (told_won[i] > 0 && !has(winners, name))
            missing++;
        if (!naive) {
            char path[64];
            snprintf(path, sizeof(path), "/v1/records/winners%%2F%s", name);
            records += ex_http(store.port, "GET", path, NULL, NULL, NULL) == 200;
        }
    }
    printf("  %lld ms; %d of %d customers reported; spins: %d won, %d lost, %d sold out, %d already a winner",
           ex_now_ms() - t0, reported, CUSTOMERS, tally[WON], tally[LOST], tally[SOLD_OUT], tally[ALREADY]);
    if (tally[STALE] + tally[MISMATCH] + tally[NOLOCK] + tally[ERROR])
        printf(", %d refused 409, %d refused 412, %d no lock, %d errors", tally[STALE], tally[MISMATCH],
               tally[NOLOCK], tally[ERROR]);
    printf("\n  store: %zu winners listed, %lld prizes left%s", nw, (long long)left, naive ? "" : ", ");
    if (!naive)
        printf("%d winner records", records);
    printf("\n");
    int ok;
    if (naive) {
        ok = won_total > PRIZES || twice > 0;
        printf("verdict: naive: %s: %d winning spins for %d prizes; %d customers told twice or listed twice; "
               "%d told winners missing from the list\n",
               ok ? "race shown" : "UNEXPECTED: no overselling", won_total, PRIZES, twice, missing);
    } else {
        ok = reported == CUSTOMERS && (json_int_t)nw + left == PRIZES && left >= 0 && twice == 0 &&
             missing == 0 && won_total == (int)nw && records == (int)nw && tally[ERROR] == 0 &&
             tally[NOLOCK] == 0;
        if (faults)
            ok = ok && tally[STALE] >= 1 && told_won[0] == 0;
        printf("verdict: %s: %s: %zu winners for %d prizes, nobody twice, every told winner listed%s\n", mode,
               ok ? "ok" : "FAILED", nw, PRIZES,
               faults
                   ? (told_won[0] == 0 && tally[STALE] >= 1 ? "; the frozen spinner's stale batch was refused"
                                                            : "; the frozen spinner was NOT refused")
                   : "");
    }
    json_decref(winners);
    ex_store_stop(&store);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    if (only != NULL && strcmp(only, "naive") != 0 && strcmp(only, "locked") != 0 &&
        strcmp(only, "faults") != 0) {
        fprintf(stderr, "usage: %s [naive|locked|faults]\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct rh_cluster *redis = NULL;
    const char *urls[NODES];
    if (ex_redis_start(NODES, &redis, urls) != 0)
        return 2;
    printf("%d redis-server nodes, lock TTL %d ms, a win in %d%% of spins\n", NODES, TTL_MS, WIN_PERCENT);
    int failed = 0;
    const char *modes[] = {"naive", "locked", "faults"};
    for (int i = 0; i < 3; i++)
        if (only == NULL || strcmp(only, modes[i]) == 0)
            failed |= run(modes[i], urls, redis);
    rh_cluster_free(redis);
    return failed;
}
