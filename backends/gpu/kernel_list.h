/*
 * backends/gpu/kernel_list.h - the one list of tally's kernels, as
 * TALLY__KERNEL(symbol) lines (no include guard: the includer defines
 * TALLY__KERNEL and includes this file where it needs the list). The symbol
 * is the kernel's name in the OpenCL program and the CUDA module; the bodies
 * are in kernels/. Arguments, in order ("buf" = a buffer followed by its
 * u64 element offset; u64/u32/i32/f32 = a scalar):
 *
 * tally_k_fill          out buf, stride u64, n u64, pattern u32
 * tally_k_reduce_tiles  x buf, x_cols u64, x_stride u64, mode u32, nvec u64, vec_stride u64, n u64,
 *                       lanes u32, qpl u32, tiles u64, term u32, kind u32, shift buf, finish u32,
 *                       divisor f32, out buf, out_stride u64, x_dtype u32 (TALLY_K_DTYPE_*)
 * tally_k_kl_tiles      x buf, x_stride u64, t buf, t_stride u64, cols u64, mode u32, n u64, lanes u32,
 *                       qpl u32, tiles u64, flags u32, finish u32, divisor f32, out buf, x_dtype u32,
 *                       t_dtype u32  (dtypes: TALLY_K_DTYPE_*; offsets and strides in their elements)
 * tally_k_kl_pointwise  x buf, x_stride u64, t buf, t_stride u64, o buf, o_stride u64, rows u64,
 *                       cols u64, mode u32, flags u32, x_dtype u32, t_dtype u32
 * tally_k_dm_prep       log_alpha buf, V u64, pre buf, lga_off u64, rows u32, la_dtype u32  (pre's offset is
 *                       where exp goes)
 * tally_k_dm_rows       counts buf, c_stride u64, log_alpha buf, la_stride u64, pre buf, lga_off u64,
 *                       alpha_mode u32, B u64, V u64, lanes u32, qpl u32, tiles u64, flags u32, out buf,
 *                       out_stride u64, c_dtype u32, la_dtype u32
 * tally_k_dm_finish     sums buf, B u64, flags u32, out buf, out_stride u64
 * tally_k_logits_lse    logits buf, K u64, out buf
 * tally_k_gmm_fused     z buf, z_stride u64, mu buf, mu_stride u64, lv buf, lv_stride u64, logits buf,
 *                       pre buf, B u64, K u64, D u64, lanes u32, qpl u32, flags u32, rows_per_pass u32, seed u64,
 *                       subsequence u64, offset u64, log_q buf, lq_stride u64, comp buf (i32),
 *                       comp_stride u64
 * tally_k_gmm_pick      logits buf, B u64, K u64, seed u64, subsequence u64, offset u64, comp buf (i32),
 *                       comp_stride u64, has_comp u32, picks buf (i32)
 * tally_k_gmm_noise     z buf, z_stride u64, mu buf, mu_stride u64, lv buf, lv_stride u64, picks buf (i32),
 *                       B u64, D u64, seed u64, subsequence u64, offset u64
 * tally_k_gmm_tiles     z buf, z_stride u64, mu buf, mu_stride u64, lv buf, lv_stride u64, B u64, K u64,
 *                       D u64, lanes u32, qpl u32, tiles u64, mode u32, out buf
 * tally_k_gmm_finish    s buf, logits buf, pre buf, B u64, K u64, picks buf (i32), sample u32, log_q buf,
 *                       lq_stride u64
 * tally_k_rng_fill      out buf (u32), stride u64, rows u64, cols u64, dist u32, seed u64, subsequence u64,
 *                       offset u64  (contiguous output whose quads hold whole Philox blocks)
 * tally_k_rng_fill_any  the same arguments, any view
 * tally_k_math_eval     in buf, out buf, n u64, fn u32 (TALLY_K_MATH_*)
 * tally_k_categorical   w buf, w_stride u64, rows u64, cols u64, is_logits u32, seed u64, subsequence u64,
 *                       offset u64, out buf (i32), out_stride u64, tile_log2 u32
 * tally_k_dm_rows_table counts buf, c_stride u64, vec4 u32, pre buf, lga_off u64, B u64, V u64, lanes u32,
 *                       qpl u32, flags u32, out buf, out_stride u64, c_dtype u32  (pre's offset is where
 *                       exp goes)
 * tally_k_widen         x buf (u16, offset in halves), x_stride u64, rows u64, cols u64, dtype u32, o buf
 * tally_k_reduce_tiles_half, tally_k_kl_tiles_half: the arguments of tally_k_reduce_tiles and
 *                       tally_k_kl_tiles, for inputs with a half dtype (those two read fp32 only)
 * Gradients (kernels/backward.h):
 * tally_k_kl_backward   x buf, x_stride u64, t buf, t_stride u64, g buf, g_stride u64, gx buf, gx_stride u64,
 *                       gt buf, gt_stride u64, rows u64, cols u64, mode u32, flags u32, pointwise u32,
 *                       divide u32, divisor f32, want u32
 * tally_k_dm_bw_rows    sums buf, a_step u64, n_off u64, g buf, g_stride u64, per_row_grad u32, divide u32,
 *                       divisor f32, B u64, rg buf  (sums' offset is where A is)
 * tally_k_dm_bw_elements counts buf, c_stride u64, la buf, la_stride u64, rg buf, B u64, V u64, per_row u32,
 *                       out buf, out_stride u64 (per_row; else out is [V, B] scratch, out_stride unused)
 * tally_k_dm_bw_scale   la buf, s buf, V u64, out buf
 * tally_k_gmm_bw_rows   z buf, z_stride u64, mu buf, mu_stride u64, lv buf, lv_stride u64, logits buf,
 *                       scratch buf, s_off u64, lse_off u64, picks_off u64, w_off u64, gq buf, gq_stride u64,
 *                       gzi buf, gzi_stride u64, B u64, K u64, D u64, seed u64, subsequence u64, offset u64,
 *                       flags u32, gz buf, gz_stride u64, gmu buf, gmu_stride u64, glv buf, glv_stride u64
 */
TALLY__KERNEL(tally_k_fill)
TALLY__KERNEL(tally_k_reduce_tiles)
TALLY__KERNEL(tally_k_kl_tiles)
TALLY__KERNEL(tally_k_kl_pointwise)
TALLY__KERNEL(tally_k_dm_prep)
TALLY__KERNEL(tally_k_dm_rows)
TALLY__KERNEL(tally_k_dm_finish)
TALLY__KERNEL(tally_k_logits_lse)
TALLY__KERNEL(tally_k_gmm_fused)
TALLY__KERNEL(tally_k_gmm_pick)
TALLY__KERNEL(tally_k_gmm_noise)
TALLY__KERNEL(tally_k_gmm_tiles)
TALLY__KERNEL(tally_k_gmm_finish)
TALLY__KERNEL(tally_k_rng_fill)
TALLY__KERNEL(tally_k_rng_fill_any)
TALLY__KERNEL(tally_k_categorical)
TALLY__KERNEL(tally_k_math_eval)
TALLY__KERNEL(tally_k_dm_rows_table)
TALLY__KERNEL(tally_k_widen)
TALLY__KERNEL(tally_k_reduce_tiles_half)
TALLY__KERNEL(tally_k_kl_tiles_half)
TALLY__KERNEL(tally_k_kl_backward)
TALLY__KERNEL(tally_k_dm_bw_rows)
TALLY__KERNEL(tally_k_dm_bw_elements)
TALLY__KERNEL(tally_k_dm_bw_scale)
TALLY__KERNEL(tally_k_gmm_bw_rows)
