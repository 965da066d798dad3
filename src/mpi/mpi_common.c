/*
 * src/mpi/mpi_common.c - the parts every collective call shares: argument
 * agreement across ranks, errors, temporary buffers and counted messages.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"
#include "tally/terms.h"

/* One message and one set of counters per thread: the calls take no lock. */
static _Thread_local char tm_message[2048];
static _Thread_local tally_mpi_stats tm_stats;

const char *tally_mpi_last_error(void) { return tm_message; }

tally_mpi_stats tally_mpi_stats_get(void) { return tm_stats; }

void tally_mpi_stats_reset(void) { memset(&tm_stats, 0, sizeof tm_stats); }

static void set_message(const char *fmt, va_list ap)
{
    vsnprintf(tm_message, sizeof tm_message, fmt, ap);
}

tally_status tm_error(tally_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(fmt, ap);
    va_end(ap);
    return st;
}

void tm_fail(tm_call *c, tally_status st, const char *fmt, ...)
{
    if (c->st != TALLY_OK) return;
    c->st = st;
    va_list ap;
    va_start(ap, fmt);
    set_message(fmt, ap);
    va_end(ap);
}

void tm_fail_tally(tm_call *c, tally_status st, const char *what)
{
    if (st == TALLY_OK) return;
    tm_fail(c, st, "%s: rank %d: %s failed: %s: %s", c->name, c->rank, what, tally_status_name(st),
            tally_last_error(c->ctx));
}

/* What each rank tells the others at the start of a call. */
typedef struct tm_record {
    int64_t status;
    int64_t first_row, local_rows, cols, global_rows;
    uint64_t agree[TM_AGREE_MAX];
} tm_record;

#define TM_RECORD_WORDS (int)(sizeof(tm_record) / sizeof(int64_t))

tally_status tm_begin(tm_call *c, const char *name, tally_context *ctx, MPI_Comm comm, int64_t global_rows,
                      int64_t first_row, int64_t local_rows, int64_t cols, const uint64_t agree[TM_AGREE_MAX],
                      tally_status local_status)
{
    memset(c, 0, sizeof *c);
    c->name = name;
    c->ctx = ctx;
    c->comm = comm;
    c->st = TALLY_OK;
    if (local_status == TALLY_OK) tm_message[0] = '\0';
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->size);
    tally_status mine = local_status;
    if (mine == TALLY_OK && ctx == NULL) mine = tm_error(TALLY_INVALID_ARGUMENT, "%s: ctx is NULL", name);
    if (mine == TALLY_OK && (global_rows < 0 || first_row < 0 || local_rows < 0 || cols < 0))
        mine = tm_error(TALLY_INVALID_ARGUMENT,
                        "%s: rank %d: negative global_rows %lld, first_row %lld, rows %lld or cols %lld", name,
                        c->rank, (long long)global_rows, (long long)first_row, (long long)local_rows,
                        (long long)cols);
    tm_record me = {.status = mine, .first_row = first_row, .local_rows = local_rows, .cols = cols,
                    .global_rows = global_rows};
    memcpy(me.agree, agree, sizeof me.agree);
    tm_record *all = malloc((size_t)c->size * sizeof *all);
    c->first = malloc(((size_t)c->size + 1) * sizeof *c->first);
    c->lo = malloc(((size_t)c->size + 1) * sizeof *c->lo);
    if ((all == NULL || c->first == NULL || c->lo == NULL) && mine == TALLY_OK)
        mine = tm_error(TALLY_OUT_OF_MEMORY, "%s: rank %d: out of memory for the split of %d ranks", name, c->rank,
                        c->size);
    /* A first, allocation-free vote, so that a rank without memory for the
     * gather below can still make every rank return. */
    int64_t vote = mine, worst_vote = 0;
    MPI_Allreduce(&vote, &worst_vote, 1, MPI_INT64_T, MPI_MAX, comm);
    if (worst_vote != TALLY_OK) {
        if (mine == TALLY_OK)
            tm_error((tally_status)worst_vote, "%s: another rank failed its argument checks (%s)", name,
                     tally_status_name((tally_status)worst_vote));
        free(all);
        free(c->first);
        free(c->lo);
        c->first = c->lo = NULL;
        return (tally_status)worst_vote;
    }
    me.status = TALLY_OK;
    MPI_Allgather(&me, TM_RECORD_WORDS, MPI_INT64_T, all, TM_RECORD_WORDS, MPI_INT64_T, comm);
    tally_status verdict = TALLY_OK;
    int bad = -1;
    for (int q = 0; q < c->size; q++)
        if (all[q].status != TALLY_OK) {
            bad = q;
            verdict = (tally_status)all[q].status;
            break;
        }
    if (bad >= 0 && bad != c->rank)
        tm_error(verdict, "%s: rank %d failed its argument checks (%s)", name, bad,
                 tally_status_name(verdict));
    if (verdict == TALLY_OK) {
        uint64_t next = 0;
        for (int q = 0; q < c->size && verdict == TALLY_OK; q++) {
            const tm_record *r = &all[q];
            if (r->global_rows != all[0].global_rows || r->cols != all[0].cols)
                verdict = tm_error(TALLY_SHAPE_MISMATCH,
                                   "%s: rank %d has global_rows %lld and cols %lld but rank 0 has %lld and %lld",
                                   name, q, (long long)r->global_rows, (long long)r->cols,
                                   (long long)all[0].global_rows, (long long)all[0].cols);
            else if (memcmp(r->agree, all[0].agree, sizeof r->agree) != 0)
                verdict = tm_error(TALLY_INVALID_ARGUMENT,
                                   "%s: rank %d passed different scalar arguments (op, flags, rng, ...) from rank 0",
                                   name, q);
            else if ((uint64_t)r->first_row != next)
                verdict = tm_error(TALLY_INVALID_ARGUMENT,
                                   "%s: rank %d starts at row %lld but the ranks before it end at row %llu (ranks "
                                   "must hold consecutive rows in rank order)",
                                   name, q, (long long)r->first_row, (unsigned long long)next);
            else if ((uint64_t)r->local_rows > (uint64_t)all[0].global_rows - next)
                verdict = tm_error(TALLY_SHAPE_MISMATCH, "%s: rank %d's %lld rows from row %lld pass global_rows %lld",
                                   name, q, (long long)r->local_rows, (long long)r->first_row,
                                   (long long)all[0].global_rows);
            c->first[q] = next;
            next += (uint64_t)r->local_rows;
        }
        if (verdict == TALLY_OK && next != (uint64_t)all[0].global_rows)
            verdict = tm_error(TALLY_SHAPE_MISMATCH, "%s: the ranks hold %llu rows but global_rows is %lld", name,
                               (unsigned long long)next, (long long)all[0].global_rows);
        c->first[c->size] = next;
    }
    free(all);
    if (verdict != TALLY_OK) {
        free(c->first);
        free(c->lo);
        c->first = c->lo = NULL;
        return verdict;
    }
    c->global_rows = (uint64_t)global_rows;
    c->cols = (uint64_t)cols;
    c->row0 = c->first[c->rank];
    c->local_rows = (uint64_t)local_rows;
    return TALLY_OK;
}

tally_status tm_end(tm_call *c)
{
    int mine = (int)c->st, worst = 0;
    double t0 = MPI_Wtime();
    MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, c->comm);
    tm_stats.comm_seconds += MPI_Wtime() - t0;
    free(c->first);
    free(c->lo);
    c->first = c->lo = NULL;
    if (mine != TALLY_OK) return c->st;
    if (worst != TALLY_OK) {
        tm_error((tally_status)worst, "%s: another rank failed (%s); its tally_mpi_last_error says why", c->name,
                 tally_status_name((tally_status)worst));
        return (tally_status)worst;
    }
    return TALLY_OK;
}

void tm_isend(tm_call *c, const float *data, uint64_t count, int dest, int tag, MPI_Request *req)
{
    double t0 = MPI_Wtime();
    MPI_Isend(data, (int)count, MPI_FLOAT, dest, tag, c->comm, req);
    tm_stats.comm_seconds += MPI_Wtime() - t0;
    tm_stats.bytes_sent += count * sizeof(float);
    tm_stats.messages_sent++;
}

void tm_irecv(tm_call *c, float *data, uint64_t count, int src, int tag, MPI_Request *req)
{
    double t0 = MPI_Wtime();
    MPI_Irecv(data, (int)count, MPI_FLOAT, src, tag, c->comm, req);
    tm_stats.comm_seconds += MPI_Wtime() - t0;
}

void tm_waitall(tm_call *c, int count, MPI_Request *reqs)
{
    (void)c;
    if (count == 0) return;
    double t0 = MPI_Wtime();
    MPI_Waitall(count, reqs, MPI_STATUSES_IGNORE);
    tm_stats.comm_seconds += MPI_Wtime() - t0;
}

void tm_bcast_float(tm_call *c, float *value, int root)
{
    double t0 = MPI_Wtime();
    MPI_Bcast(value, 1, MPI_FLOAT, root, c->comm);
    tm_stats.comm_seconds += MPI_Wtime() - t0;
}

void tm_count_level(void) { tm_stats.tree_levels++; }

tally_buffer *tm_temp(tm_call *c, uint64_t count)
{
    if (c->st != TALLY_OK) return NULL;
    tally_buffer *b = NULL;
    if (count > SIZE_MAX / 4) {
        tm_fail(c, TALLY_SIZE_OVERFLOW, "%s: a temporary of %llu elements overflows", c->name,
                (unsigned long long)count);
        return NULL;
    }
    tally_status st = tally_buffer_create(c->ctx, (size_t)count * 4, &b);
    if (st != TALLY_OK) {
        tm_fail_tally(c, st, "tally_buffer_create (temporary)");
        return NULL;
    }
    return b;
}

tally_status tm_check_scalar(tally_context *ctx, const char *name, tally_view out)
{
    if (out.buffer == NULL) return tm_error(TALLY_INVALID_ARGUMENT, "%s: out has no buffer", name);
    if (ctx != NULL && tally_buffer_size(out.buffer) == 0)
        return tm_error(TALLY_OUT_OF_BOUNDS, "%s: out's buffer is empty", name);
    if (out.dtype != TALLY_F32) return tm_error(TALLY_UNSUPPORTED_DTYPE, "%s: out must be an f32 view", name);
    if (out.rows != 1 || out.cols != 1)
        return tm_error(TALLY_SHAPE_MISMATCH, "%s: out is %lld x %lld, must be 1 x 1", name, (long long)out.rows,
                        (long long)out.cols);
    if (out.offset < 0 || (uint64_t)out.offset >= tally_buffer_size(out.buffer) / 4)
        return tm_error(TALLY_OUT_OF_BOUNDS, "%s: out's offset %lld is outside its buffer of %zu bytes", name,
                        (long long)out.offset, tally_buffer_size(out.buffer));
    return TALLY_OK;
}

void tm_write_scalar(tm_call *c, tally_view out, float value)
{
    if (c->st != TALLY_OK) return;
    float v = tally_canonical(value);
    tally_status st = tally_buffer_upload(out.buffer, (size_t)out.offset * 4, &v, sizeof v);
    tm_fail_tally(c, st, "writing the result");
}
