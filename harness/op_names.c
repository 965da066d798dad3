/*
 * harness/op_names.c - see op_names.h.
 */
#include "op_names.h"

#include <string.h>

static const char *const names[HARNESS_N_OPS] = {
#define HARNESS__OP_NAME(id, name, reduce_op) [HARNESS_OP_##id] = #name,
    TALLY_OP_MAP(HARNESS__OP_NAME)
#undef HARNESS__OP_NAME
};

static const tally_reduce_op reduce_ops[HARNESS_N_OPS] = {
#define HARNESS__OP_REDUCE(id, name, reduce_op) [HARNESS_OP_##id] = (tally_reduce_op)(reduce_op),
    TALLY_OP_MAP(HARNESS__OP_REDUCE)
#undef HARNESS__OP_REDUCE
};

const char *harness_op_name(harness_op op)
{
    return (unsigned)op < HARNESS_N_OPS ? names[op] : "?";
}

int harness_op_find(const char *name, size_t len)
{
    for (int i = 0; i < HARNESS_N_OPS; i++)
        if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0) return i;
    return -1;
}

tally_reduce_op harness_op_reduce(harness_op op)
{
    return (unsigned)op < HARNESS_N_OPS ? reduce_ops[op] : (tally_reduce_op)0;
}

int harness_op_of_reduce(tally_reduce_op reduce_op)
{
    for (int i = 0; i < HARNESS_N_OPS; i++)
        if (reduce_ops[i] != 0 && reduce_ops[i] == reduce_op) return i;
    return -1;
}
