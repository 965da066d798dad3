/*
 * backends/host/host_parallel.c - see host_parallel.h.
 */
#include "host_parallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/types.h>
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

/* The threads worth using for count items of `cost` each, at most `max`. */
static uint64_t threads_for(uint64_t count, uint64_t cost, uint64_t max)
{
    uint64_t threads = max > count ? count : max;
    uint64_t total = cost > 0 && count > UINT64_MAX / cost ? UINT64_MAX : count * (cost ? cost : 1);
    if (total / MIN_WORK_PER_THREAD < threads) threads = total / MIN_WORK_PER_THREAD;
    return threads;
}

/* Part i of [0, count) cut into `parts` contiguous ranges. */
static void part_range(uint64_t count, uint64_t parts, uint64_t i, uint64_t *begin, uint64_t *end)
{
    uint64_t per = count / parts, extra = count % parts;
    *begin = i * per + (i < extra ? i : extra);
    *end = *begin + per + (i < extra);
}

/* ---- The pool ---- */

struct tally__host_pool {
    int threads;  /* the caller plus at most threads - 1 workers */
    int started;  /* workers running */
    int tried;    /* workers have been started (or failed to start) */
    pid_t pid;    /* the process that started them */
    pthread_t ids[MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t generation; /* bumped for each job */
    int pending;         /* workers still on the current job */
    int stop;
    /* The current job: items [0, count) handed out `chunk` at a time from
     * `next`, so a thread that the OS delays (a loaded or shared machine)
     * holds up only the chunks it has taken. */
    tally__host_range_fn fn;
    void *arg;
    uint64_t count, chunk;
    atomic_uint_fast64_t next;
};

/* Takes and runs chunks of the current job until none is left. */
static void run_chunks(tally__host_pool *pool, tally__host_range_fn fn, void *arg, uint64_t count, uint64_t chunk)
{
    for (;;) {
        uint64_t b = atomic_fetch_add(&pool->next, chunk);
        if (b >= count) return;
        fn(arg, b, count - b < chunk ? count : b + chunk);
    }
}

typedef struct worker_arg {
    tally__host_pool *pool;
} worker_arg;


static void *worker_main(void *p)
{
    tally__host_pool *pool = ((worker_arg *)p)->pool;
    free(p);
    uint64_t seen = 0;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (pool->generation == seen && !pool->stop) pthread_cond_wait(&pool->go, &pool->mu);
        if (pool->stop) break;
        seen = pool->generation;
        tally__host_range_fn fn = pool->fn;
        void *arg = pool->arg;
        uint64_t count = pool->count, chunk = pool->chunk;
        pthread_mutex_unlock(&pool->mu);
        run_chunks(pool, fn, arg, count, chunk);
        pthread_mutex_lock(&pool->mu);
        if (--pool->pending == 0) pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

tally__host_pool *tally__host_pool_create(int threads)
{
    tally__host_pool *pool = calloc(1, sizeof *pool);
    if (pool == NULL) return NULL;
    pool->threads = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
    if (pthread_mutex_init(&pool->mu, NULL) != 0) {
        free(pool);
        return NULL;
    }
    if (pthread_cond_init(&pool->go, NULL) != 0) {
        pthread_mutex_destroy(&pool->mu);
        free(pool);
        return NULL;
    }
    if (pthread_cond_init(&pool->done, NULL) != 0) {
        pthread_cond_destroy(&pool->go);
        pthread_mutex_destroy(&pool->mu);
        free(pool);
        return NULL;
    }
    return pool;
}

/* Starts the workers once; a worker that cannot start leaves its part to
 * the caller, so a resource shortage costs speed only. */
static void pool_start(tally__host_pool *pool)
{
    pool->tried = 1;
    pool->pid = getpid();
    for (int w = 0; w + 1 < pool->threads; w++) {
        worker_arg *a = malloc(sizeof *a);
        if (a == NULL) break;
        a->pool = pool;
        if (pthread_create(&pool->ids[w], NULL, worker_main, a) != 0) {
            free(a);
            break;
        }
        pool->started++;
    }
}

void tally__host_pool_release(tally__host_pool *pool)
{
    if (pool == NULL) return;
    if (pool->tried && pool->pid != getpid()) {
        /* Released in a child of fork() before any parallel op: the workers
         * are the parent's, nothing here to stop or join. */
        free(pool);
        return;
    }
    pthread_mutex_lock(&pool->mu);
    pool->stop = 1;
    pthread_cond_broadcast(&pool->go);
    pthread_mutex_unlock(&pool->mu);
    for (int w = 0; w < pool->started; w++) pthread_join(pool->ids[w], NULL);
    pthread_cond_destroy(&pool->done);
    pthread_cond_destroy(&pool->go);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}

static void pool_for(tally__host_pool *pool, uint64_t count, uint64_t threads, tally__host_range_fn fn, void *arg)
{
    if (pool->tried && pool->pid != getpid()) {
        /* A child of fork() has none of its parent's workers: forget them
         * (their pthread objects belong to the parent) and start its own. */
        pthread_mutex_init(&pool->mu, NULL);
        pthread_cond_init(&pool->go, NULL);
        pthread_cond_init(&pool->done, NULL);
        pool->started = 0;
        pool->tried = 0;
        pool->pending = 0;
    }
    if (!pool->tried) pool_start(pool);
    pthread_mutex_lock(&pool->mu);
    pool->fn = fn;
    pool->arg = arg;
    pool->count = count;
    /* About eight chunks per thread: small enough to even out delays,
     * large enough that taking one costs nothing. */
    pool->chunk = count / (threads * 8u) > 0 ? count / (threads * 8u) : 1u;
    atomic_store(&pool->next, 0u);
    pool->pending = pool->started;
    pool->generation++;
    pthread_cond_broadcast(&pool->go);
    pthread_mutex_unlock(&pool->mu);
    /* The caller takes chunks too; if no worker started it takes them all. */
    run_chunks(pool, fn, arg, count, pool->chunk);
    pthread_mutex_lock(&pool->mu);
    while (pool->pending > 0) pthread_cond_wait(&pool->done, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}

static _Thread_local tally__host_pool *current_pool;

tally__host_pool *tally__host_pool_use(tally__host_pool *pool)
{
    tally__host_pool *previous = current_pool;
    current_pool = pool;
    return previous;
}

/* ---- Without a pool: threads for the one call ---- */

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

static void spawn_for(uint64_t count, uint64_t threads, tally__host_range_fn fn, void *arg)
{
    range_task tasks[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (uint64_t i = 0; i < threads; i++) {
        tasks[i] = (range_task){.fn = fn, .arg = arg};
        part_range(count, threads, i, &tasks[i].begin, &tasks[i].end);
    }
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

void tally__host_parallel_for(uint64_t count, uint64_t cost, tally__host_range_fn fn, void *arg)
{
    if (count == 0) return;
    tally__host_pool *pool = current_pool;
    uint64_t most = pool != NULL ? (uint64_t)pool->threads : (uint64_t)tally__host_threads();
    uint64_t threads = threads_for(count, cost, most);
    if (threads <= 1) {
        fn(arg, 0, count);
        return;
    }
    if (pool != NULL) {
        /* A worker's own parallel-for (none today) runs without the pool. */
        current_pool = NULL;
        pool_for(pool, count, threads, fn, arg);
        current_pool = pool;
        return;
    }
    spawn_for(count, threads, fn, arg);
}
