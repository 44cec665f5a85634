/*
 * fencelock: acquire, extend, release and inspect locks on N Redis nodes
 * from the shell, run a command under a lock that is kept alive, with its
 * fencing token in the environment, run one while elected leader (its
 * epoch the token), and write files fenced by that token.
 * Data goes to stdout as one JSON line; diagnostics go to stderr; exit
 * codes are stable (see docs/cli.md).
 *
 * Each command is in its own file, tools/cmd_<name>.c, and is dispatched
 * from the table below; what they share (option parsing, the client, the
 * JSON printer, errors and exit codes) is below them, in cli.h.
 */
#include <stddef.h>
#include <string.h>

#include "cli.h"

static const struct command commands[] = {
    {"acquire", CMD_ACQUIRE | CMD_PERMITS, cmd_acquire_usage, cmd_acquire, NULL},
    {"status", CMD_PERMITS, cmd_status_usage, cmd_status, NULL},
    {"extend", CMD_TAKES_ID, cmd_extend_usage, cmd_extend, NULL},
    {"release", CMD_TAKES_ID, cmd_release_usage, cmd_release, NULL},
    {"run", CMD_RUN | CMD_PERMITS, cmd_run_usage, cmd_run, NULL},
    {"repair", CMD_REPAIR, cmd_repair_usage, cmd_repair, NULL},
    {"elect", CMD_ELECT, cmd_elect_usage, cmd_elect, NULL},
    {"leader", CMD_LEADER, cmd_leader_usage, cmd_leader, NULL},
    /* The file commands need no nodes and parse their own options. */
    {"write", 0, NULL, NULL, cmd_write},
    {"append", 0, NULL, NULL, cmd_append},
    {"fence", 0, NULL, NULL, cmd_fence},
};

int main(int argc, char **argv)
{
    const char *name = fencelock_command_name(argc, argv);
    for (size_t i = 0; name != NULL && i < sizeof(commands) / sizeof(commands[0]); i++)
        if (commands[i].main != NULL && strcmp(name, commands[i].name) == 0)
            return commands[i].main(argc, argv);
    return fencelock_lock_main(argc, argv, commands, sizeof(commands) / sizeof(commands[0]));
}
