/* lockcore_steps_run against real redis-server processes: steps run in
 * order; a failing step undoes the earlier ones, last first; a lock whose
 * key is overwritten, whose validity runs out, or whose keep-alive loses it
 * (nodes paused past the TTL) stops the steps and undoes them; undo gets
 * the token and the reason. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "redis_harness.h"
#include <lockcore/lockcore.h>

#define NSTEPS 4

struct fixture {
    struct rh_cluster *rc;
    const char *urls[3];
};

static int setup3(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(rh_cluster_start(3, NULL, &f->rc), 0);
    for (int i = 0; i < 3; i++)
        f->urls[i] = rh_url(f->rc, i);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 3; i++)
        rh_resume(f->rc, i); /* a failed test may leave them paused */
    rh_cluster_free(f->rc);
    free(f);
    return 0;
}

static lockcore_client *client(struct fixture *f, uint64_t ttl_ms)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    o.nodes = f->urls;
    o.n_nodes = 3;
    o.ttl_ms = ttl_ms;
    o.retry_count = 0;
    lockcore_client *c = NULL;
    char err[256];
    if (lockcore_client_new(&o, &c, err, sizeof(err)) != 0)
        fail_msg("client: %s", err);
    return c;
}

/* What the steps did, in order: "r0" for a run of step 0, "u0" for its undo. */
struct journal {
    char log[128];
    uint64_t undo_token[NSTEPS];
    int undo_reason[NSTEPS];
    int undo_lost[NSTEPS];
    size_t undo_stopped_at[NSTEPS];
    int fail_at; /* this step's run fails with -42; -1 for none */
    int act_at;  /* this step's run calls act() */
    void (*act)(struct journal *j);
    struct fixture *f;
    const char *resource;
};

struct step_arg {
    struct journal *j;
    size_t index;
};

static void note(struct journal *j, char what, size_t i)
{
    size_t n = strlen(j->log);
    snprintf(j->log + n, sizeof(j->log) - n, "%s%c%zu", n ? " " : "", what, i);
}

static int run_step(const struct lockcore_step_ctx *ctx, void *arg)
{
    struct step_arg *a = arg;
    assert_int_equal(ctx->index, a->index);
    assert_int_equal(ctx->reason, 0);
    assert_true(ctx->lock->token > 0);
    if ((int)a->index == a->j->fail_at) {
        note(a->j, 'f', a->index);
        return -42;
    }
    note(a->j, 'r', a->index);
    if ((int)a->index == a->j->act_at)
        a->j->act(a->j);
    return 0;
}

static int undo_step(const struct lockcore_step_ctx *ctx, void *arg)
{
    struct step_arg *a = arg;
    assert_int_equal(ctx->index, a->index);
    note(a->j, 'u', a->index);
    a->j->undo_token[a->index] = ctx->lock->token;
    a->j->undo_reason[a->index] = ctx->reason;
    a->j->undo_lost[a->index] = ctx->lost;
    a->j->undo_stopped_at[a->index] = ctx->stopped_at;
    return 0;
}

static void make_steps(struct journal *j, struct lockcore_step *steps, struct step_arg *args)
{
    static const char *const names[NSTEPS] = {"reserve seat", "charge card", "send mail", "print ticket"};
    for (size_t i = 0; i < NSTEPS; i++) {
        args[i] = (struct step_arg){.j = j, .index = i};
        steps[i] =
            (struct lockcore_step){.name = names[i], .run = run_step, .undo = undo_step, .arg = &args[i]};
    }
}

static void journal_init(struct journal *j, struct fixture *f, const char *resource)
{
    memset(j, 0, sizeof(*j));
    j->fail_at = -1;
    j->act_at = -1;
    j->f = f;
    j->resource = resource;
}

static void test_steps_all_done(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, 2000);
    struct lockcore_lock lock;
    assert_int_equal(lockcore_acquire(c, "steps-ok", &lock), 0);
    struct journal j;
    journal_init(&j, f, "steps-ok");
    struct lockcore_step steps[NSTEPS];
    struct step_arg args[NSTEPS];
    make_steps(&j, steps, args);
    struct lockcore_steps_report r;
    assert_int_equal(lockcore_steps_run(c, &lock, steps, NSTEPS, NULL, &r), 0);
    assert_string_equal(j.log, "r0 r1 r2 r3");
    assert_int_equal(r.done, NSTEPS);
    assert_int_equal(r.stopped_at, NSTEPS);
    assert_int_equal(r.lost, 0);
    assert_int_equal(r.undone, 0);
    /* Still held, by us, on every node. */
    for (int t = 0; t < 100 && rh_holders(f->rc, "steps-ok", lock.id) < 3; t++)
        hp_sleep_ms(20); /* granted at a majority: the third may still be running it */
    assert_int_equal(rh_holders(f->rc, "steps-ok", lock.id), 3);
    assert_int_equal(lockcore_release(c, &lock), 0);
    lockcore_client_free(c);
}

static void test_steps_failing_step_undoes_earlier_in_reverse(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, 2000);
    struct lockcore_lock lock;
    assert_int_equal(lockcore_acquire(c, "steps-fail", &lock), 0);
    struct journal j;
    journal_init(&j, f, "steps-fail");
    j.fail_at = 2;
    struct lockcore_step steps[NSTEPS];
    struct step_arg args[NSTEPS];
    make_steps(&j, steps, args);
    struct lockcore_steps_report r;
    assert_int_equal(lockcore_steps_run(c, &lock, steps, NSTEPS, NULL, &r), -42);
    /* Step 2 failed and is not undone; 1 then 0 are; 3 never ran. */
    assert_string_equal(j.log, "r0 r1 f2 u1 u0");
    assert_int_equal(r.done, 2);
    assert_int_equal(r.stopped_at, 2);
    assert_int_equal(r.lost, 0);
    assert_int_equal(r.reason, -42);
    assert_int_equal(r.undone, 2);
    assert_int_equal(r.undo_failed, 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(j.undo_token[i], lock.token);
        assert_int_equal(j.undo_reason[i], -42);
        assert_int_equal(j.undo_lost[i], 0);
        assert_int_equal(j.undo_stopped_at[i], 2);
    }
    assert_non_null(strstr(lockcore_errmsg(c), "step 2 ('send mail') failed with -42"));
    /* The lock is still ours: the caller releases it. */
    for (int t = 0; t < 100 && rh_holders(f->rc, "steps-fail", lock.id) < 3; t++)
        hp_sleep_ms(20); /* granted at a majority: the third may still be running it */
    assert_int_equal(rh_holders(f->rc, "steps-fail", lock.id), 3);
    assert_int_equal(lockcore_release(c, &lock), 0);
    lockcore_client_free(c);
}

/* Another client's value in the lock key on every node: the lock is gone. */
static void overwrite_key(struct journal *j)
{
    for (int i = 0; i < 3; i++)
        assert_int_equal(rh_set(j->f->rc, i, j->resource, "someone-else"), 0);
}

static void test_steps_key_overwritten_stops_and_undoes(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, 2000);
    struct lockcore_lock lock;
    assert_int_equal(lockcore_acquire(c, "steps-taken", &lock), 0);
    struct journal j;
    journal_init(&j, f, "steps-taken");
    j.act_at = 1;
    j.act = overwrite_key;
    struct lockcore_step steps[NSTEPS];
    struct step_arg args[NSTEPS];
    make_steps(&j, steps, args);
    struct lockcore_steps_report r;
    int rc = lockcore_steps_run(c, &lock, steps, NSTEPS, NULL, &r);
    assert_int_equal(rc, LOCKCORE_ELOST);
    /* Found lost right after step 1 (the confirming extension): steps 2 and
     * 3 never run, 1 and 0 are undone with the token and the reason. */
    assert_string_equal(j.log, "r0 r1 u1 u0");
    assert_int_equal(r.done, 2);
    assert_int_equal(r.stopped_at, 2);
    assert_int_equal(r.lost, 1);
    assert_int_equal(r.undone, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(j.undo_token[i], lock.token);
        assert_int_equal(j.undo_reason[i], LOCKCORE_ELOST);
        assert_int_equal(j.undo_lost[i], 1);
    }
    assert_non_null(strstr(lockcore_errmsg(c), "lost after step 1"));
    /* Nothing of ours was touched on the nodes. */
    assert_int_equal(rh_holders(f->rc, "steps-taken", "someone-else"), 3);
    lockcore_client_free(c);
}

/* Without confirming, a step that runs past the validity is undone too. */
static void sleep_past_ttl(struct journal *j)
{
    (void)j;
    usleep(700 * 1000);
}

static void test_steps_validity_ran_out_undoes_the_late_step(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, 500);
    struct lockcore_lock lock;
    assert_int_equal(lockcore_acquire(c, "steps-late", &lock), 0);
    struct journal j;
    journal_init(&j, f, "steps-late");
    j.act_at = 1;
    j.act = sleep_past_ttl;
    struct lockcore_step steps[NSTEPS];
    struct step_arg args[NSTEPS];
    make_steps(&j, steps, args);
    struct lockcore_steps_options o;
    lockcore_steps_options_init(&o);
    o.confirm = 0;
    struct lockcore_steps_report r;
    assert_int_equal(lockcore_steps_run(c, &lock, steps, NSTEPS, &o, &r), LOCKCORE_ELOST);
    assert_string_equal(j.log, "r0 r1 u1 u0");
    assert_int_equal(r.lost, 1);
    assert_int_equal(r.stopped_at, 2);
    assert_int_equal(j.undo_token[1], lock.token);
    assert_int_equal(j.undo_reason[1], LOCKCORE_ELOST);
    lockcore_client_free(c);
}

/* min_validity_ms: a step does not start with less validity than it needs. */
static void test_steps_min_validity_keeps_a_step_from_starting(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, 1000);
    struct lockcore_lock lock;
    assert_int_equal(lockcore_acquire(c, "steps-short", &lock), 0);
    struct journal j;
    journal_init(&j, f, "steps-short");
    struct lockcore_step steps[NSTEPS];
    struct step_arg args[NSTEPS];
    make_steps(&j, steps, args);
    struct lockcore_steps_options o;
    lockcore_steps_options_init(&o);
    o.confirm = 0;
    o.min_validity_ms = 5000; /* more than the TTL: not even step 0 starts */
    struct lockcore_steps_report r;
    assert_int_equal(lockcore_steps_run(c, &lock, steps, NSTEPS, &o, &r), LOCKCORE_ELOST);
    assert_string_equal(j.log, "");
    assert_int_equal(r.done, 0);
    assert_int_equal(r.lost, 1);
    assert_non_null(strstr(lockcore_errmsg(c), "before step 0"));
    assert_int_equal(lockcore_release(c, &lock), 0);
    lockcore_client_free(c);
}

/* Every node paused past the TTL during a step: the keep-alive cannot
 * extend, reports the loss through on_lost, and the steps stop. */
static void pause_nodes_past_ttl(struct journal *j)
{
    for (int i = 0; i < 3; i++)
        assert_int_equal(rh_pause(j->f->rc, i), 0);
    usleep(900 * 1000);
    for (int i = 0; i < 3; i++)
        assert_int_equal(rh_resume(j->f->rc, i), 0);
}

struct lost {
    int calls;
    int rc;
    uint64_t token;
};

static void on_lost(lockcore_client *c, int rc, const struct lockcore_lock *l, void *arg)
{
    (void)c;
    struct lost *s = arg;
    s->calls++;
    s->rc = rc;
    s->token = l->token;
}

static void test_steps_keepalive_on_lost_stops_and_undoes(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, 600);
    struct lockcore_lock lock;
    assert_int_equal(lockcore_acquire(c, "steps-paused", &lock), 0);
    struct lost lost = {0};
    lockcore_keepalive *k = NULL;
    assert_int_equal(lockcore_keepalive_start(c, &lock, 0, 0, on_lost, &lost, &k), 0);
    struct journal j;
    journal_init(&j, f, "steps-paused");
    j.act_at = 2;
    j.act = pause_nodes_past_ttl;
    struct lockcore_step steps[NSTEPS];
    struct step_arg args[NSTEPS];
    make_steps(&j, steps, args);
    struct lockcore_steps_options o;
    lockcore_steps_options_init(&o);
    o.confirm = 0;
    o.keepalive = k;
    struct lockcore_steps_report r;
    int rc = lockcore_steps_run(c, &lock, steps, NSTEPS, &o, &r);
    assert_int_equal(lost.calls, 1);
    assert_int_equal(lost.token, lock.token);
    assert_int_equal(rc, lost.rc);
    assert_true(rc == LOCKCORE_ELOST || rc == LOCKCORE_ENOQUORUM);
    assert_string_equal(j.log, "r0 r1 r2 u2 u1 u0");
    assert_int_equal(r.lost, 1);
    assert_int_equal(r.done, 3);
    assert_int_equal(r.undone, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(j.undo_token[i], lock.token);
        assert_int_equal(j.undo_reason[i], rc);
        assert_int_equal(j.undo_stopped_at[i], 3);
    }
    assert_non_null(strstr(lockcore_errmsg(c), "keep-alive"));
    lockcore_keepalive_stop(k);
    lockcore_client_free(c);
}

/* A failing undo is counted and does not stop the other undos. */
static int undo_fails(const struct lockcore_step_ctx *ctx, void *arg)
{
    undo_step(ctx, arg);
    return -5;
}

static void test_steps_failing_undo_does_not_stop_the_others(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, 2000);
    struct lockcore_lock lock;
    assert_int_equal(lockcore_acquire(c, "steps-undo", &lock), 0);
    struct journal j;
    journal_init(&j, f, "steps-undo");
    j.fail_at = 3;
    struct lockcore_step steps[NSTEPS];
    struct step_arg args[NSTEPS];
    make_steps(&j, steps, args);
    steps[1].undo = undo_fails;
    steps[0].undo = NULL; /* nothing to undo */
    struct lockcore_steps_report r;
    assert_int_equal(lockcore_steps_run(c, &lock, steps, NSTEPS, NULL, &r), -42);
    assert_string_equal(j.log, "r0 r1 r2 f3 u2 u1");
    assert_int_equal(r.undone, 1);
    assert_int_equal(r.undo_failed, 1);
    assert_int_equal(lockcore_release(c, &lock), 0);
    lockcore_client_free(c);
}

/* Bad arguments run nothing; a callback may not call it. */
struct from_cb {
    int rc;
    int called;
};

static int never(const struct lockcore_step_ctx *ctx, void *arg)
{
    (void)ctx;
    ((struct from_cb *)arg)->called = 1;
    return 0;
}

static void acquired(lockcore_client *c, int rc, const struct lockcore_lock *lock, void *arg)
{
    struct from_cb *s = arg;
    assert_int_equal(rc, 0);
    struct lockcore_lock copy = *lock;
    struct lockcore_step step = {.name = "x", .run = never, .arg = s};
    s->rc = lockcore_steps_run(c, &copy, &step, 1, NULL, NULL);
}

static void test_steps_arguments(void **state)
{
    struct fixture *f = *state;
    lockcore_client *c = client(f, 2000);
    struct lockcore_lock lock;
    assert_int_equal(lockcore_acquire(c, "steps-args", &lock), 0);
    struct from_cb s = {0};
    struct lockcore_step nofn = {.name = "no run"};
    assert_int_equal(lockcore_steps_run(NULL, &lock, &nofn, 1, NULL, NULL), -EINVAL);
    assert_int_equal(lockcore_steps_run(c, NULL, &nofn, 1, NULL, NULL), -EINVAL);
    assert_int_equal(lockcore_steps_run(c, &lock, NULL, 1, NULL, NULL), -EINVAL);
    assert_int_equal(lockcore_steps_run(c, &lock, &nofn, 1, NULL, NULL), -EINVAL);
    assert_non_null(strstr(lockcore_errmsg(c), "no run function"));
    assert_int_equal(lockcore_steps_options_init(NULL), -EINVAL);
    /* No steps: just the check that the lock is held. */
    assert_int_equal(lockcore_steps_run(c, &lock, NULL, 0, NULL, NULL), 0);
    assert_int_equal(lockcore_release(c, &lock), 0);

    assert_int_equal(lockcore_acquire_async(c, "steps-args", acquired, &s), 0);
    for (int i = 0; i < 100 && lockcore_inflight(c) > 0; i++)
        lockcore_run(c, 100);
    assert_int_equal(s.rc, -EDEADLK);
    assert_int_equal(s.called, 0);
    lockcore_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_steps_all_done, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_steps_failing_step_undoes_earlier_in_reverse, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_steps_key_overwritten_stops_and_undoes, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_steps_validity_ran_out_undoes_the_late_step, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_steps_min_validity_keeps_a_step_from_starting, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_steps_keepalive_on_lost_stops_and_undoes, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_steps_failing_undo_does_not_stop_the_others, setup3, teardown),
        cmocka_unit_test_setup_teardown(test_steps_arguments, setup3, teardown),
    };
    return cmocka_run_group_tests_name("lockcore/steps", tests, NULL, NULL);
}
