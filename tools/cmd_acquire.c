/*
 * fencelock acquire RESOURCE...: take a lock that outlives the command (the
 * caller keeps its id, extends and releases it), and print it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <lockcore/lockcore.h>

#include "cli.h"

const char cmd_acquire_usage[] =
    "usage: fencelock [options] acquire RESOURCE...\n"
    "       fencelock [options] acquire --reentrant RESOURCE [LOCK_ID]\n"
    "\n"
    "Acquire RESOURCE on a majority of the nodes and print one JSON line:\n"
    "  {\"resource\",\"lock_id\",\"token\",\"validity_ms\",\"ttl_ms\",\"nodes_granted\",\"nodes\",\n"
    "   \"granted_mono_ms\",\"granted_wall_ms\",\"valid_until_mono_ms\",\"valid_until_wall_ms\"}\n"
    "validity_ms counts from granted_mono_ms (CLOCK_MONOTONIC), the start of the round\n"
    "that granted the lock, after any wait: check the lease against valid_until_mono_ms.\n"
    "Several resources are one multi-resource lock, all or nothing, with one token\n"
    "(\"resources\":[...] instead of \"resource\"); --read, --write: a side of a\n"
    "read-write lock; --reentrant: a reentrant hold (with LOCK_ID: one more hold\n"
    "of it); --permits N: a permit of a semaphore. Kinds other than the plain lock\n"
    "add \"kind\". The lock stays held until its TTL runs out, `fencelock extend`\n"
    "or `fencelock release` with the same resources, kind and the lock_id.\n"
    "Relevant options: --nodes --ttl --retry-count --retry-delay --wait --key-prefix\n"
    "  --no-fencing --timeout --read --write --reentrant --permits\n"
    "Exit: 0 acquired; 75 held by another; 69 no majority in time (unreachable, or\n"
    "  granted too slowly); 64 usage; 70 error.\n";

int cmd_acquire(lockcore_client *c, const struct cmdline *cl)
{
    const struct args *a = &cl->a;
    const struct target *t = &cl->t;
    struct lockcore_lock l;
    int rc = fencelock_acquire(c, a, t, &l);
    if (rc < 0)
        return fencelock_acquire_failed(c, a, t, rc);
    json_t *j = fencelock_merged(fencelock_lock_head(t, l.resource, &l),
                                 json_pack("{s:s, s:I, s:I, s:I, s:i, s:i}", "lock_id", l.id, "token",
                                           (json_int_t)l.token, "validity_ms", (json_int_t)l.validity_ms,
                                           "ttl_ms", (json_int_t)l.ttl_ms, "nodes_granted", (int)l.nodes_ok,
                                           "nodes", (int)l.nodes));
    fencelock_print_json(fencelock_merged(j, fencelock_times_json(&l)));
    return EXIT_OK;
}
