/* The example replay clients (examples/replay-clients: shell and Python,
 * both taking the lock with the fencelock command) play the scenarios'
 * clients as well as fencelock-scenario-client does: each scenario run
 * with one of them ends with the verdict of the same run with the C
 * client. Real redis-server nodes, a real storage-guard, the clients as
 * real processes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include <fencelock-testkit/testkit.h>

#include "scenario.h"

static const char *c_client, *sh_client, *py_client, *storage_guard;

static void replay(const char *client, const char *scenario, enum sc_mode mode, struct sc_result *r)
{
    struct sc_config cfg = {.client_bin = client, .storage_guard_bin = storage_guard};
    char err[512];
    if (sc_run(scenario, mode, &cfg, r, err, sizeof(err)) != 0)
        fail_msg("%s (%s) with %s did not run: %s", scenario, sc_mode_name(mode), client, err);
    sc_print_timeline(stderr, r);
}

/* The verdict without its details in parentheses (tokens, milliseconds),
 * which differ from run to run. */
static void verdict_kind(const struct sc_result *r, char *out, size_t cap)
{
    snprintf(out, cap, "%s", r->verdict);
    char *details = strstr(out, " (");
    if (details)
        *details = '\0';
}

static void assert_same_as_c_client(const char *client, const char *scenario)
{
    enum sc_mode modes[3];
    int n = sc_modes(scenario, modes);
    assert_true(n >= 2);
    for (int i = 0; i < n; i++) {
        struct sc_result ref, got;
        char want[200], have[200];
        replay(c_client, scenario, modes[i], &ref);
        replay(client, scenario, modes[i], &got);
        assert_true(sc_as_predicted(&ref));
        verdict_kind(&ref, want, sizeof(want));
        verdict_kind(&got, have, sizeof(have));
        assert_string_equal(have, want);
        assert_int_equal(got.status_a, ref.status_a);
        assert_int_equal(got.status_b, ref.status_b);
        assert_string_equal(got.final_value, ref.final_value);
        assert_int_equal(got.lost_update, ref.lost_update);
        assert_int_equal(got.double_grant, ref.double_grant);
        assert_true(sc_as_predicted(&got));
        /* With fencing the example clients carried real tokens. */
        assert_int_equal(got.token_a != 0, ref.token_a != 0);
        if (got.token_a)
            assert_true(got.token_a < got.token_b);
    }
}

static void test_replay_clients_shell_gc_pause(void **state)
{
    (void)state;
    assert_same_as_c_client(sh_client, "gc-pause");
}

static void test_replay_clients_python_gc_pause(void **state)
{
    (void)state;
    assert_same_as_c_client(py_client, "gc-pause");
}

static void test_replay_clients_shell_network_delay(void **state)
{
    (void)state;
    assert_same_as_c_client(sh_client, "network-delay");
}

static void test_replay_clients_python_network_delay(void **state)
{
    (void)state;
    assert_same_as_c_client(py_client, "network-delay");
}

static void test_replay_clients_python_node_restart(void **state)
{
    (void)state;
    /* Five nodes, two of them cut off from A, and the delayed restart in
     * which B retries for seconds. */
    assert_same_as_c_client(py_client, "node-restart");
}

/* Run sh -c cmd, its stdout into out; returns its exit status. */
static int run_capture(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/*
 * A client that waited for its lock counts its lease from the grant, not
 * from when it asked: another holder keeps the lock for 1.5 s, the client
 * asks with a 1 s TTL and waits; its lease (about 1 s from the grant) is
 * then still valid, so it must check a positive remainder and write. A
 * client that counts from its own start finds the lease gone and does not
 * write.
 */
static void lease_counts_from_the_grant(const char *client)
{
    struct rh_cluster *rc = NULL;
    struct tk_sg *sg = NULL;
    struct tk_sg_options so;
    tk_sg_options_init(&so);
    so.exe = storage_guard;
    assert_int_equal(rh_cluster_start(3, NULL, &rc), 0);
    assert_int_equal(tk_sg_start(&so, &sg), 0);
    char nodes[256], cmd[2048], out[8192];
    snprintf(nodes, sizeof(nodes), "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", rh_port(rc, 0), rh_port(rc, 1),
             rh_port(rc, 2));
    snprintf(cmd, sizeof(cmd), "\"$FENCELOCK\" --nodes %s --ttl 1500ms acquire ledger", nodes);
    assert_int_equal(run_capture(cmd, out, sizeof(out)), 0);
    snprintf(cmd, sizeof(cmd),
             "'%s' --name B --nodes %s --storage 127.0.0.1:%u --value by-B --ttl 1000 --wait 5000 </dev/null",
             client, nodes, (unsigned)tk_sg_port(sg));
    int code = run_capture(cmd, out, sizeof(out));
    tk_sg_free(sg);
    rh_cluster_free(rc);
    /* Python's json.dumps puts a space after ':' and ',', the shell's none. */
    int wrote = strstr(out, "\"ev\": \"written\", \"status\": 200") != NULL ||
                strstr(out, "\"ev\":\"written\",\"status\":200") != NULL;
    if (code != 0 || !wrote)
        fail_msg("%s exited %d, did not write after its wait:\n%s", client, code, out);
}

static void test_replay_clients_python_lease_counts_from_the_grant(void **state)
{
    (void)state;
    lease_counts_from_the_grant(py_client);
}

static void test_replay_clients_shell_lease_counts_from_the_grant(void **state)
{
    (void)state;
    lease_counts_from_the_grant(sh_client);
}

int main(void)
{
    c_client = getenv("FENCELOCK_SCENARIO_CLIENT");
    sh_client = getenv("FENCELOCK_SHELL_CLIENT");
    py_client = getenv("FENCELOCK_PYTHON_CLIENT");
    storage_guard = getenv("FENCELOCK_STORAGE_GUARD");
    if (!c_client || !sh_client || !py_client || !storage_guard || !getenv("FENCELOCK")) {
        fprintf(stderr, "FENCELOCK_SCENARIO_CLIENT, FENCELOCK_SHELL_CLIENT, FENCELOCK_PYTHON_CLIENT, "
                        "FENCELOCK_STORAGE_GUARD and FENCELOCK must be set (meson test does)\n");
        return 1;
    }
    /* One test alone, to repeat it: FENCELOCK_TEST_ONLY=<name pattern>. */
    if (getenv("FENCELOCK_TEST_ONLY") != NULL)
        cmocka_set_test_filter(getenv("FENCELOCK_TEST_ONLY"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_clients_shell_gc_pause),
        cmocka_unit_test(test_replay_clients_python_gc_pause),
        cmocka_unit_test(test_replay_clients_shell_network_delay),
        cmocka_unit_test(test_replay_clients_python_network_delay),
        cmocka_unit_test(test_replay_clients_python_node_restart),
        cmocka_unit_test(test_replay_clients_python_lease_counts_from_the_grant),
        cmocka_unit_test(test_replay_clients_shell_lease_counts_from_the_grant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
