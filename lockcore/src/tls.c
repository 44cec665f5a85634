/*
 * TLS to rediss:// nodes, with OpenSSL. hiredis 0.14 has no TLS, but lockcore
 * does its own I/O: it writes the connection's output buffer itself and
 * feeds the reply reader, so TLS slots in under both, on the same
 * non-blocking socket that hiredis connected.
 *
 * The socket is wrapped in a BIO of our own that sends with MSG_NOSIGNAL:
 * OpenSSL's socket BIO uses write(), and a write to a node that died would
 * raise SIGPIPE in the calling program.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "internal.h"

static void ssl_error(char *err, size_t cap, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[256] = "unknown error";
    if (e != 0)
        ERR_error_string_n(e, buf, sizeof(buf));
    ERR_clear_error();
    lockcore__fmt(err, cap, "%s: %s", what, buf);
}

static int bio_write(BIO *b, const char *buf, int len)
{
    int fd = (int)(intptr_t)BIO_get_data(b);
    BIO_clear_retry_flags(b);
    ssize_t n = send(fd, buf, (size_t)len, MSG_NOSIGNAL);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            BIO_set_retry_write(b);
        return -1;
    }
    return (int)n;
}

static int bio_read(BIO *b, char *buf, int len)
{
    int fd = (int)(intptr_t)BIO_get_data(b);
    BIO_clear_retry_flags(b);
    ssize_t n = recv(fd, buf, (size_t)len, 0);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            BIO_set_retry_read(b);
        return -1;
    }
    return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b, (void)num, (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

int lockcore__tls_ctx_new(lockcore_client *c, char *err, size_t cap)
{
    const struct lockcore_options *o = &c->o;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "lockcore socket");
    if (ctx == NULL || m == NULL || !BIO_meth_set_write(m, bio_write) || !BIO_meth_set_read(m, bio_read) ||
        !BIO_meth_set_ctrl(m, bio_ctrl)) {
        ssl_error(err, cap, "TLS set-up");
        goto fail;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* Partial writes, and a buffer that may move between retries: the
     * output buffer grows while a write waits for POLLOUT. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (o->tls_verify) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        int ok = o->tls_ca_file ? SSL_CTX_load_verify_locations(ctx, o->tls_ca_file, NULL)
                                : SSL_CTX_set_default_verify_paths(ctx);
        if (!ok) {
            char what[300];
            lockcore__fmt(what, sizeof(what), "TLS CA file '%s'",
                          o->tls_ca_file ? o->tls_ca_file : "(default)");
            ssl_error(err, cap, what);
            goto fail;
        }
    }
    if (o->tls_cert_file != NULL) {
        char what[300];
        lockcore__fmt(what, sizeof(what), "TLS client certificate '%s'", o->tls_cert_file);
        if (SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert_file) != 1) {
            ssl_error(err, cap, what);
            goto fail;
        }
        lockcore__fmt(what, sizeof(what), "TLS client key '%s'", o->tls_key_file);
        if (SSL_CTX_use_PrivateKey_file(ctx, o->tls_key_file, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(ctx) != 1) {
            ssl_error(err, cap, what);
            goto fail;
        }
    }
    c->ssl_ctx = ctx;
    c->bio_method = m;
    return 0;
fail:
    SSL_CTX_free(ctx);
    BIO_meth_free(m);
    return -EINVAL;
}

void lockcore__tls_ctx_free(lockcore_client *c)
{
    SSL_CTX_free(c->ssl_ctx);
    BIO_meth_free(c->bio_method);
    c->ssl_ctx = NULL;
    c->bio_method = NULL;
}

static int is_ip(const char *s)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

int lockcore__tls_start(lockcore_client *c, struct node *n, char *err, size_t cap)
{
    SSL *ssl = SSL_new(c->ssl_ctx);
    BIO *bio = BIO_new(c->bio_method);
    if (ssl == NULL || bio == NULL) {
        SSL_free(ssl);
        BIO_free(bio);
        ssl_error(err, cap, "TLS");
        return -1;
    }
    BIO_set_data(bio, (void *)(intptr_t)n->ctx->fd);
    BIO_set_init(bio, 1);
    SSL_set_bio(ssl, bio, bio);
    SSL_set_connect_state(ssl);
    /* The name to check: tls_server_name, else the host as given. An IP
     * address is checked against the certificate's IP entries and sent
     * without SNI. */
    const char *name = c->o.tls_server_name ? c->o.tls_server_name : n->addr.host;
    int ok = 1;
    if (c->o.tls_verify)
        ok =
            is_ip(name) ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) : SSL_set1_host(ssl, name);
    if (ok && !is_ip(name))
        ok = SSL_set_tlsext_host_name(ssl, name);
    if (!ok) {
        SSL_free(ssl);
        ssl_error(err, cap, "TLS server name");
        return -1;
    }
    n->ssl = ssl;
    n->tls_want = POLLOUT;
    return 0;
}

/* Why a TLS call failed, for the node's message. */
static void tls_fail(struct node *n, int rc, const char *what, char *err, size_t cap)
{
    SSL *ssl = n->ssl;
    int e = SSL_get_error(ssl, rc);
    long vr = SSL_get_verify_result(ssl);
    if (vr != X509_V_OK)
        lockcore__fmt(err, cap, "%s: certificate verify failed: %s", what, X509_verify_cert_error_string(vr));
    else if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0))
        lockcore__fmt(err, cap, "%s: connection closed by the node%s%s", what, errno ? ": " : "",
                      errno ? strerror(errno) : "");
    else
        ssl_error(err, cap, what);
    ERR_clear_error();
}

int lockcore__tls_handshake(struct node *n, char *err, size_t cap)
{
    ERR_clear_error();
    errno = 0;
    int rc = SSL_do_handshake(n->ssl);
    if (rc == 1) {
        n->tls_want = 0;
        return 1;
    }
    int e = SSL_get_error(n->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        n->tls_want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        return 0;
    }
    tls_fail(n, rc, "TLS handshake", err, cap);
    return -1;
}

ssize_t lockcore__tls_write(struct node *n, const void *buf, size_t len, char *err, size_t cap)
{
    ERR_clear_error();
    errno = 0;
    int rc = SSL_write(n->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
    if (rc > 0) {
        n->tls_want = 0;
        return rc;
    }
    int e = SSL_get_error(n->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        n->tls_want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        return 0;
    }
    tls_fail(n, rc, "TLS write", err, cap);
    return -1;
}

ssize_t lockcore__tls_read(struct node *n, void *buf, size_t len, char *err, size_t cap)
{
    ERR_clear_error();
    errno = 0;
    int rc = SSL_read(n->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
    if (rc > 0)
        return rc;
    int e = SSL_get_error(n->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    tls_fail(n, rc, "TLS read", err, cap);
    return -1;
}

int lockcore__tls_pending(const struct node *n)
{
    return n->ssl != NULL && SSL_pending(n->ssl) > 0;
}

void lockcore__tls_free(struct node *n)
{
    SSL_free(n->ssl);
    n->ssl = NULL;
    n->tls_want = 0;
}
