/*
 * fencelock write / append: fenced file writes from the shell, on
 * top of libfencefile. A job under `fencelock run` has its token in
 * FENCELOCK_TOKEN; `... | fencelock write FILE` then replaces FILE only if
 * no newer token wrote it meanwhile. Data on stdout as one JSON line, one
 * line on stderr for a refusal, exit codes as in docs/cli.md.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include <fencefile/fencefile.h>

#include "cli.h"

static const char *prog = "fencelock";

static void usage(FILE *to, const char *name)
{
    int append = strcmp(name, "append") == 0;
    fprintf(to,
            "usage: fencelock %s [--token N] [--dir DIR] [--wait D] [--sidecar] FILE < DATA\n"
            "\n"
            "%s FILE with standard input, only if the token (--token, or FENCELOCK_TOKEN,\n"
            "which `fencelock run` sets) is not older than the last token that wrote FILE.\n"
            "%s"
            "  --dir DIR   use the fence of directory DIR, shared by every file under it\n"
            "  --wait D    wait up to D for another fenced writer of the same fence (default 10s)\n"
            "  --sidecar   keep the fence only in the lock file, not also in an extended attribute\n"
            "Prints {\"path\",\"fence\",\"token\",\"previous\"} (previous: the fence before).\n"
            "Exit: 0 written; 65 refused: the token is stale (FILE unchanged); 64 usage or no\n"
            "  token; 75 another writer held the fence past --wait; 70 error.\n",
            name, append ? "Append to" : "Replace",
            append ? "The fence is raised before the data is appended; a crash can leave part of it.\n"
                   : "FILE is replaced whole (temporary file, fsync, rename), never half-written.\n");
}

/* The token from --token or FENCELOCK_TOKEN; 0 and a message if none. */
static uint64_t get_token(const char *opt, const char *name)
{
    const char *s = opt != NULL ? opt : getenv("FENCELOCK_TOKEN");
    const char *from = opt != NULL ? "--token" : "FENCELOCK_TOKEN";
    uint64_t t = 0;
    if (s == NULL || *s == '\0') {
        fprintf(stderr, "%s: %s: no token: give --token or run under `fencelock run`\n", prog, name);
        return 0;
    }
    if (fencing_token_parse(s, strlen(s), &t) < 0) {
        fprintf(stderr, "%s: %s: %s '%s' is not a token (decimal, below 2^53)\n", prog, name, from, s);
        return 0;
    }
    if (t == 0)
        fprintf(stderr, "%s: %s: %s is 0: the lock has no fencing token (--no-fencing?)\n", prog, name, from);
    return t;
}

/* write and append: one operation, at the start or at the end. */
static int write_or_append(int argc, char **argv, const char *name)
{
    struct file_args fa;
    int code = fencelock_file_args(argc, argv, name, usage, &fa);
    if (code >= 0)
        return code;
    uint64_t token = get_token(fa.token_opt, name);
    if (token == 0)
        return EXIT_USAGE;
    fencefile *h = NULL;
    code = fencelock_file_open(&fa, &h);
    if (code >= 0)
        return code;
    uint64_t prev = 0;
    int rc;
    if (strcmp(name, "write") == 0)
        rc = fencefile_write_fd(h, fa.file, token, STDIN_FILENO, &prev);
    else
        rc = fencefile_append_fd(h, fa.file, token, STDIN_FILENO, &prev);
    if (rc == 0)
        fencelock_print_json(json_pack("{s:s, s:s, s:I, s:I}", "path", fa.file, "fence",
                                       fa.o.dir_fence != NULL ? "directory" : "file", "token",
                                       (json_int_t)token, "previous", (json_int_t)prev));
    return fencelock_file_done(h, rc);
}

int cmd_write(int argc, char **argv)
{
    return write_or_append(argc, argv, "write");
}

int cmd_append(int argc, char **argv)
{
    return write_or_append(argc, argv, "append");
}
