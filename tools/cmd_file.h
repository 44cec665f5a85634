/*
 * The fenced file commands of fencelock: write, append and fence (see
 * docs/fenced-files.md). They need no Redis nodes: the token comes from
 * FENCELOCK_TOKEN (set by `fencelock run`) or --token.
 */
#ifndef FENCELOCK_CMD_FILE_H
#define FENCELOCK_CMD_FILE_H

/* Exit code of a write refused for a stale token. */
#define FENCELOCK_EXIT_STALE 65

/*
 * If the command in argv is write, append or fence, run it and return its
 * exit code; otherwise return -1 and touch nothing, for the generic
 * parser to go on.
 */
int fencelock_file_main(int argc, char **argv);

#endif
