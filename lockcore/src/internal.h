/* lockcore internals: nodes (one connection each), operations (one state
 * machine each), and the client that owns both. */
#ifndef LOCKCORE_INTERNAL_H
#define LOCKCORE_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include <fencing/fencing.h>
#include <lockcore/lockcore.h>

#define KEY_MAX (LOCKCORE_PREFIX_MAX + LOCKCORE_RESOURCE_MAX)
/* The last digits of a lock id: the attempt's number (op.c). */
#define LOCKCORE__ATTEMPT_DIGITS 6
#define FENCE_KEY_MAX (KEY_MAX + 16)
#define FENCE_HASH_MAX (LOCKCORE_PREFIX_MAX + 16) /* prefix "\0fence:" and 3 digits */
#define INFO_KEY_MAX (KEY_MAX + 16)
#define QUEUE_KEY_MAX (KEY_MAX + 16)
#define CHAN_MAX (QUEUE_KEY_MAX + 18) /* "{" key "}:released:" and 16 digits */
#define ERRMSG_MAX 512

/* ---- addresses ---- */
struct address {
    char host[256]; /* as given, for messages */
    char ip[64];    /* numeric, resolved once at client creation: connects never block on DNS */
    int tls;        /* rediss:// */
    int port;
    char user[128];
    char pass[256];
    int db;
};
int lockcore__parse_address(const char *s, struct address *a, char *err, size_t errcap);
int lockcore__resolve(struct address *a, char *err, size_t errcap);
/* s with any password replaced by "***", for messages. */
void lockcore__mask_address(const char *s, char *out, size_t cap);

/* ---- utilities ---- */
/* The bucket of a resource's fence (docs/fencing.md): its hash under the
 * client's key prefix (hash, FENCE_HASH_MAX + 1 bytes; *hash_len: its
 * length, which counts the NUL inside) and its field there (4 bytes). */
void lockcore__fence_bucket(const lockcore_client *c, const char *resource, size_t len, char *hash,
                            size_t *hash_len, char *field);
uint64_t lockcore__wall_us(void *arg);
int lockcore__random_bytes(void *buf, size_t n);
struct lockcore__idpool;
struct lockcore__idpool *lockcore__idpool_new(void); /* NULL: read ids directly */
void lockcore__idpool_free(struct lockcore__idpool *pool);
int lockcore__id_bytes(struct lockcore__idpool *pool, void *out, size_t n);
/* The acquisition's id of a lock id (its attempt digits zeroed): its
 * place in the nodes' queues. out has LOCKCORE_ID_LEN + 1 bytes. */
void lockcore__qid(const char *id, char *out);
/* Lowercase hex of n bytes into out (2n digits and a NUL). */
void lockcore__hex(char *out, const unsigned char *in, size_t n);
/* SHA-256 of in[0..n) into md. Returns 0 or -ENOMEM. */
int lockcore__sha256(const void *in, size_t n, unsigned char md[32]);
uint64_t lockcore__rand64(uint64_t *state);
void lockcore__fmt(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- scripts (plain Redlock steps; the fenced ones live in fencing) ---- */
enum script {
    SCRIPT_RELEASE,
    SCRIPT_EXTEND,
    SCRIPT_ACQUIRE_FENCED,
    SCRIPT_RAISE,
    SCRIPT_STATUS,
    SCRIPT_SET_INFO,
    SCRIPT_ACQUIRE_QUEUED,
    SCRIPT_DEQUEUE,
    SCRIPT_RELEASE_PLAIN,
    SCRIPT_FENCE_REPAIR,
    SCRIPT_COUNT,
};
extern const char *const lockcore__scripts[SCRIPT_COUNT];

/* ---- nodes ---- */
/* CONNECTING: TCP connect in progress; HANDSHAKE: TLS handshake (rediss://). */
enum node_state { NODE_DOWN, NODE_CONNECTING, NODE_HANDSHAKE, NODE_UP };

/* Why a node could not answer a step: decides the error code reported. */
enum fail_kind { FAIL_NET, FAIL_PROTO };

/* What a queued reply belongs to. Replies come back in the order the
 * commands went out, so a FIFO per node matches them without ids. */
enum step {
    STEP_IGNORE,  /* fire-and-forget (rollback release): reply dropped */
    STEP_INFO,    /* fire-and-forget: the holder info after an acquire */
    STEP_DEQUEUE, /* fire-and-forget: leave a waiters' queue */
    STEP_AUTH,    /* connection set-up: an error fails the node */
    STEP_SELECT,
    STEP_LOAD,   /* SCRIPT LOAD: reply is the sha of script `arg` */
    STEP_FNLOAD, /* FUNCTION LOAD of the scripts' library (arg 0), an FCALL of its ping (1) */
    STEP_LOCK,   /* operation steps: matched to op by serial */
    STEP_RAISE,
    STEP_EXTEND,
    STEP_RELEASE,
    STEP_STATUS,
};

struct op;

/* How a step went out, which its reply is read by: a script's array by
 * EVAL, EVALSHA or FCALL (a refused FCALL is sent again by EVAL), or the
 * status of plain Redlock's SET NX PX. */
enum sent_as { SENT_SCRIPT, SENT_FCALL, SENT_SET };

struct pending {
    struct op *op;
    uint64_t serial;
    uint64_t sent_ms;
    uint8_t step;
    uint8_t arg;
    uint8_t sent; /* enum sent_as */
};

struct node {
    int sub; /* 1: a subscriber connection (release notices), not commands */
    struct address addr;
    char name[280]; /* host:port, for messages */
    unsigned index;
    enum node_state state;
    redisContext *ctx;
    void *ssl;    /* SSL * for rediss:// nodes, else NULL */
    int tls_want; /* POLLIN / POLLOUT a TLS call waits for, 0 if none */
    uint64_t connect_deadline_ms;
    uint64_t next_attempt_ms;
    uint64_t backoff_ms;
    char err[256];     /* why the node last failed */
    char refused[160]; /* why the reply builders refused a reply, "" if not */
    enum fail_kind err_kind;
    /* On this connection, the scripts go by FCALL (1: the library loaded),
     * or by EVALSHA (0: not known yet; -1: refused, e.g. Redis 6 or ACL). */
    int fn;
    struct pending *q; /* ring buffer */
    size_t q_head, q_len, q_cap;
};

/* ---- operations ---- */
enum op_kind { OP_ACQUIRE, OP_EXTEND, OP_RELEASE, OP_STATUS };
enum phase { PH_LOCK, PH_RAISE, PH_RETRY_WAIT, PH_EXTEND, PH_RELEASE, PH_STATUS, PH_DONE };

/* Per-node outcome within the current phase. */
enum slot { SLOT_OPEN, SLOT_YES, SLOT_NO, SLOT_NET, SLOT_PROTO };

struct lockcore__kind;

struct op {
    struct op *next, *prev; /* active list, or free list via next */
    lockcore_client *c;
    enum op_kind kind;
    const struct lockcore__kind *type; /* the lock's kind (kinds/kind.h); NULL: a plain lock */
    enum phase phase;
    uint64_t serial; /* changes with every phase: stale replies don't match */
    lockcore_cb cb;
    void *arg;
    int rc;
    int blocking_done; /* set for blocking callers waiting on this op */
    struct lockcore_lock lock;
    char key[KEY_MAX + 1];
    size_t key_len;
    char fkey[FENCE_KEY_MAX + 1]; /* the old layout's fence key, "{" key "}:fence" */
    size_t fkey_len;
    char fhash[FENCE_HASH_MAX + 1]; /* the resource's bucket: its hash (a NUL inside) */
    size_t fhash_len;
    char fbucket[4]; /* ... and its field there */
    uint64_t ttl_ms;
    uint64_t wait_deadline_ms; /* 0 = none */
    /* The acquisition's own retry_count and wait_mode (lockcore_call);
     * the client's for every other operation. */
    int retry_count;
    int wait_mode;
    uint64_t attempt_start_ms;
    uint64_t phase_deadline_ms;
    uint64_t retry_at_ms;
    uint64_t proposal;
    uint64_t max_fence;
    unsigned raises;
    int write_back; /* the raise round ensures fences >= proposal (a reader's) */
    uint64_t phase_start_ms;
    char ikey[INFO_KEY_MAX + 1]; /* holder info key: "{" key "}:holder" */
    size_t ikey_len;
    char holder[LOCKCORE_ID_LEN + 1]; /* who holds it, from a refusal: the id most nodes named */
    int64_t holder_pttl_ms;
    unsigned holder_nodes;
    struct {
        char id[LOCKCORE_ID_LEN + 1];
        unsigned nodes;
        int64_t pttl_ms;
    } holders[4]; /* the ids refusals named, the first few */
    unsigned n_holders;
    char qkey[QUEUE_KEY_MAX + 1]; /* waiters' queue: "{" key "}:waiters" */
    size_t qkey_len;
    char qexp[QUEUE_KEY_MAX + 1]; /* their deadlines: "{" key "}:waiting" */
    size_t qexp_len;
    char wkey[QUEUE_KEY_MAX + 1]; /* set while anyone waits: "{" key "}:wanted" */
    size_t wkey_len;
    char chan[CHAN_MAX]; /* this client's release channel: "{" key "}:released:" id_prefix */
    size_t chan_len;
    uint64_t ticket;         /* place in the queue: wall µs at the first attempt */
    int queued;              /* attempts use the queued acquire (registers as a waiter) */
    unsigned free_retries;   /* attempts made only to take or refresh the place, to
                                close the subscription's race, or to see whether the
                                waiter named before it claimed its reservation: not
                                retries the caller counts */
    int free_next;           /* the next attempt is one of those */
    uint64_t hint_at;        /* a release named the waiter before it: try by then */
    int joins;               /* a re-entry of a given hold (kx.join): it polls, never queues */
    unsigned behind;         /* nodes that refused because another waiter is first */
    unsigned reserved_ahead; /* ... and that waiter holds the key: its reservation */
    int noticed;             /* a release named it while an attempt was in flight */
    uint64_t resume_at;      /* a release's wake-up moved the attempt the wait had
                                planned: it comes back after, 0 = none */
    int resume_free;         /* ... and whether that one was a free attempt */
    uint64_t counted_at_ms;  /* in line: the last refusal that counted as a retry */
    int again;               /* the next attempt goes at once (a re-entry whose hold is gone) */
    int keep_place;          /* refused, it keeps its place: its driver waits on (a permit) */
    int repair;              /* OP_STATUS that lowers the fence (lockcore_fence_repair) */
    uint64_t repair_to;      /* ... to this (0: each node's clock) */
    unsigned lowered;        /* ... on so many nodes */
    int subscribed;          /* holds a reference on the key's release channel */
    /* A leader's extension that proclaims (its value), or a
     * resignation (""): borrowed from the election's call until op ends;
     * NULL for every other operation (kinds/elect.c). */
    const char *say;
    uint8_t slot[LOCKCORE_NODES_MAX];
    uint8_t accepted[LOCKCORE_NODES_MAX];
    /* The fence value each node last reported in this attempt (fence_known
     * says which did): a second round proposes above a majority's. */
    uint64_t node_fence[LOCKCORE_NODES_MAX];
    uint8_t fence_known[LOCKCORE_NODES_MAX];
    struct lockcore_node_status *status; /* OP_STATUS: caller's array */
    char errmsg[ERRMSG_MAX];
    /* The acquisition's id: the client's prefix, random digits, and
     * LOCKCORE__ATTEMPT_DIGITS zeros. Each attempt's lock id is this with
     * the attempt's number in those digits, so that a rollback of one
     * attempt (which may reach a node late, on a connection since closed)
     * can never delete what a later attempt was granted; the acquisition's
     * id names its place in the nodes' queues and the reservation a
     * release makes for it (lockcore__qid). */
    char qid[LOCKCORE_ID_LEN + 1];
    /* The reentrant lock (reentrant.c); zeroed by lockcore__op_new. */
    struct {
        char join[LOCKCORE_ID_LEN + 1];          /* the live hold a re-entry joins; "" if none */
        char owner[LOCKCORE_ID_LEN + 1];         /* the owner the re-entering nodes named */
        uint8_t reentered[LOCKCORE_NODES_MAX];   /* node re-entered (STEP_LOCK of a join) */
        uint64_t held_token[LOCKCORE_NODES_MAX]; /* the hold's token that node keeps */
    } kx;
};

struct lockcore_client {
    struct lockcore_options o;
    char prefix[LOCKCORE_PREFIX_MAX + 1];
    size_t prefix_len;
    /* The first 16 hex digits of every lock id it makes, which name its
     * own release channels: a release tells the named waiter's client only. */
    char id_prefix[17];
    unsigned n;
    unsigned quorum;
    struct node *nodes;
    char sha[SCRIPT_COUNT][41]; /* learned from SCRIPT LOAD; "" until known */
    uint64_t serial;
    uint64_t rng;
    struct lockcore__idpool *idpool;  /* random bytes for lock ids; may be NULL */
    struct op *active;                /* doubly linked */
    struct op *done_head, *done_tail; /* ended, callbacks not yet run */
    struct op *free_ops;
    struct lockcore_keepalive *keepalives;
    size_t inflight;
    /* The largest fence value seen for a resource, in a slot of its hash
     * (the whole hash kept, so that another resource of the slot never
     * proposes from it: op.c). */
    struct {
        uint64_t hash, value;
    } fence_seen[256];
    char info[LOCKCORE_INFO_MAX + 1]; /* holder_info, "" for none */
    char *tls_strings[4];             /* copies of the tls_* file and name options */
    void *ssl_ctx;                    /* SSL_CTX *, if any node is rediss:// */
    void *bio_method;                 /* BIO_METHOD * of our MSG_NOSIGNAL socket BIO */
    size_t info_len;
    /* The callback contract (lockcore.h): in_cb counts callbacks running,
     * depth the public calls that are running the loop. A client freed
     * from a callback is freed when the outermost of those returns. */
    unsigned in_cb;
    unsigned depth;
    /* Notified waiting: one subscriber connection per node, and the release
     * channels the client's waiters want, with reference counts. */
    struct node *subs;
    struct channel *channels;
    size_t n_channels, cap_channels;
    unsigned sub_refs;     /* waiters holding a channel; 0: the subscribers are idle */
    uint64_t subs_idle_ms; /* when they became idle (closed queue_ttl_ms later) */
    int notify_refused;    /* a node refused SUBSCRIBE: waiters use timers */
    char notify_why[256];
    int free_pending;
    int freeing;    /* being freed: no new operation may start */
    int ka_walking; /* keep-alives are being walked: stop() only marks */
    char errmsg[ERRMSG_MAX];
    /* What the lock kinds keep per client (kinds/). */
    struct {
        struct lockcore__sem *sems;           /* semaphore acquisitions in flight (kinds/sem.c) */
        struct lockcore__campaign *campaigns; /* campaigns in flight (kinds/elect.c) */
        struct lockcore__observer *observers; /* observers of elections (kinds/elect.c) */
        struct lockcore__keyset *ks;          /* the keys of ks_for, kept: a keyset is ~75 KiB */
        char *ks_for;
        /* Scripts sent whole once on a node's current connection (bit per
         * script): the first use of a script on a connection is an EVAL,
         * so that no fire-and-forget command behind it runs before it. */
        const void *sent_on[LOCKCORE_NODES_MAX];
        uint32_t sent[LOCKCORE_NODES_MAX];
    } kx;
};

/* node.c */
void lockcore__node_init(lockcore_client *c, struct node *n, unsigned index);
int lockcore__node_connect(lockcore_client *c, struct node *n, uint64_t now);
void lockcore__node_close(lockcore_client *c, struct node *n, enum fail_kind kind, const char *why);
int lockcore__node_usable(lockcore_client *c, struct node *n, uint64_t now);
/* now: the caller's lockcore_now_ms(), kept as the command's send time. */
int lockcore__node_send(lockcore_client *c, struct node *n, int argc, const char **argv, const size_t *lens,
                        struct op *op, enum step step, uint8_t arg, uint64_t now);
void lockcore__node_flush(lockcore_client *c, struct node *n);
void lockcore__node_on_events(lockcore_client *c, struct node *n, short revents, uint64_t now);
void lockcore__node_check_timers(lockcore_client *c, struct node *n, uint64_t now);
uint64_t lockcore__node_next_timer(const lockcore_client *c, const struct node *n);

/* op.c */
/* v in decimal, without printf (every command of every operation). */
void lockcore__u64s(char *buf, size_t cap, uint64_t v);
/* The numbers the lock steps send, in decimal: the same for the plain lock
 * and every kind. */
struct step_nums {
    char ttl[24];  /* op->ttl_ms */
    char prop[24]; /* the fencing proposal; 0 with fencing off */
    char idle[24]; /* what a grant does with the old layout's fence key
                      (block "fence"): "-" it goes where the bucket takes
                      over; in transition mode, its idle expiry ("0" none) */
    char fexp[24]; /* the same for an extension: "-", or in transition mode
                      the old fence key's expiry, which must outlive the
                      lock: the idle expiry or twice the TTL if that is
                      longer ("0": never) */
    char tok[24];  /* the lock's token; 0 with fencing off */
    /* A waiter's: its ticket, its place's TTL, and the queued acquire's
     * mode ("2" a notified waiter's first attempt, "0" its later ones,
     * "1" fair; lockcore/lua/lib/queued.lua). */
    char ticket[24];
    char qttl[24];
    const char *mode;
    char ahead[24]; /* how far ahead of a node's clock a first-round
                       proposal may be, µs; 0: no bound */
};
void lockcore__step_nums(const struct op *op, struct step_nums *n);
/* Above this a fence value is far ahead of this client's clock (more than
 * proposal_ahead_max_ms; with none, UINT64_MAX, or 5 s if bounded): no
 * first-round proposal of a client with a right clock made it. */
uint64_t lockcore__far_from(const lockcore_client *c, int bounded);
/* The fence values the nodes reported in this attempt, smallest first,
 * into v (LOCKCORE_NODES_MAX); how many. */
unsigned lockcore__known_fences(const struct op *op, uint64_t *v);
/* What a release step does, SCRIPT_RELEASE's ARGV[2]: "r" a rollback, ""
 * a polling client's release, or the ms a notified or fair release keeps
 * the lock for the waiter it names. */
void lockcore__release_arg(const struct op *op, enum step step, char *buf, size_t cap);
/* What a release (or a waiter's leaving) does, for an operation whose own
 * wait mode is wait_mode (the release's part of the above). */
void lockcore__release_mode(const lockcore_client *c, int wait_mode, char *buf, size_t cap);
/* The queued acquire of a waiter for node i (SCRIPT_ACQUIRE_QUEUED): the
 * key set to value; with holds (a reentrant lock's), its first hold is the
 * attempt's lock id. */
int lockcore__queued_lock(struct op *op, unsigned i, const char *value, const char *holds, int use_eval,
                          uint64_t now);
struct op *lockcore__op_new(lockcore_client *c, enum op_kind kind, lockcore_cb cb, void *arg);
void lockcore__op_start(struct op *op, uint64_t now);
/* how: the way the step went out (enum sent_as). */
void lockcore__op_reply(struct op *op, unsigned node, enum step step, enum sent_as how, redisReply *r,
                        uint64_t now);
void lockcore__op_node_failed(struct op *op, unsigned node, enum fail_kind kind, const char *why,
                              uint64_t now);
void lockcore__op_check_timers(struct op *op, uint64_t now);
uint64_t lockcore__op_next_timer(const struct op *op);
void lockcore__op_cancel(struct op *op);
void lockcore__op_abort(struct op *op, int rc, const char *why);
int lockcore__op_resend(struct op *op, unsigned node, enum step step, int use_eval, uint64_t now);
void lockcore__ops_free(lockcore_client *c);

/* tls.c: 0 / 1 done / -1 failed (err says why); reads and writes return the
 * bytes moved, 0 when they must wait for n->tls_want, -1 on failure. */
int lockcore__tls_ctx_new(lockcore_client *c, char *err, size_t cap);
void lockcore__tls_ctx_free(lockcore_client *c);
int lockcore__tls_start(lockcore_client *c, struct node *n, char *err, size_t cap);
int lockcore__tls_handshake(struct node *n, char *err, size_t cap);
ssize_t lockcore__tls_write(struct node *n, const void *buf, size_t len, char *err, size_t cap);
ssize_t lockcore__tls_read(struct node *n, void *buf, size_t len, char *err, size_t cap);
int lockcore__tls_pending(const struct node *n);
void lockcore__tls_free(struct node *n);

/* notify.c */
struct channel {
    char *name;
    size_t len;
    unsigned refs;
};
int lockcore__notify_want(lockcore_client *c, struct op *op);
void lockcore__notify_drop(lockcore_client *c, struct op *op);
/* The same for a waiter that is not an operation (a semaphore's driver):
 * n channels, one reference on each, and one waiter in the count. */
int lockcore__notify_want_names(lockcore_client *c, char (*names)[CHAN_MAX], const size_t *lens, unsigned n);
void lockcore__notify_drop_names(lockcore_client *c, char (*names)[CHAN_MAX], const size_t *lens, unsigned n);
void lockcore__notify_setup(lockcore_client *c, struct node *sub, uint64_t now);
void lockcore__notify_reply(lockcore_client *c, struct node *sub, redisReply *r, uint64_t now);
void lockcore__notify_free(lockcore_client *c);
/* Idle subscribers (no waiter for queue_ttl_ms) are closed: the timer. */
uint64_t lockcore__notify_next_timer(const lockcore_client *c);
void lockcore__notify_check(lockcore_client *c, uint64_t now);

/* keepalive.c */
uint64_t lockcore__keepalive_next_timer(const lockcore_client *c);
void lockcore__keepalive_check(lockcore_client *c, uint64_t now);
void lockcore__keepalives_detach(lockcore_client *c);

/* The lock kinds are called only through their tables (kinds/kind.h). */

/* client.c */
/* Fill the resource, the lock key and the keys and channel beside it. */
void lockcore__op_set_keys(struct op *op, const char *resource);
/* The fence's keys of the op's resource (fkey, fhash, fbucket), made on
 * first use: every step that sends them calls this first. */
void lockcore__op_fence_keys(struct op *op);
/* Point op's waiters' queue keys and release channel at those of key. */
void lockcore__op_set_queue(struct op *op, const char *key, size_t key_len);
/* The longest TTL (a lock that needs longer is extended) and wait. */
#define LOCKCORE__TTL_MAX_MS (24ULL * 3600 * 1000)
#define LOCKCORE__WAIT_MAX_MS (365ULL * 24 * 3600 * 1000)

/* A checked lockcore_call: one acquisition's options. */
struct lockcore__call {
    uint64_t ttl_ms, wait_ms;
    int retry_count, wait_mode;
    char tag[LOCKCORE_OWNER_TAG_LEN + 1]; /* the owner's tag; "" for none */
};
/* Check call (NULL: the client's options) into *out. Returns 0 or -EINVAL
 * with c->errmsg set. */
int lockcore__call_check(lockcore_client *c, const struct lockcore_call *call, struct lockcore__call *out);
/* A new acquisition of resource (already checked), not started: its keys,
 * its lock id (the client's prefix, the owner's tag if any and fresh
 * random bits; a re-entry's hold to join is id), TTL, retries, wait mode
 * and ticket from k. NULL with *rcp and c->errmsg set (cb NULL, no
 * randomness, no memory). */
struct op *lockcore__acquire_op(lockcore_client *c, const char *resource, const char *id,
                                const struct lockcore__call *k, lockcore_cb cb, void *arg, int *rcp);
/* An acquisition's id (qid) into out (LOCKCORE_ID_LEN + 1 bytes): the
 * client's prefix, the tag or random digits, random digits, zeroed
 * attempt digits. Returns 0 or the -errno of the randomness. */
int lockcore__new_qid(lockcore_client *c, const char *tag, char *out);
/* An extension (ttl_ms 0: the lock's, else the client's) or a release of
 * lock, checked and made, not started: the caller may set fields, then
 * lockcore__op_start. NULL with *rcp and c->errmsg set. */
struct op *lockcore__op_for_lock(lockcore_client *c, enum op_kind kind, const struct lockcore_lock *lock,
                                 uint64_t ttl_ms, lockcore_cb cb, void *arg, int *rcp);
void lockcore__op_finish(struct op *op, int rc);
int lockcore__deliver(lockcore_client *c);
int lockcore__flush_deliver(lockcore_client *c);
/* A release woke a waiting acquisition: it tries at `at`, an attempt not
 * counted, and the attempt its wait had planned still comes after it. */
void lockcore__op_wake(struct op *op, uint64_t at);
/* Argument checks shared by the operations and the keep-alives; they set
 * c->errmsg and return -EINVAL. ttl_ms 0 passes (the default TTL). */
int lockcore__check_lock(lockcore_client *c, const struct lockcore_lock *lock);
int lockcore__check_ttl(lockcore_client *c, uint64_t ttl_ms, const char *what);
/* The blocking calls' loop, for kinds.c: enter/leave bracket it as in
 * every blocking call (leave returns 1 if the client was freed). */
int lockcore__enter(lockcore_client *c, const char *what);
int lockcore__leave(lockcore_client *c);
int lockcore__run_once(lockcore_client *c, int timeout_ms);
/* Run a user callback under the callback contract. */
void lockcore__call(lockcore_client *c, lockcore_cb cb, int rc, const struct lockcore_lock *lock, void *arg);

#endif
