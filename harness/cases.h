/*
 * harness/cases.h - the case catalogue's shapes as data rows: which op
 * families run on each shape, its full and quick sizes and its placement.
 * `tally crosscheck` runs the rows of the op families (each family in row
 * order), tests/check_ops.c the small ones, tally-bench its own rows at its
 * scales; a new shape is one row here.
 *
 * Thread rules: constant data.
 */
#ifndef TALLY_HARNESS_CASES_H
#define TALLY_HARNESS_CASES_H

#include <stddef.h>
#include <stdint.h>

/* Op families (bits): the reductions, KL (and its gradient), Dirichlet-
 * multinomial (and its gradient), categorical, the random fills, the
 * mixtures (rows = batch, cols = dim, components = K), the reductions'
 * special-value rows (NaN, infinities, signed zeros, subnormals),
 * tally-bench's workloads at scale 1 (label = the workload's name; bench
 * scales the rows, or a fill's or vector sum's element count), and KL from
 * logits (the GPU's fused rows, contiguous with cols a power of two in
 * [1024, 16384] and rows * cols a multiple of 16384, labelled "fused", and
 * the general ones; "1e4" rows offset their logits by +-1e4), and the rows
 * of those families on which crosscheck also runs the elementwise outputs
 * (KL with reduction none, uniform and normal fills, the sample's z) as
 * bf16 and f16 views. */
#define HARNESS_FAMILY_MAP(X) \
    X(REDUCE) X(KL) X(DM) X(CATEGORICAL) X(RNG) X(GMM) X(SPECIALS) X(BENCH) X(KL_LOGITS) X(HALF_OUT)

enum {
#define HARNESS__FAMILY_BIT(name) HARNESS__FAMILY_INDEX_##name,
    HARNESS_FAMILY_MAP(HARNESS__FAMILY_BIT)
#undef HARNESS__FAMILY_BIT
    HARNESS__FAMILY_COUNT
};
#define HARNESS_FAMILY(name) (1u << HARNESS__FAMILY_INDEX_##name)

typedef struct harness_shape {
    unsigned families;       /* HARNESS_FAMILY bits */
    int64_t rows, cols;      /* gmm: batch, dim */
    int64_t components;      /* gmm only */
    int64_t quick_rows, quick_cols; /* the sizes under --quick; 0: the full size */
    int strided;             /* placed at an offset with a padded row stride */
    const char *label;
} harness_shape;

/* Every row, in catalogue order; *n gets the count. */
const harness_shape *harness_shapes(size_t *n);

/* The row at its quick (quick != 0) or full size: quick sizes folded in. */
harness_shape harness_shape_at(const harness_shape *s, int quick);

/* The most rows one family has. */
#define HARNESS_MAX_FAMILY_ROWS 32

/* The rows of the families `family` (HARNESS_FAMILY bits, any of them), in
 * catalogue order, each at its quick or full size, into out (room for
 * HARNESS_MAX_FAMILY_ROWS). Returns how many. */
size_t harness_family_rows(unsigned family, int quick, harness_shape *out);

#endif /* TALLY_HARNESS_CASES_H */
