/* Node addresses: "redis://[user:password@]host:port[/db]" or "host:port".
 * IPv6 hosts go in brackets ("[::1]:6379"). User and password may be
 * percent-encoded. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "internal.h"

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Percent-decode [s, s+len) into out (cap bytes with NUL). */
static int decode(const char *s, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (ch == '%') {
            if (i + 2 >= len)
                return -1;
            int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return -1;
            ch = (char)(hi * 16 + lo);
            i += 2;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = ch;
    }
    out[o] = '\0';
    return 0;
}

static int parse_uint(const char *s, size_t len, long max, long *out)
{
    if (len == 0 || len > 10)
        return -1;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

/* The address with its password (if any) replaced by "***". Messages show
 * addresses; they must never show a secret. */
void lockcore__mask_address(const char *s, char *out, size_t cap)
{
    if (s == NULL) {
        lockcore__fmt(out, cap, "(null)");
        return;
    }
    const char *p = strncmp(s, "redis://", 8) == 0 ? s + 8 : strncmp(s, "rediss://", 9) == 0 ? s + 9 : s;
    const char *slash = strchr(p, '/');
    const char *at = NULL;
    for (const char *q = p; *q && (slash == NULL || q < slash); q++)
        if (*q == '@')
            at = q;
    if (at == NULL) {
        lockcore__fmt(out, cap, "%s", s);
        return;
    }
    const char *colon = memchr(p, ':', (size_t)(at - p));
    /* user:pass@ keeps the user; pass@ is all password. */
    size_t keep = colon ? (size_t)(colon - s) + 1 : (size_t)(p - s);
    lockcore__fmt(out, cap, "%.*s***%s", (int)keep, s, at);
}

int lockcore__parse_address(const char *s_raw, struct address *a, char *err, size_t errcap)
{
    char s[300];
    memset(a, 0, sizeof(*a));
    lockcore__mask_address(s_raw, s, sizeof(s));
    if (s_raw == NULL || *s_raw == '\0') {
        lockcore__fmt(err, errcap, "empty node address");
        return -EINVAL;
    }
    const char *p = s_raw;
    const char *end = s_raw + strlen(s_raw);
    if (strncmp(p, "redis://", 8) == 0)
        p += 8;
    else if (strncmp(p, "rediss://", 9) == 0) {
        p += 9;
        a->tls = 1;
    } else if (strstr(p, "://") != NULL) {
        lockcore__fmt(err, errcap, "node address '%s': only redis:// and rediss:// are supported", s);
        return -EINVAL;
    }

    /* The path ("/db") ends the authority. */
    const char *slash = memchr(p, '/', (size_t)(end - p));
    const char *auth_end = slash ? slash : end;
    const char *at = NULL;
    for (const char *q = p; q < auth_end; q++)
        if (*q == '@')
            at = q;
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *uend = colon ? colon : at;
        if (colon == NULL) {
            /* "redis://password@host" is taken as a password, like redis-cli. */
            uend = p;
            colon = p - 1;
        }
        if (decode(p, (size_t)(uend - p), a->user, sizeof(a->user)) < 0 ||
            decode(colon + 1, (size_t)(at - colon - 1), a->pass, sizeof(a->pass)) < 0) {
            lockcore__fmt(err, errcap, "node address '%s': bad user or password", s);
            return -EINVAL;
        }
        p = at + 1;
    }

    const char *host = p, *hend, *portp;
    if (*p == '[') {
        const char *rb = memchr(p, ']', (size_t)(auth_end - p));
        if (rb == NULL || rb[1] != ':') {
            lockcore__fmt(err, errcap, "node address '%s': bad IPv6 host", s);
            return -EINVAL;
        }
        host = p + 1;
        hend = rb;
        portp = rb + 2;
    } else {
        const char *colon = NULL;
        for (const char *q = p; q < auth_end; q++)
            if (*q == ':')
                colon = q;
        if (colon == NULL) {
            lockcore__fmt(err, errcap, "node address '%s': missing :port", s);
            return -EINVAL;
        }
        hend = colon;
        portp = colon + 1;
    }
    size_t hlen = (size_t)(hend - host);
    if (hlen == 0 || hlen >= sizeof(a->host)) {
        lockcore__fmt(err, errcap, "node address '%s': bad host", s);
        return -EINVAL;
    }
    memcpy(a->host, host, hlen);
    a->host[hlen] = '\0';
    for (size_t i = 0; i < hlen; i++) {
        unsigned char ch = (unsigned char)a->host[i];
        if (ch <= ' ' || ch == '@' || ch == '/' || ch >= 0x7f) {
            lockcore__fmt(err, errcap, "node address '%s': bad host", s);
            return -EINVAL;
        }
    }
    long v;
    if (parse_uint(portp, (size_t)(auth_end - portp), 65535, &v) < 0 || v == 0) {
        lockcore__fmt(err, errcap, "node address '%s': bad port", s);
        return -EINVAL;
    }
    a->port = (int)v;
    if (slash != NULL && slash + 1 < end) {
        if (parse_uint(slash + 1, (size_t)(end - slash - 1), 1000000, &v) < 0) {
            lockcore__fmt(err, errcap, "node address '%s': bad database number", s);
            return -EINVAL;
        }
        a->db = (int)v;
    }
    return 0;
}

/* Resolve the host once, to a numeric address that connects use without
 * DNS. IPv4 first, then IPv6, as hiredis orders them. */
int lockcore__resolve(struct address *a, char *err, size_t errcap)
{
    unsigned char buf[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, a->host, buf) == 1 || inet_pton(AF_INET6, a->host, buf) == 1) {
        lockcore__fmt(a->ip, sizeof(a->ip), "%s", a->host);
        return 0;
    }
    static const int families[] = {AF_INET, AF_INET6};
    int gai = EAI_NONAME;
    for (size_t f = 0; f < 2; f++) {
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof(hints));
        hints.ai_family = families[f];
        hints.ai_socktype = SOCK_STREAM;
        gai = getaddrinfo(a->host, NULL, &hints, &res);
        if (gai != 0)
            continue;
        const void *addr = families[f] == AF_INET
                               ? (const void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr
                               : (const void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr;
        const char *ok = inet_ntop(families[f], addr, a->ip, sizeof(a->ip));
        freeaddrinfo(res);
        if (ok != NULL)
            return 0;
    }
    lockcore__fmt(err, errcap, "node '%s:%d': host does not resolve: %s", a->host, a->port,
                  gai_strerror(gai));
    return -EINVAL;
}
