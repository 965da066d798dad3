/*
 * backends/host/host_kernels.c - the host backend's vector kernels (see
 * host_simd.h and docs/host-simd.md). This one source is compiled once per
 * instruction set; meson passes TALLY_HOST_KERNELS (the table's symbol),
 * TALLY_HOST_KERNELS_NAME (its name) and the -m flags of that set.
 *
 * The loops below are plain C over contiguous arrays whose iterations are
 * independent (one element, one lane), written so that the compiler's
 * vectoriser turns them into SIMD code: the same IEEE operations on several
 * elements at once. Nothing here reassociates or contracts (the build has
 * -ffp-contract=off and no fast-math), and every special value is a select
 * inside the shared portable functions, so each vector lane computes the
 * bits the scalar reference computes. -fno-trapping-math is the one extra
 * flag: it lets the compiler evaluate both sides of a select (as the GPU
 * does), which changes floating-point exception flags, never a value; tally
 * never reads those flags.
 */
#include <string.h>

#include "host_simd.h"
#include "tally/terms.h"
#include "tally/terms_backward.h"

#ifndef TALLY_HOST_KERNELS
#  error "meson defines TALLY_HOST_KERNELS and TALLY_HOST_KERNELS_NAME"
#endif

/* One step of a tile covers at most 256 lanes x 4 elements. */
#define STEP_MAX (TALLY_TREE_LANES * 4u)

/* Points at elements [k0, k0 + n) of v: directly when they are contiguous
 * in memory, else gathered row piece by row piece into buf. */
static const float *vec_chunk(const tally__host_vec *v, uint64_t k0, uint64_t n, float *buf)
{
    uint64_t r = k0 / v->cols, c = k0 % v->cols;
    if (v->stride == v->cols || c + n <= v->cols) return v->p + r * v->stride + c;
    for (uint64_t done = 0; done < n; r++, c = 0) {
        uint64_t len = v->cols - c < n - done ? v->cols - c : n - done;
        memcpy(buf + done, v->p + r * v->stride + c, len * sizeof *buf);
        done += len;
    }
    return buf;
}

/* ---- Element maps: out[i] = term(inputs[i]) for i < n. ---- */

static void map_square(const float *restrict a, uint64_t n, float *restrict out)
{
    for (uint64_t i = 0; i < n; i++) out[i] = a[i] * a[i];
}

/* The shifted exponentials of logsumexp. Their arguments are <= 0 and
 * rarely below -87, where tally_pm_expf_normal gives tally_expf's bits with
 * one scaling and no clamps; one loop tests the range and computes that
 * form, and a chunk with an argument outside it is computed again by
 * tally_expf (its short results are discarded), as the PoCL twin does
 * (kernels/cpu.h). */
static void map_shifted_exp(const float *restrict a, float shift, uint64_t n, float *restrict out)
{
    int ok = 1;
    for (uint64_t i = 0; i < n; i++) {
        const float v = a[i] - shift;
        ok &= tally_pm_expf_normal_ok(v);
        out[i] = tally_pm_expf_normal(v);
    }
    if (!ok)
        for (uint64_t i = 0; i < n; i++) out[i] = tally_expf(a[i] - shift);
}

static void map_exp(const float *restrict a, uint64_t n, float *restrict out)
{
    for (uint64_t i = 0; i < n; i++) out[i] = tally_expf(a[i]);
}

/* The KL term with its flags as compile-time constants in each copy, so
 * that the vectoriser sees straight-line code. The fast form stands for a
 * whole chunk only when every element of it qualifies (which is what real
 * data does); otherwise every element takes tally_kl_term, whose result is
 * the same bits either way (terms.h). The test and the fast form share one
 * loop, so the chunk is read once, its loads spread across the
 * logarithms (the KL of 4096x16384 on 2 cores: 37.6 to 34.8 ms,
 * bench/RESULTS.md CPU run N); a failed chunk's fast terms are discarded. */
#define DEFINE_KL_MAP(suffix, FLAGS)                                                        \
    static void map_kl_##suffix(const float *restrict x, const float *restrict t, uint64_t n, \
                                float *restrict out)                                        \
    {                                                                                       \
        int ok = 1;                                                                         \
        for (uint64_t i = 0; i < n; i++) {                                                  \
            ok &= tally_kl_fast_ok(x[i], t[i], (FLAGS));                                    \
            out[i] = tally_kl_term_fast(x[i], t[i], (FLAGS));                               \
        }                                                                                   \
        if (!ok)                                                                            \
            for (uint64_t i = 0; i < n; i++) out[i] = tally_kl_term(x[i], t[i], (FLAGS));   \
    }
DEFINE_KL_MAP(0, 0u)
DEFINE_KL_MAP(1, 1u)
DEFINE_KL_MAP(2, 2u)
DEFINE_KL_MAP(3, 3u)

/* The KL term from logits over one row's run of elements, its statistics
 * and flags constants in each copy (the five forms the front end accepts),
 * so that the loop is straight-line code the compiler can vectorise. */
#define DEFINE_KL_LOGITS_MAP(suffix, FLAGS)                                                              \
    static void map_kl_logits_##suffix(const float *restrict x, const float *restrict y, uint64_t n,     \
                                       const float *st, float *restrict out)                             \
    {                                                                                                    \
        const float mx = st[0], lx = st[1], my = st[2], ly = st[3], ry = st[4];                          \
        for (uint64_t i = 0; i < n; i++) out[i] = tally_kl_logits_term(x[i], y[i], mx, lx, my, ly, ry, (FLAGS)); \
    }
DEFINE_KL_LOGITS_MAP(4, 4u)
DEFINE_KL_LOGITS_MAP(5, 5u)
DEFINE_KL_LOGITS_MAP(8, 8u)
DEFINE_KL_LOGITS_MAP(10, 10u)
DEFINE_KL_LOGITS_MAP(12, 12u)

/* The terms of elements k0 .. k0 + n - 1 of src (KL_LOGITS), row by row. */
static void map_kl_logits(const float *x, const float *y, const tally__host_src *src, uint64_t k0, uint64_t n,
                          float *out)
{
    const uint64_t cols = src->in[0].cols;
    uint64_t row = k0 / cols, c = k0 % cols;
    for (uint64_t i = 0; i < n; row++, c = 0) {
        const uint64_t len = cols - c < n - i ? cols - c : n - i;
        const float *st = src->stats + row * 5u;
        switch (src->flags) {
        case 4u: map_kl_logits_4(x + i, y + i, len, st, out + i); break;
        case 5u: map_kl_logits_5(x + i, y + i, len, st, out + i); break;
        case 8u: map_kl_logits_8(x + i, y + i, len, st, out + i); break;
        case 10u: map_kl_logits_10(x + i, y + i, len, st, out + i); break;
        default: map_kl_logits_12(x + i, y + i, len, st, out + i); break;
        }
        i += len;
    }
}

static void map_kl(const float *x, const float *t, uint32_t flags, uint64_t n, float *out)
{
    switch (flags & 3u) {
    case 0u: map_kl_0(x, t, n, out); break;
    case 1u: map_kl_1(x, t, n, out); break;
    case 2u: map_kl_2(x, t, n, out); break;
    default: map_kl_3(x, t, n, out); break;
    }
}

/* tally_dm_term(n, tally_expf(la), flags) as selects: for n == 0 the term
 * is 0 and for n < 0 NaN whatever the lgamma values are, so computing them
 * anyway and selecting gives the same bits as the early return. */
#define DEFINE_DM_MAP(suffix, COEF)                                                          \
    static void map_dm_##suffix(const float *restrict cn, const float *restrict la, uint64_t n, \
                                float *restrict out)                                         \
    {                                                                                        \
        for (uint64_t i = 0; i < n; i++) {                                                   \
            float c = cn[i], a = tally_expf(la[i]);                                          \
            float v = tally_lgammaf(c + a) - tally_lgammaf(a);                               \
            if (COEF) v = v - tally_lgammaf(c + 1.0f);                                       \
            v = (c < 0.0f) ? TALLY_F32_NAN : v;                                              \
            out[i] = (c == 0.0f) ? 0.0f : v;                                                 \
        }                                                                                    \
    }
DEFINE_DM_MAP(0, 0)
DEFINE_DM_MAP(1, 1)

/* The DM term through the table (host_simd.h) for a chunk of columns
 * v0 .. v0+n-1 whose counts are all whole numbers in [0, 64); any other
 * chunk takes map_dm. Same operations on the same values as tally_dm_term:
 * lgamma(c + a) - lgamma(a) [- lgamma(c + 1)], 0 for c == 0. */
#define DEFINE_DM_TABLE_MAP(suffix, COEF)                                                     \
    static void map_dm_table_##suffix(const float *restrict cn, const float *restrict table, uint64_t V, \
                                      uint64_t v0, uint64_t n, float *restrict out)           \
    {                                                                                         \
        const uint64_t N = TALLY__HOST_DM_TABLE_N;                                            \
        const float *restrict lga = table + V * N + v0, *restrict lg1 = table + V * (N + 1);  \
        const float *restrict rows = table + v0 * N;                                          \
        for (uint64_t i = 0; i < n; i++) {                                                    \
            int32_t c = (int32_t)cn[i];                                                       \
            float v = rows[i * N + (uint64_t)c] - lga[i];                                     \
            if (COEF) v = v - lg1[c];                                                         \
            out[i] = (c == 0) ? 0.0f : v;                                                     \
        }                                                                                     \
    }
DEFINE_DM_TABLE_MAP(0, 0)
DEFINE_DM_TABLE_MAP(1, 1)

static int dm_whole_small(const float *restrict cn, uint64_t n)
{
    int ok = 1;
    for (uint64_t i = 0; i < n; i++) {
        float c = cn[i];
        int in = (c >= 0.0f) & (c < (float)TALLY__HOST_DM_TABLE_N);
        float safe = in ? c : 0.0f; /* the conversion below stays defined */
        ok &= in & (safe == (float)(int32_t)safe);
    }
    return ok;
}

static void dm_table(const float *la, uint64_t V, float *table)
{
    const uint64_t N = TALLY__HOST_DM_TABLE_N;
    for (uint64_t v = 0; v < V; v++) {
        const float a = tally_expf(la[v]);
        for (uint64_t c = 0; c < N; c++) table[v * N + c] = tally_lgammaf((float)c + a);
        table[V * N + v] = tally_lgammaf(a);
    }
    for (uint64_t c = 0; c < N; c++) table[V * (N + 1) + c] = tally_lgammaf((float)c + 1.0f);
}

static void map_gauss(const float *restrict z, const float *restrict mu, const float *restrict lv, uint64_t n,
                      float *restrict out)
{
    for (uint64_t i = 0; i < n; i++) out[i] = tally_gauss_term(z[i], mu[i], lv[i]);
}

/* The terms of elements [k0, k0 + n) of src: a pointer to them, either
 * into src's own memory (PLAIN, contiguous) or into out. */
static const float *terms_of(const tally__host_src *src, uint64_t k0, uint64_t n, float *out, float *g0, float *g1,
                             float *g2)
{
    if (src->term == TALLY__HOST_TERM_DM_TABLE && src->table == NULL) {
        tally__host_src plain = *src;
        plain.term = TALLY__HOST_TERM_DM;
        return terms_of(&plain, k0, n, out, g0, g1, g2);
    }
    const float *a = vec_chunk(&src->in[0], k0, n, g0);
    switch (src->term) {
    case TALLY__HOST_TERM_PLAIN: return a;
    case TALLY__HOST_TERM_SQUARE: map_square(a, n, out); break;
    case TALLY__HOST_TERM_SHIFTED_EXP: map_shifted_exp(a, src->shift, n, out); break;
    case TALLY__HOST_TERM_EXP: map_exp(a, n, out); break;
    case TALLY__HOST_TERM_KL: map_kl(a, vec_chunk(&src->in[1], k0, n, g1), src->flags, n, out); break;
    case TALLY__HOST_TERM_DM:
        if (src->flags & TALLY_DM_WITH_COEFFICIENT)
            map_dm_1(a, vec_chunk(&src->in[1], k0, n, g1), n, out);
        else
            map_dm_0(a, vec_chunk(&src->in[1], k0, n, g1), n, out);
        break;
    case TALLY__HOST_TERM_DM_TABLE: {
        /* A row vector: element k is column k. */
        const uint64_t V = src->in[1].cols;
        if (!dm_whole_small(a, n)) {
            tally__host_src plain = *src;
            plain.term = TALLY__HOST_TERM_DM;
            return terms_of(&plain, k0, n, out, g0, g1, g2);
        }
        if (src->flags & TALLY_DM_WITH_COEFFICIENT)
            map_dm_table_1(a, src->table, V, k0, n, out);
        else
            map_dm_table_0(a, src->table, V, k0, n, out);
        break;
    }
    case TALLY__HOST_TERM_GAUSS:
        map_gauss(a, vec_chunk(&src->in[1], k0, n, g1), vec_chunk(&src->in[2], k0, n, g2), n, out);
        break;
    case TALLY__HOST_TERM_KL_LOGITS: map_kl_logits(a, vec_chunk(&src->in[1], k0, n, g1), src, k0, n, out); break;
    }
    return out;
}

/* ---- The lanes of one step. ---- */

/* Lane j folds quad j (elements t[4j] .. t[4j+3]) into acc[j]; `first`
 * starts each accumulator from its quad's first element, as the reference
 * does on a lane's first step. One copy per combine, so that each loop is
 * straight-line code over independent lanes. */
#define DEFINE_FOLD(suffix, OP)                                                             \
    static void fold_##suffix(float *restrict acc, const float *restrict t, uint64_t quads, int first) \
    {                                                                                       \
        if (first) {                                                                        \
            for (uint64_t j = 0; j < quads; j++) {                                          \
                float a = t[4 * j];                                                         \
                a = OP(a, t[4 * j + 1]);                                                    \
                a = OP(a, t[4 * j + 2]);                                                    \
                acc[j] = OP(a, t[4 * j + 3]);                                               \
            }                                                                               \
        } else {                                                                            \
            for (uint64_t j = 0; j < quads; j++) {                                          \
                float a = acc[j];                                                           \
                a = OP(a, t[4 * j]);                                                        \
                a = OP(a, t[4 * j + 1]);                                                    \
                a = OP(a, t[4 * j + 2]);                                                    \
                acc[j] = OP(a, t[4 * j + 3]);                                               \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
    static void pairs_##suffix(float *restrict lo, const float *restrict hi, uint64_t n)   \
    {                                                                                       \
        for (uint64_t j = 0; j < n; j++) lo[j] = OP(lo[j], hi[j]);                          \
    }
#define OP_SUM(a, b) ((a) + (b))
DEFINE_FOLD(sum, OP_SUM)
DEFINE_FOLD(min, tally_min_nan)
DEFINE_FOLD(max, tally_max_nan)

static float tile_reduce(const tally__tree_level *level, uint64_t tile, int kind, const tally__host_src *src)
{
    float lane[TALLY_TREE_LANES];
    float buf[STEP_MAX], g0[STEP_MAX], g1[STEP_MAX], g2[STEP_MAX];
    const uint64_t lanes = level->lanes, steps = level->quads_per_lane, n = level->n;
    const uint64_t quads = n / 4 + (n % 4 != 0);
    const uint64_t base = tile * lanes * steps;
    const uint64_t active = quads - base < lanes ? quads - base : lanes;
    void (*fold)(float *restrict, const float *restrict, uint64_t, int) =
        kind == TALLY_COMBINE_MIN ? fold_min : kind == TALLY_COMBINE_MAX ? fold_max : fold_sum;
    void (*pairs)(float *restrict, const float *restrict, uint64_t) =
        kind == TALLY_COMBINE_MIN ? pairs_min : kind == TALLY_COMBINE_MAX ? pairs_max : pairs_sum;
    for (uint64_t q = 0; q < steps; q++) {
        const uint64_t q0 = base + q * lanes;
        if (q0 >= quads) break;
        /* Lanes 0 .. nq-1 have a quad in this step: elements [k0, k1). */
        const uint64_t nq = quads - q0 < lanes ? quads - q0 : lanes;
        const uint64_t k0 = q0 * 4, k1 = (q0 + nq) * 4 < n ? (q0 + nq) * 4 : n;
        const float *t = terms_of(src, k0, k1 - k0, buf, g0, g1, g2);
        const uint64_t full = (k1 - k0) / 4;
        fold(lane, t, full, q == 0);
        if (full < nq) {
            /* The vector's last quad is short (only in the last step). */
            float a = q == 0 ? t[4 * full] : tally_combine(kind, lane[full], t[4 * full]);
            for (uint64_t c = 4 * full + 1; c < k1 - k0; c++) a = tally_combine(kind, a, t[c]);
            lane[full] = a;
        }
    }
    for (uint64_t s = lanes / 2; s >= 1; s /= 2)
        if (s < active) pairs(lane, lane + s, active - s < s ? active - s : s);
    return lane[0];
}

/* ---- Random fills. ---- */

#define FILL_BLOCKS 256u

/* Blocks q0 .. q0+nb-1 of the stream, each giving four outputs. */
static void fill_blocks(tally_distribution dist, uint64_t seed, uint64_t sub, uint64_t q0, uint64_t nb,
                        float *restrict out)
{
    switch (dist) {
    case TALLY_DIST_RAW:
        for (uint64_t b = 0; b < nb; b++) {
            tally_philox4 r = tally_stream_block(seed, sub, q0 + b);
            memcpy(out + 4 * b, r.v, sizeof r.v); /* bits, never through float arithmetic */
        }
        break;
    case TALLY_DIST_UNIFORM:
        for (uint64_t b = 0; b < nb; b++) {
            tally_philox4 r = tally_stream_block(seed, sub, q0 + b);
            for (int w = 0; w < 4; w++) out[4 * b + w] = tally_uniform_from_bits(r.v[w]);
        }
        break;
    case TALLY_DIST_NORMAL:
        for (uint64_t b = 0; b < nb; b++) {
            tally_philox4 r = tally_stream_block(seed, sub, q0 + b);
            float f0, f1, f2, f3;
            tally_normal_pair(r.v[0], r.v[1], &f0, &f1);
            tally_normal_pair(r.v[2], r.v[3], &f2, &f3);
            out[4 * b] = f0;
            out[4 * b + 1] = f1;
            out[4 * b + 2] = f2;
            out[4 * b + 3] = f3;
        }
        break;
    }
}

static void fill_range(tally_distribution dist, uint64_t seed, uint64_t sub, uint64_t i0, uint64_t n, float *out)
{
    float tmp[4 * FILL_BLOCKS];
    uint64_t c = 0;
    while (c < n) {
        /* Whole blocks straight into out where aligned to the stream's
         * blocks; the partial blocks at either end through tmp. */
        uint64_t i = i0 + c, q = i / 4, skip = i % 4;
        if (skip == 0 && n - c >= 4) {
            uint64_t nb = (n - c) / 4 < FILL_BLOCKS ? (n - c) / 4 : FILL_BLOCKS;
            fill_blocks(dist, seed, sub, q, nb, out + c);
            c += 4 * nb;
        } else {
            fill_blocks(dist, seed, sub, q, 1, tmp);
            uint64_t take = 4 - skip < n - c ? 4 - skip : n - c;
            memcpy(out + c, tmp + skip, take * sizeof *out);
            c += take;
        }
    }
}

static void kl_map(const float *x, const float *t, uint32_t flags, uint64_t n, float *out)
{
    for (uint64_t c = 0; c < n; c += STEP_MAX) {
        uint64_t len = n - c < STEP_MAX ? n - c : STEP_MAX;
        map_kl(x + c, t + c, flags, len, out + c);
        for (uint64_t i = 0; i < len; i++) out[c + i] = tally_canonical(out[c + i]);
    }
}

/* The KL gradients of one chunk (n <= STEP_MAX), the flags a constant in
 * each copy and the choices of logarithm and quotient made for the whole
 * chunk, as the forward's map does: tally_kl_grad_form with fast 1 where
 * every element qualifies, else 0, and with the short quotient where every
 * element's quotient t / p (e / p under LOG_TARGET) has a normal result,
 * all of which give tally_kl_grad's bits. The short forms have no branch,
 * so the loop becomes vector code. */
#define DEFINE_KL_GRAD_MAP(suffix, FLAGS)                                                                  \
    static void map_kl_grad_##suffix(const float *restrict x, const float *restrict t,                     \
                                     const float *restrict g, uint64_t n, float *restrict ga,              \
                                     float *restrict gb)                                                   \
    {                                                                                                      \
        int ok = 1, div_ok = 1;                                                                            \
        for (uint64_t i = 0; i < n; i++) ok &= tally_kl_fast_ok(x[i], t[i], (FLAGS));                      \
        if (ok && ((FLAGS) & TALLY_KL_INPUT_IS_PROB)) {                                                    \
            /* Under LOG_TARGET the dividend is e = tally_expf(t). */                                      \
            for (uint64_t i = 0; i < n; i++)                                                               \
                div_ok &= tally_pm_divf_normal_ok(((FLAGS) & TALLY_KL_LOG_TARGET) ? tally_expf(t[i]) : t[i], x[i]); \
        }                                                                                                  \
        if (ok && div_ok) {                                                                                \
            for (uint64_t i = 0; i < n; i++) {                                                             \
                const tally_grad2 d = tally_kl_grad_form(x[i], t[i], g[i], (FLAGS), 1, 1);                 \
                ga[i] = d.a;                                                                               \
                gb[i] = d.b;                                                                               \
            }                                                                                              \
        } else {                                                                                           \
            for (uint64_t i = 0; i < n; i++) {                                                             \
                const tally_grad2 d = tally_kl_grad_form(x[i], t[i], g[i], (FLAGS), ok, 0);                \
                ga[i] = d.a;                                                                               \
                gb[i] = d.b;                                                                               \
            }                                                                                              \
        }                                                                                                  \
    }
DEFINE_KL_GRAD_MAP(0, 0u)
DEFINE_KL_GRAD_MAP(1, 1u)
DEFINE_KL_GRAD_MAP(2, 2u)
DEFINE_KL_GRAD_MAP(3, 3u)

static void kl_grad_map(const float *x, const float *t, const float *g, float g_scalar, uint32_t flags, uint64_t n,
                        float *gx, float *gt)
{
    float gbuf[STEP_MAX], ga[STEP_MAX], gb[STEP_MAX];
    if (g == NULL)
        for (uint64_t i = 0; i < STEP_MAX; i++) gbuf[i] = g_scalar;
    for (uint64_t c = 0; c < n; c += STEP_MAX) {
        const uint64_t len = n - c < STEP_MAX ? n - c : STEP_MAX;
        const float *gc = g != NULL ? g + c : gbuf;
        switch (flags & 3u) {
        case 0u: map_kl_grad_0(x + c, t + c, gc, len, ga, gb); break;
        case 1u: map_kl_grad_1(x + c, t + c, gc, len, ga, gb); break;
        case 2u: map_kl_grad_2(x + c, t + c, gc, len, ga, gb); break;
        default: map_kl_grad_3(x + c, t + c, gc, len, ga, gb); break;
        }
        if (gx != NULL)
            for (uint64_t i = 0; i < len; i++) gx[c + i] = tally_canonical(ga[i]);
        if (gt != NULL)
            for (uint64_t i = 0; i < len; i++) gt[c + i] = tally_canonical(gb[i]);
    }
}

/* One component's elements of the mixture's gradients, tally_gmm_grad_elem
 * with the component's weight c: a plain loop, vector code. */
static void gmm_grad_map(const float *restrict z, const float *restrict mu, const float *restrict lv, float c,
                         uint64_t n, float *restrict ga, float *restrict gb)
{
    for (uint64_t i = 0; i < n; i++) {
        const tally_grad2 e = tally_gmm_grad_elem(z[i], mu[i], lv[i], c);
        ga[i] = e.a;
        gb[i] = e.b;
    }
}

/* The maximum of p[0 .. n-1] where no order of comparison can change it
 * (tally_max_key in tally/terms.h): integer reductions in one plain loop,
 * which the compiler vectorises. 0 when the order might matter (a NaN, a
 * zero maximum); the caller then runs the tree. */
static int max_direct(const float *restrict p, uint64_t n, float *out)
{
    uint32_t best = 0, nan = 0;
    for (uint64_t i = 0; i < n; i++) {
        const uint32_t b = tally_as_u32(p[i]);
        const uint32_t key = tally_max_key(b);
        best = key > best ? key : best;
        nan |= tally_bits_nan(b);
    }
    const float m = tally_as_f32(tally_max_unkey(best));
    if (nan || m == 0.0f) return 0;
    *out = m;
    return 1;
}

static void terms_range(const tally__host_src *src, uint64_t k0, uint64_t n, float *out)
{
    float buf[STEP_MAX], g0[STEP_MAX], g1[STEP_MAX], g2[STEP_MAX];
    for (uint64_t c = 0; c < n; c += STEP_MAX) {
        uint64_t len = n - c < STEP_MAX ? n - c : STEP_MAX;
        const float *t = terms_of(src, k0 + c, len, buf, g0, g1, g2);
        memcpy(out + c, t, len * sizeof *out);
    }
}

const tally__host_kernels TALLY_HOST_KERNELS = {
    .name = TALLY_HOST_KERNELS_NAME,
    .tile = tile_reduce,
    .fill = fill_range,
    .kl_map = kl_map,
    .kl_grad_map = kl_grad_map,
    .gmm_grad_map = gmm_grad_map,
    .terms = terms_range,
    .dm_table = dm_table,
    .max_direct = max_direct,
};
