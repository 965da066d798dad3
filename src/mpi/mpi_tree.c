/*
 * src/mpi/mpi_tree.c - the reduction tree of docs/reduction-tree.md run over
 * a vector whose values are split across ranks (docs/distributed.md).
 *
 * Why the bits are the single-device bits: when a level has more than one
 * tile, every tile is TALLY_TREE_TILE (16384) values reduced by 256 lanes of
 * 16 quads, and a tile reduced as a vector of its own values alone has
 * exactly that shape (the last, shorter tile too: a lone vector of its length
 * visits the same quads in the same lanes, and the lanes a lone vector lacks
 * are inactive in the big one). So the partial of tile t is tally_reduce's
 * row result over that tile's values, on any backend. Each tile is reduced
 * whole by the rank that holds its first value (its owner); the values of a
 * tile held by later ranks travel to the owner. The partials of a level are
 * then a new vector, split across the ranks by the same rule, and the levels
 * repeat until one tile remains, whose owner broadcasts the result.
 */
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"
#include "tally/terms.h"

#define TILE ((uint64_t)TALLY_TREE_TILE)

/* Where a rank out of host memory receives the values it must still take
 * (a piece is at most one tile). */
static _Thread_local float tm_sink[TALLY_TREE_TILE];

static uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

/* The rank holding value e: the last q with lo[q] <= e (lo[q+1] > e then holds). */
static int owner_of(const uint64_t *lo, int size, uint64_t e)
{
    int a = 0, b = size - 1;
    while (a < b) {
        int m = a + (b - a + 1) / 2;
        if (lo[m] <= e) a = m;
        else b = m - 1;
    }
    return a;
}

/* Reduces `rows` consecutive vectors of `cols` values stored contiguously in
 * buf from element off, one partial each, into host memory. */
static void reduce_rows(tm_call *c, tally_reduce_op op, tally_buffer *buf, uint64_t off, uint64_t rows,
                        uint64_t cols, float *dst)
{
    tally_buffer *out = tm_temp(c, rows);
    if (out == NULL) return;
    tally_status st = tally_reduce(c->ctx, op, TALLY_AXIS_ROW, tally_view_f32(buf, (int64_t)off, (int64_t)rows,
                                                                              (int64_t)cols),
                                   tally_view_f32(out, 0, (int64_t)rows, 1));
    tm_fail_tally(c, st, "tally_reduce (tile partials)");
    if (c->st == TALLY_OK) {
        st = tally_buffer_download(out, 0, dst, (size_t)rows * 4);
        tm_fail_tally(c, st, "tally_buffer_download (tile partials)");
    }
    tally_buffer_release(out);
}

static void download(tm_call *c, tally_buffer *buf, uint64_t off, uint64_t count, float *dst)
{
    if (c->st != TALLY_OK || count == 0) return;
    tally_status st = tally_buffer_download(buf, (size_t)off * 4, dst, (size_t)count * 4);
    tm_fail_tally(c, st, "tally_buffer_download (boundary values)");
}

void tm_tree(tm_call *c, tally_reduce_op op, uint64_t n, uint64_t *lo, tally_buffer *buf, uint64_t off,
             float *result)
{
    const int me = c->rank, size = c->size;
    tally_buffer *cur = buf, *owned = NULL; /* owned: this level's buffer when we made it */
    uint64_t cur_off = off;
    *result = 0.0f;
    for (int level = 0;; level++) {
        tm_count_level();
        const uint64_t a = lo[me], b = lo[me + 1];
        const uint64_t tiles = n <= TILE ? 1 : ceil_div(n, TILE);
        /* This rank owns the tiles whose first value it holds: [t0, t1). */
        const uint64_t t0 = ceil_div(a, TILE), t1 = ceil_div(b, TILE);
        uint64_t tw = b / TILE; /* tiles below tw lie wholly in [a, b) */
        if (tw > t1) tw = t1;
        if (tw < t0) tw = t0;
        const uint64_t last = t1 > t0 ? t1 - 1 : 0;
        const uint64_t last_begin = last * TILE, last_end = last_begin + TILE < n ? last_begin + TILE : n;
        const int gather_last = t1 > tw && last_end > b; /* the last owned tile continues on later ranks */

        float *partials = calloc((size_t)(t1 - t0) + 1, sizeof *partials);
        float *tile = gather_last ? calloc((size_t)(last_end - last_begin), sizeof *tile) : NULL;
        const int sends = a < b && a % TILE != 0;
        const uint64_t send_end = t0 * TILE < b ? t0 * TILE : b;
        float *piece = sends ? calloc((size_t)(send_end - a), sizeof *piece) : NULL;
        int nreq = 0;
        MPI_Request *reqs = malloc(((size_t)size + 1) * sizeof *reqs);
        if (partials == NULL || (gather_last && tile == NULL) || (sends && piece == NULL) || reqs == NULL) {
            /* Out of host memory: this rank fails, but still takes part in
             * the level's messages through a fixed sink, blocking. Sends go
             * to lower ranks and receives come from higher ones, and a rank
             * that can allocate posts its receives before anything else, so
             * the blocking calls cannot wait on each other in a cycle. */
            tm_fail(c, TALLY_OUT_OF_MEMORY, "%s: rank %d: out of host memory in tree level %d", c->name, me, level);
            if (sends) {
                memset(tm_sink, 0, sizeof tm_sink);
                MPI_Send(tm_sink, (int)(send_end - a), MPI_FLOAT, owner_of(lo, size, (a / TILE) * TILE), level, c->comm);
            }
            if (gather_last)
                for (int q = me + 1; q < size && lo[q] < last_end; q++)
                    if (lo[q + 1] > lo[q]) {
                        uint64_t end = lo[q + 1] < last_end ? lo[q + 1] : last_end;
                        MPI_Recv(tm_sink, (int)(end - lo[q]), MPI_FLOAT, q, level, c->comm, MPI_STATUS_IGNORE);
                    }
            free(partials);
            free(tile);
            free(piece);
            free(reqs);
            if (tiles == 1) {
                float v = 0.0f;
                tm_bcast_float(c, &v, owner_of(lo, size, 0));
                break;
            }
            tally_buffer_release(owned);
            owned = cur = NULL;
            cur_off = 0;
            for (int q = 0; q <= size; q++) lo[q] = ceil_div(lo[q], TILE);
            n = tiles;
            if (op == TALLY_SUMSQ) op = TALLY_SUM;
            continue;
        }
        /* Receives first, so the senders' messages land directly. */
        if (gather_last)
            for (int q = me + 1; q < size && lo[q] < last_end; q++)
                if (lo[q + 1] > lo[q]) {
                    uint64_t end = lo[q + 1] < last_end ? lo[q + 1] : last_end;
                    tm_irecv(c, tile + (lo[q] - last_begin), end - lo[q], q, level, &reqs[nreq++]);
                }
        /* Our values before our first tile start belong to an earlier rank's tile. */
        if (sends) {
            download(c, cur, cur_off, send_end - a, piece);
            tm_isend(c, piece, send_end - a, owner_of(lo, size, (a / TILE) * TILE), level, &reqs[nreq++]);
        }
        /* The whole tiles, while the boundary values travel. */
        if (tw > t0) reduce_rows(c, op, cur, cur_off + (t0 * TILE - a), tw - t0, TILE, partials);
        if (t1 > tw && !gather_last) {
            /* The global last tile, shorter than TILE, wholly ours. */
            reduce_rows(c, op, cur, cur_off + (last_begin - a), 1, last_end - last_begin, partials + (tw - t0));
        }
        if (gather_last) download(c, cur, cur_off + (last_begin - a), b - last_begin, tile);
        tm_waitall(c, nreq, reqs);
        if (gather_last) {
            tally_buffer *tb = tm_temp(c, last_end - last_begin);
            if (tb != NULL) {
                tally_status st = tally_buffer_upload(tb, 0, tile, (size_t)(last_end - last_begin) * 4);
                tm_fail_tally(c, st, "tally_buffer_upload (boundary tile)");
                reduce_rows(c, op, tb, 0, 1, last_end - last_begin, partials + (tw - t0));
                tally_buffer_release(tb);
            }
        }
        free(tile);
        free(piece);
        free(reqs);
        if (tiles == 1) {
            float v = partials[0];
            tm_bcast_float(c, &v, owner_of(lo, size, 0));
            *result = v;
            free(partials);
            break;
        }
        /* The partials are the next level's vector, split by the same rule. */
        tally_buffer *next = t1 > t0 ? tm_temp(c, t1 - t0) : NULL;
        if (next != NULL) {
            tally_status st = tally_buffer_upload(next, 0, partials, (size_t)(t1 - t0) * 4);
            tm_fail_tally(c, st, "tally_buffer_upload (partials)");
        }
        free(partials);
        tally_buffer_release(owned);
        owned = next;
        cur = next;
        cur_off = 0;
        for (int q = 0; q <= size; q++) lo[q] = ceil_div(lo[q], TILE);
        n = tiles;
        if (op == TALLY_SUMSQ) op = TALLY_SUM;
    }
    tally_buffer_release(owned);
}
