/*
 * harness/cases.c - the shape rows (see cases.h). Within each family the
 * rows keep the order crosscheck has always run them in, so that its cases
 * and their seeds stay the same.
 */
#include "cases.h"

#define R HARNESS_FAMILY(REDUCE)
#define K HARNESS_FAMILY(KL)
#define D HARNESS_FAMILY(DM)
#define C HARNESS_FAMILY(CATEGORICAL)
#define G HARNESS_FAMILY(RNG)
#define M HARNESS_FAMILY(GMM)
#define S HARNESS_FAMILY(SPECIALS)
#define B HARNESS_FAMILY(BENCH)
#define L HARNESS_FAMILY(KL_LOGITS)
#define H HARNESS_FAMILY(HALF_OUT)

static const harness_shape rows[] = {
    /* Matrices: tiny, odd (rows and cols not multiples of 4), strided,
     * two-level trees and large. */
    {.families = R | D | C | G | L, .rows = 1, .cols = 1, .label = "tiny"},
    {.families = R | K | D | C | L, .rows = 2, .cols = 3, .label = "tiny"},
    {.families = R | K | D | C | L, .rows = 7, .cols = 1001, .label = "odd"},
    {.families = R | K, .rows = 5, .cols = 4099, .label = "odd"},
    {.families = R | K | D | C | L | H, .rows = 33, .cols = 517, .strided = 1, .label = "odd"},
    {.families = D, .rows = 512, .cols = 256, .label = "founding"},
    /* A shared alpha's lgamma table (256 rows or more, 2^18 elements or
     * more: tally_k_dm_rows_table and its CPU twin), with a short last quad. */
    {.families = D, .rows = 600, .cols = 1001, .quick_rows = 300, .label = "lgamma table"},
    {.families = R | K | D | L | H, .rows = 3, .cols = 20001, .label = "2-level rows"},
    {.families = R | K | L, .rows = 2, .cols = 16387, .strided = 1, .label = "2-level rows"},
    {.families = R | K | L, .rows = 4096, .cols = 4096, .quick_rows = 1024, .quick_cols = 1024, .label = "large"},
    {.families = R, .rows = 1, .cols = 1000003, .quick_cols = 70001, .label = "2-level vector"},
    {.families = D, .rows = 40000, .cols = 5, .quick_rows = 17000, .label = "2-level batch"},
    {.families = C, .rows = 20001, .cols = 5, .quick_rows = 4000, .label = "many rows"},
    {.families = C, .rows = 65536, .cols = 64, .quick_rows = 4096, .label = "large"},
    {.families = R | S, .rows = 5, .cols = 37, .label = "specials"},
    /* KL from logits beyond the matrices above: the GPU's fused rows (also
     * strided, which takes the general path), odd widths, +-1e4 offsets and
     * rows without columns. */
    {.families = L, .rows = 16, .cols = 1024, .label = "fused"},
    {.families = L, .rows = 32, .cols = 2048, .label = "fused 1e4"},
    {.families = L, .rows = 8, .cols = 16384, .label = "fused"},
    {.families = L, .rows = 16, .cols = 1024, .strided = 1, .label = "fused shape"},
    {.families = L, .rows = 5, .cols = 3, .label = "odd"},
    {.families = L, .rows = 7, .cols = 1000, .label = "odd 1e4"},
    {.families = L, .rows = 3, .cols = 20000, .strided = 1, .label = "2-level rows"},
    {.families = L, .rows = 3, .cols = 0, .label = "empty rows"},
    /* Random fills: one row of draws, or a strided block. */
    {.families = G, .rows = 1, .cols = 3, .label = "tiny"},
    {.families = G | H, .rows = 1, .cols = 7, .label = "odd"},
    {.families = G | H, .rows = 37, .cols = 101, .strided = 1, .label = "odd"},
    {.families = G | H, .rows = 1, .cols = 1000003, .quick_cols = 70001, .label = "large"},
    /* Mixtures: batch x dim with K components. */
    {.families = M, .rows = 1, .components = 1, .cols = 1, .label = "tiny"},
    {.families = M, .rows = 2, .components = 1, .cols = 3, .label = "tiny"},
    {.families = M | H, .rows = 5, .components = 3, .cols = 7, .label = "odd"},
    {.families = M | H, .rows = 33, .components = 5, .cols = 17, .strided = 1, .label = "odd"},
    {.families = M | H, .rows = 256, .components = 4, .cols = 64, .label = "founding"},
    {.families = M, .rows = 3, .components = 2, .cols = 20001, .label = "2-level dim"},
    {.families = M, .rows = 4096, .components = 8, .cols = 128, .quick_rows = 1024, .label = "large"},
    /* tally-bench's workloads, in the order it runs them (bench/README.md). */
    {.families = B, .rows = 1 << 30, .cols = 1, .label = "uniform_fill"},
    {.families = B, .rows = 1 << 30, .cols = 1, .label = "raw_fill"},
    {.families = B, .rows = 1 << 30, .cols = 1, .label = "normal_fill"},
    {.families = B, .rows = 65536, .cols = 64, .label = "categorical"},
    {.families = B, .rows = 256, .components = 4, .cols = 64, .label = "gmm_small"},
    {.families = B, .rows = 65536, .components = 8, .cols = 128, .label = "gmm_large"},
    {.families = B, .rows = 512, .cols = 256, .label = "dm_small"},
    {.families = B, .rows = 65536, .cols = 1024, .label = "dm_large"},
    {.families = B, .rows = 65536, .cols = 1024, .label = "dm_large_row"},
    {.families = B, .rows = 16384, .cols = 16384, .label = "kl"},
    {.families = B, .rows = 16384, .cols = 16384, .label = "kl_log"},
    {.families = B, .rows = 16384, .cols = 16384, .label = "kl_logits"},
    {.families = B, .rows = 1 << 30, .cols = 1, .label = "sum_n1"},
    {.families = B, .rows = 1, .cols = 1 << 30, .label = "sum_1n"},
    {.families = B, .rows = 32768, .cols = 32768, .label = "sum_rc"},
    {.families = B, .rows = 16384, .cols = 16384, .label = "kl_bf16"},
    {.families = B, .rows = 65536, .cols = 1024, .label = "dm_large_bf16"},
    {.families = B, .rows = 65536, .cols = 1024, .label = "sum_rows_bf16"},
    {.families = B, .rows = 65536, .cols = 1024, .label = "sum_rows_f32"},
    {.families = B, .rows = 16384, .cols = 16384, .label = "kl_bw"},
    {.families = B, .rows = 65536, .cols = 1024, .label = "dm_bw"},
    {.families = B, .rows = 65536, .components = 8, .cols = 128, .label = "gmm_bw"},
};

const harness_shape *harness_shapes(size_t *n)
{
    *n = sizeof rows / sizeof rows[0];
    return rows;
}

harness_shape harness_shape_at(const harness_shape *s, int quick)
{
    harness_shape r = *s;
    if (quick && s->quick_rows > 0) r.rows = s->quick_rows;
    if (quick && s->quick_cols > 0) r.cols = s->quick_cols;
    r.quick_rows = r.quick_cols = 0;
    return r;
}

size_t harness_family_rows(unsigned family, int quick, harness_shape *out)
{
    size_t n_all, n = 0;
    const harness_shape *all = harness_shapes(&n_all);
    for (size_t i = 0; i < n_all && n < HARNESS_MAX_FAMILY_ROWS; i++)
        if (all[i].families & family) out[n++] = harness_shape_at(&all[i], quick);
    return n;
}
