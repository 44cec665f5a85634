/* Kept so that in-tree code keeps its includes: the kit's one public header
 * is <fencelock-testkit/testkit.h>, which holds what this header declared. */
#ifndef FENCELOCK_REDIS_HARNESS_H
#define FENCELOCK_REDIS_HARNESS_H

#include <fencelock-testkit/testkit.h>

#endif
