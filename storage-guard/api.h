/*
 * The mapping from an HTTP request to an HTTP response, without sockets:
 * routing, validation of keys, tokens and bodies, and the JSON answers.
 * http.c feeds it what libmicrohttpd parsed; the unit tests feed it structs.
 *
 * Two steps: sg_api_parse() turns a request into a validated sg_op or an
 * error response (pure: no store, no clock); sg_api_execute() runs an op
 * against a store and builds the answer.
 */
#ifndef SG_API_H
#define SG_API_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* Keys and resources: 1..SG_API_NAME_MAX bytes after URL decoding. */
#define SG_API_NAME_MAX 1024
/* Default and largest page of GET /v1/log. */
#define SG_API_LOG_LIMIT_DEFAULT 100
#define SG_API_LOG_LIMIT_MAX 1000
/* Most operations in one POST /v1/batch. */
#define SG_API_BATCH_OPS_MAX 100

/* One query argument as received: still percent-encoded ('+' may already be
 * a space). Borrowed. */
struct sg_arg {
    const char *name;
    const char *value; /* NULL for "?name" without '=' */
};

/* A request; every pointer is borrowed for the call. */
struct sg_request {
    const char *method;
    const char *path; /* still percent-encoded, without the query */
    const struct sg_arg *args;
    size_t n_args;
    const char *token_header;  /* the Fencing-Token header, NULL if absent */
    const char *if_match;      /* the If-Match header, NULL if absent */
    const char *if_none_match; /* the If-None-Match header, NULL if absent */
    const char *body;
    size_t body_len;
    int body_too_large; /* the body went over the limit and was dropped */
    int unfenced;       /* the server runs unfenced: a write needs no token */
    /* Refuse tokens (microsecond timestamps) more than this far past the
     * server's clock; 0: no bound. */
    int64_t max_token_ahead_ms;
    int auth_enabled; /* the server runs with --auth-file */
    int admin;        /* the client is an operator (an admin entry) */
};

/* An answer. body is malloc'ed and owned by the struct; content_type and
 * allow are static strings. */
struct sg_response {
    int status;
    char *body;
    size_t body_len;
    const char *content_type;
    const char *allow; /* the Allow header of a 405, else NULL */
    char etag[32];     /* the ETag header ("\"3\""), empty if none */
};

/* Free the body and zero the struct. Accepts NULL. */
void sg_response_clear(struct sg_response *r);

enum sg_route {
    SG_ROUTE_PUT_RECORD = 1,
    SG_ROUTE_GET_RECORD,
    SG_ROUTE_GET_FENCE,
    SG_ROUTE_GET_LOG,
    SG_ROUTE_HEALTH,
    SG_ROUTE_METRICS,
    SG_ROUTE_DELETE_RECORD,
    SG_ROUTE_BATCH,
    SG_ROUTE_RESET_FENCE,
};

/* A validated request. Every pointer is malloc'ed and owned: sg_op_clear. */
struct sg_op {
    enum sg_route route;
    char *key; /* decoded; record routes and the log's key filter */
    size_t key_len;
    char *resource; /* decoded; defaults to the key for record routes */
    size_t resource_len;
    uint64_t token; /* 0: none (a plain read) */
    int no_raise;   /* GET with ?raise=0: a reader's read, the fence stays */
    char *value;    /* compact JSON text of the PUT's value */
    size_t value_len;
    int64_t after; /* GET /v1/log */
    int limit;
    int has_key_filter, has_resource_filter;
    int64_t expect;       /* PUT and DELETE: the precondition (SG_EXPECT_NONE if none) */
    int64_t max_ahead_ms; /* from the request: 0 or the bound on the token */
    /* POST /v1/batch: every key, resource and value is malloc'ed and owned. */
    struct sg_store_op *ops;
    size_t n_ops;
};

void sg_op_clear(struct sg_op *op);

/*
 * Validate a request. Returns 0 with *op filled (caller clears it), or the
 * HTTP status of the error (4xx) with *resp filled (caller clears it); -ENOMEM
 * if memory ran out (then *resp holds a 500 if it could be built).
 */
int sg_api_parse(const struct sg_request *req, struct sg_op *op, struct sg_response *resp);

/* Whether an op needs a store connection (only metrics does not). */
int sg_api_needs_store(const struct sg_op *op);

/*
 * Run op against store (borrowed; NULL only when !sg_api_needs_store(op)),
 * with now_ms as the wall-clock time written to records and the log. Always
 * fills *resp (caller clears it) and counts the outcome in the metrics.
 */
void sg_api_execute(sg_store *store, const struct sg_op *op, int64_t now_ms, struct sg_response *resp);

/* Parse then execute: what one HTTP request does. */
void sg_api_handle(sg_store *store, const struct sg_request *req, int64_t now_ms, struct sg_response *resp);

/* Fill *resp with a JSON error {"error": code, "message": ...}. Returns status. */
int sg_api_error(struct sg_response *resp, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * Decode percent-encoding of [s, s+len) into a new buffer (*out, *out_len;
 * NUL-terminated, caller frees). Returns 0, -EINVAL for a bad escape or a
 * decoded NUL byte, -ENOMEM.
 */
int sg_api_decode(const char *s, size_t len, char **out, size_t *out_len);

/*
 * Parse a token given as decimal text (a header or a query argument):
 * digits only, no sign or spaces. Returns 0, -EINVAL (not a non-negative
 * 64-bit integer) or -ERANGE (>= 2^53).
 */
int sg_api_parse_token(const char *s, uint64_t *out);

#endif
