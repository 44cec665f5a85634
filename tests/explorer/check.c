/*
 * The explorer's checker: reads the shared log (explore.h), rebuilds each
 * belief as the intervals in which its client believed it held the lock,
 * and checks them against each other:
 *
 *  - exclusive kinds (plain, reentrant holds of different owners, the
 *    members of a set, writers, each permit): no two beliefs of different
 *    owners overlap on one resource;
 *  - a semaphore: never more than N permits believed held at once;
 *  - read-write: no reader's belief overlaps a writer's;
 *  - tokens (T1, T2 of docs/fencing.md), per resource of an exclusive
 *    kind: a grant whose acquisition began after another owner's grant
 *    returned has the larger token, and concurrent grants of different
 *    owners never share one; a read carries at least the token of every
 *    write granted before the read began;
 *  - elections (docs/election.md, E1, E2, E4), per election name: no two
 *    leaders' beliefs overlap; a leader's epoch is above that of every
 *    leader whose belief began earlier; and each observer process is
 *    never told an epoch below one it was told before.
 *
 * A belief is [granted, valid until) on CLOCK_MONOTONIC, one interval per
 * grant or extension, cut at the moment it ended (the start of its
 * release, or when its client learned it was lost). Both ends are read on
 * the client's side of the operation, so a belief is never longer than
 * what lockcore told its client: an overlap the checker reports is one
 * the clients really believed.
 *
 * A violation near a fault the explorer marked unsafe (a node restarted
 * without its data within the TTL: outside Redlock's assumptions) is
 * named as such and not counted: the election's too, since E1 rests on
 * Redlock's assumptions and E2 and E4 on the tokens', which such a
 * restart breaks (docs/fencing.md, "restarted without its data").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lockcore/lockcore.h>

#include "explore.h"

const char *const ex_violation_names[EV_COUNT] = {
    [EV_OVERLAP] = "exclusive beliefs overlap",
    [EV_PERMITS] = "more permits believed held than the semaphore has",
    [EV_READ_WRITE] = "a reader's belief beside a writer's",
    [EV_TOKEN_ORDER] = "a later grant with a token not larger",
    [EV_TOKEN_TWICE] = "one token for two owners",
    [EV_READ_TOKEN] = "a read token below an earlier write's",
    [EV_LEADERS] = "two leaders at once",
    [EV_EPOCH_ORDER] = "a later leader with an epoch not larger",
    [EV_OBSERVED_BACK] = "an observer told an older epoch",
};

enum bkind { BK_PLAIN, BK_REENTRANT, BK_MULTI, BK_READ, BK_WRITE, BK_PERMIT, BK_LEADER, BK_COUNT };
const char *const ex_belief_names[7] = {"plain", "reentrant", "multi", "read", "write", "permit", "leader"};

#define NO_END UINT64_MAX

struct belief {
    char hold[32];
    int client;
    enum bkind kind;
    char res[256];
    char owner[48];
    uint64_t token, a0, g, until, end;
    unsigned permits;
    char why[16]; /* how it ended; "" if it did not */
    int n_ext;
};

/* One interval of a belief: from a grant or an extension. */
struct iv {
    uint64_t s, e;
    int b;
};

struct fault {
    uint64_t t;
    char sort[24];
    int client;
    char nodes[40];
    int unsafe;
    char detail[200];
};

struct watchline {
    uint64_t t;
    int node;
    char res[16];
    char holder[48];
    long long n, pttl;
};

struct opline {
    uint64_t t;
    int client;
    int kind;
    char op[16];
    int rc;
};

struct clientinfo {
    char kind[16], mode[16];
    long ttl, ttl2;
    int lives; /* C lines: an election client's process is started again */
};

/* What an observer was told (an R line). */
struct reading {
    uint64_t t;
    int client, life;
    char name[64];
    int held;
    uint64_t epoch;
    char id[48], value[64];
};

#define CLIENTS_MAX 256

struct ex_log {
    struct belief *b;
    size_t nb, capb;
    struct iv *iv;
    size_t niv, capiv;
    struct fault *f;
    size_t nf, capf;
    struct opline *op;
    size_t nop, capop;
    struct watchline *w;
    size_t nw, capw;
    struct reading *rd;
    size_t nrd, caprd;
    struct clientinfo cl[CLIENTS_MAX];
    /* hold -> belief index (open addressing) */
    int *slot;
    size_t nslot;
    long lines, bad;
    uint64_t t0;             /* the run's start (S line), 0 if none */
    unsigned long long seed; /* its seed */
};

#define GROW(arr, n, cap)                                                                                    \
    do {                                                                                                     \
        if ((n) == (cap)) {                                                                                  \
            size_t nc = (cap) ? 2 * (cap) : 256;                                                             \
            void *np = realloc((arr), nc * sizeof(*(arr)));                                                  \
            if (np == NULL)                                                                                  \
                return -ENOMEM;                                                                              \
            (arr) = np;                                                                                      \
            (cap) = nc;                                                                                      \
        }                                                                                                    \
    } while (0)

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int find_hold(const struct ex_log *l, const char *hold)
{
    if (l->nslot == 0)
        return -1;
    for (size_t i = hash(hold) & (l->nslot - 1);; i = (i + 1) & (l->nslot - 1)) {
        int b = l->slot[i];
        if (b < 0)
            return -1;
        if (strcmp(l->b[b].hold, hold) == 0)
            return b;
    }
}

static int add_hold(struct ex_log *l, int b)
{
    if (2 * (l->nb + 1) > l->nslot) {
        size_t ns = l->nslot ? 2 * l->nslot : 1024;
        int *s = malloc(ns * sizeof(*s));
        if (s == NULL)
            return -ENOMEM;
        for (size_t i = 0; i < ns; i++)
            s[i] = -1;
        free(l->slot);
        l->slot = s;
        l->nslot = ns;
        for (int k = 0; k < b; k++) {
            size_t i = hash(l->b[k].hold) & (ns - 1);
            while (s[i] >= 0)
                i = (i + 1) & (ns - 1);
            s[i] = k;
        }
    }
    size_t i = hash(l->b[b].hold) & (l->nslot - 1);
    while (l->slot[i] >= 0)
        i = (i + 1) & (l->nslot - 1);
    l->slot[i] = b;
    return 0;
}

static int kind_of(const char *s)
{
    for (int k = 0; k < BK_COUNT; k++)
        if (strcmp(s, ex_belief_names[k]) == 0)
            return k;
    return -1;
}

static int client_kind_of(const char *s)
{
    for (int k = 0; k < EK_COUNT; k++)
        if (strcmp(s, ex_kind_names[k]) == 0)
            return k;
    return -1;
}

static int parse_line(struct ex_log *l, char *line)
{
    unsigned long long t, a, b2, c;
    int client;
    char w1[300], w2[16], w3[16];
    unsigned permits;
    switch (line[0]) {
    case 'G': {
        GROW(l->b, l->nb, l->capb);
        struct belief *b = &l->b[l->nb];
        memset(b, 0, sizeof(*b));
        if (sscanf(line, "G %llu %d %15s %255s %47s %31s %llu %llu %llu %u", &t, &client, w2, b->res,
                   b->owner, b->hold, &a, &b2, &c, &permits) != 10 ||
            kind_of(w2) < 0 || find_hold(l, b->hold) >= 0)
            return -1;
        b->client = client;
        b->kind = (enum bkind)kind_of(w2);
        /* A reentrant hold's id is its own; its owner, the lock key's
         * value on the nodes, is that id with the attempt digits zeroed. */
        if (b->kind == BK_REENTRANT && strlen(b->owner) == LOCKCORE_ID_LEN)
            memset(b->owner + LOCKCORE_ID_LEN - 6, '0', 6);
        b->g = t;
        b->token = a;
        b->a0 = b2;
        b->until = c;
        b->end = NO_END;
        b->permits = permits;
        GROW(l->iv, l->niv, l->capiv);
        l->iv[l->niv++] = (struct iv){t, c, (int)l->nb};
        l->nb++;
        return add_hold(l, (int)l->nb - 1);
    }
    case 'X': {
        if (sscanf(line, "X %llu %d %63s %llu", &t, &client, w1, &c) != 4)
            return -1;
        int bi = find_hold(l, w1);
        if (bi < 0)
            return -1;
        GROW(l->iv, l->niv, l->capiv);
        l->iv[l->niv++] = (struct iv){t, c, bi};
        l->b[bi].until = c; /* what the client believes from now on, sooner or later */
        l->b[bi].n_ext++;
        return 0;
    }
    case 'E': {
        if (sscanf(line, "E %llu %d %63s %15s", &t, &client, w1, w2) != 4)
            return -1;
        int bi = find_hold(l, w1);
        if (bi < 0)
            return -1;
        if (t < l->b[bi].end) {
            l->b[bi].end = t;
            snprintf(l->b[bi].why, sizeof(l->b[bi].why), "%s", w2);
        }
        return 0;
    }
    case 'O': {
        int rc;
        GROW(l->op, l->nop, l->capop);
        struct opline *o = &l->op[l->nop];
        if (sscanf(line, "O %llu %d %15s %15s %15s %d", &t, &client, w2, w3, o->op, &rc) != 6)
            return -1;
        o->t = t;
        o->client = client;
        o->kind = client_kind_of(w2);
        o->rc = rc;
        if (o->kind < 0)
            return -1;
        l->nop++;
        return 0;
    }
    case 'C': {
        long ttl, ttl2;
        if (sscanf(line, "C %llu %d %15s %15s %ld %ld", &t, &client, w2, w3, &ttl, &ttl2) != 6)
            return -1;
        if (client >= 0 && client < CLIENTS_MAX) {
            snprintf(l->cl[client].kind, sizeof(l->cl[client].kind), "%s", w2);
            snprintf(l->cl[client].mode, sizeof(l->cl[client].mode), "%s", w3);
            l->cl[client].ttl = ttl;
            l->cl[client].ttl2 = ttl2;
            l->cl[client].lives++;
        }
        return 0;
    }
    case 'R': {
        GROW(l->rd, l->nrd, l->caprd);
        struct reading *r = &l->rd[l->nrd];
        memset(r, 0, sizeof(*r));
        if (sscanf(line, "R %llu %d %63s %d %llu %47s %63s", &t, &r->client, r->name, &r->held, &a, r->id,
                   r->value) != 7)
            return -1;
        r->t = t;
        r->epoch = a;
        /* The process that was told: a reading is ordered only against
         * the readings of the same observer process (E4). */
        r->life = r->client >= 0 && r->client < CLIENTS_MAX ? l->cl[r->client].lives : 0;
        l->nrd++;
        return 0;
    }
    case 'W': {
        GROW(l->w, l->nw, l->capw);
        struct watchline *w = &l->w[l->nw];
        if (sscanf(line, "W %llu %d %15s %47s %lld %lld", &t, &w->node, w->res, w->holder, &w->n, &w->pttl) !=
            6)
            return -1;
        w->t = t;
        l->nw++;
        return 0;
    }
    case 'S': {
        unsigned long long seed;
        if (sscanf(line, "S %llu %llu", &t, &seed) != 2)
            return -1;
        l->t0 = t;
        l->seed = seed;
        return 0;
    }
    case 'F': {
        GROW(l->f, l->nf, l->capf);
        struct fault *f = &l->f[l->nf];
        int n = 0;
        if (sscanf(line, "F %llu %23s %d %39s %d %n", &t, f->sort, &f->client, f->nodes, &f->unsafe, &n) != 5)
            return -1;
        f->t = t;
        snprintf(f->detail, sizeof(f->detail), "%s", line + n);
        l->nf++;
        return 0;
    }
    default:
        return -1;
    }
}

int ex_log_read(const char *path, struct ex_log **out)
{
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return -errno;
    struct ex_log *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        fclose(fp);
        return -ENOMEM;
    }
    char line[1024];
    int rc = 0;
    while (fgets(line, sizeof(line), fp) != NULL) {
        size_t n = strlen(line);
        if (n > 0 && line[n - 1] == '\n')
            line[--n] = '\0';
        if (n == 0)
            continue;
        l->lines++;
        int r = parse_line(l, line);
        if (r == -ENOMEM) {
            rc = r;
            break;
        }
        if (r < 0)
            l->bad++;
    }
    fclose(fp);
    if (rc != 0) {
        ex_log_free(l);
        return rc;
    }
    *out = l;
    return 0;
}

void ex_log_free(struct ex_log *l)
{
    if (l == NULL)
        return;
    free(l->b);
    free(l->iv);
    free(l->f);
    free(l->op);
    free(l->w);
    free(l->rd);
    free(l->slot);
    free(l);
}

/* ---- the checks ---- */

struct ctx {
    const struct ex_log *l;
    const struct ex_check_opts *o;
    struct ex_verdict *v;
    struct iv *iv; /* the intervals, cut at their belief's end */
    size_t niv;
    uint64_t *pairs; /* pairs of beliefs already reported */
    size_t npairs, cappairs;
    long described;
    uint64_t t0; /* times are printed relative to it */
    unsigned long long seed;
};

static double rel_s(const struct ctx *x, uint64_t t)
{
    if (t == NO_END)
        return -1;
    return ((double)t - (double)x->t0) / 1e6;
}

/* The belief's end as the checks see it: its end, else its last validity. */
static uint64_t end_of(const struct belief *b)
{
    return b->end < b->until ? b->end : b->until;
}

static void describe_belief(const struct ctx *x, const struct belief *b)
{
    FILE *out = x->o->out;
    const struct clientinfo *ci = b->client >= 0 && b->client < CLIENTS_MAX ? &x->l->cl[b->client] : NULL;
    fprintf(out, "    hold %s: client %d (%s, %s), %s %s, owner %.12s..., token %" PRIu64 "\n", b->hold,
            b->client, ci && ci->kind[0] ? ci->kind : "?", ci && ci->mode[0] ? ci->mode : "?",
            ex_belief_names[b->kind], b->res, b->owner, b->token);
    fprintf(out, "      asked at %.3f s, granted %.3f s, valid until %.3f s%s%s", rel_s(x, b->a0),
            rel_s(x, b->g), rel_s(x, b->until), b->n_ext ? " (after extensions)" : "",
            b->end != NO_END ? ", ended " : "");
    if (b->end != NO_END)
        fprintf(out, "%.3f s (%s)", rel_s(x, b->end), b->why);
    fprintf(out, "\n");
    for (size_t i = 0; i < x->l->niv; i++) {
        const struct iv *v = &x->l->iv[i];
        if (&x->l->b[v->b] == b && v->s != b->g)
            fprintf(out, "      extended at %.3f s: valid until %.3f s\n", rel_s(x, v->s), rel_s(x, v->e));
    }
}

/* What the nodes and the log show of the holder of belief a and its key
 * up to `at` (the other grant), the sign that showed first: 1 if a node
 * let go of the key while it had time left there and a hold of a's owner
 * was believed valid (for a reentrant owner: its hold counts drifted
 * apart), 2 if a key's time left was cut below a hold's validity (for a
 * reentrant owner: an extension of one hold shortened another's), 0 if
 * neither showed. With out, the owner's holds, the evidence and the key
 * on the nodes are printed. */
static int holder_signs(const struct ctx *x, const struct belief *a, const char *key, uint64_t at, FILE *out)
{
    const struct ex_log *l = x->l;
    int flags = 0, re = a->kind == BK_REENTRANT;
    uint64_t from = a->g;
    if (out && re)
        fprintf(out, "    holds of owner %.12s... (reentrant):\n", a->owner);
    for (size_t i = 0; re && i < l->nb; i++) {
        const struct belief *b = &l->b[i];
        if (strcmp(b->owner, a->owner) != 0)
            continue;
        if (b->g < from)
            from = b->g;
        if (out)
            fprintf(out, "      %s: granted %.3f s, valid until %.3f s, ended %.3f s (%s)%s\n", b->hold,
                    rel_s(x, b->g), rel_s(x, b->until), rel_s(x, end_of(b)), b->why[0] ? b->why : "expired",
                    b->n_ext ? ", extended" : "");
    }
    /* When each sign first showed: the earlier one is the cause. */
    uint64_t first[3] = {0, NO_END, NO_END};
    for (size_t i = 0; re && i < l->niv && !(flags & 2); i++) {
        const struct iv *v = &l->iv[i];
        const struct belief *y = &l->b[v->b];
        if (strcmp(y->owner, a->owner) != 0 || v->s == y->g || v->s > at || end_of(y) > at)
            continue;
        for (size_t j = 0; j < l->nb; j++) {
            const struct belief *z = &l->b[j];
            if (z == y || strcmp(z->owner, a->owner) != 0 || z->g > v->s || end_of(z) <= v->s ||
                v->e + 50000 >= z->until)
                continue;
            flags |= 2;
            if (v->s < first[2])
                first[2] = v->s;
            if (out)
                fprintf(out,
                        "    sign: an extension shortened the shared hold: %s extended at %.3f s to %.3f s "
                        "while %s of the same owner was valid until %.3f s; %s ended at %.3f s\n",
                        y->hold, rel_s(x, v->s), rel_s(x, v->e), z->hold, rel_s(x, z->until), y->hold,
                        rel_s(x, end_of(y)));
            break;
        }
    }
    /* What the nodes showed (the W lines, read every 10 ms: up to 100 ms
     * after the other grant): the key gone from a node while it still had
     * time left there and a hold of the owner was believed valid (a
     * release or a rollback deleted it: for a reentrant owner, the last
     * hold that node counted), or its time left cut below a hold's
     * validity. */
    struct last {
        int known, mine;
        long long pttl;
        uint64_t t;
    } last[32] = {{0}};
    for (size_t i = 0; i < l->nw; i++) {
        const struct watchline *w = &l->w[i];
        if (w->t > at + 100000 || strcmp(w->res, key) != 0 || w->node < 0 || w->node >= 32)
            continue;
        int mine = strcmp(w->holder, a->owner) == 0;
        struct last *p = &last[w->node];
        long long left = p->known ? p->pttl - (long long)(w->t - p->t) / 1000 : 0;
        uint64_t valid = 0; /* the latest validity of a hold of the owner live now */
        for (size_t j = 0; j < l->nb; j++) {
            const struct belief *b = &l->b[j];
            if (strcmp(b->owner, a->owner) == 0 && b->g <= w->t && w->t < end_of(b) && end_of(b) > valid)
                valid = end_of(b);
        }
        if (p->known && p->mine && !mine && left > 100 && valid > w->t) {
            flags |= 1;
            if (w->t < first[1])
                first[1] = w->t;
            if (out)
                fprintf(out,
                        "    sign: %s: at %.3f s node %d no longer held the key, %lld ms before it would "
                        "expire, while the holder believed it held the lock until %.3f s\n",
                        re ? "hold counts drifted apart" : "a node let go of a valid hold", rel_s(x, w->t),
                        w->node, left, rel_s(x, valid));
        }
        if (p->known && p->mine && mine && w->pttl >= 0 && w->pttl + 100 < left &&
            valid > w->t + (uint64_t)w->pttl * 1000) {
            flags |= 2;
            if (w->t < first[2])
                first[2] = w->t;
            if (out)
                fprintf(out,
                        "    sign: a TTL cut: at %.3f s node %d cut the key to %lld ms left, while a hold of "
                        "the owner was believed until %.3f s\n",
                        rel_s(x, w->t), w->node, w->pttl, rel_s(x, valid));
        }
        p->known = 1;
        p->mine = mine;
        p->pttl = w->pttl;
        p->t = w->t;
    }
    if (out && l->nw > 0) {
        /* The last 40 changes up to the other grant. */
        size_t first_w = l->nw, n = 0;
        while (first_w > 0 && n < 40) {
            const struct watchline *w = &l->w[first_w - 1];
            if (w->t < from)
                break;
            first_w--;
            n += w->t <= at + 100000 && strcmp(w->res, key) == 0;
        }
        fprintf(out, "    %s on the nodes (holder, reentrant holds, ms left) up to the other grant:\n", key);
        for (size_t i = first_w; i < l->nw; i++) {
            const struct watchline *w = &l->w[i];
            if (w->t < from || w->t > at + 100000 || strcmp(w->res, key) != 0)
                continue;
            const char *who = strcmp(w->holder, a->owner) == 0 ? "this owner"
                              : strcmp(w->holder, "-") == 0    ? "none"
                                                               : "another";
            fprintf(out, "      %8.3f s  node %d: %-10s holds %lld, %lld ms left\n", rel_s(x, w->t), w->node,
                    who, w->n, w->pttl);
        }
    }
    if (flags == 3)
        flags = first[1] < first[2] ? 1 : 2;
    return flags;
}

/* The faults from `from` to `to`, those on clients ca's and cb's links
 * and on the nodes first. */
static void describe_faults(const struct ctx *x, uint64_t from, uint64_t to, int ca, int cb)
{
    FILE *out = x->o->out;
    int shown = 0, more = 0;
    fprintf(out, "    faults from %.3f s to %.3f s:\n", rel_s(x, from), rel_s(x, to));
    for (size_t i = 0; i < x->l->nf; i++) {
        const struct fault *f = &x->l->f[i];
        if (f->t < from || f->t > to)
            continue;
        /* Faults of other clients' links matter less: show them last. */
        int mine = f->client < 0 || f->client == ca || f->client == cb;
        if (!mine || shown >= 40) {
            more++;
            continue;
        }
        fprintf(out, "      %8.3f s  %-13s client %-3d nodes %-6s %s%s\n", rel_s(x, f->t), f->sort, f->client,
                f->nodes, f->detail, f->unsafe ? "  [outside Redlock's assumptions]" : "");
        shown++;
    }
    if (more)
        fprintf(out, "      (%d more on other clients' links)\n", more);
    if (shown == 0)
        fprintf(out, "      none on these clients' links or on the nodes\n");
}

/* Was a node restarted without its data between two moments? */
static int fence_lost_between(const struct ctx *x, uint64_t from, uint64_t to)
{
    for (size_t i = 0; i < x->l->nf; i++)
        if (strncmp(x->l->f[i].sort, "restart-empty", 13) == 0 && x->l->f[i].t >= from && x->l->f[i].t <= to)
            return 1;
    return 0;
}

/* A fault outside Redlock's assumptions from the largest TTL before lo
 * to hi, or NULL. */
static const struct fault *unsafe_between(const struct ctx *x, uint64_t lo, uint64_t hi)
{
    lo = lo > x->o->max_ttl_ms * 1000 ? lo - x->o->max_ttl_ms * 1000 : 0;
    for (size_t i = 0; i < x->l->nf; i++)
        if (x->l->f[i].unsafe && x->l->f[i].t >= lo && x->l->f[i].t <= hi)
            return &x->l->f[i];
    return NULL;
}

/* Is there a fault outside Redlock's assumptions near these beliefs? */
static const struct fault *unsafe_near(const struct ctx *x, const struct belief *a, const struct belief *b)
{
    uint64_t lo = a->a0 < b->a0 ? a->a0 : b->a0;
    uint64_t hi = end_of(a) > end_of(b) ? end_of(a) : end_of(b);
    return unsafe_between(x, lo, hi);
}

static int seen_pair(struct ctx *x, int a, int b, enum ex_violation kind)
{
    uint64_t key = ((uint64_t)(a < b ? a : b) << 34) | ((uint64_t)(a < b ? b : a) << 4) | (uint64_t)kind;
    for (size_t i = x->npairs; i > 0; i--)
        if (x->pairs[i - 1] == key)
            return 1;
    if (x->npairs == x->cappairs) {
        size_t nc = x->cappairs ? 2 * x->cappairs : 64;
        uint64_t *np = realloc(x->pairs, nc * sizeof(*np));
        if (np == NULL)
            return 1;
        x->pairs = np;
        x->cappairs = nc;
    }
    x->pairs[x->npairs++] = key;
    return 0;
}

/* Count (or name as unsafe) a violation between beliefs ia and ib, and
 * describe it if it is among the first. */
static void violation(struct ctx *x, enum ex_violation kind, int ia, int ib, const char *key,
                      const char *what)
{
    if (seen_pair(x, ia, ib, kind))
        return;
    const struct belief *a = &x->l->b[ia], *b = &x->l->b[ib];
    const struct fault *u = unsafe_near(x, a, b);
    uint64_t at = a->g > b->g ? a->g : b->g;
    int other_owner = strcmp(a->owner, b->owner) != 0;
    if (u != NULL) {
        x->v->unsafe++;
    } else {
        x->v->violations[kind]++;
        /* Named by the sign the first holder shows, whose hold the other
         * grant broke into. */
        int re = a->kind == BK_REENTRANT || b->kind == BK_REENTRANT;
        int sign = key != NULL ? holder_signs(x, a->g <= b->g ? a : b, key, at, NULL) : 0;
        x->v->signs[re][sign]++;
    }
    FILE *out = x->o->out;
    if (out == NULL || x->described >= x->o->details)
        return;
    x->described++;
    fprintf(out, "%s: %s (seed %llu)\n", u ? "outside Redlock's assumptions" : "VIOLATION",
            ex_violation_names[kind], x->seed);
    fprintf(out, "    %s\n", what);
    if (u != NULL)
        fprintf(out, "    not counted: %s at %.3f s (%s) breaks Redlock's own assumptions\n", u->sort,
                rel_s(x, u->t), u->detail);
    describe_belief(x, a);
    describe_belief(x, b);
    if (key != NULL) {
        holder_signs(x, a->g <= b->g ? a : b, key, at, out);
        if ((a->g <= b->g ? b : a)->kind == BK_REENTRANT && other_owner)
            holder_signs(x, a->g <= b->g ? b : a, key, at, out);
    }
    uint64_t from = a->a0 < b->a0 ? a->a0 : b->a0;
    from = from > x->t0 + 2000000 ? from - 2000000 : x->t0;
    uint64_t to = end_of(a) > end_of(b) ? end_of(a) : end_of(b);
    describe_faults(x, from, to + 200000, a->client, b->client);
}

/* ---- sweeps over intervals ---- */

struct entry {
    const char *key; /* borrowed from the belief */
    size_t keylen;
    uint64_t s, e;
    int b;
};

static int entry_cmp(const void *pa, const void *pb)
{
    const struct entry *a = pa, *b = pb;
    size_t n = a->keylen < b->keylen ? a->keylen : b->keylen;
    int c = memcmp(a->key, b->key, n);
    if (c != 0)
        return c;
    if (a->keylen != b->keylen)
        return a->keylen < b->keylen ? -1 : 1;
    return a->s < b->s ? -1 : a->s > b->s;
}

static int same_key(const struct entry *a, const struct entry *b)
{
    return a->keylen == b->keylen && memcmp(a->key, b->key, a->keylen) == 0;
}

/* Call pair() for every two entries of one key whose intervals overlap. */
static void sweep(struct ctx *x, struct entry *e, size_t n,
                  void (*pair)(struct ctx *, const struct entry *, const struct entry *))
{
    if (n > 1)
        qsort(e, n, sizeof(*e), entry_cmp);
    size_t *active = malloc((n ? n : 1) * sizeof(*active));
    if (active == NULL)
        return;
    size_t na = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && !same_key(&e[i - 1], &e[i]))
            na = 0;
        size_t k = 0;
        for (size_t j = 0; j < na; j++)
            if (e[active[j]].e > e[i].s)
                active[k++] = active[j];
        na = k;
        for (size_t j = 0; j < na; j++)
            pair(x, &e[active[j]], &e[i]);
        active[na++] = i;
    }
    free(active);
}

static void overlap_pair(struct ctx *x, const struct entry *p, const struct entry *q)
{
    const struct belief *a = &x->l->b[p->b], *b = &x->l->b[q->b];
    if (strcmp(a->owner, b->owner) == 0)
        return; /* one owner's holds (a reentrant lock) may overlap */
    char what[600];
    uint64_t hi = p->e < q->e ? p->e : q->e;
    int leaders = a->kind == BK_LEADER && b->kind == BK_LEADER;
    snprintf(what, sizeof(what), "%s: %s and %s both believed %s from %.3f s to %.3f s (%.1f ms)", p->key,
             a->hold, b->hold, leaders ? "they led" : "held", rel_s(x, q->s), rel_s(x, hi),
             (double)(hi - q->s) / 1000);
    char key[256];
    snprintf(key, sizeof(key), "%.*s", (int)p->keylen, p->key);
    violation(x, leaders ? EV_LEADERS : EV_OVERLAP, p->b, q->b, key, what);
}

static void read_write_pair(struct ctx *x, const struct entry *p, const struct entry *q)
{
    const struct belief *a = &x->l->b[p->b], *b = &x->l->b[q->b];
    if ((a->kind == BK_READ) == (b->kind == BK_READ))
        return; /* readers share; writers are checked as exclusive */
    char what[600];
    uint64_t hi = p->e < q->e ? p->e : q->e;
    snprintf(what, sizeof(what), "%s: reader and writer both believed held from %.3f s to %.3f s (%.1f ms)",
             p->key, rel_s(x, q->s), rel_s(x, hi), (double)(hi - q->s) / 1000);
    violation(x, EV_READ_WRITE, p->b, q->b, NULL, what);
}

/* The keys a belief excludes others from: its resource, or each member. */
static int add_entries(struct entry **e, size_t *n, size_t *cap, const struct belief *b, int bi, uint64_t s,
                       uint64_t en)
{
    const char *k = b->res;
    for (;;) {
        const char *comma = b->kind == BK_MULTI ? strchr(k, ',') : NULL;
        size_t len = comma ? (size_t)(comma - k) : strlen(k);
        GROW(*e, *n, *cap);
        (*e)[(*n)++] = (struct entry){k, len, s, en, bi};
        if (comma == NULL)
            return 0;
        k = comma + 1;
    }
}

static int check_exclusive(struct ctx *x)
{
    struct entry *e = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < x->niv; i++) {
        const struct belief *b = &x->l->b[x->iv[i].b];
        if (b->kind == BK_READ)
            continue;
        if (add_entries(&e, &n, &cap, b, x->iv[i].b, x->iv[i].s, x->iv[i].e) < 0) {
            free(e);
            return -ENOMEM;
        }
    }
    sweep(x, e, n, overlap_pair);
    /* Readers and writers of one resource. */
    n = 0;
    for (size_t i = 0; i < x->niv; i++) {
        const struct belief *b = &x->l->b[x->iv[i].b];
        if ((b->kind == BK_READ || b->kind == BK_WRITE) &&
            add_entries(&e, &n, &cap, b, x->iv[i].b, x->iv[i].s, x->iv[i].e) < 0) {
            free(e);
            return -ENOMEM;
        }
    }
    sweep(x, e, n, read_write_pair);
    free(e);
    return 0;
}

/* ---- permits ---- */

struct pev {
    uint64_t t;
    int delta; /* +1 start, -1 end */
    int b;
};

static int pev_cmp(const void *pa, const void *pb)
{
    const struct pev *a = pa, *b = pb;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    return a->delta - b->delta; /* ends first: touching intervals do not overlap */
}

static size_t sem_name_len(const char *res)
{
    const char *p = strstr(res, ":permit:");
    return p ? (size_t)(p - res) : strlen(res);
}

static int check_permits(struct ctx *x)
{
    const struct ex_log *l = x->l;
    /* One semaphore at a time: the first permit belief not yet done names it. */
    char *done = calloc(l->nb ? l->nb : 1, 1);
    struct pev *ev = malloc((2 * x->niv + 1) * sizeof(*ev));
    int *open = malloc((x->niv + 1) * sizeof(*open));
    if (done == NULL || ev == NULL || open == NULL) {
        free(done);
        free(ev);
        free(open);
        return -ENOMEM;
    }
    for (size_t first = 0; first < l->nb; first++) {
        const struct belief *s = &l->b[first];
        if (s->kind != BK_PERMIT || done[first])
            continue;
        size_t len = sem_name_len(s->res);
        size_t n = 0;
        for (size_t i = 0; i < x->niv; i++) {
            const struct belief *b = &l->b[x->iv[i].b];
            if (b->kind != BK_PERMIT || sem_name_len(b->res) != len || memcmp(b->res, s->res, len) != 0)
                continue;
            done[x->iv[i].b] = 1;
            ev[n++] = (struct pev){x->iv[i].s, +1, x->iv[i].b};
            ev[n++] = (struct pev){x->iv[i].e, -1, x->iv[i].b};
        }
        if (n > 1)
            qsort(ev, n, sizeof(*ev), pev_cmp);
        /* Count beliefs, not intervals: an extension's interval overlaps
         * its own grant's. */
        int *cnt = calloc(l->nb, sizeof(*cnt));
        if (cnt == NULL)
            break;
        size_t nopen = 0;
        int reported = 0;
        for (size_t i = 0; i < n; i++) {
            int b = ev[i].b;
            if (ev[i].delta > 0) {
                if (cnt[b]++ == 0)
                    open[nopen++] = b;
            } else if (--cnt[b] == 0) {
                for (size_t j = 0; j < nopen; j++)
                    if (open[j] == b) {
                        open[j] = open[--nopen];
                        break;
                    }
            }
            if (nopen > s->permits && ev[i].delta > 0 && !reported) {
                /* Report the newest against each it overlaps: pairs name
                 * the beliefs; one excess is one violation. */
                char what[600];
                snprintf(what, sizeof(what), "%.*s: %zu permits believed held at %.3f s, of %u", (int)len,
                         s->res, nopen, rel_s(x, ev[i].t), s->permits);
                violation(x, EV_PERMITS, open[0] == b ? open[1] : open[0], b, NULL, what);
                if (x->o->out != NULL && x->described <= x->o->details)
                    for (size_t j = 0; j < nopen; j++)
                        if (open[j] != b && open[j] != open[0])
                            describe_belief(x, &l->b[open[j]]);
                reported = 1;
            } else if (nopen <= s->permits) {
                reported = 0;
            }
        }
        free(cnt);
    }
    free(done);
    free(ev);
    free(open);
    return 0;
}

/* ---- tokens ---- */

struct tok {
    const char *key;
    size_t keylen;
    int b;
    uint64_t a0, g, token;
    int read;
};

static int tok_by_key_g(const void *pa, const void *pb)
{
    const struct tok *a = pa, *b = pb;
    struct entry ea = {a->key, a->keylen, a->g, 0, 0}, eb = {b->key, b->keylen, b->g, 0, 0};
    return entry_cmp(&ea, &eb);
}

static int tok_by_key_token(const void *pa, const void *pb)
{
    const struct tok *a = pa, *b = pb;
    struct entry ea = {a->key, a->keylen, a->token, 0, 0}, eb = {b->key, b->keylen, b->token, 0, 0};
    return entry_cmp(&ea, &eb);
}

static int tok_by_a0(const void *pa, const void *pb)
{
    const struct tok *a = *(const struct tok *const *)pa, *b = *(const struct tok *const *)pb;
    return a->a0 < b->a0 ? -1 : a->a0 > b->a0;
}

/* Within one key's grants t[0..n-1] (sorted by g): each grant's token
 * against the largest token of another owner's grant that returned
 * before the grant's acquisition began. */
static void order_one_key(struct ctx *x, struct tok *t, size_t n, struct tok **by_a0)
{
    for (size_t i = 0; i < n; i++)
        by_a0[i] = &t[i];
    if (n > 1)
        qsort(by_a0, n, sizeof(*by_a0), tok_by_a0);
    /* The two largest tokens so far, of different owners (the check skips
     * a grant's own owner), among writes (read tokens are not grants). */
    const struct tok *best[2] = {NULL, NULL};
    size_t next = 0;
    for (size_t i = 0; i < n; i++) {
        const struct tok *q = by_a0[i];
        while (next < n && t[next].g < q->a0) {
            const struct tok *p = &t[next++];
            if (p->read)
                continue;
            const char *po = x->l->b[p->b].owner;
            if (best[0] == NULL || p->token > best[0]->token) {
                if (best[0] != NULL && strcmp(x->l->b[best[0]->b].owner, po) != 0)
                    best[1] = best[0];
                best[0] = p;
            } else if (strcmp(x->l->b[best[0]->b].owner, po) != 0 &&
                       (best[1] == NULL || p->token > best[1]->token)) {
                best[1] = p;
            }
        }
        const char *qo = x->l->b[q->b].owner;
        const struct tok *p = best[0];
        if (p != NULL && strcmp(x->l->b[p->b].owner, qo) == 0)
            p = best[1];
        if (p == NULL)
            continue;
        char what[600];
        if (q->read && q->token < p->token && fence_lost_between(x, p->g, q->g)) {
            /* A node that kept the write's fence lost it with its data: a
             * read it grants may carry less (docs/lockcore.md). The store
             * then refuses that read as stale; no write gets through. */
            x->v->fences_lost++;
        } else if (q->read && q->token < p->token) {
            snprintf(what, sizeof(what),
                     "%.*s: the read asked at %.3f s carries %" PRIu64
                     ", below the write granted at %.3f s (%" PRIu64 ")",
                     (int)q->keylen, q->key, rel_s(x, q->a0), q->token, rel_s(x, p->g), p->token);
            violation(x, EV_READ_TOKEN, p->b, q->b, NULL, what);
        } else if (!q->read && q->token <= p->token) {
            snprintf(what, sizeof(what),
                     "%.*s: %s asked at %.3f s, after %s was granted at %.3f s, and got token %" PRIu64
                     ", not above %" PRIu64,
                     (int)q->keylen, q->key, x->l->b[q->b].hold, rel_s(x, q->a0), x->l->b[p->b].hold,
                     rel_s(x, p->g), q->token, p->token);
            violation(x, EV_TOKEN_ORDER, p->b, q->b, NULL, what);
        }
    }
}

static int check_tokens(struct ctx *x)
{
    const struct ex_log *l = x->l;
    size_t n = 0, cap = 0;
    struct tok *t = NULL;
    for (size_t i = 0; i < l->nb; i++) {
        const struct belief *b = &l->b[i];
        if (b->token == 0 || b->kind == BK_LEADER)
            continue; /* fencing off: nothing to order; epochs: check_epochs */
        const char *k = b->res;
        for (;;) {
            const char *comma = b->kind == BK_MULTI ? strchr(k, ',') : NULL;
            size_t len = comma ? (size_t)(comma - k) : strlen(k);
            if (n == cap) {
                size_t nc = cap ? 2 * cap : 256;
                struct tok *nt = realloc(t, nc * sizeof(*nt));
                if (nt == NULL) {
                    free(t);
                    return -ENOMEM;
                }
                t = nt;
                cap = nc;
            }
            t[n++] = (struct tok){k, len, (int)i, b->a0, b->g, b->token, b->kind == BK_READ};
            if (comma == NULL)
                break;
            k = comma + 1;
        }
    }
    struct tok **by_a0 = malloc((n ? n : 1) * sizeof(*by_a0));
    if (by_a0 == NULL) {
        free(t);
        return -ENOMEM;
    }
    if (n > 1)
        qsort(t, n, sizeof(*t), tok_by_key_g);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && t[j].keylen == t[i].keylen && memcmp(t[j].key, t[i].key, t[i].keylen) == 0)
            j++;
        order_one_key(x, t + i, j - i, by_a0);
        i = j;
    }
    /* T1: concurrent grants of different owners never share a token (the
     * ordered ones were checked above). Readers share on purpose. */
    if (n > 1)
        qsort(t, n, sizeof(*t), tok_by_key_token);
    for (size_t i = 1; i < n; i++) {
        const struct tok *p = &t[i - 1], *q = &t[i];
        if (p->read || q->read || p->token != q->token || p->keylen != q->keylen ||
            memcmp(p->key, q->key, p->keylen) != 0 || strcmp(l->b[p->b].owner, l->b[q->b].owner) == 0 ||
            p->g < q->a0 || q->g < p->a0)
            continue;
        char what[600];
        snprintf(what, sizeof(what), "%.*s: %s and %s were both granted token %" PRIu64, (int)p->keylen,
                 p->key, l->b[p->b].hold, l->b[q->b].hold, p->token);
        violation(x, EV_TOKEN_TWICE, p->b, q->b, NULL, what);
    }
    free(by_a0);
    free(t);
    return 0;
}

/* ---- elections ---- */

struct lead {
    const char *name; /* borrowed from the belief */
    uint64_t g, epoch;
    int b;
};

static int lead_cmp(const void *pa, const void *pb)
{
    const struct lead *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    if (c != 0)
        return c;
    return a->g < b->g ? -1 : a->g > b->g;
}

/* E2, per election name: with the leaders' beliefs in the order they
 * began, each epoch is above every epoch before it. (E1, no two leaders'
 * beliefs overlapping, is the exclusive check's: a leader's belief is an
 * exclusive belief of its name.) */
static int check_epochs(struct ctx *x)
{
    const struct ex_log *l = x->l;
    struct lead *e = malloc((l->nb ? l->nb : 1) * sizeof(*e));
    if (e == NULL)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < l->nb; i++)
        if (l->b[i].kind == BK_LEADER)
            e[n++] = (struct lead){l->b[i].res, l->b[i].g, l->b[i].token, (int)i};
    if (n > 1)
        qsort(e, n, sizeof(*e), lead_cmp);
    for (size_t i = 0, best = 0; i < n; i++) {
        if (i == 0 || strcmp(e[i].name, e[i - 1].name) != 0) {
            best = i; /* the largest epoch so far of this name */
            continue;
        }
        if (e[i].epoch <= e[best].epoch) {
            char what[600];
            snprintf(what, sizeof(what),
                     "%s: %s began to lead at %.3f s with epoch %" PRIu64 ", not above the epoch %" PRIu64
                     " of %s, which began to lead at %.3f s",
                     e[i].name, l->b[e[i].b].hold, rel_s(x, e[i].g), e[i].epoch, e[best].epoch,
                     l->b[e[best].b].hold, rel_s(x, e[best].g));
            violation(x, EV_EPOCH_ORDER, e[best].b, e[i].b, NULL, what);
        } else {
            best = i;
        }
    }
    free(e);
    return 0;
}

static void describe_reading(const struct ctx *x, const struct reading *r)
{
    fprintf(x->o->out, "    client %d (process %d) told at %.3f s: %s", r->client, r->life, rel_s(x, r->t),
            r->held ? "" : "nobody leads\n");
    if (r->held)
        fprintf(x->o->out, "epoch %" PRIu64 ", value %s, lock id %.12s...\n", r->epoch, r->value, r->id);
    /* The leader that epoch was, as it believed. */
    for (size_t i = 0; r->held && i < x->l->nb; i++)
        if (x->l->b[i].kind == BK_LEADER && x->l->b[i].token == r->epoch &&
            strcmp(x->l->b[i].res, r->name) == 0)
            describe_belief(x, &x->l->b[i]);
}

/* E4: an observer process (the readings of one client between two of
 * its C lines) is never told an epoch below one it was told before. Two
 * observers' readings are not ordered against each other. */
static void check_observers(struct ctx *x)
{
    const struct ex_log *l = x->l;
    for (size_t i = 0; i < l->nrd; i++) {
        const struct reading *q = &l->rd[i], *p = NULL;
        if (!q->held)
            continue;
        for (size_t j = 0; j < i; j++) {
            const struct reading *r = &l->rd[j];
            if (r->held && r->client == q->client && r->life == q->life && strcmp(r->name, q->name) == 0 &&
                (p == NULL || r->epoch > p->epoch))
                p = r;
        }
        if (p == NULL || q->epoch >= p->epoch)
            continue;
        const struct fault *u = unsafe_between(x, p->t, q->t);
        if (u != NULL)
            x->v->unsafe++;
        else
            x->v->violations[EV_OBSERVED_BACK]++;
        FILE *out = x->o->out;
        if (out == NULL || x->described >= x->o->details)
            continue;
        x->described++;
        fprintf(out, "%s: %s (seed %llu)\n", u ? "outside Redlock's assumptions" : "VIOLATION",
                ex_violation_names[EV_OBSERVED_BACK], x->seed);
        fprintf(out,
                "    %s: observer %d was told epoch %" PRIu64 " at %.3f s, after epoch %" PRIu64
                " at %.3f s\n",
                q->name, q->client, q->epoch, rel_s(x, q->t), p->epoch, rel_s(x, p->t));
        if (u != NULL)
            fprintf(out, "    not counted: %s at %.3f s (%s) breaks Redlock's own assumptions\n", u->sort,
                    rel_s(x, u->t), u->detail);
        describe_reading(x, p);
        describe_reading(x, q);
        uint64_t from = p->t > x->t0 + 2000000 ? p->t - 2000000 : x->t0;
        describe_faults(x, from, q->t + 200000, q->client, -2);
    }
}

long ex_check(const struct ex_log *l, const struct ex_check_opts *o, struct ex_verdict *v)
{
    memset(v, 0, sizeof(*v));
    v->lines = l->lines;
    v->bad_lines = l->bad;
    v->faults = (long)l->nf;
    for (size_t i = 0; i < l->nb; i++)
        v->beliefs[l->b[i].kind]++;
    for (size_t i = 0; i < l->nrd; i++)
        v->readings += l->rd[i].held;
    for (size_t i = 0; i < l->nop; i++) {
        v->ops[l->op[i].kind][0]++;
        v->ops[l->op[i].kind][1] += l->op[i].rc == 0;
    }
    struct ctx x = {.l = l, .o = o, .v = v, .t0 = l->t0, .seed = l->seed};
    x.iv = malloc((l->niv ? l->niv : 1) * sizeof(*x.iv));
    if (x.iv == NULL)
        return -ENOMEM;
    /* An extension replaces the validity the client believed: the
     * interval before it ends where it returned (an extension to a
     * shorter TTL ends the belief sooner). A belief's intervals are in
     * the log in their order. */
    int *next = malloc((l->nb ? l->nb : 1) * sizeof(*next));
    if (next == NULL) {
        free(x.iv);
        return -ENOMEM;
    }
    for (size_t b = 0; b < l->nb; b++)
        next[b] = -1;
    for (size_t i = l->niv; i > 0; i--) {
        struct iv c = l->iv[i - 1];
        if (next[c.b] >= 0 && (uint64_t)l->iv[next[c.b]].s < c.e)
            c.e = l->iv[next[c.b]].s;
        next[c.b] = (int)(i - 1);
        uint64_t end = l->b[c.b].end;
        if (c.e > end)
            c.e = end;
        if (c.s < c.e)
            x.iv[x.niv++] = c;
    }
    free(next);
    long rc = check_exclusive(&x);
    if (rc == 0)
        rc = check_permits(&x);
    if (rc == 0)
        rc = check_tokens(&x);
    if (rc == 0)
        rc = check_epochs(&x);
    if (rc == 0)
        check_observers(&x);
    free(x.iv);
    free(x.pairs);
    if (rc < 0)
        return rc;
    long n = 0;
    for (int k = 0; k < EV_COUNT; k++)
        n += v->violations[k];
    return n;
}

/* ---- self-test ---- */

/* Read text as a log (through a temporary file). Returns 0 or -1. */
static int read_text(const char *text, struct ex_log **out)
{
    char path[] = "/tmp/fencelock-explore-selftest-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "w");
    if (f == NULL) {
        close(fd);
        unlink(path);
        return -1;
    }
    fputs(text, f);
    int bad = fclose(f) != 0 || ex_log_read(path, out) != 0;
    unlink(path);
    return bad ? -1 : 0;
}

static int judge(FILE *out, const char *name, const char *text, const long want[EV_COUNT], long want_unsafe)
{
    struct ex_log *l = NULL;
    if (read_text(text, &l) != 0)
        return 1;
    struct ex_verdict v;
    /* The details go nowhere, but are written: their code runs too. */
    FILE *sink = fopen("/dev/null", "w");
    struct ex_check_opts o = {.out = sink, .details = 10, .max_ttl_ms = 1};
    ex_check(l, &o, &v);
    if (sink != NULL)
        fclose(sink);
    int ok = v.bad_lines == 0 && v.unsafe == want_unsafe;
    for (int k = 0; k < EV_COUNT; k++)
        ok = ok && v.violations[k] == want[k];
    fprintf(out, "self-test %-44s %s (", name, ok ? "ok  " : "FAIL");
    for (int k = 0; k < EV_COUNT; k++)
        fprintf(out, "%s%ld", k ? " " : "", v.violations[k]);
    fprintf(out, "; unsafe %ld; bad lines %ld)\n", v.unsafe, v.bad_lines);
    ex_log_free(l);
    return !ok;
}

/* Elections: a clean history, two leaders at once, epochs that do not
 * grow, an observer told an older epoch, and the same near an unsafe
 * restart. Returns the number of logs misjudged. */
static int self_test_elections(FILE *out)
{
    int fails = 0;
    long none[EV_COUNT] = {0};
    /* Leaders one after another (a handover that touches, a leader that
     * proclaimed, one that died), epochs that grow; an observer told the
     * same epoch with a new value, nobody, then the next; the same
     * observer started again, told an older leader first (a new process
     * has no reading to go back from); another observer; and another
     * election with smaller epochs (names are not ordered together). */
    const char *clean = "C 0 1 elect fair 1000 0 100\n"
                        "C 0 2 elect fair 1000 0 101\n"
                        "G 1000 1 leader el0 aa 1.1000 100 900 2000 0\n"
                        "X 1500 1 1.1000 2500\n"
                        "E 2400 1 1.1000 release\n"
                        "G 2400 2 leader el0 bb 2.1000 200 1000 3500 0\n"
                        "E 3000 2 2.1000 died\n"
                        "G 3600 1 leader el0 cc 1.1001 300 2600 5000 0\n"
                        "G 1000 2 leader el1 dd 2.1001 50 900 5000 0\n"
                        "C 0 3 observe fair 1000 0 102\n"
                        "R 1100 3 el0 1 100 aa v1\n"
                        "R 1600 3 el0 1 100 aa v2\n"
                        "R 2500 3 el0 1 200 bb v3\n"
                        "R 3100 3 el0 0 0 - -\n"
                        "R 3700 3 el0 1 300 cc v4\n"
                        "C 4000 3 observe fair 1000 0 103\n"
                        "R 4100 3 el0 1 200 bb v3\n"
                        "R 4200 3 el0 1 300 cc v4\n"
                        "C 0 4 observe fair 1000 0 104\n"
                        "R 3800 4 el0 1 300 cc v4\n"
                        "R 3900 4 el1 1 50 dd x\n"
                        "O 1000 1 elect fair campaign 0 100\n";
    fails += judge(out, "a clean election passes", clean, none, 0);

    /* Two leaders at once; a leader extended (a proclamation) into the
     * next one's belief; a leader of another name beside them is none. */
    const char *two = "G 1000 1 leader el0 aa 1.1000 100 900 2000 0\n"
                      "G 1500 2 leader el0 bb 2.1000 200 1000 3000 0\n"
                      "G 5000 1 leader el1 cc 1.1001 300 4900 6000 0\n"
                      "X 5900 1 1.1001 7000\n"
                      "G 6500 2 leader el1 dd 2.1001 400 6000 8000 0\n"
                      "G 1200 3 leader el2 ee 3.1000 150 1100 9000 0\n";
    long want1[EV_COUNT] = {[EV_LEADERS] = 2};
    fails += judge(out, "two leaders at once fail", two, want1, 0);

    /* One after another, but the second's epoch is smaller and the
     * third's equal to the first's. */
    const char *order = "G 1000 1 leader el0 aa 1.1000 500 900 2000 0\n"
                        "E 1800 1 1.1000 release\n"
                        "G 2000 2 leader el0 bb 2.1000 400 1900 3000 0\n"
                        "E 2900 2 2.1000 release\n"
                        "G 3000 3 leader el0 cc 3.1000 500 2950 4000 0\n"
                        "E 3900 3 3.1000 release\n"
                        "G 4000 1 leader el0 dd 1.1001 600 3950 5000 0\n";
    long want2[EV_COUNT] = {[EV_EPOCH_ORDER] = 2};
    fails += judge(out, "epochs that do not grow fail", order, want2, 0);

    /* An observer told an older epoch, then one below its largest after
     * a reading of nobody; its next process starts afresh. */
    const char *back = "C 0 3 observe fair 1000 0 101\n"
                       "R 1000 3 el0 1 500 aa v1\n"
                       "R 2000 3 el0 1 400 bb v2\n"
                       "R 3000 3 el0 0 0 - -\n"
                       "R 4000 3 el0 1 450 cc v3\n"
                       "R 5000 3 el0 1 600 dd v4\n"
                       "C 6000 3 observe fair 1000 0 102\n"
                       "R 6100 3 el0 1 550 ee v5\n";
    long want3[EV_COUNT] = {[EV_OBSERVED_BACK] = 2};
    fails += judge(out, "an observer told an older epoch fails", back, want3, 0);

    /* All three after a node lost its data within the TTL: named, not
     * counted. */
    const char *unsafe = "F 700 restart-empty-early -1 1 1 node 1 restarted empty within the TTL\n"
                         "G 1000 1 leader el0 aa 1.1000 100 900 2000 0\n"
                         "G 1500 2 leader el0 bb 2.1000 90 1400 3000 0\n"
                         "C 0 3 observe fair 1000 0 101\n"
                         "R 1600 3 el0 1 100 aa v1\n"
                         "R 1700 3 el0 1 90 bb v2\n";
    fails += judge(out, "election violations after an unsafe restart", unsafe, none, 3);
    return fails;
}

int ex_self_test(FILE *out)
{
    int fails = 0;
    /* A clean history: handoffs that touch, one owner's nested holds, two
     * permits of two, readers together, a write after them with a larger
     * token, read tokens at least the write's, and a lock extended to a
     * shorter TTL, then taken by another once that ran out. */
    const char *clean = "G 1000 1 plain p0 aa 1.1 10 900 2000 0\n"
                        "E 1500 1 1.1 release\n"
                        "G 1500 2 plain p0 bb 2.1 11 1400 3000 0\n"
                        "X 2500 2 2.1 4000\n"
                        "E 3900 2 2.1 release\n"
                        "G 1000 3 reentrant r0 cc 3.1 20 900 9000 0\n"
                        "G 1200 3 reentrant r0 cc 3.2 20 1100 1600 0\n"
                        "X 1300 3 3.2 1400\n"
                        "E 1350 3 3.2 release\n"
                        "E 5000 3 3.1 release\n"
                        "G 6000 4 reentrant r0 dd 4.1 21 5500 7000 0\n"
                        "G 1000 5 permit s0:permit:0 ee 5.1 30 900 2000 2\n"
                        "G 1100 6 permit s0:permit:1 ff 6.1 31 1000 2000 2\n"
                        "G 2000 7 permit s0:permit:0 gg 7.1 32 1950 3000 2\n"
                        "G 1000 8 read w0 hh 8.1 40 900 2000 0\n"
                        "G 1100 9 read w0 ii 9.1 40 1000 2000 0\n"
                        "G 2100 10 write w0 jj 10.1 41 1950 3000 0\n"
                        "E 2900 10 10.1 release\n"
                        "G 3100 11 read w0 kk 11.1 41 3000 4000 0\n"
                        "G 5000 12 multi p1,p2 ll 12.1 50 4900 6000 0\n"
                        "E 5500 12 12.1 release\n"
                        "G 5600 13 plain p2 mm 13.1 51 5550 6500 0\n"
                        "G 1000 14 plain p5 nn 14.1 60 900 3000 0\n"
                        "X 1500 14 14.1 2000\n"
                        "G 2100 15 plain p5 oo 15.1 61 2050 4000 0\n"
                        "F 100 restart -1 0 0 node 0 restarted with its data\n"
                        "O 1000 1 plain poll acquire 0\n"
                        "C 0 1 plain poll 1000 0\n";
    long none[EV_COUNT] = {0};
    fails += judge(out, "a clean history passes", clean, none, 0);

    /* Two owners at once, a token that goes back, a same-token pair. */
    const char *overlap = "G 1000 1 plain p0 aa 1.1 10 900 2000 0\n"
                          "G 1500 2 plain p0 bb 2.1 11 1400 3000 0\n"
                          "G 5000 3 plain p1 cc 3.1 20 4900 6000 0\n"
                          "E 5500 3 3.1 release\n"
                          "G 5600 4 plain p1 dd 4.1 15 5550 6500 0\n"
                          "G 9000 5 plain p2 ee 5.1 60 8900 9500 0\n"
                          "E 9100 5 5.1 release\n"
                          "G 9200 6 plain p2 ff 6.1 60 8950 9900 0\n";
    long want1[EV_COUNT] = {[EV_OVERLAP] = 1, [EV_TOKEN_ORDER] = 1, [EV_TOKEN_TWICE] = 1};
    fails += judge(out, "an overlap and tokens that go back fail", overlap, want1, 0);

    /* Another owner inside a reentrant hold; a set's member and a plain
     * lock of it; a belief extended into another's. */
    const char *kinds = "G 1000 1 reentrant r0 aa 1.1 10 900 9000 0\n"
                        "G 1200 1 reentrant r0 aa 1.2 10 1100 1600 0\n"
                        "G 3000 2 reentrant r0 bb 2.1 11 2900 4000 0\n"
                        "G 1000 3 multi p1,p2 cc 3.1 20 900 2000 0\n"
                        "G 1500 4 plain p2 dd 4.1 21 1400 2500 0\n"
                        "G 5000 5 plain p3 ee 5.1 30 4900 6000 0\n"
                        "X 5900 5 5.1 7000\n"
                        "G 6500 6 plain p3 ff 6.1 31 6400 8000 0\n";
    long want2[EV_COUNT] = {[EV_OVERLAP] = 3};
    fails += judge(out, "reentrant, multi and extended overlaps fail", kinds, want2, 0);

    /* Three permits of two; a reader beside a writer; a read token below
     * an earlier write's. */
    const char *shared = "G 1000 1 permit s0:permit:0 aa 1.1 10 900 2000 2\n"
                         "G 1100 2 permit s0:permit:1 bb 2.1 11 1000 2000 2\n"
                         "G 1200 3 permit s0:permit:2 cc 3.1 12 1100 2000 2\n"
                         "G 1000 4 read w0 dd 4.1 40 900 2000 0\n"
                         "G 1500 5 write w0 ee 5.1 41 1400 3000 0\n"
                         "E 2800 5 5.1 release\n"
                         "G 3500 6 read w0 ff 6.1 40 3000 4000 0\n";
    long want3[EV_COUNT] = {[EV_PERMITS] = 1, [EV_READ_WRITE] = 1, [EV_READ_TOKEN] = 1};
    fails += judge(out, "excess permits, reader beside writer fail", shared, want3, 0);

    /* An overlap after a node lost its data within the TTL: named, not
     * counted. */
    const char *unsafe = "F 500 restart-empty-early -1 1 1 node 1 restarted empty within the TTL\n"
                         "G 1000 1 plain p0 aa 1.1 10 900 2000 0\n"
                         "G 1500 2 plain p0 bb 2.1 11 1400 3000 0\n";
    fails += judge(out, "an overlap after an unsafe restart is named", unsafe, none, 1);

    /* The same read after a node lost its data (down for the max TTL, a
     * restart Redlock allows) between the write and the read: not counted,
     * and named as such. */
    const char *lost = "G 1500 5 write w0 ee 5.1 41 1400 3000 0\n"
                       "E 2800 5 5.1 release\n"
                       "F 3100 restart-empty -1 1 0 node 1 down for the max TTL, restarted without its data\n"
                       "G 3500 6 read w0 ff 6.1 40 3000 4000 0\n";
    struct ex_log *ll = NULL;
    struct ex_verdict lv;
    struct ex_check_opts lo = {.max_ttl_ms = 3000};
    int lok = read_text(lost, &ll) == 0 && ex_check(ll, &lo, &lv) == 0 && lv.fences_lost == 1 &&
              lv.violations[EV_READ_TOKEN] == 0;
    fprintf(out, "self-test %-44s %s\n", "a read after a node lost its fences is named", lok ? "ok" : "FAIL");
    fails += !lok;
    ex_log_free(ll);

    fails += self_test_elections(out);

    /* A log line that is not one is counted as such. */
    struct ex_log *l = NULL;
    int ok = read_text("G 1 2 3\nnonsense\n", &l) == 0 && l->bad == 2 && l->nb == 0;
    fprintf(out, "self-test %-44s %s\n", "bad lines are counted", ok ? "ok" : "FAIL");
    fails += !ok;
    ex_log_free(l);
    return fails;
}
