/*
 * tests/fuzz/fuzz_api.c - libFuzzer target: the public API's argument
 * validation on the host backend.
 *
 * Each input decodes (fuzz_input.h) into one call: an op or buffer call,
 * up to seven views (buffer, offset, rows, cols, stride, dtype), enums,
 * flags, a component count, a stream position and sometimes a NULL context.
 * Views point into two buffers of 1024 elements, a buffer of another
 * context, or nowhere. The oracle, besides the sanitizers: a call that does
 * not return OK leaves both buffers exactly as they were, and an OK call
 * changes only elements inside its output views. A breach aborts, which the
 * fuzzer reports as a crash.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "tally.h"

#define ELEMS 1024

static tally_context *ctx, *other;
static tally_buffer *bufs[3]; /* A, B, another context's */
static uint32_t initial[2][ELEMS];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (tally_context_create(TALLY_BACKEND_HOST, 0, &ctx) != TALLY_OK ||
        tally_context_create(TALLY_BACKEND_HOST, 0, &other) != TALLY_OK)
        abort();
    for (int b = 0; b < 2; b++) {
        for (int i = 0; i < ELEMS; i++) {
            float f = (float)((i * 37 + b * 11) % 23) * 0.25f - 1.0f;
            memcpy(&initial[b][i], &f, 4);
        }
        if (tally_buffer_create(ctx, ELEMS * 4, &bufs[b]) != TALLY_OK) abort();
    }
    if (tally_buffer_create(other, ELEMS * 4, &bufs[2]) != TALLY_OK) abort();
    return 0;
}

typedef struct fview {
    int buf; /* 0, 1: ours; 2: another context's; 3: none */
    tally_view v;
} fview;

static fview read_view(fuzz_reader *r)
{
    fview f;
    uint8_t sel = fuzz_u8(r);
    f.buf = sel & 3;
    f.v.buffer = f.buf < 3 ? bufs[f.buf] : NULL;
    f.v.offset = fuzz_i64(r);
    f.v.rows = fuzz_i64(r);
    f.v.cols = fuzz_i64(r);
    /* Mostly a sane stride, so that valid calls are common. */
    f.v.stride = (sel & 4) ? fuzz_i64(r) : f.v.cols;
    uint8_t d = fuzz_u8(r);
    f.v.dtype = d < 200 ? TALLY_F32 : d < 220 ? TALLY_U32 : d < 240 ? TALLY_I32 : (tally_dtype)(d - 240);
    return f;
}

/* Marks the bytes of an output view (of an OK call) as writable: its
 * offset and stride count elements of its own dtype, so a half view (2
 * bytes an element) may reach twice as many elements as a buffer holds
 * words. */
static void allow(const fview *f, unsigned char writable[2][ELEMS * 4])
{
    const tally_view *v = &f->v;
    if (f->buf > 1 || v->rows <= 0 || v->cols <= 0) return; /* an empty view writes nothing */
    const int64_t size = v->dtype == TALLY_BF16 || v->dtype == TALLY_F16 ? 2 : 4;
    int64_t stride = v->rows > 1 ? v->stride : v->cols;
    for (int64_t r = 0; r < v->rows; r++)
        for (int64_t c = 0; c < v->cols; c++) {
            int64_t at = (v->offset + r * stride + c) * size;
            if (at < 0 || at + size > ELEMS * 4) abort(); /* an OK view outside its buffer */
            for (int64_t k = 0; k < size; k++) writable[f->buf][at + k] = 1;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_reader r = {.p = data, .n = size};
    for (int b = 0; b < 2; b++)
        if (tally_buffer_upload(bufs[b], 0, initial[b], sizeof initial[b]) != TALLY_OK) abort();
    uint8_t head = fuzz_u8(&r);
    int op = head % 11;
    tally_context *c = (head & 0x80) && (head & 0x40) ? NULL : ctx;
    fview v[7];
    for (int i = 0; i < 7; i++) v[i] = read_view(&r);
    int e1 = (int)(int8_t)fuzz_u8(&r), e2 = (int)(int8_t)fuzz_u8(&r);
    unsigned flags = fuzz_u8(&r);
    if (flags & 0x80) flags = (unsigned)fuzz_raw64(&r);
    int64_t K = fuzz_i64(&r);
    tally_rng rng = {.seed = fuzz_raw64(&r), .subsequence = (uint64_t)fuzz_i64(&r), .offset = (uint64_t)fuzz_i64(&r)};
    uint64_t consumed = 0;
    uint64_t *cp = (head & 0x20) ? &consumed : NULL;
    size_t off = (size_t)(uint64_t)fuzz_i64(&r), bytes = (size_t)(uint64_t)fuzz_i64(&r);
    static uint8_t scratch[ELEMS * 4 + 64];
    float scalar;
    int outs[3] = {-1, -1, -1}; /* which of v[] are outputs */
    tally_status st = TALLY_OK;
    switch (op) {
    case 0: st = tally_reduce(c, (tally_reduce_op)e1, (tally_axis)e2, v[0].v, v[1].v); outs[0] = 1; break;
    case 1: st = tally_kl_div(c, v[0].v, v[1].v, (tally_reduction)e1, flags, v[2].v); outs[0] = 2; break;
    case 2: st = tally_dirichlet_multinomial(c, v[0].v, v[1].v, (tally_reduction)e1, flags, v[2].v); outs[0] = 2; break;
    case 3: st = tally_gmm_log_prob(c, v[0].v, v[1].v, v[2].v, v[3].v, K, v[4].v); outs[0] = 4; break;
    case 4:
        st = tally_gmm_sample(c, v[0].v, v[1].v, v[2].v, K, rng, v[3].v, v[4].v, v[5].v, cp);
        outs[0] = 3, outs[1] = 4, outs[2] = 5;
        break;
    case 5: st = tally_rng_fill(c, (tally_distribution)e1, rng, v[0].v, cp); outs[0] = 0; break;
    case 6: st = tally_categorical(c, v[0].v, flags, rng, v[1].v, cp); outs[0] = 1; break;
    case 7: st = tally_read_scalar(c, v[0].v, (head & 0x10) ? NULL : &scalar); break;
    case 8: {
        /* Uploads from the scratch block, which is large enough for any
         * size the library may accept (its buffers hold 4096 bytes). */
        st = tally_buffer_upload(v[0].buf < 3 ? bufs[v[0].buf] : NULL, off, scratch, bytes);
        if (st == TALLY_OK) {
            if (v[0].buf > 2 || off > ELEMS * 4 || bytes > ELEMS * 4 - off) abort();
            return 0; /* contents legitimately changed; nothing else to check */
        }
        break;
    }
    case 9:
        st = tally_buffer_download(v[0].buf < 3 ? bufs[v[0].buf] : NULL, off, scratch, bytes);
        if (st == TALLY_OK && (off > ELEMS * 4 || bytes > ELEMS * 4 - off)) abort();
        break;
    case 10:
        st = tally_buffer_fill(v[0].buf < 3 ? bufs[v[0].buf] : NULL, off, bytes, (uint32_t)flags);
        if (st == TALLY_OK) {
            if (v[0].buf > 2 || off > ELEMS * 4 || bytes > ELEMS * 4 - off || off % 4 || bytes % 4) abort();
            return 0;
        }
        break;
    }
    if (st == TALLY_OK && tally_sync(ctx) != TALLY_OK) abort();
    if (st != TALLY_OK && tally_last_error(c)[0] == '\0') abort(); /* every failure says why */
    static unsigned char writable[2][ELEMS * 4];
    memset(writable, 0, sizeof writable);
    if (st == TALLY_OK)
        for (int i = 0; i < 3; i++)
            if (outs[i] >= 0 && v[outs[i]].v.buffer != NULL) allow(&v[outs[i]], writable);
    static unsigned char now[ELEMS * 4];
    for (int b = 0; b < 2; b++) {
        if (tally_buffer_download(bufs[b], 0, now, sizeof now) != TALLY_OK) abort();
        const unsigned char *was = (const unsigned char *)initial[b];
        for (int i = 0; i < ELEMS * 4; i++)
            if (now[i] != was[i] && !writable[b][i]) {
                fprintf(stderr, "fuzz_api: op %d (status %s) changed byte %d of buffer %d\n", op,
                        tally_status_name(st), i, b);
                abort();
            }
    }
    return 0;
}
