/*
 * A small blocking HTTP/1.1 client for loopback tests and the scenario
 * replays: one request per connection (Connection: close), a deadline on
 * the whole exchange, Content-Length or read-to-close bodies.
 */
#ifndef FENCELOCK_HTTP_H
#define FENCELOCK_HTTP_H

#include <stddef.h>

struct hc_response {
    int status;    /* HTTP status code */
    char *headers; /* raw header block, NUL-terminated (malloc'd) */
    char *body;    /* NUL-terminated (malloc'd); body_len excludes the NUL */
    size_t body_len;
};

/*
 * Send one request to host:port and read the whole response into *out
 * (free it with hc_response_free). headers: "Name: value" strings,
 * NULL-terminated, may be NULL. body may be NULL. Returns 0, or a negative
 * errno (-ETIMEDOUT past timeout_ms, -ECONNREFUSED, -EPROTO for a reply
 * that is not HTTP).
 */
int hc_request(const char *host, int port, const char *method, const char *path, const char *const *headers,
               const char *body, size_t body_len, int timeout_ms, struct hc_response *out);

/* Send raw bytes as they are (hostile requests) and read the response. */
int hc_raw(const char *host, int port, const char *raw, size_t raw_len, int timeout_ms,
           struct hc_response *out);

/* A header's value in a response (case-insensitive name), copied into buf;
 * returns 0 or -ENOENT. */
int hc_header(const struct hc_response *r, const char *name, char *buf, size_t cap);

void hc_response_free(struct hc_response *r);

#endif
