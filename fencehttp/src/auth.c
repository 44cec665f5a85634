/* The clients of --auth-file, and a comparison that does not leak where a
 * guessed token first differs from a real one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <fencehttp/fencehttp.h>

struct entry {
    char token[FENCEHTTP_AUTH_TOKEN_MAX + 1];
    size_t len;
    struct fencehttp_client client;
};

struct fencehttp_auth {
    struct entry *e;
    size_t n;
    unsigned rules; /* FENCEHTTP_RULE_* used by some line */
};

#define RULES_MAX 64
#define RULE_VALUE_MAX 1024

static void free_rules(struct fencehttp_client *cl)
{
    struct fencehttp_rule *r = (struct fencehttp_rule *)cl->rules;
    for (size_t i = 0; i < cl->n_rules; i++)
        free(r[i].value);
    free(r);
    cl->rules = NULL;
    cl->n_rules = 0;
}

void fencehttp_auth_free(fencehttp_auth *a)
{
    if (a == NULL)
        return;
    for (size_t i = 0; i < a->n; i++)
        free_rules(&a->e[i].client);
    /* Tokens are secrets: do not leave them in freed memory. */
    if (a->e != NULL)
        memset(a->e, 0, a->n * sizeof(*a->e));
    free(a->e);
    free(a);
}

size_t fencehttp_auth_count(const fencehttp_auth *a)
{
    return a ? a->n : 0;
}

const struct fencehttp_client *fencehttp_auth_client(const fencehttp_auth *a, size_t i)
{
    return a && i < a->n ? &a->e[i].client : NULL;
}

unsigned fencehttp_auth_rules(const fencehttp_auth *a)
{
    return a ? a->rules : 0;
}

int fencehttp_client_allows(const struct fencehttp_client *cl, const char *resource, size_t len)
{
    if (cl == NULL || resource == NULL)
        return 0;
    if (cl->n_rules == 0)
        return 1;
    for (size_t i = 0; i < cl->n_rules; i++) {
        const struct fencehttp_rule *r = &cl->rules[i];
        if (r->prefix ? len >= r->len && memcmp(resource, r->value, r->len) == 0
                      : len == r->len && memcmp(resource, r->value, len) == 0)
            return 1;
    }
    return 0;
}

/* One RULE of a line into cl; NULL or the reason it is refused. */
static const char *add_rule(struct fencehttp_client *cl, const char *w, unsigned *used)
{
    if (strcmp(w, "admin") == 0) {
        cl->admin = 1;
        return NULL;
    }
    if (strcmp(w, "read-only") == 0) {
        cl->read_only = 1;
        *used |= FENCEHTTP_RULE_READ_ONLY;
        return NULL;
    }
    int prefix = strncmp(w, "prefix=", 7) == 0;
    if (!prefix && strncmp(w, "resource=", 9) != 0)
        return "want: TOKEN [NAME [admin | read-only | resource=R | prefix=P ...]]";
    const char *v = w + (prefix ? 7 : 9);
    if (cl->n_rules == RULES_MAX)
        return "at most 64 resource= and prefix= rules on a line";
    char *d = NULL;
    size_t n = 0;
    int rc = fencehttp_decode(v, strlen(v), &d, &n);
    if (rc == -ENOMEM)
        return "out of memory";
    if (rc != 0 || n == 0 || n > RULE_VALUE_MAX) {
        free(d);
        return "a resource= or prefix= value is 1..1024 bytes, percent-encoded, without NUL";
    }
    struct fencehttp_rule *r = realloc((void *)cl->rules, (cl->n_rules + 1) * sizeof(*r));
    if (r == NULL) {
        free(d);
        return "out of memory";
    }
    r[cl->n_rules++] = (struct fencehttp_rule){d, n, prefix};
    cl->rules = r;
    *used |= FENCEHTTP_RULE_RESOURCES;
    return NULL;
}

/* Equal bytes and equal lengths, in a time that depends only on the
 * length of the presented token. */
static int same_token(const char *given, size_t given_len, const struct entry *e)
{
    unsigned diff = (unsigned)(given_len != e->len);
    for (size_t i = 0; i < given_len; i++) {
        /* An index past the real token reads its byte 0; diff is set by the
         * length already. */
        size_t j = i < e->len ? i : 0;
        diff |= (unsigned)((unsigned char)given[i] ^ (unsigned char)e->token[j]);
    }
    return diff == 0;
}

const struct fencehttp_client *fencehttp_auth_check(const fencehttp_auth *a, const char *header)
{
    if (a == NULL || header == NULL)
        return NULL;
    while (*header == ' ' || *header == '\t')
        header++;
    if (strncasecmp(header, "Bearer", 6) != 0 || (header[6] != ' ' && header[6] != '\t'))
        return NULL;
    const char *t = header + 7;
    while (*t == ' ' || *t == '\t')
        t++;
    size_t len = strlen(t);
    while (len > 0 && (t[len - 1] == ' ' || t[len - 1] == '\t'))
        len--;
    if (len == 0 || len > FENCEHTTP_AUTH_TOKEN_MAX)
        return NULL;
    /* Every entry is compared, whichever matches. */
    const struct fencehttp_client *found = NULL;
    for (size_t i = 0; i < a->n; i++) {
        int same = same_token(t, len, &a->e[i]);
        if (same && found == NULL)
            found = &a->e[i].client;
    }
    return found;
}

static int bad_line(char *errbuf, size_t errcap, const char *path, int line, const char *why)
{
    snprintf(errbuf, errcap, "%s:%d: %s", path, line, why);
    return -EINVAL;
}

int fencehttp_auth_load(const char *path, fencehttp_auth **out, char *errbuf, size_t errcap)
{
    if (path == NULL || out == NULL) {
        snprintf(errbuf, errcap, "fencehttp_auth_load: NULL argument");
        return -EINVAL;
    }
    FILE *f = fencehttp_fopen_regular(path);
    if (f == NULL) {
        int e = errno;
        snprintf(errbuf, errcap, "%s: %s", path, fencehttp_file_error(e));
        return -e;
    }
    fencehttp_auth *a = calloc(1, sizeof(*a));
    /* A line of any length (a long comment is fine); a token in it is
     * checked for its own limits below. */
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t got;
    int rc = 0, lineno = 0;
    size_t cap = 0;
    if (a == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    for (;;) {
        errno = 0;
        if ((got = getline(&line, &line_cap, f)) < 0)
            break;
        lineno++;
        if (memchr(line, '\0', (size_t)got) != NULL) {
            rc = bad_line(errbuf, errcap, path, lineno, "a NUL byte in the line");
            goto out;
        }
        char *save = NULL;
        char *tok = strtok_r(line, " \t\r\n", &save);
        if (tok == NULL || tok[0] == '#')
            continue;
        char *name = strtok_r(NULL, " \t\r\n", &save);
        size_t len = strlen(tok);
        if (len < FENCEHTTP_AUTH_TOKEN_MIN || len > FENCEHTTP_AUTH_TOKEN_MAX) {
            rc = bad_line(errbuf, errcap, path, lineno, "a token must be 16..256 bytes");
            goto out;
        }
        for (size_t i = 0; i < len; i++) {
            if ((unsigned char)tok[i] <= 0x20 || (unsigned char)tok[i] >= 0x7f) {
                rc = bad_line(errbuf, errcap, path, lineno, "a token must be printable ASCII");
                goto out;
            }
        }
        /* A NAME that reads as a rule or as the name of an unnamed line
         * ("TOKEN read-only", "TOKEN line-3") would be a client of that
         * name, without the rule or as another line. */
        if (name != NULL && (strcmp(name, "admin") == 0 || strcmp(name, "read-only") == 0 ||
                             strncmp(name, "resource=", 9) == 0 || strncmp(name, "prefix=", 7) == 0 ||
                             (strncmp(name, "line-", 5) == 0 && name[5] != '\0' &&
                              strspn(name + 5, "0123456789") == strlen(name + 5)))) {
            rc = bad_line(errbuf, errcap, path, lineno,
                          "a NAME comes before the rules, and line-N is the name of an unnamed line");
            goto out;
        }
        if (name != NULL && strlen(name) > FENCEHTTP_AUTH_NAME_MAX) {
            rc = bad_line(errbuf, errcap, path, lineno, "a name must be at most 64 bytes");
            goto out;
        }
        for (size_t i = 0; i < a->n; i++) {
            if (a->e[i].len == len && memcmp(a->e[i].token, tok, len) == 0) {
                rc = bad_line(errbuf, errcap, path, lineno, "the same token twice");
                goto out;
            }
        }
        if (a->n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            struct entry *e = realloc(a->e, ncap * sizeof(*e));
            if (e == NULL) {
                rc = -ENOMEM;
                goto out;
            }
            a->e = e;
            cap = ncap;
        }
        struct entry *e = &a->e[a->n++];
        memset(e, 0, sizeof(*e));
        memcpy(e->token, tok, len);
        e->len = len;
        if (name != NULL)
            snprintf(e->client.name, sizeof(e->client.name), "%s", name);
        else
            snprintf(e->client.name, sizeof(e->client.name), "line-%d", lineno);
        e->client.named = name != NULL;
        for (char *w = name ? strtok_r(NULL, " \t\r\n", &save) : NULL; w != NULL;
             w = strtok_r(NULL, " \t\r\n", &save)) {
            const char *why = add_rule(&e->client, w, &a->rules);
            if (why != NULL) {
                rc =
                    strcmp(why, "out of memory") == 0 ? -ENOMEM : bad_line(errbuf, errcap, path, lineno, why);
                goto out;
            }
        }
    }
    if (errno == ENOMEM || ferror(f)) {
        rc = errno == ENOMEM ? -ENOMEM : -EIO;
        snprintf(errbuf, errcap, "%s: read error", path);
        goto out;
    }
    if (a->n == 0) {
        rc = -EINVAL;
        snprintf(errbuf, errcap, "%s: no client in the file", path);
        goto out;
    }
out:
    /* The line may have held a token: do not leave it in freed memory. */
    if (line != NULL)
        memset(line, 0, line_cap);
    free(line);
    fclose(f);
    if (rc != 0) {
        if (rc == -ENOMEM)
            snprintf(errbuf, errcap, "out of memory");
        fencehttp_auth_free(a);
        return rc;
    }
    *out = a;
    return 0;
}
