/*
 * src/mpi/mpi_ops.c - the sharded ops. Each one checks and agrees on its
 * arguments (tm_begin), runs the single-device op on this rank's rows where
 * the rows are independent, runs the sharded tree (mpi_tree.c) where the
 * single-device op reduces across rows, and agrees on the outcome (tm_end).
 */
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"
#include "tally/philox.h"
#include "tally/portable_math.h"
#include "tally/terms.h"

#define AGREE(...) ((const uint64_t[TM_AGREE_MAX]){__VA_ARGS__})

static uint64_t round_up4(uint64_t v) { return (v + 3) & ~(uint64_t)3; }

/* The element offsets lo[q] = first[q] * cols of every rank (size + 1), in
 * the call's workspace (allocated before the agreement, so never missing). */
static uint64_t *element_split(tm_call *c, uint64_t cols)
{
    for (int q = 0; q <= c->size; q++) c->lo[q] = c->first[q] * cols;
    return c->lo;
}

/* Runs the sharded tree over this rank's values (buf from off; the count is
 * lo's own) and returns the result; every rank must call it. */
static float tree(tm_call *c, tally_reduce_op op, uint64_t n, uint64_t *lo, tally_buffer *buf, uint64_t off)
{
    float v = 0.0f;
    tm_tree(c, op, n, lo, buf, off, &v);
    return v;
}

/* A contiguous copy of a strided local matrix (the tree reads rows*cols
 * values in one run). Returns x's buffer itself when x is contiguous. */
static tally_buffer *contiguous(tm_call *c, tally_view x, uint64_t *off, int *made)
{
    *made = 0;
    *off = (uint64_t)x.offset;
    if (x.rows <= 1 || x.stride == x.cols) return x.buffer;
    uint64_t span = (uint64_t)(x.rows - 1) * (uint64_t)x.stride + (uint64_t)x.cols;
    float *host = malloc((size_t)span * 4), *packed = malloc((size_t)x.rows * (size_t)x.cols * 4);
    tally_buffer *b = NULL;
    if (host == NULL || packed == NULL) {
        tm_fail(c, TALLY_OUT_OF_MEMORY, "%s: out of memory for a contiguous copy", c->name);
    } else {
        tally_status st = tally_buffer_download(x.buffer, (size_t)x.offset * 4, host, (size_t)span * 4);
        tm_fail_tally(c, st, "tally_buffer_download (strided input)");
        for (int64_t r = 0; r < x.rows; r++)
            memcpy(packed + r * x.cols, host + r * x.stride, (size_t)x.cols * 4);
        b = tm_temp(c, (uint64_t)(x.rows * x.cols));
        if (b != NULL) {
            st = tally_buffer_upload(b, 0, packed, (size_t)(x.rows * x.cols) * 4);
            tm_fail_tally(c, st, "tally_buffer_upload (contiguous copy)");
            *made = 1;
            *off = 0;
        }
    }
    free(host);
    free(packed);
    return b;
}

/* Local checks shared by the ops: f32 views of the rank's rows whose buffer
 * may be NULL only when they hold no rows. */
static tally_status check_local(const char *name, const char *arg, tally_view v)
{
    if (v.rows < 0 || v.cols < 0 || v.offset < 0 || v.stride < 0)
        return tm_error(TALLY_INVALID_ARGUMENT, "%s: %s has a negative offset, rows, cols or stride", name, arg);
    if (v.rows == 0 || v.cols == 0) return TALLY_OK;
    if (v.buffer == NULL) return tm_error(TALLY_INVALID_ARGUMENT, "%s: %s has no buffer", name, arg);
    if (v.rows > 1 && v.stride < v.cols)
        return tm_error(TALLY_INVALID_ARGUMENT, "%s: %s has stride %lld < cols %lld", name, arg, (long long)v.stride,
                        (long long)v.cols);
    /* The extent check here (the op repeats it) lets every rank learn of a bad
     * view before any message is exchanged. */
    uint64_t stride = v.rows > 1 ? (uint64_t)v.stride : (uint64_t)v.cols, rows = (uint64_t)v.rows;
    uint64_t limit = tally_buffer_size(v.buffer) / 4, span;
    if (rows - 1 > UINT64_MAX / stride || (span = (rows - 1) * stride) > UINT64_MAX - (uint64_t)v.cols ||
        span + (uint64_t)v.cols > limit || (uint64_t)v.offset > limit - (span + (uint64_t)v.cols))
        return tm_error(TALLY_OUT_OF_BOUNDS, "%s: %s [%lld x %lld, stride %lld, offset %lld] reaches outside its buffer "
                        "of %zu bytes", name, arg, (long long)v.rows, (long long)v.cols, (long long)stride,
                        (long long)v.offset, tally_buffer_size(v.buffer));
    return TALLY_OK;
}

/* ---- Reductions -------------------------------------------------------- */

/* The sum tree of tally_expf(x - m) over the sharded x: the terms are made
 * on the host with tally's portable math, which is what every backend's
 * second logsumexp pass computes, then reduced by the sharded tree. */
static float shifted_exp_sum(tm_call *c, tally_view x, float m, uint64_t n)
{
    uint64_t count = c->local_rows * c->cols;
    tally_buffer *terms = NULL;
    if (count > 0 && c->st == TALLY_OK) {
        uint64_t span = (uint64_t)(x.rows - 1) * (uint64_t)(x.rows > 1 ? x.stride : x.cols) + (uint64_t)x.cols;
        float *host = malloc((size_t)span * 4), *t = malloc((size_t)count * 4);
        if (host == NULL || t == NULL) {
            tm_fail(c, TALLY_OUT_OF_MEMORY, "%s: out of memory for logsumexp terms", c->name);
        } else {
            tally_status st = tally_buffer_download(x.buffer, (size_t)x.offset * 4, host, (size_t)span * 4);
            tm_fail_tally(c, st, "tally_buffer_download (logsumexp input)");
            uint64_t stride = x.rows > 1 ? (uint64_t)x.stride : (uint64_t)x.cols;
            for (uint64_t r = 0; r < c->local_rows; r++)
                for (uint64_t k = 0; k < c->cols; k++) t[r * c->cols + k] = tally_expf(host[r * stride + k] - m);
            terms = tm_temp(c, count);
            if (terms != NULL) {
                st = tally_buffer_upload(terms, 0, t, (size_t)count * 4);
                tm_fail_tally(c, st, "tally_buffer_upload (logsumexp terms)");
            }
        }
        free(host);
        free(t);
    }
    uint64_t *lo = element_split(c, c->cols);
    float s = tree(c, TALLY_SUM, n, lo, terms, 0);
    tally_buffer_release(terms);
    return s;
}

tally_status tally_mpi_reduce(tally_context *ctx, MPI_Comm comm, int64_t global_rows, int64_t first_row,
                              tally_reduce_op op, tally_axis axis, tally_view x, tally_view out)
{
    static const char name[] = "tally_mpi_reduce";
    tally_status local = TALLY_OK;
    if (op < TALLY_SUM || op > TALLY_SUMSQ) local = tm_error(TALLY_INVALID_ARGUMENT, "%s: unknown op %d", name, (int)op);
    else if (axis != TALLY_AXIS_ALL && axis != TALLY_AXIS_ROW)
        local = tm_error(TALLY_INVALID_ARGUMENT, "%s: unknown axis %d", name, (int)axis);
    if (local == TALLY_OK) local = check_local(name, "x", x);
    if (local == TALLY_OK && axis == TALLY_AXIS_ALL) local = tm_check_scalar(ctx, name, out);
    tm_call c;
    tally_status st = tm_begin(&c, name, ctx, comm, global_rows, first_row, x.rows, x.cols,
                               AGREE((uint64_t)op, (uint64_t)axis), local);
    if (st != TALLY_OK) return st;
    const int needs_elements = op == TALLY_MEAN || op == TALLY_MIN || op == TALLY_MAX;
    uint64_t n = c.global_rows * c.cols;
    if (c.cols != 0 && n / c.cols != c.global_rows) {
        tm_fail(&c, TALLY_SIZE_OVERFLOW, "%s: global_rows*cols overflows", name);
        return tm_end(&c);
    }
    if (axis == TALLY_AXIS_ROW) {
        if (needs_elements && c.cols == 0 && c.global_rows > 0)
            tm_fail(&c, TALLY_EMPTY_INPUT, "%s: row reduction of rows with no columns is undefined", name);
        else if (c.local_rows > 0)
            tm_fail_tally(&c, tally_reduce(ctx, op, axis, x, out), "tally_reduce (local rows)");
        return tm_end(&c);
    }
    if (n == 0) {
        if (needs_elements)
            tm_fail(&c, TALLY_EMPTY_INPUT, "%s: %s of an empty input (%llu x %llu) is undefined", name,
                    op == TALLY_MEAN ? "mean" : op == TALLY_MIN ? "min" : "max", (unsigned long long)c.global_rows,
                    (unsigned long long)c.cols);
        else
            tm_write_scalar(&c, out, op == TALLY_LOGSUMEXP ? TALLY_F32_NEG_INF : 0.0f);
        return tm_end(&c);
    }
    uint64_t off;
    int made = 0;
    tally_buffer *data = c.local_rows * c.cols > 0 ? contiguous(&c, x, &off, &made) : NULL;
    tally_reduce_op tile_op = op == TALLY_MEAN ? TALLY_SUM : op == TALLY_LOGSUMEXP ? TALLY_MAX : op;
    uint64_t *lo = element_split(&c, c.cols);
    float v = tree(&c, tile_op, n, lo, data, data != NULL ? off : 0);
    if (made) tally_buffer_release(data);
    if (op == TALLY_MEAN) v = tally_divf(v, (float)n);
    /* Every rank holds the same m, so every rank takes the same branch. */
    if (op == TALLY_LOGSUMEXP && tally_isfinite(v)) {
        float s = shifted_exp_sum(&c, x, v, n);
        v = tally_lse_finish(v, s);
    }
    tm_write_scalar(&c, out, v);
    return tm_end(&c);
}

/* ---- KL divergence ----------------------------------------------------- */

tally_status tally_mpi_kl_div(tally_context *ctx, MPI_Comm comm, int64_t global_rows, int64_t first_row,
                              tally_view input, tally_view target, tally_reduction reduction, unsigned flags,
                              tally_view out)
{
    static const char name[] = "tally_mpi_kl_div";
    tally_status local = TALLY_OK;
    if (reduction < TALLY_REDUCTION_NONE || reduction > TALLY_REDUCTION_BATCHMEAN)
        local = tm_error(TALLY_INVALID_ARGUMENT, "%s: unknown reduction %d", name, (int)reduction);
    if (local == TALLY_OK) local = check_local(name, "input", input);
    if (local == TALLY_OK) local = check_local(name, "target", target);
    if (local == TALLY_OK && (input.rows != target.rows || input.cols != target.cols))
        local = tm_error(TALLY_SHAPE_MISMATCH, "%s: input is %lld x %lld but target is %lld x %lld", name,
                         (long long)input.rows, (long long)input.cols, (long long)target.rows,
                         (long long)target.cols);
    if (local == TALLY_OK && reduction != TALLY_REDUCTION_NONE) local = tm_check_scalar(ctx, name, out);
    tm_call c;
    tally_status st = tm_begin(&c, name, ctx, comm, global_rows, first_row, input.rows, input.cols,
                               AGREE((uint64_t)reduction, flags), local);
    if (st != TALLY_OK) return st;
    uint64_t n = c.global_rows * c.cols, count = c.local_rows * c.cols;
    if (c.cols != 0 && n / c.cols != c.global_rows) {
        tm_fail(&c, TALLY_SIZE_OVERFLOW, "%s: global_rows*cols overflows", name);
        return tm_end(&c);
    }
    if (reduction == TALLY_REDUCTION_NONE) {
        if (count > 0)
            tm_fail_tally(&c, tally_kl_div(ctx, input, target, reduction, flags, out), "tally_kl_div (local rows)");
        return tm_end(&c);
    }
    if ((reduction == TALLY_REDUCTION_MEAN && n == 0) || (reduction == TALLY_REDUCTION_BATCHMEAN && c.global_rows == 0)) {
        tm_fail(&c, TALLY_EMPTY_INPUT, "%s: %s of an empty input is undefined", name,
                reduction == TALLY_REDUCTION_MEAN ? "mean" : "batchmean");
        return tm_end(&c);
    }
    float sum = 0.0f;
    if (n > 0) {
        /* The pointwise terms (reduction none) are exactly the terms the fused
         * sum adds; the tree then adds them in the single-device order. */
        tally_buffer *terms = count > 0 ? tm_temp(&c, count) : NULL;
        if (terms != NULL)
            tm_fail_tally(&c,
                          tally_kl_div(ctx, input, target, TALLY_REDUCTION_NONE, flags,
                                       tally_view_f32(terms, 0, (int64_t)c.local_rows, (int64_t)c.cols)),
                          "tally_kl_div (pointwise terms)");
        uint64_t *lo = element_split(&c, c.cols);
        sum = tree(&c, TALLY_SUM, n, lo, terms, 0);
            tally_buffer_release(terms);
    }
    if (reduction == TALLY_REDUCTION_MEAN) sum = tally_divf(sum, (float)n);
    if (reduction == TALLY_REDUCTION_BATCHMEAN) sum = tally_divf(sum, (float)c.global_rows);
    tm_write_scalar(&c, out, sum);
    return tm_end(&c);
}

/* ---- Dirichlet-multinomial --------------------------------------------- */

tally_status tally_mpi_dirichlet_multinomial(tally_context *ctx, MPI_Comm comm, int64_t global_rows,
                                             int64_t first_row, tally_view counts, tally_view log_alpha,
                                             tally_reduction reduction, unsigned flags, tally_view out)
{
    static const char name[] = "tally_mpi_dirichlet_multinomial";
    tally_status local = TALLY_OK;
    if (reduction != TALLY_REDUCTION_NONE && reduction != TALLY_REDUCTION_SUM && reduction != TALLY_REDUCTION_MEAN)
        local = tm_error(TALLY_INVALID_ARGUMENT, "%s: reduction %d is not none, sum or mean", name, (int)reduction);
    if (local == TALLY_OK) local = check_local(name, "counts", counts);
    if (local == TALLY_OK && reduction != TALLY_REDUCTION_NONE) local = tm_check_scalar(ctx, name, out);
    tm_call c;
    tally_status st = tm_begin(&c, name, ctx, comm, global_rows, first_row, counts.rows, counts.cols,
                               AGREE((uint64_t)reduction, flags), local);
    if (st != TALLY_OK) return st;
    if (reduction == TALLY_REDUCTION_NONE) {
        if (c.local_rows > 0)
            tm_fail_tally(&c, tally_dirichlet_multinomial(ctx, counts, log_alpha, reduction, flags, out),
                          "tally_dirichlet_multinomial (local rows)");
        return tm_end(&c);
    }
    if (reduction == TALLY_REDUCTION_MEAN && c.global_rows == 0) {
        tm_fail(&c, TALLY_EMPTY_INPUT, "%s: mean over zero rows is undefined", name);
        return tm_end(&c);
    }
    float sum = 0.0f;
    if (c.global_rows > 0) {
        /* Row values (reduction none), then the tree over the B values that
         * the single-device sum runs. */
        tally_buffer *rows = c.local_rows > 0 ? tm_temp(&c, c.local_rows) : NULL;
        if (rows != NULL)
            tm_fail_tally(&c,
                          tally_dirichlet_multinomial(ctx, counts, log_alpha, TALLY_REDUCTION_NONE, flags,
                                                      tally_view_f32(rows, 0, (int64_t)c.local_rows, 1)),
                          "tally_dirichlet_multinomial (row values)");
        uint64_t *lo = element_split(&c, 1);
        sum = tree(&c, TALLY_SUM, c.global_rows, lo, rows, 0);
            tally_buffer_release(rows);
    }
    if (reduction == TALLY_REDUCTION_MEAN) sum = tally_divf(sum, (float)c.global_rows);
    tm_write_scalar(&c, out, sum);
    return tm_end(&c);
}

/* ---- Mixture ------------------------------------------------------------ */

tally_status tally_mpi_gmm_log_prob(tally_context *ctx, MPI_Comm comm, int64_t global_rows, int64_t first_row,
                                    tally_view z, tally_view mu, tally_view log_var, tally_view logits,
                                    int64_t components, tally_view out)
{
    static const char name[] = "tally_mpi_gmm_log_prob";
    tally_status local = check_local(name, "z", z);
    tm_call c;
    tally_status st = tm_begin(&c, name, ctx, comm, global_rows, first_row, z.rows, z.cols,
                               AGREE((uint64_t)components), local);
    if (st != TALLY_OK) return st;
    if (c.local_rows > 0)
        tm_fail_tally(&c, tally_gmm_log_prob(ctx, z, mu, log_var, logits, components, out),
                      "tally_gmm_log_prob (local rows)");
    return tm_end(&c);
}

/* The single-device draw count of a mixture sample of B rows of D: B4 component
 * uniforms, then B rows of D2 normals rounded up to 4. 1 on overflow. */
static int gmm_need(uint64_t B, uint64_t D, uint64_t *need)
{
    uint64_t B4 = round_up4(B), D2 = D + (D & 1u);
    if (B4 < B || D2 < D || (D2 != 0 && B > UINT64_MAX / D2)) return 1;
    uint64_t normals = B * D2, normals4 = round_up4(normals);
    if (normals4 < normals || normals4 > UINT64_MAX - B4) return 1;
    *need = B4 + normals4;
    return 0;
}

/* Downloads rows [0, rows) of a strided [rows, cols] view to packed host memory. */
static float *download_rows(tm_call *c, tally_view v, uint64_t rows, uint64_t cols)
{
    if (c->st != TALLY_OK) return NULL;
    uint64_t stride = rows > 1 ? (uint64_t)v.stride : cols;
    uint64_t span = rows == 0 ? 0 : (rows - 1) * stride + cols;
    float *host = malloc((size_t)span * 4 + 4), *packed = malloc((size_t)(rows * cols) * 4 + 4);
    if (host == NULL || packed == NULL) {
        free(host);
        free(packed);
        tm_fail(c, TALLY_OUT_OF_MEMORY, "%s: out of memory", c->name);
        return NULL;
    }
    tally_status st = span == 0 ? TALLY_OK
                                : tally_buffer_download(v.buffer, (size_t)v.offset * 4, host, (size_t)span * 4);
    tm_fail_tally(c, st, "tally_buffer_download (mixture parameters)");
    for (uint64_t r = 0; r < rows; r++) memcpy(packed + r * cols, host + r * stride, (size_t)cols * 4);
    free(host);
    return packed;
}

static tally_buffer *upload_new(tm_call *c, const float *data, uint64_t count)
{
    tally_buffer *b = tm_temp(c, count);
    if (b != NULL) tm_fail_tally(c, tally_buffer_upload(b, 0, data, (size_t)count * 4), "tally_buffer_upload");
    return b;
}

/*
 * The rows of one rank need the component uniforms at offset + row and the
 * normals at offset + B4 + row*D2 with the global B and row, while one local
 * call would put both after its own local B. So the component is drawn by
 * tally_categorical (the same rule over the same uniform), the chosen
 * component's parameters are gathered into a one-component mixture whose
 * local call is shifted so that its normals land on the global positions,
 * and log_q is the density of the resulting z under the whole mixture.
 */
tally_status tally_mpi_gmm_sample(tally_context *ctx, MPI_Comm comm, int64_t global_rows, int64_t first_row,
                                  tally_view mu, tally_view log_var, tally_view logits, int64_t components,
                                  tally_rng rng, tally_view z, tally_view log_q, tally_view component,
                                  uint64_t *consumed)
{
    static const char name[] = "tally_mpi_gmm_sample";
    if (consumed != NULL) *consumed = 0;
    tally_status local = check_local(name, "z", z);
    if (local == TALLY_OK && components < 1)
        local = tm_error(TALLY_INVALID_ARGUMENT, "%s: components is %lld, must be >= 1", name, (long long)components);
    tm_call c;
    tally_status st = tm_begin(&c, name, ctx, comm, global_rows, first_row, z.rows, z.cols,
                               AGREE((uint64_t)components, rng.seed, rng.subsequence, rng.offset), local);
    if (st != TALLY_OK) return st;
    const uint64_t K = (uint64_t)components, D = c.cols, lr = c.local_rows;
    uint64_t need = 0;
    if (gmm_need(c.global_rows, D, &need) || need > UINT64_MAX - rng.offset) {
        tm_fail(&c, TALLY_RNG_EXHAUSTED, "%s: offset %llu plus the draws of %llu rows of %llu passes 2^64", name,
                (unsigned long long)rng.offset, (unsigned long long)c.global_rows, (unsigned long long)D);
        return tm_end(&c);
    }
    if (lr > 0) {
        const uint64_t D2 = D + (D & 1u);
        /* normals of local row b at shifted + round4(lr) + b*D2 = offset + B4 + (row0 + b)*D2 */
        tally_rng shifted = rng;
        shifted.offset = rng.offset + round_up4(c.global_rows) + c.row0 * D2 - round_up4(lr);
        if (K == 1) {
            tm_fail_tally(&c, tally_gmm_sample(ctx, mu, log_var, logits, 1, shifted, z, log_q, component, NULL),
                          "tally_gmm_sample (local rows)");
        } else {
            float *lg = NULL, *rep = NULL, *mu_h = NULL, *lv_h = NULL, *mu_s = NULL, *lv_s = NULL;
            int32_t *comp = NULL;
            tally_buffer *rep_b = NULL, *comp_b = NULL, *mu_b = NULL, *lv_b = NULL, *lq_b = NULL;
            if (logits.buffer == NULL || logits.rows * logits.cols != components)
                tm_fail(&c, TALLY_SHAPE_MISMATCH, "%s: logits must hold K = %lld values", name, (long long)components);
            if (c.st == TALLY_OK) {
                lg = malloc((size_t)K * 4);
                rep = malloc((size_t)(lr * K) * 4);
                comp = malloc((size_t)lr * 4);
                mu_s = malloc((size_t)(lr * D) * 4 + 4);
                lv_s = malloc((size_t)(lr * D) * 4 + 4);
                if (lg == NULL || rep == NULL || comp == NULL || mu_s == NULL || lv_s == NULL)
                    tm_fail(&c, TALLY_OUT_OF_MEMORY, "%s: out of memory", name);
            }
            if (c.st == TALLY_OK)
                tm_fail_tally(&c, tally_buffer_download(logits.buffer, (size_t)logits.offset * 4, lg, (size_t)K * 4),
                              "tally_buffer_download (logits)");
            if (c.st == TALLY_OK) {
                for (uint64_t b = 0; b < lr; b++) memcpy(rep + b * K, lg, (size_t)K * 4);
                rep_b = upload_new(&c, rep, lr * K);
            }
            tally_view comp_v = component;
            if (component.buffer == NULL) {
                comp_b = tm_temp(&c, lr);
                comp_v = tally_view_typed(comp_b, TALLY_I32, 0, (int64_t)lr, 1);
            }
            if (c.st == TALLY_OK) {
                tally_rng at_row = rng;
                at_row.offset = rng.offset + c.row0;
                tm_fail_tally(&c,
                              tally_categorical(ctx, tally_view_f32(rep_b, 0, (int64_t)lr, (int64_t)K),
                                                TALLY_CATEGORICAL_LOGITS, at_row, comp_v, NULL),
                              "tally_categorical (components)");
            }
            if (c.st == TALLY_OK) {
                tally_buffer *cb = comp_v.buffer;
                uint64_t step = comp_v.rows > 1 ? (uint64_t)comp_v.stride : 1;
                if (comp_v.rows == 1) step = 1;
                int32_t *tmp = malloc((size_t)((lr - 1) * step + 1) * 4);
                if (tmp == NULL) tm_fail(&c, TALLY_OUT_OF_MEMORY, "%s: out of memory", name);
                else {
                    tm_fail_tally(&c, tally_buffer_download(cb, (size_t)comp_v.offset * 4, tmp,
                                                            (size_t)((lr - 1) * step + 1) * 4),
                                  "tally_buffer_download (components)");
                    for (uint64_t b = 0; b < lr; b++) comp[b] = tmp[b * step];
                }
                free(tmp);
            }
            mu_h = download_rows(&c, mu, lr, K * D);
            lv_h = download_rows(&c, log_var, lr, K * D);
            if (c.st == TALLY_OK) {
                for (uint64_t b = 0; b < lr; b++)
                    for (uint64_t d = 0; d < D; d++) {
                        int valid = comp[b] >= 0;
                        /* A row with no component gets NaN z, as on one device. */
                        mu_s[b * D + d] = valid ? mu_h[b * K * D + (uint64_t)comp[b] * D + d] : TALLY_F32_NAN;
                        lv_s[b * D + d] = valid ? lv_h[b * K * D + (uint64_t)comp[b] * D + d] : 0.0f;
                    }
                mu_b = upload_new(&c, mu_s, lr * D);
                lv_b = upload_new(&c, lv_s, lr * D);
                lq_b = tm_temp(&c, lr);
            }
            if (c.st == TALLY_OK)
                tm_fail_tally(&c,
                              tally_gmm_sample(ctx, tally_view_f32(mu_b, 0, (int64_t)lr, (int64_t)D),
                                               tally_view_f32(lv_b, 0, (int64_t)lr, (int64_t)D),
                                               tally_view_f32(NULL, 0, 0, 0), 1, shifted, z,
                                               tally_view_f32(lq_b, 0, (int64_t)lr, 1), tally_view_f32(NULL, 0, 0, 0),
                                               NULL),
                              "tally_gmm_sample (chosen components)");
            if (c.st == TALLY_OK)
                tm_fail_tally(&c, tally_gmm_log_prob(ctx, z, mu, log_var, logits, components, log_q),
                              "tally_gmm_log_prob (log_q of the sample)");
            tally_buffer_release(rep_b);
            tally_buffer_release(comp_b);
            tally_buffer_release(mu_b);
            tally_buffer_release(lv_b);
            tally_buffer_release(lq_b);
            free(lg);
            free(rep);
            free(comp);
            free(mu_h);
            free(lv_h);
            free(mu_s);
            free(lv_s);
        }
    }
    st = tm_end(&c);
    if (st == TALLY_OK && consumed != NULL) *consumed = need;
    return st;
}

/* ---- Random fills and categorical --------------------------------------- */

tally_status tally_mpi_rng_fill(tally_context *ctx, MPI_Comm comm, int64_t global_rows, int64_t first_row,
                                tally_distribution dist, tally_rng rng, tally_view out, uint64_t *consumed)
{
    static const char name[] = "tally_mpi_rng_fill";
    if (consumed != NULL) *consumed = 0;
    tally_status local = check_local(name, "out", out);
    tm_call c;
    tally_status st = tm_begin(&c, name, ctx, comm, global_rows, first_row, out.rows, out.cols,
                               AGREE((uint64_t)dist, rng.seed, rng.subsequence, rng.offset), local);
    if (st != TALLY_OK) return st;
    uint64_t n = c.global_rows * c.cols, need = round_up4(n);
    if ((c.cols != 0 && n / c.cols != c.global_rows) || need < n || need > UINT64_MAX - rng.offset) {
        tm_fail(&c, TALLY_RNG_EXHAUSTED, "%s: offset %llu plus %llu x %llu draws passes 2^64", name,
                (unsigned long long)rng.offset, (unsigned long long)c.global_rows, (unsigned long long)c.cols);
        return tm_end(&c);
    }
    if (c.local_rows * c.cols > 0) {
        tally_rng at = rng;
        at.offset = rng.offset + c.row0 * c.cols;
        tm_fail_tally(&c, tally_rng_fill(ctx, dist, at, out, NULL), "tally_rng_fill (local rows)");
    }
    st = tm_end(&c);
    if (st == TALLY_OK && consumed != NULL) *consumed = need;
    return st;
}

tally_status tally_mpi_categorical(tally_context *ctx, MPI_Comm comm, int64_t global_rows, int64_t first_row,
                                   tally_view weights, unsigned flags, tally_rng rng, tally_view out,
                                   uint64_t *consumed)
{
    static const char name[] = "tally_mpi_categorical";
    if (consumed != NULL) *consumed = 0;
    tally_status local = check_local(name, "weights", weights);
    tm_call c;
    tally_status st = tm_begin(&c, name, ctx, comm, global_rows, first_row, weights.rows, weights.cols,
                               AGREE(flags, rng.seed, rng.subsequence, rng.offset), local);
    if (st != TALLY_OK) return st;
    uint64_t need = round_up4(c.global_rows);
    if (need < c.global_rows || need > UINT64_MAX - rng.offset) {
        tm_fail(&c, TALLY_RNG_EXHAUSTED, "%s: offset %llu plus %llu rows passes 2^64", name,
                (unsigned long long)rng.offset, (unsigned long long)c.global_rows);
        return tm_end(&c);
    }
    if (c.global_rows > 0 && c.cols == 0) {
        tm_fail(&c, TALLY_EMPTY_INPUT, "%s: rows with no categories (cols = 0)", name);
        return tm_end(&c);
    }
    if (c.local_rows > 0) {
        tally_rng at = rng;
        at.offset = rng.offset + c.row0;
        tm_fail_tally(&c, tally_categorical(ctx, weights, flags, at, out, NULL), "tally_categorical (local rows)");
    }
    st = tm_end(&c);
    if (st == TALLY_OK && consumed != NULL) *consumed = need;
    return st;
}
