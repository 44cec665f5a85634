/*
 * A minimal HTTP/1.1 client for tests and the scenario replays: one request per
 * connection over loopback, "Connection: close", read to EOF. Every call is
 * bounded in time by socket timeouts.
 */
#ifndef FENCELOCK_HTTP_H
#define FENCELOCK_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct hc_response {
    int status; /* 0 if no status line arrived */
    char *head; /* status line and headers, NUL-terminated */
    char *body; /* NUL-terminated; body_len excludes the NUL */
    size_t body_len;
    json_t *json; /* the body parsed as JSON, or NULL */
};

/* Socket timeout of every call, in ms. */
#define HC_TIMEOUT_MS 15000

/*
 * Send method path (already percent-encoded) to 127.0.0.1:port with
 * extra_headers (each line ending in "\r\n"; may be NULL) and body (may be
 * NULL). Returns 0 with *r filled (caller clears), or a negative errno when
 * the connection failed or was dropped without an answer.
 */
int hc_request(uint16_t port, const char *method, const char *path, const char *extra_headers,
               const char *body, size_t body_len, struct hc_response *r);

/* Send raw bytes, then read the answer (shut_write: half-close after
 * sending). Same returns as hc_request. */
int hc_raw(uint16_t port, const char *bytes, size_t len, int shut_write, struct hc_response *r);

/* Shorthands: PUT a JSON body, GET a path. */
int hc_put(uint16_t port, const char *path, const char *json_body, const char *extra_headers,
           struct hc_response *r);
int hc_get(uint16_t port, const char *path, struct hc_response *r);

/* The value of header name (case-insensitive) copied into buf, or NULL. */
const char *hc_header(const struct hc_response *r, const char *name, char *buf, size_t cap);

/* Percent-encode every byte of [s, s+len) that is not unreserved. The
 * result is malloc'ed. */
char *hc_escape(const char *s, size_t len);

void hc_response_clear(struct hc_response *r);

#endif
