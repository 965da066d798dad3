/*
 * kernels/tree.h - device helpers shared by every kernel: loading a quad of
 * a vector, one lane's fold, the in-group tree of a tile, and the Philox
 * helpers that compute each block of four stream elements once.
 *
 * The reduction tree (docs/reduction-tree.md, src/plan.c) is performed here
 * exactly as backends/host/host_tree.c performs it: lane j of a tile folds
 * quads base + q*lanes + j for q = 0 .. qpl-1 in order, each quad's elements
 * in order, starting from its first element's term; then the lanes combine
 * pairwise with halving strides. A work-group of 256 work-items runs one
 * tile of 256 lanes, or 256/lanes tiles of a narrower plan side by side
 * ("segments"), so short rows still keep every work-item busy. Only the
 * work-items and the barriers are the GPU's: the arithmetic order is the
 * plan's alone.
 */
#ifndef TALLY_KERNELS_TREE_H
#define TALLY_KERNELS_TREE_H

#include "tally/terms.h"
#include "abi.h"
#include "halves.h"

TALLY_FN tally_u64 tally_k_min_u64(tally_u64 a, tally_u64 b)
{
    return a < b ? a : b;
}

/* Quads (groups of four consecutive elements) of a vector of n elements. */
TALLY_FN tally_u64 tally_k_quads(tally_u64 n)
{
    return (n >> 2) + ((n & 3u) != 0u ? 1u : 0u);
}

/* Lanes of a tile that hold at least one quad: a prefix of the lanes. */
TALLY_FN tally_u64 tally_k_active(tally_u64 quads, tally_u64 base, tally_u32 lanes)
{
    return base < quads ? tally_k_min_u64((tally_u64)lanes, quads - base) : 0u;
}

/* One level of trees laid out in segments (see the top of this file): the
 * group's work-items form TALLY_K_GROUP_SIZE / lanes segments of `lanes`
 * lanes; a pass gives segment seg unit first + seg, and unit u is tile
 * u % tiles of vector u / tiles (vectors of n elements). */
typedef struct tally_k_segs {
    tally_u32 lanes;
    tally_u32 segments;   /* per group */
    tally_u32 seg;        /* this work-item's segment */
    tally_u32 j;          /* and its lane in it */
    tally_u64 tiles;      /* per vector */
    tally_u64 units;      /* vectors * tiles */
    tally_u64 quads;      /* of a vector */
    tally_u64 tile_quads; /* lanes * qpl */
} tally_k_segs;

TALLY_FN tally_k_segs tally_k_segs_of(tally_u32 lid, tally_u32 lanes, tally_u32 qpl, tally_u64 vectors, tally_u64 tiles,
                                      tally_u64 n)
{
    tally_k_segs s;
    s.lanes = lanes;
    s.segments = TALLY_K_GROUP_SIZE / lanes;
    s.seg = lid / lanes;
    s.j = lid - s.seg * lanes;
    s.tiles = tiles;
    s.units = vectors * tiles;
    s.quads = tally_k_quads(n);
    s.tile_quads = (tally_u64)lanes * qpl;
    return s;
}

/* A unit's vector, the first quad of its tile and the lanes with a quad in
 * it; all 0 for a unit past the last. */
typedef struct tally_k_unit {
    tally_u64 vec;
    tally_u64 base;
    tally_u64 active;
} tally_k_unit;

TALLY_FN tally_k_unit tally_k_unit_at(const tally_k_segs *s, tally_u64 unit)
{
    tally_k_unit u;
    u.vec = 0;
    u.base = 0;
    u.active = 0;
    if (unit < s->units) {
        /* A vector of one tile (a row reduction's rows of up to 16384
         * elements) needs no division: GPUs divide 64-bit integers in a
         * subroutine of some 70 instructions, which a unit of 1024 elements
         * would otherwise pay in every work-item. */
        if (TALLY_K_UNIT_ONE_TILE && s->tiles == 1u) {
            u.vec = unit;
        } else {
            u.vec = unit / s->tiles;
            u.base = (unit - u.vec * s->tiles) * s->tile_quads;
        }
        u.active = tally_k_active(s->quads, u.base, s->lanes);
    }
    return u;
}

/* Where a kernel reads one vector. p (f32) or h (bf16, f16: dtype says
 * which) points at the vector's first element; for STRIDED vectors at the
 * view's first element, and element k lies at (k / cols) * stride + k % cols. */
typedef struct tally_k_src {
    TALLY_GLOBAL const float *p;
    TALLY_GLOBAL const tally_u16 *h;
    tally_u64 cols;
    tally_u64 stride;
    tally_u32 mode;
    tally_u32 dtype;
} tally_k_src;

/* The source whose first element is element `first` of buffer `base`
 * (counted in elements of dtype). */
TALLY_FN tally_k_src tally_k_src_at(TALLY_GLOBAL const float *base, tally_u32 dtype, tally_u64 first, tally_u64 cols,
                                    tally_u64 stride, tally_u32 mode)
{
    tally_k_src s;
    s.dtype = dtype;
    s.p = base;
    s.h = (TALLY_GLOBAL const tally_u16 *)base;
    if (dtype == TALLY_F32) s.p = base + first;
    else s.h = s.h + first;
    s.cols = cols;
    s.stride = stride;
    s.mode = mode;
    return s;
}

/*
 * Reads quad g of a vector of n elements into e[0..3]: elements 4g up to
 * min(4g + 3, n - 1). Returns how many it read (1 to 4). A partial last
 * quad is read element by element so that nothing past the vector is
 * touched.
 */
/* Quad g of a VEC4 source as four floats: one 16-byte load of fp32, or one
 * 8-byte load of halves widened exactly. */
TALLY_FN tally_f4 tally_k_quad4(const tally_k_src *s, tally_u64 g)
{
    return s->dtype == TALLY_F32 ? TALLY_LOAD_F4(s->p, g) : tally_k_load_h4(s->h, s->dtype, g);
}

TALLY_FN tally_u32 tally_k_load_quad(const tally_k_src *s, tally_u64 n, tally_u64 g, float *e)
{
    const tally_u64 e0 = g << 2;
    const tally_u32 count = (n - e0 >= 4u) ? 4u : (tally_u32)(n - e0);
    if (s->mode == TALLY_K_LOAD_VEC4 && count == 4u) {
        /* A quad of halves is one 8-byte load (VEC4 halves are 8-byte
         * aligned quads). */
        tally_f4 q = s->dtype == TALLY_F32 ? TALLY_LOAD_F4(s->p, g) : tally_k_load_h4(s->h, s->dtype, g);
        e[0] = q.x;
        e[1] = q.y;
        e[2] = q.z;
        e[3] = q.w;
    } else if (s->mode != TALLY_K_LOAD_STRIDED) {
        /* Constant trip counts (here and below) let the compiler keep e[] in
         * registers instead of addressable (local) memory. */
        for (tally_u32 c = 0; c < 4u; c++)
            if (c < count) e[c] = tally_k_ld(s->p, s->h, s->dtype, e0 + c);
    } else {
        /* One division per quad; the four elements then walk the row and
         * wrap to the next one when a quad straddles two rows. */
        tally_u64 r = e0 / s->cols;
        tally_u64 c = e0 - r * s->cols;
        for (tally_u32 i = 0; i < 4u; i++) {
            if (i < count) {
                e[i] = tally_k_ld(s->p, s->h, s->dtype, r * s->stride + c);
                c++;
                if (c == s->cols) {
                    c = 0;
                    r++;
                }
            }
        }
    }
    return count;
}

/* The value at j of the three tree steps s = 4d, 2d, d (d = 32 or 4) over
 * the eight values j + d m, m = 0 .. 7, as tally_k_tree computes them. */
TALLY_FN float tally_k_tree_three_steps(TALLY_LOCAL const float *v, tally_u32 j, tally_u32 d, tally_u32 kind)
{
    const int k = (int)kind;
    const float u0 = tally_combine(k, v[j], v[j + 4u * d]);
    const float u1 = tally_combine(k, v[j + d], v[j + 5u * d]);
    const float u2 = tally_combine(k, v[j + 2u * d], v[j + 6u * d]);
    const float u3 = tally_combine(k, v[j + 3u * d], v[j + 7u * d]);
    return tally_combine(k, tally_combine(k, u0, u2), tally_combine(k, u1, u3));
}

/* The tree of a full tile, 256 active lanes, over a and b side by side (b
 * may be 0 for one array), by the 256 work-items of part `part` of the
 * group (TALLY_BARRIER_PART; 0 for a group of 256): the same operations on
 * the same values as tally_k_tree, so the same bits, with two barriers
 * instead of nine. After the first, work-item j < 32 takes the steps 128,
 * 64 and 32 for its position; then j < 4 the steps 16, 8 and 4; then
 * work-item 0 the steps 2 and 1, leaving the results in a[0] and b[0],
 * which every work-item of the part may read after the second barrier.
 * Each step writes only positions that no other work-item of that step
 * reads. lid is the work-item's index in its part. */
TALLY_FN void tally_k_tree_full(TALLY_LOCAL float *a, TALLY_LOCAL float *b, tally_u32 lid, tally_u32 kind,
                                tally_u32 part)
{
    const int k = (int)kind;
    TALLY_BARRIER_PART(part);
    if (lid < 32u) {
        a[lid] = tally_k_tree_three_steps(a, lid, 32u, kind);
        if (b != 0) b[lid] = tally_k_tree_three_steps(b, lid, 32u, kind);
    }
    TALLY_BARRIER_FIRST32();
    if (lid < 4u) {
        a[lid] = tally_k_tree_three_steps(a, lid, 4u, kind);
        if (b != 0) b[lid] = tally_k_tree_three_steps(b, lid, 4u, kind);
    }
    TALLY_BARRIER_FIRST32();
    if (lid == 0u) {
        a[0] = tally_combine(k, tally_combine(k, a[0], a[2]), tally_combine(k, a[1], a[3]));
        if (b != 0) b[0] = tally_combine(k, tally_combine(k, b[0], b[2]), tally_combine(k, b[1], b[3]));
    }
    TALLY_BARRIER_PART(part);
}

/* Steps of tally_k_tree_full for one array v and its run of 32 work-items
 * (j: the work-item's place in the run), between the barriers that the
 * caller reaches: stage 0 the steps 128, 64 and 32 (j < 32), stage 1 the
 * steps 16, 8 and 4 (j < 4), stage 2 the steps 2 and 1 (j == 0). */
TALLY_FN void tally_k_tree_full_stage(TALLY_LOCAL float *v, tally_u32 j, tally_u32 kind, tally_u32 stage)
{
    const int k = (int)kind;
    if (stage == 0u) v[j] = tally_k_tree_three_steps(v, j, 32u, kind);
    else if (stage == 1u && j < 4u) v[j] = tally_k_tree_three_steps(v, j, 4u, kind);
    else if (stage == 2u && j == 0u) v[0] = tally_combine(k, tally_combine(k, v[0], v[2]), tally_combine(k, v[1], v[3]));
}

/* tally_k_tree_full over up to three arrays at once, each by its own run of
 * 32 work-items of the part: a (combine ka) by work-items 0 .. 31, b (kb)
 * by 32 .. 63, c (kc) by 64 .. 95; b and c may be 0. The same operations
 * on the same values as tally_k_tree_full, so the same bits; the runs take
 * their steps in parallel (on CUDA three warps instead of one), and the
 * arrays may combine differently (a tile's sum beside the next tile's
 * maxima). The results are in a[0], b[0] and c[0] for every work-item of
 * the part after the last barrier. */
TALLY_FN void tally_k_tree_full3(TALLY_LOCAL float *a, tally_u32 ka, TALLY_LOCAL float *b, tally_u32 kb,
                                 TALLY_LOCAL float *c, tally_u32 kc, tally_u32 lid, tally_u32 part)
{
    const tally_u32 run = lid >> 5, j = lid & 31u;
    TALLY_BARRIER_PART(part);
    for (tally_u32 stage = 0; stage < 3u; stage++) {
        /* Constant combines in each branch, so that each compiles to its
         * own straight-line steps. */
        if (run == 0u) tally_k_tree_full_stage(a, j, ka, stage);
        else if (run == 1u && b != 0) tally_k_tree_full_stage(b, j, kb, stage);
        else if (run == 2u && c != 0) tally_k_tree_full_stage(c, j, kc, stage);
        if (stage < 2u) TALLY_BARRIER_EACH32();
    }
    TALLY_BARRIER_PART(part);
}

/*
 * The in-group tree over each segment of `lanes` work-items: after it,
 * v[segment * lanes] holds combine-order result of v[segment*lanes ..
 * segment*lanes + active - 1]. Every work-item of the group must call it
 * with the same lanes (barriers); active may differ per segment. The result
 * must be read by the segment's lane 0 only (other lanes may already be
 * writing their next values to their own slots).
 */
TALLY_FN void tally_k_tree(TALLY_LOCAL float *v, tally_u32 lid, tally_u32 lanes, tally_u64 active,
                           tally_u32 kind)
{
#if TALLY_TARGET_CUDA && TALLY_K_TREE_FULL_SEGMENTS
    /* One segment, every lane active (a row of 1024 or more, a full tile):
     * the same steps with two barriers instead of nine. CUDA only: PoCL
     * duplicates code around a barrier under a branch (see the random
     * stream helpers below), and its debug builds refused such a form. */
    if (lanes == TALLY_K_GROUP_SIZE && active == (tally_u64)lanes) {
        tally_k_tree_full(v, 0, lid, kind, 0u);
        return;
    }
#endif
    const tally_u32 j = lid & (lanes - 1u);
    for (tally_u32 s = lanes >> 1; s > 0u; s >>= 1) {
        TALLY_BARRIER();
        if (j < s && (tally_u64)(j + s) < active) v[lid] = tally_combine((int)kind, v[lid], v[lid + s]);
    }
    TALLY_BARRIER();
}

/* Writes a tile's value r to *dst, divided by `divisor` under
 * TALLY_K_FINISH_DIVIDE, stored canonical. */
TALLY_FN void tally_k_store_tile(float r, tally_u32 finish, float divisor, TALLY_GLOBAL float *dst)
{
    if (finish == TALLY_K_FINISH_DIVIDE) r = tally_divf(r, divisor);
    *dst = tally_canonical(r);
}

/* A sum tile's end: the tree, then its lane 0 (`store`) stores the tile's
 * value with tally_k_store_tile. */
TALLY_FN void tally_k_tile_sum_store(TALLY_LOCAL float *v, tally_u32 lid, tally_u32 lanes, tally_u64 active,
                                     int store, tally_u32 finish, float divisor, TALLY_GLOBAL float *dst)
{
    tally_k_tree(v, lid, lanes, active, TALLY_COMBINE_SUM);
    if (store) tally_k_store_tile(v[lid], finish, divisor, dst);
}

/* The same tree over two or three arrays summed side by side (`arrays`; the
 * Dirichlet-multinomial's A, N and S share one plan, and a shared alpha
 * makes A the same for every row, which leaves N and S), with one barrier
 * per step. */
TALLY_FN void tally_k_tree_sums(TALLY_LOCAL float *a, TALLY_LOCAL float *b, TALLY_LOCAL float *c, tally_u32 arrays,
                                tally_u32 lid, tally_u32 lanes, tally_u64 active)
{
    /* Unlike tally_k_tree, no two-barrier form for a full segment: with
     * one warp an array (tally_k_tree_full3) the Dirichlet-multinomial of
     * 65536 x 1024 took 295.7 us against 248.1 us step by step on the H200
     * (bench/RESULTS.md, GPU run 11). */
    const tally_u32 j = lid & (lanes - 1u);
    for (tally_u32 s = lanes >> 1; s > 0u; s >>= 1) {
        TALLY_BARRIER();
        if (j < s && (tally_u64)(j + s) < active) {
            a[lid] = a[lid] + a[lid + s];
            b[lid] = b[lid] + b[lid + s];
            if (arrays == 3u) c[lid] = c[lid] + c[lid + s];
        }
    }
    TALLY_BARRIER();
}

TALLY_FN void tally_k_tree3(TALLY_LOCAL float *a, TALLY_LOCAL float *b, TALLY_LOCAL float *c, tally_u32 lid,
                            tally_u32 lanes, tally_u64 active)
{
    tally_k_tree_sums(a, b, c, 3u, lid, lanes, active);
}

TALLY_FN void tally_k_tree2(TALLY_LOCAL float *a, TALLY_LOCAL float *b, tally_u32 lid, tally_u32 lanes,
                            tally_u64 active)
{
    tally_k_tree_sums(a, b, b, 2u, lid, lanes, active);
}

#if TALLY_HAS_WARP_SHUFFLE
/*
 * tally_k_tree3 with the steps below 32 taken in registers: the steps
 * s >= 32 pair work-items of different warps in local memory as before,
 * then lane j takes lane j + s of its own warp through a shuffle for
 * s = 16 .. 1 (a segment of 32 lanes or fewer lies in one warp, and so does
 * the first half of a longer one). The same pairs in the same order, so the
 * same sums; the segment's lane 0 gets them in *ra, *rb and *rc (the other
 * lanes get values that no step reads). Every work-item of the group calls
 * it, as tally_k_tree3.
 */
TALLY_FN void tally_k_tree3_shuffle(TALLY_LOCAL float *a, TALLY_LOCAL float *b, TALLY_LOCAL float *c, tally_u32 lid,
                                    tally_u32 lanes, tally_u64 active, float *ra, float *rb, float *rc)
{
    const tally_u32 j = lid & (lanes - 1u);
    for (tally_u32 s = lanes >> 1; s >= 32u; s >>= 1) {
        TALLY_BARRIER();
        if (j < s && (tally_u64)(j + s) < active) {
            a[lid] = a[lid] + a[lid + s];
            b[lid] = b[lid] + b[lid + s];
            c[lid] = c[lid] + c[lid + s];
        }
    }
    /* Each work-item reads back its own slot; the barrier also keeps a slot
     * from being written for the next row before its partner has read it. */
    TALLY_BARRIER();
    float x = a[lid], y = b[lid], z = c[lid];
    const tally_u32 w = lid & 31u;
    for (tally_u32 s = (lanes < 32u ? lanes : 32u) >> 1; s > 0u; s >>= 1) {
        const float xu = TALLY_WARP_SHUFFLE(x, (w + s) & 31u);
        const float yu = TALLY_WARP_SHUFFLE(y, (w + s) & 31u);
        const float zu = TALLY_WARP_SHUFFLE(z, (w + s) & 31u);
        if (j < s && (tally_u64)(j + s) < active) {
            x = x + xu;
            y = y + yu;
            z = z + zu;
        }
    }
    *ra = x;
    *rb = y;
    *rc = z;
}
#endif

/* ---- Random stream helpers. ---- */

/*
 * u[p] = uniform(offset + row0 + p) for p < count (1 <= count <= 256): the
 * work-items lid < number of Philox blocks spanned each compute one block
 * and hand out its four words, so each block is computed once. The caller
 * puts a barrier after it before u is read. (Barriers are kept out of
 * helpers and out of conditionals: PoCL compiles a barrier under a branch
 * by duplicating code, which multiplied its build time.)
 */
TALLY_FN void tally_k_local_uniforms(TALLY_LOCAL float *u, tally_u64 row0, tally_u32 count, tally_u64 seed,
                                     tally_u64 subsequence, tally_u64 offset, tally_u32 lid)
{
    const tally_u64 i0 = offset + row0;
    const tally_u64 m0 = i0 >> 2;
    const tally_u64 m1 = (i0 + (count - 1u)) >> 2;
    if ((tally_u64)lid <= m1 - m0) {
        const tally_u64 m = m0 + lid;
        tally_philox4 blk = tally_stream_block(seed, subsequence, m);
        for (tally_u32 w = 0; w < 4u; w++) {
            tally_u64 i = (m << 2) + w;
            if (i >= i0 && i - i0 < (tally_u64)count) u[i - i0] = tally_uniform_from_bits(blk.v[w]);
        }
    }
}

/*
 * The layout of a quad fill (tally_k_rng_fill and its CPU twin): stream
 * elements offset .. offset + n - 1 (n = rows * cols) lie in Philox blocks
 * b0 .. b0 + nb - 1; blocks j = jlo .. jend - 1 of them are whole and land
 * on output quad q0 + j; block 0 (when jlo is 1) and block nb - 1 (when
 * jend < nb) are partial and written word by word.
 */
typedef struct tally_k_quad_fill {
    tally_u64 n, b0, nb, q0, jlo, jend;
} tally_k_quad_fill;

TALLY_FN tally_k_quad_fill tally_k_quad_fill_of(tally_u64 rows, tally_u64 cols, tally_u64 offset, tally_u64 out_off)
{
    tally_k_quad_fill f;
    f.n = rows * cols;
    f.b0 = offset >> 2;
    f.nb = f.n == 0u ? 0u : ((offset + (f.n - 1u)) >> 2) - f.b0 + 1u;
    f.q0 = out_off >> 2;
    f.jlo = (offset & 3u) != 0u ? 1u : 0u;
    f.jend = f.n == 0u ? 0u : f.nb - (((offset + f.n) & 3u) != 0u ? 1u : 0u);
    return f;
}

/* Whether edge e (0: the first block, 1: the last) is partial and, for the
 * last, not the block edge 0 writes; *j is its block. */
TALLY_FN int tally_k_quad_fill_edge(const tally_k_quad_fill *f, tally_u32 e, tally_u64 *j)
{
    *j = e == 0u ? 0u : f->nb - 1u;
    return e == 0u ? f->jlo != 0u : (f->jend != f->nb && (f->nb > 1u || f->jlo == 0u));
}

/* Stores the words `bits` of block j that lie inside the fill. */
TALLY_FN void tally_k_quad_fill_store_edge(TALLY_GLOBAL tally_u32 *TALLY_RESTRICT out, tally_u64 out_off,
                                          const tally_k_quad_fill *f, tally_u64 j, tally_u64 offset,
                                          const tally_u32 *bits)
{
    for (tally_u32 w = 0; w < 4u; w++) {
        const tally_u64 i = ((f->b0 + j) << 2) + w;
        if (i >= offset && i - offset < f->n) out[out_off + (i - offset)] = bits[w];
    }
}

/* normal(4m + w) for w = 0..3: the two Box-Muller pairs of Philox block m,
 * exactly as tally_stream_normal computes each element. */
TALLY_FN void tally_k_normals4(tally_u64 seed, tally_u64 subsequence, tally_u64 m, float *n4)
{
    tally_philox4 blk = tally_stream_block(seed, subsequence, m);
    tally_normal_pair(blk.v[0], blk.v[1], &n4[0], &n4[1]);
    tally_normal_pair(blk.v[2], blk.v[3], &n4[2], &n4[3]);
}

#endif /* TALLY_KERNELS_TREE_H */
