/* A small blocking HTTP/1.1 client: one request per connection. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"
#include "proc.h"

#define RESPONSE_MAX (64 * 1024 * 1024)

static int connect_to(const char *host, int port, long long deadline)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return -EINVAL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return -e;
    }
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    long long left = deadline - hp_now_ms();
    if (left <= 0 || poll(&p, 1, (int)left) != 1) {
        close(fd);
        return -ETIMEDOUT;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
        close(fd);
        return -err;
    }
    return fd;
}

static int send_all(int fd, const char *buf, size_t len, long long deadline)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -errno;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        long long left = deadline - hp_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) == 0)
            return -ETIMEDOUT;
    }
    return 0;
}

/* Find the end of the header block; returns its length with the blank
 * line, or 0 if not complete yet. */
static size_t header_end(const char *b, size_t n)
{
    for (size_t i = 3; i < n; i++)
        if (b[i - 3] == '\r' && b[i - 2] == '\n' && b[i - 1] == '\r' && b[i] == '\n')
            return i + 1;
    return 0;
}

static long content_length(const char *hdr, size_t hlen)
{
    const char *p = hdr;
    while (p < hdr + hlen) {
        const char *eol = memchr(p, '\n', (size_t)(hdr + hlen - p));
        if (eol == NULL)
            break;
        if (strncasecmp(p, "Content-Length:", 15) == 0)
            return strtol(p + 15, NULL, 10);
        p = eol + 1;
    }
    return -1;
}

static int exchange(int fd, const char *req, size_t req_len, long long deadline, struct hc_response *out)
{
    int rc = send_all(fd, req, req_len, deadline);
    /* A server may answer (413, 400) and close before reading it all. */
    int send_failed = rc;
    size_t cap = 4096, n = 0, hlen = 0;
    long clen = -1;
    char *buf = malloc(cap + 1);
    if (buf == NULL)
        return -ENOMEM;
    for (;;) {
        if (hlen && clen >= 0 && n >= hlen + (size_t)clen)
            break;
        if (n == cap) {
            if (cap >= RESPONSE_MAX) {
                rc = -EMSGSIZE;
                goto fail;
            }
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (nb == NULL) {
                rc = -ENOMEM;
                goto fail;
            }
            buf = nb;
        }
        ssize_t r = recv(fd, buf + n, cap - n, 0);
        if (r > 0) {
            n += (size_t)r;
            if (hlen == 0 && (hlen = header_end(buf, n)) != 0)
                clen = content_length(buf, hlen);
            continue;
        }
        if (r == 0)
            break;
        if (errno != EAGAIN && errno != EINTR) {
            rc = n > 0 ? 0 : -errno;
            if (rc)
                goto fail;
            break;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        long long left = deadline - hp_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) == 0) {
            rc = -ETIMEDOUT;
            goto fail;
        }
    }
    buf[n] = '\0';
    if (hlen == 0 || strncmp(buf, "HTTP/1.", 7) != 0 || n < 12) {
        rc = n == 0 && send_failed ? send_failed : -EPROTO;
        goto fail;
    }
    memset(out, 0, sizeof(*out));
    out->status = atoi(buf + 9);
    out->headers = strndup(buf, hlen);
    size_t blen = n - hlen;
    if (clen >= 0 && (size_t)clen < blen)
        blen = (size_t)clen;
    out->body = malloc(blen + 1);
    if (out->headers == NULL || out->body == NULL) {
        hc_response_free(out);
        rc = -ENOMEM;
        goto fail;
    }
    memcpy(out->body, buf + hlen, blen);
    out->body[blen] = '\0';
    out->body_len = blen;
    free(buf);
    return 0;
fail:
    free(buf);
    return rc;
}

int hc_raw(const char *host, int port, const char *raw, size_t raw_len, int timeout_ms,
           struct hc_response *out)
{
    if (host == NULL || raw == NULL || out == NULL)
        return -EINVAL;
    long long deadline = hp_now_ms() + timeout_ms;
    int fd = connect_to(host, port, deadline);
    if (fd < 0)
        return fd;
    int rc = exchange(fd, raw, raw_len, deadline, out);
    close(fd);
    return rc;
}

int hc_request(const char *host, int port, const char *method, const char *path, const char *const *headers,
               const char *body, size_t body_len, int timeout_ms, struct hc_response *out)
{
    if (host == NULL || method == NULL || path == NULL || out == NULL)
        return -EINVAL;
    size_t cap = strlen(method) + strlen(path) + 256 + body_len;
    for (size_t i = 0; headers && headers[i]; i++)
        cap += strlen(headers[i]) + 2;
    char *req = malloc(cap);
    if (req == NULL)
        return -ENOMEM;
    int n = snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n", method, path, host,
                     port);
    for (size_t i = 0; headers && headers[i]; i++)
        n += snprintf(req + n, cap - (size_t)n, "%s\r\n", headers[i]);
    if (body != NULL)
        n += snprintf(req + n, cap - (size_t)n, "Content-Length: %zu\r\n", body_len);
    n += snprintf(req + n, cap - (size_t)n, "\r\n");
    if (body != NULL) {
        memcpy(req + n, body, body_len);
        n += (int)body_len;
    }
    int rc = hc_raw(host, port, req, (size_t)n, timeout_ms, out);
    free(req);
    return rc;
}

int hc_header(const struct hc_response *r, const char *name, char *buf, size_t cap)
{
    if (r == NULL || r->headers == NULL || name == NULL || buf == NULL || cap == 0)
        return -EINVAL;
    size_t nl = strlen(name);
    for (const char *p = r->headers; *p;) {
        const char *eol = strstr(p, "\r\n");
        if (eol == NULL)
            break;
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            snprintf(buf, cap, "%.*s", (int)(eol - v), v);
            return 0;
        }
        p = eol + 2;
    }
    return -ENOENT;
}

void hc_response_free(struct hc_response *r)
{
    if (r == NULL)
        return;
    free(r->headers);
    free(r->body);
    r->headers = r->body = NULL;
}
