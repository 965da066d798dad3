/*
 * kernels/backward_abi.h - the codes that the gradient kernels
 * (kernels/backward.h) and their launcher (backends/gpu/gpu_backward.c)
 * agree on. Plain #defines, valid C11, CUDA C++ and OpenCL C.
 */
#ifndef TALLY_KERNEL_BACKWARD_ABI_H
#define TALLY_KERNEL_BACKWARD_ABI_H

/* Which outputs tally_k_kl_backward writes. */
#define TALLY_K_BW_WANT_A 1u
#define TALLY_K_BW_WANT_B 2u

/* Flags of tally_k_gmm_bw_rows. */
#define TALLY_K_GMM_BW_SAMPLE 1u
#define TALLY_K_GMM_BW_HAS_GQ 2u
#define TALLY_K_GMM_BW_HAS_GZ_IN 4u
#define TALLY_K_GMM_BW_WANT_GZ 8u
#define TALLY_K_GMM_BW_WANT_MU 16u
#define TALLY_K_GMM_BW_WANT_LV 32u
#define TALLY_K_GMM_BW_WANT_W 64u

/* Rows per block of tally_k_dm_bw_elements's transposed (shared alpha) mode:
 * a column's run of 64 floats is two 128-byte lines, and the 15 digammas
 * that tabulate a column are paid once per 64 elements. */
#define TALLY_K_DM_BW_ROWS 64u
/* Whole counts 0 .. TALLY_K_DM_BW_TABLE_N - 1 take their digamma from the
 * per-column table (TALLY_K_DM_BW_TABLE_N * 256 floats of local memory). */
#define TALLY_K_DM_BW_TABLE_N 16u

#endif /* TALLY_KERNEL_BACKWARD_ABI_H */
