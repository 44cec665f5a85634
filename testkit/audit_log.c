/* storage-guard's audit log, read over HTTP, and the checks run on it. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fencelock-testkit/testkit.h>

#define PAGE 1000

void tk_log_clear(struct tk_log *log)
{
    if (log == NULL)
        return;
    for (size_t i = 0; i < log->n; i++) {
        free(log->entries[i].key);
        free(log->entries[i].resource);
    }
    free(log->entries);
    log->entries = NULL;
    log->n = 0;
}

static uint64_t num(json_t *o, const char *name)
{
    json_t *v = json_object_get(o, name);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

static void str(json_t *o, const char *name, char *buf, size_t cap)
{
    const char *v = json_string_value(json_object_get(o, name));
    snprintf(buf, cap, "%s", v ? v : "");
}

static char *dup_str(json_t *o, const char *name)
{
    const char *v = json_string_value(json_object_get(o, name));
    return strdup(v ? v : "");
}

int tk_log_fetch(uint16_t port, const char *resource, struct tk_log *out)
{
    if (port == 0 || out == NULL)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    char *res_esc = NULL;
    if (resource != NULL && (res_esc = hc_escape(resource, strlen(resource))) == NULL)
        return -ENOMEM;
    size_t cap = 0;
    uint64_t after = 0;
    int rc = 0;
    for (;;) {
        size_t plen = 64 + (res_esc ? strlen(res_esc) : 0);
        char *path = malloc(plen);
        if (path == NULL) {
            rc = -ENOMEM;
            goto out;
        }
        snprintf(path, plen, "/v1/log?limit=%d&after=%" PRIu64 "%s%s", PAGE, after,
                 res_esc ? "&resource=" : "", res_esc ? res_esc : "");
        struct hc_response r = {0};
        rc = hc_get(port, path, &r);
        free(path);
        if (rc != 0)
            goto out;
        json_t *entries = json_object_get(r.json, "entries");
        if (r.status != 200 || !json_is_array(entries)) {
            hc_response_clear(&r);
            rc = -EPROTO;
            goto out;
        }
        size_t n = json_array_size(entries);
        if (out->n + n > cap) {
            size_t ncap = cap ? cap * 2 : 256;
            while (ncap < out->n + n)
                ncap *= 2;
            struct tk_log_entry *e = realloc(out->entries, ncap * sizeof(*e));
            if (e == NULL) {
                hc_response_clear(&r);
                rc = -ENOMEM;
                goto out;
            }
            out->entries = e;
            cap = ncap;
        }
        for (size_t i = 0; i < n; i++) {
            json_t *o = json_array_get(entries, i);
            struct tk_log_entry *e = &out->entries[out->n];
            memset(e, 0, sizeof(*e));
            e->seq = num(o, "seq");
            e->time_ms = num(o, "time_ms");
            str(o, "op", e->op, sizeof(e->op));
            str(o, "outcome", e->outcome, sizeof(e->outcome));
            e->token = num(o, "token");
            e->last_token = num(o, "last_token");
            e->version = num(o, "version");
            e->batch = num(o, "batch");
            e->key = dup_str(o, "key");
            e->resource = dup_str(o, "resource");
            out->n++;
            if (e->key == NULL || e->resource == NULL) {
                hc_response_clear(&r);
                rc = -ENOMEM;
                goto out;
            }
        }
        uint64_t next = num(r.json, "next_after");
        hc_response_clear(&r);
        if (n == 0 || next <= after)
            break;
        after = next;
    }
out:
    free(res_esc);
    if (rc != 0)
        tk_log_clear(out);
    return rc;
}

static int accepted_write(const struct tk_log_entry *e)
{
    return strcmp(e->outcome, "accepted") == 0 && strcmp(e->op, "write") == 0;
}

/* The largest accepted token seen so far, per resource: a small open table
 * keyed by resource name, enough for test logs. */
struct res_max {
    const char *resource;
    uint64_t token;
    uint64_t seq;
};

int tk_check_no_stale_write(const struct tk_log *log, char *msg, size_t cap)
{
    if (log == NULL || (log->n > 0 && log->entries == NULL))
        return -EINVAL;
    if (msg != NULL && cap > 0)
        msg[0] = '\0';
    struct res_max *m = calloc(log->n + 1, sizeof(*m));
    if (m == NULL)
        return -ENOMEM;
    size_t nm = 0;
    int bad = 0;
    for (size_t i = 0; i < log->n; i++) {
        const struct tk_log_entry *e = &log->entries[i];
        if (strcmp(e->outcome, "accepted") != 0 || strcmp(e->op, "reset") == 0)
            continue;
        size_t j = 0;
        while (j < nm && strcmp(m[j].resource, e->resource) != 0)
            j++;
        if (j == nm) {
            m[nm].resource = e->resource;
            nm++;
        }
        if (e->token < m[j].token) {
            if (bad == 0 && msg != NULL && cap > 0)
                snprintf(msg, cap,
                         "stale %s accepted: seq %" PRIu64 " on resource \"%s\" carried token %" PRIu64
                         " after seq %" PRIu64 " was accepted with token %" PRIu64,
                         e->op, e->seq, e->resource, e->token, m[j].seq, m[j].token);
            bad++;
            continue;
        }
        m[j].token = e->token;
        m[j].seq = e->seq;
    }
    free(m);
    return bad;
}

int tk_check_no_ack_lost(const struct tk_log *log, const struct tk_ack *acks, size_t n, char *msg, size_t cap)
{
    if (log == NULL || (log->n > 0 && log->entries == NULL) || (n > 0 && acks == NULL))
        return -EINVAL;
    if (msg != NULL && cap > 0)
        msg[0] = '\0';
    int bad = 0;
    for (size_t a = 0; a < n; a++) {
        if (acks[a].key == NULL)
            return -EINVAL;
        int found = 0;
        for (size_t i = 0; i < log->n; i++) {
            const struct tk_log_entry *e = &log->entries[i];
            if (accepted_write(e) && e->version == acks[a].version && strcmp(e->key, acks[a].key) == 0) {
                found++;
                if (e->token != acks[a].token)
                    found += 100; /* the same version written by another write */
            }
        }
        if (found != 1) {
            if (bad == 0 && msg != NULL && cap > 0)
                snprintf(msg, cap,
                         "acknowledged write of \"%s\" version %" PRIu64 " token %" PRIu64
                         " %s in the audit log",
                         acks[a].key, acks[a].version, acks[a].token,
                         found == 0 ? "is missing" : "does not match a single accepted row");
            bad++;
        }
    }
    return bad;
}
