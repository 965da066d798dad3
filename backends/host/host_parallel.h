/*
 * backends/host/host_parallel.h - a minimal parallel-for for the host
 * backend. Work items are independent (tiles or rows), each writes only its
 * own outputs, so the thread count changes speed and never bits.
 */
#ifndef TALLY_HOST_PARALLEL_H
#define TALLY_HOST_PARALLEL_H

#include <stdint.h>

typedef void (*tally__host_range_fn)(void *arg, uint64_t begin, uint64_t end);

/* Runs fn over [0, count) split into contiguous ranges, one per thread.
 * Threads: TALLY_HOST_THREADS if set (1 disables threading), else the
 * number of online processors, at most 64. `cost` is a rough per-item cost
 * in element operations, so that small jobs stay on the calling thread. */
void tally__host_parallel_for(uint64_t count, uint64_t cost, tally__host_range_fn fn, void *arg);

/* The thread count tally__host_parallel_for would use. */
int tally__host_threads(void);

#endif
