/*
 * storage-guard's request handling below HTTP (sg_api_handle): routing,
 * percent-decoding, token and JSON validation, and the store, on an
 * in-memory SQLite database. Whoever reaches storage-guard's port can send
 * it anything.
 *
 * Input: one flags byte, then
 * "method\npath[?query]\ntoken\nif-match\nif-none-match\nbody".
 *   flags bit 0: send the token line as the Fencing-Token header
 *   flags bit 1: the body went over the size limit (body_too_large)
 *   flags bit 2: the server runs unfenced
 *   flags bit 3: send the If-Match line
 *   flags bit 4: send the If-None-Match line
 *   flags bit 5: the server runs with --auth-file (the client passed it)
 *   flags bit 6: the client is an admin
 *   flags bit 7: tokens more than a minute past the clock are refused
 * The query is split on '&' and '=' as libmicrohttpd would hand it over.
 * The store lives across inputs (later requests see earlier writes) and is
 * reopened every few thousand inputs to keep memory flat.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "store.h"

#define ARGS_MAX 16
#define STORE_REUSE 4096
/* The server's clock: tokens in the seeds are microseconds near it. */
#define NOW_MS 1731234567000LL

static sg_store *store;
static unsigned store_uses;

/* The next '\n'-terminated field of [*p, end) as a new string; the rest if
 * there is no '\n'. */
static char *field(const char **p, const char *end)
{
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    const char *fend = nl ? nl : end;
    size_t len = (size_t)(fend - *p);
    char *s = malloc(len + 1);
    if (s == NULL)
        abort();
    memcpy(s, *p, len);
    s[len] = '\0';
    *p = nl ? nl + 1 : end;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (store == NULL || store_uses++ >= STORE_REUSE) {
        char err[256];
        sg_store_close(store);
        store = NULL;
        store_uses = 0;
        if (sg_store_open(":memory:", &store, err, sizeof(err)) != 0)
            abort();
    }
    unsigned flags = data[0];
    const char *p = (const char *)data + 1, *end = (const char *)data + size;
    char *method = field(&p, end);
    char *target = field(&p, end);
    char *token = field(&p, end);
    char *if_match = field(&p, end);
    char *if_none_match = field(&p, end);
    /* The body: exactly the bytes left, in a buffer of that size (not
     * NUL-terminated, as libmicrohttpd's upload data is not). */
    size_t body_len = (size_t)(end - p);
    char *body = malloc(body_len ? body_len : 1);
    if (body == NULL)
        abort();
    memcpy(body, p, body_len);

    /* The query: what libmicrohttpd hands over, name and value pairs. NUL
     * bytes inside a field end the C strings early, as they would there. */
    struct sg_arg args[ARGS_MAX];
    size_t n_args = 0;
    char *q = strchr(target, '?');
    if (q != NULL) {
        *q++ = '\0';
        while (q != NULL && n_args < ARGS_MAX) {
            char *amp = strchr(q, '&');
            if (amp != NULL)
                *amp++ = '\0';
            char *eq = strchr(q, '=');
            if (eq != NULL)
                *eq++ = '\0';
            args[n_args].name = q;
            args[n_args].value = eq;
            n_args++;
            q = amp;
        }
    }

    struct sg_request req = {
        .method = method,
        .path = target,
        .args = args,
        .n_args = n_args,
        .token_header = (flags & 1) ? token : NULL,
        .if_match = (flags & 8) ? if_match : NULL,
        .if_none_match = (flags & 16) ? if_none_match : NULL,
        .body = body,
        .body_len = body_len,
        .body_too_large = (flags & 2) != 0,
        .unfenced = (flags & 4) != 0,
        .auth_enabled = (flags & 32) != 0,
        .admin = (flags & 64) != 0,
        .max_token_ahead_ms = (flags & 128) ? 60000 : 0,
    };
    /* An unfenced server also runs its store unfenced (main.c). */
    sg_store_set_unfenced(store, req.unfenced);
    struct sg_response resp = {0};
    sg_api_handle(store, &req, NOW_MS, &resp);
    if (getenv("FUZZ_VERBOSE") != NULL) /* to check where a seed goes */
        fprintf(stderr, "%s %s: %d %.*s\n", method, target, resp.status, (int)resp.body_len,
                resp.body ? resp.body : "");
    /* Every answer is a real HTTP status with a body. */
    if (resp.status < 200 || resp.status > 599 || (resp.body == NULL && resp.body_len != 0))
        abort();
    sg_response_clear(&resp);

    free(method);
    free(target);
    free(token);
    free(if_match);
    free(if_none_match);
    free(body);
    return 0;
}
