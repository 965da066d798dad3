/*
 * src/context.c - backend choice, contexts, enumeration and version calls.
 * Reaches backends only through their ops tables.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

unsigned tally_version(void)
{
    return TALLY_VERSION_HEX;
}

const char *tally_version_string(void)
{
    return TALLY_VERSION_STRING;
}

static const char *const backend_names[] = {
    [TALLY_BACKEND_AUTO] = "auto",
    [TALLY_BACKEND_CUDA] = "cuda",
    [TALLY_BACKEND_OPENCL] = "opencl",
    [TALLY_BACKEND_HOST] = "host",
};

const char *tally_backend_name(tally_backend backend)
{
    if ((unsigned)backend > TALLY_BACKEND_HOST) return NULL;
    return backend_names[backend];
}

tally_status tally_backend_from_name(const char *name, tally_backend *out)
{
    if (name == NULL || out == NULL)
        return tally__error(NULL, TALLY_INVALID_ARGUMENT, "tally_backend_from_name: NULL argument");
    for (unsigned b = TALLY_BACKEND_AUTO; b <= TALLY_BACKEND_HOST; b++) {
        if (strcasecmp(name, backend_names[b]) == 0) {
            *out = (tally_backend)b;
            return TALLY_OK;
        }
    }
    return tally__error(NULL, TALLY_INVALID_ARGUMENT,
                        "unknown backend '%s' (expected auto, cuda, opencl or host)", name);
}

int tally_backend_compiled(tally_backend backend)
{
    return tally__backend_table(backend) != NULL;
}

tally_status tally_devices(tally_backend backend, tally_device_info *devices, int capacity,
                           int *count)
{
    if (count == NULL || capacity < 0 || (capacity > 0 && devices == NULL))
        return tally__error(NULL, TALLY_INVALID_ARGUMENT,
                            "tally_devices: count is NULL, or capacity > 0 with devices NULL");
    *count = 0;
    if (backend == TALLY_BACKEND_AUTO || tally_backend_name(backend) == NULL)
        return tally__error(NULL, TALLY_INVALID_ARGUMENT,
                            "tally_devices: name one backend (cuda, opencl or host)");
    const tally__backend_ops *ops = tally__backend_table(backend);
    if (ops == NULL)
        return tally__error(NULL, TALLY_BACKEND_NOT_COMPILED,
                            "the %s backend was not compiled into this build of tally",
                            tally_backend_name(backend));
    return ops->devices(devices, capacity, count);
}

/* Reads TALLY_DEVICE when the caller asked for the default device. */
static tally_status resolve_device(int device, int *out)
{
    if (device != TALLY_DEVICE_DEFAULT) {
        if (device < 0)
            return tally__error(NULL, TALLY_INVALID_ARGUMENT,
                                "device index %d is negative (use TALLY_DEVICE_DEFAULT for the default)",
                                device);
        *out = device;
        return TALLY_OK;
    }
    const char *env = getenv("TALLY_DEVICE");
    if (env == NULL || env[0] == '\0') {
        *out = 0;
        return TALLY_OK;
    }
    char *end = NULL;
    long v = strtol(env, &end, 10);
    if (end == env || *end != '\0' || v < 0 || v > 1000000)
        return tally__error(NULL, TALLY_INVALID_ARGUMENT,
                            "TALLY_DEVICE='%s' is not a device index", env);
    *out = (int)v;
    return TALLY_OK;
}

static tally_status create_on(tally_backend backend, int device, tally_context **out)
{
    const tally__backend_ops *ops = tally__backend_table(backend);
    if (ops == NULL)
        return tally__error(NULL, TALLY_BACKEND_NOT_COMPILED,
                            "the %s backend was not compiled into this build of tally",
                            tally_backend_name(backend));
    return ops->context_create(device, out);
}

/* AUTO: CUDA, then an OpenCL GPU, then any OpenCL device, then the host.
 * Each failure's reason is kept so that a total failure can say why every
 * candidate was passed over. */
static tally_status create_auto(int device, int device_given, tally_context **out)
{
    char reasons[2048] = "";
    size_t used = 0;
    tally_status st;

    st = create_on(TALLY_BACKEND_CUDA, device, out);
    if (st == TALLY_OK) return st;
    used += (size_t)snprintf(reasons + used, sizeof reasons - used, "cuda: %s; ",
                             tally_last_error(NULL));

    const tally__backend_ops *cl = tally__backend_table(TALLY_BACKEND_OPENCL);
    if (cl != NULL) {
        int gpu = (!device_given && cl->first_gpu != NULL) ? cl->first_gpu() : -1;
        if (gpu >= 0) {
            st = cl->context_create(gpu, out);
            if (st == TALLY_OK) return st;
        }
        st = cl->context_create(device, out);
        if (st == TALLY_OK) return st;
    } else {
        tally__error(NULL, TALLY_BACKEND_NOT_COMPILED, "not compiled in");
    }
    if (used < sizeof reasons)
        used += (size_t)snprintf(reasons + used, sizeof reasons - used, "opencl: %s; ",
                                 tally_last_error(NULL));

    st = create_on(TALLY_BACKEND_HOST, device, out);
    if (st == TALLY_OK) return st;
    if (used < sizeof reasons)
        snprintf(reasons + used, sizeof reasons - used, "host: %s", tally_last_error(NULL));
    char copy[2048];
    snprintf(copy, sizeof copy, "%s", reasons);
    return tally__error(NULL, st, "no backend could be opened: %s", copy);
}

tally_status tally_context_create(tally_backend backend, int device, tally_context **out)
{
    if (out == NULL)
        return tally__error(NULL, TALLY_INVALID_ARGUMENT, "tally_context_create: out is NULL");
    *out = NULL;
    if (tally_backend_name(backend) == NULL)
        return tally__error(NULL, TALLY_INVALID_ARGUMENT,
                            "tally_context_create: unknown backend value %d", (int)backend);
    if (backend == TALLY_BACKEND_AUTO) {
        const char *env = getenv("TALLY_BACKEND");
        if (env != NULL && env[0] != '\0') {
            tally_backend chosen;
            if (tally_backend_from_name(env, &chosen) != TALLY_OK)
                return tally__error(NULL, TALLY_INVALID_ARGUMENT,
                                    "TALLY_BACKEND='%s' is not one of auto, cuda, opencl, host", env);
            backend = chosen;
        }
    }
    int index = 0;
    tally_status st = resolve_device(device, &index);
    if (st != TALLY_OK) return st;
    int device_given = device != TALLY_DEVICE_DEFAULT || getenv("TALLY_DEVICE") != NULL;
    if (backend == TALLY_BACKEND_AUTO) return create_auto(index, device_given, out);
    return create_on(backend, index, out);
}

tally_status tally_context_create_opencl(void *cl_context, void *cl_device_id,
                                         void *cl_command_queue, tally_context **out)
{
    if (out == NULL)
        return tally__error(NULL, TALLY_INVALID_ARGUMENT, "tally_context_create_opencl: out is NULL");
    *out = NULL;
    if (cl_context == NULL || cl_device_id == NULL || cl_command_queue == NULL)
        return tally__error(NULL, TALLY_INVALID_ARGUMENT,
                            "tally_context_create_opencl: cl_context, cl_device_id and "
                            "cl_command_queue are all required");
    const tally__backend_ops *ops = tally__backend_table(TALLY_BACKEND_OPENCL);
    if (ops == NULL || ops->context_wrap == NULL)
        return tally__error(NULL, TALLY_BACKEND_NOT_COMPILED,
                            "the opencl backend was not compiled into this build of tally");
    void *const handles[3] = {cl_context, cl_device_id, cl_command_queue};
    return ops->context_wrap(handles, out);
}

tally_status tally_context_create_cuda(int device, void *stream, tally_context **out)
{
    if (out == NULL)
        return tally__error(NULL, TALLY_INVALID_ARGUMENT, "tally_context_create_cuda: out is NULL");
    *out = NULL;
    if (device < 0)
        return tally__error(NULL, TALLY_INVALID_ARGUMENT,
                            "tally_context_create_cuda: device %d is negative", device);
    const tally__backend_ops *ops = tally__backend_table(TALLY_BACKEND_CUDA);
    if (ops == NULL || ops->context_wrap == NULL)
        return tally__error(NULL, TALLY_BACKEND_NOT_COMPILED,
                            "the cuda backend was not compiled into this build of tally");
    void *const handles[3] = {(void *)(intptr_t)device, stream, NULL};
    return ops->context_wrap(handles, out);
}

void tally_context_release(tally_context *ctx)
{
    if (ctx == NULL) return;
    char *error = ctx->error;
    ctx->ops->context_release(ctx);
    free(error);
}

tally_backend tally_context_backend(const tally_context *ctx)
{
    return ctx != NULL ? ctx->ops->kind : TALLY_BACKEND_AUTO;
}

const char *tally_context_device_name(const tally_context *ctx)
{
    return ctx != NULL ? ctx->device_name : "";
}

tally_status tally_sync(tally_context *ctx)
{
    if (ctx == NULL) return tally__error(NULL, TALLY_INVALID_ARGUMENT, "tally_sync: ctx is NULL");
    return ctx->ops->sync(ctx);
}
