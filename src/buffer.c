/*
 * src/buffer.c - buffers and views: argument checks, then the backend.
 */
#include <string.h>

#include "internal.h"

tally_status tally_buffer_create(tally_context *ctx, size_t bytes, tally_buffer **out)
{
    if (out != NULL) *out = NULL;
    if (ctx == NULL) return tally__error(NULL, TALLY_INVALID_ARGUMENT, "tally_buffer_create: ctx is NULL");
    if (out == NULL) return tally__error(ctx, TALLY_INVALID_ARGUMENT, "tally_buffer_create: out is NULL");
    if (bytes > (size_t)INT64_MAX)
        return tally__error(ctx, TALLY_SIZE_OVERFLOW, "tally_buffer_create: %zu bytes is too large", bytes);
    tally_status st = ctx->ops->buffer_create(ctx, bytes, out);
    if (st == TALLY_OK) ctx->live_buffers++;
    return st;
}

tally_status tally_buffer_wrap_opencl(tally_context *ctx, void *cl_mem, tally_buffer **out)
{
    if (out != NULL) *out = NULL;
    if (ctx == NULL) return tally__error(NULL, TALLY_INVALID_ARGUMENT, "tally_buffer_wrap_opencl: ctx is NULL");
    if (out == NULL || cl_mem == NULL)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "tally_buffer_wrap_opencl: cl_mem and out are required");
    if (ctx->ops->kind != TALLY_BACKEND_OPENCL || ctx->ops->buffer_wrap == NULL)
        return tally__error(ctx, TALLY_WRONG_CONTEXT,
                            "tally_buffer_wrap_opencl: the context uses the %s backend, not opencl",
                            ctx->ops->name);
    tally_status st = ctx->ops->buffer_wrap(ctx, cl_mem, 0, 0, out);
    if (st == TALLY_OK) ctx->live_buffers++;
    return st;
}

tally_status tally_buffer_wrap_cuda(tally_context *ctx, uint64_t device_ptr, size_t bytes,
                                    tally_buffer **out)
{
    if (out != NULL) *out = NULL;
    if (ctx == NULL) return tally__error(NULL, TALLY_INVALID_ARGUMENT, "tally_buffer_wrap_cuda: ctx is NULL");
    if (out == NULL || (device_ptr == 0 && bytes > 0))
        return tally__error(ctx, TALLY_INVALID_ARGUMENT,
                            "tally_buffer_wrap_cuda: out is NULL or the device pointer is 0");
    if (ctx->ops->kind != TALLY_BACKEND_CUDA || ctx->ops->buffer_wrap == NULL)
        return tally__error(ctx, TALLY_WRONG_CONTEXT,
                            "tally_buffer_wrap_cuda: the context uses the %s backend, not cuda",
                            ctx->ops->name);
    tally_status st = ctx->ops->buffer_wrap(ctx, NULL, device_ptr, bytes, out);
    if (st == TALLY_OK) ctx->live_buffers++;
    return st;
}

tally_status tally_buffer_wrap_host(tally_context *ctx, void *ptr, size_t bytes, tally_buffer **out)
{
    if (out != NULL) *out = NULL;
    if (ctx == NULL) return tally__error(NULL, TALLY_INVALID_ARGUMENT, "tally_buffer_wrap_host: ctx is NULL");
    if (out == NULL) return tally__error(ctx, TALLY_INVALID_ARGUMENT, "tally_buffer_wrap_host: out is NULL");
    if (ptr == NULL && bytes > 0)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "tally_buffer_wrap_host: ptr is NULL for %zu bytes",
                            bytes);
    if ((uintptr_t)ptr % 4u != 0)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT,
                            "tally_buffer_wrap_host: ptr %p is not aligned to 4 bytes", ptr);
    if (bytes > (size_t)INT64_MAX)
        return tally__error(ctx, TALLY_SIZE_OVERFLOW, "tally_buffer_wrap_host: %zu bytes is too large", bytes);
    if (ctx->ops->buffer_wrap_host == NULL)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT,
                            "tally_buffer_wrap_host: the %s backend cannot use host memory in place; "
                            "create a buffer and upload instead",
                            ctx->ops->name);
    tally_status st = ctx->ops->buffer_wrap_host(ctx, ptr, bytes, out);
    if (st == TALLY_OK) ctx->live_buffers++;
    return st;
}

void tally_buffer_release(tally_buffer *buf)
{
    if (buf == NULL) return;
    tally_context *ctx = buf->ctx;
    ctx->live_buffers--;
    ctx->ops->buffer_release(buf);
}

size_t tally_buffer_size(const tally_buffer *buf)
{
    return buf != NULL ? buf->bytes : 0;
}

static tally_status check_range(tally_context *ctx, const char *call, const tally_buffer *buf,
                                size_t offset, size_t bytes)
{
    if (offset > buf->bytes || bytes > buf->bytes - offset)
        return tally__error(ctx, TALLY_OUT_OF_BOUNDS,
                            "%s: bytes [%zu, %zu + %zu) lie outside the %zu-byte buffer", call,
                            offset, offset, bytes, buf->bytes);
    return TALLY_OK;
}

/* The checks of a copy between buf and the app's memory `host` (named
 * host_name in the message): both present, and the bytes inside buf. */
static tally_status check_copy(const tally_buffer *buf, const char *call, const char *host_name,
                               const void *host, size_t offset, size_t bytes)
{
    if (buf == NULL) return tally__error(NULL, TALLY_INVALID_ARGUMENT, "%s: buffer is NULL", call);
    if (host == NULL && bytes > 0)
        return tally__error(buf->ctx, TALLY_INVALID_ARGUMENT, "%s: %s is NULL", call, host_name);
    return check_range(buf->ctx, call, buf, offset, bytes);
}

tally_status tally_buffer_upload(tally_buffer *buf, size_t byte_offset, const void *src, size_t bytes)
{
    tally_status st = check_copy(buf, "tally_buffer_upload", "src", src, byte_offset, bytes);
    if (st != TALLY_OK || bytes == 0) return st;
    return buf->ctx->ops->buffer_upload(buf, byte_offset, src, bytes);
}

tally_status tally_buffer_download(const tally_buffer *buf, size_t byte_offset, void *dst, size_t bytes)
{
    tally_status st = check_copy(buf, "tally_buffer_download", "dst", dst, byte_offset, bytes);
    if (st != TALLY_OK || bytes == 0) return st;
    return buf->ctx->ops->buffer_download(buf, byte_offset, dst, bytes);
}

tally_status tally_buffer_fill(tally_buffer *buf, size_t byte_offset, size_t bytes, uint32_t pattern)
{
    if (buf == NULL) return tally__error(NULL, TALLY_INVALID_ARGUMENT, "tally_buffer_fill: buffer is NULL");
    tally_context *ctx = buf->ctx;
    if (byte_offset % 4 != 0 || bytes % 4 != 0)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT,
                            "tally_buffer_fill: offset %zu and size %zu must be multiples of 4",
                            byte_offset, bytes);
    tally_status st = check_range(ctx, "tally_buffer_fill", buf, byte_offset, bytes);
    if (st != TALLY_OK || bytes == 0) return st;
    return ctx->ops->buffer_fill(buf, byte_offset, bytes, pattern);
}

tally_view tally_view_f32(tally_buffer *buf, int64_t offset, int64_t rows, int64_t cols)
{
    tally_view v = {.buffer = buf, .offset = offset, .rows = rows, .cols = cols, .stride = cols,
                    .dtype = TALLY_F32};
    return v;
}

tally_view tally_view_f32_strided(tally_buffer *buf, int64_t offset, int64_t rows, int64_t cols,
                                  int64_t stride)
{
    tally_view v = {.buffer = buf, .offset = offset, .rows = rows, .cols = cols, .stride = stride,
                    .dtype = TALLY_F32};
    return v;
}

tally_view tally_view_typed(tally_buffer *buf, tally_dtype dtype, int64_t offset, int64_t rows,
                            int64_t cols)
{
    tally_view v = {.buffer = buf, .offset = offset, .rows = rows, .cols = cols, .stride = cols,
                    .dtype = dtype};
    return v;
}
