/* The fault campaign's parts: the client loop run in child processes. */
#ifndef FENCELOCK_CAMPAIGN_H
#define FENCELOCK_CAMPAIGN_H

#include <stdint.h>

/* The record every client increments, and the lock that guards it. */
#define CC_KEY "counter"
#define CC_RESOURCE "counter"

struct cc_client_args {
    int id;
    char **nodes; /* borrowed */
    int n_nodes;
    uint16_t sg_port;
    uint64_t ttl_ms;
    int fencing;
    long long until_ms; /* CLOCK_MONOTONIC deadline (hp_now_ms) */
    const char *history;
    const char *run_dir;
    const char *cli; /* the fencelock command: take and release the lock
                        through it instead of the library; NULL: library */
};

/* Run the client loop; returns the process exit status. */
int cc_client_main(const struct cc_client_args *a);

#endif
