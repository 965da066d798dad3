/*
 * backends/opencl/opencl_program.c - building tally's OpenCL program, once
 * per context, with the on-disk binary cache.
 *
 * Building the whole program from source takes from a fraction of a second
 * (NVIDIA) to several seconds (PoCL) per context, so the device binary is
 * kept in $XDG_CACHE_HOME/tally (else ~/.cache/tally) under a SHA-256 key of
 * everything that could change it: platform name and version, device name
 * and version, driver version, tally's version, the build options and the
 * program text. opencl_cache.c reads and writes the entries: only regular
 * files of sane size whose digest of key and payload matches reach the
 * driver; an entry the driver still refuses is deleted and the program is
 * built from source and stored again. TALLY_CACHE=0 turns the cache off.
 * Cache problems never fail a context: at worst the program is built again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opencl_backend.h"
#include "opencl_cache.h"

/* ---- The key ---- */

/* Each field is length-prefixed so that fields cannot run into each other. */
static void hash_field(tally__sha256 *h, const char *text, size_t n)
{
    uint64_t len = n;
    tally__sha256_update(h, &len, sizeof len);
    tally__sha256_update(h, text, n);
}

static void device_field(tally__sha256 *h, cl_device_id d, cl_device_info what)
{
    char text[512] = "";
    if (tally__cl.clGetDeviceInfo(d, what, sizeof text, text, NULL) != CL_SUCCESS) text[0] = '\0';
    text[sizeof text - 1] = '\0';
    hash_field(h, text, strlen(text));
}

static void platform_field(tally__sha256 *h, cl_platform_id p, cl_platform_info what)
{
    char text[512] = "";
    if (tally__cl.clGetPlatformInfo(p, what, sizeof text, text, NULL) != CL_SUCCESS) text[0] = '\0';
    text[sizeof text - 1] = '\0';
    hash_field(h, text, strlen(text));
}

static void key_of(const tally__cl_context *cc, const char *source, size_t source_size, const char *options,
                   unsigned char key[TALLY__SHA256_BYTES])
{
    tally__sha256 h;
    tally__sha256_init(&h);
    hash_field(&h, TALLY__CL_CACHE_MAGIC, strlen(TALLY__CL_CACHE_MAGIC));
    platform_field(&h, cc->platform, CL_PLATFORM_NAME);
    platform_field(&h, cc->platform, CL_PLATFORM_VERSION);
    device_field(&h, cc->device, CL_DEVICE_NAME);
    device_field(&h, cc->device, CL_DEVICE_VERSION);
    device_field(&h, cc->device, CL_DRIVER_VERSION);
    hash_field(&h, TALLY_VERSION_STRING, strlen(TALLY_VERSION_STRING));
    hash_field(&h, options, strlen(options));
    hash_field(&h, source, source_size);
    tally__sha256_final(&h, key);
}

/* The device binary of a built program for cc's device (NULL if the
 * implementation gives none). The caller frees it. */
static unsigned char *program_binary(const tally__cl_context *cc, cl_program program, size_t *size)
{
    cl_uint ndev = 0;
    if (tally__cl.clGetProgramInfo(program, CL_PROGRAM_NUM_DEVICES, sizeof ndev, &ndev, NULL) != CL_SUCCESS ||
        ndev == 0 || ndev > 1024)
        return NULL;
    cl_device_id *devices = calloc(ndev, sizeof *devices);
    size_t *sizes = calloc(ndev, sizeof *sizes);
    unsigned char **binaries = calloc(ndev, sizeof *binaries);
    unsigned char *result = NULL;
    if (devices == NULL || sizes == NULL || binaries == NULL) goto done;
    if (tally__cl.clGetProgramInfo(program, CL_PROGRAM_DEVICES, ndev * sizeof *devices, devices, NULL) != CL_SUCCESS ||
        tally__cl.clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, ndev * sizeof *sizes, sizes, NULL) != CL_SUCCESS)
        goto done;
    cl_uint mine = ndev;
    for (cl_uint i = 0; i < ndev; i++)
        if (devices[i] == cc->device) mine = i;
    if (mine == ndev || sizes[mine] == 0 || sizes[mine] > TALLY__CL_CACHE_MAX_PAYLOAD) goto done;
    /* Only this device's entry gets a destination; NULL entries are
     * skipped by the implementation. */
    binaries[mine] = malloc(sizes[mine]);
    if (binaries[mine] == NULL) goto done;
    if (tally__cl.clGetProgramInfo(program, CL_PROGRAM_BINARIES, ndev * sizeof *binaries, binaries, NULL) !=
        CL_SUCCESS) {
        free(binaries[mine]);
        goto done;
    }
    result = binaries[mine];
    *size = sizes[mine];
done:
    free(devices);
    free(sizes);
    free(binaries);
    return result;
}

/* ---- Building ---- */

/* Reports a failed clBuildProgram with the compiler's log on cc. */
static tally_status build_failed(tally__cl_context *cc, cl_program program, cl_int err)
{
    tally_context *ctx = &cc->gpu.base;
    tally__error(ctx, TALLY_BUILD_FAILED, "clBuildProgram failed: %s (%d) on '%s'; build log:\n",
                 tally__cl_error_name(err), (int)err, ctx->device_name);
    size_t n = 0;
    if (tally__cl.clGetProgramBuildInfo(program, cc->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) == CL_SUCCESS &&
        n > 0) {
        char *log = malloc(n + 1);
        if (log != NULL) {
            if (tally__cl.clGetProgramBuildInfo(program, cc->device, CL_PROGRAM_BUILD_LOG, n, log, NULL) ==
                CL_SUCCESS) {
                log[n] = '\0';
                tally__error_append(ctx, log);
            }
            free(log);
        }
    } else {
        tally__error_append(ctx, "(the implementation gave no build log)");
    }
    return TALLY_BUILD_FAILED;
}

/* The program from a cached binary, or NULL. */
static cl_program from_binary(tally__cl_context *cc, const unsigned char *data, size_t size, const char *options)
{
    cl_int err, binary_status = CL_SUCCESS;
    cl_program program =
        tally__cl.clCreateProgramWithBinary(cc->context, 1, &cc->device, &size, &data, &binary_status, &err);
    if (err != CL_SUCCESS || binary_status != CL_SUCCESS) {
        if (err == CL_SUCCESS) (void)tally__cl.clReleaseProgram(program);
        return NULL;
    }
    err = tally__cl.clBuildProgram(program, 1, &cc->device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        (void)tally__cl.clReleaseProgram(program);
        return NULL;
    }
    return program;
}

tally_status tally__cl_build_program(tally__cl_context *cc, const char *source, size_t source_size,
                                     const char *options, cl_program *out, int *from_cache)
{
    tally_context *ctx = &cc->gpu.base;
    unsigned char key[TALLY__SHA256_BYTES];
    key_of(cc, source, source_size, options, key);
    /* Static storage would not be thread-safe; the object is about 8 KiB. */
    tally__cl_cache *cache = malloc(sizeof *cache);
    int use_cache = cache != NULL && tally__cl_cache_open(cache, key);
    *from_cache = 0;
    if (use_cache) {
        size_t size = 0;
        unsigned char *data = tally__cl_cache_read(cache, &size);
        if (data != NULL) {
            cl_program program = from_binary(cc, data, size, options);
            free(data);
            if (program != NULL) {
                *out = program;
                *from_cache = 1;
                free(cache);
                return TALLY_OK;
            }
            /* The digest matched but the driver refused it: delete it, so
             * that no later process offers it to the driver again. */
            tally__cl_cache_discard(cache);
        }
    }

    cl_int err;
    cl_program program = tally__cl.clCreateProgramWithSource(cc->context, 1, &source, &source_size, &err);
    if (err != CL_SUCCESS) {
        free(cache);
        return tally__cl_error(ctx, err, "clCreateProgramWithSource");
    }
    err = tally__cl.clBuildProgram(program, 1, &cc->device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        free(cache);
        tally_status st = build_failed(cc, program, err);
        (void)tally__cl.clReleaseProgram(program);
        return st;
    }
    *out = program;
    if (use_cache) {
        size_t size = 0;
        unsigned char *binary = program_binary(cc, program, &size);
        if (binary != NULL) {
            tally__cl_cache_write(cache, binary, size);
            free(binary);
        }
    }
    free(cache);
    return TALLY_OK;
}
