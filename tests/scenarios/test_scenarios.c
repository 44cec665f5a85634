/* Kleppmann's scenarios, each both ways: without fencing the late write of
 * the client whose lease ran out destroys the other's update; with fencing
 * storage-guard refuses it. The same for an elected leader deposed while it
 * was stopped. Real redis-server nodes, a real storage-guard, clients as
 * real processes (SIGSTOP, TCP proxies, libfaketime). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scenario.h"

static struct sc_config cfg;

static void replay(const char *scenario, enum sc_mode mode, struct sc_result *r)
{
    char err[512];
    int rc = sc_run(scenario, mode, &cfg, r, err, sizeof(err));
    if (rc != 0)
        fail_msg("%s (%s) did not run: %s", scenario, sc_mode_name(mode), err);
    sc_print_timeline(stderr, r); /* in the test log, for whoever reads a failure */
}

static void assert_lost_update(const struct sc_result *r, int double_grant)
{
    assert_int_equal(r->status_b, 200);
    assert_int_equal(r->status_a, 200); /* the late write went through */
    assert_string_equal(r->final_value, "written by A");
    assert_true(r->lost_update);
    assert_true(r->token_a == 0 && r->token_b == 0);
    assert_int_equal(r->double_grant, double_grant);
    assert_true(sc_as_predicted(r));
    assert_non_null(strstr(r->verdict, "lost update"));
}

static void assert_refused(const struct sc_result *r, int double_grant)
{
    assert_int_equal(r->status_b, 200);
    assert_int_equal(r->status_a, 409);
    assert_string_equal(r->final_value, "written by B");
    assert_false(r->lost_update);
    assert_true(r->token_a > 0 && r->token_a < r->token_b);
    assert_int_equal(r->double_grant, double_grant);
    assert_true(sc_as_predicted(r));
    assert_non_null(strstr(r->verdict, "stale write refused"));
}

static void test_scenarios_gc_pause_unfenced_loses_update(void **state)
{
    (void)state;
    struct sc_result r;
    replay("gc-pause", SC_UNFENCED, &r);
    /* The pause outlived the lease: B was granted after A's lease ended. */
    assert_true(r.b_acquired >= r.a_valid_until);
    assert_lost_update(&r, 0);
}

static void test_scenarios_gc_pause_fenced_refuses_stale_write(void **state)
{
    (void)state;
    struct sc_result r;
    replay("gc-pause", SC_FENCED, &r);
    assert_refused(&r, 0);
}

static void test_scenarios_network_delay_unfenced_loses_update(void **state)
{
    (void)state;
    struct sc_result r;
    replay("network-delay", SC_UNFENCED, &r);
    assert_lost_update(&r, 0);
}

static void test_scenarios_network_delay_fenced_refuses_stale_write(void **state)
{
    (void)state;
    struct sc_result r;
    replay("network-delay", SC_FENCED, &r);
    assert_refused(&r, 0);
}

static void test_scenarios_clock_jump_grants_twice_unfenced(void **state)
{
    (void)state;
    struct sc_result r;
    replay("clock-jump", SC_UNFENCED, &r);
    assert_lost_update(&r, 1);
}

static void test_scenarios_clock_jump_fenced_refuses_stale_write(void **state)
{
    (void)state;
    struct sc_result r;
    replay("clock-jump", SC_FENCED, &r);
    assert_refused(&r, 1);
}

static void test_scenarios_node_restart_grants_twice_unfenced(void **state)
{
    (void)state;
    struct sc_result r;
    replay("node-restart", SC_UNFENCED, &r);
    assert_lost_update(&r, 1);
}

static void test_scenarios_node_restart_fenced_tokens_still_grow(void **state)
{
    (void)state;
    struct sc_result r;
    /* The restarted node forgot its fence value too: B's token is still the
     * larger, because a fresh proposal (the time) beats every older one. */
    replay("node-restart", SC_FENCED, &r);
    assert_refused(&r, 1);
}

static void test_scenarios_node_restart_delayed_prevents_double_grant(void **state)
{
    (void)state;
    struct sc_result r;
    replay("node-restart", SC_DELAYED, &r);
    assert_false(r.double_grant);
    assert_true(r.b_acquired >= r.a_valid_until);
    assert_int_equal(r.status_b, 200);
    assert_int_equal(r.status_a, 0); /* A saw its lease had expired */
    assert_string_equal(r.final_value, "written by B");
    assert_true(sc_as_predicted(&r));
}

/* Kleppmann's pause during acquisition: the grants wait in A's socket
 * buffers while A is stopped, past the TTL. A client that does not measure
 * how long its acquisition took believes it holds the lock alongside B. */
static void test_scenarios_acquire_pause_unfenced_loses_update(void **state)
{
    (void)state;
    struct sc_result r;
    replay("acquire-pause", SC_UNFENCED, &r);
    assert_true(r.a_valid_until > r.b_acquired); /* A's "lease" began after B's grant */
    assert_false(r.a_refused);
    assert_lost_update(&r, 1);
}

static void test_scenarios_acquire_pause_fenced_refuses_stale_write(void **state)
{
    (void)state;
    struct sc_result r;
    /* The same careless client, with tokens: A's token was accepted before
     * its keys expired, B's after, so storage-guard refuses A's write. */
    replay("acquire-pause", SC_FENCED, &r);
    assert_false(r.a_refused);
    assert_refused(&r, 1);
}

static void test_scenarios_acquire_pause_validity_check_refuses_late_grant(void **state)
{
    (void)state;
    struct sc_result r;
    replay("acquire-pause", SC_CHECKED, &r);
    assert_true(r.a_refused);
    assert_false(r.double_grant);
    assert_int_equal(r.status_a, 0); /* A never wrote */
    assert_int_equal(r.status_b, 200);
    assert_string_equal(r.final_value, "written by B");
    assert_true(sc_as_predicted(&r));
    assert_non_null(strstr(r.verdict, "late grant refused"));
    /* Refused for the right reason: the grant came back with no validity
     * left, not because a node failed to answer. */
    int why = 0;
    for (int i = 0; i < r.n_ev; i++)
        why |= strcmp(r.ev[i].lane, "A") == 0 && strstr(r.ev[i].text, "no validity left") != NULL;
    assert_true(why);
}

/* The event on lane whose text has every one of the words (NULL-
 * terminated), or NULL. */
static const struct sc_event *event_with(const struct sc_result *r, const char *lane, ...)
{
    for (int i = 0; i < r->n_ev; i++) {
        if (strcmp(r->ev[i].lane, lane) != 0)
            continue;
        int all = 1;
        va_list ap;
        va_start(ap, lane);
        for (const char *w = va_arg(ap, const char *); w != NULL && all; w = va_arg(ap, const char *))
            all = strstr(r->ev[i].text, w) != NULL;
        va_end(ap);
        if (all)
            return &r->ev[i];
    }
    return NULL;
}

/* A leader elected, deposed while stopped past its TTL, and writing when
 * it goes on: the leader that followed it (elected once its leadership
 * ran out, waiting in line) had written. */
static void assert_zombie_story(const struct sc_result *r)
{
    assert_true(r->b_acquired >= r->a_valid_until); /* B elected once A's leadership ran out */
    assert_false(r->double_grant);
    assert_non_null(event_with(r, "A", "is elected leader", "epoch", NULL));
    assert_non_null(event_with(r, "B", "is elected leader", "epoch", NULL));
    assert_non_null(event_with(r, "storage", "accepts \"first write by A\"", NULL));
    assert_non_null(event_with(r, "A", "stopped (SIGSTOP)", NULL));
    assert_int_equal(r->status_b, 200);
}

static void test_scenarios_zombie_leader_unfenced_loses_update(void **state)
{
    (void)state;
    struct sc_result r;
    replay("zombie-leader", SC_UNFENCED, &r);
    assert_zombie_story(&r);
    /* The leaders had epochs, but their writes carried none. */
    assert_non_null(event_with(&r, "A", "its writes carry none", NULL));
    assert_true(r.token_a == 0 && r.token_b == 0);
    assert_int_equal(r.status_a, 200);
    assert_string_equal(r.final_value, "written by A");
    assert_true(r.lost_update);
    assert_true(sc_as_predicted(&r));
    assert_non_null(strstr(r.verdict, "lost update"));
}

static void test_scenarios_zombie_leader_fenced_refuses_deposed_write(void **state)
{
    (void)state;
    struct sc_result r;
    replay("zombie-leader", SC_FENCED, &r);
    assert_zombie_story(&r);
    /* The epoch is the token: A's first write went through with it, its
     * late write was refused with it, after B's larger one. */
    char with[64];
    snprintf(with, sizeof(with), "with token %llu", (unsigned long long)r.token_a);
    assert_non_null(event_with(&r, "storage", "accepts \"first write by A\"", with, NULL));
    assert_refused(&r, 0);
    assert_non_null(strstr(r.verdict, "deposed leader A's epoch"));
}

static void test_scenarios_outputs_draw_every_run(void **state)
{
    (void)state;
    struct sc_result r[2];
    replay("gc-pause", SC_UNFENCED, &r[0]);
    replay("gc-pause", SC_FENCED, &r[1]);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(sc_write_svg(f, r, 2), 0);
    fclose(f);
    assert_non_null(strstr(buf, "<svg"));
    assert_non_null(strstr(buf, "lost update"));
    assert_non_null(strstr(buf, "stale write refused"));
    assert_non_null(strstr(buf, "client A"));
    assert_non_null(strstr(buf, "marker-end=\"url(#refused)\""));
    free(buf);
    f = open_memstream(&buf, &len);
    assert_int_equal(sc_write_json(f, r, 2), 0);
    fclose(f);
    assert_non_null(strstr(buf, "\"scenario\": \"gc-pause\""));
    assert_non_null(strstr(buf, "\"mode\": \"fenced\""));
    assert_non_null(strstr(buf, "\"events\""));
    free(buf);
}

static void test_scenarios_unknown_scenario_is_refused(void **state)
{
    (void)state;
    struct sc_result r;
    char err[128] = "";
    assert_int_equal(sc_run("no-such", SC_FENCED, &cfg, &r, err, sizeof(err)), -EINVAL);
    assert_true(err[0] != '\0');
    assert_int_equal(sc_run("gc-pause", SC_DELAYED, &cfg, &r, err, sizeof(err)), -EINVAL);
    enum sc_mode m[3];
    assert_int_equal(sc_modes("node-restart", m), 3);
    assert_int_equal(sc_modes("gc-pause", m), 2);
    assert_int_equal(sc_modes("acquire-pause", m), 3);
    assert_int_equal(m[2], SC_CHECKED);
    assert_int_equal(sc_run("gc-pause", SC_CHECKED, &cfg, &r, err, sizeof(err)), -EINVAL);
    assert_int_equal(sc_modes("zombie-leader", m), 2);
    assert_int_equal(sc_run("zombie-leader", SC_DELAYED, &cfg, &r, err, sizeof(err)), -EINVAL);
    assert_int_equal(sc_modes(NULL, m), 0);
}

int main(void)
{
    cfg.client_bin = getenv("FENCELOCK_SCENARIO_CLIENT");
    cfg.storage_guard_bin = getenv("FENCELOCK_STORAGE_GUARD");
    if (cfg.client_bin == NULL || cfg.storage_guard_bin == NULL) {
        fprintf(stderr,
                "FENCELOCK_SCENARIO_CLIENT and FENCELOCK_STORAGE_GUARD must be set (meson test does)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scenarios_gc_pause_unfenced_loses_update),
        cmocka_unit_test(test_scenarios_gc_pause_fenced_refuses_stale_write),
        cmocka_unit_test(test_scenarios_network_delay_unfenced_loses_update),
        cmocka_unit_test(test_scenarios_network_delay_fenced_refuses_stale_write),
        cmocka_unit_test(test_scenarios_clock_jump_grants_twice_unfenced),
        cmocka_unit_test(test_scenarios_clock_jump_fenced_refuses_stale_write),
        cmocka_unit_test(test_scenarios_node_restart_grants_twice_unfenced),
        cmocka_unit_test(test_scenarios_node_restart_fenced_tokens_still_grow),
        cmocka_unit_test(test_scenarios_node_restart_delayed_prevents_double_grant),
        cmocka_unit_test(test_scenarios_acquire_pause_unfenced_loses_update),
        cmocka_unit_test(test_scenarios_acquire_pause_fenced_refuses_stale_write),
        cmocka_unit_test(test_scenarios_acquire_pause_validity_check_refuses_late_grant),
        cmocka_unit_test(test_scenarios_zombie_leader_unfenced_loses_update),
        cmocka_unit_test(test_scenarios_zombie_leader_fenced_refuses_deposed_write),
        cmocka_unit_test(test_scenarios_outputs_draw_every_run),
        cmocka_unit_test(test_scenarios_unknown_scenario_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
