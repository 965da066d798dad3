/*
 * src/check.h - ops.c's argument checks, for the other front-end files
 * (src/ops_backward.c). The rules live in ops.c only; src/check_export.inc,
 * included at the end of ops.c, defines these thin entry points to them so
 * that every op checks its views in exactly the same way.
 */
#ifndef TALLY_CHECK_H
#define TALLY_CHECK_H

#include "internal.h"

/* A view of `dtype` on ctx, converted to the backend's form. */
tally_status tally__check_view(tally_context *ctx, const char *op, const char *arg, tally_view v, tally_dtype dtype,
                               tally__array *out);
/* An output of n values (1 x n or n x 1), stored as an n x 1 array. */
tally_status tally__check_vector(tally_context *ctx, const char *op, const char *arg, tally_view v,
                                 tally_dtype dtype, uint64_t n, tally__array *out);
/* out shares no element with in. */
tally_status tally__check_disjoint(tally_context *ctx, const char *op, const char *out_name, const tally__array *out,
                                   const char *in_name, const tally__array *in);

#endif
