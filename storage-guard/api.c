/*
 * Request validation and JSON answers of storage-guard. Nothing here touches
 * a socket; sg_api_execute() is the only function that touches the store.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include <fencehttp/fencehttp.h>
#include <fencing/fencing.h>

#include "api.h"
#include "metrics.h"

static const char content_json[] = "application/json";

void sg_response_clear(struct sg_response *r)
{
    if (r == NULL)
        return;
    free(r->body);
    memset(r, 0, sizeof(*r));
}

void sg_op_clear(struct sg_op *op)
{
    if (op == NULL)
        return;
    free(op->key);
    free(op->resource);
    free(op->value);
    for (size_t i = 0; i < op->n_ops; i++) {
        free((char *)op->ops[i].key);
        free((char *)op->ops[i].resource);
        free((char *)op->ops[i].value);
    }
    free(op->ops);
    memset(op, 0, sizeof(*op));
}

/* A fixed answer for when even building the answer ran out of memory. */
static const char oom_body[] = "{\"error\":\"internal\",\"message\":\"out of memory\"}";

static void set_oom(struct sg_response *resp)
{
    free(resp->body);
    resp->status = 500;
    resp->content_type = content_json;
    resp->body = malloc(sizeof(oom_body));
    resp->body_len = resp->body ? sizeof(oom_body) - 1 : 0;
    if (resp->body)
        memcpy(resp->body, oom_body, sizeof(oom_body));
}

/* Set *resp to status and the JSON of obj (stolen). */
static void set_json(struct sg_response *resp, int status, json_t *obj)
{
    char *text = obj ? json_dumps(obj, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(obj);
    if (text == NULL) {
        set_oom(resp);
        return;
    }
    free(resp->body);
    resp->status = status;
    resp->content_type = content_json;
    resp->body_len = strlen(text);
    resp->body = text;
}

int sg_api_error(struct sg_response *resp, int status, const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    size_t len = 0;
    char *text = fencehttp_error_json(code, msg, &len);
    if (text == NULL) {
        set_oom(resp);
        return status;
    }
    free(resp->body);
    resp->status = status;
    resp->content_type = content_json;
    resp->body = text;
    resp->body_len = len;
    resp->allow = NULL;
    return status;
}

/* ---- decoding ---- */

int sg_api_decode(const char *s, size_t len, char **out, size_t *out_len)
{
    return fencehttp_decode(s, len, out, out_len);
}

int sg_api_parse_token(const char *s, uint64_t *out)
{
    if (s == NULL || out == NULL || *s == '\0')
        return -EINVAL;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -EINVAL; /* does not fit in 64 bits */
        v = v * 10 + d;
    }
    if (v >= FENCING_TOKEN_MAX)
        return -ERANGE;
    *out = v;
    return 0;
}

/* ---- parsing ---- */

static int name_error(struct sg_response *resp, const char *what, int rc, size_t len)
{
    if (rc == -ENOMEM) {
        set_oom(resp);
        return -ENOMEM;
    }
    if (rc != 0)
        return sg_api_error(resp, 400, what[0] == 'k' ? "bad_key" : "bad_resource",
                            "the %s has a bad percent-escape or a NUL byte", what);
    return sg_api_error(resp, 400, what[0] == 'k' ? "bad_key" : "bad_resource",
                        "the %s must be 1..%d bytes, not %zu", what, SG_API_NAME_MAX, len);
}

/* Decode a key or resource and check its length. what: "key" or "resource". */
static int decode_name(const char *s, size_t len, const char *what, char **out, size_t *out_len,
                       struct sg_response *resp)
{
    int rc = sg_api_decode(s, len, out, out_len);
    if (rc == 0 && (*out_len == 0 || *out_len > SG_API_NAME_MAX)) {
        size_t n = *out_len;
        free(*out);
        *out = NULL;
        return name_error(resp, what, 0, n);
    }
    return rc == 0 ? 0 : name_error(resp, what, rc, 0);
}

static int token_error(struct sg_response *resp, const char *where, int rc)
{
    if (rc == -ERANGE)
        return sg_api_error(resp, 400, "token_out_of_range",
                            "the token in the %s must be below 2^53 (9007199254740992)", where);
    return sg_api_error(resp, 400, "bad_token", "the token in the %s must be a non-negative 64-bit integer",
                        where);
}

/* The query argument `name`, or NULL. check_args() has already refused
 * repeated and unknown names. */
static const struct sg_arg *find_arg(const struct sg_request *req, const char *name)
{
    for (size_t i = 0; i < req->n_args; i++)
        if (req->args[i].name != NULL && strcmp(req->args[i].name, name) == 0)
            return &req->args[i];
    return NULL;
}

/* Refuse unknown and repeated query arguments: a typo like ?tokn= must not
 * silently turn a fenced read into a plain one. */
static int check_args(const struct sg_request *req, const char *const *allowed, struct sg_response *resp)
{
    for (size_t i = 0; i < req->n_args; i++) {
        const char *name = req->args[i].name ? req->args[i].name : "";
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            ok |= strcmp(*a, name) == 0;
        if (!ok)
            return sg_api_error(resp, 400, "unknown_parameter", "unknown query parameter '%.64s'", name);
        for (size_t j = 0; j < i; j++)
            if (req->args[j].name != NULL && strcmp(req->args[j].name, name) == 0)
                return sg_api_error(resp, 400, "bad_parameter", "query parameter '%.64s' is repeated", name);
    }
    return 0;
}

/* The token of a query argument (decoded) or 0 if absent; -1 on error (resp set). */
static int arg_token(const struct sg_arg *a, uint64_t *out, struct sg_response *resp)
{
    *out = 0;
    if (a == NULL)
        return 0;
    char *v = NULL;
    size_t n = 0;
    if (a->value == NULL || sg_api_decode(a->value, strlen(a->value), &v, &n) != 0) {
        token_error(resp, "query", -EINVAL);
        return -1;
    }
    int rc = sg_api_parse_token(v, out);
    free(v);
    if (rc != 0) {
        token_error(resp, "query", rc);
        return -1;
    }
    return 0;
}

/* Merge the header's token with another one (body or query): both given and
 * different is an error, since we cannot tell which the client meant. */
static int merge_header_token(const struct sg_request *req, const char *other_where, uint64_t *token,
                              int other_given, struct sg_response *resp)
{
    if (req->token_header == NULL)
        return 0;
    uint64_t h = 0;
    int rc = sg_api_parse_token(req->token_header, &h);
    if (rc != 0) {
        token_error(resp, "Fencing-Token header", rc);
        return -1;
    }
    if (other_given && h != *token) {
        sg_api_error(resp, 400, "token_mismatch",
                     "the Fencing-Token header (%llu) and the %s token (%llu) differ", (unsigned long long)h,
                     other_where, (unsigned long long)*token);
        return -1;
    }
    *token = h;
    return 0;
}

static int missing_token(struct sg_response *resp)
{
    return sg_api_error(
        resp, 428, "missing_token",
        "a write needs a fencing token (body \"token\" or Fencing-Token header); 0 means none");
}

/* Load the body as a JSON object whose names are all in allowed. Returns 0
 * with *out set (caller decrefs) or the error status with resp set. */
static int load_object(const struct sg_request *req, const char *const *allowed, const char *what,
                       json_t **out, struct sg_response *resp)
{
    *out = NULL;
    if (req->body_too_large)
        return sg_api_error(resp, 413, "body_too_large", "the request body is over the size limit");
    json_error_t jerr;
    /* Duplicate names are refused: {"token":1,"token":9} has no single meaning. */
    json_t *body = json_loadb(req->body ? req->body : "", req->body_len,
                              JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (body == NULL)
        return sg_api_error(resp, 400, "malformed_json",
                            "the body is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                            jerr.column);
    if (!json_is_object(body)) {
        json_decref(body);
        return sg_api_error(resp, 400, "bad_body", "the body must be a JSON object with %s", what);
    }
    const char *name;
    json_t *v;
    json_object_foreach(body, name, v)
    {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            ok |= strcmp(*a, name) == 0;
        if (!ok) {
            /* name belongs to body: answer before releasing it. */
            int rc = sg_api_error(resp, 400, "unknown_field", "unknown field \"%.64s\" in the body", name);
            json_decref(body);
            return rc;
        }
    }
    *out = body;
    return 0;
}

/* A token given in JSON (absent or null: *given = 0). Returns 0 or the
 * error status. */
static int json_token(const json_t *jt, uint64_t *out, int *given, struct sg_response *resp)
{
    *given = jt != NULL && !json_is_null(jt);
    if (!*given)
        return 0;
    if (!json_is_integer(jt) || json_integer_value(jt) < 0)
        return token_error(resp, "body", -EINVAL);
    *out = (uint64_t)json_integer_value(jt);
    if (*out >= FENCING_TOKEN_MAX)
        return token_error(resp, "body", -ERANGE);
    return 0;
}

/* A key or resource given as a JSON string: 1..SG_API_NAME_MAX bytes, no
 * NUL. what: "key" or "resource". */
static int json_name(const json_t *j, const char *what, char **out, size_t *out_len, struct sg_response *resp)
{
    size_t n = json_is_string(j) ? json_string_length(j) : 0;
    if (!json_is_string(j) || n == 0 || n > SG_API_NAME_MAX || strlen(json_string_value(j)) != n)
        return sg_api_error(resp, 400, what[0] == 'k' ? "bad_key" : "bad_resource",
                            "\"%s\" must be a string of 1..%d bytes without NUL", what, SG_API_NAME_MAX);
    *out = malloc(n + 1);
    if (*out == NULL) {
        set_oom(resp);
        return -ENOMEM;
    }
    memcpy(*out, json_string_value(j), n + 1);
    *out_len = n;
    return 0;
}

/* A version given in JSON: an integer >= min. */
static int json_version(const json_t *j, const char *what, long long min, int64_t *out,
                        struct sg_response *resp)
{
    if (!json_is_integer(j) || json_integer_value(j) < min)
        return sg_api_error(resp, 400, "bad_precondition", "\"%s\" must be an integer >= %lld", what, min);
    *out = json_integer_value(j);
    return 0;
}

static int bad_precondition(struct sg_response *resp, const char *msg)
{
    return sg_api_error(resp, 400, "bad_precondition", "%s", msg);
}

/*
 * The precondition of a PUT or DELETE, from If-Match ("*" or one strong
 * ETag such as "3"), If-None-Match ("*" only: create-only) and the body's
 * "if_version" (0: the record must not exist). Two that disagree are an
 * error, since we cannot tell which the client meant.
 */
static int parse_expect(const struct sg_request *req, const json_t *if_version, int64_t *expect,
                        struct sg_response *resp)
{
    *expect = SG_EXPECT_NONE;
    if (req->if_match != NULL && req->if_none_match != NULL)
        return bad_precondition(resp, "give If-Match or If-None-Match, not both");
    if (req->if_match != NULL) {
        const char *v = req->if_match;
        size_t n = strlen(v);
        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            n--;
        while (n > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            n--;
        }
        if (n == 1 && v[0] == '*') {
            *expect = SG_EXPECT_EXISTS;
        } else {
            char digits[24];
            uint64_t ver = 0;
            if (n < 3 || n - 2 >= sizeof(digits) || v[0] != '"' || v[n - 1] != '"')
                return bad_precondition(resp, "If-Match must be * or one ETag such as \"3\"");
            memcpy(digits, v + 1, n - 2);
            digits[n - 2] = '\0';
            if (sg_api_parse_token(digits, &ver) != 0 || ver == 0)
                return bad_precondition(resp, "If-Match must be * or one ETag such as \"3\"");
            *expect = (int64_t)ver;
        }
    }
    if (req->if_none_match != NULL) {
        if (strcmp(req->if_none_match, "*") != 0)
            return bad_precondition(resp, "only If-None-Match: * (create only) is supported on writes");
        *expect = 0;
    }
    if (if_version != NULL && !json_is_null(if_version)) {
        int64_t v = 0;
        int rc = json_version(if_version, "if_version", 0, &v, resp);
        if (rc != 0)
            return rc;
        if (*expect != SG_EXPECT_NONE && *expect != v)
            return bad_precondition(resp, "the If-Match or If-None-Match header and \"if_version\" differ");
        *expect = v;
    }
    return 0;
}

static int parse_put(const struct sg_request *req, struct sg_op *op, struct sg_response *resp)
{
    static const char *const no_args[] = {NULL};
    static const char *const fields[] = {"value", "token", "resource", "if_version", NULL};
    int rc = check_args(req, no_args, resp);
    if (rc != 0)
        return rc;
    json_t *body = NULL;
    rc = load_object(req, fields, "\"value\" and \"token\"", &body, resp);
    if (rc != 0)
        return rc;
    json_t *value = json_object_get(body, "value");
    if (value == NULL) {
        rc = sg_api_error(resp, 400, "missing_value", "the body has no \"value\"");
        goto out;
    }
    int body_token_given = 0;
    rc = json_token(json_object_get(body, "token"), &op->token, &body_token_given, resp);
    if (rc != 0)
        goto out;
    if (merge_header_token(req, "body", &op->token, body_token_given, resp) != 0) {
        rc = resp->status;
        goto out;
    }
    if (op->token == 0 && !req->unfenced) {
        rc = missing_token(resp);
        goto out;
    }
    json_t *jr = json_object_get(body, "resource");
    if (jr != NULL && !json_is_null(jr) &&
        (rc = json_name(jr, "resource", &op->resource, &op->resource_len, resp)) != 0)
        goto out;
    rc = parse_expect(req, json_object_get(body, "if_version"), &op->expect, resp);
    if (rc != 0)
        goto out;
    op->value = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
    if (op->value == NULL) {
        set_oom(resp);
        rc = -ENOMEM;
        goto out;
    }
    op->value_len = strlen(op->value);
out:
    json_decref(body);
    return rc;
}

/* DELETE: the token in the query, the header or an optional JSON body (any
 * two that differ are an error), the resource in the query or the body. */
static int parse_delete(const struct sg_request *req, struct sg_op *op, struct sg_response *resp)
{
    static const char *const allowed[] = {"token", "resource", NULL};
    static const char *const fields[] = {"token", "resource", "if_version", NULL};
    int rc = check_args(req, allowed, resp);
    if (rc != 0)
        return rc;
    json_t *body = NULL;
    if ((req->body_len > 0 || req->body_too_large) &&
        (rc = load_object(req, fields, "\"token\", \"resource\" or \"if_version\"", &body, resp)) != 0)
        return rc;
    int body_given = 0;
    rc = json_token(json_object_get(body, "token"), &op->token, &body_given, resp);
    if (rc != 0)
        goto out;
    const struct sg_arg *ta = find_arg(req, "token");
    uint64_t qt = 0;
    if (arg_token(ta, &qt, resp) != 0) {
        rc = resp->status;
        goto out;
    }
    if (ta != NULL && body_given && qt != op->token) {
        rc = sg_api_error(resp, 400, "token_mismatch",
                          "the query token (%llu) and the body token (%llu) differ", (unsigned long long)qt,
                          (unsigned long long)op->token);
        goto out;
    }
    if (ta != NULL)
        op->token = qt;
    if (merge_header_token(req, ta != NULL ? "query" : "body", &op->token, ta != NULL || body_given, resp) !=
        0) {
        rc = resp->status;
        goto out;
    }
    if (op->token == 0 && !req->unfenced) {
        rc = missing_token(resp);
        goto out;
    }
    const struct sg_arg *ra = find_arg(req, "resource");
    json_t *jr = json_object_get(body, "resource");
    if (ra != NULL && jr != NULL) {
        rc = sg_api_error(resp, 400, "bad_resource", "give the resource in the query or the body, not both");
        goto out;
    }
    if (ra != NULL) {
        const char *v = ra->value ? ra->value : "";
        rc = decode_name(v, strlen(v), "resource", &op->resource, &op->resource_len, resp);
    } else if (jr != NULL && !json_is_null(jr)) {
        rc = json_name(jr, "resource", &op->resource, &op->resource_len, resp);
    }
    if (rc != 0)
        goto out;
    rc = parse_expect(req, json_object_get(body, "if_version"), &op->expect, resp);
out:
    json_decref(body);
    return rc;
}

/* One element of "ops" into *o (strings copied and owned by the op). */
static int parse_batch_op(const json_t *j, size_t i, struct sg_store_op *o, struct sg_response *resp)
{
    if (!json_is_object(j))
        return sg_api_error(resp, 400, "bad_batch", "ops[%zu] is not a JSON object", i);
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)j, name, v)
    {
        static const char *const fields[] = {"op", "key", "resource", "value", "if_version", "version", NULL};
        int ok = 0;
        for (const char *const *a = fields; *a; a++)
            ok |= strcmp(*a, name) == 0;
        if (!ok)
            return sg_api_error(resp, 400, "unknown_field", "unknown field \"%.64s\" in ops[%zu]", name, i);
    }
    const char *kind = json_string_value(json_object_get(j, "op"));
    if (kind == NULL ||
        (strcmp(kind, "put") != 0 && strcmp(kind, "delete") != 0 && strcmp(kind, "check") != 0))
        return sg_api_error(resp, 400, "bad_batch", "ops[%zu].op must be \"put\", \"delete\" or \"check\"",
                            i);
    o->kind = kind[0] == 'p' ? SG_OP_PUT : kind[0] == 'd' ? SG_OP_DELETE : SG_OP_CHECK;
    o->expect = SG_EXPECT_NONE;
    char *key = NULL, *res = NULL;
    int rc = json_name(json_object_get(j, "key"), "key", &key, &o->key_len, resp);
    o->key = key;
    if (rc != 0)
        return rc;
    json_t *jr = json_object_get(j, "resource");
    if (jr != NULL && !json_is_null(jr)) {
        rc = json_name(jr, "resource", &res, &o->resource_len, resp);
    } else if ((res = malloc(o->key_len + 1)) != NULL) {
        /* The resource defaults to the key, as for a single write. */
        memcpy(res, key, o->key_len + 1);
        o->resource_len = o->key_len;
    } else {
        set_oom(resp);
        rc = -ENOMEM;
    }
    o->resource = res;
    if (rc != 0)
        return rc;
    json_t *value = json_object_get(j, "value"), *ifv = json_object_get(j, "if_version"),
           *ver = json_object_get(j, "version");
    if (o->kind == SG_OP_PUT && value == NULL)
        return sg_api_error(resp, 400, "missing_value", "ops[%zu] is a put without \"value\"", i);
    if (o->kind != SG_OP_PUT && value != NULL)
        return sg_api_error(resp, 400, "bad_batch", "ops[%zu]: only a put takes a \"value\"", i);
    if (o->kind == SG_OP_CHECK) {
        if (ifv != NULL || ver == NULL)
            return sg_api_error(
                resp, 400, "bad_batch",
                "ops[%zu] is a check: it takes \"version\" (0: no record), not \"if_version\"", i);
        return json_version(ver, "version", 0, &o->expect, resp);
    }
    if (ver != NULL)
        return sg_api_error(resp, 400, "bad_batch", "ops[%zu]: a %s takes \"if_version\", not \"version\"", i,
                            kind);
    if (ifv != NULL && !json_is_null(ifv) && (rc = json_version(ifv, "if_version", 0, &o->expect, resp)) != 0)
        return rc;
    if (o->kind == SG_OP_PUT) {
        char *text = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
        if (text == NULL) {
            set_oom(resp);
            return -ENOMEM;
        }
        o->value = text;
        o->value_len = strlen(text);
    }
    return 0;
}

static int parse_batch(const struct sg_request *req, struct sg_op *op, struct sg_response *resp)
{
    static const char *const no_args[] = {NULL};
    static const char *const fields[] = {"token", "ops", NULL};
    int rc = check_args(req, no_args, resp);
    if (rc != 0)
        return rc;
    json_t *body = NULL;
    rc = load_object(req, fields, "\"token\" and \"ops\"", &body, resp);
    if (rc != 0)
        return rc;
    int body_token_given = 0;
    rc = json_token(json_object_get(body, "token"), &op->token, &body_token_given, resp);
    if (rc != 0)
        goto out;
    if (merge_header_token(req, "body", &op->token, body_token_given, resp) != 0) {
        rc = resp->status;
        goto out;
    }
    if (op->token == 0 && !req->unfenced) {
        rc = missing_token(resp);
        goto out;
    }
    json_t *ops = json_object_get(body, "ops");
    if (!json_is_array(ops) || json_array_size(ops) == 0) {
        rc = sg_api_error(resp, 400, "bad_batch", "\"ops\" must be a non-empty array");
        goto out;
    }
    if (json_array_size(ops) > SG_API_BATCH_OPS_MAX) {
        rc = sg_api_error(resp, 400, "too_many_ops", "a batch takes at most %d ops, not %zu",
                          SG_API_BATCH_OPS_MAX, json_array_size(ops));
        goto out;
    }
    op->ops = calloc(json_array_size(ops), sizeof(*op->ops));
    if (op->ops == NULL) {
        set_oom(resp);
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < json_array_size(ops); i++) {
        op->n_ops++;
        rc = parse_batch_op(json_array_get(ops, i), i, &op->ops[i], resp);
        if (rc != 0)
            goto out;
    }
out:
    json_decref(body);
    return rc;
}

/* POST /v1/fences/{resource}/reset {"token": T}: only an operator. */
static int parse_reset(const struct sg_request *req, struct sg_op *op, struct sg_response *resp)
{
    if (!req->auth_enabled)
        return sg_api_error(resp, 403, "forbidden",
                            "lowering a fence needs --auth-file and a client marked admin in it");
    if (!req->admin)
        return sg_api_error(resp, 403, "forbidden", "lowering a fence needs a client marked admin");
    static const char *const fields[] = {"token", NULL};
    json_t *body = NULL;
    int rc = load_object(req, fields, "\"token\": the new last token", &body, resp);
    if (rc != 0)
        return rc;
    int given = 0;
    rc = json_token(json_object_get(body, "token"), &op->token, &given, resp);
    if (rc == 0 && !given)
        rc = sg_api_error(resp, 400, "missing_token",
                          "give the new last token as \"token\" (0 clears the fence)");
    json_decref(body);
    return rc;
}

static int parse_get_record(const struct sg_request *req, struct sg_op *op, struct sg_response *resp)
{
    static const char *const allowed[] = {"token", "resource", "raise", NULL};
    int rc = check_args(req, allowed, resp);
    if (rc != 0)
        return rc;
    const struct sg_arg *na = find_arg(req, "raise");
    if (na != NULL) {
        const char *v = na->value ? na->value : "";
        if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
            return sg_api_error(resp, 400, "bad_parameter", "'raise' must be 0 or 1");
        op->no_raise = strcmp(v, "0") == 0;
    }
    const struct sg_arg *ta = find_arg(req, "token");
    if (arg_token(ta, &op->token, resp) != 0)
        return resp->status;
    if (ta != NULL && op->token == 0)
        return missing_token(resp);
    if (merge_header_token(req, "query", &op->token, ta != NULL, resp) != 0)
        return resp->status;
    if (req->token_header != NULL && op->token == 0)
        return missing_token(resp);
    if (op->no_raise && op->token == 0)
        return sg_api_error(resp, 400, "bad_parameter", "'raise=0' is for a read with a token");
    const struct sg_arg *ra = find_arg(req, "resource");
    if (ra != NULL) {
        const char *v = ra->value ? ra->value : "";
        rc = decode_name(v, strlen(v), "resource", &op->resource, &op->resource_len, resp);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Parse a non-negative decimal query argument no larger than max. */
static int arg_int(const struct sg_arg *a, long long max, long long *out, struct sg_response *resp)
{
    const char *v = a->value ? a->value : "";
    uint64_t n = 0;
    int rc = sg_api_parse_token(v, &n);
    if (rc != 0 || (long long)n > max)
        return sg_api_error(resp, 400, "bad_parameter", "'%s' must be an integer in 0..%lld", a->name, max);
    *out = (long long)n;
    return 0;
}

static int parse_log(const struct sg_request *req, struct sg_op *op, struct sg_response *resp)
{
    static const char *const allowed[] = {"resource", "key", "after", "limit", NULL};
    int rc = check_args(req, allowed, resp);
    if (rc != 0)
        return rc;
    op->limit = SG_API_LOG_LIMIT_DEFAULT;
    const struct sg_arg *a;
    long long n = 0; /* gcc -O3 cannot see that arg_int sets it on success */
    if ((a = find_arg(req, "limit")) != NULL) {
        if ((rc = arg_int(a, SG_API_LOG_LIMIT_MAX, &n, resp)) != 0)
            return rc;
        if (n == 0)
            return sg_api_error(resp, 400, "bad_parameter", "'limit' must be in 1..%d", SG_API_LOG_LIMIT_MAX);
        op->limit = (int)n;
    }
    if ((a = find_arg(req, "after")) != NULL) {
        if ((rc = arg_int(a, INT64_MAX, &n, resp)) != 0)
            return rc;
        op->after = n;
    }
    if ((a = find_arg(req, "resource")) != NULL) {
        const char *v = a->value ? a->value : "";
        if ((rc = decode_name(v, strlen(v), "resource", &op->resource, &op->resource_len, resp)) != 0)
            return rc;
        op->has_resource_filter = 1;
    }
    if ((a = find_arg(req, "key")) != NULL) {
        const char *v = a->value ? a->value : "";
        if ((rc = decode_name(v, strlen(v), "key", &op->key, &op->key_len, resp)) != 0)
            return rc;
        op->has_key_filter = 1;
    }
    return 0;
}

static int method_not_allowed(struct sg_response *resp, const char *method, const char *allow)
{
    sg_api_error(resp, 405, "method_not_allowed", "%.16s is not allowed here; allowed: %s", method, allow);
    resp->allow = allow;
    return 405;
}

static int is_get(const char *m)
{
    /* HEAD is a GET without a body; libmicrohttpd drops the body for us. */
    return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0;
}

static int starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int sg_api_parse(const struct sg_request *req, struct sg_op *op, struct sg_response *resp)
{
    memset(op, 0, sizeof(*op));
    memset(resp, 0, sizeof(*resp));
    op->max_ahead_ms = req->unfenced ? 0 : req->max_token_ahead_ms;
    const char *m = req->method ? req->method : "";
    const char *path = req->path ? req->path : "";
    int rc;
    static const char rec_prefix[] = "/v1/records/";
    static const char fence_prefix[] = "/v1/fences/";

    if (starts(path, rec_prefix)) {
        int put = strcmp(m, "PUT") == 0, del = strcmp(m, "DELETE") == 0;
        if (!put && !del && !is_get(m))
            return method_not_allowed(resp, m, "GET, HEAD, PUT, DELETE");
        const char *k = path + sizeof(rec_prefix) - 1;
        op->expect = SG_EXPECT_NONE;
        rc = decode_name(k, strlen(k), "key", &op->key, &op->key_len, resp);
        if (rc == 0)
            rc = put   ? parse_put(req, op, resp)
                 : del ? parse_delete(req, op, resp)
                       : parse_get_record(req, op, resp);
        op->route = put ? SG_ROUTE_PUT_RECORD : del ? SG_ROUTE_DELETE_RECORD : SG_ROUTE_GET_RECORD;
        if (rc == 0 && op->resource == NULL) {
            /* The resource defaults to the key: one lock per record. */
            op->resource = malloc(op->key_len + 1);
            if (op->resource == NULL) {
                set_oom(resp);
                rc = -ENOMEM;
            } else {
                memcpy(op->resource, op->key, op->key_len + 1);
                op->resource_len = op->key_len;
            }
        }
    } else if (starts(path, fence_prefix)) {
        static const char reset_suffix[] = "/reset";
        const char *r = path + sizeof(fence_prefix) - 1;
        size_t rlen = strlen(r);
        int reset = strcmp(m, "POST") == 0 && rlen > sizeof(reset_suffix) - 1 &&
                    strcmp(r + rlen - (sizeof(reset_suffix) - 1), reset_suffix) == 0;
        if (!is_get(m) && !reset)
            return method_not_allowed(resp, m, "GET, HEAD");
        static const char *const no_args[] = {NULL};
        if (reset)
            rlen -= sizeof(reset_suffix) - 1;
        rc = check_args(req, no_args, resp);
        if (rc == 0)
            rc = decode_name(r, rlen, "resource", &op->resource, &op->resource_len, resp);
        if (rc == 0 && reset)
            rc = parse_reset(req, op, resp);
        op->route = reset ? SG_ROUTE_RESET_FENCE : SG_ROUTE_GET_FENCE;
    } else if (strcmp(path, "/v1/batch") == 0) {
        if (strcmp(m, "POST") != 0)
            return method_not_allowed(resp, m, "POST");
        op->route = SG_ROUTE_BATCH;
        rc = parse_batch(req, op, resp);
    } else if (strcmp(path, "/v1/log") == 0) {
        if (!is_get(m))
            return method_not_allowed(resp, m, "GET, HEAD");
        op->route = SG_ROUTE_GET_LOG;
        rc = parse_log(req, op, resp);
    } else if (strcmp(path, "/healthz") == 0 || strcmp(path, "/metrics") == 0) {
        if (!is_get(m))
            return method_not_allowed(resp, m, "GET, HEAD");
        op->route = path[1] == 'h' ? SG_ROUTE_HEALTH : SG_ROUTE_METRICS;
        rc = 0;
    } else {
        return sg_api_error(resp, 404, "not_found", "no such endpoint");
    }
    if (rc != 0)
        sg_op_clear(op);
    return rc;
}

int sg_api_needs_store(const struct sg_op *op)
{
    return op->route != SG_ROUTE_METRICS;
}

/* ---- answers ---- */

/* Set a string member from bytes. JSON strings must be UTF-8; a key that is
 * not is given lossily (bytes >= 0x80 as '?') plus exactly as "<name>_hex". */
static int set_bytes(json_t *obj, const char *name, const char *p, size_t len)
{
    json_t *s = json_stringn(p, len);
    if (s != NULL)
        return json_object_set_new(obj, name, s);
    char *lossy = malloc(len + 1), *hex = malloc(2 * len + 1);
    int rc = -1;
    if (lossy == NULL || hex == NULL)
        goto out;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        lossy[i] = c >= 0x80 ? '?' : (char)c;
        snprintf(hex + 2 * i, 3, "%02x", c);
    }
    char hex_name[64];
    snprintf(hex_name, sizeof(hex_name), "%s_hex", name);
    rc = json_object_set_new(obj, name, json_stringn(lossy, len)) |
         json_object_set_new(obj, hex_name, json_stringn(hex, 2 * len));
out:
    free(lossy);
    free(hex);
    return rc;
}

/* RFC 3339 UTC with milliseconds. */
static void fmt_time(int64_t ms, char *buf, size_t cap)
{
    time_t sec = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&sec, &tm);
    char d[32];
    strftime(d, sizeof(d), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%03dZ", d, (int)(ms % 1000));
}

static json_t *jtoken(uint64_t t)
{
    return json_integer((json_int_t)t);
}

static void store_error(struct sg_response *resp, sg_store *store, int rc)
{
    if (rc == SG_STORE_EBUSY)
        sg_api_error(resp, 503, "store_busy", "the database is locked; retry: %s", sg_store_errmsg(store));
    else if (rc == -ENOMEM)
        set_oom(resp);
    else if (rc == SG_STORE_EPERM)
        sg_api_error(resp, 403, "forbidden", "%s", sg_store_errmsg(store));
    else
        sg_api_error(resp, 500, "store_error", "%s", sg_store_errmsg(store));
}

static void stale(struct sg_response *resp, const struct sg_op *op, uint64_t last)
{
    json_t *o = json_object();
    if (o == NULL) {
        set_oom(resp);
        return;
    }
    char msg[160];
    snprintf(msg, sizeof(msg), "token %llu is older than the resource's last token %llu",
             (unsigned long long)op->token, (unsigned long long)last);
    json_object_set_new(o, "error", json_string("stale_token"));
    json_object_set_new(o, "message", json_string(msg));
    json_object_set_new(o, "token", jtoken(op->token));
    json_object_set_new(o, "last_token", jtoken(last));
    set_bytes(o, "resource", op->resource, op->resource_len);
    set_json(resp, 409, o);
}

static void set_etag(struct sg_response *resp, int64_t version)
{
    snprintf(resp->etag, sizeof(resp->etag), "\"%lld\"", (long long)version);
}

static json_t *jexpect(int64_t expect)
{
    return expect == SG_EXPECT_EXISTS ? json_string("*") : json_integer(expect);
}

/* 412: the precondition of op o did not hold. index < 0: not a batch. */
static void mismatch(struct sg_response *resp, const struct sg_store_op *o, long index, json_t *results)
{
    json_t *obj = json_object();
    if (obj == NULL) {
        json_decref(results);
        set_oom(resp);
        return;
    }
    char msg[200], want[32];
    if (o->expect == SG_EXPECT_EXISTS)
        snprintf(want, sizeof(want), "any version");
    else if (o->expect == 0)
        snprintf(want, sizeof(want), "no record");
    else
        snprintf(want, sizeof(want), "version %lld", (long long)o->expect);
    if (o->found_version == 0)
        snprintf(msg, sizeof(msg), "expected %s, but there is no record", want);
    else
        snprintf(msg, sizeof(msg), "expected %s, but the record is at version %lld", want,
                 (long long)o->found_version);
    json_object_set_new(obj, "error", json_string("version_mismatch"));
    json_object_set_new(obj, "message", json_string(msg));
    if (index >= 0)
        json_object_set_new(obj, "index", json_integer(index));
    set_bytes(obj, "key", o->key, o->key_len);
    json_object_set_new(obj, "expected", jexpect(o->expect));
    json_object_set_new(obj, "version", json_integer(o->found_version));
    if (results != NULL)
        json_object_set_new(obj, "results", results);
    sg_metrics_inc(SG_M_PRECONDITIONS);
    set_json(resp, 412, obj);
}

/* A PUT or DELETE of one record: a batch of one op, not marked as a batch. */
static int exec_one(sg_store *store, const struct sg_op *op, enum sg_op_kind kind, int64_t now_ms,
                    struct sg_store_op *o, struct sg_response *resp)
{
    *o = (struct sg_store_op){
        .kind = kind,
        .key = op->key,
        .key_len = op->key_len,
        .resource = op->resource,
        .resource_len = op->resource_len,
        .value = op->value,
        .value_len = op->value_len,
        .expect = op->expect,
    };
    struct sg_apply_result ar;
    int rc = sg_store_apply(store, op->token, o, 1, 0, now_ms, &ar);
    if (rc != 0) {
        store_error(resp, store, rc);
        return -1;
    }
    if (ar.outcome == SG_OUTCOME_STALE) {
        sg_metrics_inc(SG_M_WRITES_STALE);
        stale(resp, op, ar.last_token);
        return -1;
    }
    if (ar.outcome == SG_OUTCOME_MISMATCH) {
        mismatch(resp, o, -1, NULL);
        return -1;
    }
    return 0;
}

static void exec_put(sg_store *store, const struct sg_op *op, int64_t now_ms, struct sg_response *resp)
{
    struct sg_store_op o;
    if (exec_one(store, op, SG_OP_PUT, now_ms, &o, resp) != 0)
        return;
    sg_metrics_inc(SG_M_WRITES_ACCEPTED);
    json_t *obj = json_object();
    if (obj == NULL) {
        set_oom(resp);
        return;
    }
    set_bytes(obj, "key", op->key, op->key_len);
    json_object_set_new(obj, "version", json_integer(o.version));
    json_object_set_new(obj, "token", jtoken(op->token));
    set_bytes(obj, "resource", op->resource, op->resource_len);
    json_object_set_new(obj, "previous_token", jtoken(o.last_token));
    set_json(resp, 200, obj);
    set_etag(resp, o.version);
}

static void exec_delete(sg_store *store, const struct sg_op *op, int64_t now_ms, struct sg_response *resp)
{
    struct sg_store_op o;
    if (exec_one(store, op, SG_OP_DELETE, now_ms, &o, resp) != 0)
        return;
    sg_metrics_inc(SG_M_DELETES);
    if (o.outcome == SG_OUTCOME_NOT_FOUND) {
        sg_api_error(resp, 404, "not_found", "no record with this key (the token was admitted)");
        return;
    }
    json_t *obj = json_object();
    if (obj == NULL) {
        set_oom(resp);
        return;
    }
    set_bytes(obj, "key", op->key, op->key_len);
    json_object_set_new(obj, "deleted", json_true());
    json_object_set_new(obj, "version", json_integer(o.version));
    json_object_set_new(obj, "token", jtoken(op->token));
    set_bytes(obj, "resource", op->resource, op->resource_len);
    json_object_set_new(obj, "previous_token", jtoken(o.last_token));
    set_json(resp, 200, obj);
}

static const char *const op_kind_name[] = {
    [SG_OP_PUT] = "put", [SG_OP_DELETE] = "delete", [SG_OP_CHECK] = "check"};

/* The "results" array of a batch answer: one entry per op. */
static json_t *batch_results(const struct sg_op *op)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < op->n_ops; i++) {
        const struct sg_store_op *o = &op->ops[i];
        json_t *r = json_object();
        if (r == NULL || json_array_append_new(a, r) != 0) {
            json_decref(a);
            return NULL;
        }
        json_object_set_new(r, "op", json_string(op_kind_name[o->kind]));
        set_bytes(r, "key", o->key, o->key_len);
        set_bytes(r, "resource", o->resource, o->resource_len);
        json_object_set_new(r, "outcome", json_string(sg_outcome_name(o->outcome)));
        if (o->outcome == SG_OUTCOME_ACCEPTED)
            json_object_set_new(r, "version", json_integer(o->version));
    }
    return a;
}

static void exec_batch(sg_store *store, const struct sg_op *op, int64_t now_ms, struct sg_response *resp)
{
    struct sg_apply_result ar;
    int rc = sg_store_apply(store, op->token, op->ops, op->n_ops, 1, now_ms, &ar);
    if (rc != 0) {
        store_error(resp, store, rc);
        return;
    }
    json_t *results = batch_results(op);
    if (results == NULL) {
        set_oom(resp);
        return;
    }
    if (ar.outcome == SG_OUTCOME_MISMATCH) {
        mismatch(resp, &op->ops[ar.failed], (long)ar.failed, results);
        return;
    }
    json_t *obj = json_object();
    if (obj == NULL) {
        json_decref(results);
        set_oom(resp);
        return;
    }
    if (ar.outcome == SG_OUTCOME_STALE) {
        const struct sg_store_op *o = &op->ops[ar.failed];
        char msg[200];
        snprintf(msg, sizeof(msg), "token %llu is older than the last token %llu of the resource of ops[%zu]",
                 (unsigned long long)op->token, (unsigned long long)ar.last_token, ar.failed);
        sg_metrics_inc(SG_M_BATCHES_STALE);
        json_object_set_new(obj, "error", json_string("stale_token"));
        json_object_set_new(obj, "message", json_string(msg));
        json_object_set_new(obj, "token", jtoken(op->token));
        json_object_set_new(obj, "last_token", jtoken(ar.last_token));
        set_bytes(obj, "resource", o->resource, o->resource_len);
        json_object_set_new(obj, "index", json_integer((json_int_t)ar.failed));
        json_object_set_new(obj, "batch", json_integer(ar.batch));
        json_object_set_new(obj, "results", results);
        set_json(resp, 409, obj);
        return;
    }
    sg_metrics_inc(SG_M_BATCHES);
    json_object_set_new(obj, "batch", json_integer(ar.batch));
    json_object_set_new(obj, "token", jtoken(op->token));
    json_object_set_new(obj, "results", results);
    set_json(resp, 200, obj);
}

static void exec_get(sg_store *store, const struct sg_op *op, int64_t now_ms, struct sg_response *resp)
{
    struct sg_write_result res;
    struct sg_record rec = {0};
    int found = 0;
    int rc = op->no_raise ? sg_store_get_checked(store, op->key, op->key_len, op->resource, op->resource_len,
                                                 op->token, &res, &found, &rec)
                          : sg_store_get(store, op->key, op->key_len, op->resource, op->resource_len,
                                         op->token, now_ms, &res, &found, &rec);
    if (rc != 0) {
        store_error(resp, store, rc);
        return;
    }
    if (op->token != 0 && res.outcome == SG_OUTCOME_STALE) {
        sg_metrics_inc(SG_M_READS_STALE);
        stale(resp, op, res.last_token);
        return;
    }
    sg_metrics_inc(SG_M_READS);
    if (!found) {
        sg_api_error(resp, 404, "not_found", "no record with this key");
        return;
    }
    json_error_t jerr;
    json_t *value = json_loadb(rec.value, rec.value_len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    json_t *o = json_object();
    char when[48];
    fmt_time(rec.updated_at_ms, when, sizeof(when));
    if (value == NULL || o == NULL) {
        json_decref(value);
        json_decref(o);
        sg_record_clear(&rec);
        sg_api_error(resp, 500, "store_error", "stored value is not JSON: %s", jerr.text);
        return;
    }
    set_bytes(o, "key", rec.key, rec.key_len);
    json_object_set_new(o, "value", value);
    json_object_set_new(o, "token", jtoken(rec.token));
    json_object_set_new(o, "version", json_integer(rec.version));
    json_object_set_new(o, "updated_at", json_string(when));
    set_bytes(o, "resource", rec.resource, rec.resource_len);
    int64_t version = rec.version;
    sg_record_clear(&rec);
    set_json(resp, 200, o);
    set_etag(resp, version);
}

static void exec_fence(sg_store *store, const struct sg_op *op, struct sg_response *resp)
{
    uint64_t last = 0;
    int rc = sg_store_fence(store, op->resource, op->resource_len, &last);
    if (rc != 0) {
        store_error(resp, store, rc);
        return;
    }
    json_t *o = json_object();
    if (o == NULL) {
        set_oom(resp);
        return;
    }
    set_bytes(o, "resource", op->resource, op->resource_len);
    json_object_set_new(o, "last_token", jtoken(last));
    set_json(resp, 200, o);
}

struct log_walk {
    json_t *entries;
    int64_t last_seq;
};

static int log_row(void *arg, const struct sg_log_entry *e)
{
    struct log_walk *w = arg;
    json_t *o = json_object();
    if (o == NULL)
        return -ENOMEM;
    char when[48];
    fmt_time(e->time_ms, when, sizeof(when));
    json_object_set_new(o, "seq", json_integer(e->seq));
    json_object_set_new(o, "time", json_string(when));
    json_object_set_new(o, "time_ms", json_integer(e->time_ms));
    json_object_set_new(o, "op", json_string(e->op));
    set_bytes(o, "key", e->key, e->key_len);
    set_bytes(o, "resource", e->resource, e->resource_len);
    json_object_set_new(o, "token", jtoken(e->token));
    json_object_set_new(o, "last_token", jtoken(e->last_token));
    json_object_set_new(o, "outcome", json_string(e->outcome));
    if (e->version > 0)
        json_object_set_new(o, "version", json_integer(e->version));
    if (e->batch > 0)
        json_object_set_new(o, "batch", json_integer(e->batch));
    if (e->client[0] != '\0')
        set_bytes(o, "client", e->client, strlen(e->client));
    w->last_seq = e->seq;
    return json_array_append_new(w->entries, o) == 0 ? 0 : -ENOMEM;
}

static void exec_log(sg_store *store, const struct sg_op *op, struct sg_response *resp)
{
    struct sg_log_filter f = {
        .resource = op->has_resource_filter ? op->resource : NULL,
        .resource_len = op->resource_len,
        .key = op->has_key_filter ? op->key : NULL,
        .key_len = op->key_len,
        .after = op->after,
        .limit = op->limit,
    };
    struct log_walk w = {json_array(), op->after};
    if (w.entries == NULL) {
        set_oom(resp);
        return;
    }
    int rc = sg_store_log(store, &f, log_row, &w);
    if (rc != 0) {
        json_decref(w.entries);
        store_error(resp, store, rc);
        return;
    }
    /* next_after lets a reader page: pass it back as ?after=. */
    json_t *o = json_pack("{s:o, s:I}", "entries", w.entries, "next_after", (json_int_t)w.last_seq);
    set_json(resp, 200, o);
}

/* Healthy means the database answers and still runs in WAL mode with
 * synchronous=FULL: the settings every 200 relies on. */
static void exec_health(sg_store *store, struct sg_response *resp)
{
    char journal[16];
    int sync = -1;
    int rc = sg_store_health(store, journal, sizeof(journal), &sync);
    if (rc != 0) {
        sg_api_error(resp, 503, "unhealthy", "%s", sg_store_errmsg(store));
        return;
    }
    int ok = (strcmp(journal, "wal") == 0 || strcmp(journal, "memory") == 0) && sync == 2;
    set_json(resp, ok ? 200 : 503,
             json_pack("{s:s, s:s, s:s}", "status", ok ? "ok" : "unhealthy", "journal_mode", journal,
                       "synchronous", sync == 2 ? "full" : "not full"));
}

static void exec_reset(sg_store *store, const struct sg_op *op, int64_t now_ms, struct sg_response *resp)
{
    uint64_t old = 0;
    int rc = sg_store_reset_fence(store, op->resource, op->resource_len, op->token, now_ms, &old);
    if (rc != 0) {
        store_error(resp, store, rc);
        return;
    }
    sg_metrics_inc(SG_M_FENCE_RESETS);
    json_t *o = json_object();
    if (o == NULL) {
        set_oom(resp);
        return;
    }
    set_bytes(o, "resource", op->resource, op->resource_len);
    json_object_set_new(o, "last_token", jtoken(op->token));
    json_object_set_new(o, "previous_token", jtoken(old));
    set_json(resp, 200, o);
}

/*
 * Tokens are wall-clock microseconds (lockcore's). One far in the future
 * would raise a fence that no honest holder reaches until that time comes:
 * refuse tokens more than max_ahead_ms past our own clock, so a poisoned
 * fence locks writers out for at most that long. Small tokens (counters,
 * tests) are far behind the clock and never refused.
 */
static int token_too_far_ahead(const struct sg_op *op, int64_t now_ms, struct sg_response *resp)
{
    if (op->token == 0 || op->max_ahead_ms <= 0 || now_ms <= 0)
        return 0;
    uint64_t limit_us = ((uint64_t)now_ms + (uint64_t)op->max_ahead_ms) * 1000u;
    if (op->token <= limit_us)
        return 0;
    sg_api_error(resp, 400, "token_too_far_ahead",
                 "token %llu is %.1f s past this server's clock (%lld us), more than the %lld ms allowed; "
                 "is a clock wrong?",
                 (unsigned long long)op->token, (double)(op->token - (uint64_t)now_ms * 1000u) / 1e6,
                 (long long)now_ms * 1000, (long long)op->max_ahead_ms);
    return -1;
}

void sg_api_execute(sg_store *store, const struct sg_op *op, int64_t now_ms, struct sg_response *resp)
{
    memset(resp, 0, sizeof(*resp));
    if (token_too_far_ahead(op, now_ms, resp) != 0)
        return;
    switch (op->route) {
    case SG_ROUTE_PUT_RECORD:
        exec_put(store, op, now_ms, resp);
        return;
    case SG_ROUTE_GET_RECORD:
        exec_get(store, op, now_ms, resp);
        return;
    case SG_ROUTE_DELETE_RECORD:
        exec_delete(store, op, now_ms, resp);
        return;
    case SG_ROUTE_BATCH:
        exec_batch(store, op, now_ms, resp);
        return;
    case SG_ROUTE_RESET_FENCE:
        exec_reset(store, op, now_ms, resp);
        return;
    case SG_ROUTE_GET_FENCE:
        exec_fence(store, op, resp);
        return;
    case SG_ROUTE_GET_LOG:
        exec_log(store, op, resp);
        return;
    case SG_ROUTE_HEALTH:
        exec_health(store, resp);
        return;
    case SG_ROUTE_METRICS: {
        size_t len = 0;
        char *text = sg_metrics_render(&len);
        if (text == NULL) {
            set_oom(resp);
            return;
        }
        resp->status = 200;
        resp->body = text;
        resp->body_len = len;
        resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
        return;
    }
    }
    sg_api_error(resp, 500, "internal", "unknown route");
}

void sg_api_handle(sg_store *store, const struct sg_request *req, int64_t now_ms, struct sg_response *resp)
{
    struct sg_op op;
    int rc = sg_api_parse(req, &op, resp);
    if (rc != 0)
        return;
    sg_api_execute(store, &op, now_ms, resp);
    sg_op_clear(&op);
}
