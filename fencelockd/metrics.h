/*
 * fencelockd's counters, gauges and latency histograms, rendered in the
 * Prometheus text format. Lock-free (C11 atomics): any thread may record
 * while another renders.
 */
#ifndef FLD_METRICS_H
#define FLD_METRICS_H

#include <stddef.h>

#include <lockcore/lockcore.h>

#include "api.h"

/* How an acquisition ended. */
enum fld_outcome {
    FLD_OUT_GRANTED = 0,
    FLD_OUT_LOCKED,    /* refused, or its wait ran out */
    FLD_OUT_NO_QUORUM, /* a majority unreachable or too slow */
    FLD_OUT_ABANDONED, /* its client hung up while it waited */
    FLD_OUT_ERROR,     /* anything else (protocol, shutdown, memory) */
    FLD_OUT_COUNT,
};

/* The operations timed by the histograms. */
enum fld_timed {
    FLD_T_ACQUIRE = 0,
    FLD_T_EXTEND,
    FLD_T_RELEASE,
    FLD_T_STATUS,
    FLD_T_PROCLAIM, /* an election's */
    FLD_T_RESIGN,
    FLD_T_LEADER, /* a reading of who leads, or a long poll for the next */
    FLD_T_COUNT,
};

enum fld_outcome fld_metrics_outcome(int rc);

void fld_metrics_acquired(enum fld_kind kind, enum fld_outcome out, double seconds);
void fld_metrics_timed(enum fld_timed op, int ok, double seconds);
void fld_metrics_lost(void);                      /* an extension that found the lock gone */
void fld_metrics_forbidden(enum fld_route route); /* a request answered 403 */
void fld_metrics_waiters(int delta);
void fld_metrics_http(int status, double seconds);

/* One node's health as the last probe saw it; errors counted. node is
 * the index in --nodes. */
void fld_metrics_node(unsigned node, const char *name, int reachable);

/* Render all metrics as Prometheus text into a new malloc'ed buffer (*len
 * its length), or NULL on no memory. clients: lockcore clients in use. */
char *fld_metrics_render(size_t *len, int clients);

/* Counters for tests. */
unsigned long long fld_metrics_get_acquired(enum fld_kind kind, enum fld_outcome out);
long long fld_metrics_get_waiters(void);
unsigned long long fld_metrics_get_forbidden(enum fld_route route);

#endif
