/* Real redis-server processes for tests: free ports, temp dirs, PIDs. */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "redis_harness.h"

#define NODES_MAX 16

struct rh_node {
    int port;
    int tls_port;
    pid_t pid;
    char dir[256];
    char url[384];
    redisContext *admin;
};

struct rh_cluster {
    struct rh_options o;
    char user[64], password[128], server[256];
    char tls_cert[256], tls_key[256], tls_ca[256];
    int n;
    struct rh_node nodes[NODES_MAX];
};

static const char faketime_lib[] = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
static const char malloc_lib[] = "/lib/x86_64-linux-gnu/libc_malloc_debug.so.0";

void rh_options_init(struct rh_options *o)
{
    memset(o, 0, sizeof(*o));
}

int rh_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    close(fd);
    return ntohs(a.sin_port);
}

int rh_mkdtemp(const char *tag, char *buf, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || tmp[0] == '\0')
        tmp = "/tmp";
    int w = snprintf(buf, cap, "%s/fencelock-%s-XXXXXX", tmp, tag);
    if (w < 0 || (size_t)w >= cap)
        return -ENOSPC;
    return mkdtemp(buf) ? 0 : -errno;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path) < 0 ? -1 : 0;
}

int rh_rmtree(const char *dir)
{
    if (dir == NULL || dir[0] == '\0')
        return -EINVAL;
    return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0 ? -errno : 0;
}

static void wipe_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            strcmp(e->d_name, "redis.log") == 0 || strcmp(e->d_name, "faketime") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        rh_rmtree(path);
    }
    closedir(d);
}

static void admin_close(struct rh_node *nd)
{
    if (nd->admin) {
        redisFree(nd->admin);
        nd->admin = NULL;
    }
}

/* Connect and authenticate the harness's own connection to a node. */
static redisContext *admin_connect(struct rh_cluster *c, struct rh_node *nd, int timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", nd->port, tv);
    if (ctx == NULL)
        return NULL;
    if (ctx->err) {
        redisFree(ctx);
        return NULL;
    }
    struct timeval rt = {5, 0};
    redisSetTimeout(ctx, rt);
    if (c->password[0]) {
        redisReply *r = c->user[0] ? redisCommand(ctx, "AUTH %s %s", c->user, c->password)
                                   : redisCommand(ctx, "AUTH %s", c->password);
        int ok = r != NULL && r->type != REDIS_REPLY_ERROR;
        if (r)
            freeReplyObject(r);
        if (!ok) {
            redisFree(ctx);
            return NULL;
        }
    }
    return ctx;
}

/* Wait until the node answers PING with PONG (not LOADING). */
static int wait_ready(struct rh_cluster *c, struct rh_node *nd, int timeout_ms)
{
    long long deadline = hp_now_ms() + timeout_ms;
    while (hp_now_ms() < deadline) {
        int st;
        if (hp_wait(nd->pid, 0, &st) == 0) {
            nd->pid = 0;
            return -ECHILD; /* it exited: port taken, bad option, ... */
        }
        redisContext *ctx = admin_connect(c, nd, 200);
        if (ctx != NULL) {
            redisReply *r = redisCommand(ctx, "PING");
            int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
            if (r)
                freeReplyObject(r);
            if (ok) {
                admin_close(nd);
                nd->admin = ctx;
                return 0;
            }
            redisFree(ctx);
        }
        hp_sleep_ms(10);
    }
    return -ETIMEDOUT;
}

static int start_node(struct rh_cluster *c, struct rh_node *nd)
{
    char port[16], logf[300], ftfile[300], ftenv[340], preload[400];
    char acl_user[256], tls_port[16];
    snprintf(port, sizeof(port), "%d", nd->port);
    snprintf(tls_port, sizeof(tls_port), "%d", nd->tls_port);
    snprintf(logf, sizeof(logf), "%s/redis.log", nd->dir);
    const char *argv[40];
    int a = 0;
    argv[a++] = c->server;
    argv[a++] = "--port";
    argv[a++] = port;
    argv[a++] = "--bind";
    argv[a++] = "127.0.0.1";
    argv[a++] = "--dir";
    argv[a++] = nd->dir;
    argv[a++] = "--daemonize";
    argv[a++] = "no";
    argv[a++] = "--save";
    argv[a++] = "";
    argv[a++] = "--appendonly";
    argv[a++] = c->o.persistent ? "yes" : "no";
    if (c->o.persistent) {
        argv[a++] = "--appendfsync";
        argv[a++] = "always";
    }
    if (c->tls_cert[0]) {
        const char *tls[] = {"--tls-port",         tls_port,
                             "--tls-cert-file",    c->tls_cert,
                             "--tls-key-file",     c->tls_key,
                             "--tls-ca-cert-file", c->tls_ca,
                             "--tls-auth-clients", c->o.tls_auth_clients ? "yes" : "no"};
        for (size_t k = 0; k < sizeof(tls) / sizeof(tls[0]); k++)
            argv[a++] = tls[k];
    }
    if (c->password[0] && c->user[0]) {
        /* Only the ACL user may log in: "default" is switched off. */
        snprintf(acl_user, sizeof(acl_user), ">%s", c->password);
        const char *acl[] = {"--user", "default", "off", "--user", c->user,
                             "on",     acl_user,  "~*",  "&*",     "+@all"};
        for (size_t k = 0; k < sizeof(acl) / sizeof(acl[0]); k++)
            argv[a++] = acl[k];
    } else if (c->password[0]) {
        argv[a++] = "--requirepass";
        argv[a++] = c->password;
    }
    argv[a] = NULL;

    char *env[8] = {0};
    int e = 0;
    if (c->o.faketime) {
        snprintf(ftfile, sizeof(ftfile), "%s/faketime", nd->dir);
        if (access(ftfile, F_OK) != 0) {
            FILE *f = fopen(ftfile, "w");
            if (f == NULL)
                return -errno;
            fputs("+0\n", f);
            fclose(f);
        }
        /* libfaketime alone hangs Debian's redis-server (jemalloc); glibc's
         * malloc preloaded first avoids it. Only the wall clock moves. */
        snprintf(preload, sizeof(preload), "LD_PRELOAD=%s:%s", malloc_lib, faketime_lib);
        snprintf(ftenv, sizeof(ftenv), "FAKETIME_TIMESTAMP_FILE=%s", ftfile);
        env[e++] = preload;
        env[e++] = ftenv;
        env[e++] = "FAKETIME_CACHE_DURATION=1";
        env[e++] = "FAKETIME_DONT_FAKE_MONOTONIC=1";
    }
    pid_t pid = hp_spawn((char *const *)argv, env, logf);
    if (pid < 0)
        return (int)pid;
    nd->pid = pid;
    int rc = wait_ready(c, nd, 10000);
    if (rc != 0) {
        if (nd->pid > 0)
            hp_signal(nd->pid, SIGKILL, 0);
        nd->pid = 0;
    }
    return rc;
}

static void set_url(struct rh_cluster *c, struct rh_node *nd)
{
    const char *scheme = nd->tls_port ? "rediss" : "redis";
    int port = nd->tls_port ? nd->tls_port : nd->port;
    if (c->password[0])
        snprintf(nd->url, sizeof(nd->url), "%s://%s:%s@127.0.0.1:%d", scheme, c->user, c->password, port);
    else
        snprintf(nd->url, sizeof(nd->url), "%s://127.0.0.1:%d", scheme, port);
}

int rh_tls_port(const struct rh_cluster *c, int i)
{
    return c == NULL || i < 0 || i >= c->n ? 0 : c->nodes[i].tls_port;
}

int rh_cluster_start(int n, const struct rh_options *o, struct rh_cluster **out)
{
    if (n < 1 || n > NODES_MAX || out == NULL)
        return -EINVAL;
    struct rh_cluster *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return -ENOMEM;
    if (o)
        c->o = *o;
    else
        rh_options_init(&c->o);
    snprintf(c->user, sizeof(c->user), "%s", c->o.user ? c->o.user : "");
    snprintf(c->password, sizeof(c->password), "%s", c->o.password ? c->o.password : "");
    const char *srv = c->o.server ? c->o.server : getenv("REDIS_SERVER");
    snprintf(c->server, sizeof(c->server), "%s", srv && srv[0] ? srv : "redis-server");
    snprintf(c->tls_cert, sizeof(c->tls_cert), "%s", c->o.tls_cert ? c->o.tls_cert : "");
    snprintf(c->tls_key, sizeof(c->tls_key), "%s", c->o.tls_key ? c->o.tls_key : "");
    snprintf(c->tls_ca, sizeof(c->tls_ca), "%s", c->o.tls_ca ? c->o.tls_ca : "");
    c->o.user = c->o.password = c->o.server = NULL; /* the copies above are used */
    c->o.tls_cert = c->o.tls_key = c->o.tls_ca = NULL;
    if (c->o.faketime && (access(faketime_lib, R_OK) != 0 || access(malloc_lib, R_OK) != 0)) {
        fprintf(stderr, "harness: faketime needs %s and %s (packages libfaketime, libc6)\n", faketime_lib,
                malloc_lib);
        free(c);
        return -ENOENT;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        struct rh_node *nd = &c->nodes[i];
        c->n = i + 1;
        rc = rh_mkdtemp("redis", nd->dir, sizeof(nd->dir));
        if (rc != 0)
            break;
        /* A port found free may be taken before redis binds it (tests run
         * in parallel): try a few. */
        for (int attempt = 0; attempt < 8; attempt++) {
            nd->port = rh_free_port();
            if (nd->port < 0) {
                rc = nd->port;
                break;
            }
            if (c->tls_cert[0] && (nd->tls_port = rh_free_port()) < 0) {
                rc = nd->tls_port;
                break;
            }
            rc = start_node(c, nd);
            if (rc != -ECHILD)
                break;
        }
        if (rc != 0) {
            fprintf(stderr, "harness: redis-server on port %d did not start (%s); log in %s/redis.log\n",
                    nd->port, strerror(-rc), nd->dir);
            break;
        }
        set_url(c, nd);
    }
    if (rc != 0) {
        rh_cluster_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void rh_cluster_free(struct rh_cluster *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < c->n; i++) {
        struct rh_node *nd = &c->nodes[i];
        admin_close(nd);
        if (nd->pid > 0)
            hp_signal(nd->pid, SIGKILL, 0);
        if (nd->dir[0] && getenv("FENCELOCK_KEEP_TMP") == NULL)
            rh_rmtree(nd->dir);
    }
    free(c);
}

int rh_size(const struct rh_cluster *c)
{
    return c ? c->n : 0;
}

static int bad(const struct rh_cluster *c, int i)
{
    return c == NULL || i < 0 || i >= c->n;
}

int rh_port(const struct rh_cluster *c, int i)
{
    return bad(c, i) ? -1 : c->nodes[i].port;
}

pid_t rh_pid(const struct rh_cluster *c, int i)
{
    return bad(c, i) ? 0 : c->nodes[i].pid;
}

const char *rh_dir(const struct rh_cluster *c, int i)
{
    return bad(c, i) ? NULL : c->nodes[i].dir;
}

const char *rh_url(const struct rh_cluster *c, int i)
{
    return bad(c, i) ? NULL : c->nodes[i].url;
}

redisReply *rh_command(struct rh_cluster *c, int i, const char *fmt, ...)
{
    if (bad(c, i) || fmt == NULL)
        return NULL;
    struct rh_node *nd = &c->nodes[i];
    for (int attempt = 0; attempt < 2; attempt++) {
        if (nd->admin == NULL)
            nd->admin = admin_connect(c, nd, 1000);
        if (nd->admin == NULL)
            return NULL;
        va_list ap;
        va_start(ap, fmt);
        redisReply *r = redisvCommand(nd->admin, fmt, ap);
        va_end(ap);
        if (r != NULL)
            return r;
        admin_close(nd); /* the node restarted since: reconnect once */
    }
    return NULL;
}

void rh_get(struct rh_cluster *c, int i, const char *key, char *out, size_t cap)
{
    if (cap == 0)
        return;
    out[0] = '\0';
    redisReply *r = rh_pid(c, i) > 0 ? rh_command(c, i, "GET %s", key) : NULL;
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        snprintf(out, cap, "%s", r->str);
    if (r != NULL)
        freeReplyObject(r);
}

long long rh_pttl(struct rh_cluster *c, int i, const char *key)
{
    redisReply *r = rh_pid(c, i) > 0 ? rh_command(c, i, "PTTL %s", key) : NULL;
    long long v = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -2;
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

int rh_set(struct rh_cluster *c, int i, const char *key, const char *val)
{
    redisReply *r = rh_command(c, i, "SET %s %s PX 60000", key, val);
    int rc = r != NULL && r->type == REDIS_REPLY_STATUS ? 0 : -EIO;
    if (r != NULL)
        freeReplyObject(r);
    return rc;
}

unsigned rh_holders(struct rh_cluster *c, const char *key, const char *val)
{
    unsigned k = 0;
    char v[256];
    for (int i = 0; i < rh_size(c); i++) {
        rh_get(c, i, key, v, sizeof(v));
        k += strcmp(v, val) == 0;
    }
    return k;
}

int rh_flushall(struct rh_cluster *c)
{
    if (c == NULL)
        return -EINVAL;
    int rc = 0;
    for (int i = 0; i < c->n; i++) {
        if (c->nodes[i].pid <= 0)
            continue;
        redisReply *r = rh_command(c, i, "FLUSHALL");
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            rc = -EIO;
        if (r)
            freeReplyObject(r);
    }
    return rc;
}

int rh_kill(struct rh_cluster *c, int i)
{
    if (bad(c, i))
        return -EINVAL;
    struct rh_node *nd = &c->nodes[i];
    admin_close(nd);
    if (nd->pid <= 0)
        return -ESRCH;
    int rc = hp_signal(nd->pid, SIGKILL, 0);
    nd->pid = 0;
    return rc;
}

int rh_restart(struct rh_cluster *c, int i, int keep_data)
{
    if (bad(c, i))
        return -EINVAL;
    struct rh_node *nd = &c->nodes[i];
    if (nd->pid > 0)
        rh_kill(c, i);
    admin_close(nd);
    if (!keep_data)
        wipe_dir(nd->dir);
    int rc = -ECHILD;
    /* The port was ours, but another test may grab it while the node is
     * down; then the node cannot come back where clients expect it. */
    for (int attempt = 0; attempt < 3 && rc == -ECHILD; attempt++) {
        rc = start_node(c, nd);
        if (rc == -ECHILD)
            hp_sleep_ms(100);
    }
    if (rc != 0)
        fprintf(stderr, "harness: restart of node %d on port %d failed (%s); log in %s/redis.log\n", i,
                nd->port, strerror(-rc), nd->dir);
    return rc;
}

int rh_pause(struct rh_cluster *c, int i)
{
    if (bad(c, i) || c->nodes[i].pid <= 0)
        return -EINVAL;
    admin_close(&c->nodes[i]);
    return hp_signal(c->nodes[i].pid, SIGSTOP, 0);
}

int rh_resume(struct rh_cluster *c, int i)
{
    if (bad(c, i) || c->nodes[i].pid <= 0)
        return -EINVAL;
    return hp_signal(c->nodes[i].pid, SIGCONT, 0);
}

static long long node_time_s(struct rh_cluster *c, int i)
{
    redisReply *r = rh_command(c, i, "TIME");
    long long s = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        s = strtoll(r->element[0]->str, NULL, 10);
    if (r)
        freeReplyObject(r);
    return s;
}

int rh_clock_offset(struct rh_cluster *c, int i, long offset_s)
{
    if (bad(c, i) || !c->o.faketime)
        return -EINVAL;
    char path[300], tmp[310];
    snprintf(path, sizeof(path), "%s/faketime", c->nodes[i].dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return -errno;
    fprintf(f, "%+ld\n", offset_s);
    fclose(f);
    if (rename(tmp, path) < 0)
        return -errno;
    /* Wait until the node's TIME agrees (within 2 s) with the new offset. */
    long long deadline = hp_now_ms() + 10000;
    while (hp_now_ms() < deadline) {
        long long t = node_time_s(c, i);
        long long want = (long long)time(NULL) + offset_s;
        if (t >= 0 && llabs(t - want) <= 2)
            return 0;
        hp_sleep_ms(100);
    }
    fprintf(stderr, "harness: node %d's clock did not move by %+ld s\n", i, offset_s);
    return -ETIMEDOUT;
}
