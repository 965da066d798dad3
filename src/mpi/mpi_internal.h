/*
 * src/mpi/mpi_internal.h - what the files of libtally_mpi share: one
 * collective call's state (the split of the rows over the ranks, this rank's
 * status), the sharded reduction tree, and small helpers. libtally_mpi uses
 * only tally's public API (tally.h and the portable headers), so it links
 * against the shared libtally like any application and works with every
 * backend. docs/distributed.md describes the design.
 */
#ifndef TALLY_MPI_INTERNAL_H
#define TALLY_MPI_INTERNAL_H

#include <stdint.h>

#include "tally_mpi.h"

#if defined(__GNUC__)
#  define TM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#  define TM_PRINTF(a, b)
#endif

/* The scalar arguments every rank must pass identically. */
#define TM_AGREE_MAX 6

/* One collective call on one rank. */
typedef struct tm_call {
    const char *name;
    tally_context *ctx;
    MPI_Comm comm;
    int rank, size;
    tally_status st;      /* this rank's status so far; work stops at the first failure but
                             the messages keep flowing so no rank waits forever */
    uint64_t global_rows;
    uint64_t cols;
    uint64_t *first;      /* size + 1 entries: rank q holds rows [first[q], first[q+1]) */
    uint64_t *lo;         /* size + 1 entries of workspace for the sharded tree's splits */
    uint64_t local_rows;
    uint64_t row0;        /* first[rank] */
} tm_call;

/*
 * Starts a collective call: checks this rank's arguments (ctx, the row
 * counts), gathers every rank's (first_row, local rows, cols, global_rows,
 * agree[]) and checks that the rows are consecutive in rank order, that the
 * column counts and the scalar arguments agree, and that no rank failed its
 * local checks. Every rank reaches the same verdict and returns the same
 * status. local_status is a failure the caller already found on this rank
 * (TALLY_OK if none; its message is already set).
 */
tally_status tm_begin(tm_call *c, const char *name, tally_context *ctx, MPI_Comm comm, int64_t global_rows,
                      int64_t first_row, int64_t local_rows, int64_t cols, const uint64_t agree[TM_AGREE_MAX],
                      tally_status local_status);
/* Ends a call: agrees on the worst status of all ranks and frees the state.
 * Returns the same status on every rank. */
tally_status tm_end(tm_call *c);

/* Records a failure on this rank (the first one wins) with a message. */
void tm_fail(tm_call *c, tally_status st, const char *fmt, ...) TM_PRINTF(3, 4);
/* Records the failure of a tally call, with the context's message. */
void tm_fail_tally(tm_call *c, tally_status st, const char *what);
/* The thread's message, for calls that fail before a tm_call exists. */
tally_status tm_error(tally_status st, const char *fmt, ...) TM_PRINTF(2, 3);

/* Point-to-point and collective helpers that count bytes and time. */
void tm_isend(tm_call *c, const float *data, uint64_t count, int dest, int tag, MPI_Request *req);
void tm_irecv(tm_call *c, float *data, uint64_t count, int src, int tag, MPI_Request *req);
void tm_waitall(tm_call *c, int count, MPI_Request *reqs);
void tm_bcast_float(tm_call *c, float *value, int root);
void tm_count_level(void);

/* A temporary buffer of `count` 4-byte elements on the call's context, or
 * NULL after recording the failure (also NULL, silently, once the call has
 * failed). */
tally_buffer *tm_temp(tm_call *c, uint64_t count);

/*
 * The sharded tree (mpi_tree.c). Reduces a vector of n values with the tile
 * op `op` (TALLY_SUM, TALLY_SUMSQ, TALLY_MIN or TALLY_MAX at level 0; SUMSQ
 * becomes SUM above it), exactly as tally__plan_vector(n) and the
 * single-device tree do. Rank q holds values [lo[q], lo[q+1]) (lo has size+1
 * entries, lo[size] == n, n > 0), this rank's stored contiguously in `buf`
 * from element `off` (buf may be NULL when this rank holds none). lo is
 * overwritten. Every rank receives the result in *result.
 */
void tm_tree(tm_call *c, tally_reduce_op op, uint64_t n, uint64_t *lo, tally_buffer *buf, uint64_t off,
             float *result);

/* Checks, before tm_begin, that out is a 1x1 fp32 view inside its buffer on
 * ctx; sets the thread message on failure. */
tally_status tm_check_scalar(tally_context *ctx, const char *name, tally_view out);
/* Writes one float (canonical NaN) to a checked 1x1 fp32 output view. */
void tm_write_scalar(tm_call *c, tally_view out, float value);

#endif
