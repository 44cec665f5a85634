/* The JSON answers every service gives to what it refuses, the
 * percent-decoding of names taken from a URL, and text answers. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <fencehttp/fencehttp.h>

void fencehttp_response_clear(struct fencehttp_response *r)
{
    if (r == NULL)
        return;
    free(r->body);
    memset(r, 0, sizeof(*r));
}

char *fencehttp_error_json(const char *code, const char *message, size_t *len)
{
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", message ? message : "");
    /* Messages quote client bytes (a parameter name, a method, jansson's
     * excerpt of a bad body); JSON needs UTF-8, so keep them printable ASCII
     * rather than fail to build the answer. */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
            *p = '?';
    json_t *o = json_pack("{s:s, s:s}", "error", code ? code : "internal", "message", msg);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text != NULL && len != NULL)
        *len = strlen(text);
    return text;
}

/* A fixed answer for when even building the answer ran out of memory. */
static const char oom_body[] = "{\"error\":\"internal\",\"message\":\"out of memory\"}";

int fencehttp_verror(struct fencehttp_response *resp, int status, const char *code, const char *fmt,
                     va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t len = 0;
    char *text = fencehttp_error_json(code, msg, &len);
    free(resp->body);
    memset(resp, 0, sizeof(*resp));
    resp->content_type = "application/json";
    if (text == NULL) {
        resp->status = 500;
        resp->body = malloc(sizeof(oom_body));
        resp->body_len = resp->body ? sizeof(oom_body) - 1 : 0;
        if (resp->body)
            memcpy(resp->body, oom_body, sizeof(oom_body));
        return status;
    }
    resp->status = status;
    resp->body = text;
    resp->body_len = len;
    return status;
}

int fencehttp_error(struct fencehttp_response *resp, int status, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fencehttp_verror(resp, status, code, fmt, ap);
    va_end(ap);
    return status;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int fencehttp_decode(const char *s, size_t len, char **out, size_t *out_len)
{
    if (s == NULL || out == NULL || out_len == NULL)
        return -EINVAL;
    char *d = malloc(len + 1);
    if (d == NULL)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '%') {
            if (len - i < 3 || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0) {
                free(d);
                return -EINVAL;
            }
            c = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        }
        if (c == '\0') {
            /* Names are C strings in too many places downstream to allow. */
            free(d);
            return -EINVAL;
        }
        d[n++] = c;
    }
    d[n] = '\0';
    *out = d;
    *out_len = n;
    return 0;
}

void fencehttp_text_printf(struct fencehttp_text *t, const char *fmt, ...)
{
    if (t->oom)
        return;
    for (;;) {
        int n = -1;
        if (t->p != NULL) {
            va_list ap;
            va_start(ap, fmt);
            n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
            va_end(ap);
            if (n >= 0 && (size_t)n < t->cap - t->len) {
                t->len += (size_t)n;
                return;
            }
        }
        size_t cap = t->cap * 2 + (n > 0 ? (size_t)n : 0) + 4096;
        char *p = realloc(t->p, cap);
        if (p == NULL || (t->p != NULL && n < 0)) {
            free(p != NULL ? p : t->p);
            memset(t, 0, sizeof(*t));
            t->oom = 1;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
}
