/*
 * backends/host/host_tree.h - the reduction tree of docs/reduction-tree.md
 * executed in plain C. GPU kernels perform the same combines in the same
 * order with one work-item per lane.
 */
#ifndef TALLY_HOST_TREE_H
#define TALLY_HOST_TREE_H

#include "backend.h"
#include "host_simd.h"

/* The term of element k of the vector being reduced. */
typedef float (*tally__host_term_fn)(const void *state, uint64_t k);

/*
 * Reduces the vector planned by `plan` with combine `kind`
 * (TALLY_COMBINE_SUM/MIN/MAX), each element's value given by term(state, k).
 * parallel: 1 to spread the tiles of level 0 over threads (only for a call
 * not already running inside a parallel loop). Writes the result to *out;
 * an empty plan writes `empty_value`. Returns TALLY_OUT_OF_MEMORY if the
 * partials cannot be allocated.
 */
tally_status tally__host_tree_reduce(const tally__tree_plan *plan, int kind, tally__host_term_fn term,
                                     const void *state, int parallel, float empty_value, float *out);

/*
 * The same reduction through vector kernels `k`: the terms are those of
 * `src` (host_simd.h) and the result has the bits of tally__host_tree_reduce
 * with the matching term function.
 */
tally_status tally__host_tree_reduce_k(const tally__tree_plan *plan, int kind, const tally__host_kernels *k,
                                       const tally__host_src *src, int parallel, float empty_value, float *out);

#endif
