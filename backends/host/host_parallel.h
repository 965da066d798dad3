/*
 * backends/host/host_parallel.h - the host backend's parallel-for. Work
 * items are independent (tiles or rows), each writes only its own outputs,
 * so the thread count changes speed and never bits.
 *
 * Each host context owns a pool of worker threads (started at the first op
 * that needs them, joined when the context is released), so an op hands
 * its ranges to threads that already exist instead of creating threads.
 * An op entry point makes its context's pool current on the calling thread
 * (tally__host_pool_use) for the duration of the op; a parallel-for outside
 * any op, or when a pool cannot be made, starts threads for the call as
 * before. A pool hands work out in chunks from a shared counter, so which
 * thread runs which item varies from call to call; the items are
 * independent, so the bits do not.
 */
#ifndef TALLY_HOST_PARALLEL_H
#define TALLY_HOST_PARALLEL_H

#include <stdint.h>

typedef void (*tally__host_range_fn)(void *arg, uint64_t begin, uint64_t end);

typedef struct tally__host_pool tally__host_pool;

/* Runs fn over [0, count) split into contiguous ranges, one per thread.
 * Threads: TALLY_HOST_THREADS if set (1 disables threading), else the
 * number of online processors, at most 64. `cost` is a rough per-item cost
 * in element operations, so that small jobs stay on the calling thread.
 * Uses the pool current on this thread, if any. */
void tally__host_parallel_for(uint64_t count, uint64_t cost, tally__host_range_fn fn, void *arg);

/* The thread count tally__host_parallel_for would use. */
int tally__host_threads(void);

/* A pool for up to `threads` threads (the caller counts as one); no worker
 * starts before the first parallel-for. NULL when out of memory (callers
 * then run without a pool). One thread at a time may use a pool, like the
 * context that owns it. */
tally__host_pool *tally__host_pool_create(int threads);
/* Stops and joins the workers and frees the pool; NULL is ignored. */
void tally__host_pool_release(tally__host_pool *pool);
/* Makes pool (or NULL: none) current on the calling thread; returns the
 * previous one, to be restored when the op returns. */
tally__host_pool *tally__host_pool_use(tally__host_pool *pool);

#endif
