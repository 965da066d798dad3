/*
 * backends/host/host.c - the host backend's context and buffers. The host
 * backend is tally's reference: plain C11 over the same portable headers
 * that the kernels compile, run synchronously on the calling thread (plus
 * worker threads inside one op).
 */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "host_backend.h"
#include "host_parallel.h"

static tally_status host_devices(tally_device_info *devices, int capacity, int *count)
{
    *count = 1;
    if (capacity > 0) {
        memset(&devices[0], 0, sizeof devices[0]);
        devices[0].index = 0;
        /* The implementation a new context would pick, or why it cannot. */
        const tally__host_kernels *kernels = NULL;
        const char *impl = NULL;
        char why[256];
        if (tally__host_pick_kernels(&kernels, &impl, why, sizeof why) != TALLY_OK) impl = "invalid TALLY_HOST_IMPL";
        snprintf(devices[0].name, sizeof devices[0].name, "host CPU (%d threads, %s)", tally__host_threads(), impl);
        snprintf(devices[0].platform, sizeof devices[0].platform, "host");
        devices[0].is_gpu = 0;
    }
    return TALLY_OK;
}

static tally_status host_context_create(int device, tally_context **out)
{
    if (device != 0)
        return tally__error(NULL, TALLY_NO_DEVICE, "host backend: device %d does not exist (only device 0)",
                            device);
    const tally__host_kernels *kernels = NULL;
    const char *impl = NULL;
    char why[256];
    if (tally__host_pick_kernels(&kernels, &impl, why, sizeof why) != TALLY_OK)
        return tally__error(NULL, TALLY_INVALID_ARGUMENT, "%s", why);
    tally__host_context *hc = calloc(1, sizeof *hc);
    if (hc == NULL) return tally__error(NULL, TALLY_OUT_OF_MEMORY, "host backend: out of memory for a context");
    hc->base.ops = &tally__host_ops;
    hc->kernels = kernels;
    hc->impl = impl;
    hc->pool = tally__host_pool_create(tally__host_threads());
    snprintf(hc->base.device_name, sizeof hc->base.device_name, "host CPU (%d threads, %s)", tally__host_threads(),
             impl);
    *out = &hc->base;
    return TALLY_OK;
}

static void host_context_release(tally_context *ctx)
{
    tally__host_pool_release(((tally__host_context *)ctx)->pool);
    free(ctx);
}

/* Each op runs with its context's pool current on the calling thread, so
 * that its parallel loops use the context's workers (host_parallel.h):
 * pooled_<op> wraps tally__host_<op> for every row of TALLY__JOB_OPS. */
#define DEFINE_POOLED_OP(p, name, job_type, need)                              \
    static tally_status pooled_##name(tally_context *ctx, const job_type *job) \
    {                                                                          \
        tally__host_pool *previous = tally__host_pool_use(((tally__host_context *)ctx)->pool); \
        tally_status st = tally__host_##name(ctx, job);                        \
        tally__host_pool_use(previous);                                        \
        return st;                                                             \
    }
TALLY__JOB_OPS(DEFINE_POOLED_OP, )
#undef DEFINE_POOLED_OP

/* Widening half inputs and narrowing half outputs (host_half.c) run
 * parallel loops too. */
static tally_status pooled_widen(tally_context *ctx, const tally__array *src, tally_buffer *dst)
{
    tally__host_pool *previous = tally__host_pool_use(((tally__host_context *)ctx)->pool);
    tally_status st = tally__host_widen(ctx, src, dst);
    tally__host_pool_use(previous);
    return st;
}

static tally_status pooled_narrow(tally_context *ctx, const tally_buffer *src, const tally__array *dst)
{
    tally__host_pool *previous = tally__host_pool_use(((tally__host_context *)ctx)->pool);
    tally_status st = tally__host_narrow(ctx, src, dst);
    tally__host_pool_use(previous);
    return st;
}

static tally_status host_sync(tally_context *ctx)
{
    (void)ctx;
    return TALLY_OK;
}

/* Memory is aligned to 64 bytes so that float4-style loops vectorise. */
static tally_status host_buffer_create(tally_context *ctx, size_t bytes, tally_buffer **out)
{
    tally__host_buffer *hb = calloc(1, sizeof *hb);
    if (hb == NULL) return tally__error(ctx, TALLY_OUT_OF_MEMORY, "host backend: out of memory for a buffer");
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes) {
        free(hb);
        return tally__error(ctx, TALLY_SIZE_OVERFLOW, "host backend: %zu bytes is too large", bytes);
    }
    hb->data = aligned_alloc(64, rounded > 0 ? rounded : 64);
    if (hb->data == NULL) {
        free(hb);
        return tally__error(ctx, TALLY_OUT_OF_MEMORY, "host backend: could not allocate %zu bytes", bytes);
    }
    hb->base.ctx = ctx;
    hb->base.bytes = bytes;
    *out = &hb->base;
    return TALLY_OK;
}

/* The app's memory, used in place: ops read and write it directly, and the
 * release leaves it alone. Only 4-byte alignment is promised, so host code
 * never assumes more of a buffer's address. */
static tally_status host_buffer_wrap_host(tally_context *ctx, void *ptr, size_t bytes, tally_buffer **out)
{
    tally__host_buffer *hb = calloc(1, sizeof *hb);
    if (hb == NULL) return tally__error(ctx, TALLY_OUT_OF_MEMORY, "host backend: out of memory for a buffer");
    hb->data = ptr;
    hb->base.ctx = ctx;
    hb->base.bytes = bytes;
    hb->base.wrapped = 1;
    *out = &hb->base;
    return TALLY_OK;
}

static void host_buffer_release(tally_buffer *buf)
{
    tally__host_buffer *hb = (tally__host_buffer *)buf;
    if (!buf->wrapped) free(hb->data);
    free(hb);
}

static tally_status host_buffer_upload(tally_buffer *buf, size_t offset, const void *src, size_t bytes)
{
    memcpy((char *)((tally__host_buffer *)buf)->data + offset, src, bytes);
    return TALLY_OK;
}

static tally_status host_buffer_download(const tally_buffer *buf, size_t offset, void *dst, size_t bytes)
{
    memcpy(dst, (const char *)((const tally__host_buffer *)buf)->data + offset, bytes);
    return TALLY_OK;
}

static tally_status host_buffer_fill(tally_buffer *buf, size_t offset, size_t bytes, uint32_t pattern)
{
    uint32_t *p = (uint32_t *)((char *)((tally__host_buffer *)buf)->data + offset);
    for (size_t i = 0; i < bytes / 4; i++) p[i] = pattern;
    return TALLY_OK;
}

const tally__backend_ops tally__host_ops = {
    .name = "host",
    .kind = TALLY_BACKEND_HOST,
    TALLY__DEVICE_ENTRIES(host_),
    .buffer_wrap_host = host_buffer_wrap_host,
    TALLY__OP_ENTRIES(pooled_)
    .widen = pooled_widen,
    .narrow = pooled_narrow,
};
