/*
 * The mapping from an HTTP request of fencelockd to a lock operation, and
 * from its outcome to a JSON answer, without sockets or nodes: routes,
 * validation of resources, lock ids, kinds and bodies. The unit tests feed
 * it requests; engine.c runs what it parsed.
 */
#ifndef FLD_API_H
#define FLD_API_H

#include <stddef.h>
#include <stdint.h>

#include <fencehttp/fencehttp.h>
#include <lockcore/lockcore.h>

enum fld_route {
    FLD_ROUTE_ACQUIRE = 1,
    FLD_ROUTE_EXTEND,
    FLD_ROUTE_RELEASE,
    FLD_ROUTE_STATUS,
    FLD_ROUTE_HEALTH,
    FLD_ROUTE_METRICS,
    /* Elections (/v1/elections): campaign, proclaim, resign, read or
     * observe the leader; a leader's extension is FLD_ROUTE_EXTEND of
     * kind FLD_KIND_LEADER. */
    FLD_ROUTE_CAMPAIGN,
    FLD_ROUTE_PROCLAIM,
    FLD_ROUTE_RESIGN,
    FLD_ROUTE_LEADER,
    FLD_ROUTE_COUNT,
};

/* A lock's kind, as the API names it. */
enum fld_kind {
    FLD_KIND_PLAIN = 0,
    FLD_KIND_PERMIT,    /* one permit of a semaphore (acquire: "semaphore") */
    FLD_KIND_MULTI,     /* several resources at once */
    FLD_KIND_REENTRANT, /* holds of one owner */
    FLD_KIND_READ,      /* the read side of a read-write lock */
    FLD_KIND_WRITE,     /* its write side */
    FLD_KIND_LEADER,    /* an election's leader */
    FLD_KIND_COUNT,
};

/* The client names of an auth file by owner tag (fld_owners_new). */
struct fld_owners;

/* The API's name of a kind ("plain", "permit", ...). */
const char *fld_kind_name(enum fld_kind k);

/* The lockcore_lock flag of a kind (0 for plain). */
unsigned fld_kind_flag(enum fld_kind k);

/* Limits the server was started with, that parsing checks. */
struct fld_limits {
    uint64_t default_ttl_ms; /* a request without ttl_ms */
    uint64_t max_ttl_ms;     /* largest ttl_ms accepted */
    uint64_t max_wait_ms;    /* largest wait_ms accepted (a long poll) */
};

/* A validated request; every string is a copy inside the struct. */
struct fld_op {
    enum fld_route route;
    enum fld_kind kind;
    /* The resource (a multi-resource lock: its names joined by '\n'). */
    char resource[LOCKCORE_RESOURCE_MAX + 1];
    char *names[LOCKCORE_MULTI_MAX]; /* multi: pointers into names_buf */
    size_t n_names;
    char names_buf[LOCKCORE_RESOURCE_MAX + 1];
    char lock_id[LOCKCORE_ID_LEN + 1]; /* extend, release; a re-entry's hold */
    uint64_t ttl_ms;                   /* acquire, extend */
    uint64_t wait_ms;                  /* acquire: 0 = one attempt */
    int wait_mode;                     /* enum lockcore_wait_mode */
    unsigned permits;                  /* semaphore acquire and status */
    int status_kind;                   /* status: 0 plain, 'r' rw, 'e' reentrant, 's' semaphore */
    /* Elections: the value a campaign or proclamation gives; a reading's
     * "after" (observe: answer when the leader's epoch differs from
     * after_epoch, 0 none, or with after_value its value does). */
    char value[LOCKCORE_VALUE_MAX + 1];
    int has_after, has_after_value;
    uint64_t after_epoch;
    char after_value[LOCKCORE_VALUE_MAX + 1];
};

/* Copy src into dst: a multi-resource lock's names point into the op's
 * own names_buf, so a plain struct copy would point into src. */
void fld_op_copy(struct fld_op *dst, const struct fld_op *src);

/* What the handler is given: every pointer borrowed. */
struct fld_request {
    const char *method;
    const char *path; /* percent-encoded */
    const struct fencehttp_arg *args;
    size_t n_args;
    const char *body;
    size_t body_len;
    int body_too_large;
};

/*
 * Validate a request. Returns 0 with *op filled, or the HTTP status of the
 * error (4xx) with *resp filled (caller clears it).
 */
int fld_api_parse(const struct fld_request *req, const struct fld_limits *lim, struct fld_op *op,
                  struct fencehttp_response *resp);

/* Whether s is a lock id: LOCKCORE_ID_LEN lowercase hex digits. */
int fld_api_is_lock_id(const char *s);

/* Fill *resp with status and the JSON of obj (stolen; NULL: a 500). */
void fld_api_json(struct fencehttp_response *resp, int status, void *obj);

/*
 * The answer to a granted acquisition, an extension or a release
 * (rc 0), or to its failure (rc a lockcore code), for op and the lock the
 * callback got. A refused acquisition's answer names the holder when
 * status (may be NULL) has a view of the nodes (n entries).
 */
void fld_api_result(const struct fld_op *op, int rc, const struct lockcore_lock *lock, const char *errmsg,
                    const struct lockcore_node_status *status, int n, const struct fld_owners *owners,
                    struct fencehttp_response *resp);

/* The answer to GET /v1/locks/{resource}: n node views, or with permits
 * the permits' views (ps, np). rc: what lockcore returned. A holder is
 * shown by its client's name (from owners, may be NULL) and its ref
 * (fld_api_ref), never by the id that would release it. */
void fld_api_status(const struct fld_op *op, int rc, const struct lockcore_node_status *st, int n,
                    const struct lockcore_permit_status *ps, int np, unsigned quorum, const char *errmsg,
                    const struct fld_owners *owners, struct fencehttp_response *resp);

/* The answer to an election's reading (FLD_ROUTE_LEADER): rc what
 * lockcore_observe gave for l; changed whether it differs from the
 * request's after. */
void fld_api_leader(const struct fld_op *op, int rc, const struct lockcore_leader *l, int changed,
                    const struct fld_owners *owners, struct fencehttp_response *resp);

/* Whether reading l differs from op's after (always, without one). */
int fld_api_leader_changed(const struct fld_op *op, const struct lockcore_leader *l);

/* The HTTP status and error code of a lockcore failure. */
int fld_api_http_status(int rc, const char **code);

/*
 * Whether client (NULL: no auth file, anyone) may run op: its read-only
 * and resource rules (fencehttp_client_allows), and for an extension, a
 * release or a re-entry, that the lock id is one of its own acquisitions
 * (lockcore_id_owned_by its name). Returns 0, or 403 with *resp filled
 * ("forbidden").
 */
int fld_api_authorize(const struct fld_op *op, const struct fencehttp_client *client,
                      struct fencehttp_response *resp);

/* The non-secret form of a lock id that answers show: the first 16 hex
 * digits of the SHA-256 of its acquisition's id (the id with its last 6
 * digits, the attempt's number, as '0'), into out (17 bytes; "" for a bad
 * id). Every attempt of an acquisition, and a reentrant lock's owner and
 * its first hold, have one ref. */
void fld_api_ref(const char *id, char out[17]);

/* The client names of an auth file by their owner tags, to name a
 * holder from its lock id. Read-only once made: any thread may look up. */

/* Make the table of a's clients (NULL: an empty table). Fails with -EINVAL
 * (errbuf names both) when two different names share a tag: one of them
 * must be renamed. Returns 0, -EINVAL or -ENOMEM. */
int fld_owners_new(const fencehttp_auth *a, struct fld_owners **out, char *errbuf, size_t errcap);
void fld_owners_free(struct fld_owners *o);

/* The client whose acquisition id is (borrowed from o), or NULL. */
const char *fld_owners_name(const struct fld_owners *o, const char *id);

#endif
