#pragma OPENCL FP_CONTRACT OFF
/*
 * kernels_cl/tally.cl - tally's OpenCL C 1.2 program: the shared kernel
 * bodies of kernels/. Contraction is switched off on the first line because
 * an a*b+c fused into one fma rounds once instead of twice and changes the
 * bits (docs: reproducibility.md). scripts/embed_cl.py resolves the
 * includes at build time and bakes the result into libtally, so nothing is
 * read from disk at run time. Built with "-cl-std=CL1.2" only; relaxed or
 * fast math, mad contraction and denormal flushing options are never used.
 */
#include "tally_kernels.h"
#if !TALLY_CL_CPU
#include "backward.h"
#endif
