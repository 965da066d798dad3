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

/* Every kernel that backends/gpu/kernel_list.h names must exist here: a
 * missing or misspelt one fails this compilation (on any machine with nvcc)
 * instead of failing cuModuleGetFunction on a GPU machine. */
#define TALLY__KERNEL(name) typedef decltype(&name) tally__kernel_defined_##name;
#include "kernel_list.h"
#undef TALLY__KERNEL
