/*
 * fencelock-replay: replay Kleppmann's scenarios against real redis-server
 * nodes and a real storage-guard, each without fencing and with it, print
 * the timelines and verdicts, and draw them as SVG and JSON.
 *
 *   fencelock-replay [--out DIR] [--client PATH] [--storage-guard PATH] [SCENARIO ...]
 *
 * It runs the client program (fencelock-scenario-client, or any program
 * that speaks the protocol in docs/testing.md) and storage-guard, found in
 * this order: the option, the environment (FENCELOCK_SCENARIO_CLIENT,
 * FENCELOCK_STORAGE_GUARD), then the programs of the same build: next to
 * this one in the build tree, or where meson installed them when this
 * program runs from its installed place. storage-guard last comes from PATH.
 *
 * Exit status: 0 when every run came out as the critique predicts, 1 when
 * one did not, 2 when a run could not be carried out, 64 for bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scenario.h"

#define RUNS_MAX 16

static void usage(FILE *f)
{
    fprintf(f, "usage: fencelock-replay [--out DIR] [--client PATH] [--storage-guard PATH] [SCENARIO ...]\n"
               "       fencelock-replay --help | --version\n"
               "scenarios:");
    for (int i = 0; sc_scenarios[i]; i++)
        fprintf(f, " %s", sc_scenarios[i]);
    fprintf(f, " (default: all)\n"
               "writes DIR/replay.svg and DIR/replay.json (DIR defaults to replay-out)\n"
               "--client, $FENCELOCK_SCENARIO_CLIENT: the client program (protocol: docs/testing.md)\n"
               "--storage-guard, $FENCELOCK_STORAGE_GUARD: the storage-guard program\n");
}

#ifndef FENCELOCK_VERSION
#define FENCELOCK_VERSION "unknown"
#endif

/* Where meson installs the programs; set by scenarios/meson.build. */
#ifndef FENCELOCK_BINDIR
#define FENCELOCK_BINDIR "/usr/local/bin"
#endif
#ifndef FENCELOCK_LIBEXECDIR
#define FENCELOCK_LIBEXECDIR "/usr/local/libexec/fencelock"
#endif

/* A program next to this one (the build tree or an install). */
static void sibling(const char *self_dir, const char *rel, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", self_dir, rel);
}

/* 1 if this program runs from the bindir it was installed to. */
static int installed(const char *self_dir)
{
    char a[PATH_MAX], b[PATH_MAX];
    return realpath(self_dir, a) != NULL && realpath(FENCELOCK_BINDIR, b) != NULL && strcmp(a, b) == 0;
}

/* The client and storage-guard of this build, when neither the options nor
 * the environment named them. */
static void default_programs(const char *self_dir, const char **client, char *client_buf, const char **sg,
                             char *sg_buf, size_t cap)
{
    int inst = installed(self_dir);
    if (*client == NULL) {
        if (inst)
            snprintf(client_buf, cap, "%s/fencelock-scenario-client", FENCELOCK_LIBEXECDIR);
        else
            sibling(self_dir, "fencelock-scenario-client", client_buf, cap);
        *client = client_buf;
    }
    if (*sg == NULL) {
        if (inst)
            snprintf(sg_buf, cap, "%s/storage-guard", FENCELOCK_BINDIR);
        else
            sibling(self_dir, "../storage-guard/storage-guard", sg_buf, cap);
        *sg = access(sg_buf, X_OK) == 0 ? sg_buf : "storage-guard";
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'},
        {"client", required_argument, NULL, 'c'},
        {"storage-guard", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *out_dir = "replay-out", *client = getenv("FENCELOCK_SCENARIO_CLIENT"),
               *sg = getenv("FENCELOCK_STORAGE_GUARD");
    int c;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            out_dir = optarg;
            break;
        case 'c':
            client = optarg;
            break;
        case 's':
            sg = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("fencelock-replay %s\n", FENCELOCK_VERSION);
            return 0;
        default:
            usage(stderr);
            return 64;
        }
    }
    char self[PATH_MAX], dir[PATH_MAX], client_buf[PATH_MAX + 64], sg_buf[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n < 0) {
        perror("fencelock-replay: /proc/self/exe");
        return 2;
    }
    self[n] = '\0';
    snprintf(dir, sizeof(dir), "%s", dirname(self));
    default_programs(dir, &client, client_buf, &sg, sg_buf, sizeof(client_buf));
    const char *chosen[8];
    int nchosen = 0;
    for (int i = optind; i < argc; i++) {
        enum sc_mode m[3];
        if (strcmp(argv[i], "all") == 0)
            continue;
        if (sc_modes(argv[i], m) == 0 || nchosen == 8) {
            fprintf(stderr, "fencelock-replay: unknown scenario '%s'\n", argv[i]);
            usage(stderr);
            return 64;
        }
        chosen[nchosen++] = argv[i];
    }
    if (nchosen == 0)
        for (int i = 0; sc_scenarios[i]; i++)
            chosen[nchosen++] = sc_scenarios[i];

    static struct sc_result runs[RUNS_MAX];
    struct sc_config cfg = {.client_bin = client, .storage_guard_bin = sg};
    int nruns = 0, status = 0;
    for (int i = 0; i < nchosen; i++) {
        enum sc_mode modes[3];
        int nm = sc_modes(chosen[i], modes);
        for (int k = 0; k < nm && nruns < RUNS_MAX; k++) {
            char err[512];
            struct sc_result *r = &runs[nruns];
            int rc = sc_run(chosen[i], modes[k], &cfg, r, err, sizeof(err));
            if (rc != 0) {
                fprintf(stderr, "fencelock-replay: %s (%s) could not run: %s\n", chosen[i],
                        sc_mode_name(modes[k]), err);
                status = 2;
                continue;
            }
            sc_print_timeline(stdout, r);
            fflush(stdout);
            if (!sc_as_predicted(r) && status == 0)
                status = 1;
            nruns++;
        }
    }
    printf("summary:\n");
    for (int i = 0; i < nruns; i++)
        printf("  %-14s %-16s %s%s\n", runs[i].scenario, sc_mode_name(runs[i].mode), runs[i].verdict,
               sc_as_predicted(&runs[i]) ? "" : "   <-- not as predicted");
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "fencelock-replay: %s: %s\n", out_dir, strerror(errno));
        return 2;
    }
    char path[PATH_MAX];
    const char *kinds[] = {"svg", "json"};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof(path), "%s/replay.%s", out_dir, kinds[k]);
        FILE *f = fopen(path, "w");
        if (f == NULL || (k == 0 ? sc_write_svg(f, runs, nruns) : sc_write_json(f, runs, nruns)) != 0) {
            fprintf(stderr, "fencelock-replay: cannot write %s\n", path);
            status = 2;
        }
        if (f)
            fclose(f);
        printf("wrote %s\n", path);
    }
    return status;
}
