/*
 * kernels/rng.h - random fills and categorical draws. Stream element i is
 * word i % 4 of Philox block i / 4 (tally/philox.h); each work-item
 * computes whole blocks and hands out their words, so no block is computed
 * twice for one call.
 *
 * A fill is a store-bound kernel once Philox is cheap enough, so its layout
 * decides its speed: every store a warp issues must cover whole 32-byte
 * sectors. A work-item that writes its block's four words with four 4-byte
 * stores, 16 bytes apart from its neighbour's, makes every warp store touch
 * 16 sectors a quarter each: four times the sector traffic of the same
 * bytes written whole, which capped the old kernel near a quarter of the
 * write bandwidth. Both kernels below write whole sectors: the quad kernel
 * with one 16-byte store per block (neighbouring work-items, neighbouring
 * blocks), the general kernel through local memory with neighbouring
 * work-items writing neighbouring elements.
 */
#ifndef TALLY_KERNELS_RNG_H
#define TALLY_KERNELS_RNG_H

#include "tree.h"
#include "halves.h"

/* Four 32-bit words moved as one 16-byte store (they are bits, not
 * numbers: nothing is converted). */
#if TALLY_TARGET_OPENCL
typedef uint4 tally_k_u4;
#  define TALLY_K_U4(a, b, c, d) ((uint4)((a), (b), (c), (d)))
#else
typedef uint4 tally_k_u4;
#  define TALLY_K_U4(a, b, c, d) make_uint4((a), (b), (c), (d))
#endif

/* The four output words of Philox block `blk` for a distribution: raw bits,
 * uniform or normal (written as bits, so one kernel serves the u32 and the
 * f32 outputs). The kernels call it with `dist` a constant, so each
 * distribution gets its own loop with no branch inside. */
TALLY_FN void tally_k_rng_words(tally_philox4 blk, tally_u32 dist, tally_u32 *bits)
{
    if (dist == TALLY_DIST_NORMAL) {
        float f[4];
        tally_normal_pair(blk.v[0], blk.v[1], &f[0], &f[1]);
        tally_normal_pair(blk.v[2], blk.v[3], &f[2], &f[3]);
        for (tally_u32 w = 0; w < 4u; w++) bits[w] = tally_as_u32(f[w]);
    } else if (dist == TALLY_DIST_UNIFORM) {
        for (tally_u32 w = 0; w < 4u; w++) bits[w] = tally_as_u32(tally_uniform_from_bits(blk.v[w]));
    } else {
        for (tally_u32 w = 0; w < 4u; w++) bits[w] = blk.v[w];
    }
}

/* Block j of a quad fill (stream block b0 + j) stored whole at quad q0 + j. */
TALLY_FN void tally_k_rng_quad(TALLY_GLOBAL tally_u32 *TALLY_RESTRICT out, tally_u64 q0, tally_u64 j, tally_u32 dist,
                               tally_u64 seed, tally_u64 subsequence, tally_u64 b0)
{
    tally_u32 bits[4];
    tally_k_rng_words(tally_stream_block(seed, subsequence, b0 + j), dist, bits);
    ((TALLY_GLOBAL tally_k_u4 *)out)[q0 + j] = TALLY_K_U4(bits[0], bits[1], bits[2], bits[3]);
}

/* The whole blocks jlo .. jlo + nfull - 1 of a quad fill: each pass of a
 * group covers TALLY_K_RNG_BLOCKS_PER_ITEM * 256 consecutive blocks, work-item
 * lid taking blocks lid, lid + 256, ... of it, so each store instruction of
 * a warp covers 512 contiguous bytes, and every work-item has several
 * independent Philox evaluations to interleave. Only the last pass checks
 * bounds. */
TALLY_FN void tally_k_rng_quads(TALLY_GLOBAL tally_u32 *TALLY_RESTRICT out, tally_u64 q0, tally_u64 jlo,
                                tally_u64 nfull, tally_u32 dist, tally_u64 seed, tally_u64 subsequence, tally_u64 b0)
{
    const tally_u64 pass = (tally_u64)TALLY_K_RNG_BLOCKS_PER_ITEM * TALLY_K_GROUP_SIZE;
    const tally_u64 lid = TALLY_LID();
    for (tally_u64 p0 = TALLY_GROUP_ID() * pass; p0 < nfull; p0 += TALLY_GROUP_COUNT() * pass) {
        const tally_u64 j0 = jlo + p0 + lid;
        if (nfull - p0 >= pass) {
            for (tally_u32 u = 0; u < TALLY_K_RNG_BLOCKS_PER_ITEM; u++)
                tally_k_rng_quad(out, q0, j0 + u * TALLY_K_GROUP_SIZE, dist, seed, subsequence, b0);
        } else {
            for (tally_u32 u = 0; u < TALLY_K_RNG_BLOCKS_PER_ITEM; u++)
                if (p0 + lid + u * TALLY_K_GROUP_SIZE < nfull)
                    tally_k_rng_quad(out, q0, j0 + u * TALLY_K_GROUP_SIZE, dist, seed, subsequence, b0);
        }
    }
}

/*
 * Quad fill: out[out_off + k] = element offset + k for k < n, where the
 * output is contiguous, 16-byte aligned at element 0 of its buffer, and
 * out_off % 4 == offset % 4, so that Philox block m lands on the output's
 * quad m - offset / 4 + out_off / 4 and whole blocks are stored whole.
 * A partial first or last block (offset or offset + n not a multiple of 4)
 * is written word by word by work-items 0 and 1 of group 0. The arguments
 * are tally_k_rng_fill_any's; rows * cols = n and stride is not used.
 */
TALLY_KERNEL void tally_k_rng_fill(TALLY_K_PARAMS(rng_fill))
{
    (void)stride;
    const tally_k_quad_fill f = tally_k_quad_fill_of(rows, cols, offset, out_off);
    if (f.n == 0u) return;
    const tally_u64 b0 = f.b0, q0 = f.q0, jlo = f.jlo, jend = f.jend;
    tally_u64 j;
    /* The partial edge blocks: work-item 0 the first, 1 the last. */
    if (TALLY_GROUP_ID() == 0u && TALLY_LID() < 2u && tally_k_quad_fill_edge(&f, TALLY_LID(), &j)) {
        tally_u32 bits[4];
        tally_k_rng_words(tally_stream_block(seed, subsequence, b0 + j), dist, bits);
        tally_k_quad_fill_store_edge(out, out_off, &f, j, offset, bits);
    }
    const tally_u64 nfull = jend > jlo ? jend - jlo : 0u;
    if (dist == TALLY_DIST_RAW)
        tally_k_rng_quads(out, q0, jlo, nfull, TALLY_DIST_RAW, seed, subsequence, b0);
    else if (dist == TALLY_DIST_UNIFORM)
        tally_k_rng_quads(out, q0, jlo, nfull, TALLY_DIST_UNIFORM, seed, subsequence, b0);
    else
        tally_k_rng_quads(out, q0, jlo, nfull, TALLY_DIST_NORMAL, seed, subsequence, b0);
}

/* Stores word `word` of a general fill at element `at` of its output: as
 * it is (dtype TALLY_U32: the raw bits or an fp32 draw's), or as the fp32
 * draw it holds narrowed to a half (TALLY_BF16, TALLY_F16) by tally/half.h,
 * exactly the value src/half.c's narrowing of the fp32 fill gives. The
 * kernels pass dtype as a constant, so each has one store and no branch. */
TALLY_FN void tally_k_rng_store(TALLY_GLOBAL tally_u32 *TALLY_RESTRICT o32, TALLY_GLOBAL tally_u16 *TALLY_RESTRICT o16,
                                tally_u32 dtype, tally_u64 at, tally_u32 word)
{
    if (dtype == TALLY_BF16 || dtype == TALLY_F16) o16[at] = tally_k_narrow1(dtype, tally_as_f32(word));
    else o32[at] = word;
}

/*
 * General fill: element k of the row-major walk of out [rows, cols] (row
 * stride `stride`, element (r, c) at out_off + r * stride + c of o32, or of
 * o16 for a half dtype) gets stream element offset + k. Each pass of a
 * group computes 256 * TALLY_K_RNG_BLOCKS_PER_ITEM consecutive blocks into
 * `words` (local memory of 4 * TALLY_K_RNG_BLOCKS_PER_ITEM * 256 words),
 * then the work-items write the pass's elements in walk order, neighbour
 * next to neighbour, so a warp's stores cover whole sectors whatever the
 * alignment (a strided view still writes each row's run contiguously).
 */
TALLY_FN void tally_k_rng_fill_walk(TALLY_GLOBAL tally_u32 *TALLY_RESTRICT o32, TALLY_GLOBAL tally_u16 *TALLY_RESTRICT o16,
                                    tally_u32 dtype, TALLY_LOCAL tally_u32 *words, tally_u64 out_off, tally_u64 stride,
                                    tally_u64 rows, tally_u64 cols, tally_u32 dist, tally_u64 seed,
                                    tally_u64 subsequence, tally_u64 offset)
{
    const tally_u64 n = rows * cols;
    if (n == 0u) return;
    const int contiguous = rows <= 1u || stride == cols;
    const tally_u64 b0 = offset >> 2;
    const tally_u64 nb = ((offset + (n - 1u)) >> 2) - b0 + 1u;
    const tally_u64 pass = (tally_u64)TALLY_K_RNG_BLOCKS_PER_ITEM * TALLY_K_GROUP_SIZE;
    const tally_u32 lid = TALLY_LID();
    /* A work-item's elements of a pass are 256 apart: (r, c) advances by
     * (256 / cols, 256 % cols) with at most one carry. */
    const tally_u64 dr = contiguous ? 0u : TALLY_K_GROUP_SIZE / cols;
    const tally_u64 dc = contiguous ? TALLY_K_GROUP_SIZE : TALLY_K_GROUP_SIZE % cols;
    for (tally_u64 p0 = TALLY_GROUP_ID() * pass; p0 < nb; p0 += TALLY_GROUP_COUNT() * pass) {
        for (tally_u32 u = 0; u < TALLY_K_RNG_BLOCKS_PER_ITEM; u++) {
            const tally_u64 j = p0 + u * TALLY_K_GROUP_SIZE + lid;
            if (j < nb) {
                tally_u32 bits[4];
                tally_k_rng_words(tally_stream_block(seed, subsequence, b0 + j), dist, bits);
                const tally_u32 at = 4u * (u * TALLY_K_GROUP_SIZE + lid);
                for (tally_u32 w = 0; w < 4u; w++) words[at + w] = bits[w];
            }
        }
        TALLY_BARRIER();
        /* Stream element s = 4 (b0 + p0) + e is walk element s - offset;
         * e = lid + 256 t. The first valid t skips the words before offset
         * (at most 3, so t = 1 always lies past them). */
        const tally_u64 s0 = ((b0 + p0) << 2) + lid;
        const tally_u32 t0 = s0 < offset ? 1u : 0u;
        const tally_u64 k0 = s0 + (tally_u64)t0 * TALLY_K_GROUP_SIZE - offset;
        tally_u64 r = contiguous ? 0u : k0 / cols;
        tally_u64 c = contiguous ? k0 : k0 - r * cols;
        tally_u64 k = k0;
        for (tally_u32 t = t0; t < 4u * TALLY_K_RNG_BLOCKS_PER_ITEM && k < n; t++) {
            tally_k_rng_store(o32, o16, dtype, out_off + r * stride + c, words[t * TALLY_K_GROUP_SIZE + lid]);
            k += TALLY_K_GROUP_SIZE;
            r += dr;
            c += dc;
            if (c >= cols && !contiguous) {
                c -= cols;
                r++;
            }
        }
        TALLY_BARRIER();
    }
}

/* The general fill of a 32-bit view (tally_k_rng_fill_walk). */
TALLY_KERNEL void tally_k_rng_fill_any(TALLY_K_PARAMS(rng_fill))
{
    TALLY_LOCAL_ARRAY(tally_u32, words, 4u * TALLY_K_RNG_BLOCKS_PER_ITEM * TALLY_K_GROUP_SIZE);
    tally_k_rng_fill_walk(out, 0, TALLY_U32, words, out_off, stride, rows, cols, dist, seed, subsequence, offset);
}

/* The general fill of a BF16 or F16 view (dtype), uniform or normal: each
 * fp32 draw narrowed as it is stored, so the fill writes 2 bytes an element
 * with the bits of the fp32 fill narrowed afterwards (docs/ops.md). */
TALLY_KERNEL void tally_k_rng_fill_half(TALLY_K_PARAMS(rng_fill_half))
{
    TALLY_LOCAL_ARRAY(tally_u32, words, 4u * TALLY_K_RNG_BLOCKS_PER_ITEM * TALLY_K_GROUP_SIZE);
    if (dtype == TALLY_BF16)
        tally_k_rng_fill_walk(0, out, TALLY_BF16, words, out_off, stride, rows, cols, dist, seed, subsequence,
                              offset);
    else
        tally_k_rng_fill_walk(0, out, TALLY_F16, words, out_off, stride, rows, cols, dist, seed, subsequence,
                              offset);
}

/* ---- Categorical ---------------------------------------------------------- */

/* Weight (or logit) i of the categorical kernel's input, of dtype `dtype`
 * (fp32, or bf16 and f16 widened exactly by tally/half.h): the one place it
 * reads its input. */
TALLY_FN float tally_k_cat_weight(TALLY_GLOBAL const float *w, tally_u32 dtype, tally_u64 i)
{
    return tally_k_ld_at(w, dtype, i);
}

/* Stages columns c0 .. c0 + width - 1 of the group's `count` rows from row0
 * into tile (row rr at tile + rr * stride), element e of the tile being row
 * e / C, column e % C (C = 2^tile_log2). The constant trip count lets the
 * compiler issue all 16 loads of a work-item at once; dtype is a constant
 * (tally_k_categorical, tally_k_categorical_half), so each staging loop has
 * one kind of load and no branch inside. */
TALLY_FN void tally_k_cat_stage(TALLY_LOCAL float *tile, TALLY_GLOBAL const float *w, tally_u32 dtype, tally_u64 w_off,
                                tally_u64 w_stride, tally_u64 row0, tally_u32 count, tally_u64 c0, tally_u32 width,
                                tally_u32 tile_log2, tally_u32 stride, tally_u32 lid)
{
    const tally_u32 C = 1u << tile_log2;
    for (tally_u32 i = 0; i < TALLY_K_CAT_TILE / TALLY_K_GROUP_SIZE; i++) {
        const tally_u32 e = lid + i * TALLY_K_GROUP_SIZE;
        const tally_u32 rr = e >> tile_log2, cc = e & (C - 1u);
        if (rr < count && cc < width)
            tile[rr * stride + cc] = tally_k_cat_weight(w, dtype, w_off + (row0 + rr) * w_stride + c0 + cc);
    }
}


/*
 * out[out_off + r * out_stride] = the categorical rule (tally_categorical_row,
 * include/tally/terms.h) on row r of w, with u_r = uniform(offset + r). A
 * half w is widened as it is staged, so the rule runs on the fp32 values of
 * the widened input (docs/ops.md).
 *
 * Each row's rule is sequential (the running sums fix the order), so one
 * work-item owns a row and walks it in index order; a group takes R = 4096 /
 * C rows at a time (C = 2^tile_log2 columns per tile). A work-item reading
 * its own row straight from global memory would make every load of a warp
 * touch 32 rows, and wait on them one after the other; instead all 256
 * work-items of the group stage its rows C columns at a time in local
 * memory, each load of a warp reading whole runs of a row, all 16 loads of a
 * work-item in flight at once, and the rows' owners then fold the tile from
 * local memory. A row of one tile (cols <= C, the common case) then takes
 * tally_k_categorical_tile: one walk of additions (below). Longer rows take
 * tally_k_categorical_rows, where the rule's passes (the maximum of the
 * logits, the total, the search for the target) each walk the row's tiles
 * again, re-read from the cache, and the state carried from tile to tile is
 * the rule's own (maximum, total, last positive index, running sum). Either
 * way every operation and its order are tally_categorical_row's.
 *
 * The body of tally_k_categorical (fp32 weights) and tally_k_categorical_half
 * (bf16, f16), called with the element type as a constant, so that each
 * staging loop has one kind of load. The half bodies live in a kernel of
 * their own because the registers their conversions need would otherwise be
 * the fp32 kernel's too (56 -> 72 on sm_90 for one more body, 120 when the
 * type is chosen per tile), and its occupancy is what keeps its loads in
 * flight.
 */
/*
 * The rule on rows of one tile (cols <= C), every row of the group staged in
 * `tile` at once. The row walk that fixes the bits is the running sum: its
 * partial sums are the total's and the search's alike (both start at 0 and
 * add w_0, w_1, ... in order), so one walk does both passes' sums. The walk
 * stores, in place of w_k, the partial sum after w_k where w_k > 0 and -1
 * elsewhere; the search then only compares stored values with the target
 * (u_r * total >= 0, so a stored -1 never passes, as a zero weight never
 * does), and those comparisons depend on nothing but the walk. For logits,
 * the row's maximum is the owner's fold in index order, and then every
 * work-item of the group computes exponentials of the tile's elements
 * (the rule's tally_expf(v_k - m) on the same values: the same bits), so
 * the owner's walk is additions alone. A bad weight (negative, NaN or
 * infinite) makes the row's result invalid wherever it stands, so the walk
 * notes it and goes on instead of breaking out. Returns the row's result
 * in lid's row (lid < count).
 */
TALLY_FN tally_i32 tally_k_categorical_tile(TALLY_LOCAL float *ul, TALLY_LOCAL float *ml, TALLY_LOCAL float *tile,
                                            tally_u32 count, tally_u32 width, tally_u32 tile_log2,
                                            tally_u32 is_logits, tally_u32 lid)
{
    const tally_u32 stride = (1u << tile_log2) + 1u;
    int bad = 0;
    /* The barriers run for weights too (every work-item must reach them;
     * they cost next to nothing). */
    if (is_logits && lid < count) {
        TALLY_LOCAL const float *v = tile + lid * stride;
        float m = v[0];
        for (tally_u32 j = 1; j < width; j++) m = tally_max_nan(m, v[j]);
        ml[lid] = m;
    }
    TALLY_BARRIER();
    if (is_logits) {
        for (tally_u32 e = lid; e < count << tile_log2; e += TALLY_K_GROUP_SIZE) {
            const tally_u32 rr = e >> tile_log2, cc = e & ((1u << tile_log2) - 1u);
            /* A row whose maximum is not finite is invalid whatever its
             * exponentials are; they are computed anyway (no branch). */
            if (cc < width) tile[rr * stride + cc] = tally_expf(tile[rr * stride + cc] - ml[rr]);
        }
    }
    TALLY_BARRIER();
    if (is_logits && lid < count && !tally_isfinite(ml[lid])) bad = 1;
    tally_i32 found = TALLY_CATEGORICAL_INVALID;
    if (lid < count) {
        TALLY_LOCAL float *v = tile + lid * stride;
        float total = 0.0f;
        tally_i32 last_nonzero = TALLY_CATEGORICAL_INVALID;
        for (tally_u32 j = 0; j < width; j++) {
            const float wk = v[j];
            bad |= !(wk >= 0.0f) || tally_isinf(wk);
            total = total + wk;
            last_nonzero = wk > 0.0f ? (tally_i32)j : last_nonzero;
            v[j] = wk > 0.0f ? total : -1.0f;
        }
        if (!bad && total > 0.0f && !tally_isinf(total)) {
            const float target = ul[lid] * total;
            found = last_nonzero;
            for (tally_u32 j = 0; j < width; j++) {
                if (v[j] >= target) {
                    found = (tally_i32)j;
                    break;
                }
            }
        }
    }
    return found;
}

/* tally_k_categorical_rows where every row is one tile (cols <= C). */
TALLY_FN void tally_k_categorical_tiles(TALLY_LOCAL float *ul, TALLY_LOCAL float *ml, TALLY_LOCAL float *tile,
                                        TALLY_GLOBAL const float *w, tally_u32 w_dtype, tally_u64 w_off,
                                        tally_u64 w_stride, tally_u64 rows, tally_u32 cols, tally_u32 is_logits,
                                        tally_u64 seed, tally_u64 subsequence, tally_u64 offset,
                                        TALLY_GLOBAL tally_i32 *TALLY_RESTRICT out, tally_u64 out_off,
                                        tally_u64 out_stride, tally_u32 tile_log2)
{
    const tally_u32 lid = TALLY_LID();
    const tally_u32 R = TALLY_K_CAT_TILE >> tile_log2;
    for (tally_u64 row0 = TALLY_GROUP_ID() * R; row0 < rows; row0 += TALLY_GROUP_COUNT() * R) {
        const tally_u32 count = (tally_u32)tally_k_min_u64(R, rows - row0);
        tally_k_local_uniforms(ul, row0, count, seed, subsequence, offset, lid);
        tally_k_cat_stage(tile, w, w_dtype, w_off, w_stride, row0, count, 0u, cols, tile_log2,
                          (1u << tile_log2) + 1u, lid);
        TALLY_BARRIER();
        const tally_i32 found = tally_k_categorical_tile(ul, ml, tile, count, cols, tile_log2, is_logits, lid);
        if (lid < count) out[out_off + (row0 + lid) * out_stride] = found;
        TALLY_BARRIER();
    }
}

TALLY_FN void tally_k_categorical_rows(TALLY_LOCAL float *ul, TALLY_LOCAL float *tile,
                                       TALLY_GLOBAL const float *w,
                                       tally_u32 w_dtype, tally_u64 w_off, tally_u64 w_stride, tally_u64 rows,
                                       tally_u64 cols, tally_u32 is_logits, tally_u64 seed, tally_u64 subsequence,
                                       tally_u64 offset, TALLY_GLOBAL tally_i32 *TALLY_RESTRICT out,
                                       tally_u64 out_off, tally_u64 out_stride, tally_u32 tile_log2)
{
    const tally_u32 lid = TALLY_LID();
    const tally_u32 C = 1u << tile_log2;
    const tally_u32 R = TALLY_K_CAT_TILE >> tile_log2;
    const tally_u32 stride = C + 1u;
    const tally_u64 tiles = (cols >> tile_log2) + ((cols & (C - 1u)) != 0u ? 1u : 0u);
    /* Pass 0 (logits only): the maximum; pass 1: the total; pass 2: the search. */
    const tally_u32 first_pass = is_logits ? 0u : 1u;
    for (tally_u64 row0 = TALLY_GROUP_ID() * R; row0 < rows; row0 += TALLY_GROUP_COUNT() * R) {
        const tally_u32 count = (tally_u32)tally_k_min_u64(R, rows - row0);
        tally_k_local_uniforms(ul, row0, count, seed, subsequence, offset, lid);
        float m = 0.0f, total = 0.0f, target = 0.0f, running = 0.0f;
        int bad = 0;
        tally_i32 last_nonzero = TALLY_CATEGORICAL_INVALID, found = TALLY_CATEGORICAL_INVALID;
        for (tally_u32 pass = first_pass; pass < 3u; pass++) {
            for (tally_u64 t = 0; t < tiles; t++) {
                const tally_u64 c0 = t << tile_log2;
                const tally_u32 width = (tally_u32)tally_k_min_u64(C, cols - c0);
                /* A row of one tile is loaded for the first pass only. */
                if (tiles > 1u || pass == first_pass)
                    tally_k_cat_stage(tile, w, w_dtype, w_off, w_stride, row0, count, c0, width, tile_log2, stride,
                                      lid);
                TALLY_BARRIER();
                if (lid < count && !bad) {
                    TALLY_LOCAL const float *v = tile + lid * stride;
                    for (tally_u32 j = 0; j < width; j++) {
                        const tally_u64 k = c0 + j;
                        if (pass == 0u) {
                            m = k == 0u ? v[j] : tally_max_nan(m, v[j]);
                        } else if (pass == 1u) {
                            const float wk = is_logits ? tally_expf(v[j] - m) : v[j];
                            if (!(wk >= 0.0f) || tally_isinf(wk)) {
                                bad = 1;
                                break;
                            }
                            total = total + wk;
                            if (wk > 0.0f) last_nonzero = (tally_i32)k;
                        } else if (found < 0) {
                            const float wk = is_logits ? tally_expf(v[j] - m) : v[j];
                            running = running + wk;
                            if (wk > 0.0f && running >= target) found = (tally_i32)k;
                        }
                    }
                }
                TALLY_BARRIER();
            }
            /* Between passes: the rule's checks on the maximum and the total. */
            if (pass == 0u && !tally_isfinite(m)) bad = 1;
            if (pass == 1u && !bad && lid < count) {
                if (!(total > 0.0f) || tally_isinf(total)) bad = 1;
                target = ul[lid] * total;
            }
        }
        if (lid < count) {
            const tally_u64 r = row0 + lid;
            out[out_off + r * out_stride] =
                bad ? TALLY_CATEGORICAL_INVALID : (found >= 0 ? found : last_nonzero);
        }
        TALLY_BARRIER();
    }
}

/* The kernels' local memory: the rows' uniforms, their maxima (logits on
 * one tile), and R rows of C + 1 floats (R * C + R <= 4096 + 256). */
#define TALLY_K_CAT_LOCALS                          \
    TALLY_LOCAL_ARRAY(float, ul, TALLY_K_GROUP_SIZE); \
    TALLY_LOCAL_ARRAY(float, ml, TALLY_K_GROUP_SIZE); \
    TALLY_LOCAL_ARRAY(float, tile, TALLY_K_CAT_TILE + TALLY_K_GROUP_SIZE)
#define TALLY_K_CAT_ROWS(dtype)                                                                                  \
    do {                                                                                                         \
        if (TALLY_K_CAT_ONE_TILE && cols <= (1u << tile_log2))                                                   \
            tally_k_categorical_tiles(ul, ml, tile, w, (dtype), w_off, w_stride, rows, (tally_u32)cols,          \
                                      is_logits, seed, subsequence, offset, out, out_off, out_stride, tile_log2); \
        else                                                                                                     \
            tally_k_categorical_rows(ul, tile, w, (dtype), w_off, w_stride, rows, cols, is_logits, seed,         \
                                     subsequence, offset, out, out_off, out_stride, tile_log2);                  \
    } while (0)

/* fp32 weights (w_dtype is TALLY_F32). Both kernels hold the two row
 * paths; uncapped, nvcc gave them 100 registers (two groups a
 * multiprocessor). The fp32 kernel is capped at TALLY_K_CAT_GROUPS_PER_CU
 * groups a multiprocessor, so that more groups stage their rows at once;
 * the halves' conversions keep 80 registers (3 groups), where ptxas needs
 * no spill. */
TALLY_KERNEL_GROUPS_PER_CU(TALLY_K_CAT_GROUPS_PER_CU) void tally_k_categorical(TALLY_K_PARAMS(categorical))
{
    TALLY_K_CAT_LOCALS;
    (void)w_dtype;
    TALLY_K_CAT_ROWS(TALLY_F32);
}

/* bf16 or f16 weights (w_dtype). */
TALLY_KERNEL_GROUPS_PER_CU(3) void tally_k_categorical_half(TALLY_K_PARAMS(categorical))
{
    TALLY_K_CAT_LOCALS;
    if (w_dtype == TALLY_BF16) TALLY_K_CAT_ROWS(TALLY_BF16);
    else TALLY_K_CAT_ROWS(TALLY_F16);
}
#undef TALLY_K_CAT_LOCALS
#undef TALLY_K_CAT_ROWS

/*
 * Short rows (cols <= TALLY_K_CAT_SHORT_COLS, the common case of a few
 * dozen classes): a group takes 256 rows at a time and each work-item owns
 * one, held in registers. The tile kernels above give a row of 64 columns
 * a work-item out of four and walk it in local memory, so three quarters of
 * the group wait on one quarter's walk; here every work-item walks.
 *
 * A work-item first issues all its loads of the group's rows (load k:
 * chunk k / 16, element lid + (k % 16) * 256 of the chunk's 256 rows x 16
 * columns, so that a warp's load reads whole runs of two rows), then the
 * group passes the chunks through local memory one at a time, each
 * work-item taking its own row's 16 values from each. The rule is
 * tally_k_categorical_tile's on the same values, operation for operation:
 * the maximum of logits folded in index order, their exponentials, one
 * walk of additions storing in place of w_k the partial sum after it where
 * w_k > 0 and -1 elsewhere, and the search for the first stored value at
 * or above the target (scanned from the end, keeping the last match seen:
 * the first index, whatever the scan's order). Every loop below runs a
 * constant number of times and is unrolled, so that the arrays are
 * registers; the steps past the row's end are predicated off.
 */
TALLY_FN void tally_k_cat_short_load(float *staged, TALLY_GLOBAL const float *w, tally_u32 dtype, tally_u64 w_off,
                                     tally_u64 w_stride, tally_u64 row0, tally_u32 count, tally_u32 cols,
                                     tally_u32 lid)
{
    TALLY_UNROLL_ALL
    for (tally_u32 k = 0; k < TALLY_K_CAT_SHORT_COLS; k++) {
        const tally_u32 e = lid + (k % TALLY_K_CAT_CHUNK) * TALLY_K_GROUP_SIZE;
        const tally_u32 rr = e / TALLY_K_CAT_CHUNK;
        const tally_u32 cc = (k / TALLY_K_CAT_CHUNK) * TALLY_K_CAT_CHUNK + e % TALLY_K_CAT_CHUNK;
        staged[k] = rr < count && cc < cols ? tally_k_cat_weight(w, dtype, w_off + (row0 + rr) * w_stride + cc)
                                            : 0.0f;
    }
}

/* Where column col of row `row` of a chunk lies in local memory
 * (TALLY_K_CAT_SWIZZLE). */
#if TALLY_K_CAT_SWIZZLE
#  define TALLY_K_CAT_PITCH TALLY_K_CAT_CHUNK
TALLY_FN tally_u32 tally_k_cat_slot(tally_u32 row, tally_u32 col)
{
    return row * TALLY_K_CAT_CHUNK + (col ^ ((row >> 1) & (TALLY_K_CAT_CHUNK - 1u)));
}
#else
#  define TALLY_K_CAT_PITCH (TALLY_K_CAT_CHUNK + 1u)
TALLY_FN tally_u32 tally_k_cat_slot(tally_u32 row, tally_u32 col) { return row * TALLY_K_CAT_PITCH + col; }
#endif

TALLY_FN tally_i32 tally_k_cat_short_rule(float *v, tally_u32 cols, tally_u32 is_logits, float u)
{
    int bad = 0;
    if (is_logits) {
        float m = v[0];
        TALLY_UNROLL_ALL
        for (tally_u32 j = 1; j < TALLY_K_CAT_SHORT_COLS; j++)
            if (j < cols) m = tally_max_nan(m, v[j]);
        TALLY_UNROLL_ALL
        for (tally_u32 j = 0; j < TALLY_K_CAT_SHORT_COLS; j++)
            if (j < cols) v[j] = tally_expf(v[j] - m);
        bad = !tally_isfinite(m);
    }
    float total = 0.0f;
    tally_i32 last_nonzero = TALLY_CATEGORICAL_INVALID;
    TALLY_UNROLL_ALL
    for (tally_u32 j = 0; j < TALLY_K_CAT_SHORT_COLS; j++) {
        if (j < cols) {
            const float wk = v[j];
            bad |= !(wk >= 0.0f) || tally_isinf(wk);
            total = total + wk;
            last_nonzero = wk > 0.0f ? (tally_i32)j : last_nonzero;
            v[j] = wk > 0.0f ? total : -1.0f;
        }
    }
    if (bad || !(total > 0.0f) || tally_isinf(total)) return TALLY_CATEGORICAL_INVALID;
    const float target = u * total;
    tally_i32 found = last_nonzero;
    TALLY_UNROLL_ALL
    for (tally_u32 j = TALLY_K_CAT_SHORT_COLS; j-- > 0u;)
        if (j < cols && v[j] >= target) found = (tally_i32)j;
    return found;
}

/* Every dtype: the staging loads are the only step that reads w, so the
 * halves need no kernel of their own here (the dtype is tested once, not
 * per load). The host sends rows of at most TALLY_K_CAT_SHORT_COLS
 * columns, one group per 256 rows, and only where the backend keeps
 * private arrays in registers across barriers (CUDA: tally__gpu_context's
 * register_tiles); OpenCL builds the kernel but takes the tile kernels. */
TALLY_KERNEL_GROUPS_PER_CU(TALLY_K_CAT_SHORT_GROUPS_PER_CU) void tally_k_categorical_short(TALLY_K_PARAMS(categorical))
{
    TALLY_LOCAL_ARRAY(float, ul, TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, chunk, TALLY_K_GROUP_SIZE * TALLY_K_CAT_PITCH);
    const tally_u32 lid = TALLY_LID();
    const tally_u32 width = (tally_u32)cols;
    (void)tile_log2;
    for (tally_u64 row0 = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE; row0 < rows;
         row0 += TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE) {
        const tally_u32 count = (tally_u32)tally_k_min_u64(TALLY_K_GROUP_SIZE, rows - row0);
        float staged[TALLY_K_CAT_SHORT_COLS], v[TALLY_K_CAT_SHORT_COLS];
        if (w_dtype == TALLY_BF16)
            tally_k_cat_short_load(staged, w, TALLY_BF16, w_off, w_stride, row0, count, width, lid);
        else if (w_dtype == TALLY_F16)
            tally_k_cat_short_load(staged, w, TALLY_F16, w_off, w_stride, row0, count, width, lid);
        else
            tally_k_cat_short_load(staged, w, TALLY_F32, w_off, w_stride, row0, count, width, lid);
        tally_k_local_uniforms(ul, row0, count, seed, subsequence, offset, lid);
        /* Every chunk passes through local memory, past the row's end too,
         * so that the barriers are unconditional. */
        TALLY_UNROLL_ALL
        for (tally_u32 c = 0; c < TALLY_K_CAT_SHORT_COLS / TALLY_K_CAT_CHUNK; c++) {
            TALLY_UNROLL_ALL
            for (tally_u32 i = 0; i < TALLY_K_CAT_CHUNK; i++) {
                const tally_u32 e = lid + i * TALLY_K_GROUP_SIZE;
                chunk[tally_k_cat_slot(e / TALLY_K_CAT_CHUNK, e % TALLY_K_CAT_CHUNK)] =
                    staged[c * TALLY_K_CAT_CHUNK + i];
            }
            TALLY_BARRIER();
            TALLY_UNROLL_ALL
            for (tally_u32 i = 0; i < TALLY_K_CAT_CHUNK; i++) v[c * TALLY_K_CAT_CHUNK + i] = chunk[tally_k_cat_slot(lid, i)];
            TALLY_BARRIER();
        }
        if (lid < count) {
            const tally_i32 found = tally_k_cat_short_rule(v, width, is_logits, ul[lid]);
            out[out_off + (row0 + lid) * out_stride] = found;
        }
    }
}

/* 1 when a stored partial sum p reaches the target: p >= target and p > 0
 * (tally_k_cat_lean_rule). */
TALLY_FN int tally_k_cat_reaches(float p, float target) { return (p >= target) & (p > 0.0f); }

/*
 * The categorical rule (tally_categorical_row) on a row of quads in local
 * memory, quad q at row[q ^ lane7], with fewer operations a weight than
 * tally_k_cat_short_rule and the same result for every row: the walk
 * stores every partial sum p_j (the short rule stores -1 where w_j <= 0)
 * and keeps the least weight, low = minimum of 0 and the w_j (TALLY_MINNUM
 * skips NaN), instead of testing each weight and tracking the last nonzero
 * one:
 * - Invalid rows: a negative weight (-inf too) makes low < 0; a NaN makes
 *   the total NaN and +inf makes it infinite or NaN, which the total's own
 *   test catches. Nothing else makes low < 0 (-0 is not below 0), so a row
 *   is invalid exactly when the other rule says so.
 * - In a valid row every w_j >= 0, so the partial sums never decrease
 *   (round to nearest is monotone, and p + 0 is p). The first j whose p_j
 *   reaches the target (p_j >= target and p_j > 0) has w_j > 0: w_0 = p_0
 *   > 0, and for j > 0, w_j = 0 would leave p_j = p_{j-1}, which does not
 *   reach. Every earlier k with w_k > 0 has p_k > 0 and so p_k < target.
 *   So it is the other rule's first k with w_k > 0 and running sum >=
 *   target; the "> 0" part is the target-0 case (u * total underflows),
 *   where that rule skips leading zero weights.
 * - u is in (0, 1], so target = u * total <= total, the last partial sum,
 *   which is > 0: the last quad always reaches, and the other rule's
 *   fallback (the last nonzero index) is never taken. The scan tests a
 *   quad's last partial sum (its largest) and stops at the first quad that
 *   reaches, never past the last.
 */
TALLY_FN tally_i32 tally_k_cat_lean_rule(TALLY_LOCAL tally_f4 *row, tally_u32 lane7, tally_u32 quads,
                                         tally_u32 is_logits, float u)
{
    int bad = 0;
    if (is_logits) {
        float m = row[lane7].x;
        for (tally_u32 q = 0; q < quads; q++) {
            const tally_f4 v = row[q ^ lane7];
            if (q > 0u) m = tally_max_nan(m, v.x);
            m = tally_max_nan(m, v.y);
            m = tally_max_nan(m, v.z);
            m = tally_max_nan(m, v.w);
        }
        for (tally_u32 q = 0; q < quads; q++) {
            tally_f4 v = row[q ^ lane7];
            v.x = tally_expf(v.x - m);
            v.y = tally_expf(v.y - m);
            v.z = tally_expf(v.z - m);
            v.w = tally_expf(v.w - m);
            row[q ^ lane7] = v;
        }
        bad = !tally_isfinite(m);
    }
    /* Four quads a batch, loaded before any is used: each load's latency
     * would otherwise sit in the chain of additions. */
    float total = 0.0f, low = 0.0f;
    for (tally_u32 q0 = 0; q0 < quads; q0 += 4u) {
        tally_f4 v[4];
        TALLY_UNROLL_ALL
        for (tally_u32 i = 0; i < 4u; i++)
            if (q0 + i < quads) v[i] = row[(q0 + i) ^ lane7];
        TALLY_UNROLL_ALL
        for (tally_u32 i = 0; i < 4u; i++) {
            if (q0 + i < quads) {
                low = TALLY_MINNUM(low, TALLY_MINNUM(TALLY_MINNUM(v[i].x, v[i].y), TALLY_MINNUM(v[i].z, v[i].w)));
                total = total + v[i].x;
                v[i].x = total;
                total = total + v[i].y;
                v[i].y = total;
                total = total + v[i].z;
                v[i].z = total;
                total = total + v[i].w;
                v[i].w = total;
                row[(q0 + i) ^ lane7] = v[i];
            }
        }
    }
    if (bad || low < 0.0f || !(total > 0.0f) || tally_isinf(total)) return TALLY_CATEGORICAL_INVALID;
    const float target = u * total;
    /* The first quad whose last partial sum reaches, four quads' sums
     * loaded at a time; the last quad when no earlier one does. */
    tally_u32 q = quads - 1u;
    for (tally_u32 q0 = 0; q0 + 1u < quads && q == quads - 1u; q0 += 4u) {
        float last[4];
        TALLY_UNROLL_ALL
        for (tally_u32 i = 0; i < 4u; i++) last[i] = q0 + i + 1u < quads ? row[(q0 + i) ^ lane7].w : 0.0f;
        TALLY_UNROLL_ALL
        for (tally_u32 i = 4u; i-- > 0u;)
            if (q0 + i + 1u < quads && tally_k_cat_reaches(last[i], target)) q = q0 + i;
    }
    const tally_f4 v = row[q ^ lane7];
    const tally_u32 j = tally_k_cat_reaches(v.x, target)   ? 0u
                        : tally_k_cat_reaches(v.y, target) ? 1u
                        : tally_k_cat_reaches(v.z, target) ? 2u
                                                           : 3u;
    return (tally_i32)(4u * q + j);
}

/*
 * Short fp32 rows in whole aligned quads, on CUDA (tally_k_categorical_
 * short's gate, plus cols % 4 == 0, 16-byte aligned rows and the stage
 * granted). A group takes 256 rows at a time; each warp copies its own 32
 * rows to the stage with cp.async, quad (r, q) of row r at slot
 * 16 r + (q ^ (r & 7)) (whole 512-byte runs of two rows a copy, no data
 * through registers), waits for them and walks them: work-item r runs
 * tally_k_cat_lean_rule on row r as loops over its quads (16-byte reads,
 * the eight work-items of a quarter warp on eight different bank quads),
 * writing the exponentials and the partial sums back in place. No other
 * warp reads a warp's rows, so there is no group barrier: a warp whose
 * rows have landed walks while the others' copies are still in flight.
 * The loops are a few hundred instructions that the instruction cache
 * holds, where the short kernel's unrolled row of 64 registers was 1600
 * fetched once (GPU run 21's profile: half the stall cycles on
 * instruction fetch). The host launches it only where TALLY_HAS_STAGE
 * (CUDA) and the stage is granted (tally__gpu_context's stage_bytes); the
 * OpenCL program must define every kernel of the list, so there its body
 * is empty.
 */
TALLY_KERNEL_GROUPS_PER_CU(3) void tally_k_categorical_staged(TALLY_K_PARAMS(categorical))
{
#if TALLY_HAS_STAGE
    TALLY_LOCAL_ARRAY(float, ul, TALLY_K_GROUP_SIZE);
    TALLY_STAGE(stage);
    const tally_u32 lid = TALLY_LID();
    const tally_u32 quads = (tally_u32)cols / 4u, per_row = TALLY_K_CAT_SHORT_COLS / 4u;
    const tally_u32 lane = lid % 32u, wr0 = lid - lane; /* the warp's first row of the group's */
    (void)tile_log2;
    (void)w_dtype;
    for (tally_u64 row0 = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE; row0 < rows;
         row0 += TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE) {
        const tally_u32 count = (tally_u32)tally_k_min_u64(TALLY_K_GROUP_SIZE, rows - row0);
        const tally_u32 wcount = count > wr0 ? (count - wr0 < 32u ? count - wr0 : 32u) : 0u;
        TALLY_UNROLL_ALL
        for (tally_u32 k = 0; k < per_row; k++) {
            const tally_u32 e = lane + 32u * k;
            const tally_u32 r = e / per_row, q = e % per_row;
            if (r < wcount && q < quads)
                TALLY_STAGE_COPY(&stage[(wr0 + r) * per_row + (q ^ (r & 7u))],
                                 (TALLY_GLOBAL const tally_f4 *)(w + w_off + (row0 + wr0 + r) * w_stride) + q);
        }
        if (wcount > 0u) tally_k_local_uniforms(ul + wr0, row0 + wr0, wcount, seed, subsequence, offset, lane);
        TALLY_STAGE_WAIT();
        TALLY_BARRIER_EACH32();
        if (lid < count) {
            const tally_i32 found =
                tally_k_cat_lean_rule(stage + lid * per_row, lid & 7u, quads, is_logits, ul[lid]);
            out[out_off + (row0 + lid) * out_stride] = found;
        }
        TALLY_BARRIER_EACH32(); /* the warp's next rows rewrite its stage and uniforms */
    }
#endif
}

/* Loads rows row0 .. row0 + count - 1 of `dtype` into the stage, widened,
 * a quad at a time: quad e = lid + 256 k of the group's rows x 16 quads is
 * quad e % 16 of row e / 16 (consecutive work-items on consecutive quads
 * of a row), stored at slot 16 r + (q ^ (r & 7)) as in
 * tally_k_categorical_staged. A row's columns from cols up to its whole
 * quads get `pad`; quads past them are not stored. */
TALLY_FN void tally_k_cat_local_load(TALLY_LOCAL tally_f4 *stage, TALLY_GLOBAL const float *w, tally_u32 dtype,
                                     tally_u64 w_off, tally_u64 w_stride, tally_u64 row0, tally_u32 count,
                                     tally_u32 cols, float pad, tally_u32 lid)
{
    const tally_u32 per_row = TALLY_K_CAT_SHORT_COLS / 4u;
    TALLY_UNROLL_ALL
    for (tally_u32 k = 0; k < TALLY_K_CAT_LOCAL_ROWS * per_row / TALLY_K_GROUP_SIZE; k++) {
        const tally_u32 e = lid + k * TALLY_K_GROUP_SIZE;
        const tally_u32 r = e / per_row, q = e % per_row, c = 4u * q;
        if (r < count && c < cols) {
            const tally_u64 i = w_off + (row0 + r) * w_stride + c;
            tally_f4 v;
            v.x = tally_k_cat_weight(w, dtype, i);
            v.y = c + 1u < cols ? tally_k_cat_weight(w, dtype, i + 1u) : pad;
            v.z = c + 2u < cols ? tally_k_cat_weight(w, dtype, i + 2u) : pad;
            v.w = c + 3u < cols ? tally_k_cat_weight(w, dtype, i + 3u) : pad;
            stage[r * per_row + (q ^ (r & 7u))] = v;
        }
    }
}

/*
 * Short rows in local memory, a row a work-item, for devices without the
 * short kernel's registers or the staged kernel's cp.async (OpenCL;
 * TALLY_K_CAT_LOCAL). A group takes TALLY_K_CAT_LOCAL_ROWS rows of up to
 * TALLY_K_CAT_SHORT_COLS columns at a time, in any view and dtype: its
 * work-items load them (tally_k_cat_local_load), a barrier, then
 * work-item r walks row r by tally_k_cat_lean_rule. A row is padded to
 * whole quads with weights of 0, or logits of -inf (weight 0, and never
 * the maximum unless every logit is -inf, which is invalid either way):
 * zeros leave the total, the least weight and every partial sum as they
 * are, and the search stops at or before the row's last element, whose
 * partial sum is the total. The stage is 32 KiB, OpenCL's smallest local
 * memory, so each walker computes its own uniform rather than keeping
 * them in local memory. The load has one call site, its dtype tested per
 * element: with three copies for constant dtypes in an if-else chain,
 * PoCL 3.1 lost the stores (every row read back as zeros after the
 * barrier).
 */
TALLY_KERNEL void tally_k_categorical_local(TALLY_K_PARAMS(categorical))
{
    TALLY_LOCAL_ARRAY(tally_f4, stage, TALLY_K_CAT_LOCAL_ROWS * TALLY_K_CAT_SHORT_COLS / 4u);
    const tally_u32 lid = TALLY_LID();
    const tally_u32 width = (tally_u32)cols, quads = (width + 3u) / 4u;
    const float pad = is_logits ? TALLY_F32_NEG_INF : 0.0f;
    (void)tile_log2;
    for (tally_u64 row0 = TALLY_GROUP_ID() * TALLY_K_CAT_LOCAL_ROWS; row0 < rows;
         row0 += TALLY_GROUP_COUNT() * TALLY_K_CAT_LOCAL_ROWS) {
        const tally_u32 count = (tally_u32)tally_k_min_u64(TALLY_K_CAT_LOCAL_ROWS, rows - row0);
        tally_k_cat_local_load(stage, w, w_dtype, w_off, w_stride, row0, count, width, pad, lid);
        TALLY_BARRIER();
        if (lid < count) {
            const float u = tally_stream_uniform(seed, subsequence, offset + row0 + lid);
            const tally_i32 found =
                tally_k_cat_lean_rule(stage + lid * (TALLY_K_CAT_SHORT_COLS / 4u), lid & 7u, quads, is_logits, u);
            out[out_off + (row0 + lid) * out_stride] = found;
        }
        TALLY_BARRIER(); /* the next rows rewrite the stage */
    }
}

#endif /* TALLY_KERNELS_RNG_H */
