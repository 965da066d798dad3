/*
 * backends/host/host_parallel.c - see host_parallel.h.
 */
#include "host_parallel.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 64
/* Below this much work a thread costs more than it saves. */
#define MIN_WORK_PER_THREAD 65536u

int tally__host_threads(void)
{
    const char *env = getenv("TALLY_HOST_THREADS");
    if (env != NULL && env[0] != '\0') {
        long v = strtol(env, NULL, 10);
        if (v >= 1) return v > MAX_THREADS ? MAX_THREADS : (int)v;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > MAX_THREADS ? MAX_THREADS : (int)n;
}

typedef struct range_task {
    tally__host_range_fn fn;
    void *arg;
    uint64_t begin, end;
} range_task;

static void *run_range(void *p)
{
    range_task *t = p;
    t->fn(t->arg, t->begin, t->end);
    return NULL;
}

void tally__host_parallel_for(uint64_t count, uint64_t cost, tally__host_range_fn fn, void *arg)
{
    if (count == 0) return;
    uint64_t threads = (uint64_t)tally__host_threads();
    if (threads > count) threads = count;
    uint64_t total = cost > 0 && count > UINT64_MAX / cost ? UINT64_MAX : count * (cost ? cost : 1);
    if (total / MIN_WORK_PER_THREAD < threads) threads = total / MIN_WORK_PER_THREAD;
    if (threads <= 1) {
        fn(arg, 0, count);
        return;
    }
    range_task tasks[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    uint64_t per = count / threads, extra = count % threads, at = 0;
    for (uint64_t i = 0; i < threads; i++) {
        uint64_t len = per + (i < extra);
        tasks[i] = (range_task){.fn = fn, .arg = arg, .begin = at, .end = at + len};
        at += len;
    }
    /* Thread 0's range runs on the caller; if a thread cannot be started its
     * range also runs on the caller, so a resource shortage costs speed only. */
    for (uint64_t i = 1; i < threads; i++)
        started[i] = pthread_create(&ids[i], NULL, run_range, &tasks[i]) == 0;
    run_range(&tasks[0]);
    for (uint64_t i = 1; i < threads; i++) {
        if (started[i])
            pthread_join(ids[i], NULL);
        else
            run_range(&tasks[i]);
    }
}
