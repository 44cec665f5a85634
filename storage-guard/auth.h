/*
 * Bearer-token authentication of storage-guard (--auth-file): which
 * clients may talk to it, under which name, and which of them are
 * operators (admin). A loaded sg_auth is read-only: any thread may check
 * against it.
 */
#ifndef SG_AUTH_H
#define SG_AUTH_H

#include <stddef.h>

/* Shortest and longest accepted token, in bytes. */
#define SG_AUTH_TOKEN_MIN 16
#define SG_AUTH_TOKEN_MAX 256
#define SG_AUTH_NAME_MAX 64

struct sg_client {
    char name[SG_AUTH_NAME_MAX + 1];
    int admin;
};

typedef struct sg_auth sg_auth;

/*
 * Load path: one client per line, "TOKEN [NAME [admin]]", separated by
 * spaces or tabs; empty lines and lines starting with '#' are skipped.
 * NAME defaults to "line-N". Tokens are 16..256 printable ASCII bytes
 * without spaces, each at most once. Writes *out only on success. Returns
 * 0, -ENOMEM, -EINVAL (the message names the line) or -errno of open/read.
 */
int sg_auth_load(const char *path, sg_auth **out, char *errbuf, size_t errcap);

/* Free a loaded set. Accepts NULL. */
void sg_auth_free(sg_auth *a);

/*
 * The client whose token the Authorization header value carries
 * ("Bearer TOKEN", scheme case-insensitive), or NULL. The header is
 * compared with every token in time independent of where they differ.
 * header may be NULL. The result is borrowed from a.
 */
const struct sg_client *sg_auth_check(const sg_auth *a, const char *header);

#endif
