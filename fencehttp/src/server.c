/*
 * libmicrohttpd glue shared by fencelock's services. Each serving thread
 * runs its own poll loop; a request's state (a fencehttp_conn) lives in
 * con_cls from the first callback to the completion callback. The checks
 * of the request head are here, so that every service refuses the same
 * hostile bytes; what a request means is the service's handler's.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>

#include <fencehttp/fencehttp.h>

struct fencehttp {
    struct MHD_Daemon *daemon;
    struct fencehttp_options o;
    /* o.auth, or the table fencehttp_set_auth gave since; those it gave
     * are freed at fencehttp_stop (requests may still read one). */
    _Atomic(const fencehttp_auth *) auth;
    pthread_mutex_t given_mu;
    fencehttp_auth **given;
    size_t n_given;
    uint16_t port;
    int quiesced;
    atomic_int in_flight;
    /* HTTPS: the chain and key new connections get (fencehttp_set_tls
     * swaps it); the older ones stay, in tls->older, until fencehttp_stop:
     * a session may use its own until it ends. */
    _Atomic(struct tls_pair *) tls;
};

/* A certificate chain and its key, parsed for GnuTLS. */
#define TLS_CHAIN_MAX 16
struct tls_pair {
    gnutls_pcert_st chain[TLS_CHAIN_MAX];
    unsigned n;
    gnutls_privkey_t key;
    unsigned char digest[32]; /* SHA-256 of the PEM texts: a reload of the same pair swaps nothing */
    int hashed;
    struct tls_pair *older;
};

struct fencehttp_conn {
    struct MHD_Connection *mhd;
    struct timespec start;
    char *body;
    size_t len, cap;
    int too_large;
    int answered;
    const struct fencehttp_client *client; /* who it is, with an auth file */
    /* An answer given later, from another thread: guarded by mu. */
    pthread_mutex_t mu;
    int suspended;   /* the connection waits without a thread */
    int later_ready; /* later holds the answer */
    struct fencehttp_response later;
};

static double since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Keep the URL and query arguments percent-encoded: api.c decodes them
 * itself, so that "%00" in a key is seen (and refused) instead of silently
 * cutting the key short at a NUL. */
static size_t keep_escaped(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return strlen(s);
}

static void mhd_logger(void *cls, const char *fm, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fm, ap);
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n')
        msg[--n] = '\0';
    fencehttp_log(FENCEHTTP_LOG_WARN, "http: %s", msg);
}

/* Our own limits on the request head, answered as JSON. libmicrohttpd's
 * per-connection pool (MHD_POOL) is larger, so only a head over that ever
 * gets its built-in HTML page. */
#define HEAD_MAX (32 * 1024)
#define URL_MAX (16 * 1024)
#define MHD_POOL (256 * 1024)

struct header_scan {
    const char *te; /* Transfer-Encoding */
    int n_te, n_content_length, n_host, n_authorization;
    size_t bytes;                    /* names and values of every header */
    const char *odd;                 /* why a name or value is not HTTP's, or NULL */
    int look_alike;                  /* odd is about a look-alike name */
    const char *const *read_headers; /* the service's own, for look_alike */
};

/* A tchar of RFC 9110 5.6.2: what a field name and a method are made of. */
static int is_tchar(unsigned char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

static int is_token(const char *s)
{
    if (s == NULL || *s == '\0')
        return 0;
    for (; *s; s++)
        if (!is_tchar((unsigned char)*s))
            return 0;
    return 1;
}

/* A control byte (or DEL); blanks count too unless blanks_ok. */
static int has_ctl(const char *s, int blanks_ok)
{
    for (; s != NULL && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == 0x7f || (ch < 0x20 && !(blanks_ok && ch == '\t')) || (ch == ' ' && !blanks_ok))
            return 1;
    }
    return 0;
}

/*
 * A header name that is not a token is refused, whatever it is meant to
 * be. libmicrohttpd 0.9.75 keeps everything before the colon as the name:
 * "Content-Length : 5" is a header named "Content-Length " to it, so that
 * request had no body and its body ran as a second, pipelined request,
 * while a lenient proxy in front reads the same bytes as a Content-Length.
 * RFC 9112 5.1 requires a 400 for whitespace before the colon; any other
 * byte outside a token (a tab, a CR, a control byte, obs-text, a
 * separator, an empty name, a name after a leading blank) is refused the
 * same way. A value may hold blanks and obs-text but no control byte: a
 * bare CR in a value is what RFC 9110 5.5 says to refuse or replace.
 */
/* Whether key is known with '_' for '-' somewhere: a token, and another
 * header to libmicrohttpd, but a gateway that maps '-' and '_' alike reads
 * it as the real one. */
static int same_but_underscores(const char *key, const char *known)
{
    size_t n = strlen(known);
    if (strlen(key) != n)
        return 0;
    size_t j = 0;
    while (j < n && (tolower((unsigned char)key[j]) == tolower((unsigned char)known[j]) ||
                     (key[j] == '_' && known[j] == '-')))
        j++;
    return j == n;
}

/* A name that is one the server or the service reads with '_' for '-'
 * somewhere ("Content_Length"). */
static int look_alike(const char *key, const char *const *extra)
{
    static const char *const known[] = {
        MHD_HTTP_HEADER_CONTENT_LENGTH,
        MHD_HTTP_HEADER_TRANSFER_ENCODING,
        MHD_HTTP_HEADER_HOST,
        MHD_HTTP_HEADER_AUTHORIZATION,
    };
    if (strchr(key, '_') == NULL)
        return 0;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (same_but_underscores(key, known[i]))
            return 1;
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++)
        if (same_but_underscores(key, extra[i]))
            return 1;
    return 0;
}

static void check_field(struct header_scan *h, const char *key, const char *value)
{
    if (h->odd != NULL)
        return;
    if (!is_token(key))
        h->odd = "a header name that is not a token (whitespace before the colon, a control byte or a "
                 "separator)";
    else if (look_alike(key, h->read_headers)) {
        h->look_alike = 1; /* the message names the service */
        h->odd = "a header name with '_' for '-'";
    } else if (has_ctl(value, 1))
        h->odd = "a control byte in a header value";
}

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct header_scan *h = cls;
    h->bytes += (key ? strlen(key) : 0) + (value ? strlen(value) : 0) + 4;
    check_field(h, key, value);
    if (key != NULL && strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        h->te = value ? value : "";
        h->n_te++;
    } else if (key != NULL && strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        h->n_content_length++;
    } else if (key != NULL && strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
        h->n_host++;
    } else if (key != NULL && strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0) {
        h->n_authorization++;
    }
    return MHD_YES;
}

/* Whether a Transfer-Encoding value is exactly "chunked" (any case,
 * surrounding spaces allowed): the only coding libmicrohttpd decodes. */
static int only_chunked(const char *te)
{
    while (*te == ' ' || *te == '\t')
        te++;
    size_t n = strlen(te);
    while (n > 0 && (te[n - 1] == ' ' || te[n - 1] == '\t'))
        n--;
    return n == 7 && strncasecmp(te, "chunked", 7) == 0;
}

/*
 * How the body is framed, checked before any of it is read. libmicrohttpd
 * 0.9.75 takes the first of two Content-Length headers, frames a body sent
 * with both Content-Length and chunked by its chunks, and waits for the end
 * of a body in a coding it does not know until the idle timeout (30 s). Two
 * parties that frame one request differently are how a request is smuggled
 * past a proxy, so all of these are refused, as JSON. Returns 0 or the
 * status with resp set.
 */
static int check_framing(const struct header_scan *head, const char *version, struct fencehttp_response *resp)
{
    if (head->n_te > 0 && (head->n_te > 1 || !only_chunked(head->te)))
        return fencehttp_error(resp, 501, "unsupported_transfer_encoding",
                               "the only Transfer-Encoding understood is chunked");
    if (head->n_te > 0 && head->n_content_length > 0)
        return fencehttp_error(resp, 400, "bad_framing",
                               "a request has Content-Length or Transfer-Encoding, not both");
    if (head->n_content_length > 1)
        return fencehttp_error(resp, 400, "bad_framing", "more than one Content-Length header");
    if (strcmp(version, MHD_HTTP_VERSION_1_1) == 0 && head->n_host != 1)
        return fencehttp_error(resp, 400, "bad_host", "an HTTP/1.1 request needs exactly one Host header");
    /* libmicrohttpd reads the first, a proxy may read the last: who asks
     * must not depend on who reads. */
    if (head->n_authorization > 1)
        return fencehttp_error(resp, 400, "bad_request_head", "more than one Authorization header");
    return 0;
}

/*
 * A NUL byte inside the request head. libmicrohttpd 0.9 parses the head in
 * place and measures every name, value and the URL with strlen, so a NUL
 * cuts one short and nothing in its API can tell ("Fencing-Token: 7\0999"
 * reads as 7; 1.0 refuses such heads itself). The head is still whole in
 * its buffer, from the method on for MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE
 * bytes, with the separators it parsed out (CR, LF, ':', the request line's
 * spaces, '?', '&', '=') turned into NULs. So the head is intact when the
 * bytes between the strings it handed us are only such separators: a NUL,
 * then either blanks (after the method or a header's colon) or at most one
 * more NUL (CRLF), or up to four at the end of the head. What a
 * cut hides, or a NUL before blanks, breaks that pattern, and so does a
 * folded header line (libmicrohttpd moves its name out of the head); a NUL
 * just before a bare LF hides nothing and may pass.
 */
struct head_spans {
    const char *lo, *hi; /* the head in libmicrohttpd's buffer */
    const char **p;      /* starts of the strings inside it */
    size_t n, cap;
};

static void span_add(struct head_spans *h, const char *s)
{
    if (s != NULL && s >= h->lo && s < h->hi && h->n < h->cap)
        h->p[h->n++] = s;
}

static enum MHD_Result span_pair(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    span_add(cls, key);
    span_add(cls, value);
    return MHD_YES;
}

static int ptr_cmp(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    return x < y ? -1 : x > y;
}

/* nuls_max: 1 after the method, 2 inside the head (CRLF), 4 at its end. */
static int gap_ok(const char *g, size_t n, size_t nuls_max)
{
    if (n == 0)
        return 1;
    if (g[0] != '\0')
        return 0;
    size_t blanks = 0, nuls = 1;
    for (size_t i = 1; i < n; i++) {
        if (g[i] == ' ' || g[i] == '\t')
            blanks++;
        else if (g[i] == '\0')
            nuls++;
        else
            return 0;
    }
    return blanks > 0 ? nuls == 1 : nuls <= nuls_max;
}

/* 1 when the head has a NUL inside a line, 0 when not, -1 on no memory. */
static int head_has_nul(struct MHD_Connection *c, const char *method, const char *url, const char *version)
{
    static const char v09[] = "0.9.";
    if (strncmp(MHD_get_version(), v09, sizeof(v09) - 1) != 0)
        return 0;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (ci == NULL || ci->header_size == 0)
        return 0;
    struct head_spans h = {.lo = method, .hi = method + ci->header_size};
    int n_hdr = MHD_get_connection_values(c, MHD_HEADER_KIND, NULL, NULL);
    int n_arg = MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, NULL, NULL);
    h.cap = 3 + 2 * (size_t)(n_hdr > 0 ? n_hdr : 0) + 2 * (size_t)(n_arg > 0 ? n_arg : 0);
    const char *local[64]; /* a usual head fits: no allocation per request */
    h.p = h.cap <= sizeof(local) / sizeof(local[0]) ? local : malloc(h.cap * sizeof(*h.p));
    if (h.p == NULL)
        return -1;
    span_add(&h, method);
    span_add(&h, url);
    span_add(&h, version);
    MHD_get_connection_values(c, MHD_HEADER_KIND, span_pair, &h);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, span_pair, &h);
    qsort(h.p, h.n, sizeof(*h.p), ptr_cmp);
    const char *cur = h.lo, *method_end = method + strlen(method);
    int bad = 0;
    for (size_t i = 0; i < h.n && !bad; i++) {
        if (h.p[i] > cur)
            bad = !gap_ok(cur, (size_t)(h.p[i] - cur), cur == method_end ? 1 : 2);
        const char *end = h.p[i] + strnlen(h.p[i], (size_t)(h.hi - h.p[i]));
        if (end > cur)
            cur = end;
    }
    if (!bad)
        bad = !gap_ok(cur, (size_t)(h.hi - cur), 4);
    if (h.p != local)
        free(h.p);
    return bad;
}

static enum MHD_Result check_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    int *bad = cls;
    *bad |= has_ctl(key, 0) || has_ctl(value, 0);
    return MHD_YES;
}

/*
 * The request line: a method that is a token, and a target without
 * blanks or control bytes. libmicrohttpd 0.9.75 takes the last word as the
 * version and everything between as the target, so "GET /a extra
 * HTTP/1.1" reached us with the target "/a extra", which a proxy may read
 * another way. The query's names and values are checked too, as
 * libmicrohttpd cut them out of the target.
 */
static const char *odd_request_line(struct MHD_Connection *c, const char *method, const char *url)
{
    if (!is_token(method))
        return "a method that is not a token";
    int bad = has_ctl(url, 0);
    if (!bad)
        MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, check_arg, &bad);
    return bad ? "a blank or a control byte in the request target" : NULL;
}

/* The path with every segment of 40 lowercase hex digits (a lock id: a
 * credential) shown as "…": a log is read by more people than may
 * release. Cut to cap. */
static void redact_ids(const char *url, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = url; *p && n + 4 < cap;) {
        size_t seg = strcspn(p, "/?");
        int id = seg == 40;
        for (size_t i = 0; id && i < seg; i++)
            id = (p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f');
        if (id) {
            memcpy(out + n, "\xe2\x80\xa6", 3);
            n += 3;
        } else {
            size_t k = seg < cap - 4 - n ? seg : cap - 4 - n;
            memcpy(out + n, p, k);
            n += k;
        }
        p += seg;
        if (*p && n + 4 < cap)
            out[n++] = *p++;
        else if (*p)
            break;
    }
    out[n] = '\0';
}

/* Queue resp (its body is handed to libmicrohttpd) and count it. */
static enum MHD_Result answer(const struct fencehttp *h, struct fencehttp_conn *st, const char *method,
                              const char *url, struct fencehttp_response *resp)
{
    struct MHD_Connection *c = st->mhd;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(resp->body_len, resp->body, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        fencehttp_response_clear(resp);
        return MHD_NO;
    }
    resp->body = NULL; /* now owned by r */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            resp->content_type ? resp->content_type : "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (resp->allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, resp->allow);
    if (resp->etag[0] != '\0')
        MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, resp->etag);
    if (resp->status == 401) {
        char realm[128];
        snprintf(realm, sizeof(realm), "Bearer realm=\"%s\"", h->o.name);
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, realm);
    }
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    st->answered = 1;

    double secs = since(&st->start);
    if (h->o.on_answer != NULL)
        h->o.on_answer(h->o.handler_arg, resp->status, secs);
    if (fencehttp_log_enabled(FENCEHTTP_LOG_DEBUG)) {
        char shown[256];
        redact_ids(url, shown, sizeof(shown));
        fencehttp_log(FENCEHTTP_LOG_DEBUG, "%.8s %s -> %d (%.1f ms)", method, shown, resp->status,
                      secs * 1e3);
    }
    fencehttp_response_clear(resp);
    return ok;
}

static int is_open_path(const struct fencehttp *h, const char *url)
{
    for (size_t i = 0; h->o.open_paths != NULL && h->o.open_paths[i] != NULL; i++)
        if (strcmp(url, h->o.open_paths[i]) == 0)
            return 1;
    return 0;
}

/* The first call of a request, once its head is in: set up its state and
 * refuse, as JSON, heads and declared bodies over our limits. */
static enum MHD_Result start_request(struct fencehttp *h, struct MHD_Connection *c, const char *url,
                                     const char *method, const char *version, void **con_cls)
{
    struct fencehttp_response resp = {0};
    struct fencehttp_conn *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return MHD_NO;
    st->mhd = c;
    pthread_mutex_init(&st->mu, NULL);
    clock_gettime(CLOCK_MONOTONIC, &st->start);
    atomic_fetch_add(&h->in_flight, 1);
    *con_cls = st;
    struct header_scan head = {.read_headers = h->o.read_headers};
    MHD_get_connection_values(c, MHD_HEADER_KIND, scan_header, &head);
    if (strlen(url) > URL_MAX) {
        fencehttp_error(&resp, 414, "uri_too_long", "the URL is over the limit of %d bytes", URL_MAX);
        return answer(h, st, method, "(long URL)", &resp);
    }
    if (head.bytes > HEAD_MAX) {
        fencehttp_error(&resp, 431, "headers_too_large", "the headers are over the limit of %d bytes",
                        HEAD_MAX);
        return answer(h, st, method, url, &resp);
    }
    int nul = head_has_nul(c, method, url, version);
    if (nul < 0)
        return MHD_NO;
    if (nul) {
        fencehttp_error(&resp, 400, "bad_request_head",
                        "a NUL byte in the request line or a header, or a folded header line");
        return answer(h, st, method, "(NUL in head)", &resp);
    }
    const char *odd = head.odd != NULL ? head.odd : odd_request_line(c, method, url);
    if (odd != NULL) {
        /* Answered before the body is read: libmicrohttpd closes the
         * connection, so no byte after this head is read as a request. */
        if (head.look_alike)
            fencehttp_error(&resp, 400, "bad_request_head",
                            "a header name with '_' for '-' in a header %s reads (Content_Length, say)",
                            h->o.name);
        else
            fencehttp_error(&resp, 400, "bad_request_head", "%s", odd);
        return answer(h, st, "(odd)", "(odd head)", &resp);
    }
    if (check_framing(&head, version, &resp) != 0)
        return answer(h, st, method, url, &resp);
    /* With an auth file, everything but the open paths (the health check)
     * needs a known bearer token, and a stranger's body is never read. */
    const fencehttp_auth *auth = atomic_load(&h->auth);
    if (auth != NULL && !is_open_path(h, url)) {
        const char *ah = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        st->client = fencehttp_auth_check(auth, ah);
        if (st->client == NULL) {
            fencehttp_error(&resp, 401, "unauthorized", "%s",
                            ah == NULL ? "this server needs an Authorization: Bearer header"
                                       : "the bearer token is not known to this server");
            return answer(h, st, method, url, &resp);
        }
    }
    /* Refuse a declared oversize body before reading it; a client that
     * sent "Expect: 100-continue" never has to send it at all. */
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl != NULL && strtoull(cl, NULL, 10) > h->o.max_body) {
        fencehttp_error(&resp, 413, "body_too_large", "the body is over the limit of %zu bytes",
                        h->o.max_body);
        return answer(h, st, method, url, &resp);
    }
    return MHD_YES;
}

/* Append one piece of the body. A body over the limit (chunked, without a
 * declared length) is read to its end and dropped; the handler is told. */
static enum MHD_Result collect_body(const struct fencehttp *h, struct fencehttp_conn *st, const char *data,
                                    size_t n)
{
    size_t max_body = h->o.max_body;
    if (st->too_large || n > max_body - st->len) {
        st->too_large = 1;
        return MHD_YES;
    }
    if (st->len + n > st->cap) {
        size_t cap = st->cap ? st->cap : 4096;
        while (cap < st->len + n)
            cap *= 2;
        if (cap > max_body)
            cap = max_body;
        char *b = realloc(st->body, cap);
        if (b == NULL)
            return MHD_NO;
        st->body = b;
        st->cap = cap;
    }
    memcpy(st->body + st->len, data, n);
    st->len += n;
    return MHD_YES;
}

struct arg_vec {
    struct fencehttp_arg a[FENCEHTTP_ARGS_MAX];
    size_t n;
    int overflow;
};

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct arg_vec *v = cls;
    if (v->n == FENCEHTTP_ARGS_MAX) {
        v->overflow = 1;
        return MHD_NO;
    }
    v->a[v->n].name = key ? key : "";
    v->a[v->n].value = value;
    v->n++;
    return MHD_YES;
}

/* The whole request is in: hand it to the service, and send its answer now
 * or wait for it without a thread. */
static enum MHD_Result dispatch(struct fencehttp *h, struct fencehttp_conn *st, const char *url,
                                const char *method)
{
    struct fencehttp_response resp = {0};
    struct arg_vec args = {.n = 0};
    MHD_get_connection_values(st->mhd, MHD_GET_ARGUMENT_KIND, collect_arg, &args);
    if (args.overflow) {
        fencehttp_error(&resp, 400, "bad_parameter", "more than %d query parameters", FENCEHTTP_ARGS_MAX);
        return answer(h, st, method, url, &resp);
    }
    struct fencehttp_request req = {
        .method = method,
        .path = url,
        .args = args.a,
        .n_args = args.n,
        .body = st->body,
        .body_len = st->len,
        .body_too_large = st->too_large,
        .client = st->client,
        .conn = st,
    };
    int rc = h->o.handler(h->o.handler_arg, &req, &resp);
    if (rc == FENCEHTTP_LATER) {
        fencehttp_response_clear(&resp);
        pthread_mutex_lock(&st->mu);
        if (!st->later_ready) {
            /* Resumed by fencehttp_answer_later, which takes the same lock:
             * it cannot come between the check and the suspension. */
            st->suspended = 1;
            MHD_suspend_connection(st->mhd);
            pthread_mutex_unlock(&st->mu);
            return MHD_YES;
        }
        resp = st->later;
        memset(&st->later, 0, sizeof(st->later));
        st->later_ready = 0;
        pthread_mutex_unlock(&st->mu);
    }
    if (resp.body == NULL)
        fencehttp_error(&resp, 500, "internal", "no answer");
    return answer(h, st, method, url, &resp);
}

void fencehttp_answer_later(fencehttp_conn *st, struct fencehttp_response *resp)
{
    if (st == NULL || resp == NULL)
        return;
    pthread_mutex_lock(&st->mu);
    fencehttp_response_clear(&st->later);
    st->later = *resp;
    memset(resp, 0, sizeof(*resp));
    st->later_ready = 1;
    if (st->suspended) {
        st->suspended = 0;
        MHD_resume_connection(st->mhd);
    }
    pthread_mutex_unlock(&st->mu);
}

struct header_count {
    const char *name;
    const char *value;
    int count;
};

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct header_count *hc = cls;
    if (key != NULL && strcasecmp(key, hc->name) == 0) {
        hc->value = value ? value : "";
        hc->count++;
    }
    return MHD_YES;
}

const char *fencehttp_header(fencehttp_conn *conn, const char *name, int *count)
{
    struct header_count hc = {.name = name};
    if (conn != NULL && name != NULL)
        MHD_get_connection_values(conn->mhd, MHD_HEADER_KIND, count_header, &hc);
    if (count != NULL)
        *count = hc.count;
    return hc.value;
}

int fencehttp_conn_fd(fencehttp_conn *conn)
{
    if (conn == NULL)
        return -1;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn->mhd, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci != NULL ? (int)ci->connect_fd : -1;
}

/* libmicrohttpd calls this once when the head is in, once per piece of the
 * body, once more when the body is complete (size 0), and once again after
 * a suspended request was resumed with its answer. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    struct fencehttp *h = cls;
    struct fencehttp_conn *st = *con_cls;
    if (st == NULL)
        return start_request(h, c, url, method, version, con_cls);
    if (st->answered) {
        *upload_data_size = 0; /* drop whatever follows an early answer */
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return collect_body(h, st, upload_data, n);
    }
    pthread_mutex_lock(&st->mu);
    int ready = st->later_ready;
    struct fencehttp_response resp = st->later;
    memset(&st->later, 0, sizeof(st->later));
    st->later_ready = 0;
    pthread_mutex_unlock(&st->mu);
    if (ready)
        return answer(h, st, method, url, &resp);
    return dispatch(h, st, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode why)
{
    (void)c;
    struct fencehttp *h = cls;
    struct fencehttp_conn *st = *con_cls;
    if (st == NULL)
        return;
    if (why != MHD_REQUEST_TERMINATED_COMPLETED_OK && fencehttp_log_enabled(FENCEHTTP_LOG_DEBUG))
        fencehttp_log(FENCEHTTP_LOG_DEBUG, "request ended early (code %d)", (int)why);
    fencehttp_response_clear(&st->later);
    pthread_mutex_destroy(&st->mu);
    free(st->body);
    free(st);
    *con_cls = NULL;
    atomic_fetch_sub(&h->in_flight, 1);
}

static void tls_pair_free(struct tls_pair *p)
{
    while (p != NULL) {
        struct tls_pair *older = p->older;
        for (unsigned i = 0; i < p->n; i++)
            gnutls_pcert_deinit(&p->chain[i]);
        if (p->key != NULL)
            gnutls_privkey_deinit(p->key);
        free(p);
        p = older;
    }
}

/* Is key the private key of cert's public key? Compared by key id. */
static int tls_key_matches(gnutls_pcert_st *cert, gnutls_privkey_t key)
{
    gnutls_pubkey_t pub = NULL;
    unsigned char a[64], b[64];
    size_t al = sizeof(a), bl = sizeof(b);
    int ok = gnutls_pubkey_init(&pub) == 0 && gnutls_pubkey_import_privkey(pub, key, 0, 0) == 0 &&
             gnutls_pubkey_get_key_id(pub, GNUTLS_KEYID_USE_SHA256, a, &al) == 0 &&
             gnutls_pubkey_get_key_id(cert->pubkey, GNUTLS_KEYID_USE_SHA256, b, &bl) == 0 && al == bl &&
             memcmp(a, b, al) == 0;
    if (pub != NULL)
        gnutls_pubkey_deinit(pub);
    return ok;
}

static struct tls_pair *tls_pair_new(const char *cert_pem, const char *key_pem, char *errbuf, size_t errcap)
{
    struct tls_pair *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        snprintf(errbuf, errcap, "out of memory");
        return NULL;
    }
    gnutls_datum_t c = {(unsigned char *)cert_pem, (unsigned)strlen(cert_pem)};
    gnutls_datum_t k = {(unsigned char *)key_pem, (unsigned)strlen(key_pem)};
    p->n = TLS_CHAIN_MAX;
    int rc = gnutls_pcert_list_import_x509_raw(p->chain, &p->n, &c, GNUTLS_X509_FMT_PEM, 0);
    if (rc < 0 || p->n == 0) {
        p->n = 0;
        snprintf(errbuf, errcap, "TLS certificate: %s", rc < 0 ? gnutls_strerror(rc) : "no certificate");
        tls_pair_free(p);
        return NULL;
    }
    if ((rc = gnutls_privkey_init(&p->key)) < 0 ||
        (rc = gnutls_privkey_import_x509_raw(p->key, &k, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
        snprintf(errbuf, errcap, "TLS key: %s", gnutls_strerror(rc));
        tls_pair_free(p);
        return NULL;
    }
    if (!tls_key_matches(&p->chain[0], p->key)) {
        snprintf(errbuf, errcap, "TLS key: not the key of the certificate");
        tls_pair_free(p);
        return NULL;
    }
    gnutls_hash_hd_t hd;
    if (gnutls_hash_init(&hd, GNUTLS_DIG_SHA256) == 0) {
        gnutls_hash(hd, c.data, c.size);
        gnutls_hash(hd, "\n", 1);
        gnutls_hash(hd, k.data, k.size);
        gnutls_hash_deinit(hd, p->digest);
        p->hashed = 1;
    }
    return p;
}

/* Each connection names its server, for the certificate callback (which
 * has no argument of its own: GnuTLS gives it the session, whose pointer
 * libmicrohttpd sets to the connection). Set as a connection starts,
 * before its handshake. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    (void)c;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED)
        *socket_context = cls;
}

static int tls_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                        const gnutls_pk_algorithm_t *algos, int nalgos, gnutls_pcert_st **chain,
                        unsigned int *n, gnutls_privkey_t *key)
{
    (void)req_ca_dn, (void)nreqs, (void)algos, (void)nalgos;
    struct MHD_Connection *con = gnutls_session_get_ptr(session);
    const union MHD_ConnectionInfo *ci =
        con != NULL ? MHD_get_connection_info(con, MHD_CONNECTION_INFO_SOCKET_CONTEXT) : NULL;
    fencehttp *h = ci != NULL ? ci->socket_context : NULL;
    struct tls_pair *p = h != NULL ? atomic_load(&h->tls) : NULL;
    if (p == NULL)
        return -1; /* the handshake fails */
    *chain = p->chain;
    *n = p->n;
    *key = p->key;
    return 0;
}

int fencehttp_tls_check(const char *cert_pem, const char *key_pem, char *errbuf, size_t errcap)
{
    if (cert_pem == NULL || key_pem == NULL) {
        snprintf(errbuf, errcap, "fencehttp_tls_check: bad arguments");
        return -EINVAL;
    }
    struct tls_pair *p = tls_pair_new(cert_pem, key_pem, errbuf, errcap);
    tls_pair_free(p);
    return p != NULL ? 0 : -EINVAL;
}

int fencehttp_set_tls(fencehttp *h, const char *cert_pem, const char *key_pem, char *errbuf, size_t errcap)
{
    if (h == NULL || cert_pem == NULL || key_pem == NULL || atomic_load(&h->tls) == NULL) {
        snprintf(errbuf, errcap, "fencehttp_set_tls: %s",
                 h == NULL || cert_pem == NULL || key_pem == NULL ? "bad arguments"
                                                                  : "a server started without HTTPS");
        return -EINVAL;
    }
    struct tls_pair *p = tls_pair_new(cert_pem, key_pem, errbuf, errcap);
    if (p == NULL)
        return -EINVAL;
    pthread_mutex_lock(&h->given_mu); /* one swap at a time */
    struct tls_pair *cur = atomic_load(&h->tls);
    if (cur->hashed && p->hashed && memcmp(cur->digest, p->digest, sizeof(p->digest)) == 0) {
        tls_pair_free(p); /* the same pair: nothing to keep */
    } else {
        p->older = cur;
        atomic_store(&h->tls, p);
    }
    pthread_mutex_unlock(&h->given_mu);
    return 0;
}

int fencehttp_start(const struct fencehttp_options *o, fencehttp **out, char *errbuf, size_t errcap)
{
    if (o == NULL || out == NULL || o->addr == NULL || o->handler == NULL || o->threads < 1 ||
        o->max_body == 0) {
        snprintf(errbuf, errcap, "fencehttp_start: bad options");
        return -EINVAL;
    }
    fencehttp *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return -ENOMEM;
    h->o = *o;
    if (h->o.name == NULL)
        h->o.name = "fencelock";
    atomic_init(&h->in_flight, 0);
    atomic_init(&h->auth, o->auth);
    pthread_mutex_init(&h->given_mu, NULL);
    /* poll() unless asked: libmicrohttpd 0.9.75's edge-triggered epoll can
     * miss the end of a half-closed connection whose bytes and FIN arrive
     * together, leaving it open until the idle timeout. */
    unsigned flags = (o->use_epoll ? MHD_USE_EPOLL_INTERNAL_THREAD : MHD_USE_POLL_INTERNAL_THREAD) |
                     MHD_USE_ERROR_LOG | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME;
    if (o->addr->sa_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if ((o->tls_cert_pem == NULL) != (o->tls_key_pem == NULL)) {
        snprintf(errbuf, errcap, "HTTPS needs both a certificate and a key");
        free(h);
        return -EINVAL;
    }
    /* HTTPS through libmicrohttpd's GnuTLS, TLS 1.2 and 1.3 only; the
     * certificate is given per handshake (tls_retrieve), so that a reload
     * can change it. */
    union {
        gnutls_certificate_retrieve_function2 *f;
        void *p;
    } retrieve = {.f = tls_retrieve}; /* an option item holds a void * */
    struct MHD_OptionItem tls_opt[] = {
        {MHD_OPTION_HTTPS_CERT_CALLBACK, 0, retrieve.p},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"},
        {MHD_OPTION_END, 0, NULL},
    };
    atomic_init(&h->tls, NULL);
    if (o->tls_cert_pem != NULL) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES ||
            MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK) != MHD_YES) {
            snprintf(errbuf, errcap, "this libmicrohttpd was built without TLS");
            free(h);
            return -EINVAL;
        }
        struct tls_pair *p = tls_pair_new(o->tls_cert_pem, o->tls_key_pem, errbuf, errcap);
        if (p == NULL) {
            free(h);
            return -EINVAL;
        }
        atomic_store(&h->tls, p);
        flags |= MHD_USE_TLS;
    } else {
        tls_opt[0].option = MHD_OPTION_END;
    }
    /* The logger comes first so that every message of libmicrohttpd goes
     * through it. The header buffer must hold a 1024-byte key
     * percent-encoded (3 KiB) plus headers: 64 KiB leaves room without
     * inviting abuse. Idle connections are closed after 30 s by default. */
    /* A pool of one draws a warning: one thread is the internal thread. */
    struct MHD_OptionItem pool_opt[] = {
        {o->threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, o->threads, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    unsigned idle_s = o->idle_timeout_s ? o->idle_timeout_s : 30;
    unsigned max_conn = o->max_connections ? o->max_connections : 1000;
    // clang-format off
    h->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h,
                                 MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, NULL,
                                 MHD_OPTION_SOCK_ADDR, o->addr,
                                 MHD_OPTION_ARRAY, pool_opt,
                                 MHD_OPTION_ARRAY, tls_opt,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                                 MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                                 MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped, NULL,
                                 MHD_OPTION_CONNECTION_TIMEOUT, idle_s,
                                 MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MHD_POOL,
                                 MHD_OPTION_CONNECTION_LIMIT, max_conn,
                                 MHD_OPTION_END);
    // clang-format on
    if (h->daemon == NULL) {
        snprintf(errbuf, errcap, "cannot listen (address in use or not available?)");
        tls_pair_free(atomic_load(&h->tls));
        free(h);
        return -EIO;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : 0;
    *out = h;
    return 0;
}

uint16_t fencehttp_port(const fencehttp *h)
{
    return h->port;
}

int fencehttp_in_flight(const fencehttp *h)
{
    return h == NULL ? 0 : atomic_load(&((fencehttp *)h)->in_flight);
}

void fencehttp_quiesce(fencehttp *h)
{
    if (h == NULL || h->quiesced)
        return;
    MHD_socket fd = MHD_quiesce_daemon(h->daemon);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
    h->quiesced = 1;
}

int fencehttp_drain(fencehttp *h, int timeout_ms)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(&h->in_flight) > 0) {
        if (since(&t0) * 1000 >= timeout_ms)
            return -ETIMEDOUT;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

int fencehttp_set_auth(fencehttp *h, fencehttp_auth *auth)
{
    if (h == NULL || auth == NULL || atomic_load(&h->auth) == NULL)
        return -EINVAL; /* a server without tokens stays without: a restart adds them */
    pthread_mutex_lock(&h->given_mu);
    fencehttp_auth **v = realloc(h->given, (h->n_given + 1) * sizeof(*v));
    if (v != NULL) {
        h->given = v;
        h->given[h->n_given++] = auth;
    }
    pthread_mutex_unlock(&h->given_mu);
    if (v == NULL)
        return -ENOMEM;
    atomic_store(&h->auth, auth);
    return 0;
}

void fencehttp_stop(fencehttp *h)
{
    if (h == NULL)
        return;
    MHD_stop_daemon(h->daemon);
    tls_pair_free(atomic_load(&h->tls));
    for (size_t i = 0; i < h->n_given; i++)
        fencehttp_auth_free(h->given[i]);
    free(h->given);
    pthread_mutex_destroy(&h->given_mu);
    free(h);
}
