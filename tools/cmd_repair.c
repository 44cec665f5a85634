/*
 * fencelock repair RESOURCE [--to TOKEN] --force: lower a fence that a
 * client with a fast clock pushed far ahead (docs/fencing.md, "Repairing a
 * fence"). Without --force it only says what it would do.
 */
#include <stdio.h>

#include <jansson.h>

#include <lockcore/lockcore.h>

#include "cli.h"

const char cmd_repair_usage[] =
    "usage: fencelock [options] repair RESOURCE [--to TOKEN] [--force]\n"
    "\n"
    "Lower RESOURCE's fence value to TOKEN (default: each node's own clock, in µs)\n"
    "on every node where no lock of it is held and the fence is above that: the\n"
    "way back after a client whose clock ran hours fast pushed it ahead. Its fence\n"
    "bucket, shared with other resources, is lowered only where it is further ahead\n"
    "of the node's clock than proposals may go. This is the one step that lets\n"
    "tokens go back: use it only when no token above TOKEN ever granted for\n"
    "RESOURCE (or, where its bucket was that far ahead, for any resource of the\n"
    "bucket) will be used again at any resource (docs/fencing.md, \"Repairing a\n"
    "fence\"). Without --force it changes nothing and prints each\n"
    "node's fence and clock (as status does). Prints:\n"
    "  {\"resource\",\"lowered\",\"nodes\":[{\"node\",\"reachable\",\"fence\",\"node_time_us\",\n"
    "   \"fence_ahead_ms\",\"held_by\" | \"error\"}]}\n"
    "Exit: 0 done (or nothing to do); 75 held on a node, not lowered there;\n"
    "  69 no majority answered; 64 usage; 70 error.\n";

/* How far a fence is ahead of its node's clock, in ms (null if unknown). */
json_t *fencelock_fence_ahead(const struct lockcore_node_status *st)
{
    if (!st->reachable || st->node_time_us == 0 || st->fence == 0)
        return json_null();
    return json_integer(((json_int_t)st->fence - (json_int_t)st->node_time_us) / 1000);
}

int cmd_repair(lockcore_client *c, const struct cmdline *cl)
{
    const char *resource = cl->t.names[0];
    struct lockcore_node_status st[LOCKCORE_NODES_MAX];
    int n = (int)lockcore_nodes(c), lowered = 0, rc;
    if (cl->a.force)
        rc = lowered = lockcore_fence_repair(c, resource, cl->a.repair_to, st, LOCKCORE_NODES_MAX);
    else
        rc = lockcore_status(c, resource, st, LOCKCORE_NODES_MAX);
    if (rc < 0)
        return fencelock_fail(c, "repair", rc);
    json_t *nodes = json_array();
    int reachable = 0, held = 0;
    for (int i = 0; i < n; i++) {
        json_t *e = json_pack("{s:s, s:b}", "node", st[i].node, "reachable", st[i].reachable);
        if (st[i].reachable) {
            reachable++;
            held += st[i].holder[0] != '\0';
            json_object_set_new(e, "fence", json_integer((json_int_t)st[i].fence));
            json_object_set_new(e, "node_time_us", json_integer((json_int_t)st[i].node_time_us));
            json_object_set_new(e, "fence_ahead_ms", fencelock_fence_ahead(&st[i]));
            json_object_set_new(e, "held_by", st[i].holder[0] ? json_string(st[i].holder) : json_null());
        } else {
            json_object_set_new(e, "error", json_string(st[i].error));
        }
        json_array_append_new(nodes, e);
    }
    fencelock_print_json(json_pack("{s:s, s:b, s:i, s:o}", "resource", resource, "forced", cl->a.force,
                                   "lowered", lowered, "nodes", nodes));
    if (reachable < (int)lockcore_quorum(c))
        return EXIT_UNREACHABLE;
    return held > 0 ? EXIT_NOT_HELD : EXIT_OK;
}
