/* Prometheus counters and histograms of fencelockd, all atomics. */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fencehttp/fencehttp.h>

#include "metrics.h"

static atomic_ullong acquired[FLD_KIND_COUNT][FLD_OUT_COUNT];
static atomic_ullong timed_ok[FLD_T_COUNT], timed_failed[FLD_T_COUNT];
static atomic_ullong lost;
/* Requests refused by the auth file's rules or a lock's owner, by route. */
static atomic_ullong forbidden[FLD_ROUTE_COUNT];
static atomic_llong waiters;
static atomic_ullong http_by_class[6];

/* Upper bounds in seconds; the last bucket is +Inf. A lock operation is
 * one round trip to the nodes (well under 1 ms on a LAN) unless it waits. */
static const double bucket_le[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                   0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
#define N_BUCKETS (sizeof(bucket_le) / sizeof(bucket_le[0]))

struct histogram {
    atomic_ullong buckets[N_BUCKETS + 1];
    atomic_ullong count;
    atomic_ullong sum_us;
};

static struct histogram op_hist[FLD_T_COUNT], http_hist;

#define NODES_SEEN 64
static atomic_int node_up[NODES_SEEN];
static atomic_ullong node_errors[NODES_SEEN];
static char node_names[NODES_SEEN][64];
static atomic_int node_known[NODES_SEEN];

static const char *const outcome_names[FLD_OUT_COUNT] = {"granted", "locked", "no_quorum", "abandoned",
                                                         "error"};
static const char *const timed_names[FLD_T_COUNT] = {"acquire",  "extend", "release", "status",
                                                     "proclaim", "resign", "leader"};

enum fld_outcome fld_metrics_outcome(int rc)
{
    switch (rc) {
    case 0:
        return FLD_OUT_GRANTED;
    case LOCKCORE_ELOCKED:
        return FLD_OUT_LOCKED;
    case LOCKCORE_ENOQUORUM:
    case -ETIMEDOUT:
        return FLD_OUT_NO_QUORUM;
    default:
        return FLD_OUT_ERROR;
    }
}

static void observe(struct histogram *h, double seconds)
{
    if (seconds < 0)
        seconds = 0;
    size_t i = 0;
    while (i < N_BUCKETS && seconds > bucket_le[i])
        i++;
    atomic_fetch_add(&h->buckets[i], 1);
    atomic_fetch_add(&h->count, 1);
    atomic_fetch_add(&h->sum_us, (unsigned long long)(seconds * 1e6));
}

void fld_metrics_acquired(enum fld_kind kind, enum fld_outcome out, double seconds)
{
    if ((int)kind < 0 || kind >= FLD_KIND_COUNT || (int)out < 0 || out >= FLD_OUT_COUNT)
        return;
    atomic_fetch_add(&acquired[kind][out], 1);
    if (out != FLD_OUT_ABANDONED)
        fld_metrics_timed(FLD_T_ACQUIRE, out == FLD_OUT_GRANTED, seconds);
}

void fld_metrics_timed(enum fld_timed op, int ok, double seconds)
{
    if ((int)op < 0 || op >= FLD_T_COUNT)
        return;
    atomic_fetch_add(ok ? &timed_ok[op] : &timed_failed[op], 1);
    observe(&op_hist[op], seconds);
}

void fld_metrics_forbidden(enum fld_route route)
{
    if ((int)route >= 0 && route < FLD_ROUTE_COUNT)
        atomic_fetch_add(&forbidden[route], 1);
}

unsigned long long fld_metrics_get_forbidden(enum fld_route route)
{
    return (int)route >= 0 && route < FLD_ROUTE_COUNT ? atomic_load(&forbidden[route]) : 0;
}

void fld_metrics_lost(void)
{
    atomic_fetch_add(&lost, 1);
}

void fld_metrics_waiters(int delta)
{
    atomic_fetch_add(&waiters, delta);
}

void fld_metrics_http(int status, double seconds)
{
    int c = status / 100;
    atomic_fetch_add(&http_by_class[c >= 1 && c <= 5 ? c : 0], 1);
    observe(&http_hist, seconds);
}

void fld_metrics_node(unsigned node, const char *name, int reachable)
{
    if (node >= NODES_SEEN)
        return;
    if (!atomic_load(&node_known[node])) {
        snprintf(node_names[node], sizeof(node_names[node]), "%s", name);
        atomic_store(&node_known[node], 1);
    }
    atomic_store(&node_up[node], reachable);
    if (!reachable)
        atomic_fetch_add(&node_errors[node], 1);
}

unsigned long long fld_metrics_get_acquired(enum fld_kind kind, enum fld_outcome out)
{
    return atomic_load(&acquired[kind][out]);
}

long long fld_metrics_get_waiters(void)
{
    return atomic_load(&waiters);
}

static void put_histogram(struct fencehttp_text *b, const char *name, const char *label,
                          const struct histogram *h)
{
    unsigned long long cum = 0;
    const char *sep = label[0] ? "," : "";
    for (size_t i = 0; i <= N_BUCKETS; i++) {
        cum += atomic_load(&h->buckets[i]);
        if (i < N_BUCKETS)
            fencehttp_text_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, label, sep, bucket_le[i], cum);
        else
            fencehttp_text_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, label, sep, cum);
    }
    const char *open = label[0] ? "{" : "", *close = label[0] ? "}" : "";
    fencehttp_text_printf(b, "%s_sum%s%s%s %.6f\n", name, open, label, close,
                          (double)atomic_load(&h->sum_us) / 1e6);
    fencehttp_text_printf(b, "%s_count%s%s%s %llu\n", name, open, label, close, atomic_load(&h->count));
}

char *fld_metrics_render(size_t *len, int clients)
{
    struct fencehttp_text b = {0};
    fencehttp_text_printf(&b, "# HELP fencelockd_acquisitions_total Acquisitions by lock kind and outcome.\n"
                              "# TYPE fencelockd_acquisitions_total counter\n");
    for (int k = 0; k < FLD_KIND_COUNT; k++)
        for (int o = 0; o < FLD_OUT_COUNT; o++)
            fencehttp_text_printf(&b, "fencelockd_acquisitions_total{kind=\"%s\",outcome=\"%s\"} %llu\n",
                                  fld_kind_name(k), outcome_names[o], atomic_load(&acquired[k][o]));
    fencehttp_text_printf(&b, "# HELP fencelockd_operations_total Lock operations by operation and result.\n"
                              "# TYPE fencelockd_operations_total counter\n");
    for (int t = 0; t < FLD_T_COUNT; t++) {
        fencehttp_text_printf(&b, "fencelockd_operations_total{op=\"%s\",result=\"ok\"} %llu\n",
                              timed_names[t], atomic_load(&timed_ok[t]));
        fencehttp_text_printf(&b, "fencelockd_operations_total{op=\"%s\",result=\"failed\"} %llu\n",
                              timed_names[t], atomic_load(&timed_failed[t]));
    }
    fencehttp_text_printf(
        &b,
        "# HELP fencelockd_extensions_total Extensions done for clients (never on their behalf).\n"
        "# TYPE fencelockd_extensions_total counter\n"
        "fencelockd_extensions_total %llu\n",
        atomic_load(&timed_ok[FLD_T_EXTEND]));
    fencehttp_text_printf(&b,
                          "# HELP fencelockd_losses_total Extensions that found the lock no longer held.\n"
                          "# TYPE fencelockd_losses_total counter\n"
                          "fencelockd_losses_total %llu\n",
                          atomic_load(&lost));
    static const char *const route_names[FLD_ROUTE_COUNT] = {
        [FLD_ROUTE_ACQUIRE] = "acquire", [FLD_ROUTE_EXTEND] = "extend",     [FLD_ROUTE_RELEASE] = "release",
        [FLD_ROUTE_STATUS] = "status",   [FLD_ROUTE_CAMPAIGN] = "campaign", [FLD_ROUTE_PROCLAIM] = "proclaim",
        [FLD_ROUTE_RESIGN] = "resign",   [FLD_ROUTE_LEADER] = "leader"};
    fencehttp_text_printf(&b,
                          "# HELP fencelockd_forbidden_total Requests refused 403: another client's lock, "
                          "or a rule of the auth file.\n"
                          "# TYPE fencelockd_forbidden_total counter\n");
    for (int r = FLD_ROUTE_ACQUIRE; r < FLD_ROUTE_COUNT; r++)
        if (route_names[r] != NULL)
            fencehttp_text_printf(&b, "fencelockd_forbidden_total{op=\"%s\"} %llu\n", route_names[r],
                                  atomic_load(&forbidden[r]));
    fencehttp_text_printf(&b,
                          "# HELP fencelockd_waiters Acquisitions waiting for a lock now (long polls).\n"
                          "# TYPE fencelockd_waiters gauge\n"
                          "fencelockd_waiters %lld\n",
                          atomic_load(&waiters));
    fencehttp_text_printf(&b,
                          "# HELP fencelockd_lockcore_clients lockcore clients open (the lock loop's).\n"
                          "# TYPE fencelockd_lockcore_clients gauge\n"
                          "fencelockd_lockcore_clients %d\n",
                          clients);
    fencehttp_text_printf(
        &b, "# HELP fencelockd_operation_seconds Time from the request to the lock operation's end.\n"
            "# TYPE fencelockd_operation_seconds histogram\n");
    for (int t = 0; t < FLD_T_COUNT; t++) {
        char label[32];
        snprintf(label, sizeof(label), "op=\"%s\"", timed_names[t]);
        put_histogram(&b, "fencelockd_operation_seconds", label, &op_hist[t]);
    }
    fencehttp_text_printf(&b, "# HELP fencelockd_http_responses_total HTTP answers by status class.\n"
                              "# TYPE fencelockd_http_responses_total counter\n");
    for (int c = 1; c <= 5; c++)
        fencehttp_text_printf(&b, "fencelockd_http_responses_total{class=\"%dxx\"} %llu\n", c,
                              atomic_load(&http_by_class[c]));
    fencehttp_text_printf(&b,
                          "# HELP fencelockd_http_request_seconds Time from a request's head to its answer.\n"
                          "# TYPE fencelockd_http_request_seconds histogram\n");
    put_histogram(&b, "fencelockd_http_request_seconds", "", &http_hist);
    fencehttp_text_printf(&b, "# HELP fencelockd_node_up Whether the node answered the last health probe.\n"
                              "# TYPE fencelockd_node_up gauge\n");
    for (int i = 0; i < NODES_SEEN; i++)
        if (atomic_load(&node_known[i]))
            fencehttp_text_printf(&b, "fencelockd_node_up{node=\"%s\"} %d\n", node_names[i],
                                  atomic_load(&node_up[i]));
    fencehttp_text_printf(&b, "# HELP fencelockd_node_errors_total Health probes the node did not answer.\n"
                              "# TYPE fencelockd_node_errors_total counter\n");
    for (int i = 0; i < NODES_SEEN; i++)
        if (atomic_load(&node_known[i]))
            fencehttp_text_printf(&b, "fencelockd_node_errors_total{node=\"%s\"} %llu\n", node_names[i],
                                  atomic_load(&node_errors[i]));
    if (b.oom)
        return NULL;
    *len = b.len;
    return b.p;
}
