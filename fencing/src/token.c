/* Token arithmetic, the issuing protocol's pure decisions, and the
 * resource-side check. No I/O here: lockcore drives these over Redis. */
#include <errno.h>
#include <string.h>

#include <fencing/fencing.h>

const char *fencing_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
    case FENCING_ESTALE:
        return "stale fencing token";
    case FENCING_EEXHAUSTED:
        return "fencing tokens exhausted (2^53 reached)";
    case FENCING_ESTORE:
        return "token store failed";
    case FENCING_ENOTOKEN:
        return "no fencing token";
    default:
        return err < 0 && err > -4096 ? strerror(-err) : "unknown error";
    }
}

int fencing_token_cmp(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}

unsigned fencing_quorum(unsigned n)
{
    return n == 0 ? 0 : n / 2 + 1;
}

int fencing_propose(uint64_t now_us, uint64_t last_seen, uint64_t *out)
{
    if (out == NULL)
        return -EINVAL;
    if (last_seen >= FENCING_TOKEN_MAX - 1 || now_us >= FENCING_TOKEN_MAX)
        return FENCING_EEXHAUSTED;
    *out = now_us > last_seen ? now_us : last_seen + 1;
    return 0;
}

int fencing_propose_next(uint64_t max_seen, uint64_t *out)
{
    return fencing_propose(0, max_seen, out);
}

/*
 * A round is over n nodes; `answered` of them are settled (replied, or failed
 * for good). The rest may still grant or accept, so a verdict is given only
 * when no further reply could change it. In round two the lock is already
 * held, so granted is n even before every node has answered.
 */
enum fencing_verdict fencing_decide(const struct fencing_tally *t, int fenced)
{
    if (t == NULL || t->n == 0 || t->answered > t->n || t->granted > t->n || t->accepted > t->answered)
        return FENCING_FAILED;
    unsigned q = fencing_quorum(t->n);
    unsigned open = t->n - t->answered;

    if (t->granted + open < q)
        return FENCING_FAILED;
    if (!fenced)
        return t->granted >= q ? FENCING_GRANTED : FENCING_WAIT;
    if (t->granted >= q && t->accepted >= q)
        return FENCING_GRANTED;
    if (t->granted >= q && t->accepted + open < q)
        return FENCING_ROUND2;
    return FENCING_WAIT;
}

int fencing_token_parse(const char *s, size_t len, uint64_t *out)
{
    if (out == NULL)
        return -EINVAL;
    uint64_t v = 0;
    if (s == NULL || len == 0) {
        *out = 0;
        return 0;
    }
    if (len > 16)
        return -EINVAL; /* 2^53 has 16 digits */
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v >= FENCING_TOKEN_MAX)
        return -EINVAL;
    *out = v;
    return 0;
}

int fencing_check(uint64_t last, uint64_t token)
{
    if (token == 0)
        return FENCING_ENOTOKEN;
    return token >= last ? 0 : FENCING_ESTALE;
}

int fencing_fence_key(const char *lock_key, size_t lock_key_len, char *buf, size_t cap)
{
    static const char suffix[] = "}:fence";
    if (lock_key == NULL || lock_key_len == 0 || buf == NULL)
        return -EINVAL;
    size_t need = 1 + lock_key_len + sizeof(suffix) - 1;
    if (need + 1 > cap)
        return -ENOSPC;
    buf[0] = '{';
    memcpy(buf + 1, lock_key, lock_key_len);
    memcpy(buf + 1 + lock_key_len, suffix, sizeof(suffix));
    return (int)need;
}

unsigned fencing_bucket(const char *resource, size_t len)
{
    if (resource == NULL)
        return 0;
    uint64_t h = 1469598103934665603ULL; /* FNV-1a, 64 bits */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)resource[i]) * 1099511628211ULL;
    return (unsigned)((h ^ (h >> 32)) % FENCING_BUCKETS);
}

/* b in decimal into buf (cap >= 6: b < 100000); returns its length. */
static int put_dec(unsigned b, char *buf)
{
    char tmp[8];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + b % 10);
        b /= 10;
    } while (b > 0);
    for (int k = 0; k < n; k++)
        buf[k] = tmp[n - 1 - k];
    buf[n] = '\0';
    return n;
}

int fencing_bucket_key(const char *prefix, size_t prefix_len, unsigned bucket, char *buf, size_t cap)
{
    static const char mid[] = "\0fence:"; /* the NUL is part of the name */
    if ((prefix == NULL && prefix_len > 0) || buf == NULL || bucket >= FENCING_BUCKETS)
        return -EINVAL;
    if (prefix_len > 4096 || prefix_len + (sizeof(mid) - 1) + 4 > cap)
        return -ENOSPC;
    if (prefix_len > 0)
        memcpy(buf, prefix, prefix_len);
    memcpy(buf + prefix_len, mid, sizeof(mid) - 1);
    size_t n = prefix_len + sizeof(mid) - 1;
    return (int)n + put_dec(bucket / FENCING_BUCKET_FIELDS, buf + n);
}

int fencing_bucket_field(unsigned bucket, char *buf, size_t cap)
{
    if (buf == NULL || cap < 3 || bucket >= FENCING_BUCKETS)
        return -EINVAL;
    return put_dec(bucket % FENCING_BUCKET_FIELDS, buf);
}
