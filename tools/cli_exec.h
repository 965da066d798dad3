/*
 * tools/cli_exec.h - one op as data: its kind, parameters and named host
 * tensors, run on a context through the public API. `tally run` fills the
 * tensors from files; `tally crosscheck` from generators, with strided
 * placements, and compares what comes back.
 */
#ifndef TALLY_CLI_EXEC_H
#define TALLY_CLI_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "op_names.h"
#include "tally.h"

/* How a job runs: each op is its own kind, except that the six reductions
 * share one (job.reduce_op says which). The values are the ops' harness_op
 * ids (harness/op_names.h), so that a name maps to a kind without a table. */
typedef enum cli_op_kind {
    CLI_OP_REDUCE = HARNESS_OP_SUM,
    CLI_OP_KL = HARNESS_OP_KL_DIV,
    CLI_OP_DM = HARNESS_OP_DIRICHLET_MULTINOMIAL,
    CLI_OP_GMM_LOG_PROB = HARNESS_OP_GMM_LOG_PROB,
    CLI_OP_GMM_SAMPLE = HARNESS_OP_GMM_SAMPLE,
    CLI_OP_RNG = HARNESS_OP_RNG,
    CLI_OP_CATEGORICAL = HARNESS_OP_CATEGORICAL,
    CLI_OP_KL_BACKWARD = HARNESS_OP_KL_DIV_BACKWARD, /* inputs input, target, grad_out; outputs grad_input, grad_target */
    CLI_OP_DM_BACKWARD = HARNESS_OP_DIRICHLET_MULTINOMIAL_BACKWARD, /* inputs counts, log_alpha, grad_out; output grad_log_alpha */
    /* z, mu, log_var, logits, grad_log_q -> grad_z, grad_mu, grad_log_var, grad_logits */
    CLI_OP_GMM_LOG_PROB_BACKWARD = HARNESS_OP_GMM_LOG_PROB_BACKWARD,
    /* mu, log_var, logits, grad_z, grad_log_q -> grad_mu, grad_log_var, grad_logits */
    CLI_OP_GMM_SAMPLE_BACKWARD = HARNESS_OP_GMM_SAMPLE_BACKWARD
} cli_op_kind;

#define CLI_MAX_TENSORS 6

/*
 * A host tensor: `data` holds rows*cols dense row-major elements of 4 bytes
 * (floats also for a BF16 or F16 input: see cli_round_to_dtype; and for a
 * BF16 or F16 output, each the widened value the device wrote).
 * On the device it is placed in a buffer of its own at element `offset` with
 * row stride `stride` (>= cols), followed by `pad_after` spare elements; the
 * gaps are filled with a poison pattern so that reads outside the view show
 * up as NaNs and writes outside it are detected.
 */
typedef struct cli_tensor {
    const char *name;
    tally_dtype dtype;
    int64_t rows, cols;
    int64_t offset, stride, pad_after;
    int present; /* 0 for an absent optional tensor (gmm logits when K == 1) */
    int scalar;  /* an output that is always one value (printed without an index) */
    void *data;  /* inputs: set by the caller; outputs: malloc'd by cli_exec_run */
} cli_tensor;

typedef struct cli_job {
    cli_op_kind kind;
    /* Shape parameters (which ones apply depends on the kind). */
    int64_t rows, cols;         /* reduce, kl, dm (B, V), categorical; rng as rows x cols */
    int64_t batch, components, dim; /* gmm */
    int per_row_alpha;          /* dm: log_alpha is [rows, cols] instead of [1, cols] */
    tally_dtype in_dtype;       /* type of every floating input: TALLY_F32 (or 0), TALLY_BF16, TALLY_F16 */
    /* Type of the one output that may be half (cli_job_half_output): TALLY_F32 (or 0), TALLY_BF16, TALLY_F16. */
    tally_dtype out_dtype;
    /* Op parameters. */
    tally_reduce_op reduce_op;
    tally_axis axis;
    tally_reduction reduction;
    unsigned flags; /* kl, dm, categorical flags from tally.h */
    tally_distribution dist;
    tally_rng rng;
    /* Tensors, in the op's argument order (cli_job_layout lists them). */
    int n_in, n_out;
    cli_tensor in[CLI_MAX_TENSORS];
    cli_tensor out[CLI_MAX_TENSORS];
    /* Results of cli_exec_run. */
    uint64_t consumed;
    double op_seconds;        /* the op call plus tally_sync */
    int wrote_outside;        /* an output's gap or padding changed */
    char error[256];          /* a failure of the tool itself (host memory), else "" */
} cli_job;

/*
 * Starts a job for the op called `name` (tally.h's TALLY_OP_MAP): clears it,
 * then sets its kind, its reduce op and the defaults of `tally run` (axis
 * all; reduction mean for kl_div and its gradient, none otherwise). Returns
 * the op's harness_op id, or -1 (the job cleared) when no op has that name.
 */
int cli_job_start(cli_job *job, const char *name);

/*
 * The options of `tally run` and `tally run --mpi` that set a job's shape and
 * parameters: X(ID, name, has_value). Each command builds its option table
 * from this list (ids CLI_JOB_OPT_<ID>, then its own options from
 * CLI_JOB_OPT_END on) and hands these to cli_job_option.
 */
#define CLI_JOB_OPTION_MAP(X)                \
    X(ROWS, "rows", 1)                       \
    X(COLS, "cols", 1)                       \
    X(AXIS, "axis", 1)                       \
    X(REDUCTION, "reduction", 1)             \
    X(INPUT_IS_PROB, "input-is-prob", 0)     \
    X(LOG_TARGET, "log-target", 0)           \
    X(INPUT_LOGITS, "input-logits", 0)       \
    X(TARGET_LOGITS, "target-logits", 0)     \
    X(WITH_COEFFICIENT, "with-coefficient", 0) \
    X(PER_ROW_ALPHA, "per-row-alpha", 0)     \
    X(BATCH, "batch", 1)                     \
    X(COMPONENTS, "components", 1)           \
    X(DIM, "dim", 1)                         \
    X(SEED, "seed", 1)                       \
    X(SUBSEQUENCE, "subsequence", 1)         \
    X(OFFSET, "offset", 1)                   \
    X(DIST, "dist", 1)                       \
    X(COUNT, "count", 1)                     \
    X(LOGITS, "logits", 0)

enum {
#define CLI__JOB_OPT_ID(id, name, has_value) CLI_JOB_OPT_##id,
    CLI_JOB_OPTION_MAP(CLI__JOB_OPT_ID)
#undef CLI__JOB_OPT_ID
    CLI_JOB_OPT_END
};

/* harness_option rows of the list above, for a command's option table. */
#define CLI__JOB_OPT_ROW(opt, text, takes) {.name = text, .has_value = takes, .id = CLI_JOB_OPT_##opt},
#define CLI_JOB_OPTION_ROWS CLI_JOB_OPTION_MAP(CLI__JOB_OPT_ROW)

/*
 * Applies job option `id` (a CLI_JOB_OPT_*) with its value (NULL for a
 * flag) to the job; --count goes to *count, which the command turns into a
 * shape. Returns 0, or -1 when the value is not valid for the option (and,
 * for --reduction, the job's kind: batchmean is KL's alone).
 */
int cli_job_option(cli_job *job, int id, const char *value, int64_t *count);

/* A --in or --out argument, NAME=PATH. */
typedef struct cli_file_arg {
    char name[64];
    const char *path; /* points into the argument */
} cli_file_arg;

#define CLI_MAX_FILES 8

/* Splits NAME=PATH; both parts must be non-empty and NAME shorter than 64
 * bytes. Returns 0, or -1 for anything else. */
int cli_file_arg_parse(const char *arg, cli_file_arg *out);

/*
 * Matches --in and --out arguments with the tensors of a laid-out job:
 * in_path[k] and out_path[k] (CLI_MAX_TENSORS each, NULL where none) get the
 * paths of the files named like input and output k. An optional input given
 * a file becomes present (gmm logits when K == 1: the library then ignores
 * them). Returns 0, or -1 with the message in err when a name matches no
 * tensor or a present input has no file.
 */
int cli_job_match_files(cli_job *job, const cli_file_arg *ins, int n_ins, const cli_file_arg *outs, int n_outs,
                        const char **in_path, const char **out_path, char *err, size_t err_size);

/*
 * Names, dtypes and shapes of the job's tensors from its kind and shape
 * parameters, with contiguous placement (offset 0, stride = cols, no pad).
 * Data pointers are cleared. Returns 0, or -1 with a message in err when
 * the element counts overflow.
 */
int cli_job_layout(cli_job *job, char *err, size_t err_size);

/* The index of the job's output that may be BF16 or F16 (kl_div's y with
 * reduction none, a uniform or normal fill's x, gmm_sample's z), or -1 when
 * its kind and parameters have none. cli_job_layout gives that output the
 * job's out_dtype, and refuses a half out_dtype when there is none. */
int cli_job_half_output(const cli_job *job);

/* Elements of one tensor (rows * cols; fits int64 after cli_job_layout). */
uint64_t cli_tensor_count(const cli_tensor *t);

/*
 * Uploads the inputs, runs the op (timed with tally_sync), downloads the
 * outputs into freshly allocated dense arrays and checks the poison around
 * them. Output data pointers are overwritten without being freed: the
 * caller owns the arrays of earlier runs. On a library error returns its status (message on ctx, or on the
 * thread for NULL); outputs are then freed. A failed host allocation
 * returns TALLY_OUT_OF_MEMORY with its message in job->error instead.
 */
tally_status cli_exec_run(tally_context *ctx, cli_job *job);

/*
 * Rounds n floats to the nearest values of a half dtype (ties to even), in
 * place; f32 leaves them. An input tensor of dtype TALLY_BF16 or TALLY_F16
 * keeps such floats in `data` (exactly representable, so the references
 * see the very values the device reads); cli_exec_run narrows them to the
 * type's 2-byte encoding when it uploads.
 */
void cli_round_to_dtype(tally_dtype dtype, float *x, uint64_t n);

/* Frees the outputs' data (inputs belong to the caller). */
void cli_job_free_outputs(cli_job *job);

#endif /* TALLY_CLI_EXEC_H */
