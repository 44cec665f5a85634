/*
 * fencelock write / append / fence: fenced file writes from the shell, on
 * top of libfencefile. A job under `fencelock run` has its token in
 * FENCELOCK_TOKEN; `... | fencelock write FILE` then replaces FILE only if
 * no newer token wrote it meanwhile. Data on stdout as one JSON line, one
 * line on stderr for a refusal, exit codes as in docs/cli.md.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include <fencefile/fencefile.h>

#include "cmd_file.h"
#include "fencelock.h"

enum {
    FX_OK = 0,
    FX_USAGE = 64,
    FX_STALE = FENCELOCK_EXIT_STALE,
    FX_ERROR = 70,
    FX_BUSY = 75,
};

static const char *prog = "fencelock";

/* The generic options that take a value, to find the command behind them
 * (they do not apply to the file commands, which say so). */
static const char *const value_opts[] = {
    "--nodes",
    "--ttl",
    "--retry-count",
    "--retry-delay",
    "--wait",
    "--key-prefix",
    "--timeout",
    "--extend-at",
    "--kill-after",
    "--token",
    "--dir",
    "--undo",
    "--backoff",
    "--retry-delay-max",
    "--password-file",
    "--permits",
    "--cacert",
    "--cert",
    "--key",
    "--tls-server-name",
    NULL,
};

static int takes_value(const char *arg)
{
    for (int i = 0; value_opts[i] != NULL; i++)
        if (strcmp(arg, value_opts[i]) == 0)
            return 1;
    return 0;
}

static void file_usage(FILE *to, const char *name)
{
    if (strcmp(name, "fence") == 0) {
        fputs("usage: fencelock fence [--dir DIR] FILE|DIR\n"
              "\n"
              "Print the fence of FILE (the last token that wrote it), or of DIR (the\n"
              "directory fence), as one JSON line:\n"
              "  {\"path\",\"fence\":\"file\"|\"directory\",\"token\",\"store\":\"xattr\"|\"sidecar\"|null}\n"
              "token is 0 and store null when no fenced write happened yet. With --dir,\n"
              "FILE must be under DIR and the fence shown is DIR's.\n"
              "Exit: 0; 64 usage; 75 another writer held the fence past --wait; 70 error\n"
              "  (65 is not used: reading never refuses).\n",
              to);
        return;
    }
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

static int exit_for(int rc)
{
    switch (rc) {
    case 0:
        return FX_OK;
    case FENCING_ESTALE:
        return FX_STALE;
    case -ETIMEDOUT:
        return FX_BUSY;
    case -EINVAL:
    case -EISDIR:
    case -ELOOP:
    case -EMLINK:
    case -EEXIST:
    case -ENAMETOOLONG:
    case FENCING_ENOTOKEN:
        return FX_USAGE;
    default:
        return FX_ERROR;
    }
}

static const char *store_name(int store)
{
    return store == FENCEFILE_STORE_XATTR ? "xattr" : store == FENCEFILE_STORE_SIDECAR ? "sidecar" : NULL;
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

int fencelock_file_main(int argc, char **argv)
{
    const char *name = NULL;
    for (int i = 1; i < argc && name == NULL; i++) {
        if (strcmp(argv[i], "--") == 0)
            return -1;
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            i += takes_value(argv[i]);
        else
            name = argv[i];
    }
    if (name == NULL ||
        (strcmp(name, "write") != 0 && strcmp(name, "append") != 0 && strcmp(name, "fence") != 0))
        return -1;

    enum { O_TOKEN = 256, O_DIR, O_WAIT, O_SIDECAR };
    static const struct option longopts[] = {
        {"token", required_argument, NULL, O_TOKEN},
        {"dir", required_argument, NULL, O_DIR},
        {"wait", required_argument, NULL, O_WAIT},
        {"sidecar", no_argument, NULL, O_SIDECAR},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *token_opt = NULL, *file = NULL;
    struct fencefile_options o;
    fencefile_options_init(&o);
    int help = 0, nops = 0;
    opterr = 0;
    optind = 1;
    int dashes = 0;
    while (optind < argc) {
        int prev = optind;
        int opt = dashes ? -1 : getopt_long(argc, argv, "+:h", longopts, NULL);
        if (opt == -1) {
            /* After "--" every word is an operand: "write -- -odd-name". */
            if (optind > prev && strcmp(argv[optind - 1], "--") == 0)
                dashes = 1;
            if (optind >= argc)
                break;
            if (nops == 2) {
                fprintf(stderr, "%s: %s: too many arguments (see %s --help)\n", prog, name, name);
                return FX_USAGE;
            }
            if (nops++ == 1)
                file = argv[optind];
            optind++;
            continue;
        }
        switch (opt) {
        case 'h':
            help = 1;
            break;
        case O_TOKEN:
            token_opt = optarg;
            break;
        case O_DIR:
            o.dir_fence = optarg;
            break;
        case O_SIDECAR:
            o.store = FENCEFILE_STORE_SIDECAR;
            break;
        case O_WAIT:
            if (fencelock_parse_duration(optarg, &o.lock_timeout_ms) < 0) {
                fprintf(stderr, "%s: --wait '%s': not a duration (like 500ms, 10s, 2m)\n", prog, optarg);
                return FX_USAGE;
            }
            break;
        case ':':
            fprintf(stderr, "%s: option '%s' needs a value (see %s --help)\n", prog, argv[optind - 1], name);
            return FX_USAGE;
        default:
            fprintf(stderr, "%s: %s: option '%s' does not apply (see %s --help)\n", prog, name,
                    argv[optind - 1], name);
            return FX_USAGE;
        }
    }
    if (help) {
        file_usage(stdout, name);
        return FX_OK;
    }
    int is_fence = strcmp(name, "fence") == 0;
    if (file == NULL || nops != 2) {
        fprintf(stderr, "%s: %s: give one %s\n", prog, name, is_fence ? "FILE or DIR" : "FILE");
        file_usage(stderr, name);
        return FX_USAGE;
    }
    if (is_fence && token_opt != NULL) {
        fprintf(stderr, "%s: fence: option '--token' does not apply\n", prog);
        return FX_USAGE;
    }
    uint64_t token = 0;
    if (!is_fence && (token = get_token(token_opt, name)) == 0)
        return FX_USAGE;

    char err[512];
    fencefile *h = NULL;
    int rc = fencefile_new(&o, &h, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, name, err);
        return rc == -ENOENT || rc == -ENOTDIR ? FX_USAGE : exit_for(rc);
    }
    int code;
    if (is_fence) {
        struct fencefile_fence fe;
        rc = fencefile_last(h, file, &fe);
        if (rc == 0)
            fencelock_print_json(json_pack("{s:s, s:s, s:I, s:s?}", "path", file, "fence",
                                           fe.directory ? "directory" : "file", "token", (json_int_t)fe.token,
                                           "store", store_name(fe.store)));
    } else {
        uint64_t prev = 0;
        if (strcmp(name, "write") == 0)
            rc = fencefile_write_fd(h, file, token, STDIN_FILENO, &prev);
        else
            rc = fencefile_append_fd(h, file, token, STDIN_FILENO, &prev);
        if (rc == 0)
            fencelock_print_json(json_pack("{s:s, s:s, s:I, s:I}", "path", file, "fence",
                                           o.dir_fence != NULL ? "directory" : "file", "token",
                                           (json_int_t)token, "previous", (json_int_t)prev));
    }
    code = exit_for(rc);
    if (rc != 0)
        fprintf(stderr, "%s: %s\n", prog, fencefile_errmsg(h));
    fencefile_free(h);
    return code;
}
