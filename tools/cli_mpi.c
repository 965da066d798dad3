/*
 * tools/cli_mpi.c - the `tally` tool under mpirun, through libtally_mpi:
 *
 *   mpirun -np N tally run OP ... --mpi [--split R0,R1,...] [--backends LIST]
 *       Every rank reads only its rows of the input files, runs the sharded
 *       op, and rank 0 writes the outputs (files or stdout) byte-identical to
 *       the single-process `tally run OP ...`.
 *   mpirun -np N tally crosscheck --mpi [--quick]
 *       Every op at rank counts 1..N, each under an even split and an uneven
 *       one with empty ranks, bit-compared with the single-device op.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_common.h"
#include "cli_exec.h"
#include "cli_mpi.h"
#include "rand.h"
#include "tally_mpi.h"

static int rank_, size_;

static const char run_mpi_usage[] =
    "usage: mpirun -np N tally run OP [the options of tally run] --mpi\n"
    "                              [--split R0,R1,...] [--backends LIST]\n"
    "\n"
    "Splits the rows of the op's inputs across the ranks (evenly, or R0 rows to rank\n"
    "0, R1 to rank 1, ...: N counts summing to the rows); each rank reads only its\n"
    "rows of each file. The rows are --rows (reductions, kl_div, dirichlet_multinomial,\n"
    "categorical), --batch (gmm_*), or the --count draws of rng. Rank q uses\n"
    "LIST[q mod len] of --backends (a comma list of auto|host|opencl|cuda), else\n"
    "--backend. Rank 0 writes the outputs exactly as the single-process tally run.\n";

/* ---- Options: those of tally run, plus the MPI ones --------------------- */

/* The job options (cli_exec.h) come first: their ids are CLI_JOB_OPT_*. */
enum { O_BACKEND = CLI_JOB_OPT_END, O_DEVICE, O_IN, O_OUT, O_MPI, O_SPLIT, O_BACKENDS, O_QUICK };

static const harness_option run_options[] = {
    {"backend", 1, O_BACKEND}, {"device", 1, O_DEVICE}, {"in", 1, O_IN}, {"out", 1, O_OUT},
    CLI_JOB_OPTION_ROWS
    {"mpi", 0, O_MPI}, {"split", 1, O_SPLIT}, {"backends", 1, O_BACKENDS}, {"quick", 0, O_QUICK},
};

static int is_gradient(cli_op_kind kind)
{
    return kind == CLI_OP_KL_BACKWARD || kind == CLI_OP_DM_BACKWARD || kind == CLI_OP_GMM_LOG_PROB_BACKWARD ||
           kind == CLI_OP_GMM_SAMPLE_BACKWARD;
}

/* Every rank agrees on an exit status: the worst one. */
static int agree_rc(int rc)
{
    int worst = rc;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

static tally_backend backend_of_rank(const char *list, tally_backend fallback, int rank, int *bad)
{
    *bad = 0;
    if (list == NULL) return fallback;
    /* Every entry is checked on every rank, so a bad list fails everywhere. */
    for (const char *p = list;;) {
        char one[32];
        size_t len = strcspn(p, ",");
        snprintf(one, sizeof one, "%.*s", (int)(len < 31 ? len : 31), p);
        tally_backend ignored;
        if (len == 0 || len > 31 || tally_backend_from_name(one, &ignored) != TALLY_OK) *bad = 1;
        p += len;
        if (*p == '\0') break;
        p++;
    }
    int count = 1;
    for (const char *p = list; *p; p++) count += *p == ',';
    const char *p = list;
    for (int i = 0; i < rank % count; i++) p = strchr(p, ',') + 1;
    char name[32];
    size_t len = strcspn(p, ",");
    snprintf(name, sizeof name, "%.*s", (int)(len < 31 ? len : 31), p);
    tally_backend b = fallback;
    if (tally_backend_from_name(name, &b) != TALLY_OK) *bad = 1;
    return b;
}

/* Parses "--split R0,R1,...": exactly size counts summing to rows. */
static int parse_split(const char *s, uint64_t rows, uint64_t *first)
{
    uint64_t at = 0;
    const char *p = s;
    for (int q = 0; q < size_; q++) {
        char num[32];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof num) return -1;
        memcpy(num, p, len);
        num[len] = '\0';
        uint64_t v;
        if (cli_parse_u64(num, &v) != 0 || v > rows - at) return -1;
        first[q] = at;
        at += v;
        p += len;
        if (q + 1 < size_) {
            if (*p != ',') return -1;
            p++;
        }
    }
    first[size_] = at;
    return *p == '\0' && at == rows ? 0 : -1;
}

/* Reads rows [r0, r0 + lr) of a [rows, cols] file of 4-byte elements, after
 * checking that the file holds the whole matrix (the single-process size
 * rule). */
static int read_rows(const char *what, const char *path, uint64_t rows, uint64_t cols, uint64_t r0, uint64_t lr,
                     void **out)
{
    *out = malloc((size_t)(lr * cols) * 4 + 4);
    if (*out == NULL) return cli_io_error("out of memory for %s", what);
    FILE *f = fopen(path, "rb");
    if (f == NULL) return cli_io_error("cannot open %s file '%s': %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != rows * cols * 4) {
        fclose(f);
        fprintf(stderr, "tally: %s file '%s' must be a regular file of %llu bytes (%llu fp32 values)\n", what, path,
                (unsigned long long)(rows * cols * 4), (unsigned long long)(rows * cols));
        return CLI_EXIT_USAGE;
    }
    int bad = fseeko(f, (off_t)(r0 * cols * 4), SEEK_SET) != 0 ||
              fread(*out, 4, (size_t)(lr * cols), f) != (size_t)(lr * cols);
    fclose(f);
    if (bad) return cli_io_error("cannot read rows %llu.. of %s file '%s'", (unsigned long long)r0, what, path);
    /* Raw files are little-endian; so is every machine tally's MPI mode has
     * been built for (x86-64, aarch64), so no byte swap is needed here. */
    return CLI_EXIT_OK;
}

/* One tensor on this rank: its local rows and its device buffer. */
typedef struct local_tensor {
    int per_row;     /* split by rows (else every rank has the whole tensor) */
    uint64_t rows;   /* local rows */
    uint64_t cols;
    void *host;
    tally_buffer *buf;
} local_tensor;

static tally_view view_of(const local_tensor *t, tally_dtype dtype)
{
    return tally_view_typed(t->buf, dtype, 0, (int64_t)t->rows, (int64_t)t->cols);
}

static void print_value(const char *name, int scalar, tally_dtype dtype, const uint32_t *bits, uint64_t i)
{
    if (scalar) printf("%s ", name);
    else printf("%s[%llu] ", name, (unsigned long long)i);
    switch (dtype) {
    case TALLY_U32: printf("%u\n", (unsigned)bits[i]); break;
    case TALLY_I32: printf("%d\n", (int)(int32_t)bits[i]); break;
    default: printf("%.9g\n", (double)cli_bits_f32(bits[i])); break;
    }
}

/* Runs the job's op through libtally_mpi on the local tensors. */
static tally_status run_sharded(tally_context *ctx, MPI_Comm w, const cli_job *job, uint64_t G, uint64_t r0,
                                local_tensor *in, local_tensor *out, uint64_t *consumed)
{
    const int64_t g = (int64_t)G, f = (int64_t)r0;
    const tally_view none_i32 = tally_view_typed(NULL, TALLY_I32, 0, 0, 0);
    switch (job->kind) {
    case CLI_OP_REDUCE:
        return tally_mpi_reduce(ctx, w, g, f, job->reduce_op, job->axis, view_of(&in[0], TALLY_F32),
                                view_of(&out[0], TALLY_F32));
    case CLI_OP_KL:
        return tally_mpi_kl_div(ctx, w, g, f, view_of(&in[0], TALLY_F32), view_of(&in[1], TALLY_F32),
                                job->reduction, job->flags, view_of(&out[0], TALLY_F32));
    case CLI_OP_DM:
        return tally_mpi_dirichlet_multinomial(ctx, w, g, f, view_of(&in[0], TALLY_F32), view_of(&in[1], TALLY_F32),
                                               job->reduction, job->flags, view_of(&out[0], TALLY_F32));
    case CLI_OP_GMM_LOG_PROB:
        return tally_mpi_gmm_log_prob(ctx, w, g, f, view_of(&in[0], TALLY_F32), view_of(&in[1], TALLY_F32),
                                      view_of(&in[2], TALLY_F32), view_of(&in[3], TALLY_F32), job->components,
                                      view_of(&out[0], TALLY_F32));
    case CLI_OP_GMM_SAMPLE:
        return tally_mpi_gmm_sample(ctx, w, g, f, view_of(&in[0], TALLY_F32), view_of(&in[1], TALLY_F32),
                                    view_of(&in[2], TALLY_F32), job->components, job->rng,
                                    view_of(&out[0], TALLY_F32), view_of(&out[1], TALLY_F32),
                                    out[2].rows > 0 && out[2].buf != NULL ? view_of(&out[2], TALLY_I32) : none_i32,
                                    consumed);
    case CLI_OP_RNG:
        return tally_mpi_rng_fill(ctx, w, g, f, job->dist, job->rng,
                                  view_of(&out[0], job->dist == TALLY_DIST_RAW ? TALLY_U32 : TALLY_F32), consumed);
    case CLI_OP_CATEGORICAL:
        return tally_mpi_categorical(ctx, w, g, f, view_of(&in[0], TALLY_F32), job->flags, job->rng,
                                     view_of(&out[0], TALLY_I32), consumed);
    default:
        /* The gradients are not sharded (parse_and_run refuses them). */
        break;
    }
    return TALLY_INVALID_ARGUMENT;
}

/* Argument errors are found identically on every rank; only rank 0 reports
 * them, so the other ranks' stderr is parked on /dev/null while parsing. */
static int parked_stderr = -1;

static void quiet_stderr(void)
{
    if (rank_ == 0) return;
    fflush(stderr);
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    if (saved >= 0 && null >= 0) {
        dup2(null, 2);
        parked_stderr = saved;
    } else if (saved >= 0) {
        close(saved);
    }
    if (null >= 0) close(null);
}

static void restore_stderr(void)
{
    if (parked_stderr < 0) return;
    fflush(stderr);
    dup2(parked_stderr, 2);
    close(parked_stderr);
    parked_stderr = -1;
}

static int parse_and_run(int argc, char **argv);

static int run_mpi(int argc, char **argv)
{
    quiet_stderr();
    int rc = parse_and_run(argc, argv);
    restore_stderr(); /* after an early return from the argument checks */
    return rc;
}

static int parse_and_run(int argc, char **argv)
{
    const char *usage = run_mpi_usage;
    if (argc < 1) return cli_usage_error(usage, "run: name an op");
    cli_job job;
    /* The gradients are not sharded. */
    if (cli_job_start(&job, argv[0]) < 0 || is_gradient(job.kind))
        return cli_usage_error(usage, "run: unknown op '%s'", argv[0]);
    const char *op_name = argv[0];
    tally_backend backend = TALLY_BACKEND_AUTO;
    int device = TALLY_DEVICE_DEFAULT;
    const char *split = NULL, *backends = NULL;
    cli_file_arg ins[CLI_MAX_FILES], outs[CLI_MAX_FILES];
    int n_in = 0, n_out = 0;
    int64_t count = 0;
    harness_args args = HARNESS_ARGS(argc, argv, 1, run_options);
    for (int id; (id = harness_args_next(&args)) != HARNESS_ARGS_DONE;) {
        const char *v = args.value;
        if (id < 0 || id == O_QUICK) return cli_usage_error(usage, "run %s: %s", op_name, id < 0 ? args.err : "--quick");
        int bad = 0;
        switch (id) {
        case O_BACKEND: bad = tally_backend_from_name(v, &backend) != TALLY_OK; break;
        case O_DEVICE: bad = cli_parse_index(v, &device) != 0; break;
        case O_IN:
        case O_OUT: {
            cli_file_arg *list = id == O_IN ? ins : outs;
            int *n = id == O_IN ? &n_in : &n_out;
            bad = *n >= CLI_MAX_FILES || cli_file_arg_parse(v, &list[*n]) != 0;
            if (!bad) *n += 1;
            break;
        }
        case O_SPLIT: split = v; break;
        case O_BACKENDS: backends = v; break;
        case O_MPI: break;
        default: bad = cli_job_option(&job, id, v, &count) != 0; break;
        }
        if (bad) return cli_usage_error(usage, "run %s: bad value '%s'", op_name, v);
    }
    /* rng draws N values; split as N rows of one (element r gets offset + r either way). */
    if (job.kind == CLI_OP_RNG) {
        job.rows = count;
        job.cols = 1;
    }
    char err[160];
    if (cli_job_layout(&job, err, sizeof err) != 0) return cli_usage_error(usage, "run %s: %s", op_name, err);
    const char *paths[CLI_MAX_TENSORS], *opaths[CLI_MAX_TENSORS];
    if (cli_job_match_files(&job, ins, n_in, outs, n_out, paths, opaths, err, sizeof err) != 0)
        return cli_usage_error(usage, "run %s: %s", op_name, err);

    const uint64_t G = (uint64_t)(job.kind == CLI_OP_GMM_LOG_PROB || job.kind == CLI_OP_GMM_SAMPLE ? job.batch
                                                                                                  : job.rows);
    uint64_t *first = malloc(((size_t)size_ + 1) * sizeof *first);
    if (split != NULL) {
        if (parse_split(split, G, first) != 0)
            return cli_usage_error(usage, "run %s: --split '%s' is not %d row counts summing to %llu", op_name, split,
                                   size_, (unsigned long long)G);
    } else {
        for (int q = 0; q <= size_; q++) first[q] = G * (uint64_t)q / (uint64_t)size_;
    }
    const uint64_t r0 = first[rank_], lr = first[rank_ + 1] - r0;
    /* Past the arguments: every rank reports its own failures from here on. */
    restore_stderr();

    int rc = CLI_EXIT_OK;
    local_tensor in[CLI_MAX_TENSORS], out[CLI_MAX_TENSORS];
    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    for (int j = 0; j < job.n_in && rc == CLI_EXIT_OK; j++) {
        const cli_tensor *t = &job.in[j];
        int shared = strcmp(t->name, "logits") == 0 || (strcmp(t->name, "log_alpha") == 0 && !job.per_row_alpha);
        in[j].per_row = !shared;
        in[j].rows = shared ? (uint64_t)t->rows : lr;
        in[j].cols = (uint64_t)t->cols;
        if (!t->present) {
            in[j].rows = 0;
            continue;
        }
        char what[96];
        snprintf(what, sizeof what, "input %s [%lld x %lld]", t->name, (long long)t->rows, (long long)t->cols);
        rc = read_rows(what, paths[j], (uint64_t)t->rows, in[j].cols, shared ? 0 : r0, in[j].rows, &in[j].host);
    }
    rc = agree_rc(rc);
    int bad_backend = 0;
    backend = backend_of_rank(backends, backend, rank_, &bad_backend);
    if (bad_backend) return cli_usage_error(usage, "run %s: bad --backends '%s'", op_name, backends);
    tally_context *ctx = NULL;
    if (rc == CLI_EXIT_OK) {
        tally_status st = tally_context_create(backend, device, &ctx);
        if (st != TALLY_OK) rc = cli_library_error(NULL, st);
    }
    rc = agree_rc(rc);
    tally_status st = TALLY_OK;
    for (int j = 0; j < job.n_in && rc == CLI_EXIT_OK && st == TALLY_OK; j++) {
        uint64_t n = in[j].rows * in[j].cols;
        st = tally_buffer_create(ctx, (size_t)n * 4 + 4, &in[j].buf);
        if (st == TALLY_OK && n > 0) st = tally_buffer_upload(in[j].buf, 0, in[j].host, (size_t)n * 4);
    }
    for (int j = 0; j < job.n_out && rc == CLI_EXIT_OK && st == TALLY_OK; j++) {
        const cli_tensor *t = &job.out[j];
        out[j].per_row = !t->scalar;
        out[j].rows = t->scalar ? 1 : lr;
        out[j].cols = (uint64_t)t->cols;
        st = tally_buffer_create(ctx, (size_t)(out[j].rows * out[j].cols) * 4 + 4, &out[j].buf);
    }
    if (rc == CLI_EXIT_OK && st != TALLY_OK) rc = cli_library_error(ctx, st);
    rc = agree_rc(rc);
    uint64_t consumed = 0;
    if (rc == CLI_EXIT_OK) {
        st = run_sharded(ctx, MPI_COMM_WORLD, &job, G, r0, in, out, &consumed);
        if (st != TALLY_OK) {
            fprintf(stderr, "error: %s: %s\n", tally_status_name(st), tally_mpi_last_error());
            rc = CLI_EXIT_FAIL;
        }
    }
    /* Gather each output on rank 0 and write it as the single-process run does. */
    for (int j = 0; j < job.n_out && rc == CLI_EXIT_OK; j++) {
        const cli_tensor *t = &job.out[j];
        uint64_t n = out[j].rows * out[j].cols, total = (uint64_t)t->rows * (uint64_t)t->cols;
        uint32_t *mine = malloc((size_t)n * 4 + 4), *all = NULL;
        st = n > 0 ? tally_buffer_download(out[j].buf, 0, mine, (size_t)n * 4) : TALLY_OK;
        int lrc = agree_rc(st != TALLY_OK ? cli_library_error(ctx, st) : CLI_EXIT_OK);
        if (lrc != CLI_EXIT_OK) {
            rc = lrc;
            free(mine);
            break;
        }
        if (out[j].per_row) {
            int *counts = malloc((size_t)size_ * sizeof *counts), *displs = malloc((size_t)size_ * sizeof *displs);
            for (int q = 0; q < size_; q++) {
                counts[q] = (int)((first[q + 1] - first[q]) * out[j].cols);
                displs[q] = (int)(first[q] * out[j].cols);
            }
            if (rank_ == 0) all = malloc((size_t)total * 4 + 4);
            MPI_Gatherv(mine, (int)n, MPI_UINT32_T, all, counts, displs, MPI_UINT32_T, 0, MPI_COMM_WORLD);
            free(counts);
            free(displs);
        } else {
            all = mine;
            mine = NULL;
        }
        if (rank_ == 0) {
            if (opaths[j] != NULL) rc = cli_write_elements(opaths[j], all, total);
            else
                for (uint64_t i = 0; i < total; i++) print_value(t->name, t->scalar, t->dtype, all, i);
        }
        free(mine);
        free(all);
    }
    if (rank_ == 0 && rc == CLI_EXIT_OK &&
        (job.kind == CLI_OP_GMM_SAMPLE || job.kind == CLI_OP_RNG || job.kind == CLI_OP_CATEGORICAL))
        printf("consumed %llu\n", (unsigned long long)consumed);
    if (rank_ == 0 && rc == CLI_EXIT_OK && (fflush(stdout) != 0 || ferror(stdout)))
        rc = cli_io_error("cannot write to standard output");
    rc = agree_rc(rc);
    for (int j = 0; j < CLI_MAX_TENSORS; j++) {
        tally_buffer_release(in[j].buf);
        tally_buffer_release(out[j].buf);
        free(in[j].host);
    }
    tally_context_release(ctx);
    free(first);
    return rc;
}

/* ---- crosscheck --mpi ------------------------------------------------------ */

/* A uniform float in [lo, hi) from the harness generator (harness/rand.h). */
static float uniform(harness_rand *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)harness_rand_unit(r);
}

/* One op of the crosscheck: a cli_job with generated inputs. */
typedef struct cc_case {
    const char *label;
    cli_op_kind kind;
    tally_reduce_op reduce_op;
    tally_axis axis;
    tally_reduction reduction;
    unsigned flags;
    tally_distribution dist;
    int64_t rows, cols, components;
} cc_case;

static const cc_case cc_cases[] = {
    {"sum all", CLI_OP_REDUCE, TALLY_SUM, TALLY_AXIS_ALL, 0, 0, 0, 37, 3001, 0},
    {"mean all", CLI_OP_REDUCE, TALLY_MEAN, TALLY_AXIS_ALL, 0, 0, 0, 37, 3001, 0},
    {"min all", CLI_OP_REDUCE, TALLY_MIN, TALLY_AXIS_ALL, 0, 0, 0, 37, 3001, 0},
    {"max all", CLI_OP_REDUCE, TALLY_MAX, TALLY_AXIS_ALL, 0, 0, 0, 37, 3001, 0},
    {"logsumexp all", CLI_OP_REDUCE, TALLY_LOGSUMEXP, TALLY_AXIS_ALL, 0, 0, 0, 37, 3001, 0},
    {"sumsq all", CLI_OP_REDUCE, TALLY_SUMSQ, TALLY_AXIS_ALL, 0, 0, 0, 37, 3001, 0},
    {"logsumexp row", CLI_OP_REDUCE, TALLY_LOGSUMEXP, TALLY_AXIS_ROW, 0, 0, 0, 37, 3001, 0},
    {"kl_div none", CLI_OP_KL, 0, 0, TALLY_REDUCTION_NONE, 0, 0, 19, 1000, 0},
    {"kl_div sum", CLI_OP_KL, 0, 0, TALLY_REDUCTION_SUM, 0, 0, 37, 3001, 0},
    {"kl_div mean input_is_prob", CLI_OP_KL, 0, 0, TALLY_REDUCTION_MEAN, TALLY_KL_INPUT_IS_PROB, 0, 37, 3001, 0},
    {"kl_div batchmean log_target", CLI_OP_KL, 0, 0, TALLY_REDUCTION_BATCHMEAN, TALLY_KL_LOG_TARGET, 0, 37, 3001, 0},
    {"kl_div none logits", CLI_OP_KL, 0, 0, TALLY_REDUCTION_NONE, TALLY_KL_INPUT_LOGITS | TALLY_KL_TARGET_LOGITS, 0,
     19, 1000, 0},
    {"kl_div batchmean logits", CLI_OP_KL, 0, 0, TALLY_REDUCTION_BATCHMEAN,
     TALLY_KL_INPUT_LOGITS | TALLY_KL_TARGET_LOGITS, 0, 37, 3001, 0},
    {"kl_div sum input_logits", CLI_OP_KL, 0, 0, TALLY_REDUCTION_SUM, TALLY_KL_INPUT_LOGITS, 0, 37, 3001, 0},
    {"dirichlet_multinomial none", CLI_OP_DM, 0, 0, TALLY_REDUCTION_NONE, TALLY_DM_WITH_COEFFICIENT, 0, 40, 256, 0},
    {"dirichlet_multinomial sum", CLI_OP_DM, 0, 0, TALLY_REDUCTION_SUM, 0, 0, 40, 256, 0},
    {"dirichlet_multinomial mean", CLI_OP_DM, 0, 0, TALLY_REDUCTION_MEAN, 0, 0, 40, 256, 0},
    {"gmm_log_prob", CLI_OP_GMM_LOG_PROB, 0, 0, 0, 0, 0, 33, 7, 3},
    {"gmm_sample", CLI_OP_GMM_SAMPLE, 0, 0, 0, 0, 0, 33, 7, 3},
    {"rng uniform", CLI_OP_RNG, 0, 0, 0, 0, TALLY_DIST_UNIFORM, 1001, 1, 0},
    {"rng normal", CLI_OP_RNG, 0, 0, 0, 0, TALLY_DIST_NORMAL, 1001, 1, 0},
    {"categorical logits", CLI_OP_CATEGORICAL, 0, 0, 0, TALLY_CATEGORICAL_LOGITS, 0, 50, 9, 0},
};
#define N_CC (sizeof cc_cases / sizeof cc_cases[0])

static const char crosscheck_mpi_usage[] =
    "usage: mpirun -np N tally crosscheck --mpi [--backends LIST] [--quick]\n"
    "\n"
    "Runs every op at rank counts 1..N under an even split and an uneven one with\n"
    "empty ranks (rank q uses LIST[q mod len], default auto) and compares each\n"
    "rank's result bit for bit with the single-device op on the host. Prints one\n"
    "line per op and rank count on rank 0; exit 1 on any mismatch.\n";

/* Generates the inputs of a case as a cli_job on every rank (same seed). */
static void cc_job(const cc_case *cc, cli_job *job)
{
    memset(job, 0, sizeof *job);
    job->kind = cc->kind;
    job->reduce_op = cc->reduce_op;
    job->axis = cc->axis ? cc->axis : TALLY_AXIS_ALL;
    job->reduction = cc->reduction;
    job->flags = cc->flags;
    job->dist = cc->dist;
    job->rows = cc->rows;
    job->cols = cc->cols;
    job->batch = cc->rows;
    job->dim = cc->cols;
    job->components = cc->components;
    job->rng = (tally_rng){.seed = 2024, .subsequence = 1, .offset = 4};
    char err[160];
    cli_job_layout(job, err, sizeof err);
    harness_rand r = harness_rand_make(0x853c49e6748fea9bull); /* the same inputs on every rank */
    for (int j = 0; j < job->n_in; j++) {
        uint64_t n = cli_tensor_count(&job->in[j]);
        float *d = malloc((size_t)n * 4 + 4);
        int prob = cc->kind == CLI_OP_KL && (j == 1 || (cc->flags & TALLY_KL_INPUT_IS_PROB));
        for (uint64_t i = 0; i < n; i++) {
            float v = prob ? uniform(&r, 0.0f, 1.0f) : uniform(&r, -4.0f, 4.0f);
            if (cc->kind == CLI_OP_DM && j == 0) v = (float)(int)uniform(&r, 0.0f, 9.0f);
            d[i] = v;
        }
        job->in[j].data = d;
    }
}

static int crosscheck_mpi(int argc, char **argv)
{
    const char *backends = NULL;
    int quick = 0;
    harness_args args = HARNESS_ARGS(argc, argv, 0, run_options);
    for (int id; (id = harness_args_next(&args)) != HARNESS_ARGS_DONE;) {
        const char *v = args.value;
        if (id == O_BACKENDS) backends = v;
        else if (id == O_QUICK) quick = 1;
        else if (id != O_MPI) return cli_usage_error(crosscheck_mpi_usage, "crosscheck --mpi: %s", id < 0 ? args.err : "unsupported option");
    }
    int bad = 0;
    tally_backend mine = backend_of_rank(backends, TALLY_BACKEND_AUTO, rank_, &bad);
    if (bad) return cli_usage_error(crosscheck_mpi_usage, "crosscheck --mpi: bad --backends '%s'", backends);
    tally_context *ctx = NULL, *host = NULL;
    tally_status st = tally_context_create(mine, TALLY_DEVICE_DEFAULT, &ctx);
    if (st == TALLY_OK) st = tally_context_create(TALLY_BACKEND_HOST, TALLY_DEVICE_DEFAULT, &host);
    int rc = agree_rc(st != TALLY_OK ? cli_library_error(NULL, st) : CLI_EXIT_OK);
    if (rc != CLI_EXIT_OK) {
        tally_context_release(ctx);
        tally_context_release(host);
        return rc;
    }
    char name[160];
    snprintf(name, sizeof name, "%s (%s)", tally_backend_name(tally_context_backend(ctx)),
             tally_context_device_name(ctx));
    if (rank_ == 0) printf("crosscheck --mpi: %d ranks; rank 0 on %s\n", size_, name);
    long mismatches = 0;
    for (size_t c = 0; c < N_CC; c++) {
        cli_job ref;
        cc_case cc = cc_cases[c];
        if (quick && cc.rows > 20 && cc.cols > 1000) cc.cols = 300;
        cc_job(&cc, &ref);
        st = cli_exec_run(host, &ref);
        if (st != TALLY_OK) {
            fprintf(stderr, "rank %d: single-device %s failed: %s\n", rank_, cc.label, tally_last_error(host));
            mismatches++;
        }
        for (int k = 1; k <= size_; k++) {
            MPI_Comm sub;
            MPI_Comm_split(MPI_COMM_WORLD, rank_ < k ? 0 : MPI_UNDEFINED, rank_, &sub);
            int wrong = 0;
            for (int uneven = 0; uneven < 2 && rank_ < k; uneven++) {
                const uint64_t G = (uint64_t)ref.rows;
                /* Even, or: the first rank empty, the rest split at 1/3 and 1/3 + 1 row steps. */
                uint64_t r0 = G * (uint64_t)rank_ / (uint64_t)k, r1 = G * (uint64_t)(rank_ + 1) / (uint64_t)k;
                if (uneven) {
                    r0 = rank_ == 0 ? 0 : G / 3 + (uint64_t)(rank_ - 1) * (G / 3 / (uint64_t)k + 1);
                    r1 = rank_ + 1 == k ? G : G / 3 + (uint64_t)rank_ * (G / 3 / (uint64_t)k + 1);
                    if (r0 > G) r0 = G;
                    if (r1 > G) r1 = G;
                    if (k == 1) r0 = 0;
                }
                const uint64_t lr = r1 - r0;
                local_tensor in[CLI_MAX_TENSORS], out[CLI_MAX_TENSORS];
                memset(in, 0, sizeof in);
                memset(out, 0, sizeof out);
                cli_job job = ref;
                for (int j = 0; j < job.n_in; j++) {
                    const cli_tensor *t = &job.in[j];
                    int shared = strcmp(t->name, "logits") == 0 || strcmp(t->name, "log_alpha") == 0;
                    in[j].rows = t->present ? (shared ? (uint64_t)t->rows : lr) : 0;
                    in[j].cols = (uint64_t)t->cols;
                    tally_buffer_create(ctx, (size_t)(in[j].rows * in[j].cols) * 4 + 4, &in[j].buf);
                    if (in[j].rows * in[j].cols > 0)
                        tally_buffer_upload(in[j].buf, 0, (const float *)t->data + (shared ? 0 : r0) * in[j].cols,
                                            (size_t)(in[j].rows * in[j].cols) * 4);
                }
                for (int j = 0; j < job.n_out; j++) {
                    out[j].rows = job.out[j].scalar ? 1 : lr;
                    out[j].cols = (uint64_t)job.out[j].cols;
                    tally_buffer_create(ctx, (size_t)(out[j].rows * out[j].cols) * 4 + 4, &out[j].buf);
                }
                uint64_t consumed = 0;
                tally_status s2 = run_sharded(ctx, sub, &job, G, r0, in, out, &consumed);
                if (s2 != TALLY_OK) {
                    fprintf(stderr, "rank %d: %s at %d ranks: %s: %s\n", rank_, cc.label, k, tally_status_name(s2),
                            tally_mpi_last_error());
                    wrong = 1;
                }
                for (int j = 0; j < job.n_out && s2 == TALLY_OK; j++) {
                    uint64_t n = out[j].rows * out[j].cols, at = job.out[j].scalar ? 0 : r0 * out[j].cols;
                    uint32_t *got = malloc((size_t)n * 4 + 4);
                    if (n > 0) tally_buffer_download(out[j].buf, 0, got, (size_t)n * 4);
                    if (n > 0 && memcmp(got, (const uint32_t *)ref.out[j].data + at, (size_t)n * 4) != 0) wrong = 1;
                    free(got);
                }
                int random = job.kind == CLI_OP_GMM_SAMPLE || job.kind == CLI_OP_RNG || job.kind == CLI_OP_CATEGORICAL;
                if (s2 == TALLY_OK && random && consumed != ref.consumed) wrong = 1;
                for (int j = 0; j < CLI_MAX_TENSORS; j++) {
                    tally_buffer_release(in[j].buf);
                    tally_buffer_release(out[j].buf);
                }
            }
            int any = 0;
            MPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (rank_ == 0) printf("  %-30s %d ranks  %s\n", cc.label, k, any ? "MISMATCH" : "bit-identical");
            mismatches += any;
            if (sub != MPI_COMM_NULL) MPI_Comm_free(&sub);
        }
        for (int j = 0; j < ref.n_in; j++) free(ref.in[j].data);
        cli_job_free_outputs(&ref);
    }
    if (rank_ == 0) printf("crosscheck --mpi: %s\n", mismatches ? "MISMATCHES" : "every op bit-identical at every rank count");
    tally_context_release(ctx);
    tally_context_release(host);
    return mismatches ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

int cli_mpi(const char *command, int argc, char **argv)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    int rc;
    if (argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        if (rank_ == 0) fputs(strcmp(command, "run") == 0 ? run_mpi_usage : crosscheck_mpi_usage, stdout);
        rc = CLI_EXIT_OK;
    } else if (strcmp(command, "run") == 0) {
        rc = run_mpi(argc, argv);
    } else {
        rc = crosscheck_mpi(argc, argv);
    }
    /* A usage error found on one rank only (a bad --split is found on all) still ends every rank. */
    rc = agree_rc(rc);
    MPI_Finalize();
    return rc;
}
