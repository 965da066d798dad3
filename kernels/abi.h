/*
 * kernels/abi.h - the constants that the kernels and the host code which
 * launches them (backends/gpu/) must agree on: argument codes, local-memory
 * sizes and the work-group size (the kernels and their arguments are listed
 * in kernel_list.h, included here). Plain #defines, so the file is valid C11,
 * CUDA C++ and OpenCL C alike.
 */
#ifndef TALLY_KERNEL_ABI_H
#define TALLY_KERNEL_ABI_H

#include "kernel_list.h"

/* Work-items per work-group in every launch: one per lane of a full
 * reduction tile (TALLY_TREE_LANES). backends/gpu/gpu.h checks that
 * TALLY_GPU_GROUP_SIZE is the same number. */
#define TALLY_K_GROUP_SIZE 256u

/* How a kernel reads a vector. STRIDED: element k of a view of `cols`
 * columns lies at (k / cols) * stride + k % cols. CONTIGUOUS: at k.
 * VEC4: at k, and the vector's first element is 16-byte aligned, so whole
 * quads are read as one float4. */
#define TALLY_K_LOAD_STRIDED 0u
#define TALLY_K_LOAD_CONTIGUOUS 1u
#define TALLY_K_LOAD_VEC4 2u

/* Per-element term of tally_k_reduce_tiles. */
#define TALLY_K_TERM_PLAIN 0u
#define TALLY_K_TERM_SQUARE 1u
#define TALLY_K_TERM_SHIFTED_EXP 2u /* exp(x - shift[vector]) */
/* The CPU twin only (kernels/cpu.h), with kind SUM, finish LSE or MAX_SUM
 * and one tile a vector: the vector's MAX tree and then its SHIFTED_EXP sum
 * tree in one unit, while the vector is in the cache (the two launches'
 * trees, so their bits); shift is not read. */
#define TALLY_K_TERM_LSE 3u
/* exp(x): SHIFTED_EXP with a zero shift (x - 0 is x exactly), without a
 * shift array to read or to fill with zeros first. */
#define TALLY_K_TERM_EXP 4u

/* What the last level of a tree does with its one value per vector. */
#define TALLY_K_FINISH_NONE 0u
#define TALLY_K_FINISH_DIVIDE 1u /* tally_divf(value, divisor) */
#define TALLY_K_FINISH_LSE 2u    /* tally_lse_finish(shift[vector], value) */
/* TALLY_K_TERM_LSE only: the maximum m to out[vector] and the shifted sum
 * to out[vector + nvec] (0 where m is not finite, where the host skips the
 * sum), the two statistics planes of a softmax (kernels/kl_logits.h). */
#define TALLY_K_FINISH_MAX_SUM 3u
/* tally_expf(shift[vector]) * value: a shared alpha's Dirichlet-multinomial
 * gradient, exp(log_alpha v) times column v's sum of weights, in the tree's
 * last launch instead of one of its own. */
#define TALLY_K_FINISH_EXP_SCALE 4u

/* The statistics array of the KL from logits (kernels/kl_logits.h): plane k
 * holds one value per row, at offset k * rows. */
#define TALLY_K_KLL_MX 0u /* input's maximum m_x (0 unless INPUT_LOGITS) */
#define TALLY_K_KLL_LX 1u /* its L_x (the shifted sum until tally_k_kl_logits_stats) */
#define TALLY_K_KLL_MY 2u /* target's maximum m_y (0 unless TARGET_LOGITS) */
#define TALLY_K_KLL_LY 3u /* its L_y (the shifted sum until tally_k_kl_logits_stats) */
#define TALLY_K_KLL_RY 4u /* its r_y */
#define TALLY_K_KLL_PLANES 5u
/* Groups of tally_k_kl_logits_rows per multiprocessor, for CUDA's register
 * budget: 1 lets one group hold its tile (128 floats a work-item) in
 * registers; 2 caps a work-item at 128 registers and spills the rest to
 * L1, which measured slower on the H200. */
#ifndef TALLY_K_KLL_GROUPS_PER_CU
#define TALLY_K_KLL_GROUPS_PER_CU 1
#endif
/* tally_k_kl_logits_rows_pair: work-items a group (two parts of 256), and
 * its dynamic local memory, each part's sixteen target quads a work-item
 * (2 x 16 x 256 x 16 bytes, 128 KiB). */
#define TALLY_K_KLL_PAIR_GROUP_SIZE 512u
#define TALLY_K_KLL_STAGE_BYTES (2u * 16u * 256u * 16u)
/* 1: the op layer takes tally_k_kl_logits_rows_pair where the backend
 * grants its local memory; 0: always tally_k_kl_logits_rows (a bench
 * variant, BENCH_VARIANT in bench/gpu_bench.sh). Either gives the same
 * bits. */
#ifndef TALLY_K_KLL_PAIR
#define TALLY_K_KLL_PAIR 1u
#endif
/* 1: the fused path's trees run one array per warp (tally_k_tree_full3)
 * and a tile's final sum tree waits for the next tile's first maxima tree
 * and runs beside it (two trees a row of 16384 instead of three); 0: each
 * tree by itself, its arrays one after another by the first warp (a bench
 * variant). Either gives the same bits. */
/* 1: on CUDA, tally_k_tree takes a segment of 256 active lanes (rows of
 * 1024 elements or more, full tiles) in two barriers (tally_k_tree_full);
 * 0: step by step, a barrier a step (a bench variant). Either gives the
 * same bits. */
#ifndef TALLY_K_TREE_FULL_SEGMENTS
#define TALLY_K_TREE_FULL_SEGMENTS 1u
#endif
#ifndef TALLY_K_KLL_MERGED_TREES
#define TALLY_K_KLL_MERGED_TREES 1u
#endif
/* 1: tally_k_unit_at finds the unit of a vector of one tile without a
 * division; 0: divides always (a bench variant). The same values. */
#ifndef TALLY_K_UNIT_ONE_TILE
#define TALLY_K_UNIT_ONE_TILE 1u
#endif
/* 1: where the backend has warp shuffles, a level whose vectors are one
 * full tile of 256 one-quad lanes (rows of 1021 to 1024 elements) runs
 * tally_k_reduce_rows_warp, a warp a vector; 0: tally_k_reduce_tiles, a
 * group a vector (a bench variant). Either gives the same bits. */
#ifndef TALLY_K_REDUCE_ROWS_WARP
#define TALLY_K_REDUCE_ROWS_WARP 1u
#endif
/* Groups of tally_k_reduce_tiles per compute unit at most (0: one group
 * per 256 / lanes units, uncapped; a bench variant caps it). The kernel
 * strides over its units, so either gives the same bits. */
#ifndef TALLY_K_REDUCE_GROUPS_PER_CU
#define TALLY_K_REDUCE_GROUPS_PER_CU 0u
#endif
/* 1: the fused path's pass A takes each lane's maxima with the hardware's
 * maximum instruction (one an element instead of a comparison and a
 * select) and folds a row again exactly where its maximum is zero; 0: the
 * exact fold throughout (a bench variant). Either gives the same bits. */
#ifndef TALLY_K_KLL_HW_MAX
#define TALLY_K_KLL_HW_MAX 1u
#endif

/* Where tally_k_dm_rows finds exp(log_alpha) and lgamma of it. */
#define TALLY_K_DM_ALPHA_PER_ROW 0u  /* computed per element from the row's log_alpha */
#define TALLY_K_DM_ALPHA_LOCAL 1u    /* shared alpha; each group tabulates it in local memory */
#define TALLY_K_DM_ALPHA_PREPARED 2u /* shared alpha; tally_k_dm_prep tabulated it in global memory */
#define TALLY_K_DM_ALPHA_TABLE 3u    /* PREPARED plus lgamma(n + a), whole n < TALLY_K_DM_TABLE_N: tally_k_dm_rows_table */
/* Rows of the lgamma(n + a) table of TALLY_K_DM_ALPHA_TABLE: whole counts
 * 0 <= n < this take lgamma(n + a) from it instead of computing it. */
#define TALLY_K_DM_TABLE_N 64u
/* Lanes of a row's plan that each work-item of tally_k_dm_rows_table plays
 * (at most 4: the kernel spells out the steps of the tree that they take). */
#define TALLY_K_DM_LANES_PER_ITEM 4u
/* Floats of tally_k_dm_rows_table's local table of whole terms (16 KiB):
 * rows k of tally_dm_term(k, a) for every column, as many rows k as fit
 * (at most TALLY_K_DM_TABLE_N), so that a small whole count costs one
 * bank-conflict-free local read instead of two gathers from the global
 * table. With TALLY_K_DM_LOCAL_TERMS 0 (a bench variant) the kernel reads
 * the global table as before; the bits are the same either way. */
#define TALLY_K_DM_TERMS 4096u
#ifndef TALLY_K_DM_LOCAL_TERMS
#define TALLY_K_DM_LOCAL_TERMS 1u
#endif
/* 1: where warps can shuffle (CUDA), tally_k_dm_rows_table gives a row of
 * a full tile (V > 1020) to one warp, each work-item playing 8 lanes, and
 * the tree's steps below 32 run through shuffles: no barrier and no local
 * memory a row. 0: four lanes a work-item and the tree in local memory, as
 * on every other target (a bench variant). The same steps either way. */
#ifndef TALLY_K_DM_ROWS_WARP
#define TALLY_K_DM_ROWS_WARP 1u
#endif
/* Groups of tally_k_dm_rows_table a CUDA multiprocessor should hold (nvcc
 * caps its registers to fit them), and so the groups a CUDA launch has a
 * multiprocessor (one wave: each group copies its local terms once, before
 * its first row, where nothing hides the copy's latency). 2 leaves room
 * for the warp rows' next row loaded ahead (116 registers, no spill); 3
 * caps them at 80 and spills 272 bytes around that row (on the H200,
 * 65536 x 1024 took 122 us against 80 us at 2). Placement only; the same
 * bits. */
#ifndef TALLY_K_DM_GROUPS_PER_CU
#define TALLY_K_DM_GROUPS_PER_CU 2u
#endif
/* Groups of tally_k_dm_rows_table launched an OpenCL compute unit at most
 * when it copies local terms, for the same reason (CUDA takes
 * TALLY_K_DM_GROUPS_PER_CU). 8 is a bench variant. */
#ifndef TALLY_K_DM_TABLE_GROUPS_PER_CU
#define TALLY_K_DM_TABLE_GROUPS_PER_CU 3u
#endif
/* 1: tally_k_dm_rows_table's warp rows (above) with one quad a lane load
 * the next row's counts before they fold the current one, so that a warp's
 * loads stay in flight while it computes. 0 (a bench variant) loads each
 * row when it starts. The same bits either way. */
#ifndef TALLY_K_DM_ROWS_AHEAD
#define TALLY_K_DM_ROWS_AHEAD 1u
#endif
/* 1: tally_k_dm_rows_table's group rows on targets without warp shuffles
 * (OpenCL) with one whole aligned quad a lane load a work-item's four quads
 * before they fold them. 0 (a bench variant) loads each quad as its lane
 * comes. The same bits either way. */
#ifndef TALLY_K_DM_ROWS_LOADS_FIRST
#define TALLY_K_DM_ROWS_LOADS_FIRST 1u
#endif
/* Longest shared alpha tabulated in local memory (two floats per column). */
#define TALLY_K_DM_LOCAL_COLS 2048u
/* 1: tally_k_dm_rows with a local alpha table computes a whole quad's four
 * lgamma(n + a) together (zero counts included), for instruction-level
 * parallelism on the small shapes that take that table. */
#ifndef TALLY_K_DM_LOCAL_QUAD_ILP
#define TALLY_K_DM_LOCAL_QUAD_ILP 1u
#endif
/* 1: where warps can shuffle (CUDA), tally_k_dm_rows's tree takes its
 * steps below 32 through shuffles in registers: two barriers a row of 64
 * lanes instead of seven. 0 (a bench variant): every step in local memory.
 * The same steps either way. */
#ifndef TALLY_K_DM_TREE_SHUFFLE
#define TALLY_K_DM_TREE_SHUFFLE 1u
#endif

/* Flags of tally_k_gmm_fused. */
#define TALLY_K_GMM_SAMPLE 1u        /* draw z (and the component) before the density */
#define TALLY_K_GMM_VEC4 2u          /* z, mu and log_var rows are whole aligned quads */
#define TALLY_K_GMM_HAS_COMPONENT 4u /* write the component index */
#define TALLY_K_GMM_LSE_PREPARED 8u  /* logsumexp of the logits is in pre[pre_off] */
/* Lanes of a (row, component) tree that each work-item of tally_k_gmm_fused
 * plays (1, 2 or 4: the kernel spells out the steps of the tree that they
 * take). 1 is the one-lane-per-work-item layout; the bits are the same. */
#ifndef TALLY_K_GMM_LANES_PER_ITEM
#define TALLY_K_GMM_LANES_PER_ITEM 4u
#endif
/* 1: the mixture kernels' exp(-lv/2) and exp(lv/2) take tally_expf_split,
 * tally_expf's bits in fewer instructions behind a branch that a warp takes
 * together for any log-variance in [-174, 174]; 0 (a bench variant):
 * tally_expf. The same bits either way. */
#ifndef TALLY_K_GMM_EXP_SPLIT
#define TALLY_K_GMM_EXP_SPLIT 1u
#endif
/* Most components whose per-row sums tally_k_gmm_fused keeps in local memory. */
#define TALLY_K_GMM_LOCAL_K 1024u
/* Up to this many components each group computes the logits' logsumexp
 * itself; beyond it one small launch computes it once. */
#define TALLY_K_GMM_INLINE_LSE_K 32u
/* 1: where the kernels have warp shuffles (CUDA), a mixture whose rows fit
 * a warp (kernels/gmm_warp.h: fp32, D a multiple of 4 up to 128, at most
 * TALLY_K_GMM_WARP_MAX_K components, rows on 16-byte boundaries) runs
 * tally_k_gmm_warp, a warp a row with no barrier, instead of
 * tally_k_gmm_fused. The same values either way. */
#ifndef TALLY_K_GMM_WARP
#define TALLY_K_GMM_WARP 1u
#endif
/* The most components a warp row holds (2 * 4 floats a component a
 * work-item in registers). */
#define TALLY_K_GMM_WARP_MAX_K 8u
/* Groups of tally_k_gmm_warp a multiprocessor that CUDA's register budget
 * must allow (128 registers at 2), and the one wave its grid is held to. */
#ifndef TALLY_K_GMM_WARP_GROUPS_PER_CU
#define TALLY_K_GMM_WARP_GROUPS_PER_CU 2u
#endif
/* A warp's stage (tally_k_gmm_warp_row): mu and log_var, a quad a
 * work-item, of each component. */
#define TALLY_K_GMM_WARP_STAGE_QUADS (2u * TALLY_K_GMM_WARP_MAX_K * 32u)
#define TALLY_K_GMM_WARP_STAGE_BYTES (TALLY_K_GROUP_SIZE / 32u * TALLY_K_GMM_WARP_STAGE_QUADS * 16u)

/* Distributions of tally_k_rng_fill: tally_distribution (tally/flags.h). */
/* Philox blocks each work-item of tally_k_rng_fill and tally_k_rng_fill_any
 * computes per pass: independent evaluations it can interleave while its
 * stores drain. The kernels stride over whatever grid they get, so this
 * only sets the host's grid, never a result bit. */
/* KL over half inputs, full tiles: 1 = work-item i plays lanes 2i and 2i + 1
 * with one 16-byte load of eight halves (half the work-items load); 0 =
 * every lane loads its own quads, 8 bytes each, as the fp32 path does with
 * 16. The fold order is the plan's either way (a compile-time switch for
 * bench/gpu_bench.sh's variant build). */
#ifndef TALLY_K_KL_HALF_PAIRS
#define TALLY_K_KL_HALF_PAIRS 0u
#endif

/* 1: the KL of two bf16 inputs takes its logarithms from a table of the
 * 128 mantissas' parts in local memory (kernels/kl.h); 0: from the whole
 * arithmetic. The same bits either way (a compile-time switch for
 * bench/gpu_bench.sh's variant build). */
#ifndef TALLY_K_KL_BF16_TABLE_ON
#define TALLY_K_KL_BF16_TABLE_ON 1u
#endif

/* 1: the bf16 table's batch keeps the loaded words, tests them packed and
 * addresses the table in bytes (tally_k_kl_batch_bf16_words); 0: it works
 * on the widened quads (tally_k_kl_batch_bf16). The same bits either way
 * (a compile-time switch for bench/gpu_bench.sh's variant build). */
#ifndef TALLY_K_KL_BF16_WORDS
#define TALLY_K_KL_BF16_WORDS 1u
#endif

/* 1: tally_k_log_bf16_at forms the exponent as a float by a subtraction
 * from a biased constant (the FMA pipe); 0: by an integer-to-float
 * conversion. Both are exact, so the bits are the same (a compile-time
 * switch for bench/gpu_bench.sh's variant build). */
#ifndef TALLY_K_KL_BF16_EXP_FADD
#define TALLY_K_KL_BF16_EXP_FADD 1u
#endif

/* 1: the bf16 table's batch takes each logarithm from the word its value
 * was loaded in: one integer add gives both values' exponents, the input's
 * values are never widened (only their logarithms are used), and the test
 * is a 16-bit maximum and minimum over the words (tally_k_kl_word_terms);
 * 0: tally_k_log_bf16_at on widened values. Exact either way, so the bits
 * are the same (a compile-time switch for bench/gpu_bench.sh's variant
 * build). */
#ifndef TALLY_K_KL_BF16_PACKED
#define TALLY_K_KL_BF16_PACKED 1u
#endif

/* 1: a lane of the bf16 table's tiles loads its next batch's words before
 * it computes this batch's terms (the last batch reloads its own words,
 * unused), so that the loads' wait overlaps arithmetic; 0: each batch
 * loads, then computes. The same terms in the same order (a compile-time
 * switch for bench/gpu_bench.sh's variant build). */
#ifndef TALLY_K_KL_BF16_AHEAD
#define TALLY_K_KL_BF16_AHEAD 1u
#endif

/* 1: the bf16 table's packed words take their logarithms from the wide
 * table (kernels/kl.h, 32 KiB a group), looked up by a value's low byte,
 * whose entries hold the logarithm's mantissa part and its exponent's bias
 * together (tally_pm_logf_bf16_parts); 0: from the narrow table of 128
 * mantissas (16 KiB). Exact either way, so the bits are the same. On by
 * default in CUDA only, whose byte permutation is one instruction: NVIDIA's
 * OpenCL ran the wide table's shifts and masks at 593 us against the
 * narrow table's 417 (H100, bf16 KL 16384^2). A compile-time switch for
 * bench/gpu_bench.sh's variant build. */
#ifndef TALLY_K_KL_BF16_WIDE
#if defined(TALLY_TARGET_CUDA) && TALLY_TARGET_CUDA
#define TALLY_K_KL_BF16_WIDE 1u
#else
#define TALLY_K_KL_BF16_WIDE 0u
#endif
#endif

/* Groups per compute unit of the reduced KL forms' first level, for fp32
 * inputs (tally_k_kl_tiles) and for any half input (tally_k_kl_tiles_half,
 * whose 80 registers fit three groups of 256); each group then walks tiles
 * g, g + groups, ... (the plan's tiles, so the same bits) and fills the
 * bf16 table once. 0: a group per tile. Only the host's grid (a
 * compile-time switch for bench/gpu_bench.sh's variant build; GPU run 17
 * measured the fp32 kernel slower with 4 groups a compute unit). */
#ifndef TALLY_K_KL_GROUPS_PER_CU
#define TALLY_K_KL_GROUPS_PER_CU 0u
#endif
#ifndef TALLY_K_KL_HALF_GROUPS_PER_CU
#define TALLY_K_KL_HALF_GROUPS_PER_CU 3u
#endif

/* 1: tally_k_categorical runs rows of one tile through
 * tally_k_categorical_tile (one walk of additions, the exponentials of
 * logits computed by the whole group); 0: through the rule's passes tile
 * by tile, as longer rows do. The same bits either way (a compile-time
 * switch for bench/gpu_bench.sh's variant build). */
#ifndef TALLY_K_CAT_ONE_TILE
#define TALLY_K_CAT_ONE_TILE 1u
#endif
/* Groups of tally_k_categorical that should fit a CUDA multiprocessor at
 * once (nvcc caps its registers to match; a placement switch, never a
 * bit). */
#ifndef TALLY_K_CAT_GROUPS_PER_CU
#define TALLY_K_CAT_GROUPS_PER_CU 8u
#endif

/* 1: rows of at most TALLY_K_CAT_SHORT_COLS columns take
 * tally_k_categorical_short (a row a work-item, held in registers); 0: the
 * tile kernels above, as longer rows do. The same bits either way (a
 * switch for bench/gpu_bench.sh's variant build). */
#ifndef TALLY_K_CAT_SHORT
#define TALLY_K_CAT_SHORT 1u
#endif
/* The longest row tally_k_categorical_short holds: its registers hold one
 * row of this many floats, staged in TALLY_K_CAT_SHORT_COLS / 16 chunks of
 * 16 columns. */
#define TALLY_K_CAT_SHORT_COLS 64u
#define TALLY_K_CAT_CHUNK 16u
/* Groups of tally_k_categorical_short that should fit a CUDA
 * multiprocessor at once: two leave it 128 registers a work-item, where its
 * row of 64 floats and the 64 staged loads live without spilling. */
#ifndef TALLY_K_CAT_SHORT_GROUPS_PER_CU
#define TALLY_K_CAT_SHORT_GROUPS_PER_CU 2u
#endif
/* 1: tally_k_categorical_short's chunks lie in local memory at a pitch of
 * 16 floats with each row's columns permuted (column c of row r at
 * c ^ ((r >> 1) & 15)), so that neither a warp's stores (two rows of 16)
 * nor its loads (one column of 32 rows) meet twice on a bank; 0: a pitch of
 * 17, whose stores put lanes 0 and 31 on one bank. Only where the data
 * lie, never a value. */
#ifndef TALLY_K_CAT_SWIZZLE
#define TALLY_K_CAT_SWIZZLE 1u
#endif

/* 1: on CUDA, short fp32 rows whose columns come in whole aligned quads
 * take tally_k_categorical_staged (the group's rows copied straight to
 * local memory, cp.async, and each work-item's rule a loop over its row
 * there); 0: tally_k_categorical_short for them too. The same bits either
 * way. The stage holds 256 rows of TALLY_K_CAT_SHORT_COLS floats. */
#ifndef TALLY_K_CAT_STAGED
#define TALLY_K_CAT_STAGED 1u
#endif
#define TALLY_K_CAT_STAGE_BYTES (256u * TALLY_K_CAT_SHORT_COLS * 4u)
/* 1: where neither the short kernel nor the staged one runs (OpenCL, on
 * GPUs and CPUs), rows of at most TALLY_K_CAT_SHORT_COLS columns take
 * tally_k_categorical_local, TALLY_K_CAT_LOCAL_ROWS rows a group in local
 * memory (32 KiB); 0: the tile kernels. The same bits either way. */
#ifndef TALLY_K_CAT_LOCAL
#define TALLY_K_CAT_LOCAL 1u
#endif
#define TALLY_K_CAT_LOCAL_ROWS 128u

#ifndef TALLY_K_RNG_BLOCKS_PER_ITEM
#define TALLY_K_RNG_BLOCKS_PER_ITEM 4u
#endif

/* Elements of the tile tally_k_categorical stages in local memory per step:
 * R rows of C columns, R * C = this, C = 2^tile_log2 between 16 and 256
 * (the host picks the smallest that holds a whole row, so that rows of up
 * to 256 columns are staged once). Each row is padded to C + 1 floats (odd,
 * so that neighbouring work-items read different banks). */
#define TALLY_K_CAT_TILE 4096u

/* Functions of tally_k_math_eval (see tally__gpu_math_eval). */
#define TALLY_K_MATH_EXP 1u
#define TALLY_K_MATH_LOG 2u
#define TALLY_K_MATH_LOG1P 3u
#define TALLY_K_MATH_LGAMMA 4u
#define TALLY_K_MATH_SQRT 5u
#define TALLY_K_MATH_RECIP 6u
#define TALLY_K_MATH_SINPI 7u
#define TALLY_K_MATH_COSPI 8u
#define TALLY_K_MATH_DIV 9u /* in[k] / in[n - 1 - k] */
#define TALLY_K_MATH_DIGAMMA 10u

/* The most local memory any kernel declares, in bytes (tally_k_dm_rows:
 * three tree arrays, the lgamma(n + 1) table and two alpha tables;
 * tally_k_dm_rows_table's three tree arrays, the lgamma(n + 1) table and
 * TALLY_K_DM_TERMS are as much, tally_k_rng_fill_any's 16 KiB of words is
 * less). A device with less is refused. */
#define TALLY_K_LOCAL_BYTES (4u * (4u * TALLY_K_GROUP_SIZE + 2u * TALLY_K_DM_LOCAL_COLS))

#endif /* TALLY_KERNEL_ABI_H */
