/*
 * kernels/kernel_list.h - the one list of tally's kernels and of every
 * kernel's arguments. Everything that has to agree on them is generated from
 * the tables below: the kernel signatures in kernels/ (TALLY_K_PARAMS),
 * the kernel ids, symbol names, typed argument structs, packers and the
 * debug check of kinds and count in backends/gpu/, and the signature check
 * of kernels_cu/. Only #defines, so the file is valid C11, CUDA C++ and
 * OpenCL C 1.2 (no variadic macros, no empty macro arguments in device code).
 *
 * TALLY_K_KERNELS(K) holds one K(name, args) per kernel: the kernel's symbol
 * is tally_k_<name> in the OpenCL program and the CUDA module, and its
 * arguments are the table TALLY_K_ARGS_<args> (a kernel variant names the
 * table of the kernel whose arguments it shares).
 *
 * TALLY_K_ARGS_<args>(BUF, VAL, _) lists the arguments in order, `_` between
 * two of them:
 *   BUF(name, off, access, elem)  a buffer of elem (f32, u32, i32, u16)
 *       elements and its u64 element offset `off` (OpenCL cannot offset a
 *       cl_mem on the host side). access: IN (read, restrict), OUT (written,
 *       restrict), RW (read back after it is written, or the only pointer:
 *       not restrict).
 *   VAL(type, name)  a scalar of type u64, u32, i32 or f32.
 * Codes that the arguments carry are in kernels/abi.h and
 * kernels/backward_abi.h; dtypes are tally_dtype values (tally/flags.h).
 */
#ifndef TALLY_KERNEL_LIST_H
#define TALLY_KERNEL_LIST_H

#define TALLY_K_KERNELS(K)                                                                                      \
    K(fill, fill) K(reduce_tiles, reduce_tiles) K(kl_tiles, kl_tiles) K(kl_pointwise, kl_pointwise)             \
    K(dm_prep, dm_prep) K(dm_rows, dm_rows) K(dm_rows_local, dm_rows) K(dm_finish, dm_finish)                   \
    K(logits_lse, logits_lse)                                                                                   \
    K(gmm_fused, gmm_fused) K(gmm_pick, gmm_pick) K(gmm_noise, gmm_noise) K(gmm_tiles, gmm_tiles)               \
    K(gmm_finish, gmm_finish) K(rng_fill, rng_fill) K(rng_fill_any, rng_fill) K(categorical, categorical)       \
    K(math_eval, math_eval) K(dm_rows_table, dm_rows_table) K(widen, widen)                                     \
    K(narrow, narrow) K(rng_fill_half, rng_fill_half)                                                           \
    K(reduce_tiles_half, reduce_tiles) K(kl_tiles_half, kl_tiles) K(kl_backward, kl_backward)                   \
    K(dm_bw_rows, dm_bw_rows) K(dm_bw_elements, dm_bw_elements) K(dm_bw_scale, dm_bw_scale)                     \
    K(gmm_bw_rows, gmm_bw_rows) K(gmm_bw_weights, gmm_bw_weights) \
    K(kl_logits_stats, kl_logits_stats) K(kl_logits_tiles, kl_logits_tiles)         \
    K(kl_logits_pointwise, kl_logits_pointwise) K(kl_logits_rows, kl_logits_rows)                               \
    K(kl_logits_rows_pair, kl_logits_rows) K(cpu_reduce_tiles, reduce_tiles)                                  \
    K(cpu_reduce_tiles_half, reduce_tiles) K(cpu_kl_tiles, kl_tiles) K(cpu_kl_tiles_half, kl_tiles)            \
    K(cpu_rng_fill, rng_fill) K(cpu_kl_logits_tiles, kl_logits_tiles) K(cpu_dm_rows_table, dm_rows_table)    \
    K(reduce_rows_warp, reduce_tiles) K(gmm_tiles_half, gmm_tiles) K(categorical_half, categorical)           \
    K(gmm_fused_half, gmm_fused) K(dm_bw_columns, dm_bw_columns)        \
    K(categorical_short, categorical) K(categorical_staged, categorical)                                 \
    K(categorical_local, categorical) K(dm_bw_prep, dm_bw_prep) K(dm_bw_lanes, dm_bw_lanes)                     \
    K(dm_bw_lane_tree, dm_bw_lane_tree) K(gmm_bw_warp, gmm_bw_warp)            \
    K(gmm_warp, gmm_fused)

/* The CPU-shaped twins (kernels/cpu.h): T(kernel, twin), the twin taking
 * the kernel's arguments and giving its bits. The OpenCL backend launches
 * the twin instead of the kernel on a CPU device. */
#define TALLY_K_CPU_TWINS(T)                                                                                    \
    T(reduce_tiles, cpu_reduce_tiles) T(reduce_tiles_half, cpu_reduce_tiles_half) T(kl_tiles, cpu_kl_tiles)    \
    T(kl_tiles_half, cpu_kl_tiles_half) T(rng_fill, cpu_rng_fill) T(kl_logits_tiles, cpu_kl_logits_tiles)      \
    T(dm_rows_table, cpu_dm_rows_table)

/* ---- kernels/reduce.h ---- */

/* out[off + k * stride] = pattern (bits) for k < n. */
#define TALLY_K_ARGS_fill(BUF, VAL, _) BUF(out, off, RW, u32) _ VAL(u64, stride) _ VAL(u64, n) _ VAL(u32, pattern)

/* One level of a reduction tree over nvec vectors (tally_k_reduce_tiles_half:
 * the same with a half x_dtype; tally_k_reduce_rows_warp: vectors of one
 * full tile of 256 one-quad lanes, either dtype). */
#define TALLY_K_ARGS_reduce_tiles(BUF, VAL, _)                                                                  \
    BUF(x, x_off, IN, f32) _ VAL(u64, x_cols) _ VAL(u64, x_stride) _ VAL(u32, mode) _ VAL(u64, nvec) _          \
    VAL(u64, vec_stride) _ VAL(u64, n) _ VAL(u32, lanes) _ VAL(u32, qpl) _ VAL(u64, tiles) _ VAL(u32, term) _    \
    VAL(u32, kind) _ BUF(shift, shift_off, IN, f32) _ VAL(u32, finish) _ VAL(f32, divisor) _                    \
    BUF(out, out_off, OUT, f32) _ VAL(u64, out_stride) _ VAL(u32, x_dtype)

/* ---- kernels/kl.h ---- */

/* Level 0 of the KL tree (offsets and strides in each input's elements;
 * tally_k_kl_tiles_half: at least one half input). */
#define TALLY_K_ARGS_kl_tiles(BUF, VAL, _)                                                                      \
    BUF(x, x_off, IN, f32) _ VAL(u64, x_stride) _ BUF(t, t_off, IN, f32) _ VAL(u64, t_stride) _ VAL(u64, cols) _ \
    VAL(u32, mode) _ VAL(u64, n) _ VAL(u32, lanes) _ VAL(u32, qpl) _ VAL(u64, tiles) _ VAL(u32, flags) _         \
    VAL(u32, finish) _ VAL(f32, divisor) _ BUF(out, out_off, OUT, f32) _ VAL(u32, x_dtype) _ VAL(u32, t_dtype)

/* The pointwise loss, o = term(x, t). */
#define TALLY_K_ARGS_kl_pointwise(BUF, VAL, _)                                                                  \
    BUF(x, x_off, IN, f32) _ VAL(u64, x_stride) _ BUF(t, t_off, IN, f32) _ VAL(u64, t_stride) _                 \
    BUF(o, o_off, OUT, f32) _ VAL(u64, o_stride) _ VAL(u64, rows) _ VAL(u64, cols) _ VAL(u32, mode) _            \
    VAL(u32, flags) _ VAL(u32, x_dtype) _ VAL(u32, t_dtype)

/* ---- kernels/kl_logits.h ---- */

/* The rows' softmax statistics completed in place (planes TALLY_K_KLL_*). */
#define TALLY_K_ARGS_kl_logits_stats(BUF, VAL, _) BUF(st, st_off, RW, f32) _ VAL(u64, rows) _ VAL(u32, flags)

/* Level 0 of the KL tree from logits, with the statistics st. */
#define TALLY_K_ARGS_kl_logits_tiles(BUF, VAL, _)                                                               \
    BUF(x, x_off, IN, f32) _ VAL(u64, x_stride) _ BUF(t, t_off, IN, f32) _ VAL(u64, t_stride) _ VAL(u64, cols) _ \
    VAL(u32, mode) _ VAL(u64, n) _ VAL(u32, lanes) _ VAL(u32, qpl) _ VAL(u64, tiles) _ VAL(u32, flags) _         \
    VAL(u32, finish) _ VAL(f32, divisor) _ BUF(st, st_off, IN, f32) _ VAL(u64, rows) _                           \
    BUF(out, out_off, OUT, f32) _ VAL(u32, x_dtype) _ VAL(u32, t_dtype)

/* The pointwise loss from logits. */
#define TALLY_K_ARGS_kl_logits_pointwise(BUF, VAL, _)                                                           \
    BUF(x, x_off, IN, f32) _ VAL(u64, x_stride) _ BUF(t, t_off, IN, f32) _ VAL(u64, t_stride) _                 \
    BUF(o, o_off, OUT, f32) _ VAL(u64, o_stride) _ VAL(u64, rows) _ VAL(u64, cols) _ VAL(u32, flags) _           \
    BUF(st, st_off, IN, f32) _ VAL(u32, x_dtype) _ VAL(u32, t_dtype)

/* Level 0 with each tile's rows' statistics taken in registers (contiguous,
 * 16-byte aligned inputs; cols a power of two, 1024 .. 16384);
 * tally_k_kl_logits_rows_pair: the same with fp32 inputs, two parts a group
 * with their target quads in TALLY_K_KLL_STAGE_BYTES of dynamic local
 * memory. */
#define TALLY_K_ARGS_kl_logits_rows(BUF, VAL, _)                                                                \
    BUF(x, x_off, IN, f32) _ BUF(t, t_off, IN, f32) _ VAL(u64, cols) _ VAL(u64, tiles) _ VAL(u32, flags) _       \
    VAL(u32, finish) _ VAL(f32, divisor) _ BUF(out, out_off, OUT, f32) _ VAL(u32, x_dtype) _ VAL(u32, t_dtype)

/* ---- kernels/dm.h ---- */

/* exp(log_alpha) to pre at ea_off, lgamma tables from lga_off. */
#define TALLY_K_ARGS_dm_prep(BUF, VAL, _)                                                                       \
    BUF(la, la_off, IN, f32) _ VAL(u64, V) _ BUF(pre, ea_off, OUT, f32) _ VAL(u64, lga_off) _ VAL(u32, rows) _   \
    VAL(u32, la_dtype)

/* Row values (one tile a row) or tile partials of A, N and S. */
#define TALLY_K_ARGS_dm_rows(BUF, VAL, _)                                                                       \
    BUF(counts, c_off, IN, f32) _ VAL(u64, c_stride) _ BUF(la, la_off, IN, f32) _ VAL(u64, la_stride) _          \
    BUF(pre, ea_off, IN, f32) _ VAL(u64, lga_off) _ VAL(u32, alpha_mode) _ VAL(u64, B) _ VAL(u64, V) _           \
    VAL(u32, lanes) _ VAL(u32, qpl) _ VAL(u64, tiles) _ VAL(u32, flags) _ BUF(out, out_off, OUT, f32) _          \
    VAL(u64, out_stride) _ VAL(u32, c_dtype) _ VAL(u32, la_dtype)

/* tally_k_dm_rows for the TABLE mode, several lanes per work-item. */
#define TALLY_K_ARGS_dm_rows_table(BUF, VAL, _)                                                                 \
    BUF(counts, c_off, IN, f32) _ VAL(u64, c_stride) _ VAL(u32, vec4) _ BUF(pre, ea_off, IN, f32) _              \
    VAL(u64, lga_off) _ VAL(u64, B) _ VAL(u64, V) _ VAL(u32, lanes) _ VAL(u32, qpl) _ VAL(u32, flags) _          \
    BUF(out, out_off, OUT, f32) _ VAL(u64, out_stride) _ VAL(u32, c_dtype)

/* Row values from the reduced (A, N, S) sums. */
#define TALLY_K_ARGS_dm_finish(BUF, VAL, _)                                                                     \
    BUF(sums, sums_off, IN, f32) _ VAL(u64, B) _ VAL(u32, flags) _ BUF(out, out_off, OUT, f32) _                 \
    VAL(u64, out_stride)

/* ---- kernels/gmm.h ---- */

/* The logsumexp of K logits into out. The mixture's inputs z, mu, lv and
 * logits are of their *_dtype (f32, bf16 or f16), with offsets and strides
 * in their own elements, in every kernel below. */
#define TALLY_K_ARGS_logits_lse(BUF, VAL, _)                                                                    \
    BUF(logits, logits_off, IN, f32) _ VAL(u64, K) _ BUF(out, out_off, OUT, f32) _ VAL(u32, logits_dtype)

/* Sample (optional) and density in one launch; z is read back (a sampled z
 * is written as fp32, so z_dtype is TALLY_F32 when sampling). */
#define TALLY_K_ARGS_gmm_fused(BUF, VAL, _)                                                                     \
    BUF(z, z_off, RW, f32) _ VAL(u64, z_stride) _ BUF(mu, mu_off, IN, f32) _ VAL(u64, mu_stride) _               \
    BUF(lv, lv_off, IN, f32) _ VAL(u64, lv_stride) _ BUF(logits, logits_off, IN, f32) _                          \
    BUF(pre, pre_off, IN, f32) _ VAL(u64, B) _ VAL(u64, K) _ VAL(u64, D) _ VAL(u32, lanes) _ VAL(u32, qpl) _      \
    VAL(u32, flags) _ VAL(u32, rows_per_pass) _ VAL(u64, seed) _ VAL(u64, subsequence) _ VAL(u64, offset) _      \
    BUF(log_q, lq_off, OUT, f32) _ VAL(u64, lq_stride) _ BUF(comp, comp_off, OUT, i32) _ VAL(u64, comp_stride) _ \
    VAL(u32, z_dtype) _ VAL(u32, mu_dtype) _ VAL(u32, lv_dtype) _ VAL(u32, logits_dtype)

/* Each row's component draw. */
#define TALLY_K_ARGS_gmm_pick(BUF, VAL, _)                                                                      \
    BUF(logits, logits_off, IN, f32) _ VAL(u64, B) _ VAL(u64, K) _ VAL(u64, seed) _ VAL(u64, subsequence) _      \
    VAL(u64, offset) _ BUF(comp, comp_off, OUT, i32) _ VAL(u64, comp_stride) _ VAL(u32, has_comp) _              \
    BUF(picks, picks_off, OUT, i32) _ VAL(u32, logits_dtype)

/* z of the picked components. */
#define TALLY_K_ARGS_gmm_noise(BUF, VAL, _)                                                                     \
    BUF(z, z_off, OUT, f32) _ VAL(u64, z_stride) _ BUF(mu, mu_off, IN, f32) _ VAL(u64, mu_stride) _              \
    BUF(lv, lv_off, IN, f32) _ VAL(u64, lv_stride) _ BUF(picks, picks_off, IN, i32) _ VAL(u64, B) _ VAL(u64, D) _ \
    VAL(u64, seed) _ VAL(u64, subsequence) _ VAL(u64, offset) _ VAL(u32, mu_dtype) _ VAL(u32, lv_dtype)

/* Level 0 of every (row, component) D-tree (tally_k_gmm_tiles_half: at least
 * one half input). */
#define TALLY_K_ARGS_gmm_tiles(BUF, VAL, _)                                                                     \
    BUF(z, z_off, IN, f32) _ VAL(u64, z_stride) _ BUF(mu, mu_off, IN, f32) _ VAL(u64, mu_stride) _               \
    BUF(lv, lv_off, IN, f32) _ VAL(u64, lv_stride) _ VAL(u64, B) _ VAL(u64, K) _ VAL(u64, D) _ VAL(u32, lanes) _  \
    VAL(u32, qpl) _ VAL(u64, tiles) _ VAL(u32, load_mode) _ BUF(out, out_off, OUT, f32) _ VAL(u32, z_dtype) _       \
    VAL(u32, mu_dtype) _ VAL(u32, lv_dtype)

/* log_q from the per-(row, component) sums s. */
#define TALLY_K_ARGS_gmm_finish(BUF, VAL, _)                                                                    \
    BUF(s, s_off, OUT, f32) _ BUF(logits, logits_off, IN, f32) _ BUF(pre, pre_off, IN, f32) _ VAL(u64, B) _      \
    VAL(u64, K) _ BUF(picks, picks_off, IN, i32) _ VAL(u32, sample) _ BUF(log_q, lq_off, OUT, f32) _              \
    VAL(u64, lq_stride) _ VAL(u32, logits_dtype)

/* ---- kernels/rng.h ---- */

/* Philox draws of distribution dist (tally_k_rng_fill: contiguous output
 * whose quads hold whole blocks; tally_k_rng_fill_any: any view). */
#define TALLY_K_ARGS_rng_fill(BUF, VAL, _)                                                                      \
    BUF(out, out_off, OUT, u32) _ VAL(u64, stride) _ VAL(u64, rows) _ VAL(u64, cols) _ VAL(u32, dist) _          \
    VAL(u64, seed) _ VAL(u64, subsequence) _ VAL(u64, offset)

/* Uniform or normal draws narrowed to a BF16 or F16 view (dtype) as they
 * are stored; offset and stride in halves. */
#define TALLY_K_ARGS_rng_fill_half(BUF, VAL, _)                                                                 \
    BUF(out, out_off, OUT, u16) _ VAL(u64, stride) _ VAL(u64, rows) _ VAL(u64, cols) _ VAL(u32, dist) _          \
    VAL(u64, seed) _ VAL(u64, subsequence) _ VAL(u64, offset) _ VAL(u32, dtype)

/* One index per row of weights or logits, of w_dtype (offset and stride in
 * its elements; tally_k_categorical: fp32, tally_k_categorical_half: bf16 or
 * f16). */
#define TALLY_K_ARGS_categorical(BUF, VAL, _)                                                                   \
    BUF(w, w_off, IN, f32) _ VAL(u64, w_stride) _ VAL(u64, rows) _ VAL(u64, cols) _ VAL(u32, is_logits) _        \
    VAL(u64, seed) _ VAL(u64, subsequence) _ VAL(u64, offset) _ BUF(out, out_off, OUT, i32) _                    \
    VAL(u64, out_stride) _ VAL(u32, tile_log2) _ VAL(u32, w_dtype)

/* ---- kernels/math_eval.h, kernels/halves.h ---- */

/* out[k] = fn(in[k]) (fn: TALLY_K_MATH_*). */
#define TALLY_K_ARGS_math_eval(BUF, VAL, _)                                                                     \
    BUF(in, in_off, IN, f32) _ BUF(out, out_off, OUT, f32) _ VAL(u64, n) _ VAL(u32, fn)

/* A half view (offset and stride in halves) widened to contiguous fp32. */
#define TALLY_K_ARGS_widen(BUF, VAL, _)                                                                         \
    BUF(x, x_off, IN, u16) _ VAL(u64, x_stride) _ VAL(u64, rows) _ VAL(u64, cols) _ VAL(u32, dtype) _            \
    BUF(o, o_off, OUT, f32)

/* Contiguous fp32 rounded into a half view (offset and stride in halves). */
#define TALLY_K_ARGS_narrow(BUF, VAL, _)                                                                        \
    BUF(x, x_off, IN, f32) _ VAL(u64, rows) _ VAL(u64, cols) _ VAL(u32, dtype) _ BUF(o, o_off, OUT, u16) _       \
    VAL(u64, o_stride)

/* ---- kernels/backward.h ---- */

/* The KL gradients of input (gx) and target (gt), either may be absent. */
#define TALLY_K_ARGS_kl_backward(BUF, VAL, _)                                                                   \
    BUF(x, x_off, IN, f32) _ VAL(u64, x_stride) _ BUF(t, t_off, IN, f32) _ VAL(u64, t_stride) _                 \
    BUF(g, g_off, IN, f32) _ VAL(u64, g_stride) _ BUF(gx, gx_off, OUT, f32) _ VAL(u64, gx_stride) _              \
    BUF(gt, gt_off, OUT, f32) _ VAL(u64, gt_stride) _ VAL(u64, rows) _ VAL(u64, cols) _ VAL(u32, mode) _         \
    VAL(u32, flags) _ VAL(u32, pointwise) _ VAL(u32, divide) _ VAL(f32, divisor) _ VAL(u32, want)

/* R_b and g_b per row (sums: A at a_off, a_off + a_step, ...; N at n_off). */
#define TALLY_K_ARGS_dm_bw_rows(BUF, VAL, _)                                                                    \
    BUF(sums, a_off, IN, f32) _ VAL(u64, a_step) _ VAL(u64, n_off) _ BUF(g, g_off, IN, f32) _ VAL(u64, g_stride) _ \
    VAL(u32, per_row_grad) _ VAL(u32, divide) _ VAL(f32, divisor) _ VAL(u64, B) _ BUF(rg, rg_off, OUT, f32)

/* The gradient (per-row alpha) or the transposed weights [V, B] (shared). */
#define TALLY_K_ARGS_dm_bw_elements(BUF, VAL, _)                                                                \
    BUF(counts, c_off, IN, f32) _ VAL(u64, c_stride) _ BUF(la, la_off, IN, f32) _ VAL(u64, la_stride) _          \
    BUF(rg, rg_off, IN, f32) _ VAL(u64, B) _ VAL(u64, V) _ VAL(u32, per_row) _ BUF(out, out_off, OUT, f32) _     \
    VAL(u64, out_stride)

/* A shared alpha's weights summed over the rows by level 0 of the column
 * tree (lanes, qpl, tiles): tile t of column v to out[out_off + v * tiles +
 * t], or, with scale (one tile), a_v times it to out[out_off + v]. */
#define TALLY_K_ARGS_dm_bw_columns(BUF, VAL, _)                                                                 \
    BUF(counts, c_off, IN, f32) _ VAL(u64, c_stride) _ BUF(la, la_off, IN, f32) _ BUF(rg, rg_off, IN, f32) _     \
    VAL(u64, B) _ VAL(u64, V) _ VAL(u32, lanes) _ VAL(u32, qpl) _ VAL(u64, tiles) _ VAL(u32, scale) _            \
    BUF(out, out_off, OUT, f32)

/* A shared alpha's a_v and digamma tables for tally_k_dm_bw_lanes, from
 * pre_off; with a_lanes != 0 also A, the tree of one tile (a_lanes lanes
 * of a_qpl quads: the row plan) over exp(log_alpha), to sums[a_off]. */
#define TALLY_K_ARGS_dm_bw_prep(BUF, VAL, _)                                                                    \
    BUF(la, la_off, IN, f32) _ VAL(u64, V) _ BUF(pre, pre_off, OUT, f32) _ VAL(u32, a_lanes) _ VAL(u32, a_qpl) _ \
    BUF(sums, a_off, OUT, f32)

/* A shared alpha's weights in one pass over the counts (rows of at most
 * 1024 columns, row_lanes: the row plan's lanes): the lane sums of level 0
 * of the column tree (lanes, qpl, tiles) to out[out_off + (t lanes + j) V +
 * v]. sums: A at a_off. vec4: the counts' rows are 16-byte aligned. */
#define TALLY_K_ARGS_dm_bw_lanes(BUF, VAL, _)                                                                   \
    BUF(counts, c_off, IN, f32) _ VAL(u64, c_stride) _ VAL(u32, vec4) _ BUF(pre, pre_off, IN, f32) _             \
    BUF(sums, a_off, IN, f32) _ BUF(g, g_off, IN, f32) _ VAL(u64, g_stride) _ VAL(u32, per_row_grad) _           \
    VAL(u32, divide) _ VAL(f32, divisor) _ VAL(u64, B) _ VAL(u64, V) _ VAL(u32, row_lanes) _ VAL(u32, lanes) _   \
    VAL(u32, qpl) _ VAL(u64, tiles) _ VAL(u32, stage_rows) _ BUF(out, out_off, OUT, f32)

/* The column tree's steps over those lane sums: as tally_k_dm_bw_columns's
 * output. */
#define TALLY_K_ARGS_dm_bw_lane_tree(BUF, VAL, _)                                                               \
    BUF(part_in, p_off, IN, f32) _ BUF(la, la_off, IN, f32) _ VAL(u64, B) _ VAL(u64, V) _ VAL(u32, lanes) _      \
    VAL(u32, qpl) _ VAL(u64, tiles) _ VAL(u32, scale) _ BUF(out, out_off, OUT, f32)

/* out[v] = a_v * s[v]. */
#define TALLY_K_ARGS_dm_bw_scale(BUF, VAL, _)                                                                   \
    BUF(la, la_off, IN, f32) _ BUF(s, s_off, IN, f32) _ VAL(u64, V) _ BUF(out, out_off, OUT, f32)

/* Each mixture row's component weights (over its sums at s_off) and logit
 * weights. */
#define TALLY_K_ARGS_gmm_bw_weights(BUF, VAL, _)                                                                \
    BUF(logits, logits_off, IN, f32) _ BUF(scratch, scratch_off, RW, f32) _ VAL(u64, s_off) _                   \
    VAL(u64, lse_off) _ VAL(u64, picks_off) _ VAL(u64, w_off) _ BUF(gq, gq_off, IN, f32) _                       \
    VAL(u64, gq_stride) _ VAL(u64, B) _ VAL(u64, K) _ VAL(u32, flags)

/* The mixture's elementwise gradients, per row, from the component weights
 * at c_off. */
#define TALLY_K_ARGS_gmm_bw_rows(BUF, VAL, _)                                                                   \
    BUF(z, z_off, IN, f32) _ VAL(u64, z_stride) _ BUF(mu, mu_off, IN, f32) _ VAL(u64, mu_stride) _               \
    BUF(lv, lv_off, IN, f32) _ VAL(u64, lv_stride) _ BUF(scratch, scratch_off, IN, f32) _ VAL(u64, c_off) _      \
    VAL(u64, picks_off) _ BUF(gzi, gzi_off, IN, f32) _ VAL(u64, gzi_stride) _ VAL(u64, B) _ VAL(u64, K) _        \
    VAL(u64, D) _ VAL(u64, seed) _ VAL(u64, subsequence) _ VAL(u64, offset) _ VAL(u32, flags) _                  \
    BUF(gz, gz_off, OUT, f32) _ VAL(u64, gz_stride) _ BUF(gmu, gmu_off, OUT, f32) _ VAL(u64, gmu_stride) _       \
    BUF(glv, glv_off, OUT, f32) _ VAL(u64, glv_stride)

/* The mixture's whole backward a warp a row (after the logits' logsumexp
 * at lse_off): the draw when sampling, the D-trees (a plan of one tile of
 * `lanes` one-quad lanes), the weights (logit weights to w_off) and the
 * gradients. */
#define TALLY_K_ARGS_gmm_bw_warp(BUF, VAL, _)                                                                   \
    BUF(z, z_off, IN, f32) _ VAL(u64, z_stride) _ BUF(mu, mu_off, IN, f32) _ VAL(u64, mu_stride) _               \
    BUF(lv, lv_off, IN, f32) _ VAL(u64, lv_stride) _ BUF(logits, logits_off, IN, f32) _                          \
    BUF(scratch, scratch_off, RW, f32) _ VAL(u64, lse_off) _ VAL(u64, w_off) _ BUF(gq, gq_off, IN, f32) _        \
    VAL(u64, gq_stride) _ BUF(gzi, gzi_off, IN, f32) _ VAL(u64, gzi_stride) _ VAL(u64, B) _ VAL(u64, K) _        \
    VAL(u64, D) _ VAL(u32, lanes) _ VAL(u64, seed) _ VAL(u64, subsequence) _ VAL(u64, offset) _                   \
    VAL(u32, flags) _ BUF(gz, gz_off, OUT, f32) _ VAL(u64, gz_stride) _ BUF(gmu, gmu_off, OUT, f32) _             \
    VAL(u64, gmu_stride) _ BUF(glv, glv_off, OUT, f32) _ VAL(u64, glv_stride)

/* ---- The kernel signatures: TALLY_KERNEL void tally_k_x(TALLY_K_PARAMS(x)).
 * Device code only (the qualifiers come from tally/dialect.h). ---- */
#define TALLY_K_COMMA ,
#define TALLY_K_ELEM_f32 float
#define TALLY_K_ELEM_u32 tally_u32
#define TALLY_K_ELEM_i32 tally_i32
#define TALLY_K_ELEM_u16 tally_u16
#define TALLY_K_ELEM_u64 tally_u64
#define TALLY_K_PTR_IN(type) TALLY_GLOBAL const type *TALLY_RESTRICT
#define TALLY_K_PTR_OUT(type) TALLY_GLOBAL type *TALLY_RESTRICT
#define TALLY_K_PTR_RW(type) TALLY_GLOBAL type *
#define TALLY_K_PARAM_BUF(name, off, access, elem) TALLY_K_PTR_##access(TALLY_K_ELEM_##elem) name, tally_u64 off
#define TALLY_K_PARAM_VAL(type, name) TALLY_K_ELEM_##type name
#define TALLY_K_PARAMS(args) TALLY_K_ARGS_##args(TALLY_K_PARAM_BUF, TALLY_K_PARAM_VAL, TALLY_K_COMMA)

#endif /* TALLY_KERNEL_LIST_H */
