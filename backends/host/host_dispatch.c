/*
 * backends/host/host_dispatch.c - picks the host kernels for a context
 * (see host_simd.h): a chain from the best implementation down to scalar,
 * the first that this CPU runs wins, unless TALLY_HOST_IMPL names one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_simd.h"

static int always(void) { return 1; }

#if TALLY_HOST_HAVE_X86_ISAS
/* __builtin_cpu_supports also checks that the OS saves the vector
 * registers (XCR0), so a feature the kernel does not enable reads as 0. */
static int has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static int has_avx512(void)
{
    __builtin_cpu_init();
    return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}
#endif

/* Best first. */
static const tally__host_impl impls[] = {
#if TALLY_HOST_HAVE_X86_ISAS
    {.name = "avx512", .kernels = &tally__host_kernels_avx512, .supported = has_avx512},
    {.name = "avx2", .kernels = &tally__host_kernels_avx2, .supported = has_avx2},
#endif
    {.name = TALLY_HOST_BASE_NAME, .kernels = &tally__host_kernels_base, .supported = always},
    {.name = "scalar", .kernels = NULL, .supported = always},
};
#define N_IMPLS (sizeof impls / sizeof impls[0])

size_t tally__host_impls(const tally__host_impl **out)
{
    *out = impls;
    return N_IMPLS;
}

tally_status tally__host_pick_kernels(const tally__host_kernels **out, const char **name, char *why,
                                      size_t why_size)
{
    const char *want = getenv("TALLY_HOST_IMPL");
    if (want != NULL && (want[0] == '\0' || strcmp(want, "best") == 0)) want = NULL;
    for (size_t i = 0; i < N_IMPLS; i++) {
        if (want != NULL && strcmp(want, impls[i].name) != 0) continue;
        if (!impls[i].supported()) {
            if (want == NULL) continue;
            snprintf(why, why_size, "host backend: TALLY_HOST_IMPL=%s is not supported by this CPU", want);
            return TALLY_INVALID_ARGUMENT;
        }
        *out = impls[i].kernels;
        *name = impls[i].name;
        return TALLY_OK;
    }
    char known[128] = "";
    for (size_t i = 0; i < N_IMPLS; i++) {
        strncat(known, impls[i].name, sizeof known - strlen(known) - 1);
        strncat(known, i + 1 < N_IMPLS ? ", " : "", sizeof known - strlen(known) - 1);
    }
    snprintf(why, why_size, "host backend: unknown TALLY_HOST_IMPL=%s (known: %s, best)", want, known);
    return TALLY_INVALID_ARGUMENT;
}
