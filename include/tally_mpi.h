/*
 * tally_mpi.h - tally's ops over a matrix whose rows are split across the
 * ranks of an MPI communicator, with results bit-identical to the same op on
 * one device over the whole matrix, for any number of ranks and any split of
 * the rows (docs/distributed.md).
 *
 * Conventions that hold for every call:
 *
 * - Collective: every rank of `comm` makes the same call with the same
 *   scalar arguments (op, reduction, flags, components, rng, global_rows),
 *   in the same order as its other collective calls on `comm`.
 * - The split: the matrix has `global_rows` rows. Rank q holds the rows
 *   [first_row, first_row + local rows) in its views, where "local rows" is
 *   the rows of its input view. The ranks hold consecutive runs in rank
 *   order: rank 0 starts at row 0 and each rank starts where the previous
 *   one ended; a rank may hold no rows (a view of 0 rows, whose buffer may
 *   then be NULL). Every rank's views have the global column count.
 * - Each rank uses its own context (any backend; ranks may mix CUDA, OpenCL
 *   and host). The context, its buffers and `comm` are used from the calling
 *   thread only for the duration of the call; MPI needs no thread level above
 *   MPI_THREAD_SINGLE (only the calling thread talks to MPI).
 * - Ownership: the caller owns every context, buffer and view; a call
 *   allocates temporary buffers on the rank's context and releases them
 *   before it returns. Calls are synchronous: when one returns, its outputs
 *   are written.
 * - Status: every rank returns the same status. When any rank fails (a bad
 *   argument, a backend error), every rank returns a failure;
 *   tally_mpi_last_error() on a rank says what went wrong there (the failing
 *   rank names the argument; the others name the failing rank). A failure
 *   never leaves a rank waiting for a message that will not come.
 */
#ifndef TALLY_MPI_H
#define TALLY_MPI_H

#include <mpi.h>
#include <stdint.h>

#include "tally.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The message of the calling thread's last failed tally_mpi_* call ("" when
 * none); it includes the context's tally_last_error text when a tally call
 * failed. Valid until the thread's next tally_mpi_* call. Any thread. */
TALLY_API const char *tally_mpi_last_error(void);

/*
 * tally_reduce over the sharded matrix x (this rank's rows). axis ALL: out is
 * a 1x1 view on this rank's context and receives, on every rank, the bits of
 * the single-device tally_reduce over all global_rows rows. axis ROW: out
 * holds this rank's local rows' values (the single-device rows; no
 * communication beyond the argument check).
 */
TALLY_API tally_status tally_mpi_reduce(tally_context *ctx, MPI_Comm comm, int64_t global_rows,
                                        int64_t first_row, tally_reduce_op op, tally_axis axis, tally_view x,
                                        tally_view out);

/*
 * tally_kl_div over the sharded input and target (this rank's rows of both).
 * NONE: out holds this rank's rows of the pointwise loss. SUM, MEAN,
 * BATCHMEAN: out is 1x1 and receives on every rank the single-device bits.
 */
TALLY_API tally_status tally_mpi_kl_div(tally_context *ctx, MPI_Comm comm, int64_t global_rows,
                                        int64_t first_row, tally_view input, tally_view target,
                                        tally_reduction reduction, unsigned flags, tally_view out);

/*
 * tally_dirichlet_multinomial over sharded counts. log_alpha is [1, V]
 * (shared by every row; the same on every rank) or this rank's rows of the
 * per-row [B, V] matrix; with global_rows == 1 it is shared. NONE: out holds
 * this rank's row values; SUM and MEAN: out is 1x1 with the single-device bits
 * on every rank.
 */
TALLY_API tally_status tally_mpi_dirichlet_multinomial(tally_context *ctx, MPI_Comm comm, int64_t global_rows,
                                                       int64_t first_row, tally_view counts, tally_view log_alpha,
                                                       tally_reduction reduction, unsigned flags, tally_view out);

/*
 * tally_gmm_log_prob for this rank's rows of z, mu and log_var (logits [1, K]
 * the same on every rank). out: this rank's local rows' values.
 */
TALLY_API tally_status tally_mpi_gmm_log_prob(tally_context *ctx, MPI_Comm comm, int64_t global_rows,
                                              int64_t first_row, tally_view z, tally_view mu, tally_view log_var,
                                              tally_view logits, int64_t components, tally_view out);

/*
 * tally_gmm_sample for this rank's rows of mu and log_var: every row gets the
 * component and the normals it gets on one device sampling all global_rows
 * rows from `rng` (the draw layout of docs/rng.md uses the global row and the
 * global B). *consumed (may be NULL) receives the single-device count on
 * every rank, so every rank advances its rng the same way.
 */
TALLY_API tally_status tally_mpi_gmm_sample(tally_context *ctx, MPI_Comm comm, int64_t global_rows,
                                            int64_t first_row, tally_view mu, tally_view log_var,
                                            tally_view logits, int64_t components, tally_rng rng, tally_view z,
                                            tally_view log_q, tally_view component, uint64_t *consumed);

/*
 * tally_rng_fill of this rank's rows of a [global_rows, cols] output: element
 * (r, c) of the global matrix gets stream element offset + r*cols + c.
 * *consumed: the single-device count (global_rows*cols rounded up to 4).
 */
TALLY_API tally_status tally_mpi_rng_fill(tally_context *ctx, MPI_Comm comm, int64_t global_rows,
                                          int64_t first_row, tally_distribution dist, tally_rng rng,
                                          tally_view out, uint64_t *consumed);

/*
 * tally_categorical for this rank's rows of weights (or logits): global row r
 * uses uniform(offset + r). *consumed: the single-device count.
 */
TALLY_API tally_status tally_mpi_categorical(tally_context *ctx, MPI_Comm comm, int64_t global_rows,
                                             int64_t first_row, tally_view weights, unsigned flags, tally_rng rng,
                                             tally_view out, uint64_t *consumed);

/* Communication counters of this thread's tally_mpi_* calls since the last
 * reset: bytes this rank sent point to point, messages, and seconds spent
 * waiting in MPI (for the benchmarks). Any thread; per thread. */
typedef struct tally_mpi_stats {
    uint64_t bytes_sent;
    uint64_t messages_sent;
    double comm_seconds;
    uint64_t tree_levels; /* sharded tree levels run */
} tally_mpi_stats;

TALLY_API tally_mpi_stats tally_mpi_stats_get(void);
TALLY_API void tally_mpi_stats_reset(void);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_MPI_H */
