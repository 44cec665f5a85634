/*
 * fencelock extend RESOURCE... LOCK_ID: extend a lock that another process
 * acquired, known by its id.
 */
#include <stdio.h>

#include <jansson.h>

#include <lockcore/lockcore.h>

#include "cli.h"

const char cmd_extend_usage[] =
    "usage: fencelock [options] extend RESOURCE... LOCK_ID [--ttl D]\n"
    "\n"
    "Extend the lock held under LOCK_ID to --ttl (default 10s) from now, on every\n"
    "node where the key still holds LOCK_ID; the token is kept. Name the lock as\n"
    "acquire did: every resource of a set, and --read, --write or --reentrant.\n"
    "Prints:\n"
    "  "
    "{\"resource\",\"lock_id\",\"extended\",\"validity_ms\",\"ttl_ms\",\"nodes_extended\","
    "\"nodes\",\n"
    "   \"granted_mono_ms\",\"granted_wall_ms\",\"valid_until_mono_ms\",\"valid_until_wall_ms\"}\n"
    "Exit: 0 extended on a majority; 79 not held under LOCK_ID on a majority;\n"
    "  69 no majority in time; 64 usage; 70 error.\n";

int cmd_extend(lockcore_client *c, const struct cmdline *cl)
{
    const struct args *a = &cl->a;
    const struct target *t = &cl->t;
    const char *id = cl->id;
    struct lockcore_lock l;
    int rc = fencelock_lock_for(c, cl, "extend", &l);
    if (rc >= 0)
        return rc;
    rc = lockcore_extend(c, &l, a->ttl_ms); /* 0: the client's TTL */
    json_t *j = fencelock_merged(fencelock_lock_head(t, t->names[0], &l),
                                 json_pack("{s:s, s:b, s:I, s:I, s:i, s:i}", "lock_id", id, "extended",
                                           rc == 0, "validity_ms", (json_int_t)(rc == 0 ? l.validity_ms : 0),
                                           "ttl_ms", (json_int_t)fencelock_ttl_ms(a), "nodes_extended",
                                           (int)l.nodes_ok, "nodes", (int)l.nodes));
    fencelock_print_json(fencelock_merged(j, fencelock_times_json(rc == 0 ? &l : NULL)));
    return rc == 0 ? EXIT_OK : fencelock_fail(c, "extend", rc);
}
