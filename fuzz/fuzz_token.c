/*
 * fencing_token_parse against a plain reference: a token is "" (0) or 1..16
 * decimal digits below 2^53, and nothing else. Tokens come back from every
 * node on every grant, so a node can send this parser anything.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <fencing/fencing.h>

static int reference(const uint8_t *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    if (len > 16)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v >= FENCING_TOKEN_MAX)
        return -1;
    *out = v;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes: ASan sees a read past the end. */
    char *s = malloc(size ? size : 1);
    if (s == NULL)
        return 0;
    for (size_t i = 0; i < size; i++)
        s[i] = (char)data[i];
    uint64_t got = 12345, want = 0;
    int rc = fencing_token_parse(s, size, &got);
    int ref = reference(data, size, &want);
    if ((rc == 0) != (ref == 0))
        abort();
    if (rc == 0 && got != want)
        abort();
    if (rc != 0 && got != 12345) /* *out untouched on failure */
        abort();
    free(s);
    return 0;
}
