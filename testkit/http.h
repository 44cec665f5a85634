/* Kept so that in-tree code keeps its includes: the kit's one public header
 * is <fencelock-testkit/testkit.h>, which holds what this header declared. */
#ifndef FENCELOCK_HTTP_H
#define FENCELOCK_HTTP_H

#include <fencelock-testkit/testkit.h>

#endif
