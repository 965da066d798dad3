/*
 * tools/cli_run.c - `tally run OP ...`: one op on raw little-endian fp32
 * files, through the public API.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "cli_exec.h"
#include "op_names.h"
#include "tally/half.h"

const char cli_run_usage[] =
    "usage: tally run OP [--backend auto|host|opencl|cuda] [--device N]\n"
    "                    [--in NAME=PATH]... [--out NAME=PATH]... [--dtype f32|bf16|f16]\n"
    "                    [--out-dtype f32|bf16|f16] [OPTIONS]\n"
    "\n"
    "Runs one op on raw files: little-endian, row-major, no header. Inputs are fp32,\n"
    "or 2-byte bf16 / f16 with --dtype (every input file of the op; the op reads\n"
    "them as half views and computes in fp32). Each file must hold exactly the\n"
    "elements its shape needs (else exit 2). --out-dtype bf16|f16 makes the one\n"
    "elementwise output of kl_div (reduction none), rng (uniform, normal) and\n"
    "gmm_sample (z) a half view: each value is the fp32 result rounded to nearest\n"
    "even, written as 2-byte elements (printed as its exact value).\n"
    "\n"
    "  OP                inputs                    options                       outputs\n"
    "  sum mean min max  x [R,C]                   --rows R --cols C             y: 1 value (axis all)\n"
    "  logsumexp sumsq                             [--axis all|row]                 or R (axis row)\n"
    "  kl_div            input [R,C], target [R,C] --rows R --cols C             y: [R,C] (none)\n"
    "                                              [--reduction none|sum|mean|      or 1 value\n"
    "                                               batchmean] (default mean)\n"
    "                                              [--input-is-prob] [--log-target]\n"
    "                                              [--input-logits] [--target-logits]\n"
    "                    (logits: each row's log-softmax / softmax is taken)\n"
    "  dirichlet_multinomial                       --rows B --cols V             y: B values (none)\n"
    "                    counts [B,V],             [--reduction none|sum|mean]      or 1 value\n"
    "                    log_alpha [V]              (default none)\n"
    "                    (or [B,V] with            [--with-coefficient]\n"
    "                     --per-row-alpha)         [--per-row-alpha]\n"
    "  gmm_log_prob      z [B,D], mu [B,K*D],      --batch B --components K      log_q: B values\n"
    "                    log_var [B,K*D],          --dim D\n"
    "                    logits [K] (optional when K = 1)\n"
    "  gmm_sample        mu, log_var, logits       --batch B --components K      z: [B,D] fp32 (or\n"
    "                                                                            --out-dtype)\n"
    "                    (as above)                --dim D [RNG]                 log_q: B fp32\n"
    "                                                                            component: B int32\n"
    "  rng               (none)                    --dist raw|uniform|normal     x: N (uint32 for raw)\n"
    "                                              --count N [RNG]\n"
    "  categorical       weights [R,C]             --rows R --cols C [RNG]       index: R int32\n"
    "                    (logits with --logits)    [--logits]\n"
    "  kl_div_backward   input, target [R,C],      as kl_div                     grad_input,\n"
    "                    grad_out [R,C] (none)                                   grad_target: [R,C]\n"
    "                    or 1 value\n"
    "  dirichlet_multinomial_backward              as dirichlet_multinomial      grad_log_alpha:\n"
    "                    counts, log_alpha,                                      log_alpha's shape\n"
    "                    grad_out B values (none) or 1 value\n"
    "  gmm_log_prob_backward                       as gmm_log_prob               grad_z [B,D],\n"
    "                    z, mu, log_var, logits,                                 grad_mu, grad_log_var\n"
    "                    grad_log_q [B]                                          [B,K*D], grad_logits\n"
    "                                                                            [K] (K > 1)\n"
    "  gmm_sample_backward                         as gmm_sample (same RNG)      grad_mu, grad_log_var,\n"
    "                    mu, log_var, logits,                                    grad_logits\n"
    "                    grad_z [B,D], grad_log_q [B]\n"
    "\n"
    "  RNG: [--seed S] [--subsequence Q] [--offset O], each an unsigned 64-bit\n"
    "       integer in decimal or 0x-hex (default 0).\n"
    "\n"
    "Outputs: --out NAME=PATH writes that output as raw little-endian binary\n"
    "(fp32, or --out-dtype's 2-byte type; uint32 for raw draws; int32 for indices\n"
    "and components), scalars\n"
    "included. Every output without --out is printed on stdout, one value per\n"
    "line: 'NAME VALUE' for a one-value output (axis all, a reduction other than\n"
    "none), 'NAME[i] VALUE' otherwise, i being the row-major element index.\n"
    "Floats print with 9 significant digits (%.9g), which round-trip fp32.\n"
    "Random ops (gmm_sample, rng, categorical) finally print 'consumed N' on\n"
    "stdout: the stream elements used, to add to --offset for the next draw.\n"
    "\n"
    "Exit status: 0 success; 1 library or I/O error ('error: STATUS: message');\n"
    "2 bad arguments or a file of the wrong size.\n";

/* The job options (cli_exec.h) come first: their ids are CLI_JOB_OPT_*. */
enum {
    OPT_BACKEND = CLI_JOB_OPT_END,
    OPT_DEVICE,
    OPT_IN,
    OPT_OUT,
    OPT_DTYPE,
    OPT_OUT_DTYPE,
    OPT_HELP,
    OPT_COUNT_OF_OPTIONS
};

#define BIT(o) (1u << (o))

static const harness_option options[] = {
    {.name = "backend", .has_value = 1, .id = OPT_BACKEND},
    {.name = "device", .has_value = 1, .id = OPT_DEVICE},
    {.name = "in", .has_value = 1, .id = OPT_IN},
    {.name = "out", .has_value = 1, .id = OPT_OUT},
    CLI_JOB_OPTION_ROWS
    {.name = "dtype", .has_value = 1, .id = OPT_DTYPE},
    {.name = "out-dtype", .has_value = 1, .id = OPT_OUT_DTYPE},
    {.name = "help", .has_value = 0, .id = OPT_HELP},
};

#define RNG_OPTS (BIT(CLI_JOB_OPT_SEED) | BIT(CLI_JOB_OPT_SUBSEQUENCE) | BIT(CLI_JOB_OPT_OFFSET))
#define SHAPE_RC (BIT(CLI_JOB_OPT_ROWS) | BIT(CLI_JOB_OPT_COLS))
#define SHAPE_GMM (BIT(CLI_JOB_OPT_BATCH) | BIT(CLI_JOB_OPT_COMPONENTS) | BIT(CLI_JOB_OPT_DIM))

/* The options each op takes beyond the common ones, by harness_op id. */
typedef struct run_op_desc {
    unsigned allowed;
    unsigned required;
} run_op_desc;

#define REDUCE_OPTIONS {.allowed = SHAPE_RC | BIT(CLI_JOB_OPT_AXIS), .required = SHAPE_RC}
#define KL_FLAGS (BIT(CLI_JOB_OPT_REDUCTION) | BIT(CLI_JOB_OPT_INPUT_IS_PROB) | BIT(CLI_JOB_OPT_LOG_TARGET))
#define KL_OPTIONS {.allowed = SHAPE_RC | KL_FLAGS, .required = SHAPE_RC}
/* The logits forms have no gradient (yet): the forward alone takes them. */
#define KL_LOGITS_OPTIONS                                                                                    \
    {.allowed = SHAPE_RC | KL_FLAGS | BIT(CLI_JOB_OPT_INPUT_LOGITS) | BIT(CLI_JOB_OPT_TARGET_LOGITS) | BIT(OPT_OUT_DTYPE), \
     .required = SHAPE_RC}
#define DM_OPTIONS                                                                                          \
    {.allowed = SHAPE_RC | BIT(CLI_JOB_OPT_REDUCTION) | BIT(CLI_JOB_OPT_WITH_COEFFICIENT) | BIT(CLI_JOB_OPT_PER_ROW_ALPHA), \
     .required = SHAPE_RC}

static const run_op_desc ops[HARNESS_N_OPS] = {
    [HARNESS_OP_SUM] = REDUCE_OPTIONS,
    [HARNESS_OP_MEAN] = REDUCE_OPTIONS,
    [HARNESS_OP_MIN] = REDUCE_OPTIONS,
    [HARNESS_OP_MAX] = REDUCE_OPTIONS,
    [HARNESS_OP_LOGSUMEXP] = REDUCE_OPTIONS,
    [HARNESS_OP_SUMSQ] = REDUCE_OPTIONS,
    [HARNESS_OP_KL_DIV] = KL_LOGITS_OPTIONS,
    [HARNESS_OP_DIRICHLET_MULTINOMIAL] = DM_OPTIONS,
    [HARNESS_OP_GMM_LOG_PROB] = {.allowed = SHAPE_GMM, .required = SHAPE_GMM},
    [HARNESS_OP_GMM_SAMPLE] = {.allowed = SHAPE_GMM | RNG_OPTS | BIT(OPT_OUT_DTYPE), .required = SHAPE_GMM},
    [HARNESS_OP_RNG] = {.allowed = BIT(CLI_JOB_OPT_DIST) | BIT(CLI_JOB_OPT_COUNT) | RNG_OPTS | BIT(OPT_OUT_DTYPE),
                        .required = BIT(CLI_JOB_OPT_DIST) | BIT(CLI_JOB_OPT_COUNT)},
    [HARNESS_OP_CATEGORICAL] = {.allowed = SHAPE_RC | RNG_OPTS | BIT(CLI_JOB_OPT_LOGITS), .required = SHAPE_RC},
    [HARNESS_OP_KL_DIV_BACKWARD] = KL_OPTIONS,
    [HARNESS_OP_DIRICHLET_MULTINOMIAL_BACKWARD] = DM_OPTIONS,
    [HARNESS_OP_GMM_LOG_PROB_BACKWARD] = {.allowed = SHAPE_GMM, .required = SHAPE_GMM},
    [HARNESS_OP_GMM_SAMPLE_BACKWARD] = {.allowed = SHAPE_GMM | RNG_OPTS, .required = SHAPE_GMM},
};

#define COMMON_OPTS (BIT(OPT_BACKEND) | BIT(OPT_DEVICE) | BIT(OPT_IN) | BIT(OPT_OUT) | BIT(OPT_DTYPE) | BIT(OPT_HELP))
static int parse_choice(const char *value, const char *const *names, const int *values, int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (strcmp(value, names[i]) == 0) {
            *out = values[i];
            return 0;
        }
    return -1;
}

static const char *option_name(int id)
{
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        if (options[i].id == id) return options[i].name;
    return "?";
}

/* One line of stdout output: element `i` of t, whose bits are `bits`. */
static void print_bits(const cli_tensor *t, uint64_t i, uint32_t bits)
{
    if (t->scalar) printf("%s ", t->name);
    else printf("%s[%llu] ", t->name, (unsigned long long)i);
    switch (t->dtype) {
    case TALLY_U32: printf("%u\n", (unsigned)bits); break;
    case TALLY_I32: printf("%d\n", (int)(int32_t)bits); break;
    default: printf("%.9g\n", (double)cli_bits_f32(bits)); break;
    }
}

static void print_value(const cli_tensor *t, uint64_t i)
{
    print_bits(t, i, ((const uint32_t *)t->data)[i]);
}

/* Elements per piece of a streamed rng output: 4 MiB on the device and on
 * the host, whatever --count is. A multiple of 4, so every piece but the
 * last consumes exactly its length and the pieces tile the stream. */
#define RNG_CHUNK_ELEMENTS ((uint64_t)1 << 20)

/* `tally run rng`: generated and written piece by piece (random bits depend
 * only on the stream position, so the pieces equal one big fill), so a
 * count of billions needs no more memory than one piece. */
static int run_rng_streamed(tally_context *ctx, cli_job *job, uint64_t count, const char *out_path)
{
    tally_rng end = job->rng;
    uint64_t need = count + 3u < count ? 0 : (count + 3u) & ~(uint64_t)3u;
    tally_status st = count > 0 && need == 0 ? TALLY_RNG_EXHAUSTED : tally_rng_advance(&end, need);
    if (st != TALLY_OK) return cli_library_error(NULL, st);
    cli_staged staged;
    int rc = CLI_EXIT_OK;
    if (out_path != NULL) rc = cli_staged_open(&staged, out_path);
    if (rc != CLI_EXIT_OK) return rc;
    uint64_t piece = count < RNG_CHUNK_ELEMENTS ? count : RNG_CHUNK_ELEMENTS;
    tally_buffer *buf = NULL;
    uint32_t *host = malloc(piece > 0 ? (size_t)piece * 4u : 4u);
    if (host == NULL) rc = cli_io_error("out of memory for a %llu-element piece", (unsigned long long)piece);
    if (rc == CLI_EXIT_OK && piece > 0) {
        st = tally_buffer_create(ctx, (size_t)piece * 4u, &buf);
        if (st != TALLY_OK) rc = cli_library_error(ctx, st);
    }
    const tally_dtype dtype = job->out[0].dtype;
    const int half = dtype == TALLY_BF16 || dtype == TALLY_F16;
    uint64_t consumed_total = 0;
    for (uint64_t done = 0; done < count && rc == CLI_EXIT_OK;) {
        uint64_t n = count - done < piece ? count - done : piece, used = 0;
        tally_rng at = job->rng;
        at.offset += done; /* cannot wrap: the whole range was checked above */
        st = tally_rng_fill(ctx, job->dist, at, tally_view_typed(buf, dtype, 0, 1, (int64_t)n), &used);
        if (st == TALLY_OK) st = tally_buffer_download(buf, 0, host, (size_t)n * (half ? 2u : 4u));
        if (st != TALLY_OK) {
            rc = cli_library_error(ctx, st);
            break;
        }
        if (half) {
            /* Widened in place from the end, so no half is overwritten
             * before it is read. */
            const uint16_t *h = (const uint16_t *)(const void *)host;
            float *f = (float *)(void *)host;
            for (uint64_t k = n; k-- > 0;) f[k] = dtype == TALLY_BF16 ? tally_bf16_to_f32(h[k]) : tally_f16_to_f32(h[k]);
        }
        consumed_total += used;
        if (out_path != NULL) {
            rc = cli_staged_write_typed(&staged, (const float *)(const void *)host, n, dtype);
        } else {
            for (uint64_t i = 0; i < n; i++) print_bits(&job->out[0], done + i, host[i]);
            if (ferror(stdout)) rc = cli_io_error("cannot write to standard output");
        }
        done += n;
    }
    tally_buffer_release(buf);
    free(host);
    if (out_path != NULL) {
        if (rc == CLI_EXIT_OK) rc = cli_staged_commit(&staged, 1);
        else cli_staged_abort(&staged, 1);
    }
    job->consumed = consumed_total;
    return rc;
}

int cli_run(int argc, char **argv)
{
    const char *usage = cli_run_usage;
    if (argc < 1) return cli_usage_error(usage, "run: name an op");
    if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        fputs(usage, stdout);
        return CLI_EXIT_OK;
    }
    cli_job job;
    int op_id = cli_job_start(&job, argv[0]);
    if (op_id < 0) return cli_usage_error(usage, "run: unknown op '%s'", argv[0]);
    const run_op_desc *op = &ops[op_id];
    const char *op_name = argv[0];
    tally_backend backend = TALLY_BACKEND_AUTO;
    int device = TALLY_DEVICE_DEFAULT;
    cli_file_arg ins[CLI_MAX_FILES], outs[CLI_MAX_FILES];
    int n_ins = 0, n_outs = 0;
    unsigned seen = 0;
    int64_t count = 0;

    harness_args args = HARNESS_ARGS(argc, argv, 1, options);
    for (int id; (id = harness_args_next(&args)) != HARNESS_ARGS_DONE;) {
        const char *value = args.value;
        if (id < 0) return cli_usage_error(usage, "run %s: %s", op_name, args.err);
        if (id == OPT_HELP) {
            fputs(usage, stdout);
            return CLI_EXIT_OK;
        }
        if (!((op->allowed | COMMON_OPTS) & BIT(id)))
            return cli_usage_error(usage, "run %s: option --%s does not apply to this op", op_name,
                                   option_name(id));
        if (id != OPT_IN && id != OPT_OUT && (seen & BIT(id)))
            return cli_usage_error(usage, "run %s: option --%s given twice", op_name, option_name(id));
        seen |= BIT(id);
        int bad = 0;
        switch (id) {
        case OPT_BACKEND:
            bad = tally_backend_from_name(value, &backend) != TALLY_OK;
            break;
        case OPT_DEVICE: bad = cli_parse_index(value, &device) != 0; break;
        case OPT_IN:
        case OPT_OUT: {
            cli_file_arg *list = id == OPT_IN ? ins : outs;
            int *n = id == OPT_IN ? &n_ins : &n_outs;
            if (*n >= CLI_MAX_FILES)
                return cli_usage_error(usage, "run %s: too many --%s options", op_name, option_name(id));
            if (cli_file_arg_parse(value, &list[*n]) != 0)
                return cli_usage_error(usage, "run %s: --%s '%s' is not NAME=PATH", op_name, option_name(id),
                                       value);
            for (int i = 0; i < *n; i++)
                if (strcmp(list[i].name, list[*n].name) == 0)
                    return cli_usage_error(usage, "run %s: --%s %s given twice", op_name, option_name(id),
                                           list[i].name);
            *n += 1;
            break;
        }
        case OPT_DTYPE:
        case OPT_OUT_DTYPE: {
            static const char *const names[] = {"f32", "bf16", "f16"};
            static const int values[] = {TALLY_F32, TALLY_BF16, TALLY_F16};
            int v = 0;
            bad = parse_choice(value, names, values, 3, &v) != 0;
            if (id == OPT_DTYPE) job.in_dtype = (tally_dtype)v;
            else job.out_dtype = (tally_dtype)v;
            break;
        }
        default: bad = cli_job_option(&job, id, value, &count) != 0; break;
        }
        if (bad)
            return cli_usage_error(usage, "run %s: bad value '%s' for --%s", op_name, value, option_name(id));
    }
    for (int id = 0; id < OPT_COUNT_OF_OPTIONS; id++)
        if ((op->required & BIT(id)) && !(seen & BIT(id)))
            return cli_usage_error(usage, "run %s: --%s is required", op_name, option_name(id));
    if (job.kind == CLI_OP_RNG) {
        job.rows = 1;
        job.cols = count;
    }

    char err[160];
    if (cli_job_layout(&job, err, sizeof err) != 0) return cli_usage_error(usage, "run %s: %s", op_name, err);
    /* Match --in and --out with the op's tensors. */
    const char *in_path[CLI_MAX_TENSORS], *out_path[CLI_MAX_TENSORS];
    if (cli_job_match_files(&job, ins, n_ins, outs, n_outs, in_path, out_path, err, sizeof err) != 0)
        return cli_usage_error(usage, "run %s: %s", op_name, err);

    /* Read every input before touching a device: argument errors stay cheap. */
    int rc = CLI_EXIT_OK;
    for (int j = 0; j < job.n_in && rc == CLI_EXIT_OK; j++) {
        if (!job.in[j].present) continue;
        char what[96];
        snprintf(what, sizeof what, "input %s [%lld x %lld]", job.in[j].name, (long long)job.in[j].rows,
                 (long long)job.in[j].cols);
        rc = cli_read_typed_elements(what, in_path[j], job.in[j].dtype, cli_tensor_count(&job.in[j]),
                                     &job.in[j].data);
        if (rc == CLI_EXIT_USAGE) fputs("see 'tally run --help'\n", stderr);
    }

    tally_context *ctx = NULL;
    if (rc == CLI_EXIT_OK) {
        cli_note_first_opencl_use(backend);
        tally_status st = tally_context_create(backend, device, &ctx);
        if (st != TALLY_OK) rc = cli_library_error(NULL, st);
    }
    /* A file-size limit must come back as EFBIG from write, not kill the
     * process with its temporaries on disk. */
    signal(SIGXFSZ, SIG_IGN);
    if (rc == CLI_EXIT_OK && job.kind == CLI_OP_RNG) {
        rc = run_rng_streamed(ctx, &job, (uint64_t)count, out_path[0]);
    } else if (rc == CLI_EXIT_OK) {
        tally_status st = cli_exec_run(ctx, &job);
        if (st != TALLY_OK) {
            fprintf(stderr, "error: %s: %s\n", tally_status_name(st), job.error);
            rc = CLI_EXIT_FAIL;
        }
        /* Every --out file is written in full beside its target first and
         * renamed into place only when all are: a failure leaves none of
         * them (and any file they would replace stays as it was). */
        cli_staged staged[CLI_MAX_TENSORS];
        int n_staged = 0;
        for (int j = 0; j < job.n_out && rc == CLI_EXIT_OK; j++) {
            if (out_path[j] == NULL) continue;
            rc = cli_staged_open(&staged[n_staged], out_path[j]);
            if (rc != CLI_EXIT_OK) break;
            n_staged++;
            rc = cli_staged_write_typed(&staged[n_staged - 1], job.out[j].data, cli_tensor_count(&job.out[j]),
                                        job.out[j].dtype);
        }
        if (rc == CLI_EXIT_OK) rc = cli_staged_commit(staged, n_staged);
        else cli_staged_abort(staged, n_staged);
        for (int j = 0; j < job.n_out && rc == CLI_EXIT_OK; j++)
            if (out_path[j] == NULL)
                for (uint64_t i = 0; i < cli_tensor_count(&job.out[j]); i++) print_value(&job.out[j], i);
    }
    if (rc == CLI_EXIT_OK && (job.kind == CLI_OP_GMM_SAMPLE || job.kind == CLI_OP_RNG || job.kind == CLI_OP_CATEGORICAL))
        printf("consumed %llu\n", (unsigned long long)job.consumed);
    if (rc == CLI_EXIT_OK && (fflush(stdout) != 0 || ferror(stdout)))
        rc = cli_io_error("cannot write to standard output");
    cli_job_free_outputs(&job);
    for (int j = 0; j < job.n_in; j++) free(job.in[j].data);
    tally_context_release(ctx);
    return rc;
}
