/* Prometheus counters and a request latency histogram, all atomics. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fencehttp/fencehttp.h>

#include "metrics.h"

static atomic_ullong counters[SG_M_COUNT];

static const struct {
    const char *name;
    const char *help;
} counter_info[SG_M_COUNT] = {
    [SG_M_WRITES_ACCEPTED] = {"storage_guard_writes_accepted_total", "Writes admitted by the fencing check."},
    [SG_M_WRITES_STALE] = {"storage_guard_writes_refused_stale_total",
                           "Writes refused because their token was older than the resource's last one."},
    [SG_M_READS] = {"storage_guard_reads_total", "Record reads answered (fenced or not)."},
    [SG_M_READS_STALE] = {"storage_guard_reads_refused_stale_total",
                          "Fenced reads refused for a stale token."},
    [SG_M_DELETES] = {"storage_guard_deletes_total", "Deletes admitted by the fencing check."},
    [SG_M_BATCHES] = {"storage_guard_batches_total", "Batches applied in full."},
    [SG_M_BATCHES_STALE] = {"storage_guard_batches_refused_stale_total",
                            "Batches refused because their token was stale for one of their resources."},
    [SG_M_PRECONDITIONS] = {"storage_guard_preconditions_failed_total",
                            "Writes, deletes and batches refused because a version did not match (412)."},
    [SG_M_FENCE_RESETS] = {"storage_guard_fence_resets_total", "Fences set (lowered) by an operator."},
    [SG_M_BAD_REQUESTS] = {"storage_guard_bad_requests_total",
                           "Requests answered with a 4xx status other than 409 and 412."},
    [SG_M_STORE_ERRORS] = {"storage_guard_errors_total", "Requests answered with a 5xx status."},
};

/* Upper bounds in seconds; the last bucket is +Inf. A write costs at least
 * one fsync, so the interesting range is 0.5 ms .. 1 s. */
static const double bucket_le[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                   0.1,    0.25,  0.5,    1,     2.5,  5};
#define N_BUCKETS (sizeof(bucket_le) / sizeof(bucket_le[0]))

static atomic_ullong buckets[N_BUCKETS + 1];
static atomic_ullong latency_count;
static atomic_ullong latency_sum_us;

/* Status classes counted in storage_guard_http_responses_total. */
static atomic_ullong by_class[6];

void sg_metrics_inc(enum sg_metric m)
{
    if ((int)m >= 0 && m < SG_M_COUNT)
        atomic_fetch_add(&counters[m], 1);
}

unsigned long long sg_metrics_get(enum sg_metric m)
{
    return (int)m >= 0 && m < SG_M_COUNT ? atomic_load(&counters[m]) : 0;
}

void sg_metrics_observe(int status, double seconds)
{
    if (seconds < 0)
        seconds = 0;
    size_t i = 0;
    while (i < N_BUCKETS && seconds > bucket_le[i])
        i++;
    atomic_fetch_add(&buckets[i], 1);
    atomic_fetch_add(&latency_count, 1);
    atomic_fetch_add(&latency_sum_us, (unsigned long long)(seconds * 1e6));
    int cls = status / 100;
    if (cls >= 1 && cls <= 5)
        atomic_fetch_add(&by_class[cls], 1);
}

char *sg_metrics_render(size_t *len)
{
    struct fencehttp_text b = {0};
    for (int m = 0; m < SG_M_COUNT; m++) {
        fencehttp_text_printf(&b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", counter_info[m].name,
                              counter_info[m].help, counter_info[m].name, counter_info[m].name,
                              atomic_load(&counters[m]));
    }
    fencehttp_text_printf(&b, "# HELP storage_guard_http_responses_total HTTP responses by status class.\n"
                              "# TYPE storage_guard_http_responses_total counter\n");
    for (int c = 1; c <= 5; c++)
        fencehttp_text_printf(&b, "storage_guard_http_responses_total{code=\"%dxx\"} %llu\n", c,
                              atomic_load(&by_class[c]));
    fencehttp_text_printf(
        &b, "# HELP storage_guard_request_duration_seconds Time from a request's headers to its answer.\n"
            "# TYPE storage_guard_request_duration_seconds histogram\n");
    unsigned long long cum = 0;
    for (size_t i = 0; i < N_BUCKETS; i++) {
        cum += atomic_load(&buckets[i]);
        fencehttp_text_printf(&b, "storage_guard_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
                              bucket_le[i], cum);
    }
    cum += atomic_load(&buckets[N_BUCKETS]);
    fencehttp_text_printf(&b, "storage_guard_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
    fencehttp_text_printf(&b, "storage_guard_request_duration_seconds_sum %.6f\n",
                          (double)atomic_load(&latency_sum_us) / 1e6);
    /* The count equals the +Inf bucket by definition; reuse it so a render
     * racing an observation stays self-consistent. */
    fencehttp_text_printf(&b, "storage_guard_request_duration_seconds_count %llu\n", cum);
    if (b.oom)
        return NULL;
    if (len)
        *len = b.len;
    return b.p;
}
