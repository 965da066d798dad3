/*
 * tests/check_fuzz_api.c - seeded API fuzzing of every op on the backend
 * named by TALLY_TEST_BACKEND, against a host context as the reference.
 *
 * Each call is drawn from a fixed-seed generator: an op, a valid shape with
 * views at random offsets and strides in an input buffer and (outputs,
 * disjoint, with random gaps) in a poisoned output buffer, random flags,
 * reductions and stream positions. Half the calls then get one corruption
 * that makes them invalid (a negative or unsizable dimension, a view past
 * its buffer, stride < cols, a wrong dtype, a foreign or missing buffer, an
 * unknown enum or flag, an output over an input, a wrong output shape, a
 * stream offset near 2^64, a bad component count, a NULL context).
 *
 * The same call runs on the backend under test and on the host. Asserted:
 * - both return the same status; an invalid call never returns OK;
 * - an invalid call writes nothing: every output element still holds the
 *   poison and every input is unchanged (on both contexts);
 * - an OK call writes only inside its output views (the rest of the output
 *   buffer is still poison), changes no input, reports the same `consumed`
 *   and gives the same bits as the host (any NaN matches any NaN).
 * TALLY_FUZZ_CALLS overrides the number of calls (default 10000); the last
 * line on stderr counts calls, valid, rejected and mismatches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

const int tally_test_needs_backend = 1;

#define N_ELEMS 8192 /* elements of each buffer */
#define HUGE ((int64_t)4611686018427387905)

enum { OP_REDUCE, OP_KL, OP_DM, OP_GMM_LP, OP_GMM_S, OP_RNG, OP_CAT, OP_COUNT };
enum { BUF_IN, BUF_OUT, BUF_FOREIGN, BUF_NULL };

typedef struct vd {
    int buf;
    int64_t off, rows, cols, stride;
    tally_dtype dtype;
} vd;

typedef struct call {
    int op;
    int sub;     /* reduce op, reduction or distribution */
    int axis;
    unsigned flags;
    int64_t K;
    tally_rng rng;
    int nin, nout;
    vd in[4], out[3];
    int null_ctx;
    int want_consumed; /* pass a consumed pointer */
} call;

typedef struct side {
    tally_context *ctx;
    tally_buffer *buf[2];
} side;

static tally_buffer *foreign_buf;
static uint32_t input_bits[N_ELEMS];

/* ---- Generation --------------------------------------------------------- */

static int64_t rnd(tt_rand *r, int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + (int64_t)tt_rand_below(r, (uint64_t)(hi - lo + 1));
}

static vd in_view(tt_rand *r, int64_t rows, int64_t cols)
{
    vd v = {.buf = BUF_IN, .rows = rows, .cols = cols, .dtype = TALLY_F32};
    v.stride = rows > 1 ? cols + rnd(r, 0, 3) : cols;
    int64_t extent = (rows - 1) * v.stride + cols;
    v.off = rnd(r, 0, N_ELEMS - extent);
    return v;
}

/* Outputs go one after another in the output buffer with random gaps, so
 * they are disjoint. `n_vector` > 0 makes an n-value vector (1 x n or n x 1
 * with a random step). */
static vd out_view(tt_rand *r, int64_t *cursor, int64_t rows, int64_t cols, tally_dtype dtype)
{
    vd v = {.buf = BUF_OUT, .rows = rows, .cols = cols, .dtype = dtype};
    v.stride = rows > 1 ? cols + rnd(r, 0, 2) : cols;
    v.off = *cursor + rnd(r, 0, 5);
    *cursor = v.off + (rows - 1) * v.stride + cols;
    return v;
}

static vd out_vector(tt_rand *r, int64_t *cursor, int64_t n, tally_dtype dtype)
{
    if (n > 1 && tt_rand_below(r, 2)) return out_view(r, cursor, 1, n, dtype);
    return out_view(r, cursor, n, 1, dtype);
}

static void generate_valid(tt_rand *r, call *c)
{
    memset(c, 0, sizeof *c);
    c->op = (int)tt_rand_below(r, OP_COUNT);
    c->rng = (tally_rng){.seed = tt_rand_u64(r), .subsequence = tt_rand_below(r, 4), .offset = tt_rand_below(r, 64)};
    c->want_consumed = (int)tt_rand_below(r, 2);
    int64_t cursor = 0, R = rnd(r, 1, 8), C = rnd(r, 1, 48);
    switch (c->op) {
    case OP_REDUCE:
        c->sub = (int)rnd(r, TALLY_SUM, TALLY_SUMSQ);
        c->axis = tt_rand_below(r, 2) ? TALLY_AXIS_ALL : TALLY_AXIS_ROW;
        c->in[c->nin++] = in_view(r, R, C);
        c->out[c->nout++] = c->axis == TALLY_AXIS_ALL ? out_view(r, &cursor, 1, 1, TALLY_F32)
                                                      : out_vector(r, &cursor, R, TALLY_F32);
        break;
    case OP_KL:
        c->sub = (int)rnd(r, TALLY_REDUCTION_NONE, TALLY_REDUCTION_BATCHMEAN);
        c->flags = (unsigned)tt_rand_below(r, 4);
        c->in[c->nin++] = in_view(r, R, C);
        c->in[c->nin++] = in_view(r, R, C);
        c->out[c->nout++] = c->sub == TALLY_REDUCTION_NONE ? out_view(r, &cursor, R, C, TALLY_F32)
                                                           : out_view(r, &cursor, 1, 1, TALLY_F32);
        break;
    case OP_DM:
        c->sub = (int)rnd(r, TALLY_REDUCTION_NONE, TALLY_REDUCTION_MEAN);
        c->flags = (unsigned)tt_rand_below(r, 2);
        c->in[c->nin++] = in_view(r, R, C);
        c->in[c->nin++] = in_view(r, tt_rand_below(r, 2) ? R : 1, C);
        c->out[c->nout++] = c->sub == TALLY_REDUCTION_NONE ? out_vector(r, &cursor, R, TALLY_F32)
                                                           : out_view(r, &cursor, 1, 1, TALLY_F32);
        break;
    case OP_GMM_LP:
    case OP_GMM_S: {
        int64_t K = rnd(r, 1, 4), D = rnd(r, 1, 12);
        c->K = K;
        if (c->op == OP_GMM_LP) c->in[c->nin++] = in_view(r, R, D);
        c->in[c->nin++] = in_view(r, R, K * D);
        c->in[c->nin++] = in_view(r, R, K * D);
        if (K == 1 && tt_rand_below(r, 2)) c->in[c->nin++] = (vd){.buf = BUF_NULL, .dtype = TALLY_F32};
        else c->in[c->nin++] = in_view(r, 1, K);
        if (c->op == OP_GMM_LP) {
            c->out[c->nout++] = out_vector(r, &cursor, R, TALLY_F32);
        } else { /* z, log q and (maybe NULL) the components */
            c->out[c->nout++] = out_view(r, &cursor, R, D, TALLY_F32);
            c->out[c->nout++] = out_vector(r, &cursor, R, TALLY_F32);
            c->out[c->nout++] = tt_rand_below(r, 4) ? out_vector(r, &cursor, R, TALLY_I32)
                                                    : (vd){.buf = BUF_NULL, .dtype = TALLY_I32};
        }
        break;
    }
    case OP_RNG:
        c->sub = (int)rnd(r, TALLY_DIST_RAW, TALLY_DIST_NORMAL);
        c->out[c->nout++] = out_view(r, &cursor, R, C, c->sub == TALLY_DIST_RAW ? TALLY_U32 : TALLY_F32);
        break;
    case OP_CAT:
        c->flags = (unsigned)tt_rand_below(r, 2);
        c->in[c->nin++] = in_view(r, R, C);
        c->out[c->nout++] = out_vector(r, &cursor, R, TALLY_I32);
        break;
    }
}

/* A view that may be corrupted: one with a buffer (NULL component or
 * logits are legal and are left alone). Returns NULL when there is none. */
static vd *pick_view(tt_rand *r, call *c, int outputs_only)
{
    vd *cands[7];
    int n = 0;
    /* With K == 1 the mixture ops ignore logits (the last input): not a target. */
    int ignored = (c->op == OP_GMM_LP || c->op == OP_GMM_S) && c->K == 1 ? c->nin - 1 : -1;
    if (!outputs_only)
        for (int i = 0; i < c->nin; i++)
            if (c->in[i].buf != BUF_NULL && i != ignored) cands[n++] = &c->in[i];
    for (int i = 0; i < c->nout; i++)
        if (c->out[i].buf != BUF_NULL) cands[n++] = &c->out[i];
    return n == 0 ? NULL : cands[tt_rand_below(r, (uint64_t)n)];
}

/* The corruptions. A view corruption changes the view `v` (drawn by the
 * caller; the corruption does not apply to a call without one); a call
 * corruption changes the call, or `v` where the op allows it, and returns 0
 * when it does not apply to this op. Where one does not apply, the caller
 * draws another. */
static void negative_dimension(tt_rand *r, vd *v)
{
    uint64_t k = tt_rand_below(r, 3);
    if (k == 0) v->rows = -rnd(r, 1, 5);
    else if (k == 1) v->cols = -rnd(r, 1, 5);
    else v->rows = INT64_MIN;
}

static void huge_empty_view(tt_rand *r, vd *v) { (void)r, v->rows = HUGE, v->cols = 0; }

/* The last element lands 1..4 elements past the buffer's end. */
static void past_the_end(tt_rand *r, vd *v)
{
    v->off = N_ELEMS - ((v->rows - 1) * (v->rows > 1 ? v->stride : v->cols) + v->cols) + rnd(r, 1, 4);
}

static void stride_below_cols(tt_rand *r, vd *v)
{
    (void)r;
    v->cols = v->cols < 2 ? 2 : v->cols, v->rows = v->rows < 2 ? 2 : v->rows;
    v->stride = v->cols - 1;
}

static void wrong_dtype(tt_rand *r, vd *v)
{
    v->dtype = v->dtype == TALLY_F32 ? (tt_rand_below(r, 2) ? TALLY_U32 : TALLY_I32)
                                     : (tt_rand_below(r, 2) ? TALLY_F32 : (tally_dtype)77);
}

static void foreign_buffer(tt_rand *r, vd *v) { (void)r, v->buf = BUF_FOREIGN, v->off = 0; }

static void huge_offset(tt_rand *r, vd *v) { v->off = (int64_t)(tt_rand_u64(r) >> 1) | ((int64_t)1 << 57); }

static int missing_buffer(tt_rand *r, call *c, vd *v)
{
    (void)r;
    if (v == NULL || (c->op == OP_GMM_S && v == &c->out[2])) return 0; /* the component view may be NULL */
    v->buf = BUF_NULL;
    return 1;
}

static int unknown_enum(tt_rand *r, call *c, vd *v)
{
    (void)v;
    switch (c->op) {
    case OP_REDUCE:
        if (tt_rand_below(r, 2)) c->sub = tt_rand_below(r, 2) ? 0 : (int)rnd(r, 7, 1000);
        else c->axis = tt_rand_below(r, 2) ? 0 : (int)rnd(r, 3, 1000);
        return 1;
    case OP_KL: c->sub = tt_rand_below(r, 2) ? -1 : (int)rnd(r, 4, 99); return 1;
    case OP_DM: c->sub = (int)rnd(r, 3, 99); return 1; /* batchmean is KL's alone */
    case OP_RNG: c->sub = tt_rand_below(r, 2) ? 0 : (int)rnd(r, 4, 99); return 1;
    default: return 0;
    }
}

static int unknown_flag(tt_rand *r, call *c, vd *v)
{
    (void)v;
    switch (c->op) {
    case OP_KL: c->flags |= 1u << rnd(r, 4, 31); return 1; /* bits 0-3 are flags (tally/flags.h) */
    case OP_DM: c->flags |= 1u << rnd(r, 1, 31); return 1;
    case OP_CAT: c->flags |= 1u << rnd(r, 1, 31); return 1;
    default: return 0;
    }
}

static int output_over_input(tt_rand *r, call *c, vd *v)
{
    (void)v;
    if (c->nin == 0) return 0;
    vd *o = pick_view(r, c, 1);
    int pick = (int)tt_rand_below(r, (uint64_t)c->nin);
    vd *i = &c->in[pick];
    if (o == NULL || i->buf != BUF_IN) return 0;
    if ((c->op == OP_GMM_LP || c->op == OP_GMM_S) && c->K == 1 && pick == c->nin - 1) return 0;
    o->buf = BUF_IN;
    o->off = i->off; /* same first element: overlaps whatever the shapes */
    return 1;
}

static int wrong_output_shape(tt_rand *r, call *c, vd *v)
{
    (void)r, (void)v;
    if (c->op == OP_RNG) return 0;
    vd *o = &c->out[c->op == OP_GMM_S ? 1 : 0];
    if (o->rows == 1 && o->cols == 1) o->rows = 2;
    else if (o->cols == 1) o->rows += 1;
    else if (o->rows == 1) o->cols += 1;
    else o->rows += 1;
    return 1;
}

static int stream_offset_near_end(tt_rand *r, call *c, vd *v)
{
    (void)v;
    if (c->op != OP_RNG && c->op != OP_GMM_S && c->op != OP_CAT) return 0;
    c->rng.offset = UINT64_MAX - (uint64_t)rnd(r, 0, 2);
    return 1;
}

static int bad_component_count(tt_rand *r, call *c, vd *v)
{
    (void)v;
    if (c->op != OP_GMM_LP && c->op != OP_GMM_S) return 0;
    c->K = tt_rand_below(r, 2) ? -(int64_t)tt_rand_below(r, 3) : (int64_t)1 << 31;
    return 1;
}

static int null_context(tt_rand *r, call *c, vd *v)
{
    (void)r, (void)v;
    c->null_ctx = 1;
    return 1;
}

/* Each corruption: its name and either its view or its call form. */
static const struct {
    const char *name;
    void (*view)(tt_rand *r, vd *v);
    int (*call)(tt_rand *r, call *c, vd *v);
} corruptions[] = {
    {"negative dimension", negative_dimension, NULL},
    {"huge empty view", huge_empty_view, NULL},
    {"view past its buffer", past_the_end, NULL},
    {"stride below cols", stride_below_cols, NULL},
    {"wrong dtype", wrong_dtype, NULL},
    {"foreign buffer", foreign_buffer, NULL},
    {"missing buffer", NULL, missing_buffer},
    {"unknown enum", NULL, unknown_enum},
    {"unknown flag", NULL, unknown_flag},
    {"output over an input", NULL, output_over_input},
    {"wrong output shape", NULL, wrong_output_shape},
    {"stream offset near 2^64", NULL, stream_offset_near_end},
    {"bad component count", NULL, bad_component_count},
    {"NULL context", NULL, null_context},
    {"huge offset", huge_offset, NULL},
};
#define N_CORRUPTIONS ((int)(sizeof corruptions / sizeof corruptions[0]))

/* Applies corruption k; returns 0 when it does not apply to this call. */
static int corrupt(tt_rand *r, call *c, int k)
{
    vd *v = pick_view(r, c, 0);
    if (corruptions[k].call != NULL) return corruptions[k].call(r, c, v);
    if (v == NULL) return 0;
    corruptions[k].view(r, v);
    return 1;
}

/* ---- Execution ---------------------------------------------------------- */

static tally_view view_of(const side *s, const vd *v)
{
    tally_buffer *b = v->buf == BUF_IN ? s->buf[0] : v->buf == BUF_OUT ? s->buf[1]
                    : v->buf == BUF_FOREIGN ? foreign_buf : NULL;
    return (tally_view){.buffer = b, .offset = v->off, .rows = v->rows, .cols = v->cols, .stride = v->stride,
                        .dtype = v->dtype};
}

static tally_status execute(const side *s, const call *c, uint64_t *consumed)
{
    tally_context *ctx = c->null_ctx ? NULL : s->ctx;
    tally_view in[4], out[3];
    for (int i = 0; i < 4; i++) in[i] = i < c->nin ? view_of(s, &c->in[i]) : (tally_view){.buffer = NULL};
    for (int i = 0; i < 3; i++) out[i] = i < c->nout ? view_of(s, &c->out[i]) : (tally_view){.buffer = NULL};
    uint64_t *cp = c->want_consumed ? consumed : NULL;
    switch (c->op) {
    case OP_REDUCE: return tally_reduce(ctx, (tally_reduce_op)c->sub, (tally_axis)c->axis, in[0], out[0]);
    case OP_KL: return tally_kl_div(ctx, in[0], in[1], (tally_reduction)c->sub, c->flags, out[0]);
    case OP_DM: return tally_dirichlet_multinomial(ctx, in[0], in[1], (tally_reduction)c->sub, c->flags, out[0]);
    case OP_GMM_LP: return tally_gmm_log_prob(ctx, in[0], in[1], in[2], in[3], c->K, out[0]);
    case OP_GMM_S:
        return tally_gmm_sample(ctx, in[0], in[1], in[2], c->K, c->rng, out[0], out[1], out[2], cp);
    case OP_RNG: return tally_rng_fill(ctx, (tally_distribution)c->sub, c->rng, out[0], cp);
    case OP_CAT: return tally_categorical(ctx, in[0], c->flags, c->rng, out[0], cp);
    }
    return TALLY_INVALID_ARGUMENT;
}

static int same_bits(uint32_t a, uint32_t b)
{
    int an = (a & 0x7f800000u) == 0x7f800000u && (a & 0x007fffffu) != 0;
    int bn = (b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0;
    return an || bn ? an && bn : a == b;
}

/* Marks the output elements a valid call may write. */
static void footprint(const call *c, unsigned char *mask)
{
    memset(mask, 0, N_ELEMS);
    for (int i = 0; i < c->nout; i++) {
        const vd *v = &c->out[i];
        if (v->buf != BUF_OUT) continue;
        for (int64_t r = 0; r < v->rows; r++)
            for (int64_t k = 0; k < v->cols; k++) mask[v->off + r * (v->rows > 1 ? v->stride : v->cols) + k] = 1;
    }
}

static void repoison(const side *s)
{
    ck_assert_int_eq(tally_buffer_fill(s->buf[1], 0, N_ELEMS * 4u, TT_POISON), TALLY_OK);
}

static side make_side(tally_backend b, const float *data)
{
    side s;
    /* The host side is device 0: TALLY_DEVICE may name the device backend's GPU. */
    tally_status st = tally_context_create(b, b == TALLY_BACKEND_HOST ? 0 : TALLY_DEVICE_DEFAULT, &s.ctx);
    ck_assert_msg(st == TALLY_OK, "context: %s", tally_last_error(NULL));
    s.buf[0] = tt_upload(s.ctx, data, N_ELEMS);
    s.buf[1] = tt_buffer(s.ctx, N_ELEMS);
    return s;
}

static void free_side(side *s)
{
    tally_buffer_release(s->buf[0]);
    tally_buffer_release(s->buf[1]);
    tally_context_release(s->ctx);
}

START_TEST(fuzz_every_op)
{
    static float data[N_ELEMS];
    static uint32_t got[N_ELEMS], ref[N_ELEMS];
    static unsigned char mask[N_ELEMS];
    tt_fill_uniform(data, N_ELEMS, 1501, -3.0, 3.0);
    /* Whole counts for Dirichlet-multinomial now and then, and specials. */
    for (int i = 0; i < N_ELEMS; i += 7) data[i] = (float)(i % 11);
    const uint32_t specials[] = {0x7fc00000u, 0x7f800000u, 0xff800000u, 0x80000000u, 0x00000001u, 0x7f7fffffu};
    for (int i = 5; i < N_ELEMS; i += 97) memcpy(&data[i], &specials[(i / 97) % 6], 4);
    memcpy(input_bits, data, sizeof input_bits);

    side dut = make_side(tt_backend(), data), host = make_side(TALLY_BACKEND_HOST, data);
    tally_context *other = NULL;
    ck_assert_int_eq(tally_context_create(TALLY_BACKEND_HOST, 0, &other), TALLY_OK);
    foreign_buf = tt_upload(other, data, N_ELEMS);

    const char *env = getenv("TALLY_FUZZ_CALLS");
    long calls = env != NULL ? atol(env) : 10000;
    tt_rand r = tt_rand_seed(0x15f022u);
    long valid = 0, rejected = 0, per_corruption[N_CORRUPTIONS] = {0};
    for (long n = 0; n < calls; n++) {
        call c;
        generate_valid(&r, &c);
        int corruption = -1;
        if (tt_rand_below(&r, 2)) {
            for (int tries = 0; tries < 50 && corruption < 0; tries++) {
                int k = (int)tt_rand_below(&r, N_CORRUPTIONS);
                if (corrupt(&r, &c, k)) corruption = k;
            }
        }
        uint64_t c_dut = 12345, c_host = 12345;
        tally_status s_dut = execute(&dut, &c, &c_dut), s_host = execute(&host, &c, &c_host);
        const char *what = corruption >= 0 ? corruptions[corruption].name : "valid";
        ck_assert_msg(s_dut == s_host, "call %ld (op %d, %s): %s vs host %s: %s | %s", n, c.op, what,
                      tally_status_name(s_dut), tally_status_name(s_host), tally_last_error(c.null_ctx ? NULL : dut.ctx),
                      tally_last_error(c.null_ctx ? NULL : host.ctx));
        if (corruption >= 0)
            ck_assert_msg(s_dut != TALLY_OK, "call %ld (op %d): '%s' was accepted", n, c.op, what);
        else
            ck_assert_msg(s_dut == TALLY_OK, "call %ld (op %d): a valid call failed: %s: %s", n, c.op,
                          tally_status_name(s_dut), tally_last_error(dut.ctx));
        /* Inputs never change; outputs change only inside the views of an OK call. */
        tt_read(dut.buf[0], 0, got, N_ELEMS);
        ck_assert_msg(memcmp(got, input_bits, sizeof got) == 0, "call %ld (op %d, %s): an input changed", n, c.op,
                      what);
        tt_read(dut.buf[1], 0, got, N_ELEMS);
        tt_read(host.buf[1], 0, ref, N_ELEMS);
        if (s_dut == TALLY_OK) footprint(&c, mask);
        else memset(mask, 0, sizeof mask);
        /* Plain ifs: Check records every ck_assert it passes, which would
         * cost a write per element. */
        for (int i = 0; i < N_ELEMS; i++) {
            if (!mask[i] && got[i] != TT_POISON)
                ck_abort_msg("call %ld (op %d, %s): output element %d outside the views was written", n, c.op,
                             what, i);
            if (!same_bits(got[i], ref[i]))
                ck_abort_msg("call %ld (op %d): element %d is 0x%08x, host 0x%08x", n, c.op, i, got[i], ref[i]);
        }
        if (s_dut == TALLY_OK && c.want_consumed)
            ck_assert_msg(c_dut == c_host, "call %ld: consumed %llu vs host %llu", n, (unsigned long long)c_dut,
                          (unsigned long long)c_host);
        if (s_dut == TALLY_OK) {
            valid++;
            repoison(&dut);
            repoison(&host);
        } else {
            rejected++;
            per_corruption[corruption >= 0 ? corruption : 0]++;
        }
    }
    fprintf(stderr, "fuzz_api %s: %ld calls, %ld valid and equal to the host, %ld rejected, 0 false accepts, "
            "0 out-of-view writes\n", tally_backend_name(tt_backend()), calls, valid, rejected);
    for (int k = 0; k < N_CORRUPTIONS; k++) fprintf(stderr, "  %-26s %ld\n", corruptions[k].name, per_corruption[k]);
    tally_buffer_release(foreign_buf);
    tally_context_release(other);
    free_side(&dut);
    free_side(&host);
}
END_TEST

TT_SUITE("fuzz_api", {.name = "fuzz", .tests = {fuzz_every_op}, .timeout = 600})
