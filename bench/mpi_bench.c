/*
 * bench/mpi_bench.c - scaling of libtally_mpi's KL divergence and sum under
 * mpirun: each rank fills its rows with draws (tally_mpi_rng_fill, so no
 * input file is read), runs the sharded op several times, and rank 0 prints
 * one JSON line per op with the median wall time across ranks (the slowest
 * rank of each repetition), this rank's communication time and bytes, the
 * single-device result's bits (when --verify and the matrix fits one rank)
 * and the sharded result's bits.
 *
 *   mpirun -np N mpi_bench --rows R --cols C [--weak] [--reps K] [--verify]
 *
 * --weak: R rows per rank (weak scaling); else R rows in all (strong).
 * Every rank uses TALLY_BACKEND (host, cuda, ...); host ranks run
 * TALLY_HOST_THREADS threads each (set it to 1 for one rank per core).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally_mpi.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

#define CHECK(expr)                                                                                      \
    do {                                                                                                 \
        tally_status s_ = (expr);                                                                        \
        if (s_ != TALLY_OK) {                                                                            \
            fprintf(stderr, "mpi_bench: %s: %s: %s %s\n", #expr, tally_status_name(s_),                  \
                    tally_mpi_last_error(), tally_last_error(NULL));                                     \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                \
        }                                                                                                \
    } while (0)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int64_t rows = 1024, cols = 16384;
    int weak = 0, reps = 5, verify = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rows") == 0 && i + 1 < argc) rows = atoll(argv[++i]);
        else if (strcmp(argv[i], "--cols") == 0 && i + 1 < argc) cols = atoll(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--weak") == 0) weak = 1;
        else if (strcmp(argv[i], "--verify") == 0) verify = 1;
        else {
            if (rank == 0) fprintf(stderr, "usage: mpi_bench --rows R --cols C [--weak] [--reps K] [--verify]\n");
            MPI_Finalize();
            return 2;
        }
    }
    const int64_t G = weak ? rows * size : rows;
    const int64_t r0 = G * rank / size, lr = G * (rank + 1) / size - r0;
    tally_context *ctx;
    CHECK(tally_context_create(TALLY_BACKEND_AUTO, TALLY_DEVICE_DEFAULT, &ctx));
    tally_buffer *p, *t, *out;
    const size_t bytes = (size_t)(lr * cols) * 4 + 4;
    CHECK(tally_buffer_create(ctx, bytes, &p));
    CHECK(tally_buffer_create(ctx, bytes, &t));
    CHECK(tally_buffer_create(ctx, 4, &out));
    tally_rng rp = {.seed = 1, .subsequence = 0, .offset = 0}, rt = {.seed = 2, .subsequence = 0, .offset = 0};
    CHECK(tally_mpi_rng_fill(ctx, MPI_COMM_WORLD, G, r0, TALLY_DIST_UNIFORM, rp, tally_view_f32(p, 0, lr, cols), NULL));
    CHECK(tally_mpi_rng_fill(ctx, MPI_COMM_WORLD, G, r0, TALLY_DIST_UNIFORM, rt, tally_view_f32(t, 0, lr, cols), NULL));
    CHECK(tally_sync(ctx));
    static const char *const names[] = {"kl_batchmean_input_is_prob", "sum"};
    for (int which = 0; which < 2; which++) {
        double *wall = malloc((size_t)reps * sizeof *wall), comm = 0;
        float v = 0;
        tally_mpi_stats_reset();
        for (int k = -1; k < reps; k++) { /* k = -1: warm-up */
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            if (which == 0)
                CHECK(tally_mpi_kl_div(ctx, MPI_COMM_WORLD, G, r0, tally_view_f32(p, 0, lr, cols),
                                       tally_view_f32(t, 0, lr, cols), TALLY_REDUCTION_BATCHMEAN,
                                       TALLY_KL_INPUT_IS_PROB, tally_view_f32(out, 0, 1, 1)));
            else
                CHECK(tally_mpi_reduce(ctx, MPI_COMM_WORLD, G, r0, TALLY_SUM, TALLY_AXIS_ALL,
                                       tally_view_f32(p, 0, lr, cols), tally_view_f32(out, 0, 1, 1)));
            double mine = MPI_Wtime() - t0, slowest = 0;
            MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (k >= 0) wall[k] = slowest;
            if (k == -1) tally_mpi_stats_reset();
        }
        CHECK(tally_read_scalar(ctx, tally_view_f32(out, 0, 1, 1), &v));
        tally_mpi_stats st = tally_mpi_stats_get();
        comm = st.comm_seconds / reps;
        double comm_max = 0, bytes_max = 0, mine_bytes = (double)st.bytes_sent / reps;
        MPI_Reduce(&comm, &comm_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&mine_bytes, &bytes_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        /* The single-device op over the whole matrix, on rank 0 alone. */
        float single = 0;
        int have_single = 0;
        if (verify && rank == 0) {
            tally_buffer *gp, *gt, *go;
            size_t gb = (size_t)(G * cols) * 4;
            if (tally_buffer_create(ctx, gb, &gp) == TALLY_OK && tally_buffer_create(ctx, gb, &gt) == TALLY_OK) {
                CHECK(tally_buffer_create(ctx, 4, &go));
                CHECK(tally_rng_fill(ctx, TALLY_DIST_UNIFORM, rp, tally_view_f32(gp, 0, G, cols), NULL));
                CHECK(tally_rng_fill(ctx, TALLY_DIST_UNIFORM, rt, tally_view_f32(gt, 0, G, cols), NULL));
                if (which == 0)
                    CHECK(tally_kl_div(ctx, tally_view_f32(gp, 0, G, cols), tally_view_f32(gt, 0, G, cols),
                                       TALLY_REDUCTION_BATCHMEAN, TALLY_KL_INPUT_IS_PROB, tally_view_f32(go, 0, 1, 1)));
                else
                    CHECK(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32(gp, 0, G, cols),
                                       tally_view_f32(go, 0, 1, 1)));
                CHECK(tally_read_scalar(ctx, tally_view_f32(go, 0, 1, 1), &single));
                have_single = 1;
                tally_buffer_release(go);
                tally_buffer_release(gt);
                tally_buffer_release(gp);
            }
        }
        if (rank == 0) {
            qsort(wall, (size_t)reps, sizeof *wall, cmp_double);
            printf("{\"op\": \"%s\", \"backend\": \"%s\", \"ranks\": %d, \"scaling\": \"%s\", \"rows\": %lld, "
                   "\"cols\": %lld, \"elements\": %lld, \"median_s\": %.6e, \"min_s\": %.6e, "
                   "\"comm_s_max_rank\": %.6e, \"bytes_sent_max_rank\": %.0f, \"levels\": %llu, "
                   "\"result_bits\": \"0x%08x\"",
                   names[which], tally_backend_name(tally_context_backend(ctx)), size, weak ? "weak" : "strong",
                   (long long)G, (long long)cols, (long long)(G * cols), wall[reps / 2], wall[0], comm_max, bytes_max,
                   (unsigned long long)(st.tree_levels / (uint64_t)reps), bits(v));
            if (have_single)
                printf(", \"single_device_bits\": \"0x%08x\", \"identical\": %s", bits(single),
                       bits(single) == bits(v) ? "true" : "false");
            printf("}\n");
            fflush(stdout);
        }
        free(wall);
    }
    tally_buffer_release(p);
    tally_buffer_release(t);
    tally_buffer_release(out);
    tally_context_release(ctx);
    MPI_Finalize();
    return 0;
}
