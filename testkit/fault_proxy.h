/*
 * A fault-injecting TCP proxy on 127.0.0.1, for tests: clients connect to
 * fp_port(), the proxy connects each of them to 127.0.0.1:target_port and
 * forwards bytes both ways, delayed, held or dropped as the test says.
 * It runs in its own thread; every setting takes effect at once, and bytes
 * already waiting keep the delay they were read with.
 */
#ifndef FENCELOCK_FAULT_PROXY_H
#define FENCELOCK_FAULT_PROXY_H

enum fp_dir {
    FP_UP = 1,   /* client -> server */
    FP_DOWN = 2, /* server -> client */
    FP_BOTH = 3,
};

struct fp_proxy;

/* Start a proxy to 127.0.0.1:target_port on a free port. Returns 0 or a
 * negative errno. */
int fp_new(int target_port, struct fp_proxy **out);

/* Stop the thread, close every connection, free. Accepts NULL. */
void fp_free(struct fp_proxy *p);

int fp_port(const struct fp_proxy *p);

/* Delay bytes in the given direction(s) by ms (0: none). */
void fp_set_delay(struct fp_proxy *p, enum fp_dir dir, int ms);

/* Hold (1) or release (0) bytes in the given direction(s): held bytes are
 * buffered, not lost, and go on when released. */
void fp_set_hold(struct fp_proxy *p, enum fp_dir dir, int on);

/* Drop (1) bytes in the given direction(s): read and thrown away while on. */
void fp_set_drop(struct fp_proxy *p, enum fp_dir dir, int on);

/* Close every connection now (a network failure); new ones are accepted. */
void fp_reset(struct fp_proxy *p);

/* Connections accepted so far. */
int fp_accepted(const struct fp_proxy *p);

#endif
