/*
 * lockcore's node address parser and the masking of addresses in messages.
 * Addresses come from the command line and the environment
 * (FENCELOCK_NODES), and carry passwords: whatever the input, a parsed
 * password must never show in the message or the masked form.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    struct address a;
    char err[512], masked[512];
    int rc = lockcore__parse_address(s, &a, err, sizeof(err));
    lockcore__mask_address(s, masked, sizeof(masked));
    if (rc == 0) {
        if (a.port < 1 || a.port > 65535 || a.db < 0 || a.host[0] == '\0')
            abort();
        /* The masked form is the same address with "***" for a password:
         * nothing of the password survives, everything else does. */
        if (a.pass[0] != '\0' && strlen(masked) < sizeof(masked) - 1) {
            struct address b;
            char err2[512];
            if (lockcore__parse_address(masked, &b, err2, sizeof(err2)) != 0)
                abort();
            if (strcmp(b.pass, "***") != 0 || strcmp(b.user, a.user) != 0 || strcmp(b.host, a.host) != 0 ||
                b.port != a.port || b.db != a.db)
                abort();
        }
    } else {
        if (rc != -EINVAL || err[0] == '\0')
            abort();
        /* A refused address is quoted masked, never as given (the message
         * keeps up to 299 bytes of it). */
        if (strlen(masked) < 200 && strchr(s, '\0') == s + size && strstr(err, masked) == NULL)
            abort();
    }
    free(s);
    return 0;
}
