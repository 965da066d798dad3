/*
 * backends/host/host_half.c - the host's `widen` and `narrow` entries: BF16
 * and F16 views copied into fp32, and fp32 results rounded into BF16 and
 * F16 views, with tally/half.h, the conversions every backend uses.
 * src/half.c runs the unchanged fp32 op on the copies, so an op on half
 * inputs or outputs costs one extra pass over them and 4 bytes per element
 * for the length of the call.
 */
#include "host_backend.h"
#include "host_parallel.h"
#include "tally/half.h"

/* A conversion between a BF16 or F16 view and a contiguous fp32 buffer of
 * its rows x cols elements. */
typedef struct half_task {
    uint16_t *half; /* the view's first element */
    float *f32;     /* contiguous, row-major */
    uint64_t cols, stride;
    uint32_t dtype;
} half_task;

static uint16_t narrow_bf16(float f) { return (uint16_t)tally_f32_to_bf16(f); }
static uint16_t narrow_f16(float f) { return (uint16_t)tally_f32_to_f16(f); }

/* The row function `name` of a half_task's rows [begin, end): IN and OUT
 * the row's two ends, BF16 and F16 an element's conversion for each
 * dtype (one loop each, so each stays a plain loop the compiler can
 * vectorise). */
#define HALF_ROWS(name, IN, OUT, BF16, F16)                                         \
    static void name(void *arg, uint64_t begin, uint64_t end)                       \
    {                                                                               \
        const half_task *t = arg;                                                   \
        for (uint64_t r = begin; r < end; r++) {                                    \
            IN;                                                                     \
            OUT;                                                                    \
            if (t->dtype == TALLY_BF16) {                                           \
                for (uint64_t c = 0; c < t->cols; c++) out[c] = BF16(in[c]);        \
            } else {                                                                \
                for (uint64_t c = 0; c < t->cols; c++) out[c] = F16(in[c]);         \
            }                                                                       \
        }                                                                           \
    }

/* Each row of the view to its contiguous place in the fp32 buffer. */
HALF_ROWS(widen_rows, const uint16_t *in = t->half + r * t->stride, float *out = t->f32 + r * t->cols,
          tally_bf16_to_f32, tally_f16_to_f32)
/* Each row of the fp32 buffer to its row of the view; only the view's own
 * halves are stored, so the gaps of a strided view and the neighbours of
 * an odd offset keep their bytes. */
HALF_ROWS(narrow_rows, const float *in = t->f32 + r * t->cols, uint16_t *out = t->half + r * t->stride,
          narrow_bf16, narrow_f16)

/* The task of a conversion between the half view v and the fp32 buffer
 * f32 (a host buffer of v's element count), after v's dtype is checked. */
static tally_status half_task_make(tally_context *ctx, const char *what, const tally__array *v, tally_buffer *f32,
                                   half_task *t)
{
    if (v->dtype != TALLY_BF16 && v->dtype != TALLY_F16)
        return tally__error(ctx, TALLY_UNSUPPORTED_DTYPE, "host %s: dtype %d is not a half type", what, (int)v->dtype);
    *t = (half_task){.half = (uint16_t *)((tally__host_buffer *)v->buffer)->data + v->offset,
                     .f32 = (float *)((tally__host_buffer *)f32)->data, .cols = v->cols, .stride = v->stride,
                     .dtype = (uint32_t)v->dtype};
    return TALLY_OK;
}

tally_status tally__host_widen(tally_context *ctx, const tally__array *src, tally_buffer *dst)
{
    half_task t;
    tally_status st = half_task_make(ctx, "widen", src, dst, &t);
    if (st == TALLY_OK) tally__host_parallel_for(src->rows, src->cols + 1u, widen_rows, &t);
    return st;
}

tally_status tally__host_narrow(tally_context *ctx, const tally_buffer *src, const tally__array *dst)
{
    half_task t;
    /* The task only reads through f32 here (narrow_rows). */
    tally_status st = half_task_make(ctx, "narrow", dst, (tally_buffer *)src, &t);
    if (st == TALLY_OK) tally__host_parallel_for(dst->rows, dst->cols + 1u, narrow_rows, &t);
    return st;
}
