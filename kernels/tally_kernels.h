/*
 * kernels/tally_kernels.h - every kernel body, written once against the
 * kernel vocabulary of tally/dialect.h. kernels_cl/tally.cl includes this
 * file as the OpenCL C program; the CUDA backend compiles it with nvcc.
 * The kernels and their argument lists are the tables of kernel_list.h,
 * from which the signatures here and the backends' launches are generated.
 */
#ifndef TALLY_KERNELS_H
#define TALLY_KERNELS_H

#include "tree.h"
#include "halves.h"
/* The CPU-shaped twins (bodies only in the program an OpenCL CPU device
 * builds with TALLY_CL_CPU=1, which holds nothing else: the helpers above
 * come first so that this program has them too). */
#include "cpu.h"
#if !TALLY_CL_CPU
#include "reduce.h"
#include "kl.h"
#include "dm.h"
#include "gmm.h"
#include "gmm_warp.h"
#include "rng.h"
#include "math_eval.h"
#endif

#endif /* TALLY_KERNELS_H */
