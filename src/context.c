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

/* The table of a backend that can make contexts: compiled in, with every
 * required op entry and, when wrap is set, a context_wrap entry. */
static tally_status backend_for_context(tally_backend backend, int wrap, const tally__backend_ops **out)
{
    const tally__backend_ops *ops = tally__backend_table(backend);
    if (ops == NULL || (wrap && ops->context_wrap == NULL))
        return tally__error(NULL, TALLY_BACKEND_NOT_COMPILED,
                            "the %s backend was not compiled into this build of tally",
                            tally_backend_name(backend));
    const char *missing = tally__backend_missing_op(ops);
    if (missing != NULL)
        return tally__error(NULL, TALLY_BACKEND_ERROR, "the %s backend's ops table has no %s entry",
                            tally_backend_name(backend), missing);
    *out = ops;
    return TALLY_OK;
}

static tally_status create_on(tally_backend backend, int device, tally_context **out)
{
    const tally__backend_ops *ops = NULL;
    tally_status st = backend_for_context(backend, 0, &ops);
    return st != TALLY_OK ? st : ops->context_create(device, out);
}

/* AUTO's order, one row per attempt, tried until one opens. A row of
 * AUTO_ANY opens the device index asked for (0 by default). A row of
 * AUTO_GPU opens the first device that the backend's `devices` entry marks
 * as a GPU, and is passed over when the caller named a device (the index
 * then belongs to the AUTO_ANY rows) or the backend lists no GPU. So on a
 * machine whose first OpenCL device is a CPU, AUTO still prefers its GPU. */
typedef enum auto_want { AUTO_ANY, AUTO_GPU } auto_want;

static const struct auto_row {
    tally_backend backend;
    auto_want want;
} auto_order[] = {
    {TALLY_BACKEND_CUDA, AUTO_ANY},
    {TALLY_BACKEND_OPENCL, AUTO_GPU},
    {TALLY_BACKEND_OPENCL, AUTO_ANY},
    {TALLY_BACKEND_HOST, AUTO_ANY},
};

/* The index of ops's first GPU device, or -1 (none, or the backend cannot
 * list its devices). */
static int first_gpu(const tally__backend_ops *ops)
{
    int count = 0;
    if (ops->devices(NULL, 0, &count) != TALLY_OK || count <= 0) return -1;
    tally_device_info *devices = malloc((size_t)count * sizeof *devices);
    if (devices == NULL) return -1;
    int found = -1;
    if (ops->devices(devices, count, &count) == TALLY_OK)
        for (int i = 0; i < count && found < 0; i++)
            if (devices[i].is_gpu) found = devices[i].index;
    free(devices);
    return found;
}

/* Tries the rows of auto_order in turn. The reason each backend was passed
 * over (its last row's failure) is kept, so that a total failure says why
 * of every candidate. */
static tally_status create_auto(int device, int device_given, tally_context **out)
{
    enum { ROWS = sizeof auto_order / sizeof auto_order[0] };
    char reasons[2048] = "";
    size_t used = 0;
    tally_status st = TALLY_NO_DEVICE;
    for (int r = 0; r < ROWS; r++) {
        const struct auto_row *row = &auto_order[r];
        int index = device;
        if (row->want == AUTO_GPU) {
            const tally__backend_ops *ops = tally__backend_table(row->backend);
            index = (ops != NULL && !device_given) ? first_gpu(ops) : -1;
        }
        if (index >= 0) {
            st = create_on(row->backend, index, out);
            if (st == TALLY_OK) return st;
        }
        int last_of_backend = r + 1 == ROWS || auto_order[r + 1].backend != row->backend;
        if (last_of_backend && index >= 0 && used < sizeof reasons)
            used += (size_t)snprintf(reasons + used, sizeof reasons - used, "%s%s: %s",
                                     used > 0 ? "; " : "", tally_backend_name(row->backend),
                                     tally_last_error(NULL));
    }
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
    const tally__backend_ops *ops = NULL;
    tally_status st = backend_for_context(TALLY_BACKEND_OPENCL, 1, &ops);
    if (st != TALLY_OK) return st;
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
    const tally__backend_ops *ops = NULL;
    tally_status st = backend_for_context(TALLY_BACKEND_CUDA, 1, &ops);
    if (st != TALLY_OK) return st;
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
