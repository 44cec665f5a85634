/*
 * fencelock status RESOURCE...: each node's view of a lock and the lock's
 * as a whole: its holder, its queue of waiters, a reentrant hold's count,
 * a read-write lock's readers, a semaphore's permits.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <lockcore/lockcore.h>

#include "cli.h"

static const char *prog = "fencelock";

const char cmd_status_usage[] =
    "usage: fencelock [options] status RESOURCE...\n"
    "\n"
    "Print each node's view of RESOURCE, who holds it, and whether a majority holds\n"
    "one id:\n"
    "  {\"resource\",\"quorum\",\"nodes\":[{\"node\",\"reachable\",\"holder\",\"remaining_ms\",\n"
    "   \"holder_info\",\"fence\",\"node_time_us\",\"fence_ahead_ms\" | \"error\"}],\"reachable\",\n"
    "   \"state\",\"held_by_majority\",\n"
    "   \"majority_holder\",\"majority_holder_info\",\"majority_remaining_ms\"}\n"
    "state: held (by a majority), expired (a minority still holds a key), free.\n"
    "holder_info: {\"host\",\"pid\",\"cmd\",\"acquired_at\"} left by acquire and run.\n"
    "Several resources: {\"resources\":[one object each],\"set_holder\"}.\n"
    "--reentrant adds the hold count (\"holds\"); --read or --write the readers\n"
    "(\"readers\", \"reader_ids\", \"writer\", \"writer_waits\", \"mode\": read, write\n"
    "or free); --permits N each permit.\n"
    "Exit: 0 a majority answered; 69 no majority answered; 64 usage; 70 error.\n";

static json_t *json_string_or_null(const char *s)
{
    return s != NULL ? json_string(s) : json_null();
}

/* A holder's info as JSON: the object it was written as, the text as it is
 * if it is not JSON (another program's), null if none. */
static json_t *info_json(const char *info)
{
    if (info[0] == '\0')
        return json_null();
    json_t *j = json_loads(info, JSON_DECODE_ANY, NULL);
    return j != NULL ? j : json_string(info);
}

/* A node's queue of waiters (notified and fair waiting), first in line
 * first: each waiter's lock id, ticket (wall µs when it asked) and how long
 * it has waited by this machine's clock. */
static json_t *queue_json(const struct lockcore_node_status *st)
{
    json_t *q = json_array();
    uint64_t now_ms = fencelock_wall_ms();
    for (unsigned k = 0; k < st->waiters && k < LOCKCORE_STATUS_WAITERS && st->queue[k].id[0]; k++) {
        uint64_t t = st->queue[k].ticket / 1000;
        json_array_append_new(q, json_pack("{s:s, s:I, s:I}", "id", st->queue[k].id, "ticket",
                                           (json_int_t)st->queue[k].ticket, "waited_ms",
                                           (json_int_t)(now_ms > t ? now_ms - t : 0)));
    }
    return q;
}

/*
 * Each node's view, and the lock's as a whole: "held" when a majority holds
 * one id (its info, and how long that majority lasts: the quorum-th longest
 * remaining TTL among its nodes), "expired" when some node still holds a key
 * but no majority does (what is left of a lock that ran out, was lost or is
 * being released; also, for a moment, an acquisition half done), "free"
 * when no reachable node holds it.
 */
/* status --permits N: each permit of the semaphore. */
static int status_permits(lockcore_client *c, const char *resource, unsigned permits)
{
    struct lockcore_permit_status *ps = calloc(permits, sizeof(*ps));
    if (ps == NULL)
        return fencelock_fail(c, "status", -ENOMEM);
    int held = lockcore_sem_status(c, resource, permits, ps, permits);
    if (held < 0) {
        free(ps);
        return fencelock_fail(c, "status", held);
    }
    json_t *arr = json_array();
    for (unsigned p = 0; p < permits; p++)
        json_array_append_new(
            arr, json_pack("{s:i, s:b, s:s?, s:i, s:I, s:I}", "permit", (int)ps[p].permit, "held", ps[p].held,
                           "holder", ps[p].holder[0] ? ps[p].holder : NULL, "nodes", (int)ps[p].nodes,
                           "remaining_ms", (json_int_t)ps[p].pttl_ms, "fence", (json_int_t)ps[p].fence));
    fencelock_print_json(json_pack("{s:s, s:i, s:i, s:o}", "resource", resource, "permits", (int)permits,
                                   "held", held, "permit_status", arr));
    free(ps);
    return EXIT_OK;
}

/* A node's first readers, for status --read: [{"id","remaining_ms"}]. */
static json_t *readers_json(const struct lockcore_node_status *st)
{
    json_t *q = json_array();
    for (unsigned k = 0; k < LOCKCORE_STATUS_READERS && st->readers[k].id[0]; k++)
        json_array_append_new(q, json_pack("{s:s, s:I}", "id", st->readers[k].id, "remaining_ms",
                                           (json_int_t)st->readers[k].pttl_ms));
    return q;
}

/* How many reachable nodes list reader id among their first readers. */
static int nodes_listing(const struct lockcore_node_status *st, int n, const char *id)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        for (unsigned k = 0; st[i].reachable && k < LOCKCORE_STATUS_READERS && st[i].readers[k].id[0]; k++)
            if (strcmp(st[i].readers[k].id, id) == 0) {
                m++;
                break;
            }
    return m;
}

/*
 * The readers and the waiting writer of a read-write lock as a whole:
 * "reader_ids", the ids a majority of the nodes lists (a reader is granted
 * on a majority; each node lists its first LOCKCORE_STATUS_READERS), and
 * "writer_waits", the writer's id that most nodes carry as their intent
 * (one node's intent already keeps readers out there), with how many do.
 */
static void rw_summary(json_t *j, const struct lockcore_node_status *st, int n, int quorum)
{
    json_t *ids = json_array();
    for (int i = 0; i < n; i++)
        for (unsigned k = 0; st[i].reachable && k < LOCKCORE_STATUS_READERS && st[i].readers[k].id[0]; k++) {
            const char *id = st[i].readers[k].id;
            int seen = 0;
            for (size_t a = 0; a < json_array_size(ids); a++)
                seen |= strcmp(json_string_value(json_array_get(ids, a)), id) == 0;
            if (!seen && nodes_listing(st, n, id) >= quorum)
                json_array_append_new(ids, json_string(id));
        }
    json_object_set_new(j, "reader_ids", ids);
    int best = -1, best_n = 0;
    for (int i = 0; i < n; i++) {
        if (!st[i].reachable || st[i].writer_waits[0] == '\0')
            continue;
        int m = 0;
        for (int k = 0; k < n; k++)
            m += st[k].reachable && strcmp(st[k].writer_waits, st[i].writer_waits) == 0;
        if (m > best_n)
            best = i, best_n = m;
    }
    json_object_set_new(j, "writer_waits", json_string_or_null(best >= 0 ? st[best].writer_waits : NULL));
    json_object_set_new(j, "writer_waits_nodes", json_integer(best_n));
}

/* What `status` reads: a lock (and its queue of waiters), a reentrant
 * hold's count, a read-write lock's readers. */
enum status_kind { ST_PLAIN, ST_REENTRANT, ST_RW };

/*
 * One resource's status as a JSON object (new reference), or NULL after
 * saying why; *reachable gets the nodes that answered, *n the nodes.
 */
static json_t *status_json(lockcore_client *c, const char *resource, enum status_kind kind, int *reachable,
                           int *n_nodes, int *code)
{
    static struct lockcore_node_status st[LOCKCORE_NODES_MAX];
    int n = kind == ST_REENTRANT ? lockcore_reentrant_status(c, resource, st, LOCKCORE_NODES_MAX)
            : kind == ST_RW      ? lockcore_rw_status(c, resource, st, LOCKCORE_NODES_MAX)
                                 : lockcore_status(c, resource, st, LOCKCORE_NODES_MAX);
    if (n < 0) {
        *code = fencelock_fail(c, "status", n);
        return NULL;
    }
    int quorum = (int)lockcore_quorum(c);
    json_t *nodes = json_array();
    int holding = 0;
    int64_t left = 0, counts[LOCKCORE_NODES_MAX];
    int m = 0;
    int majority = fencelock_majority_of(st, n, quorum, &left);
    *reachable = 0;
    for (int i = 0; i < n; i++) {
        *reachable += st[i].reachable;
        json_t *e = json_pack("{s:s, s:b}", "node", st[i].node, "reachable", st[i].reachable);
        if (st[i].reachable) {
            int held = st[i].holder[0] != '\0';
            holding += held;
            json_object_set_new(e, "holder", held ? json_string(st[i].holder) : json_null());
            /* PTTL: -2 no key, -1 a key without expiry (not one of ours). */
            json_object_set_new(e, "remaining_ms", held ? json_integer(st[i].pttl_ms) : json_null());
            json_object_set_new(e, "holder_info", info_json(st[i].info));
            json_object_set_new(e, "fence", json_integer((json_int_t)st[i].fence));
            json_object_set_new(e, "node_time_us", json_integer((json_int_t)st[i].node_time_us));
            json_object_set_new(e, "fence_ahead_ms", fencelock_fence_ahead(&st[i]));
            if (kind == ST_PLAIN) {
                json_object_set_new(e, "waiters", json_integer(st[i].waiters));
                json_object_set_new(e, "queue", queue_json(&st[i]));
            } else if (kind == ST_REENTRANT) {
                json_object_set_new(e, "holds", json_integer(st[i].holds));
                if (majority >= 0 && strcmp(st[i].holder, st[majority].holder) == 0)
                    counts[m++] = st[i].holds;
            } else {
                json_object_set_new(e, "readers", json_integer(st[i].holds));
                json_object_set_new(e, "reader_list", readers_json(&st[i]));
                json_object_set_new(e, "writer_waits",
                                    json_string_or_null(st[i].writer_waits[0] ? st[i].writer_waits : NULL));
                counts[m++] = st[i].holds;
            }
        } else {
            json_object_set_new(e, "error", json_string(st[i].error));
        }
        json_array_append_new(nodes, e);
    }
    json_t *holder_info = majority >= 0 ? info_json(st[majority].info) : json_null();
    json_t *remaining = majority >= 0 ? json_integer(left) : json_null();
    const char *state = majority >= 0 ? "held" : holding > 0 ? "expired" : "free";
    json_t *j = json_pack("{s:s, s:i, s:o, s:i, s:s, s:b, s:s?, s:o, s:o}", "resource", resource, "quorum",
                          quorum, "nodes", nodes, "reachable", *reachable, "state", state, "held_by_majority",
                          majority >= 0, "majority_holder", majority >= 0 ? st[majority].holder : NULL,
                          "majority_holder_info", holder_info, "majority_remaining_ms", remaining);
    /* The count a majority of the nodes reports at least: the hold count
     * of the majority's hold; the readers registered on a majority. */
    if (kind == ST_REENTRANT)
        json_object_set_new(j, "holds", json_integer(fencelock_quorum_th(counts, m, quorum)));
    if (kind == ST_RW) {
        int64_t readers = fencelock_quorum_th(counts, m, quorum);
        json_object_set_new(j, "writer", json_string_or_null(majority >= 0 ? st[majority].holder : NULL));
        json_object_set_new(j, "readers", json_integer(readers));
        json_object_set_new(j, "mode", json_string(majority >= 0 ? "write" : readers > 0 ? "read" : "free"));
        rw_summary(j, st, n, quorum);
    }
    *n_nodes = n;
    return j;
}

int cmd_status(lockcore_client *c, const struct cmdline *cl)
{
    const struct args *a = &cl->a;
    const struct target *t = &cl->t;
    if (a->permits > 0)
        return status_permits(c, t->names[0], a->permits);
    enum status_kind kind = a->reentrant ? ST_REENTRANT : a->rw != RW_NONE ? ST_RW : ST_PLAIN;
    int reachable = 0, n = 0, code = EXIT_ERROR, least = LOCKCORE_NODES_MAX;
    if (t->n == 1) {
        json_t *j = status_json(c, t->names[0], kind, &reachable, &n, &code);
        if (j == NULL)
            return code;
        fencelock_print_json(j);
        least = reachable;
    } else {
        /* A set: each resource's status, and the id a majority holds every
         * resource under (the set held as one, or by one holder), if any. */
        json_t *arr = json_array();
        const char *same = NULL;
        int all = 1;
        for (size_t i = 0; i < t->n; i++) {
            json_t *j = status_json(c, t->names[i], kind, &reachable, &n, &code);
            if (j == NULL) {
                json_decref(arr);
                return code;
            }
            least = reachable < least ? reachable : least;
            const char *h = json_string_value(json_object_get(j, "majority_holder"));
            if (h == NULL || (same != NULL && strcmp(same, h) != 0))
                all = 0;
            else if (same == NULL)
                same = h;
            json_array_append_new(arr, j); /* same stays valid: arr holds j */
        }
        fencelock_print_json(json_pack("{s:o, s:s?}", "resources", arr, "set_holder", all ? same : NULL));
    }
    if (least < (int)lockcore_quorum(c)) {
        fprintf(stderr, "%s: status: only %d of %d nodes answered\n", prog, least, n);
        return EXIT_UNREACHABLE;
    }
    return EXIT_OK;
}
