/*
 * src/backends.c - the table of compiled-in backends. The build writes
 * tally_backend_list.h with one TALLY__BACKEND(name, KIND) line per backend
 * it compiled, so this file needs no per-backend conditionals.
 */
#include "internal.h"

#define TALLY__BACKEND(name, kind) extern const tally__backend_ops tally__##name##_ops;
#include "tally_backend_list.h"
#undef TALLY__BACKEND

const tally__backend_ops *tally__backend_table(tally_backend backend)
{
#define TALLY__BACKEND(name, kind) \
    if (backend == kind) return &tally__##name##_ops;
#include "tally_backend_list.h"
#undef TALLY__BACKEND
    return NULL;
}

const char *tally__backend_missing_op(const tally__backend_ops *ops)
{
#define TALLY__OP_CHECK(p, name, job_type, need) \
    if (TALLY__OP_NEED_##need && ops->name == NULL) return #name;
    TALLY__JOB_OPS(TALLY__OP_CHECK, )
#undef TALLY__OP_CHECK
    return NULL;
}
