/*
 * kernels/dm_terms.h - the Dirichlet-multinomial element term of the
 * kernels, shared by kernels/dm.h and its CPU twin in kernels/cpu.h.
 */
#ifndef TALLY_KERNELS_DM_TERMS_H
#define TALLY_KERNELS_DM_TERMS_H

#include "tree.h"

/* Counts below this that are whole numbers take lgamma(n + 1) from a table
 * each group builds once (the coefficient's term). */
#define TALLY_K_DM_FACT_TABLE TALLY_K_GROUP_SIZE

/*
 * tally_dm_term(n, a, flags) with lgamma(a) given as lga, lgamma(n + a)
 * given as lgn when has_lgn (from the TALLY_K_DM_ALPHA_TABLE table) and
 * lgamma(n + 1) taken from fact[] when n is a whole number below
 * TALLY_K_DM_FACT_TABLE: the same operations in the same order as terms.h
 * (the tables hold values of the same tally_lgammaf at the same float
 * arguments), so the same bits, with at most one lgamma call per nonzero
 * count instead of three. Keep in step with tally_dm_term.
 */
TALLY_FN float tally_k_dm_term(float n, float a, float lga, float lgn, int has_lgn, TALLY_LOCAL const float *fact,
                               tally_u32 flags)
{
    if (n == 0.0f) return 0.0f;
    float v = (has_lgn ? lgn : tally_lgammaf(n + a)) - lga;
    if (flags & TALLY_DM_WITH_COEFFICIENT) {
        float lg1;
        if (n >= 0.0f && n < (float)TALLY_K_DM_FACT_TABLE && n == tally_floor(n))
            lg1 = fact[(tally_u32)n];
        else
            lg1 = tally_lgammaf(n + 1.0f);
        v = v - lg1;
    }
    if (n < 0.0f) v = TALLY_F32_NAN;
    return v;
}

#endif /* TALLY_KERNELS_DM_TERMS_H */
