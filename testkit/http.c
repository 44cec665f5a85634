/* A minimal HTTP/1.1 client over raw sockets, for tests only. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "http.h"

void hc_response_clear(struct hc_response *r)
{
    if (r == NULL)
        return;
    free(r->head);
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof(*r));
}

static int connect_port(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct timeval tv = {HC_TIMEOUT_MS / 1000, (HC_TIMEOUT_MS % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -errno;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Read to EOF (the server closes after "Connection: close") and split the
 * answer into head and body. */
static int read_answer(int fd, struct hc_response *r)
{
    size_t cap = 8192, len = 0;
    char *buf = malloc(cap);
    if (buf == NULL)
        return -ENOMEM;
    int rc = 0;
    for (;;) {
        if (len + 4096 > cap) {
            char *b = realloc(buf, cap * 2);
            if (b == NULL) {
                rc = -ENOMEM;
                goto out;
            }
            buf = b;
            cap *= 2;
        }
        ssize_t n = recv(fd, buf + len, cap - len - 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            /* A reset after a complete answer still counts as an answer. */
            if (len > 0 && errno == ECONNRESET)
                break;
            rc = -errno;
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    char *sep = strstr(buf, "\r\n\r\n");
    if (len == 0 || sep == NULL || sscanf(buf, "HTTP/1.%*d %d", &r->status) != 1) {
        rc = -EPROTO;
        goto out;
    }
    size_t head_len = (size_t)(sep - buf);
    r->head = strndup(buf, head_len);
    size_t body_len = len - head_len - 4;
    char cl[32];
    if (hc_header(r, "Content-Length", cl, sizeof(cl)) != NULL) {
        size_t want = strtoull(cl, NULL, 10);
        if (want > body_len) {
            rc = -EPROTO; /* cut short */
            goto out;
        }
        body_len = want;
    }
    r->body = malloc(body_len + 1);
    if (r->head == NULL || r->body == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    memcpy(r->body, sep + 4, body_len);
    r->body[body_len] = '\0';
    r->body_len = body_len;
    r->json = json_loadb(r->body, r->body_len, JSON_DECODE_ANY, NULL);
out:
    free(buf);
    if (rc != 0)
        hc_response_clear(r);
    return rc;
}

int hc_raw(uint16_t port, const char *bytes, size_t len, int shut_write, struct hc_response *r)
{
    memset(r, 0, sizeof(*r));
    int fd = connect_port(port);
    if (fd < 0)
        return fd;
    int rc = send_all(fd, bytes, len);
    /* The server may answer (and close) before reading everything we send:
     * a failed send is not an error if an answer arrives. */
    if (shut_write)
        shutdown(fd, SHUT_WR);
    int rrc = read_answer(fd, r);
    close(fd);
    return rrc == 0 ? 0 : (rc != 0 ? rc : rrc);
}

int hc_request(uint16_t port, const char *method, const char *path, const char *extra_headers,
               const char *body, size_t body_len, struct hc_response *r)
{
    size_t head_cap = strlen(path) + (extra_headers ? strlen(extra_headers) : 0) + 256;
    size_t cap = head_cap + body_len;
    char *req = malloc(cap);
    if (req == NULL)
        return -ENOMEM;
    int n = snprintf(req, head_cap, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n%s", method,
                     path, (unsigned)port, extra_headers ? extra_headers : "");
    if (body)
        n += snprintf(req + n, head_cap - (size_t)n,
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n", body_len);
    n += snprintf(req + n, head_cap - (size_t)n, "\r\n");
    if (body && body_len)
        memcpy(req + n, body, body_len);
    int rc = hc_raw(port, req, (size_t)n + (body ? body_len : 0), 0, r);
    free(req);
    return rc;
}

int hc_put(uint16_t port, const char *path, const char *json_body, const char *extra_headers,
           struct hc_response *r)
{
    return hc_request(port, "PUT", path, extra_headers, json_body, strlen(json_body), r);
}

int hc_get(uint16_t port, const char *path, struct hc_response *r)
{
    return hc_request(port, "GET", path, NULL, NULL, 0, r);
}

const char *hc_header(const struct hc_response *r, const char *name, char *buf, size_t cap)
{
    if (r->head == NULL)
        return NULL;
    size_t nl = strlen(name);
    for (const char *line = strstr(r->head, "\r\n"); line != NULL; line = strstr(line, "\r\n")) {
        line += 2;
        if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (*v == ' ')
                v++;
            const char *end = strstr(v, "\r\n");
            size_t vl = end ? (size_t)(end - v) : strlen(v);
            if (vl >= cap)
                vl = cap - 1;
            memcpy(buf, v, vl);
            buf[vl] = '\0';
            return buf;
        }
    }
    return NULL;
}

char *hc_escape(const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(3 * len + 1), *o = out;
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
            c == '_' || c == '.' || c == '~') {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o = '\0';
    return out;
}
