/*
 * A resource's fence on one node, read and written as lockcore's scripts
 * do (docs/fencing.md, "Where fences live"): its bucket, a field of a hash
 * whose name has a NUL byte inside, and the old layout's "{key}:fence".
 */
#ifndef FENCELOCK_TESTS_FENCE_PROBE_H
#define FENCELOCK_TESTS_FENCE_PROBE_H

#include <stdint.h>

#include <fencing/fencing.h>

#include "redis_harness.h"

/* The fence value of prefix + resource on node i: the larger of its
 * bucket's and its old key's (0 if neither, or the node is down). */
uint64_t tf_fence(struct rh_cluster *rc, int i, const char *prefix, const char *resource);
/* Its bucket's value alone. */
uint64_t tf_bucket(struct rh_cluster *rc, int i, const char *prefix, const char *resource);
/* Set its bucket's value on node i (a bucket pushed ahead, or any value). */
void tf_set_bucket(struct rh_cluster *rc, int i, const char *prefix, const char *resource, uint64_t v);
/* Keys on node i that are not bucket hashes (of any prefix). */
long long tf_other_keys(struct rh_cluster *rc, int i);

#endif
