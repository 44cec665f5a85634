/* Reading and writing a resource's fence on a node (fence_probe.h). */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <fencing/fencing.h>

#include "fence_probe.h"

struct where {
    char hash[512], field[4], old[1200];
    int hash_len;
};

static void locate(const char *prefix, const char *resource, struct where *w)
{
    unsigned b = fencing_bucket(resource, strlen(resource));
    w->hash_len = fencing_bucket_key(prefix, strlen(prefix), b, w->hash, sizeof(w->hash));
    assert_true(w->hash_len > 0);
    assert_true(fencing_bucket_field(b, w->field, sizeof(w->field)) > 0);
    char key[1100];
    snprintf(key, sizeof(key), "%s%s", prefix, resource);
    assert_true(fencing_fence_key(key, strlen(key), w->old, sizeof(w->old)) > 0);
}

static uint64_t number(redisReply *r)
{
    uint64_t v = r != NULL && r->type == REDIS_REPLY_STRING ? strtoull(r->str, NULL, 10) : 0;
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

uint64_t tf_bucket(struct rh_cluster *rc, int i, const char *prefix, const char *resource)
{
    struct where w;
    locate(prefix, resource, &w);
    return number(rh_command(rc, i, "HGET %b %s", w.hash, (size_t)w.hash_len, w.field));
}

uint64_t tf_fence(struct rh_cluster *rc, int i, const char *prefix, const char *resource)
{
    struct where w;
    locate(prefix, resource, &w);
    uint64_t b = number(rh_command(rc, i, "HGET %b %s", w.hash, (size_t)w.hash_len, w.field));
    uint64_t o = number(rh_command(rc, i, "GET %s", w.old));
    return b > o ? b : o;
}

void tf_set_bucket(struct rh_cluster *rc, int i, const char *prefix, const char *resource, uint64_t v)
{
    struct where w;
    locate(prefix, resource, &w);
    redisReply *r = rh_command(rc, i, "HSET %b %s %" PRIu64, w.hash, (size_t)w.hash_len, w.field, v);
    assert_non_null(r);
    freeReplyObject(r);
}

long long tf_other_keys(struct rh_cluster *rc, int i)
{
    redisReply *r = rh_command(rc, i, "KEYS *");
    assert_non_null(r);
    long long n = 0;
    for (size_t k = 0; k < r->elements; k++)
        n += memmem(r->element[k]->str, r->element[k]->len, "\0fence:", 7) == NULL;
    freeReplyObject(r);
    return n;
}
