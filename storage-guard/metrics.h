/*
 * Counters and a latency histogram of the storage-guard program, rendered
 * in the Prometheus text format. Lock-free (C11 atomics): any thread may
 * record while another renders.
 */
#ifndef SG_METRICS_H
#define SG_METRICS_H

#include <stddef.h>

enum sg_metric {
    SG_M_WRITES_ACCEPTED = 0,
    SG_M_WRITES_STALE,
    SG_M_READS,
    SG_M_READS_STALE,
    SG_M_DELETES,       /* deletes admitted (record deleted or not found) */
    SG_M_BATCHES,       /* batches applied */
    SG_M_BATCHES_STALE, /* batches refused for a stale token */
    SG_M_PRECONDITIONS, /* writes, deletes and batches refused with 412 */
    SG_M_FENCE_RESETS,  /* fences set by an operator */
    SG_M_BAD_REQUESTS,  /* any 4xx answer other than 409 and 412 */
    SG_M_STORE_ERRORS,  /* 5xx answers */
    SG_M_COUNT,
};

/* Add one to a counter. */
void sg_metrics_inc(enum sg_metric m);

/* Record one request that took seconds to answer, with its status code. */
void sg_metrics_observe(int status, double seconds);

/* Current value of a counter (for tests). */
unsigned long long sg_metrics_get(enum sg_metric m);

/* Render all metrics as Prometheus text into a new malloc'ed, NUL-terminated
 * buffer the caller frees; *len gets its length. Returns NULL on no memory. */
char *sg_metrics_render(size_t *len);

#endif
