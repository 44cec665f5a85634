/*
 * storage-guard's handler under fencehttp: its own headers, then api.c.
 * Each request runs to its answer in the serving thread that read it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#include "api.h"
#include "http.h"
#include "metrics.h"

struct sg_http {
    fencehttp *srv;
    sg_store_pool *pool;
    int unfenced;
    int auth_enabled;
    int64_t max_token_ahead_ms;
};

static int64_t wall_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void count_answer(void *arg, int status, double seconds)
{
    (void)arg;
    sg_metrics_observe(status, seconds);
    if (status >= 500)
        sg_metrics_inc(SG_M_STORE_ERRORS);
    else if (status >= 400 && status != 409 && status != 412)
        sg_metrics_inc(SG_M_BAD_REQUESTS);
}

/* api.c's answer as fencehttp's: the body changes hands. */
static void hand_over(struct sg_response *from, struct fencehttp_response *to)
{
    to->status = from->status;
    to->body = from->body;
    to->body_len = from->body_len;
    to->content_type = from->content_type;
    to->allow = from->allow;
    memcpy(to->etag, from->etag, sizeof(to->etag));
    from->body = NULL;
    sg_response_clear(from);
}

static int handle(void *arg, const struct fencehttp_request *r, struct fencehttp_response *out)
{
    struct sg_http *h = arg;
    struct sg_response resp = {0};
    int n_token = 0, n_if_match = 0, n_if_none_match = 0;
    const char *token = fencehttp_header(r->conn, "Fencing-Token", &n_token);
    const char *if_match = fencehttp_header(r->conn, MHD_HTTP_HEADER_IF_MATCH, &n_if_match);
    const char *if_none_match = fencehttp_header(r->conn, MHD_HTTP_HEADER_IF_NONE_MATCH, &n_if_none_match);
    if (n_token > 1) {
        sg_api_error(&resp, 400, "token_mismatch", "more than one Fencing-Token header");
    } else if (n_if_match > 1 || n_if_none_match > 1) {
        sg_api_error(&resp, 400, "bad_precondition", "more than one If-Match or If-None-Match header");
    } else {
        struct sg_arg args[FENCEHTTP_ARGS_MAX];
        for (size_t i = 0; i < r->n_args; i++)
            args[i] = (struct sg_arg){.name = r->args[i].name, .value = r->args[i].value};
        struct sg_request req = {
            .method = r->method,
            .path = r->path,
            .args = args,
            .n_args = r->n_args,
            .token_header = token,
            .if_match = if_match,
            .if_none_match = if_none_match,
            .body = r->body,
            .body_len = r->body_len,
            .body_too_large = r->body_too_large,
            .unfenced = h->unfenced,
            .max_token_ahead_ms = h->max_token_ahead_ms,
            .auth_enabled = h->auth_enabled,
            .admin = r->client != NULL && r->client->admin,
        };
        struct sg_op op;
        if (sg_api_parse(&req, &op, &resp) == 0) {
            sg_store *s = sg_api_needs_store(&op) ? sg_store_pool_get(h->pool) : NULL;
            sg_store_set_client(s, r->client ? r->client->name : NULL);
            sg_api_execute(s, &op, wall_ms(), &resp);
            sg_store_set_client(s, NULL);
            sg_store_pool_put(h->pool, s);
            sg_op_clear(&op);
        }
    }
    if (resp.body == NULL)
        sg_api_error(&resp, 500, "internal", "no answer");
    hand_over(&resp, out);
    return 0;
}

/* The headers storage-guard reads, refused when spelt with '_' for '-'. */
static const char *const read_headers[] = {"Fencing-Token", MHD_HTTP_HEADER_IF_MATCH,
                                           MHD_HTTP_HEADER_IF_NONE_MATCH, NULL};
static const char *const open_paths[] = {"/healthz", NULL};

int sg_http_start(const struct sg_http_options *o, sg_http **out, char *errbuf, size_t errcap)
{
    if (o == NULL || out == NULL || o->pool == NULL) {
        snprintf(errbuf, errcap, "sg_http_start: bad options");
        return -EINVAL;
    }
    sg_http *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return -ENOMEM;
    h->pool = o->pool;
    h->unfenced = o->unfenced;
    h->auth_enabled = o->auth != NULL;
    h->max_token_ahead_ms = o->max_token_ahead_ms;
    struct fencehttp_options fo = {
        .name = "storage-guard",
        .addr = o->addr,
        .addr_len = o->addr_len,
        .threads = o->threads,
        .max_body = o->max_body,
        .auth = o->auth,
        .open_paths = open_paths,
        .read_headers = read_headers,
        .tls_cert_pem = o->tls_cert_pem,
        .tls_key_pem = o->tls_key_pem,
        .handler = handle,
        .handler_arg = h,
        .on_answer = count_answer,
    };
    int rc = fencehttp_start(&fo, &h->srv, errbuf, errcap);
    if (rc != 0) {
        free(h);
        return rc;
    }
    *out = h;
    return 0;
}

uint16_t sg_http_port(const sg_http *h)
{
    return fencehttp_port(h->srv);
}

void sg_http_quiesce(sg_http *h)
{
    if (h != NULL)
        fencehttp_quiesce(h->srv);
}

int sg_http_drain(sg_http *h, int timeout_ms)
{
    return fencehttp_drain(h->srv, timeout_ms);
}

int sg_http_set_auth(sg_http *h, fencehttp_auth *auth)
{
    return h == NULL ? -EINVAL : fencehttp_set_auth(h->srv, auth);
}

int sg_http_reload_tls(sg_http *h, const char *cert_file, const char *key_file)
{
    return h == NULL ? -1 : fencehttp_reload_tls(h->srv, cert_file, key_file);
}

void sg_http_stop(sg_http *h)
{
    if (h == NULL)
        return;
    fencehttp_stop(h->srv);
    free(h);
}
