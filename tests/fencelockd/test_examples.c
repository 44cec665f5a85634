/*
 * The example clients of examples/fencelockd, Python (standard library)
 * and Node.js (built-in fetch), run as a newcomer would run them: at once
 * on one resource, against real nodes, fencelockd and storage-guard. Each
 * must take the lock in turn, keep it alive past its TTL, write with its
 * token and release; storage-guard must hold the second writer's value.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "fld_daemon.h"

static void slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
}

static void examples_python_and_node_take_turns(void **state)
{
    (void)state;
    struct rh_cluster *rc = NULL;
    assert_int_equal(rh_cluster_start(3, NULL, &rc), 0);
    char nodes[512];
    fld_nodes(rc, nodes, sizeof(nodes));
    struct fld d;
    fld_start(&d, nodes, NULL);
    struct tk_sg_options so;
    tk_sg_options_init(&so);
    struct tk_sg *sg = NULL;
    assert_int_equal(tk_sg_start(&so, &sg), 0);

    char env_locks[128], env_store[128];
    snprintf(env_locks, sizeof(env_locks), "FENCELOCKD_URL=http://127.0.0.1:%u", d.port);
    snprintf(env_store, sizeof(env_store), "STORAGE_GUARD_URL=http://127.0.0.1:%u", tk_sg_port(sg));
    char *env[] = {env_locks, env_store, "LOCK_TTL_MS=900", "WORK_SECONDS=1.2", NULL};
    char py_log[320], node_log[320];
    snprintf(py_log, sizeof(py_log), "%s/python.log", d.dir);
    snprintf(node_log, sizeof(node_log), "%s/node.log", d.dir);
    char *py[] = {"python3", EXAMPLES_DIR "/client.py", "invoice:42", "from python", NULL};
    char *node[] = {"node", EXAMPLES_DIR "/client.mjs", "invoice:42", "from node", NULL};
    long long t0 = hp_now_ms();
    pid_t p1 = hp_spawn(py, env, py_log);
    pid_t p2 = hp_spawn(node, env, node_log);
    assert_true(p1 > 0 && p2 > 0);
    int s1 = 0, s2 = 0;
    assert_int_equal(hp_wait(p1, 30000, &s1), 0);
    assert_int_equal(hp_wait(p2, 30000, &s2), 0);
    long long took = hp_now_ms() - t0;
    char out1[2048], out2[2048];
    slurp(py_log, out1, sizeof(out1));
    slurp(node_log, out2, sizeof(out2));
    printf("# python: %s# node: %s", out1, out2);
    assert_true(WIFEXITED(s1) && WEXITSTATUS(s1) == 0);
    assert_true(WIFEXITED(s2) && WEXITSTATUS(s2) == 0);
    unsigned long long t_py = 0, t_node = 0;
    const char *ok1 = strstr(out1, "ok: "), *ok2 = strstr(out2, "ok: ");
    assert_non_null(ok1);
    assert_non_null(ok2);
    assert_int_equal(sscanf(ok1, "ok: invoice:42 written with token %llu", &t_py), 1);
    assert_int_equal(sscanf(ok2, "ok: invoice:42 written with token %llu", &t_node), 1);
    assert_true(t_py != t_node);
    /* One after the other, each working past its TTL of 0.9 s. */
    assert_true(took >= 2400);

    /* storage-guard holds the value of the later token. */
    struct hc_response r = {0};
    assert_int_equal(hc_get(tk_sg_port(sg), "/v1/records/invoice%3A42", &r), 0);
    assert_int_equal(r.status, 200);
    const char *v = json_string_value(json_object_get(r.json, "value"));
    assert_non_null(v);
    assert_string_equal(v, t_py > t_node ? "from python" : "from node");
    hc_response_clear(&r);
    /* Both released: the lock is free. */
    char id[64];
    assert_int_equal(fld_acquire(&d, "invoice:42", NULL, id, sizeof(id), NULL), 200);

    tk_sg_free(sg);
    fld_destroy(&d);
    rh_cluster_free(rc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(examples_python_and_node_take_turns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
