/*
 * The HTTP side of storage-guard: fencehttp (the HTTP layer fencelock's
 * services share) checks and collects a request; the handler here reads
 * storage-guard's own headers (Fencing-Token, If-Match, If-None-Match),
 * hands the request to api.c and sends back whatever api.c answered.
 */
#ifndef SG_HTTP_H
#define SG_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <fencehttp/fencehttp.h>

#include "store.h"

struct sg_http_options {
    const struct sockaddr *addr; /* where to listen; port 0 picks one */
    socklen_t addr_len;
    int threads;                /* worker threads, >= 1 */
    size_t max_body;            /* largest accepted request body in bytes */
    sg_store_pool *pool;        /* borrowed until sg_http_stop(); >= threads connections */
    int unfenced;               /* writes need no token (see sg_store_set_unfenced) */
    const fencehttp_auth *auth; /* borrowed until sg_http_stop(); NULL: no authentication */
    int64_t max_token_ahead_ms; /* see sg_request; 0: no bound */
    /* HTTPS: the certificate chain and its private key as PEM text, both
     * or neither; borrowed until sg_http_stop(). NULL: plain HTTP. */
    const char *tls_cert_pem;
    const char *tls_key_pem;
};

typedef struct sg_http sg_http;

/* Start listening and serving. Writes *out only on success. Returns 0,
 * -EINVAL, -ENOMEM or -EIO (message in errbuf). */
int sg_http_start(const struct sg_http_options *o, sg_http **out, char *errbuf, size_t errcap);

/* The TCP port actually bound. */
uint16_t sg_http_port(const sg_http *h);

/* Stop accepting connections; requests already received keep being served. */
void sg_http_quiesce(sg_http *h);

/* Wait up to timeout_ms for requests in progress to be answered. Returns 0
 * or -ETIMEDOUT. */
int sg_http_drain(sg_http *h, int timeout_ms);

/* Stop the worker threads (each finishes the request it is running), close
 * every connection and free h. Accepts NULL. */
/* Serve with the clients of a reloaded auth file (fencehttp_set_auth: h
 * takes auth on success). */
int sg_http_set_auth(sg_http *h, fencehttp_auth *auth);

/* Serve new connections with the certificate and key in these files
 * (fencehttp_reload_tls: logs either way). Returns 0 or -1. */
int sg_http_reload_tls(sg_http *h, const char *cert_file, const char *key_file);

void sg_http_stop(sg_http *h);

#endif
