/*
 * fencelock fence FILE|DIR: the fence of a file or a directory, the last
 * token that wrote it (see docs/fenced-files.md).
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include <fencefile/fencefile.h>

#include "cli.h"

static const char *prog = "fencelock";

static void usage(FILE *to, const char *name)
{
    (void)name;
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
}

static const char *store_name(int store)
{
    return store == FENCEFILE_STORE_XATTR ? "xattr" : store == FENCEFILE_STORE_SIDECAR ? "sidecar" : NULL;
}

int cmd_fence(int argc, char **argv)
{
    struct file_args fa;
    int code = fencelock_file_args(argc, argv, "fence", usage, &fa);
    if (code >= 0)
        return code;
    if (fa.token_opt != NULL) {
        fprintf(stderr, "%s: fence: option '--token' does not apply\n", prog);
        return EXIT_USAGE;
    }
    fencefile *h = NULL;
    code = fencelock_file_open(&fa, &h);
    if (code >= 0)
        return code;
    struct fencefile_fence fe;
    int rc = fencefile_last(h, fa.file, &fe);
    if (rc == 0)
        fencelock_print_json(json_pack("{s:s, s:s, s:I, s:s?}", "path", fa.file, "fence",
                                       fe.directory ? "directory" : "file", "token", (json_int_t)fe.token,
                                       "store", store_name(fe.store)));
    return fencelock_file_done(h, rc);
}
