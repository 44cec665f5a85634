/*
 * fencelock release RESOURCE... LOCK_ID: release a lock that another
 * process acquired, known by its id.
 */
#include <stdio.h>

#include <jansson.h>

#include <lockcore/lockcore.h>

#include "cli.h"

const char cmd_release_usage[] =
    "usage: fencelock [options] release RESOURCE... LOCK_ID\n"
    "\n"
    "Delete the lock on every node where the key still holds LOCK_ID (a reentrant\n"
    "hold: one hold less). Name the lock as acquire did: every resource of a set,\n"
    "and --read, --write or --reentrant. Prints:\n"
    "  {\"resource\",\"lock_id\",\"released\",\"nodes_released\",\"nodes\"}\n"
    "released is false when no node held LOCK_ID any more (expired or released).\n"
    "Exit: 0 a majority answered (released or not); 69 no majority answered;\n"
    "  64 usage; 70 error.\n";

int cmd_release(lockcore_client *c, const struct cmdline *cl)
{
    const struct target *t = &cl->t;
    struct lockcore_lock l;
    int rc = fencelock_lock_for(c, cl, "release", &l);
    if (rc >= 0)
        return rc;
    rc = lockcore_release(c, &l);
    fencelock_print_json(
        fencelock_merged(fencelock_lock_head(t, t->names[0], &l),
                         json_pack("{s:s, s:b, s:i, s:i}", "lock_id", cl->id, "released", l.nodes_ok > 0,
                                   "nodes_released", (int)l.nodes_ok, "nodes", (int)l.nodes)));
    return rc == 0 ? EXIT_OK : fencelock_fail(c, "release", rc);
}
