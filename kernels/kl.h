/*
 * kernels/kl.h - KL divergence: the first level of the reduced forms (one
 * pass over input and target) and the pointwise form.
 */
#ifndef TALLY_KERNELS_KL_H
#define TALLY_KERNELS_KL_H

#include "tree.h"

/* Adds the four terms of quads a (input) and b (target) to acc in element
 * order, each term computed by term(x, t, flags). */
#define TALLY_K_KL_ADD4(acc, a, b, term, flags) \
    do {                                        \
        acc = acc + term((a).x, (b).x, flags);  \
        acc = acc + term((a).y, (b).y, flags);  \
        acc = acc + term((a).z, (b).z, flags);  \
        acc = acc + term((a).w, (b).w, flags);  \
    } while (0)

/* The sixteen terms of quads (a0, b0) .. (a3, b3) folded into acc in
 * element order; the very first term of the lane (q == 0) starts acc. */
#define TALLY_K_KL_ADD16(acc, q, term, flags)                \
    do {                                                     \
        const float first_ = term(a0.x, b0.x, flags);        \
        acc = (q) == 0u ? first_ : acc + first_;             \
        acc = acc + term(a0.y, b0.y, flags);                 \
        acc = acc + term(a0.z, b0.z, flags);                 \
        acc = acc + term(a0.w, b0.w, flags);                 \
        TALLY_K_KL_ADD4(acc, a1, b1, term, flags);           \
        TALLY_K_KL_ADD4(acc, a2, b2, term, flags);           \
        TALLY_K_KL_ADD4(acc, a3, b3, term, flags);           \
    } while (0)

/* Whether all four floats of a quad are positive normal floats. */
TALLY_FN int tally_k_pos_normal4(tally_f4 a)
{
    return tally_kl_is_pos_normal(a.x) & tally_kl_is_pos_normal(a.y) & tally_kl_is_pos_normal(a.z) &
           tally_kl_is_pos_normal(a.w);
}

/* 1 when every pair of a batch of four quads may take tally_kl_term_fast:
 * tally_kl_fast_ok of each pair, as one chain of tests per input. */
TALLY_FN int tally_k_kl_fast16(tally_f4 a0, tally_f4 a1, tally_f4 a2, tally_f4 a3, tally_f4 b0, tally_f4 b1,
                               tally_f4 b2, tally_f4 b3, tally_u32 flags)
{
    const int xs_ok = tally_k_pos_normal4(a0) & tally_k_pos_normal4(a1) & tally_k_pos_normal4(a2) &
                      tally_k_pos_normal4(a3);
    const int ts_ok = tally_k_pos_normal4(b0) & tally_k_pos_normal4(b1) & tally_k_pos_normal4(b2) &
                      tally_k_pos_normal4(b3);
    return (((flags & TALLY_KL_INPUT_IS_PROB) == 0u) | xs_ok) & (((flags & TALLY_KL_LOG_TARGET) != 0u) | ts_ok);
}

/*
 * The sixteen terms of one lane's batch of four quads, (a0, b0) .. (a3, b3),
 * folded into acc in element order; the lane's first batch (q == 0) starts
 * acc with its first term. tally_kl_term per element, with its test for
 * the short path made once for the sixteen elements, and the two common
 * flag sets as constants so that the short path is straight-line code. A
 * batch with any special value takes the plain definition, which gives the
 * same bits as the short path would (the test: tally_k_kl_fast16).
 */
TALLY_FN float tally_k_kl_batch(float acc, tally_u32 q, tally_f4 a0, tally_f4 a1, tally_f4 a2, tally_f4 a3, tally_f4 b0,
                                tally_f4 b1, tally_f4 b2, tally_f4 b3, tally_u32 flags)
{
    const int fast = tally_k_kl_fast16(a0, a1, a2, a3, b0, b1, b2, b3, flags);
    if (fast && flags == TALLY_KL_INPUT_IS_PROB) {
        TALLY_K_KL_ADD16(acc, q, tally_kl_term_fast, TALLY_KL_INPUT_IS_PROB);
    } else if (fast && flags == 0u) {
        TALLY_K_KL_ADD16(acc, q, tally_kl_term_fast, 0u);
    } else if (fast) {
        TALLY_K_KL_ADD16(acc, q, tally_kl_term_fast, flags);
    } else {
        TALLY_K_KL_ADD16(acc, q, tally_kl_term_general, flags);
    }
    return acc;
}

/* tally_k_kl_batch with the flags left to the call: the same terms, two
 * variants instead of four, which keeps the half path's two lanes from
 * doubling the program (the flag-specialised copies only save a few
 * instructions per term). */
TALLY_FN float tally_k_kl_batch_any(float acc, tally_u32 q, tally_f4 a0, tally_f4 a1, tally_f4 a2, tally_f4 a3,
                                    tally_f4 b0, tally_f4 b1, tally_f4 b2, tally_f4 b3, tally_u32 flags)
{
    const int fast = tally_k_kl_fast16(a0, a1, a2, a3, b0, b1, b2, b3, flags);
    if (fast) {
        TALLY_K_KL_ADD16(acc, q, tally_kl_term_fast, flags);
    } else {
        TALLY_K_KL_ADD16(acc, q, tally_kl_term_general, flags);
    }
    return acc;
}

/*
 * The logarithm table of two bf16 inputs (tally_pm_log_bf16_entry,
 * include/tally/portable_math.h): the 128 entries in 32 copies, copy c of
 * entry m at m * 32 + c. Work-item l reads copy l % 32, so the 32 reads of
 * a warp fall in 32 different banks of local memory whatever the
 * mantissas; one copy would make them wait on each other about 3.5 times
 * over. 16 KiB per group.
 */
#define TALLY_K_LOG_BF16_ENTRIES 128u
#define TALLY_K_LOG_BF16_COPIES 32u
#define TALLY_K_LOG_BF16_TABLE (TALLY_K_LOG_BF16_ENTRIES * TALLY_K_LOG_BF16_COPIES)

/* Fills the table, every work-item of the group taking part (a group of
 * TALLY_K_GROUP_SIZE, which divides the table's size), and waits for it.
 * Work-item l computes entry l % 128 once and writes copies of it in an
 * order rotated by l, so that the stores of a warp fall in 32 banks too. */
TALLY_FN void tally_k_log_bf16_fill(TALLY_LOCAL float *tab, tally_u32 lid)
{
    const tally_u32 per_item = TALLY_K_LOG_BF16_TABLE / TALLY_K_GROUP_SIZE;
    const tally_u32 m = lid % TALLY_K_LOG_BF16_ENTRIES;
    const tally_u32 first_copy = (lid / TALLY_K_LOG_BF16_ENTRIES) * per_item;
    const float v = tally_pm_log_bf16_entry(m);
    for (tally_u32 k = 0; k < per_item; k++)
        tab[m * TALLY_K_LOG_BF16_COPIES + ((first_copy + k + lid) % TALLY_K_LOG_BF16_COPIES)] = v;
    TALLY_BARRIER();
}

/* tally_pm_logf_normal(x) for a positive normal x widened from bf16; lane
 * points at the work-item's copy (tab + lid % 32). */
TALLY_FN float tally_k_log_bf16(TALLY_LOCAL const float *lane, float x)
{
    /* Entry (bits >> 16) & 0x7f, copy 0 at ((bits >> 16) & 0x7f) * 32: one
     * shift and one mask. */
    return tally_pm_logf_bf16(x, lane[(tally_as_u32(x) >> 11) & ((TALLY_K_LOG_BF16_ENTRIES - 1u) * TALLY_K_LOG_BF16_COPIES)]);
}

/* tally_kl_term_fast (include/tally/terms.h) with its logarithms from the
 * table: the same operations on the same values, so the same bits, for
 * inputs widened from bf16 that pass tally_kl_fast_ok. */
TALLY_FN float tally_k_kl_term_bf16(TALLY_LOCAL const float *lane, float x, float t, tally_u32 flags)
{
    const float lx = (flags & TALLY_KL_INPUT_IS_PROB) ? tally_k_log_bf16(lane, x) : x;
    if (flags & TALLY_KL_LOG_TARGET) return tally_expf(t) * (t - lx);
    return t * (tally_k_log_bf16(lane, t) - lx);
}

/* The term of TALLY_K_KL_ADD16 in tally_k_kl_batch_bf16, whose `lane` it
 * reads. */
#define TALLY_K_KL_TERM_BF16(x, t, flags) tally_k_kl_term_bf16(lane, x, t, flags)

/* tally_k_kl_batch_any for two bf16 inputs, the short path's logarithms
 * from the table. */
TALLY_FN float tally_k_kl_batch_bf16(TALLY_LOCAL const float *lane, float acc, tally_u32 q, tally_f4 a0, tally_f4 a1,
                                     tally_f4 a2, tally_f4 a3, tally_f4 b0, tally_f4 b1, tally_f4 b2, tally_f4 b3,
                                     tally_u32 flags)
{
    if (tally_k_kl_fast16(a0, a1, a2, a3, b0, b1, b2, b3, flags)) {
        TALLY_K_KL_ADD16(acc, q, TALLY_K_KL_TERM_BF16, flags);
    } else {
        TALLY_K_KL_ADD16(acc, q, tally_kl_term_general, flags);
    }
    return acc;
}

/*
 * The same batch from the words it was loaded as: wa0 .. wa3 and wb0 ..
 * wb3 hold the input's and the target's four quads, two bf16 values a
 * word. The short path's test is made on the packed words, and its table
 * reads address bytes, which saves about six instructions an element over
 * tally_k_kl_batch_bf16 (SASS: a 16-bit vector maximum tests two values,
 * and the offset of an entry is a shift and one three-input logical
 * operation, where the float index took a shift, two logical operations
 * and a scaled add). The
 * widened values, the test's outcome and the operations of each term are
 * those of tally_k_kl_batch_bf16, so the bits are too.
 */

/* A bf16 value h is a positive normal float exactly when h - 0x80 <
 * 0x7f00 as 16-bit unsigned numbers. Both values of word w are tested at
 * once: worst keeps the largest 16-bit difference seen in each half. The
 * low half borrows from the high one only when it fails itself, and then
 * the low half's own difference already fails the batch. */
TALLY_FN tally_u32 tally_k_bf16x2_worst(tally_u32 worst, tally_u32 w)
{
    return TALLY_MAX_U16X2(worst, w - 0x00800080u);
}

TALLY_FN int tally_k_bf16x2_all_ok(tally_u32 worst)
{
    return ((worst & 0xffffu) < 0x7f00u) & ((worst >> 16) < 0x7f00u);
}

/* tally_k_log_bf16 with the entry found by its byte offset: entry m, copy
 * c lies at m * 128 + 4 c. lane_bytes = 4 (lid % 32), and keep =
 * lane_bytes | 0x3f80, the bits an offset may have. The offset (bits >> 9
 * | lane_bytes) & keep equals (bits >> 9 & 0x3f80) | lane_bytes, and is one
 * three-input logical operation after the shift. */
TALLY_FN float tally_k_log_bf16_at(TALLY_LOCAL const float *tab, tally_u32 lane_bytes, tally_u32 keep, float x)
{
    const tally_u32 off = ((tally_as_u32(x) >> 9) | lane_bytes) & keep;
    const float v = *(TALLY_LOCAL const float *)((TALLY_LOCAL const char *)tab + off);
    if (!TALLY_K_KL_BF16_EXP_FADD) return tally_pm_logf_bf16(x, v);
    /* tally_pm_logf_bf16's exponent e as a float by an exact subtraction
     * instead of a conversion: 0x4b400000 + k is the float 1.5 * 2^23 + k
     * for |k| < 2^22, so the difference is e exactly, and the join gets the
     * same operands. */
    const tally_u32 t = tally_as_u32(x) + 0x00d55555u;
    const float e = tally_as_f32((t >> 23) + (0x4b400000u - 128u)) - 12582912.0f;
    return tally_pm_log_join(e, v);
}

TALLY_FN float tally_k_kl_term_bf16_at(TALLY_LOCAL const float *tab, tally_u32 lane_bytes, tally_u32 keep, float x,
                                       float t, tally_u32 flags)
{
    const float lx = (flags & TALLY_KL_INPUT_IS_PROB) ? tally_k_log_bf16_at(tab, lane_bytes, keep, x) : x;
    if (flags & TALLY_KL_LOG_TARGET) return tally_expf(t) * (t - lx);
    return t * (tally_k_log_bf16_at(tab, lane_bytes, keep, t) - lx);
}

#define TALLY_K_KL_TERM_BF16_AT(x, t, flags) tally_k_kl_term_bf16_at(tab, lane_bytes, keep, x, t, flags)

/* A quad of bf16 values from its two words, widened as tally_k_load_h4
 * widens them. */
TALLY_FN tally_f4 tally_k_bf16_quad(uint2 w)
{
    tally_f4 q;
    q.x = tally_k_lo(TALLY_BF16, w.x);
    q.y = tally_k_hi(TALLY_BF16, w.x);
    q.z = tally_k_lo(TALLY_BF16, w.y);
    q.w = tally_k_hi(TALLY_BF16, w.y);
    return q;
}

/* Both values of each word of a quad's two words (tally_k_bf16x2_worst). */
TALLY_FN tally_u32 tally_k_bf16x4_worst(tally_u32 worst, uint2 w)
{
    return tally_k_bf16x2_worst(tally_k_bf16x2_worst(worst, w.x), w.y);
}

/*
 * Logarithms straight from the loaded words (TALLY_K_KL_BF16_PACKED). For
 * a word w = hi << 16 | lo of two positive normal bf16 values, u = w +
 * 0x00d500d5 holds both values' exponent fields as tally_pm_logf_bf16
 * finds them: that function adds 0x00d55555 to a widened value h << 16 and
 * shifts right by 23, which gives (h + 0xd5) >> 7, because the low 0x5555
 * never carries into bit 16. Here lo + 0xd5 stays below 0x10000 (lo <=
 * 0x7f7f), so the low half never carries into the high one, u >> 23 is
 * (hi + 0xd5) >> 7, and u & 0xff80 is ((lo + 0xd5) >> 7) << 7. The
 * exponent e is that number less 128, made a float exactly: for the high
 * value by the subtraction of tally_k_log_bf16_at; for the low one, 0x4b400000
 * | (u & 0xff80) is the float 12582912 + 128 k, and an fma with 1/128
 * gives 98304 + k - 98432 = e with no rounding (the product is a power-of-
 * two scaling and the sum an integer below 2^24). The entries' offsets are
 * those of tally_k_log_bf16_at: w << 7 puts the low mantissa at bits 7 ..
 * 13 (keep drops the rest), and so does (w & 0x007f0000) >> 9 for the high
 * one, to which the lane's bytes are added (a shift-and-add). So each logarithm is
 * tally_pm_log_join of the same e and the same entry: the same bits.
 */
TALLY_FN float tally_k_log_bf16_lo(TALLY_LOCAL const float *tab, tally_u32 lane_bytes, tally_u32 keep, tally_u32 w,
                                   tally_u32 u)
{
    const tally_u32 off = ((w << 7) | lane_bytes) & keep;
    const float v = *(TALLY_LOCAL const float *)((TALLY_LOCAL const char *)tab + off);
    const float e = tally_fma(tally_as_f32(0x4b400000u | (u & 0xff80u)), 0.0078125f, -98432.0f);
    return tally_pm_log_join(e, v);
}

TALLY_FN float tally_k_log_bf16_hi(TALLY_LOCAL const float *tab, tally_u32 lane_bytes, tally_u32 keep, tally_u32 w,
                                   tally_u32 u)
{
    const tally_u32 off = ((w & 0x007f0000u) >> 9) + lane_bytes;
    const float v = *(TALLY_LOCAL const float *)((TALLY_LOCAL const char *)tab + off);
    const float e = tally_as_f32((u >> 23) + (0x4b400000u - 128u)) - 12582912.0f;
    return tally_pm_log_join(e, v);
}

/*
 * The wide table (TALLY_K_KL_BF16_WIDE): a row for each low byte b of a
 * bf16 value (the exponent's lowest bit above the seven mantissa bits),
 * each row 16 copies of the pair (tally_pm_log_bf16_entry(b & 0x7f),
 * tally_pm_log_bf16_bias(b)), copy c at byte 128 b + 8 c: 32 KiB. Work-item
 * l reads copy l % 16, and a warp's 8-byte reads are served a half warp at
 * a time, so each half falls on 32 different banks. lane_bytes holds 16 (l
 * % 16) in its low byte and 0x4b40 in its high half: one byte permutation
 * puts the value's low byte above it, and a shift right by one makes that
 * the entry's offset; another puts the value's high byte between 0x4b40
 * and a zero byte, the float of tally_pm_logf_bf16_parts. The narrow table
 * takes a shift and a logical operation for the offset and an integer add
 * (shared by a word's two values), a shift and a subtraction for the
 * exponent: an input_is_prob batch of 16 pairs is 289 instructions here
 * against 322, 110 of them on the integer pipe against 136 (SASS, sm_90).
 * On by default on CUDA only (kernels/abi.h says why).
 */
#define TALLY_K_LOG_BF16_WIDE_COPIES 16u
#define TALLY_K_LOG_BF16_WIDE_FLOATS (256u * TALLY_K_LOG_BF16_WIDE_COPIES * 2u)

/* Fills the wide table, work-item l (a group of 256) its row l, the copies
 * in an order rotated by l, and waits for it. */
TALLY_FN void tally_k_log_bf16_wide_fill(TALLY_LOCAL float *tab, tally_u32 lid)
{
    float2 entry;
    entry.x = tally_pm_log_bf16_entry(lid & 0x7fu);
    entry.y = tally_pm_log_bf16_bias(lid);
    TALLY_LOCAL float2 *row = (TALLY_LOCAL float2 *)tab + lid * TALLY_K_LOG_BF16_WIDE_COPIES;
    for (tally_u32 k = 0; k < TALLY_K_LOG_BF16_WIDE_COPIES; k++) row[(k + lid) % TALLY_K_LOG_BF16_WIDE_COPIES] = entry;
    TALLY_BARRIER();
}

/* The logarithm of word w's low value (high = 0) or high value: from the
 * wide table (wide = 1; lane_bytes is 16 (l % 16) | 0x4b400000), or from
 * the narrow one with u = w + 0x00d500d5 (tally_k_log_bf16_lo,
 * tally_k_log_bf16_hi). */
TALLY_FN float tally_k_kl_word_log(TALLY_LOCAL const float *tab, tally_u32 lane_bytes, tally_u32 keep, int wide,
                                   tally_u32 w, tally_u32 u, int high)
{
    if (wide) {
        /* Byte 1 of lane_bytes is 0. One register for both permutations
         * keeps their selectors immediate. */
        const tally_u32 row_bytes = TALLY_BYTE_PERM(w, lane_bytes, high ? 0x5524u : 0x5504u) >> 1;
        const tally_u32 base = TALLY_BYTE_PERM(w, lane_bytes, high ? 0x7635u : 0x7615u);
        const float2 entry = *(TALLY_LOCAL const float2 *)((TALLY_LOCAL const char *)tab + row_bytes);
        return tally_pm_logf_bf16_parts(tally_as_f32(base), entry.x, entry.y);
    }
    return high ? tally_k_log_bf16_hi(tab, lane_bytes, keep, w, u) : tally_k_log_bf16_lo(tab, lane_bytes, keep, w, u);
}

/* The two terms of input word wx and target word wt (low value first)
 * folded into acc, which the low term starts when first is set: the terms
 * of tally_k_kl_term_bf16_at, for a batch whose every tested value passed.
 * The input is widened only where it is used as a number (a log input). */
TALLY_FN float tally_k_kl_word_terms(TALLY_LOCAL const float *tab, tally_u32 lane_bytes, tally_u32 keep, int wide,
                                     float acc, int first, tally_u32 wx, tally_u32 wt, tally_u32 flags)
{
    const tally_u32 ux = wide ? 0u : wx + 0x00d500d5u, ut = wide ? 0u : wt + 0x00d500d5u;
    const float t_lo = tally_as_f32(wt << 16), t_hi = tally_as_f32(wt & 0xffff0000u);
    float lx_lo, lx_hi, term_lo, term_hi;
    if (flags & TALLY_KL_INPUT_IS_PROB) {
        lx_lo = tally_k_kl_word_log(tab, lane_bytes, keep, wide, wx, ux, 0);
        lx_hi = tally_k_kl_word_log(tab, lane_bytes, keep, wide, wx, ux, 1);
    } else {
        lx_lo = tally_as_f32(wx << 16);
        lx_hi = tally_as_f32(wx & 0xffff0000u);
    }
    if (flags & TALLY_KL_LOG_TARGET) {
        term_lo = tally_expf(t_lo) * (t_lo - lx_lo);
        term_hi = tally_expf(t_hi) * (t_hi - lx_hi);
    } else {
        term_lo = t_lo * (tally_k_kl_word_log(tab, lane_bytes, keep, wide, wt, ut, 0) - lx_lo);
        term_hi = t_hi * (tally_k_kl_word_log(tab, lane_bytes, keep, wide, wt, ut, 1) - lx_hi);
    }
    acc = first ? term_lo : acc + term_lo;
    return acc + term_hi;
}

/* Both 16-bit halves of every word of a quad's two words folded into the
 * running maximum hi and minimum lo. */
TALLY_FN void tally_k_bf16x4_range(tally_u32 *hi, tally_u32 *lo, uint2 w)
{
    *hi = TALLY_MAX_U16X2(TALLY_MAX_U16X2(*hi, w.x), w.y);
    *lo = TALLY_MIN_U16X2(TALLY_MIN_U16X2(*lo, w.x), w.y);
}

/* Whether every half seen was a positive normal bf16, 0x0080 .. 0x7f7f. */
TALLY_FN int tally_k_bf16_range_ok(tally_u32 hi, tally_u32 lo)
{
    return ((hi & 0xffffu) <= 0x7f7fu) & ((hi >> 16) <= 0x7f7fu) & ((lo & 0xffffu) >= 0x0080u) &
           ((lo >> 16) >= 0x0080u);
}

/* The batch's sixteen pairs, word by word, in element order. */
#define TALLY_K_KL_WORDS16(acc, q, flags)                                                             \
    do {                                                                                              \
        acc = tally_k_kl_word_terms(tab, lane_bytes, keep, wide, acc, (q) == 0u, wa0.x, wb0.x, flags); \
        acc = tally_k_kl_word_terms(tab, lane_bytes, keep, wide, acc, 0, wa0.y, wb0.y, flags);         \
        acc = tally_k_kl_word_terms(tab, lane_bytes, keep, wide, acc, 0, wa1.x, wb1.x, flags);         \
        acc = tally_k_kl_word_terms(tab, lane_bytes, keep, wide, acc, 0, wa1.y, wb1.y, flags);         \
        acc = tally_k_kl_word_terms(tab, lane_bytes, keep, wide, acc, 0, wa2.x, wb2.x, flags);         \
        acc = tally_k_kl_word_terms(tab, lane_bytes, keep, wide, acc, 0, wa2.y, wb2.y, flags);         \
        acc = tally_k_kl_word_terms(tab, lane_bytes, keep, wide, acc, 0, wa3.x, wb3.x, flags);         \
        acc = tally_k_kl_word_terms(tab, lane_bytes, keep, wide, acc, 0, wa3.y, wb3.y, flags);         \
    } while (0)

/* wide: the logarithms from the wide table (lane_bytes is then 16 (l %
 * 16) | 0x4b400000 and keep unused), which only the packed path reads. */
TALLY_FN float tally_k_kl_batch_bf16_words(TALLY_LOCAL const float *tab, tally_u32 lane_bytes, tally_u32 keep, int wide,
                                           float acc, tally_u32 q, uint2 wa0, uint2 wa1, uint2 wa2, uint2 wa3, uint2 wb0,
                                           uint2 wb1, uint2 wb2, uint2 wb3, tally_u32 flags)
{
    if (TALLY_K_KL_BF16_PACKED || wide) {
        /* tally_k_kl_fast16's rule, tested as ranges of the raw halves. */
        tally_u32 hi = 0u, lo = 0xffffffffu;
        if (flags & TALLY_KL_INPUT_IS_PROB) {
            tally_k_bf16x4_range(&hi, &lo, wa0);
            tally_k_bf16x4_range(&hi, &lo, wa1);
            tally_k_bf16x4_range(&hi, &lo, wa2);
            tally_k_bf16x4_range(&hi, &lo, wa3);
        }
        if ((flags & TALLY_KL_LOG_TARGET) == 0u) {
            tally_k_bf16x4_range(&hi, &lo, wb0);
            tally_k_bf16x4_range(&hi, &lo, wb1);
            tally_k_bf16x4_range(&hi, &lo, wb2);
            tally_k_bf16x4_range(&hi, &lo, wb3);
        }
        if (tally_k_bf16_range_ok(hi, lo)) {
            TALLY_K_KL_WORDS16(acc, q, flags);
            return acc;
        }
        const tally_f4 a0 = tally_k_bf16_quad(wa0), a1 = tally_k_bf16_quad(wa1);
        const tally_f4 a2 = tally_k_bf16_quad(wa2), a3 = tally_k_bf16_quad(wa3);
        const tally_f4 b0 = tally_k_bf16_quad(wb0), b1 = tally_k_bf16_quad(wb1);
        const tally_f4 b2 = tally_k_bf16_quad(wb2), b3 = tally_k_bf16_quad(wb3);
        TALLY_K_KL_ADD16(acc, q, tally_kl_term_general, flags);
        return acc;
    }
    /* tally_k_kl_fast16's rule: the input is tested where its logarithm is
     * taken (input_is_prob), the target unless it is a log (log_target). */
    tally_u32 worst = 0u;
    if (flags & TALLY_KL_INPUT_IS_PROB) {
        worst = tally_k_bf16x4_worst(tally_k_bf16x4_worst(worst, wa0), wa1);
        worst = tally_k_bf16x4_worst(tally_k_bf16x4_worst(worst, wa2), wa3);
    }
    if ((flags & TALLY_KL_LOG_TARGET) == 0u) {
        worst = tally_k_bf16x4_worst(tally_k_bf16x4_worst(worst, wb0), wb1);
        worst = tally_k_bf16x4_worst(tally_k_bf16x4_worst(worst, wb2), wb3);
    }
    const tally_f4 a0 = tally_k_bf16_quad(wa0), a1 = tally_k_bf16_quad(wa1);
    const tally_f4 a2 = tally_k_bf16_quad(wa2), a3 = tally_k_bf16_quad(wa3);
    const tally_f4 b0 = tally_k_bf16_quad(wb0), b1 = tally_k_bf16_quad(wb1);
    const tally_f4 b2 = tally_k_bf16_quad(wb2), b3 = tally_k_bf16_quad(wb3);
    if (tally_k_bf16x2_all_ok(worst)) {
        TALLY_K_KL_ADD16(acc, q, TALLY_K_KL_TERM_BF16_AT, flags);
    } else {
        TALLY_K_KL_ADD16(acc, q, tally_kl_term_general, flags);
    }
    return acc;
}

/* How a full tile's batch folds: fp32 inputs (tally_k_kl_batch), any half
 * input (tally_k_kl_batch_any), or two bf16 inputs with the table. */
#define TALLY_K_KL_BATCH_F32 0
#define TALLY_K_KL_BATCH_HALF 1
#define TALLY_K_KL_BATCH_BF16_TABLE 2

TALLY_FN float tally_k_kl_batch_as(int kind, TALLY_LOCAL const float *lane, float acc, tally_u32 q, tally_f4 a0,
                                   tally_f4 a1, tally_f4 a2, tally_f4 a3, tally_f4 b0, tally_f4 b1, tally_f4 b2,
                                   tally_f4 b3, tally_u32 flags)
{
    if (kind == TALLY_K_KL_BATCH_BF16_TABLE)
        return tally_k_kl_batch_bf16(lane, acc, q, a0, a1, a2, a3, b0, b1, b2, b3, flags);
    if (kind == TALLY_K_KL_BATCH_HALF) return tally_k_kl_batch_any(acc, q, a0, a1, a2, a3, b0, b1, b2, b3, flags);
    return tally_k_kl_batch(acc, q, a0, a1, a2, a3, b0, b1, b2, b3, flags);
}

/*
 * One lane's fold of a tile, quad by quad (any placement and dtype): the
 * lane's quads base + q * lanes + j, q < qpl, each term by tally_kl_term, or
 * with st (the statistics array of kernels/kl_logits.h, `rows` per plane;
 * the logits flags) by tally_kl_logits_term with its row's statistics, the
 * row found once per quad and then followed.
 */
TALLY_FN float tally_k_kl_lane(const tally_k_src *xs, const tally_k_src *ts, tally_u64 n, tally_u64 base,
                               tally_u32 lanes, tally_u32 j, tally_u32 qpl, tally_u32 flags,
                               TALLY_GLOBAL const float *st, tally_u64 rows, tally_u64 cols)
{
    const tally_u64 quads = tally_k_quads(n);
    float acc = 0.0f;
    int first_term = 1;
    for (tally_u32 q = 0; q < qpl; q++) {
        const tally_u64 g = base + (tally_u64)q * lanes + j;
        if (g >= quads) break;
        float ex[4], et[4];
        const tally_u32 count = tally_k_load_quad(xs, n, g, ex);
        tally_k_load_quad(ts, n, g, et);
        tally_u64 r = st != 0 ? (g << 2) / cols : 0u;
        tally_u64 c = (g << 2) - r * cols;
        for (tally_u32 i = 0; i < 4u; i++) {
            if (i < count) {
                const float term =
                    st == 0 ? tally_kl_term(ex[i], et[i], flags)
                            : tally_kl_logits_term(ex[i], et[i], st[TALLY_K_KLL_MX * rows + r],
                                                   st[TALLY_K_KLL_LX * rows + r], st[TALLY_K_KLL_MY * rows + r],
                                                   st[TALLY_K_KLL_LY * rows + r], st[TALLY_K_KLL_RY * rows + r], flags);
                acc = first_term ? term : acc + term;
                first_term = 0;
                if (++c == cols) {
                    c = 0;
                    r++;
                }
            }
        }
    }
    return acc;
}

/*
 * Level 0 of the KL sum over the row-major walk of n = rows * cols
 * elements. Tile t's value goes to out[out_off + t], divided by `divisor`
 * when finish is DIVIDE and this is the only level (mean, batchmean).
 * x_dtype and t_dtype (tally_dtype) are the inputs' element types;
 * offsets and strides count their elements.
 *
 * mode VEC4 (both views contiguous and 16-byte aligned) takes a fast path
 * for full tiles, so that enough bytes are in flight to keep the memory
 * busy. fp32 inputs: each lane issues eight 16-byte loads (four quads of
 * each input) before it folds them. With a half input, lanes 2i and 2i + 1
 * read adjacent quads, so work-item i plays both lanes: one 16-byte load
 * brings eight halves, a quad for each lane (work-items 128 .. 255 only
 * join the tree). The fold order is the plan's either way.
 */
TALLY_FN void tally_k_kl_tiles_run(TALLY_LOCAL float *v, int bf16_table, TALLY_LOCAL float *log_tab,
                                   TALLY_GLOBAL const float *TALLY_RESTRICT x, tally_u64 x_off,
                                   tally_u64 x_stride, TALLY_GLOBAL const float *TALLY_RESTRICT t, tally_u64 t_off,
                                   tally_u64 t_stride, tally_u64 cols, tally_u32 mode, tally_u64 n, tally_u32 lanes,
                                   tally_u32 qpl, tally_u64 tiles, tally_u32 flags, tally_u32 finish, float divisor,
                                   TALLY_GLOBAL float *TALLY_RESTRICT out, tally_u64 out_off, tally_u32 x_dtype,
                                   tally_u32 t_dtype)
{
    const tally_u32 lid = TALLY_LID();
    const tally_u32 j = lid & (lanes - 1u);
    const tally_u64 quads = tally_k_quads(n);
    const tally_u64 full_quads = n >> 2;
    const tally_u64 tile_quads = (tally_u64)lanes * qpl;
    const int halves = x_dtype != TALLY_F32 || t_dtype != TALLY_F32;
    /* bf16_table is a constant 1 only in the copies of tally_k_kl_tiles_half
     * whose dtypes are the constants BF16, BF16; log_tab is unused
     * elsewhere. The wide table is read only by the packed words. */
    const int wide = bf16_table && TALLY_K_KL_BF16_WIDE;
    const int kind = wide || (bf16_table && TALLY_K_KL_BF16_TABLE_ON) ? TALLY_K_KL_BATCH_BF16_TABLE
                     : halves                                          ? TALLY_K_KL_BATCH_HALF
                                                                       : TALLY_K_KL_BATCH_F32;
    if (wide)
        tally_k_log_bf16_wide_fill(log_tab, lid);
    else if (kind == TALLY_K_KL_BATCH_BF16_TABLE)
        tally_k_log_bf16_fill(log_tab, lid);
    TALLY_LOCAL const float *lane = log_tab + (lid % TALLY_K_LOG_BF16_COPIES);
    const tally_k_src xs = tally_k_src_at(x, x_dtype, x_off, cols, x_stride, mode);
    const tally_k_src ts = tally_k_src_at(t, t_dtype, t_off, cols, t_stride, mode);
    /* A plan narrower than a group has a single tile: segment 0 runs it and
     * the other work-items only join the barriers. */
    const int in_segment = lid < lanes;
    for (tally_u64 tile = TALLY_GROUP_ID(); tile < tiles; tile += TALLY_GROUP_COUNT()) {
        const tally_u64 base = tile * tile_quads;
        const tally_u64 active = in_segment ? tally_k_active(quads, base, lanes) : 0u;
        const int full = mode == TALLY_K_LOAD_VEC4 && qpl == TALLY_TREE_QUADS_PER_LANE &&
                         lanes == TALLY_K_GROUP_SIZE && base + tile_quads <= full_quads;
        if (full && halves && TALLY_K_KL_HALF_PAIRS) {
            if (lid < TALLY_K_GROUP_SIZE / 2u) {
                /* Lanes 2 lid and 2 lid + 1; quad pair m = (base + 2 lid + q L) / 2. */
                const tally_u64 L2 = TALLY_K_GROUP_SIZE / 2u;
                const tally_u64 m0 = (base >> 1) + lid;
                float accA = 0.0f, accB = 0.0f;
                for (tally_u32 q = 0; q < TALLY_TREE_QUADS_PER_LANE; q += 4u) {
                    const tally_u64 m = m0 + (tally_u64)q * L2;
                    tally_f4 xe0, xo0, xe1, xo1, xe2, xo2, xe3, xo3, te0, to0, te1, to1, te2, to2, te3, to3;
                    tally_k_load_pair(xs.p, xs.h, x_dtype, m, &xe0, &xo0);
                    tally_k_load_pair(xs.p, xs.h, x_dtype, m + L2, &xe1, &xo1);
                    tally_k_load_pair(xs.p, xs.h, x_dtype, m + 2u * L2, &xe2, &xo2);
                    tally_k_load_pair(xs.p, xs.h, x_dtype, m + 3u * L2, &xe3, &xo3);
                    tally_k_load_pair(ts.p, ts.h, t_dtype, m, &te0, &to0);
                    tally_k_load_pair(ts.p, ts.h, t_dtype, m + L2, &te1, &to1);
                    tally_k_load_pair(ts.p, ts.h, t_dtype, m + 2u * L2, &te2, &to2);
                    tally_k_load_pair(ts.p, ts.h, t_dtype, m + 3u * L2, &te3, &to3);
                    accA = tally_k_kl_batch_as(kind, lane, accA, q, xe0, xe1, xe2, xe3, te0, te1, te2, te3, flags);
                    accB = tally_k_kl_batch_as(kind, lane, accB, q, xo0, xo1, xo2, xo3, to0, to1, to2, to3, flags);
                }
                v[2u * lid] = accA;
                v[2u * lid + 1u] = accB;
            }
        } else if ((tally_u64)j < active) {
            float acc;
            if (full && kind == TALLY_K_KL_BATCH_BF16_TABLE && (TALLY_K_KL_BF16_WORDS || wide)) {
                /* Two bf16 inputs: the same quads, kept as the words they
                 * were loaded as (tally_k_kl_batch_bf16_words). */
                const tally_u64 g = base + j;
                const tally_u64 L = TALLY_K_GROUP_SIZE;
                TALLY_GLOBAL const uint2 *xw = (TALLY_GLOBAL const uint2 *)xs.h;
                TALLY_GLOBAL const uint2 *tw = (TALLY_GLOBAL const uint2 *)ts.h;
                const tally_u32 lane_bytes = wide ? (lid % TALLY_K_LOG_BF16_WIDE_COPIES) * 16u | 0x4b400000u
                                                  : (lid % TALLY_K_LOG_BF16_COPIES) * 4u;
                const tally_u32 keep = lane_bytes | ((TALLY_K_LOG_BF16_ENTRIES - 1u) * TALLY_K_LOG_BF16_COPIES * 4u);
                acc = 0.0f;
                if (TALLY_K_KL_BF16_AHEAD) {
                    /* The next batch's words are loaded before this batch's
                     * terms, so their wait overlaps the terms' arithmetic. */
                    uint2 a0 = xw[g], a1 = xw[g + L], a2 = xw[g + 2u * L], a3 = xw[g + 3u * L];
                    uint2 b0 = tw[g], b1 = tw[g + L], b2 = tw[g + 2u * L], b3 = tw[g + 3u * L];
                    for (tally_u32 q = 0; q < TALLY_TREE_QUADS_PER_LANE; q += 4u) {
                        const tally_u64 h = g + (tally_u64)(q + 4u < TALLY_TREE_QUADS_PER_LANE ? q + 4u : q) * L;
                        const uint2 na0 = xw[h], na1 = xw[h + L], na2 = xw[h + 2u * L], na3 = xw[h + 3u * L];
                        const uint2 nb0 = tw[h], nb1 = tw[h + L], nb2 = tw[h + 2u * L], nb3 = tw[h + 3u * L];
                        acc = tally_k_kl_batch_bf16_words(log_tab, lane_bytes, keep, wide, acc, q, a0, a1, a2, a3, b0,
                                                          b1, b2, b3, flags);
                        a0 = na0, a1 = na1, a2 = na2, a3 = na3;
                        b0 = nb0, b1 = nb1, b2 = nb2, b3 = nb3;
                    }
                } else {
                    for (tally_u32 q = 0; q < TALLY_TREE_QUADS_PER_LANE; q += 4u) {
                        const tally_u64 h = g + (tally_u64)q * L;
                        const uint2 a0 = xw[h], a1 = xw[h + L], a2 = xw[h + 2u * L], a3 = xw[h + 3u * L];
                        const uint2 b0 = tw[h], b1 = tw[h + L], b2 = tw[h + 2u * L], b3 = tw[h + 3u * L];
                        acc = tally_k_kl_batch_bf16_words(log_tab, lane_bytes, keep, wide, acc, q, a0, a1, a2, a3, b0,
                                                          b1, b2, b3, flags);
                    }
                }
            } else if (full) {
                const tally_u64 g = base + j;
                const tally_u64 L = TALLY_K_GROUP_SIZE;
                acc = 0.0f;
                /* One body for the four batches keeps the program small (its
                 * terms are inlined sixteen times per variant, not
                 * sixty-four); the lane's first element starts the fold. A
                 * half input's quad is one 8-byte load (tally_k_quad4), so
                 * every lane reads its own quads either way. */
                for (tally_u32 q = 0; q < TALLY_TREE_QUADS_PER_LANE; q += 4u) {
                    const tally_u64 h = g + (tally_u64)q * L;
                    const tally_f4 a0 = tally_k_quad4(&xs, h), a1 = tally_k_quad4(&xs, h + L);
                    const tally_f4 a2 = tally_k_quad4(&xs, h + 2u * L), a3 = tally_k_quad4(&xs, h + 3u * L);
                    const tally_f4 b0 = tally_k_quad4(&ts, h), b1 = tally_k_quad4(&ts, h + L);
                    const tally_f4 b2 = tally_k_quad4(&ts, h + 2u * L), b3 = tally_k_quad4(&ts, h + 3u * L);
                    acc = tally_k_kl_batch_as(kind, lane, acc, q, a0, a1, a2, a3, b0, b1, b2, b3, flags);
                }
            } else {
                acc = tally_k_kl_lane(&xs, &ts, n, base, lanes, j, qpl, flags, 0, 0u, 0u);
            }
            v[lid] = acc;
        }
        tally_k_tile_sum_store(v, lid, lanes, active, in_segment && j == 0u, finish, divisor, out + out_off + tile);
    }
}

/* fp32 inputs only (the dtype arguments are ignored): the halves' code is
 * compiled out, so this kernel keeps the registers, and with them the
 * occupancy, of an fp32-only kernel. */
TALLY_KERNEL void tally_k_kl_tiles(TALLY_K_PARAMS(kl_tiles))
{
    TALLY_LOCAL_ARRAY(float, v, TALLY_K_GROUP_SIZE);
    (void)x_dtype;
    (void)t_dtype;
    tally_k_kl_tiles_run(v, 0, v, x, x_off, x_stride, t, t_off, t_stride, cols, mode, n, lanes, qpl, tiles, flags,
                         finish, divisor, out, out_off, TALLY_F32, TALLY_F32);
}

/* The same with at least one half input (any mix of dtypes). Two bf16
 * inputs with the flags of the common forms (input_is_prob, or log input
 * and probability target) run copies of the body in which the dtypes and
 * the flags are constants, so the conversions are bare shifts and the
 * terms straight-line code, and whose logarithms come from the bf16 table;
 * the copies compute exactly what the general body computes for those
 * arguments. */
TALLY_KERNEL_GROUPS_PER_CU(3) void tally_k_kl_tiles_half(TALLY_K_PARAMS(kl_tiles))
{
    TALLY_LOCAL_ARRAY(float, v, TALLY_K_GROUP_SIZE);
    /* Pairs, so that the wide table's 8-byte entries are aligned. */
    TALLY_LOCAL_ARRAY(float2, log_pairs,
                      (TALLY_K_KL_BF16_WIDE ? TALLY_K_LOG_BF16_WIDE_FLOATS : TALLY_K_LOG_BF16_TABLE) / 2u);
    TALLY_LOCAL float *log_tab = (TALLY_LOCAL float *)log_pairs;
    const int bf16 = x_dtype == TALLY_BF16 && t_dtype == TALLY_BF16;
    if (bf16 && flags == TALLY_KL_INPUT_IS_PROB)
        tally_k_kl_tiles_run(v, 1, log_tab, x, x_off, x_stride, t, t_off, t_stride, cols, mode, n, lanes, qpl, tiles,
                             TALLY_KL_INPUT_IS_PROB, finish, divisor, out, out_off, TALLY_BF16, TALLY_BF16);
    else if (bf16 && flags == 0u)
        tally_k_kl_tiles_run(v, 1, log_tab, x, x_off, x_stride, t, t_off, t_stride, cols, mode, n, lanes, qpl, tiles,
                             0u, finish, divisor, out, out_off, TALLY_BF16, TALLY_BF16);
    else
        tally_k_kl_tiles_run(v, 0, log_tab, x, x_off, x_stride, t, t_off, t_stride, cols, mode, n, lanes, qpl, tiles,
                             flags, finish, divisor, out, out_off, x_dtype, t_dtype);
}

/*
 * The pointwise loss o[r, c] = tally_kl_term(x[r, c], t[r, c]), the inputs
 * of dtypes x_dtype and t_dtype. VEC4: all three views contiguous and
 * 16-byte aligned; one quad of each per work-item step (a float4, or one
 * 8-byte load of halves), the tail of n % 4 elements element by element.
 * CONTIGUOUS: one element per step. STRIDED: groups walk rows, work-items
 * walk the columns of a row.
 */
TALLY_KERNEL void tally_k_kl_pointwise(TALLY_K_PARAMS(kl_pointwise))
{
    const tally_u32 lid = TALLY_LID();
    const tally_u64 gid = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + lid;
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    const tally_k_src xs = tally_k_src_at(x, x_dtype, x_off, cols, x_stride, mode);
    const tally_k_src ts = tally_k_src_at(t, t_dtype, t_off, cols, t_stride, mode);
    if (mode == TALLY_K_LOAD_STRIDED) {
        for (tally_u64 r = TALLY_GROUP_ID(); r < rows; r += TALLY_GROUP_COUNT()) {
            TALLY_GLOBAL float *orow = o + o_off + r * o_stride;
            for (tally_u64 c = lid; c < cols; c += TALLY_K_GROUP_SIZE)
                orow[c] = tally_canonical(tally_kl_term(tally_k_ld(xs.p, xs.h, x_dtype, r * x_stride + c),
                                                        tally_k_ld(ts.p, ts.h, t_dtype, r * t_stride + c), flags));
        }
        return;
    }
    const tally_u64 n = rows * cols;
    TALLY_GLOBAL float *op = o + o_off;
    tally_u64 done = 0;
    if (mode == TALLY_K_LOAD_VEC4) {
        const tally_u64 nq = n >> 2;
        for (tally_u64 g = gid; g < nq; g += step) {
            const tally_f4 a = x_dtype == TALLY_F32 ? TALLY_LOAD_F4(xs.p, g) : tally_k_load_h4(xs.h, x_dtype, g);
            const tally_f4 b = t_dtype == TALLY_F32 ? TALLY_LOAD_F4(ts.p, g) : tally_k_load_h4(ts.h, t_dtype, g);
            tally_f4 r;
            r.x = tally_canonical(tally_kl_term(a.x, b.x, flags));
            r.y = tally_canonical(tally_kl_term(a.y, b.y, flags));
            r.z = tally_canonical(tally_kl_term(a.z, b.z, flags));
            r.w = tally_canonical(tally_kl_term(a.w, b.w, flags));
            TALLY_STORE_F4(op, g, r);
        }
        done = nq << 2;
    }
    for (tally_u64 k = done + gid; k < n; k += step)
        op[k] = tally_canonical(
            tally_kl_term(tally_k_ld(xs.p, xs.h, x_dtype, k), tally_k_ld(ts.p, ts.h, t_dtype, k), flags));
}

/* The forms from logits (TALLY_KL_INPUT_LOGITS, TALLY_KL_TARGET_LOGITS). */
#include "kl_logits.h"

#endif /* TALLY_KERNELS_KL_H */
