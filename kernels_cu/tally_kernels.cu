/*
 * kernels_cu/tally_kernels.cu - tally's kernels as one CUDA translation unit.
 *
 * The kernel bodies are written once in kernels/ against tally/dialect.h and
 * compiled unchanged here by nvcc and in kernels_cl/ as OpenCL C. This file
 * adds nothing that computes: it only includes the bodies, so the two GPU
 * backends cannot drift apart.
 *
 * The build (backends/cuda/meson.build) compiles it into a fatbin with
 * -fmad=false (no a*b+c contracted into an fma: that changes result bits),
 * keeps the IEEE defaults (-ftz=false -prec-div=true -prec-sqrt=true) and
 * never uses --use_fast_math. The fatbin is embedded in libtally and loaded
 * with cuModuleLoadData; kernels are found by their extern "C" names.
 */
#include "../kernels/tally_kernels.h"
#include "../kernels/backward.h"
#include "../kernels/kernel_list.h"

/* Every kernel that kernels/kernel_list.h lists must exist here with the
 * arguments of its table: a missing or misspelt kernel fails the decltype,
 * and a signature that disagrees with the table (one written by hand, say)
 * fails the redeclaration, since two extern "C" functions may not share a
 * name. Both fail this compilation on any machine with nvcc instead of
 * failing cuModuleGetFunction or a launch on a GPU machine. */
#define TALLY__KERNEL_CHECK(name, args)                                                                        \
    typedef decltype(&tally_k_##name) tally__kernel_defined_##name;                                            \
    TALLY_KERNEL void tally_k_##name(TALLY_K_PARAMS(args));
TALLY_K_KERNELS(TALLY__KERNEL_CHECK)
#undef TALLY__KERNEL_CHECK
