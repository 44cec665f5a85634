/*
 * Request validation and JSON answers of fencelockd. Nothing here touches a
 * socket or a node.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "api.h"

static const char *const kind_names[FLD_KIND_COUNT] = {
    [FLD_KIND_PLAIN] = "plain",         [FLD_KIND_PERMIT] = "permit", [FLD_KIND_MULTI] = "multi",
    [FLD_KIND_REENTRANT] = "reentrant", [FLD_KIND_READ] = "read",     [FLD_KIND_WRITE] = "write",
    [FLD_KIND_LEADER] = "leader",
};

const char *fld_kind_name(enum fld_kind k)
{
    return (int)k >= 0 && k < FLD_KIND_COUNT ? kind_names[k] : "plain";
}

unsigned fld_kind_flag(enum fld_kind k)
{
    switch (k) {
    case FLD_KIND_PERMIT:
        return LOCKCORE_LOCK_PERMIT;
    case FLD_KIND_MULTI:
        return LOCKCORE_LOCK_MULTI;
    case FLD_KIND_REENTRANT:
        return LOCKCORE_LOCK_REENTRANT;
    case FLD_KIND_READ:
        return LOCKCORE_LOCK_READ;
    case FLD_KIND_WRITE:
        return LOCKCORE_LOCK_WRITE;
    case FLD_KIND_LEADER:
        return LOCKCORE_LOCK_LEADER;
    default:
        return 0;
    }
}

void fld_op_copy(struct fld_op *dst, const struct fld_op *src)
{
    memcpy(dst, src, sizeof(*dst));
    for (size_t i = 0; i < src->n_names; i++)
        dst->names[i] = dst->names_buf + (src->names[i] - src->names_buf);
}

int fld_api_is_lock_id(const char *s)
{
    if (s == NULL || strlen(s) != LOCKCORE_ID_LEN)
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

void fld_api_json(struct fencehttp_response *resp, int status, void *obj)
{
    char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (text == NULL) {
        fencehttp_error(resp, 500, "internal", "out of memory");
        return;
    }
    fencehttp_response_clear(resp);
    resp->status = status;
    resp->content_type = "application/json";
    resp->body = text;
    resp->body_len = strlen(text);
}

/* ---- parsing ---- */

/* Whether s[0..n) is UTF-8 (what JSON strings are made of). */
static int utf8(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        unsigned c = *p++;
        int more = c < 0x80             ? 0
                   : (c & 0xe0) == 0xc0 ? 1
                   : (c & 0xf0) == 0xe0 ? 2
                   : (c & 0xf8) == 0xf0 ? 3
                                        : -1;
        if (more < 0 || (more == 1 && c < 0xc2) || end - p < more)
            return 0;
        unsigned cp = c & (0x3f >> more);
        for (int k = 0; k < more; k++, p++) {
            if ((*p & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (*p & 0x3f);
        }
        if ((more == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (more == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return 0;
    }
    return 1;
}

/* Decode one path segment into out (cap bytes, NUL-terminated): 1..max
 * bytes, no NUL. */
static int segment(const char *s, size_t len, char *out, size_t max, const char *what,
                   struct fencehttp_response *resp)
{
    char *d = NULL;
    size_t n = 0;
    int rc = fencehttp_decode(s, len, &d, &n);
    if (rc == -ENOMEM)
        return fencehttp_error(resp, 500, "internal", "out of memory");
    if (rc != 0) {
        return fencehttp_error(resp, 400, what[0] == 'r' ? "bad_resource" : "bad_lock_id",
                               "the %s has a bad percent-escape or a NUL byte", what);
    }
    if (n == 0 || n > max) {
        free(d);
        return fencehttp_error(resp, 400, what[0] == 'r' ? "bad_resource" : "bad_lock_id",
                               "the %s must be 1..%zu bytes, not %zu", what, max, n);
    }
    /* Every answer names the resource in JSON: refused before anything
     * is locked under a name no answer could carry. */
    if (!utf8(d, n)) {
        free(d);
        return fencehttp_error(resp, 400, what[0] == 'r' ? "bad_resource" : "bad_lock_id",
                               "the %s must be UTF-8 over HTTP", what);
    }
    memcpy(out, d, n + 1);
    free(d);
    return 0;
}

static int parse_kind_arg(const char *v, enum fld_kind *k)
{
    for (int i = 0; i < FLD_KIND_COUNT; i++) {
        if (strcmp(v, kind_names[i]) == 0) {
            *k = (enum fld_kind)i;
            return 0;
        }
    }
    return -EINVAL;
}

/* Query arguments: kind= (extend, release, status) and permits= (status). */
static int parse_args(const struct fld_request *req, struct fld_op *op, struct fencehttp_response *resp)
{
    for (size_t i = 0; i < req->n_args; i++) {
        const char *name = req->args[i].name, *v = req->args[i].value ? req->args[i].value : "";
        long long n;
        if (strcmp(name, "kind") == 0) {
            if (op->route == FLD_ROUTE_STATUS) {
                if (strcmp(v, "plain") == 0)
                    op->status_kind = 0;
                else if (strcmp(v, "rw") == 0 || strcmp(v, "read") == 0 || strcmp(v, "write") == 0)
                    op->status_kind = 'r';
                else if (strcmp(v, "reentrant") == 0)
                    op->status_kind = 'e';
                else if (strcmp(v, "semaphore") == 0)
                    op->status_kind = 's';
                else
                    return fencehttp_error(resp, 400, "bad_kind",
                                           "kind must be plain, rw, reentrant or semaphore for a status");
            } else if (parse_kind_arg(v, &op->kind) != 0) {
                return fencehttp_error(resp, 400, "bad_kind",
                                       "kind must be plain, permit, multi, reentrant, read or write");
            }
        } else if (strcmp(name, "permits") == 0 && op->route == FLD_ROUTE_STATUS) {
            if (fencehttp_parse_num(v, 1, LOCKCORE_PERMITS_MAX, &n) != 0)
                return fencehttp_error(resp, 400, "bad_permits", "permits must be 1..%d",
                                       LOCKCORE_PERMITS_MAX);
            op->permits = (unsigned)n;
        } else {
            return fencehttp_error(resp, 400, "bad_parameter", "unknown query parameter '%.64s'", name);
        }
    }
    if (op->route == FLD_ROUTE_STATUS && (op->status_kind == 's') != (op->permits > 0))
        return fencehttp_error(resp, 400, "bad_permits",
                               "a semaphore's status needs kind=semaphore and permits=N");
    if (op->kind == FLD_KIND_MULTI)
        return 0;
    return 0;
}

/* Split a multi-resource lock's resource (names joined by '\n'). */
static int split_names(struct fld_op *op, struct fencehttp_response *resp)
{
    memcpy(op->names_buf, op->resource, sizeof(op->names_buf));
    op->n_names = 0;
    char *save = NULL;
    for (char *p = op->names_buf;; p = NULL) {
        char *t = strtok_r(p, "\n", &save);
        if (t == NULL)
            break;
        if (op->n_names == LOCKCORE_MULTI_MAX)
            return fencehttp_error(resp, 400, "bad_resource", "at most %d resources at once",
                                   LOCKCORE_MULTI_MAX);
        op->names[op->n_names++] = t;
    }
    if (op->n_names == 0)
        return fencehttp_error(resp, 400, "bad_resource", "no resource");
    return 0;
}

static int body_error(struct fencehttp_response *resp, const char *fmt, const char *what)
{
    return fencehttp_error(resp, 400, "bad_body", fmt, what);
}

static int get_uint(json_t *v, const char *name, uint64_t min, uint64_t max, uint64_t *out,
                    struct fencehttp_response *resp)
{
    if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)min ||
        (uint64_t)json_integer_value(v) > max)
        return fencehttp_error(resp, 400, "bad_body", "%s must be an integer in %llu..%llu", name,
                               (unsigned long long)min, (unsigned long long)max);
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* The body of an acquisition: every field optional, none unknown. */
static int parse_acquire_body(const struct fld_request *req, const struct fld_limits *lim, struct fld_op *op,
                              int with_resource, struct fencehttp_response *resp)
{
    op->ttl_ms = lim->default_ttl_ms;
    op->wait_mode = LOCKCORE_WAIT_NOTIFY;
    if (req->body_too_large)
        return fencehttp_error(resp, 413, "body_too_large", "the body is over the limit");
    if (req->body_len == 0) {
        if (!with_resource)
            return body_error(resp, "%s", "POST /v1/locks needs a body with \"resources\"");
        return 0;
    }
    json_error_t jerr;
    json_t *o = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (o == NULL)
        return fencehttp_error(resp, 400, "bad_json", "the body is not JSON: %s", jerr.text);
    int rc = 0;
    const char *kind = NULL;
    json_t *resources = NULL;
    if (!json_is_object(o)) {
        rc = body_error(resp, "%s", "the body must be a JSON object");
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        uint64_t n = 0;
        if (strcmp(key, "ttl_ms") == 0) {
            if ((rc = get_uint(v, "ttl_ms", 1, lim->max_ttl_ms, &op->ttl_ms, resp)) != 0)
                goto out;
        } else if (strcmp(key, "wait_ms") == 0) {
            if ((rc = get_uint(v, "wait_ms", 0, lim->max_wait_ms, &op->wait_ms, resp)) != 0)
                goto out;
        } else if (strcmp(key, "permits") == 0) {
            if ((rc = get_uint(v, "permits", 1, LOCKCORE_PERMITS_MAX, &n, resp)) != 0)
                goto out;
            op->permits = (unsigned)n;
        } else if (strcmp(key, "wait") == 0) {
            const char *w = json_string_value(v);
            if (w != NULL && strcmp(w, "notify") == 0)
                op->wait_mode = LOCKCORE_WAIT_NOTIFY;
            else if (w != NULL && strcmp(w, "fair") == 0)
                op->wait_mode = LOCKCORE_WAIT_FAIR;
            else if (w != NULL && strcmp(w, "poll") == 0)
                op->wait_mode = LOCKCORE_WAIT_POLL;
            else {
                rc = body_error(resp, "%s", "wait must be \"notify\", \"fair\" or \"poll\"");
                goto out;
            }
        } else if (strcmp(key, "kind") == 0) {
            if ((kind = json_string_value(v)) == NULL) {
                rc = body_error(resp, "%s", "kind must be a string");
                goto out;
            }
        } else if (strcmp(key, "lock_id") == 0) {
            const char *id = json_string_value(v);
            if (!fld_api_is_lock_id(id)) {
                rc = fencehttp_error(resp, 400, "bad_lock_id", "lock_id must be %d lowercase hex digits",
                                     LOCKCORE_ID_LEN);
                goto out;
            }
            memcpy(op->lock_id, id, LOCKCORE_ID_LEN + 1);
        } else if (strcmp(key, "resources") == 0) {
            resources = v;
        } else {
            rc = fencehttp_error(resp, 400, "bad_body", "unknown field '%.64s'", key);
            goto out;
        }
    }
    if (kind == NULL || strcmp(kind, "plain") == 0)
        op->kind = resources ? FLD_KIND_MULTI : FLD_KIND_PLAIN;
    else if (strcmp(kind, "semaphore") == 0)
        op->kind = FLD_KIND_PERMIT;
    else if (strcmp(kind, "multi") == 0)
        op->kind = FLD_KIND_MULTI;
    else if (strcmp(kind, "reentrant") == 0)
        op->kind = FLD_KIND_REENTRANT;
    else if (strcmp(kind, "read") == 0)
        op->kind = FLD_KIND_READ;
    else if (strcmp(kind, "write") == 0)
        op->kind = FLD_KIND_WRITE;
    else {
        rc = fencehttp_error(resp, 400, "bad_kind",
                             "kind must be plain, semaphore, multi, reentrant, read or write");
        goto out;
    }
    if ((op->kind == FLD_KIND_PERMIT) != (op->permits > 0)) {
        rc = fencehttp_error(resp, 400, "bad_permits", "a semaphore needs \"permits\", and only a semaphore");
        goto out;
    }
    if (op->lock_id[0] != '\0' && op->kind != FLD_KIND_REENTRANT) {
        rc = fencehttp_error(resp, 400, "bad_lock_id", "only a reentrant acquisition names a lock_id");
        goto out;
    }
    if (op->kind == FLD_KIND_MULTI) {
        if (with_resource || !json_is_array(resources) || json_array_size(resources) == 0 ||
            json_array_size(resources) > LOCKCORE_MULTI_MAX) {
            rc = fencehttp_error(resp, 400, "bad_resource",
                                 "several resources go to POST /v1/locks as \"resources\": 1..%d names",
                                 LOCKCORE_MULTI_MAX);
            goto out;
        }
        size_t len = 0, i;
        json_t *name;
        op->resource[0] = '\0';
        json_array_foreach(resources, i, name)
        {
            const char *s = json_string_value(name);
            size_t n = s ? json_string_length(name) : 0;
            if (s == NULL || n == 0 || strlen(s) != n || strchr(s, '\n') != NULL ||
                len + n + (i > 0) > LOCKCORE_RESOURCE_MAX) {
                rc = fencehttp_error(resp, 400, "bad_resource",
                                     "each resource is a non-empty string without NUL or newline, "
                                     "%d bytes in all at most",
                                     LOCKCORE_RESOURCE_MAX);
                goto out;
            }
            if (i > 0)
                op->resource[len++] = '\n';
            memcpy(op->resource + len, s, n + 1);
            len += n;
        }
        rc = split_names(op, resp);
    } else if (!with_resource || resources != NULL) {
        rc = fencehttp_error(resp, 400, "bad_resource",
                             "one resource goes in the path: POST /v1/locks/{resource}; several in "
                             "\"resources\" to POST /v1/locks");
    }
out:
    json_decref(o);
    return rc;
}

static int method_not_allowed(struct fencehttp_response *resp, const char *allow)
{
    fencehttp_error(resp, 405, "method_not_allowed", "allowed: %s", allow);
    resp->allow = allow;
    return 405;
}

/* A value (a campaign's, a proclamation's): a string of at most
 * LOCKCORE_VALUE_MAX bytes without NUL. */
static int get_value(json_t *v, const char *name, char *out, struct fencehttp_response *resp)
{
    const char *s = json_string_value(v);
    size_t n = s ? json_string_length(v) : 0;
    if (s == NULL || n > LOCKCORE_VALUE_MAX || strlen(s) != n)
        return fencehttp_error(resp, 400, "bad_body", "%s must be a string of at most %d bytes without NUL",
                               name, LOCKCORE_VALUE_MAX);
    memcpy(out, s, n + 1);
    return 0;
}

/* The body of a campaign (value, ttl_ms, wait_ms) or a proclamation
 * (value, ttl_ms): every field optional, none unknown. */
static int parse_election_body(const struct fld_request *req, const struct fld_limits *lim, struct fld_op *op,
                               struct fencehttp_response *resp)
{
    if (req->body_too_large)
        return fencehttp_error(resp, 413, "body_too_large", "the body is over the limit");
    if (req->body_len == 0)
        return 0;
    json_error_t jerr;
    json_t *o = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (o == NULL)
        return fencehttp_error(resp, 400, "bad_json", "the body is not JSON: %s", jerr.text);
    int rc = json_is_object(o) ? 0 : body_error(resp, "%s", "the body must be a JSON object");
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        if (rc != 0)
            break;
        if (strcmp(key, "value") == 0 && op->route != FLD_ROUTE_EXTEND)
            rc = get_value(v, "value", op->value, resp);
        else if (strcmp(key, "ttl_ms") == 0)
            rc = get_uint(v, "ttl_ms", 1, lim->max_ttl_ms, &op->ttl_ms, resp);
        else if (strcmp(key, "wait_ms") == 0 && op->route == FLD_ROUTE_CAMPAIGN)
            rc = get_uint(v, "wait_ms", 0, lim->max_wait_ms, &op->wait_ms, resp);
        else
            rc = fencehttp_error(resp, 400, "bad_body", "unknown field '%.64s'", key);
    }
    json_decref(o);
    return rc;
}

/* A reading's query: after=EPOCH, value=V (with after), wait_ms=N. */
static int parse_leader_args(const struct fld_request *req, const struct fld_limits *lim, struct fld_op *op,
                             struct fencehttp_response *resp)
{
    for (size_t i = 0; i < req->n_args; i++) {
        const char *name = req->args[i].name, *v = req->args[i].value ? req->args[i].value : "";
        long long n;
        if (strcmp(name, "after") == 0) {
            if (fencehttp_parse_num(v, 0, (1LL << 53) - 1, &n) != 0)
                return fencehttp_error(resp, 400, "bad_parameter", "after must be an epoch: 0 .. 2^53-1");
            op->after_epoch = (uint64_t)n;
            op->has_after = 1;
        } else if (strcmp(name, "value") == 0) {
            /* Compared with the value proclaimed, so decoded as the
             * body's is (the query is kept percent-encoded). */
            char *d = NULL;
            size_t dn = 0;
            int rc = fencehttp_decode(v, strlen(v), &d, &dn);
            if (rc == -ENOMEM)
                return fencehttp_error(resp, 500, "internal", "out of memory");
            if (rc != 0 || dn > LOCKCORE_VALUE_MAX) {
                free(d);
                return fencehttp_error(resp, 400, "bad_parameter",
                                       "value is at most %d bytes, percent-encoded, without NUL",
                                       LOCKCORE_VALUE_MAX);
            }
            memcpy(op->after_value, d, dn + 1);
            free(d);
            op->has_after_value = 1;
        } else if (strcmp(name, "wait_ms") == 0) {
            if (fencehttp_parse_num(v, 0, (long long)lim->max_wait_ms, &n) != 0)
                return fencehttp_error(resp, 400, "bad_parameter", "wait_ms must be 0..%llu",
                                       (unsigned long long)lim->max_wait_ms);
            op->wait_ms = (uint64_t)n;
        } else {
            return fencehttp_error(resp, 400, "bad_parameter", "unknown query parameter '%.64s'", name);
        }
    }
    if (op->has_after_value && !op->has_after)
        return fencehttp_error(resp, 400, "bad_parameter", "value is compared only with after");
    if (op->wait_ms > 0 && !op->has_after)
        return fencehttp_error(resp, 400, "bad_parameter",
                               "wait_ms waits for a change after an epoch: give after");
    return 0;
}

/* /v1/elections/{name}[/{lock_id}[/extend|/proclaim]]. */
static int parse_election(const struct fld_request *req, const struct fld_limits *lim, const char *rest,
                          struct fld_op *op, struct fencehttp_response *resp)
{
    const char *m = req->method;
    int post = strcmp(m, "POST") == 0, get = strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0;
    op->kind = FLD_KIND_LEADER;
    op->ttl_ms = lim->default_ttl_ms;
    if (*rest != '/' || rest[1] == '\0')
        return fencehttp_error(resp, 404, "not_found", "an election is /v1/elections/{name}");
    rest++;
    const char *slash = strchr(rest, '/');
    size_t rlen = slash ? (size_t)(slash - rest) : strlen(rest);
    int rc = segment(rest, rlen, op->resource, LOCKCORE_RESOURCE_MAX, "resource", resp);
    if (rc != 0)
        return rc;
    if (slash == NULL) {
        if (post) {
            op->route = FLD_ROUTE_CAMPAIGN;
            if (req->n_args)
                return fencehttp_error(resp, 400, "bad_parameter",
                                       "a campaign takes its options in the body");
            return parse_election_body(req, lim, op, resp);
        }
        if (!get)
            return method_not_allowed(resp, "GET, HEAD, POST");
        op->route = FLD_ROUTE_LEADER;
        return parse_leader_args(req, lim, op, resp);
    }
    const char *id = slash + 1;
    const char *slash2 = strchr(id, '/');
    size_t idlen = slash2 ? (size_t)(slash2 - id) : strlen(id);
    if ((rc = segment(id, idlen, op->lock_id, LOCKCORE_ID_LEN, "lock id", resp)) != 0)
        return rc;
    if (!fld_api_is_lock_id(op->lock_id))
        return fencehttp_error(resp, 400, "bad_lock_id", "a lock id is %d lowercase hex digits",
                               LOCKCORE_ID_LEN);
    if (req->n_args)
        return fencehttp_error(resp, 400, "bad_parameter", "no query parameters here");
    if (slash2 == NULL) {
        if (strcmp(m, "DELETE") != 0)
            return method_not_allowed(resp, "DELETE");
        op->route = FLD_ROUTE_RESIGN;
        return 0;
    }
    if (strcmp(slash2, "/extend") == 0)
        op->route = FLD_ROUTE_EXTEND;
    else if (strcmp(slash2, "/proclaim") == 0)
        op->route = FLD_ROUTE_PROCLAIM;
    else
        return fencehttp_error(resp, 404, "not_found", "no such route (see docs/fencelockd.md)");
    if (!post)
        return method_not_allowed(resp, "POST");
    return parse_election_body(req, lim, op, resp);
}

int fld_api_parse(const struct fld_request *req, const struct fld_limits *lim, struct fld_op *op,
                  struct fencehttp_response *resp)
{
    if (req == NULL || lim == NULL || op == NULL || resp == NULL || req->method == NULL || req->path == NULL)
        return fencehttp_error(resp, 500, "internal", "fld_api_parse: NULL argument");
    memset(op, 0, sizeof(*op));
    const char *m = req->method, *p = req->path;
    int post = strcmp(m, "POST") == 0, get = strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0;
    if (strcmp(p, "/healthz") == 0 || strcmp(p, "/metrics") == 0) {
        if (!get)
            return method_not_allowed(resp, "GET, HEAD");
        op->route = p[1] == 'h' ? FLD_ROUTE_HEALTH : FLD_ROUTE_METRICS;
        return req->n_args ? fencehttp_error(resp, 400, "bad_parameter", "no query parameters here") : 0;
    }
    static const char elections[] = "/v1/elections";
    if (strncmp(p, elections, sizeof(elections) - 1) == 0 &&
        (p[sizeof(elections) - 1] == '\0' || p[sizeof(elections) - 1] == '/'))
        return parse_election(req, lim, p + sizeof(elections) - 1, op, resp);
    static const char prefix[] = "/v1/locks";
    if (strncmp(p, prefix, sizeof(prefix) - 1) != 0 ||
        (p[sizeof(prefix) - 1] != '\0' && p[sizeof(prefix) - 1] != '/'))
        return fencehttp_error(resp, 404, "not_found", "no such route (see docs/fencelockd.md)");
    const char *rest = p + sizeof(prefix) - 1;
    if (*rest == '\0' || strcmp(rest, "/") == 0) {
        if (!post)
            return method_not_allowed(resp, "POST");
        op->route = FLD_ROUTE_ACQUIRE;
        if (req->n_args)
            return fencehttp_error(resp, 400, "bad_parameter",
                                   "an acquisition takes its options in the body");
        return parse_acquire_body(req, lim, op, 0, resp);
    }
    rest++; /* the resource */
    const char *slash = strchr(rest, '/');
    size_t rlen = slash ? (size_t)(slash - rest) : strlen(rest);
    int rc = segment(rest, rlen, op->resource, LOCKCORE_RESOURCE_MAX, "resource", resp);
    if (rc != 0)
        return rc;
    if (slash == NULL) {
        if (post) {
            op->route = FLD_ROUTE_ACQUIRE;
            if (req->n_args)
                return fencehttp_error(resp, 400, "bad_parameter",
                                       "an acquisition takes its options in the body");
            return parse_acquire_body(req, lim, op, 1, resp);
        }
        if (!get)
            return method_not_allowed(resp, "GET, HEAD, POST");
        op->route = FLD_ROUTE_STATUS;
        return parse_args(req, op, resp);
    }
    const char *id = slash + 1;
    const char *slash2 = strchr(id, '/');
    size_t idlen = slash2 ? (size_t)(slash2 - id) : strlen(id);
    if ((rc = segment(id, idlen, op->lock_id, LOCKCORE_ID_LEN, "lock id", resp)) != 0)
        return rc;
    if (!fld_api_is_lock_id(op->lock_id))
        return fencehttp_error(resp, 400, "bad_lock_id", "a lock id is %d lowercase hex digits",
                               LOCKCORE_ID_LEN);
    if (slash2 == NULL) {
        if (strcmp(m, "DELETE") != 0)
            return method_not_allowed(resp, "DELETE");
        op->route = FLD_ROUTE_RELEASE;
    } else {
        if (strcmp(slash2, "/extend") != 0)
            return fencehttp_error(resp, 404, "not_found", "no such route (see docs/fencelockd.md)");
        if (!post)
            return method_not_allowed(resp, "POST");
        op->route = FLD_ROUTE_EXTEND;
        op->ttl_ms = lim->default_ttl_ms;
        if (req->body_too_large)
            return fencehttp_error(resp, 413, "body_too_large", "the body is over the limit");
        if (req->body_len > 0) {
            json_error_t jerr;
            json_t *o = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
            if (o == NULL)
                return fencehttp_error(resp, 400, "bad_json", "the body is not JSON: %s", jerr.text);
            const char *key;
            json_t *v;
            rc = json_is_object(o) ? 0 : body_error(resp, "%s", "the body must be a JSON object");
            json_object_foreach(o, key, v)
            {
                if (rc != 0)
                    break;
                if (strcmp(key, "ttl_ms") == 0)
                    rc = get_uint(v, "ttl_ms", 1, lim->max_ttl_ms, &op->ttl_ms, resp);
                else
                    rc = fencehttp_error(resp, 400, "bad_body", "unknown field '%.64s'", key);
            }
            json_decref(o);
            if (rc != 0)
                return rc;
        }
    }
    if ((rc = parse_args(req, op, resp)) != 0)
        return rc;
    return op->kind == FLD_KIND_MULTI ? split_names(op, resp) : 0;
}

/* ---- who may do what ---- */

/* The semaphore a permit's resource ("<semaphore>:permit:<i>") belongs
 * to: its length, or len when it is not a permit's name. */
static size_t semaphore_len(const char *resource, size_t len)
{
    static const char tag[] = ":permit:";
    for (size_t i = len; i-- > 0;) {
        if (resource[i] < '0' || resource[i] > '9') {
            size_t digits = len - 1 - i;
            if (digits == 0 || i + 1 < sizeof(tag) - 1)
                return len;
            size_t at = i + 1 - (sizeof(tag) - 1);
            return memcmp(resource + at, tag, sizeof(tag) - 1) == 0 ? at : len;
        }
    }
    return len;
}

static int forbidden(struct fencehttp_response *resp, const struct fencehttp_client *client, const char *why,
                     const char *what)
{
    fencehttp_error(resp, 403, "forbidden", "client %s: %s%.200s", client->name, why, what);
    return 403;
}

int fld_api_authorize(const struct fld_op *op, const struct fencehttp_client *client,
                      struct fencehttp_response *resp)
{
    if (op == NULL || resp == NULL)
        return fencehttp_error(resp, 500, "internal", "fld_api_authorize: NULL argument");
    if (client == NULL)
        return 0;
    int reads = op->route == FLD_ROUTE_STATUS || op->route == FLD_ROUTE_HEALTH ||
                op->route == FLD_ROUTE_METRICS || op->route == FLD_ROUTE_LEADER;
    if (client->read_only && !reads)
        return forbidden(resp, client, "may only read (read-only in the auth file)", "");
    if (op->route == FLD_ROUTE_HEALTH || op->route == FLD_ROUTE_METRICS)
        return 0;
    /* A name of a permit's form, "<sem>:permit:<i>", is the semaphore's key
     * space whatever the kind: rules name the semaphore, so that a client
     * allowed "pool:" cannot take the permits of another's semaphore
     * "pool", nor one allowed "pool" be refused its own permits. */
    if (op->kind == FLD_KIND_MULTI && op->route != FLD_ROUTE_STATUS) {
        for (size_t i = 0; i < op->n_names; i++)
            if (!fencehttp_client_allows(client, op->names[i],
                                         semaphore_len(op->names[i], strlen(op->names[i]))))
                return forbidden(resp, client, "the auth file does not allow the resource ", op->names[i]);
    } else if (!fencehttp_client_allows(client, op->resource,
                                        semaphore_len(op->resource, strlen(op->resource)))) {
        return forbidden(resp, client, "the auth file does not allow the resource ", op->resource);
    }
    /* A lock id is a credential only for the client that took it: its
     * acquisition carries that client's owner tag. */
    if (op->lock_id[0] != '\0' && !lockcore_id_owned_by(op->lock_id, client->name))
        return forbidden(resp, client, "the lock is another client's (or was not taken through fencelockd)",
                         "");
    return 0;
}

void fld_api_ref(const char *id, char out[17])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[32];
    unsigned len = 0;
    /* Of the acquisition, not the attempt: its id with the attempt's six
     * digits zeroed, which is also what a reentrant lock's key holds for
     * its owner (the first hold's acquisition). */
    char acq[LOCKCORE_ID_LEN + 1];
    if (id == NULL || strlen(id) != LOCKCORE_ID_LEN) {
        out[0] = '\0';
        return;
    }
    memcpy(acq, id, LOCKCORE_ID_LEN - 6);
    memset(acq + LOCKCORE_ID_LEN - 6, '0', 6);
    acq[LOCKCORE_ID_LEN] = '\0';
    if (EVP_Digest(acq, LOCKCORE_ID_LEN, md, &len, EVP_sha256(), NULL) != 1 || len != 32) {
        out[0] = '\0';
        return;
    }
    for (int i = 0; i < 8; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[16] = '\0';
}

struct owner {
    char tag[LOCKCORE_OWNER_TAG_LEN + 1];
    char name[FENCEHTTP_AUTH_NAME_MAX + 1];
};

struct fld_owners {
    struct owner *v; /* sorted by tag, one per name */
    size_t n;
};

static int owner_cmp(const void *a, const void *b)
{
    return strcmp(((const struct owner *)a)->tag, ((const struct owner *)b)->tag);
}

void fld_owners_free(struct fld_owners *o)
{
    if (o == NULL)
        return;
    free(o->v);
    free(o);
}

int fld_owners_new(const fencehttp_auth *a, struct fld_owners **out, char *errbuf, size_t errcap)
{
    if (out == NULL) {
        snprintf(errbuf, errcap, "fld_owners_new: NULL argument");
        return -EINVAL;
    }
    struct fld_owners *o = calloc(1, sizeof(*o));
    size_t n = fencehttp_auth_count(a);
    if (o == NULL || (n > 0 && (o->v = calloc(n, sizeof(*o->v))) == NULL)) {
        fld_owners_free(o);
        snprintf(errbuf, errcap, "out of memory");
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const struct fencehttp_client *cl = fencehttp_auth_client(a, i);
        const char *name = cl->name;
        /* Locks belong to names: a line's "line-N" would move with the
         * lines above it, and answers carry names as JSON. */
        if (!cl->named || !utf8(name, strlen(name))) {
            snprintf(errbuf, errcap,
                     "%s (client %zu of the file): every fencelockd client needs a NAME, in UTF-8",
                     cl->named ? name : "an unnamed client", i + 1);
            fld_owners_free(o);
            return -EINVAL;
        }
        struct owner *w = &o->v[o->n];
        if (lockcore_owner_tag(name, w->tag) != 0)
            continue; /* an empty name cannot be: the file names every client */
        snprintf(w->name, sizeof(w->name), "%s", name);
        o->n++;
    }
    if (o->n > 1) /* qsort's base may not be NULL, even for no elements */
        qsort(o->v, o->n, sizeof(*o->v), owner_cmp);
    /* Lines of one name (its tokens) are one owner; two names of one tag
     * could release each other's locks. */
    size_t k = 0;
    for (size_t i = 0; i < o->n; i++) {
        if (k > 0 && strcmp(o->v[k - 1].tag, o->v[i].tag) == 0) {
            if (strcmp(o->v[k - 1].name, o->v[i].name) == 0)
                continue;
            snprintf(errbuf, errcap,
                     "the client names '%s' and '%s' have the same owner tag %s: rename one of them",
                     o->v[k - 1].name, o->v[i].name, o->v[i].tag);
            fld_owners_free(o);
            return -EINVAL;
        }
        o->v[k++] = o->v[i];
    }
    o->n = k;
    *out = o;
    return 0;
}

const char *fld_owners_name(const struct fld_owners *o, const char *id)
{
    if (o == NULL || o->n == 0 || id == NULL || strlen(id) != LOCKCORE_ID_LEN)
        return NULL;
    struct owner key;
    memcpy(key.tag, id + 16, LOCKCORE_OWNER_TAG_LEN);
    key.tag[LOCKCORE_OWNER_TAG_LEN] = '\0';
    const struct owner *w = bsearch(&key, o->v, o->n, sizeof(*o->v), owner_cmp);
    return w != NULL && lockcore_id_owned_by(id, w->name) ? w->name : NULL;
}

/* A holder as answers show it: "<field>_client" (its client's name, or
 * null) and "<field>_ref" (fld_api_ref), both null when id is empty. */
static void set_holder(json_t *o, const char *field, const char *id, const struct fld_owners *owners)
{
    char key[64], ref[17];
    int held = id != NULL && id[0] != '\0';
    const char *name = held ? fld_owners_name(owners, id) : NULL;
    snprintf(key, sizeof(key), "%s_client", field);
    json_object_set_new(o, key, name ? json_string(name) : json_null());
    snprintf(key, sizeof(key), "%s_ref", field);
    if (held)
        fld_api_ref(id, ref);
    json_object_set_new(o, key, held && ref[0] ? json_string(ref) : json_null());
}

/* ---- answers ---- */

int fld_api_http_status(int rc, const char **code)
{
    switch (rc) {
    case LOCKCORE_ELOCKED:
        *code = "locked";
        return 409;
    case LOCKCORE_ELOST:
        *code = "lost";
        return 409;
    case LOCKCORE_ENOQUORUM:
        *code = "no_quorum";
        return 503;
    case -ETIMEDOUT:
        *code = "too_slow";
        return 503;
    case LOCKCORE_EPROTO:
        *code = "node_error";
        return 502;
    case LOCKCORE_EFENCE:
        *code = "no_token";
        return 503;
    case LOCKCORE_ECANCELED:
        *code = "shutting_down";
        return 503;
    case -EINVAL:
        *code = "bad_request";
        return 400;
    default:
        *code = "internal";
        return 500;
    }
}

/* Percent-encode s for a path segment: every byte but the unreserved. */
static void escape(const char *s, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (; *s && n + 4 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            strchr("-._~", ch) != NULL) {
            out[n++] = (char)ch;
        } else {
            out[n++] = '%';
            out[n++] = hex[ch >> 4];
            out[n++] = hex[ch & 15];
        }
    }
    out[n] = '\0';
}

/* The lock's own URL, for extend and release. */
static json_t *links(const char *resource, const char *id, enum fld_kind kind)
{
    char enc[3 * LOCKCORE_RESOURCE_MAX + 1];
    escape(resource, enc, sizeof(enc));
    if (kind == FLD_KIND_LEADER) {
        char ext[sizeof(enc) + 128], pro[sizeof(enc) + 128], res[sizeof(enc) + 128];
        snprintf(ext, sizeof(ext), "/v1/elections/%s/%s/extend", enc, id);
        snprintf(pro, sizeof(pro), "/v1/elections/%s/%s/proclaim", enc, id);
        snprintf(res, sizeof(res), "/v1/elections/%s/%s", enc, id);
        return json_pack("{s:s, s:s, s:s}", "extend", ext, "proclaim", pro, "resign", res);
    }
    char q[32] = "";
    if (kind != FLD_KIND_PLAIN)
        snprintf(q, sizeof(q), "?kind=%s", fld_kind_name(kind));
    char ext[sizeof(enc) + 128], rel[sizeof(enc) + 128];
    snprintf(ext, sizeof(ext), "/v1/locks/%s/%s/extend%s", enc, id, q);
    snprintf(rel, sizeof(rel), "/v1/locks/%s/%s%s", enc, id, q);
    return json_pack("{s:s, s:s}", "extend", ext, "release", rel);
}

/* What most reachable nodes hold, and how many: the holder of a status. */
struct majority {
    const char *holder; /* NULL: none */
    unsigned nodes, reachable;
    int64_t pttl_ms;
    uint64_t fence;
    unsigned waiters, holds;
};

static struct majority majority_of(const struct lockcore_node_status *st, int n)
{
    struct majority m = {0};
    for (int i = 0; i < n; i++) {
        if (!st[i].reachable)
            continue;
        m.reachable++;
        if (st[i].fence > m.fence)
            m.fence = st[i].fence;
        if (st[i].waiters > m.waiters)
            m.waiters = st[i].waiters;
        if (st[i].holds > m.holds)
            m.holds = st[i].holds;
        if (st[i].holder[0] == '\0')
            continue;
        unsigned same = 0;
        int64_t pttl = 0;
        for (int j = 0; j < n; j++) {
            if (st[j].reachable && strcmp(st[j].holder, st[i].holder) == 0) {
                same++;
                if (st[j].pttl_ms > pttl)
                    pttl = st[j].pttl_ms;
            }
        }
        if (same > m.nodes) {
            m.nodes = same;
            m.holder = st[i].holder;
            m.pttl_ms = pttl;
        }
    }
    return m;
}

static json_t *names_json(const struct fld_op *op)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < op->n_names; i++)
        json_array_append_new(a, json_string(op->names[i]));
    return a;
}

void fld_api_result(const struct fld_op *op, int rc, const struct lockcore_lock *lock, const char *errmsg,
                    const struct lockcore_node_status *status, int n, const struct fld_owners *owners,
                    struct fencehttp_response *resp)
{
    const char *code = "internal";
    if (rc != 0) {
        int http = fld_api_http_status(rc, &code);
        if (rc == LOCKCORE_ELOCKED && op->route == FLD_ROUTE_CAMPAIGN)
            code = "not_elected";
        json_t *o = json_pack("{s:s, s:s, s:s}", "error", code, "message",
                              errmsg ? errmsg : lockcore_strerror(rc), "resource", op->resource);
        if (o != NULL && lock != NULL && op->route == FLD_ROUTE_ACQUIRE) {
            json_object_set_new(o, "nodes_granted", json_integer(lock->nodes_ok));
            json_object_set_new(o, "nodes", json_integer(lock->nodes));
            json_object_set_new(o, "attempts", json_integer(lock->attempts));
        }
        if (o != NULL && status != NULL && n > 0) {
            struct majority m = majority_of(status, n);
            set_holder(o, "holder", m.holder, owners);
            json_object_set_new(o, "ttl_ms_left", json_integer(m.holder ? m.pttl_ms : 0));
            json_object_set_new(o, "waiters", json_integer(m.waiters));
        }
        fld_api_json(resp, http, o);
        return;
    }
    json_t *o = NULL;
    if (op->route == FLD_ROUTE_RESIGN) {
        o = json_pack("{s:s, s:i, s:i}", "name", op->resource, "nodes_released", (int)lock->nodes_ok, "nodes",
                      (int)lock->nodes);
        fld_api_json(resp, 200, o);
        return;
    }
    if (op->route == FLD_ROUTE_CAMPAIGN || op->route == FLD_ROUTE_PROCLAIM ||
        (op->route == FLD_ROUTE_EXTEND && op->kind == FLD_KIND_LEADER)) {
        /* An election's answer: the epoch is the token (a campaign's; the
         * others know only the id, and the epoch stays). */
        char ref[17];
        fld_api_ref(lock->id, ref);
        o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:i, s:i}", "name", op->resource, "lock_id", lock->id, "ref",
                      ref, "validity_ms", (json_int_t)lock->validity_ms, "ttl_ms", (json_int_t)lock->ttl_ms,
                      "nodes_granted", (int)lock->nodes_ok, "nodes", (int)lock->nodes);
        if (o != NULL && op->route == FLD_ROUTE_CAMPAIGN) {
            json_object_set_new(o, "epoch", json_integer((json_int_t)lock->token));
            json_object_set_new(o, "token", json_integer((json_int_t)lock->token));
            json_object_set_new(o, "attempts", json_integer(lock->attempts));
        }
        if (o != NULL && op->route != FLD_ROUTE_EXTEND)
            json_object_set_new(o, "value", json_string(op->value));
        if (o != NULL)
            json_object_set_new(o, "links", links(op->resource, lock->id, FLD_KIND_LEADER));
        fld_api_json(resp, 200, o);
        return;
    }
    if (op->route == FLD_ROUTE_RELEASE) {
        o = json_pack("{s:s, s:s, s:s, s:i, s:i}", "resource", lock->resource, "kind",
                      fld_kind_name(op->kind), "lock_id", lock->id, "nodes_released", (int)lock->nodes_ok,
                      "nodes", (int)lock->nodes);
        fld_api_json(resp, 200, o);
        return;
    }
    o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:i, s:i}", "resource", lock->resource, "kind",
                  fld_kind_name(op->kind), "lock_id", lock->id, "token", (json_int_t)lock->token,
                  "validity_ms", (json_int_t)lock->validity_ms, "ttl_ms", (json_int_t)lock->ttl_ms,
                  "nodes_granted", (int)lock->nodes_ok, "nodes", (int)lock->nodes);
    if (o != NULL && op->route == FLD_ROUTE_ACQUIRE)
        json_object_set_new(o, "attempts", json_integer(lock->attempts));
    if (o != NULL) {
        char ref[17];
        fld_api_ref(lock->id, ref);
        json_object_set_new(o, "ref", json_string(ref));
    }
    /* A lock extended by its id alone: the server does not know its token
     * (the acquisition's answer gave it, and an extension keeps it). */
    if (o != NULL && op->route == FLD_ROUTE_EXTEND)
        json_object_del(o, "token");
    if (o != NULL && op->kind == FLD_KIND_MULTI)
        json_object_set_new(o, "resources", names_json(op));
    if (o != NULL && op->kind == FLD_KIND_PERMIT && op->route == FLD_ROUTE_ACQUIRE)
        json_object_set_new(o, "semaphore", json_string(op->resource));
    if (o != NULL)
        json_object_set_new(o, "links", links(lock->resource, lock->id, op->kind));
    fld_api_json(resp, 200, o);
}

static json_t *node_json(const struct lockcore_node_status *s, int status_kind,
                         const struct fld_owners *owners)
{
    json_t *o = json_pack("{s:s, s:b}", "node", s->node, "reachable", s->reachable);
    if (o == NULL)
        return NULL;
    if (!s->reachable) {
        json_object_set_new(o, "error", json_string(s->error));
        return o;
    }
    set_holder(o, "holder", s->holder, owners);
    json_object_set_new(o, "ttl_ms_left", json_integer(s->pttl_ms > 0 ? s->pttl_ms : 0));
    json_object_set_new(o, "fence", json_integer((json_int_t)s->fence));
    json_object_set_new(o, "waiters", json_integer(s->waiters));
    if (status_kind == 'e')
        json_object_set_new(o, "holds", json_integer(s->holds));
    if (status_kind == 'r') {
        json_object_set_new(o, "readers", json_integer(s->holds));
        set_holder(o, "writer_waits", s->writer_waits, owners);
    }
    return o;
}

void fld_api_status(const struct fld_op *op, int rc, const struct lockcore_node_status *st, int n,
                    const struct lockcore_permit_status *ps, int np, unsigned quorum, const char *errmsg,
                    const struct fld_owners *owners, struct fencehttp_response *resp)
{
    if (rc < 0) {
        const char *code = "internal";
        int http = fld_api_http_status(rc, &code);
        fencehttp_error(resp, http, code, "%s", errmsg ? errmsg : lockcore_strerror(rc));
        return;
    }
    json_t *o;
    if (op->status_kind == 's') {
        o = json_pack("{s:s, s:s, s:i, s:i}", "resource", op->resource, "kind", "semaphore", "permits",
                      (int)op->permits, "held", rc);
        json_t *a = json_array();
        for (int i = 0; o != NULL && a != NULL && i < np; i++) {
            json_t *p =
                json_pack("{s:i, s:b, s:I, s:I, s:i}", "permit", (int)ps[i].permit, "held", ps[i].held,
                          "ttl_ms_left", (json_int_t)(ps[i].held && ps[i].pttl_ms > 0 ? ps[i].pttl_ms : 0),
                          "fence", (json_int_t)ps[i].fence, "nodes_reachable", (int)ps[i].reachable);
            if (p != NULL)
                set_holder(p, "holder", ps[i].held ? ps[i].holder : NULL, owners);
            json_array_append_new(a, p);
        }
        if (o != NULL)
            json_object_set_new(o, "permit", a);
        else
            json_decref(a);
        fld_api_json(resp, 200, o);
        return;
    }
    struct majority m = majority_of(st, n);
    int held = m.holder != NULL && m.nodes >= quorum;
    o = json_pack("{s:s, s:s, s:b, s:I, s:I, s:i, s:i, s:i}", "resource", op->resource, "kind",
                  op->status_kind == 'r'   ? "rw"
                  : op->status_kind == 'e' ? "reentrant"
                                           : "plain",
                  "held", held, "ttl_ms_left", (json_int_t)(held && m.pttl_ms > 0 ? m.pttl_ms : 0), "fence",
                  (json_int_t)m.fence, "waiters", (int)m.waiters, "nodes_reachable", (int)m.reachable,
                  "nodes_total", n);
    if (o != NULL)
        set_holder(o, "holder", held ? m.holder : NULL, owners);
    json_t *a = json_array();
    for (int i = 0; o != NULL && a != NULL && i < n; i++)
        json_array_append_new(a, node_json(&st[i], op->status_kind, owners));
    if (o != NULL && op->status_kind == 'r')
        json_object_set_new(o, "readers", json_integer(m.holds));
    if (o != NULL && op->status_kind == 'e')
        json_object_set_new(o, "holds", json_integer(m.holds));
    if (o != NULL)
        json_object_set_new(o, "nodes", a);
    else
        json_decref(a);
    fld_api_json(resp, 200, o);
}

int fld_api_leader_changed(const struct fld_op *op, const struct lockcore_leader *l)
{
    if (!op->has_after)
        return 1;
    if ((op->after_epoch != 0) != (l->held != 0) || (l->held && l->epoch != op->after_epoch))
        return 1;
    return l->held && op->has_after_value && strcmp(l->value, op->after_value) != 0;
}

void fld_api_leader(const struct fld_op *op, int rc, const struct lockcore_leader *l, int changed,
                    const struct fld_owners *owners, struct fencehttp_response *resp)
{
    if (rc < 0 && rc != -ETIMEDOUT) {
        const char *code = "internal";
        int http = fld_api_http_status(rc, &code);
        fencehttp_error(resp, http, code, "leader of '%.200s': %s", op->resource, lockcore_strerror(rc));
        return;
    }
    /* Without a wait, a reading that did not come (no majority, or still
     * changing hands) is not an answer. */
    if (rc == -ETIMEDOUT && !op->has_after) {
        fencehttp_error(resp, 503, "no_quorum", "leader of '%.200s': no majority agreed on a leader in time",
                        op->resource);
        return;
    }
    json_t *o = json_pack("{s:s, s:b, s:b}", "name", op->resource, "leader", l->held, "changed", changed);
    if (o != NULL && l->held) {
        json_object_set_new(o, "epoch", json_integer((json_int_t)l->epoch));
        json_object_set_new(o, "value", json_string(l->value));
        json_object_set_new(o, "ttl_ms_left", json_integer((json_int_t)l->ttl_ms_left));
    }
    if (o != NULL)
        set_holder(o, "leader", l->held ? l->id : NULL, owners);
    fld_api_json(resp, 200, o);
}
