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

/* 1: tally_k_kl_backward's quad loop tests each quad once, and a quad
 * whose four pairs all meet the short forms' conditions (positive normal
 * logarithm arguments; for INPUT_IS_PROB a quotient t / x that
 * tally_pm_divf_normal computes) runs them as straight-line code compiled
 * for the flag set (none, or INPUT_IS_PROB alone). Other quads and flag
 * sets take tally_kl_grad element by element. 0 (a bench variant): every
 * quad element by element. The same bits either way. */
#ifndef TALLY_K_KL_BW_SHORT_QUADS
#define TALLY_K_KL_BW_SHORT_QUADS 1u
#endif

/* 1: tally_k_kl_backward's quad loop reads and writes its streams with
 * the evict-first cache hint (TALLY_LOAD_F4_ONCE). Placement only; the
 * same bits. */
#ifndef TALLY_K_KL_BW_STREAMING
#define TALLY_K_KL_BW_STREAMING 0u
#endif

/* Groups of tally_k_kl_backward a compute unit over a contiguous view, on
 * CUDA: the grid is capped at this many a multiprocessor, and the kernel's
 * register bound lets them all run at once (8: 32 registers a work-item,
 * no spill), so the grid is one wave and no multiprocessor is left with a
 * lone group at the end. (The general cap of 16 groups with 46 registers
 * made 3.2 waves, the last a group a multiprocessor: too few loads in
 * flight to keep the memory busy.) OpenCL keeps the general cap. 0 (a
 * bench variant): the general cap with no register bound, as before.
 * Placement only; the same bits. */
#ifndef TALLY_K_KL_BW_GROUPS_PER_CU
#define TALLY_K_KL_BW_GROUPS_PER_CU 8u
#endif
#define TALLY_K_KL_BW_BOUND (TALLY_K_KL_BW_GROUPS_PER_CU > 0u ? TALLY_K_KL_BW_GROUPS_PER_CU : 1u)

/* Flags of tally_k_gmm_bw_rows. */
#define TALLY_K_GMM_BW_SAMPLE 1u
#define TALLY_K_GMM_BW_HAS_GQ 2u
#define TALLY_K_GMM_BW_HAS_GZ_IN 4u
#define TALLY_K_GMM_BW_WANT_GZ 8u
#define TALLY_K_GMM_BW_WANT_MU 16u
#define TALLY_K_GMM_BW_WANT_LV 32u
#define TALLY_K_GMM_BW_WANT_W 64u
#define TALLY_K_GMM_BW_STAGED 128u /* tally_k_gmm_bw_warp: rows through the stage */

/* Components whose gradient parts tally_k_gmm_bw_rows keeps in registers
 * between its two passes over a row's components (later ones are computed
 * again: two more exponentials each). 0 (a bench variant) computes every
 * one again, as before. The same values either way. */
#ifndef TALLY_K_GMM_BW_KEEP
#define TALLY_K_GMM_BW_KEEP 8u
#endif
#define TALLY_K_GMM_BW_KEEP_SLOTS (TALLY_K_GMM_BW_KEEP > 0u ? TALLY_K_GMM_BW_KEEP : 1u)

/* 1: where the kernels have warp shuffles (CUDA), a mixture whose rows fit
 * a warp (kernels/gmm_warp.h) takes its whole backward after the logits'
 * logsumexp in tally_k_gmm_bw_warp, a warp a row, reading mu and log_var
 * once (the draw, the D-trees, the weights and the gradients in one pass).
 * 0: the separate launches. The same values either way. */
#ifndef TALLY_K_GMM_BW_WARP
#define TALLY_K_GMM_BW_WARP 1u
#endif
#ifndef TALLY_K_GMM_BW_WARP_GROUPS_PER_CU
#define TALLY_K_GMM_BW_WARP_GROUPS_PER_CU 2u
#endif
/* 1: where the backend grants the stage (CUDA on sm_80 and later: cp.async,
 * and a block may have 64 KiB) and a warp has more than one row,
 * tally_k_gmm_bw_warp copies each warp's next row into its part of the
 * stage while it computes the current one (kernels/gmm_warp.h:
 * tally_k_gmm_warp_row; GPU runs 27 and 28 on an H100: 481 to 460 us, then
 * 449 to 441-446 us at 65536 x 8 x 128). 0 (a bench variant): every row is
 * loaded when its turn comes. The same values either way. */
#ifndef TALLY_K_GMM_BW_WARP_STAGED
#define TALLY_K_GMM_BW_WARP_STAGED 1u
#endif

/* Rows per block of tally_k_dm_bw_elements's transposed (shared alpha) mode:
 * a column's run of 64 floats is two 128-byte lines, and the 15 digammas
 * that tabulate a column are paid once per 64 elements. */
#define TALLY_K_DM_BW_ROWS 64u
/* Whole counts 0 .. TALLY_K_DM_BW_TABLE_N - 1 take their digamma from the
 * per-column table (TALLY_K_DM_BW_TABLE_N * 256 floats of local memory). */
#define TALLY_K_DM_BW_TABLE_N 16u

/* tally_k_dm_bw_columns, a shared alpha's column trees fused with the
 * weights: a group holds TALLY_K_DM_BW_COLS adjacent columns of one tile of
 * level 0, its 256 work-items TALLY_K_DM_BW_COLS columns by
 * TALLY_K_DM_BW_RESIDUES residues. Work-item (c, r) plays the lanes
 * r + RESIDUES * m of column c (at most 256 / RESIDUES of them, so the
 * tree's steps of RESIDUES and more stay in its registers), and a warp's 32
 * work-items read 8 columns of 4 consecutive quads of rows: whole 32-byte
 * sectors. */
#define TALLY_K_DM_BW_COLS 8u
#define TALLY_K_DM_BW_RESIDUES 32u
#define TALLY_K_DM_BW_LANES_PER_ITEM 8u
/* Groups of tally_k_dm_bw_columns a multiprocessor that CUDA's register
 * budget must allow: 4 caps a work-item at 64 registers (uncapped, ptxas
 * gives it 76: three groups). Placement only; the same bits. */
#ifndef TALLY_K_DM_BW_GROUPS_PER_CU
#define TALLY_K_DM_BW_GROUPS_PER_CU 4u
#endif
/* 1: a shared alpha's gradient runs tally_k_dm_bw_columns (the weights are
 * summed where they are computed). 0: the weights go to a [V, B] scratch
 * array that the planner's tree then reads (a bench variant: it writes and
 * reads B * V floats more). The same sums in the same order either way. */
#ifndef TALLY_K_DM_BW_FUSED_COLUMNS
#define TALLY_K_DM_BW_FUSED_COLUMNS 1u
#endif

/* 1: a shared alpha's gradient over rows of at most TALLY_K_DM_BW_LANES_MAX_V
 * columns runs tally_k_dm_bw_lanes, which sums each row's counts where it
 * computes the row's weights (one read of the counts instead of two).
 * 0 (a bench variant): the row trees first, then tally_k_dm_bw_columns.
 * The same sums in the same order either way. */
#ifndef TALLY_K_DM_BW_LANES
#define TALLY_K_DM_BW_LANES 1u
#endif
/* Rows of 4 * 256 columns at most: one quad a work-item, one tile. */
#define TALLY_K_DM_BW_LANES_MAX_V 1024u
/* Whole counts 0 .. TALLY_K_DM_BW_LANES_TABLE_N - 1 take their digamma from
 * tally_k_dm_bw_lanes's table: 4 * 256 such rows of floats, 32 KiB of local
 * memory at 8, within OpenCL's 48 KiB with the row sums beside it. */
#define TALLY_K_DM_BW_LANES_TABLE_N 8u
/* 1: tally_k_dm_bw_lanes loads a step's counts before the previous step's
 * trees and weights (16 more registers). Placement of loads only, the same
 * bits. On an H100 (bench/RESULTS.md, GPU run 24) NVIDIA's OpenCL ran
 * 65536 x 1024 in 350 us with it and 422 us without; CUDA in 235 us
 * without it at four groups a multiprocessor, 280 us with it (ptxas spills
 * 148 bytes at 64 registers) and 298 us with it at three (80 registers). */
#ifndef TALLY_K_DM_BW_LANES_AHEAD
#if defined(TALLY_TARGET_CUDA) && TALLY_TARGET_CUDA
#define TALLY_K_DM_BW_LANES_AHEAD 0u
#else
#define TALLY_K_DM_BW_LANES_AHEAD 1u
#endif
#endif
/* 1: on CUDA, tally_k_dm_bw_lanes takes the row trees of rows whose 256
 * lanes are all active (1021 to 1024 columns) a warp a row, with shuffles
 * (two barriers a step instead of ten); the same pairs in the same order.
 * On an H100 (bench/RESULTS.md, GPU run 27) 65536 x 1024 took 170.5 us
 * with it and 203 us without. 0 (a bench variant): the steps in local
 * memory, as OpenCL takes them. */
#ifndef TALLY_K_DM_BW_LANES_WARP_TREES
#define TALLY_K_DM_BW_LANES_WARP_TREES 1u
#endif
/* 1: where the backend grants the stage (CUDA on sm_80 and later) and the
 * counts are whole aligned quads (V a multiple of 4), tally_k_dm_bw_lanes
 * copies each step's counts into the stage a step ahead (cp.async:
 * tally_k_dm_bw_lanes_take) where TALLY_K_DM_BW_LANES_AHEAD does not load
 * them ahead. 0 (a bench variant): loaded when their step comes. Placement
 * only; the same bits. */
#ifndef TALLY_K_DM_BW_LANES_STAGED
#define TALLY_K_DM_BW_LANES_STAGED 1u
#endif
/* N > 0: where the stage is in use and the device has TALLY_PREFETCH_L2,
 * tally_k_dm_bw_lanes asks for the rows of the step N steps ahead of the
 * current one (in its unit or the next) into the L2 (a warp's lane 0 a row,
 * the row's 4 V bytes), so that more of the counts are on their way than
 * the stage's one step holds. 0: no prefetch. A hint only; the same bits.
 * On an H100 (bench/RESULTS.md, GPU run 41) 65536 x 1024 took 117.5 us at
 * 3, 120.2 us at 0 and 156.4 us at 6 (six steps of every group ahead, about
 * 50 MB, no longer fit the L2 beside what is in use). Once the stage ran on
 * from unit to unit the hint no longer paid: 114.4 us at 1, 115.7 us at 2
 * and 117.6 us at 3 (GPU run 42), then 112.9 us at 0 against 114.9 us at 1
 * (run 43), so it is off. */
#ifndef TALLY_K_DM_BW_LANES_PREFETCH
#define TALLY_K_DM_BW_LANES_PREFETCH 0u
#endif
/* A group's stage: a quad of each of a step's four rows a work-item. */
#define TALLY_K_DM_BW_LANES_STAGE_BYTES (4u * TALLY_K_GROUP_SIZE * 16u)
/* Groups of tally_k_dm_bw_lanes a multiprocessor that CUDA's register
 * budget must allow, and the one wave its grid is held to on CUDA.
 * Placement only; the same bits. */
#ifndef TALLY_K_DM_BW_LANES_GROUPS_PER_CU
#define TALLY_K_DM_BW_LANES_GROUPS_PER_CU 4u
#endif

#endif /* TALLY_KERNEL_BACKWARD_ABI_H */
