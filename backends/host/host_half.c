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

typedef struct widen_task {
    const uint16_t *src; /* the view's first element */
    uint64_t cols, stride;
    uint32_t dtype;
    float *dst;
} widen_task;

/* Rows [begin, end) of the view, each to its contiguous place in dst. */
static void widen_rows(void *arg, uint64_t begin, uint64_t end)
{
    const widen_task *t = arg;
    for (uint64_t r = begin; r < end; r++) {
        const uint16_t *in = t->src + r * t->stride;
        float *out = t->dst + r * t->cols;
        if (t->dtype == TALLY_BF16) {
            for (uint64_t c = 0; c < t->cols; c++) out[c] = tally_bf16_to_f32(in[c]);
        } else {
            for (uint64_t c = 0; c < t->cols; c++) out[c] = tally_f16_to_f32(in[c]);
        }
    }
}

tally_status tally__host_widen(tally_context *ctx, const tally__array *src, tally_buffer *dst)
{
    if (src->dtype != TALLY_BF16 && src->dtype != TALLY_F16)
        return tally__error(ctx, TALLY_UNSUPPORTED_DTYPE, "host widen: dtype %d is not a half type", (int)src->dtype);
    widen_task t = {.src = (const uint16_t *)((tally__host_buffer *)src->buffer)->data + src->offset,
                    .cols = src->cols, .stride = src->stride, .dtype = (uint32_t)src->dtype,
                    .dst = (float *)((tally__host_buffer *)dst)->data};
    tally__host_parallel_for(src->rows, src->cols + 1u, widen_rows, &t);
    return TALLY_OK;
}

typedef struct narrow_task {
    const float *src; /* contiguous, row-major */
    uint16_t *dst;    /* the view's first element */
    uint64_t cols, stride;
    uint32_t dtype;
} narrow_task;

/* Rows [begin, end) of the fp32 source, each to its row of the view; only
 * the view's own halves are stored, so the gaps of a strided view and the
 * neighbours of an odd offset keep their bytes. */
static void narrow_rows(void *arg, uint64_t begin, uint64_t end)
{
    const narrow_task *t = arg;
    for (uint64_t r = begin; r < end; r++) {
        const float *in = t->src + r * t->cols;
        uint16_t *out = t->dst + r * t->stride;
        if (t->dtype == TALLY_BF16) {
            for (uint64_t c = 0; c < t->cols; c++) out[c] = (uint16_t)tally_f32_to_bf16(in[c]);
        } else {
            for (uint64_t c = 0; c < t->cols; c++) out[c] = (uint16_t)tally_f32_to_f16(in[c]);
        }
    }
}

tally_status tally__host_narrow(tally_context *ctx, const tally_buffer *src, const tally__array *dst)
{
    if (dst->dtype != TALLY_BF16 && dst->dtype != TALLY_F16)
        return tally__error(ctx, TALLY_UNSUPPORTED_DTYPE, "host narrow: dtype %d is not a half type", (int)dst->dtype);
    narrow_task t = {.src = (const float *)((const tally__host_buffer *)src)->data,
                     .dst = (uint16_t *)((tally__host_buffer *)dst->buffer)->data + dst->offset,
                     .cols = dst->cols, .stride = dst->stride, .dtype = (uint32_t)dst->dtype};
    tally__host_parallel_for(dst->rows, dst->cols + 1u, narrow_rows, &t);
    return TALLY_OK;
}
