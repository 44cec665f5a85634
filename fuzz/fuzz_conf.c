/*
 * fencehttp_conf_read, the services' configuration file reader, on any
 * bytes: it answers 0 with items that are each "--NAME" (a flag) or
 * "--NAME=VALUE" (an option that takes one) of the table and carry their
 * "path:line", or an error with its message; and the items parse with
 * getopt_long as the services parse them. The file is a memfd: a regular
 * file, as the reader demands.
 */
#include <assert.h>
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fencehttp/fencehttp.h>

static const struct option opts[] = {
    {"nodes", required_argument, NULL, 'n'},
    {"key-prefix", required_argument, NULL, 'P'},
    {"redis-functions", no_argument, NULL, 'R'},
    {"config", required_argument, NULL, 'f'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int parse(int argc, char **argv, void *arg)
{
    int *seen = arg, ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        assert(ch == 'n' || ch == 'P' || ch == 'R'); /* the reader lets no other key through */
        (*seen)++;
    }
    return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("conf", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (size > 0 && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64], err[512] = "";
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    struct fencehttp_conf *c = NULL;
    int rc = fencehttp_conf_read(path, opts, &c, err, sizeof(err));
    if (rc != 0) {
        assert(c == NULL && err[0] != '\0');
    } else {
        assert(c != NULL);
        for (size_t i = 0; i < c->n; i++) {
            const char *a = c->items[i].arg;
            assert(strncmp(a, "--", 2) == 0 && strncmp(c->items[i].where, path, strlen(path)) == 0);
            int flag = strcmp(a, "--redis-functions") == 0;
            assert(flag || strncmp(a, "--nodes=", 8) == 0 || strncmp(a, "--key-prefix=", 13) == 0);
        }
        char *argv[] = {"fuzz", NULL};
        const char *where = NULL;
        int seen = 0;
        opterr = 0;
        fencehttp_conf_parse(c, 1, argv, parse, &seen, &where);
        assert((size_t)seen == c->n && where == NULL);
        fencehttp_conf_free(c);
    }
    close(fd);
    return 0;
}
