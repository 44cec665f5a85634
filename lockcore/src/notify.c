/*
 * Notified waiting. A waiter subscribes to its resource's release channel
 * ("{key}:released") on every node, over one subscriber connection per node
 * that carries the channels of every resource the client waits on. A
 * release PUBLISHes the name of the first live waiter in that node's queue;
 * the waiter so named tries again at once.
 *
 * Notices are hints, never needed for safety: a lost one costs the waiter
 * its fallback timer (the holder's remaining TTL, or its queue refresh),
 * duplicates (N nodes each publish) wake an acquisition that is already
 * trying, which ignores them. A node that refuses SUBSCRIBE (an ACL without
 * channel rights) turns notification off for the client: waiters go back
 * to timers, and lockcore_notify_error() says why.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kinds/kind.h"

/* Channels kept subscribed with no waiter, at most. */
#define IDLE_CHANNELS_MAX 64

static int subs_init(lockcore_client *c)
{
    if (c->subs != NULL)
        return 0;
    c->subs = calloc(c->n, sizeof(*c->subs));
    if (c->subs == NULL)
        return -ENOMEM;
    for (unsigned i = 0; i < c->n; i++) {
        c->subs[i].addr = c->nodes[i].addr;
        lockcore__node_init(c, &c->subs[i], i);
        c->subs[i].sub = 1;
    }
    return 0;
}

/* (UN)SUBSCRIBE names on one subscriber connection. The confirmations come
 * back as pushes, which the reader tells apart by their first element. */
static void send_sub(struct node *s, const char *cmd, char *const *names, const size_t *lens, size_t n)
{
    if (s->ctx == NULL || n == 0)
        return;
    const char **argv = malloc((n + 1) * sizeof(*argv));
    size_t *alen = malloc((n + 1) * sizeof(*alen));
    if (argv != NULL && alen != NULL) {
        argv[0] = cmd;
        alen[0] = strlen(cmd);
        for (size_t k = 0; k < n; k++) {
            argv[k + 1] = names[k];
            alen[k + 1] = lens[k];
        }
        redisAppendCommandArgv(s->ctx, (int)n + 1, argv, alen);
    }
    free(argv);
    free(alen);
}

/* The release channels a waiter listens on: its key's, or, for a kind
 * that waits on several keys (a set), each of them (kinds/kind.h). */
struct chans {
    unsigned n;
    char name[LOCKCORE_MULTI_MAX][CHAN_MAX];
    size_t len[LOCKCORE_MULTI_MAX];
};

static void op_chans(struct op *op, struct chans *ch)
{
    if (op->type != NULL && op->type->channels != NULL) {
        ch->n = op->type->channels(op, ch->name, ch->len, LOCKCORE_MULTI_MAX);
        return;
    }
    ch->n = 1;
    memcpy(ch->name[0], op->chan, op->chan_len + 1);
    ch->len[0] = op->chan_len;
}

static struct channel *find_channel(lockcore_client *c, const char *name, size_t len)
{
    for (size_t k = 0; k < c->n_channels; k++)
        if (c->channels[k].len == len && memcmp(c->channels[k].name, name, len) == 0)
            return &c->channels[k];
    return NULL;
}

/* One more reference on a channel: subscribed on every node the first
 * time. -1 when out of memory. */
static int want_channel(lockcore_client *c, const char *name, size_t len)
{
    struct channel *ch = find_channel(c, name, len);
    if (ch != NULL) {
        ch->refs++;
        return 0;
    }
    if (c->n_channels == c->cap_channels) {
        size_t cap = c->cap_channels ? 2 * c->cap_channels : 8;
        struct channel *t = realloc(c->channels, cap * sizeof(*t));
        if (t == NULL)
            return -1;
        c->channels = t;
        c->cap_channels = cap;
    }
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, name, len);
    copy[len] = '\0';
    c->channels[c->n_channels++] = (struct channel){copy, len, 1};
    uint64_t now = lockcore_now_ms();
    for (unsigned i = 0; i < c->n; i++) {
        struct node *s = &c->subs[i];
        if (s->state == NODE_DOWN)
            lockcore__node_usable(c, s, now); /* its set-up subscribes to every channel */
        else
            send_sub(s, "SUBSCRIBE", &copy, &len, 1);
    }
    return 0;
}

static void drop_channel(lockcore_client *c, const char *name, size_t len)
{
    struct channel *ch = find_channel(c, name, len);
    /* Kept subscribed while idle (up to a bound): a client that waits on a
     * resource usually waits on it again soon. */
    if (ch == NULL || --ch->refs > 0 || c->n_channels <= IDLE_CHANNELS_MAX)
        return;
    for (unsigned i = 0; c->subs != NULL && i < c->n; i++)
        if (c->subs[i].state != NODE_DOWN)
            send_sub(&c->subs[i], "UNSUBSCRIBE", &ch->name, &ch->len, 1);
    free(ch->name);
    *ch = c->channels[--c->n_channels];
}

int lockcore__notify_want_names(lockcore_client *c, char (*names)[CHAN_MAX], const size_t *lens, unsigned n)
{
    if (c->notify_refused || subs_init(c) < 0)
        return -1;
    for (unsigned k = 0; k < n; k++) {
        if (want_channel(c, names[k], lens[k]) < 0) {
            while (k-- > 0)
                drop_channel(c, names[k], lens[k]);
            return -1;
        }
    }
    c->sub_refs++;
    return 0;
}

void lockcore__notify_drop_names(lockcore_client *c, char (*names)[CHAN_MAX], const size_t *lens, unsigned n)
{
    if (--c->sub_refs == 0)
        c->subs_idle_ms = lockcore_now_ms();
    for (unsigned k = 0; k < n; k++)
        drop_channel(c, names[k], lens[k]);
}

int lockcore__notify_want(lockcore_client *c, struct op *op)
{
    if (op->subscribed)
        return 0;
    struct chans ch;
    op_chans(op, &ch);
    if (lockcore__notify_want_names(c, ch.name, ch.len, ch.n) < 0)
        return -1;
    op->subscribed = 1;
    return 0;
}

void lockcore__notify_drop(lockcore_client *c, struct op *op)
{
    op->subscribed = 0;
    struct chans ch;
    op_chans(op, &ch);
    lockcore__notify_drop_names(c, ch.name, ch.len, ch.n);
}

void lockcore__notify_setup(lockcore_client *c, struct node *s, uint64_t now)
{
    (void)now;
    if (c->n_channels == 0)
        return;
    char **names = malloc(c->n_channels * sizeof(*names));
    size_t *lens = malloc(c->n_channels * sizeof(*lens));
    if (names != NULL && lens != NULL) {
        for (size_t k = 0; k < c->n_channels; k++) {
            names[k] = c->channels[k].name;
            lens[k] = c->channels[k].len;
        }
        send_sub(s, "SUBSCRIBE", names, lens, c->n_channels);
    }
    free(names);
    free(lens);
}

/* A node confirmed a subscription: waiters on that channel try again now,
 * since a release between their refusal and this moment sent its notice to
 * nobody. Without this, such a notice would cost the fallback timer. That
 * attempt is not one of the retries the caller allowed. */
static void subscribed(lockcore_client *c, const redisReply *chan, uint64_t now)
{
    for (const struct lockcore__kind *const *k = lockcore__kinds; *k != NULL; k++)
        if ((*k)->subscribed != NULL)
            (*k)->subscribed(c, chan->str, chan->len, now);
    for (struct op *op = c->active; op != NULL; op = op->next) {
        if (op->kind != OP_ACQUIRE || op->phase != PH_RETRY_WAIT || !op->subscribed || op->retry_at_ms <= now)
            continue;
        struct chans ch;
        op_chans(op, &ch);
        for (unsigned k = 0; k < ch.n; k++) {
            if (ch.len[k] == chan->len && memcmp(ch.name[k], chan->str, chan->len) == 0) {
                lockcore__op_wake(op, now);
                break;
            }
        }
    }
}

/* A release named a waiter ("id", or "id@key" when the key it reserved is
 * not the queue's own: a semaphore's permit), or told the waiter behind it
 * to try when the named one's reservation ends ("id+ms"): if it is one of
 * ours, waiting on that resource, it tries now, or by then. */
static void notice(lockcore_client *c, const redisReply *chan, const redisReply *who, uint64_t now)
{
    if (who->len < LOCKCORE_ID_LEN)
        return;
    uint64_t hint = 0;
    const char *key = "";
    size_t key_len = 0;
    if (who->len > LOCKCORE_ID_LEN + 1 && who->str[LOCKCORE_ID_LEN] == '+') {
        char ms[24];
        size_t n = who->len - LOCKCORE_ID_LEN - 1;
        if (n >= sizeof(ms))
            return;
        memcpy(ms, who->str + LOCKCORE_ID_LEN + 1, n);
        ms[n] = '\0';
        hint = strtoull(ms, NULL, 10) + 1;
    } else if (who->len > LOCKCORE_ID_LEN + 1 && who->str[LOCKCORE_ID_LEN] == '@') {
        key = who->str + LOCKCORE_ID_LEN + 1;
        key_len = who->len - LOCKCORE_ID_LEN - 1;
    } else if (who->len != LOCKCORE_ID_LEN) {
        return;
    }
    /* The acquisition's id names it (and the channel, our client). */
    (void)chan;
    for (const struct lockcore__kind *const *k = lockcore__kinds; *k != NULL; k++)
        if ((*k)->notice != NULL)
            (*k)->notice(c, who->str, key, key_len, hint, now);
    for (struct op *op = c->active; op != NULL; op = op->next) {
        if (op->kind != OP_ACQUIRE || memcmp(op->qid, who->str, LOCKCORE_ID_LEN) != 0)
            continue;
        if (hint != 0) {
            /* While an attempt is in flight, its wait takes the hint. */
            if (op->phase != PH_RETRY_WAIT)
                op->hint_at = now + hint;
            else
                lockcore__op_wake(op, now + hint);
            return;
        }
        /* Named while its attempt is in flight: that attempt may still be
         * refused (it raced the release); try again at once after it. An
         * attempt that answers a release is not one of the retries the
         * caller allowed (a set named by a member it has already won
         * would otherwise spend them while its other members are held). */
        if (op->phase != PH_RETRY_WAIT)
            op->noticed = 1;
        else
            lockcore__op_wake(op, now);
        return;
    }
}

void lockcore__notify_reply(lockcore_client *c, struct node *s, redisReply *r, uint64_t now)
{
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[0]->type == REDIS_REPLY_STRING) {
        s->backoff_ms = 0;
        if (strcmp(r->element[0]->str, "message") == 0 && r->element[1]->type == REDIS_REPLY_STRING &&
            r->element[2]->type == REDIS_REPLY_STRING) {
            for (const struct lockcore__kind *const *k = lockcore__kinds; *k != NULL; k++)
                if ((*k)->message != NULL && (*k)->message(c, r->element[1]->str, r->element[1]->len,
                                                           r->element[2]->str, r->element[2]->len, now))
                    return;
            notice(c, r->element[1], r->element[2], now);
        } else if (strcmp(r->element[0]->str, "subscribe") == 0 && r->element[1]->type == REDIS_REPLY_STRING)
            subscribed(c, r->element[1], now);
        return;
    }
    if (r->type != REDIS_REPLY_ERROR)
        return;
    /* SUBSCRIBE refused (e.g. NOPERM: no rights on the channel): waiting
     * falls back to timers for good, and says why once. */
    c->notify_refused = 1;
    lockcore__fmt(c->notify_why, sizeof(c->notify_why), "%s refused SUBSCRIBE (%.160s): waiting by timers",
                  s->name, r->str);
    for (unsigned i = 0; i < c->n; i++)
        if (c->subs[i].state != NODE_DOWN)
            lockcore__node_close(c, &c->subs[i], FAIL_PROTO, c->notify_why);
}

void lockcore__notify_free(lockcore_client *c)
{
    for (size_t k = 0; k < c->n_channels; k++)
        free(c->channels[k].name);
    free(c->channels);
    c->channels = NULL;
    c->n_channels = c->cap_channels = 0;
    if (c->subs == NULL)
        return;
    for (unsigned i = 0; i < c->n; i++) {
        lockcore__tls_free(&c->subs[i]);
        if (c->subs[i].ctx != NULL)
            redisFree(c->subs[i].ctx);
        free(c->subs[i].q);
    }
    free(c->subs);
    c->subs = NULL;
}

/* Subscribers with no waiter are kept for queue_ttl_ms (a client that
 * waits on a resource usually waits again soon), then closed, channels
 * and all: a client that no longer waits keeps no connection for it. */
uint64_t lockcore__notify_next_timer(const lockcore_client *c)
{
    return c->subs != NULL && c->sub_refs == 0 ? c->subs_idle_ms + c->o.queue_ttl_ms : UINT64_MAX;
}

void lockcore__notify_check(lockcore_client *c, uint64_t now)
{
    if (c->subs != NULL && c->sub_refs == 0 && now >= c->subs_idle_ms + c->o.queue_ttl_ms)
        lockcore__notify_free(c);
}

const char *lockcore_notify_error(const lockcore_client *c)
{
    return c != NULL && c->notify_refused ? c->notify_why : NULL;
}
