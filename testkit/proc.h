/* Kept so that in-tree code keeps its includes: the kit's one public header
 * is <fencelock-testkit/testkit.h>, which holds what this header declared. */
#ifndef FENCELOCK_PROC_H
#define FENCELOCK_PROC_H

#include <fencelock-testkit/testkit.h>

/* Internal to the kit: who a child runs as, and where. */
struct hp__as {
    int switch_user; /* 1: setuid/setgid to uid/gid (the caller is root) */
    uid_t uid;
    gid_t gid;
    const char *dir; /* working directory of the child; NULL: ours */
};

/* hp_spawn_io, run as *as (NULL: as hp_spawn_io). */
pid_t hp__spawn_as(char *const argv[], char *const env_extra[], const char *log_path, int *in_fd, int *out_fd,
                   const struct hp__as *as);

/* After SIGSTOP, which stops a process's threads one by one as each is
 * next scheduled: wait up to timeout_ms until every thread of pid is
 * stopped. Returns 0, -ETIMEDOUT or a negative errno. */
int hp__wait_stopped(pid_t pid, int timeout_ms);

#endif
