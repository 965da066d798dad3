/*
 * backends/opencl/opencl_program.c - building tally's OpenCL program, once
 * per context, with the on-disk binary cache.
 *
 * Building the whole program from source takes from a fraction of a second
 * (NVIDIA) to several seconds (PoCL) per context, so the device binary is
 * kept in $XDG_CACHE_HOME/tally (else ~/.cache/tally) under a hash of
 * everything that could change it: platform name and version, device name
 * and version, driver version, tally's version, the build options and the
 * program text. A file is written to a temporary name and renamed, so a
 * reader never sees half of one; a file that is unreadable, truncated,
 * corrupt or rejected by the driver is ignored, the program is rebuilt from
 * source and the file overwritten. TALLY_CACHE=0 turns the cache off. Cache
 * problems never fail a context: at worst the program is built again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "opencl_backend.h"

#define CACHE_MAGIC "TALLYCL1"
#define CACHE_HEADER_BYTES 40u /* magic, key (2 x u64), payload size, payload checksum */
#define CACHE_MAX_BYTES ((size_t)1 << 30)

/* ---- Hashing ---- */

typedef struct cache_key {
    uint64_t a, b;
} cache_key;

/* Two independent 64-bit hashes (FNV-1a and a multiply-xorshift mix) make a
 * 128-bit key, so an accidental collision between two builds is not a
 * practical concern. */
static void hash_bytes(cache_key *h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ p[i]) * 0x100000001b3ull;
        h->b = (h->b ^ p[i]) * 0xff51afd7ed558ccdull;
        h->b ^= h->b >> 29;
    }
}

/* Each field is length-prefixed so that fields cannot run into each other. */
static void hash_field(cache_key *h, const char *text, size_t n)
{
    uint64_t len = n;
    hash_bytes(h, &len, sizeof len);
    hash_bytes(h, text, n);
}

static uint64_t checksum(const unsigned char *data, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ data[i]) * 0x100000001b3ull;
    return h;
}

static void device_field(cache_key *h, cl_device_id d, cl_device_info what)
{
    char text[512] = "";
    if (tally__cl.clGetDeviceInfo(d, what, sizeof text, text, NULL) != CL_SUCCESS) text[0] = '\0';
    text[sizeof text - 1] = '\0';
    hash_field(h, text, strlen(text));
}

static void platform_field(cache_key *h, cl_platform_id p, cl_platform_info what)
{
    char text[512] = "";
    if (tally__cl.clGetPlatformInfo(p, what, sizeof text, text, NULL) != CL_SUCCESS) text[0] = '\0';
    text[sizeof text - 1] = '\0';
    hash_field(h, text, strlen(text));
}

static cache_key key_of(const tally__cl_context *cc, const char *source, size_t source_size)
{
    cache_key h = {.a = 0xcbf29ce484222325ull, .b = 0x9e3779b97f4a7c15ull};
    platform_field(&h, cc->platform, CL_PLATFORM_NAME);
    platform_field(&h, cc->platform, CL_PLATFORM_VERSION);
    device_field(&h, cc->device, CL_DEVICE_NAME);
    device_field(&h, cc->device, CL_DEVICE_VERSION);
    device_field(&h, cc->device, CL_DRIVER_VERSION);
    hash_field(&h, TALLY_VERSION_STRING, strlen(TALLY_VERSION_STRING));
    hash_field(&h, TALLY__CL_BUILD_OPTIONS, strlen(TALLY__CL_BUILD_OPTIONS));
    hash_field(&h, source, source_size);
    return h;
}

/* ---- Files ---- */

static int cache_enabled(void)
{
    const char *e = getenv("TALLY_CACHE");
    return !(e != NULL && strcmp(e, "0") == 0);
}

/* The cache directory, created (mode 0700) if needed. 0 when there is no
 * usable location. */
static int cache_dir(char *dir, size_t capacity)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    /* The XDG spec ignores a relative XDG_CACHE_HOME. */
    if (xdg != NULL && xdg[0] == '/')
        n = snprintf(dir, capacity, "%s/tally", xdg);
    else if (home != NULL && home[0] == '/')
        n = snprintf(dir, capacity, "%s/.cache/tally", home);
    else
        return 0;
    if (n < 0 || (size_t)n >= capacity) return 0;
    for (char *p = dir + 1; *p != '\0'; p++) {
        if (*p != '/') continue;
        *p = '\0';
        int r = mkdir(dir, 0700);
        *p = '/';
        if (r != 0 && errno != EEXIST) return 0;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) return 0;
    return 1;
}

static void put_u64(unsigned char *p, uint64_t v)
{
    memcpy(p, &v, sizeof v);
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The binary stored for `key`, or NULL (missing, unreadable, of another key,
 * truncated or corrupt). The caller frees it. */
static unsigned char *read_binary(const char *path, cache_key key, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    unsigned char header[CACHE_HEADER_BYTES];
    unsigned char *data = NULL;
    if (fread(header, 1, sizeof header, f) != sizeof header) goto fail;
    if (memcmp(header, CACHE_MAGIC, 8) != 0 || get_u64(header + 8) != key.a || get_u64(header + 16) != key.b)
        goto fail;
    uint64_t n = get_u64(header + 24);
    if (n == 0 || n > CACHE_MAX_BYTES) goto fail;
    data = malloc((size_t)n + 1u);
    if (data == NULL) goto fail;
    if (fread(data, 1, (size_t)n, f) != (size_t)n) goto fail;
    if (fgetc(f) != EOF) goto fail; /* trailing bytes: not a file this code wrote */
    if (checksum(data, (size_t)n) != get_u64(header + 32)) goto fail;
    fclose(f);
    *size = (size_t)n;
    return data;
fail:
    free(data);
    fclose(f);
    return NULL;
}

/* Writes the binary under a temporary name in the same directory, then
 * renames it over `path`: rename is atomic, so concurrent readers see the
 * old file or the new one, never a part. Failures are ignored. */
static void write_binary(const char *dir, const char *path, cache_key key, const unsigned char *data, size_t n)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", dir) >= (int)sizeof tmp) return;
    int fd = mkstemp(tmp);
    if (fd < 0) return;
    FILE *f = fdopen(fd, "wb");
    if (f == NULL) {
        close(fd);
        unlink(tmp);
        return;
    }
    unsigned char header[CACHE_HEADER_BYTES];
    memcpy(header, CACHE_MAGIC, 8);
    put_u64(header + 8, key.a);
    put_u64(header + 16, key.b);
    put_u64(header + 24, n);
    put_u64(header + 32, checksum(data, n));
    int ok = fwrite(header, 1, sizeof header, f) == sizeof header && fwrite(data, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
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
    if (mine == ndev || sizes[mine] == 0 || sizes[mine] > CACHE_MAX_BYTES) goto done;
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
static cl_program from_binary(tally__cl_context *cc, const unsigned char *data, size_t size)
{
    cl_int err, binary_status = CL_SUCCESS;
    cl_program program =
        tally__cl.clCreateProgramWithBinary(cc->context, 1, &cc->device, &size, &data, &binary_status, &err);
    if (err != CL_SUCCESS || binary_status != CL_SUCCESS) {
        if (err == CL_SUCCESS) (void)tally__cl.clReleaseProgram(program);
        return NULL;
    }
    err = tally__cl.clBuildProgram(program, 1, &cc->device, TALLY__CL_BUILD_OPTIONS, NULL, NULL);
    if (err != CL_SUCCESS) {
        (void)tally__cl.clReleaseProgram(program);
        return NULL;
    }
    return program;
}

tally_status tally__cl_build_program(tally__cl_context *cc, const char *source, size_t source_size)
{
    tally_context *ctx = &cc->gpu.base;
    char dir[4096 - 64], path[4096];
    int use_cache = cache_enabled() && cache_dir(dir, sizeof dir);
    cache_key key = {.a = 0, .b = 0};
    cc->program_from_cache = 0;
    if (use_cache) {
        key = key_of(cc, source, source_size);
        snprintf(path, sizeof path, "%s/%016llx%016llx.bin", dir, (unsigned long long)key.a,
                 (unsigned long long)key.b);
        size_t size = 0;
        unsigned char *data = read_binary(path, key, &size);
        if (data != NULL) {
            cl_program program = from_binary(cc, data, size);
            free(data);
            if (program != NULL) {
                cc->program = program;
                cc->program_from_cache = 1;
                return TALLY_OK;
            }
        }
    }

    cl_int err;
    cl_program program = tally__cl.clCreateProgramWithSource(cc->context, 1, &source, &source_size, &err);
    if (err != CL_SUCCESS) return tally__cl_error(ctx, err, "clCreateProgramWithSource");
    err = tally__cl.clBuildProgram(program, 1, &cc->device, TALLY__CL_BUILD_OPTIONS, NULL, NULL);
    if (err != CL_SUCCESS) {
        tally_status st = build_failed(cc, program, err);
        (void)tally__cl.clReleaseProgram(program);
        return st;
    }
    cc->program = program;
    if (use_cache) {
        size_t size = 0;
        unsigned char *binary = program_binary(cc, program, &size);
        if (binary != NULL) {
            write_binary(dir, path, key, binary, size);
            free(binary);
        }
    }
    return TALLY_OK;
}
