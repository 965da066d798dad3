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
