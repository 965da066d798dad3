/*
 * harness/op_names.h - every op by its name, from the one table of tally.h
 * (TALLY_OP_MAP), for the CLI, the tests and tally-bench. The ids are dense
 * (0 .. HARNESS_N_OPS - 1) so that a program keeps its own per-op data in an
 * array indexed by them, with designated initializers.
 *
 * Thread rules: everything here reads constant tables only.
 */
#ifndef TALLY_HARNESS_OP_NAMES_H
#define TALLY_HARNESS_OP_NAMES_H

#include "tally.h"

typedef enum harness_op {
#define HARNESS__OP_ID(id, name, reduce_op) HARNESS_OP_##id,
    TALLY_OP_MAP(HARNESS__OP_ID)
#undef HARNESS__OP_ID
    HARNESS_N_OPS
} harness_op;

/* The op's name as the CLI spells it ("sum", "kl_div_backward"). */
const char *harness_op_name(harness_op op);

/* The op called `name`, or -1 when no op has that name. `len` counts the
 * name's bytes, so that a name inside a comma-separated list needs no copy. */
int harness_op_find(const char *name, size_t len);

/* The tally_reduce_op of a reduction; 0 for any other op. */
tally_reduce_op harness_op_reduce(harness_op op);

/* The op of a tally_reduce_op (HARNESS_OP_SUM for TALLY_SUM, ...); -1 for a
 * value that is not one. */
int harness_op_of_reduce(tally_reduce_op reduce_op);

#endif /* TALLY_HARNESS_OP_NAMES_H */
