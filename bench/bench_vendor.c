/*
 * bench/bench_vendor.c - the app side of tally-bench: libcuda and libOpenCL
 * opened with dlopen (no link-time dependency, so one binary runs anywhere
 * and skips a backend that is absent), the batch timer and the bandwidth
 * ceilings.
 *
 * The bench creates its own CUDA stream (on the device's primary context,
 * the one tally uses) and its own OpenCL context and profiling queue, and
 * hands them to tally, exactly as an application would; timing events are
 * then recorded on the same queue as tally's work.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "read_ceiling_ptx.h"

/* ------------------------------------------------------------------------
 * CUDA driver API, declared here so that no CUDA header is needed. Names are
 * the exported symbols (cuda.h maps cuMemAlloc to cuMemAlloc_v2 and so on).
 * ------------------------------------------------------------------------ */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;

#define BENCH_CU_ERROR_NO_DEVICE 100
#define BENCH_CU_ERROR_INSUFFICIENT_DRIVER 35
#define BENCH_CU_ERROR_STUB_LIBRARY 34
#define BENCH_CU_ERROR_NOT_FOUND 500
#define BENCH_CU_ATTR_MULTIPROCESSOR_COUNT 16
#define BENCH_CU_JIT_ERROR_LOG_BUFFER 5
#define BENCH_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

#define BENCH_CU_SYMBOLS(X)                                                                             \
    X(cuInit, (unsigned flags))                                                                         \
    X(cuGetErrorName, (CUresult error, const char **name))                                              \
    X(cuDeviceGetCount, (int *count))                                                                   \
    X(cuDeviceGet, (CUdevice * device, int ordinal))                                                    \
    X(cuDeviceGetName, (char *name, int len, CUdevice device))                                          \
    X(cuDeviceGetAttribute, (int *value, int attribute, CUdevice device))                               \
    X(cuDevicePrimaryCtxRetain, (CUcontext * ctx, CUdevice device))                                     \
    X(cuDevicePrimaryCtxRelease_v2, (CUdevice device))                                                  \
    X(cuCtxSetCurrent, (CUcontext ctx))                                                                 \
    X(cuStreamCreate, (CUstream * stream, unsigned flags))                                              \
    X(cuStreamDestroy_v2, (CUstream stream))                                                            \
    X(cuStreamSynchronize, (CUstream stream))                                                           \
    X(cuEventCreate, (CUevent * event, unsigned flags))                                                 \
    X(cuEventDestroy_v2, (CUevent event))                                                               \
    X(cuEventRecord, (CUevent event, CUstream stream))                                                  \
    X(cuEventSynchronize, (CUevent event))                                                              \
    X(cuMemAlloc_v2, (CUdeviceptr * ptr, size_t bytes))                                                 \
    X(cuMemFree_v2, (CUdeviceptr ptr))                                                                  \
    X(cuMemGetInfo_v2, (size_t * free_bytes, size_t *total_bytes))                                      \
    X(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))          \
    X(cuMemsetD32Async, (CUdeviceptr dst, unsigned value, size_t count, CUstream stream))               \
    X(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t bytes))                                      \
    X(cuModuleLoadDataEx, (CUmodule * module, const void *image, unsigned count, int *options,          \
                           void **values))                                                              \
    X(cuModuleGetFunction, (CUfunction * function, CUmodule module, const char *name))                  \
    X(cuModuleUnload, (CUmodule module))                                                                \
    X(cuLaunchKernel, (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,   \
                       unsigned bz, unsigned shared_bytes, CUstream stream, void **params, void **extra))

#define BENCH_CU_DECLARE(name, args) CUresult (*name) args;
typedef struct bench_cu_api {
    BENCH_CU_SYMBOLS(BENCH_CU_DECLARE)
    /* cuda.h of CUDA 12.8+ maps cuEventElapsedTime to cuEventElapsedTime_v2;
     * older drivers export only the first. Same signature either way. */
    CUresult (*event_elapsed)(float *ms, CUevent start, CUevent end);
} bench_cu_api;
#undef BENCH_CU_DECLARE

/* ------------------------------------------------------------------------
 * OpenCL 1.2 API, declared here for the same reason.
 * ------------------------------------------------------------------------ */
typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef cl_ulong cl_bitfield;
typedef intptr_t cl_context_properties;
typedef struct _cl_platform_id *cl_platform_id;
typedef struct _cl_device_id *cl_device_id;
typedef struct _cl_context *cl_context;
typedef struct _cl_command_queue *cl_command_queue;
typedef struct _cl_mem *cl_mem;
typedef struct _cl_program *cl_program;
typedef struct _cl_kernel *cl_kernel;
typedef struct _cl_event *cl_event;

#define BENCH_CL_SUCCESS 0
#define BENCH_CL_DEVICE_NOT_FOUND (-1)
#define BENCH_CL_PLATFORM_NOT_FOUND_KHR (-1001)
#define BENCH_CL_PLATFORM_NAME 0x0902
#define BENCH_CL_DEVICE_TYPE_GPU (1u << 2)
#define BENCH_CL_DEVICE_TYPE_ALL 0xFFFFFFFFu
#define BENCH_CL_DEVICE_TYPE 0x1000
#define BENCH_CL_DEVICE_MAX_COMPUTE_UNITS 0x1002
#define BENCH_CL_DEVICE_MAX_MEM_ALLOC_SIZE 0x1010
#define BENCH_CL_DEVICE_GLOBAL_MEM_SIZE 0x101F
#define BENCH_CL_DEVICE_NAME 0x102B
#define BENCH_CL_QUEUE_PROFILING_ENABLE (1u << 1)
#define BENCH_CL_MEM_READ_WRITE (1u << 0)
#define BENCH_CL_PROGRAM_BUILD_LOG 0x1183
#define BENCH_CL_PROFILING_COMMAND_END 0x1283

#define BENCH_CL_SYMBOLS(X)                                                                             \
    X(cl_int, clGetPlatformIDs, (cl_uint n, cl_platform_id * platforms, cl_uint * count))               \
    X(cl_int, clGetPlatformInfo, (cl_platform_id p, cl_uint param, size_t size, void *value, size_t *ret)) \
    X(cl_int, clGetDeviceIDs,                                                                           \
      (cl_platform_id p, cl_bitfield type, cl_uint n, cl_device_id * devices, cl_uint * count))         \
    X(cl_int, clGetDeviceInfo, (cl_device_id d, cl_uint param, size_t size, void *value, size_t *ret))  \
    X(cl_context, clCreateContext,                                                                      \
      (const cl_context_properties *props, cl_uint n, const cl_device_id *devices, void *notify,        \
       void *user, cl_int *err))                                                                        \
    X(cl_int, clReleaseContext, (cl_context c))                                                         \
    X(cl_command_queue, clCreateCommandQueue,                                                           \
      (cl_context c, cl_device_id d, cl_bitfield props, cl_int * err))                                  \
    X(cl_int, clReleaseCommandQueue, (cl_command_queue q))                                              \
    X(cl_mem, clCreateBuffer, (cl_context c, cl_bitfield flags, size_t size, void *host, cl_int *err))  \
    X(cl_int, clReleaseMemObject, (cl_mem m))                                                           \
    X(cl_int, clEnqueueCopyBuffer,                                                                      \
      (cl_command_queue q, cl_mem src, cl_mem dst, size_t src_off, size_t dst_off, size_t size,         \
       cl_uint nwait, const cl_event *wait, cl_event *ev))                                              \
    X(cl_int, clEnqueueFillBuffer,                                                                      \
      (cl_command_queue q, cl_mem m, const void *pattern, size_t pattern_size, size_t off, size_t size,  \
       cl_uint nwait, const cl_event *wait, cl_event *ev))                                              \
    X(cl_int, clEnqueueReadBuffer,                                                                      \
      (cl_command_queue q, cl_mem m, cl_uint blocking, size_t off, size_t size, void *dst,              \
       cl_uint nwait, const cl_event *wait, cl_event *ev))                                              \
    X(cl_int, clEnqueueMarkerWithWaitList,                                                              \
      (cl_command_queue q, cl_uint nwait, const cl_event *wait, cl_event *ev))                          \
    X(cl_int, clGetEventProfilingInfo, (cl_event e, cl_uint param, size_t size, void *value, size_t *ret)) \
    X(cl_int, clWaitForEvents, (cl_uint n, const cl_event *events))                                     \
    X(cl_int, clReleaseEvent, (cl_event e))                                                             \
    X(cl_int, clFinish, (cl_command_queue q))                                                           \
    X(cl_program, clCreateProgramWithSource,                                                            \
      (cl_context c, cl_uint n, const char **sources, const size_t *lengths, cl_int *err))              \
    X(cl_int, clBuildProgram,                                                                           \
      (cl_program p, cl_uint n, const cl_device_id *devices, const char *options, void *notify,         \
       void *user))                                                                                     \
    X(cl_int, clGetProgramBuildInfo,                                                                    \
      (cl_program p, cl_device_id d, cl_uint param, size_t size, void *value, size_t *ret))             \
    X(cl_int, clReleaseProgram, (cl_program p))                                                         \
    X(cl_kernel, clCreateKernel, (cl_program p, const char *name, cl_int *err))                         \
    X(cl_int, clReleaseKernel, (cl_kernel k))                                                           \
    X(cl_int, clSetKernelArg, (cl_kernel k, cl_uint index, size_t size, const void *value))             \
    X(cl_int, clEnqueueNDRangeKernel,                                                                   \
      (cl_command_queue q, cl_kernel k, cl_uint dims, const size_t *offset, const size_t *global,        \
       const size_t *local, cl_uint nwait, const cl_event *wait, cl_event *ev))

#define BENCH_CL_DECLARE(ret, name, args) ret (*name) args;
typedef struct bench_cl_api {
    BENCH_CL_SYMBOLS(BENCH_CL_DECLARE)
} bench_cl_api;
#undef BENCH_CL_DECLARE

struct bench_vendor {
    void *lib;
    /* CUDA */
    bench_cu_api cu;
    CUdevice cu_device;
    CUcontext cu_ctx; /* the primary context, retained */
    int cu_ctx_retained;
    CUstream stream;
    CUevent ev0, ev1;
    int sm_count;
    /* OpenCL */
    bench_cl_api cl;
    cl_device_id cl_device;
    cl_context cl_ctx;
    cl_command_queue queue;
    cl_uint compute_units;
    cl_ulong max_alloc;
    int cl_is_gpu;
    int markers_failed; /* markers gave no usable profiling: fall back to the wall clock */
    int absent;         /* the failure means "this backend is not here": skip, not an error */
};

/* ------------------------------------------------------------------------
 * Small helpers.
 * ------------------------------------------------------------------------ */
int bench_fail(bench *b, const char *fmt, ...)
{
    if (b->err[0] != '\0') return 1; /* keep the first, root-cause error */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, sizeof b->err, fmt, ap);
    va_end(ap);
    return 1;
}

double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static const char *cu_error_name(bench_vendor *v, CUresult r)
{
    const char *name = NULL;
    if (v->cu.cuGetErrorName == NULL || v->cu.cuGetErrorName(r, &name) != 0 || name == NULL)
        return "unknown CUDA error";
    return name;
}

static int cu_fail(bench *b, const char *call, CUresult r)
{
    return bench_fail(b, "%s failed: %s (%d)", call, cu_error_name(b->vendor, r), r);
}

/* Every driver call goes through CU: its text and the error's name end up in
 * b->err, and the enclosing function returns 1. */
#define CU(b, call)                                           \
    do {                                                      \
        CUresult cu_r_ = (b)->vendor->cu.call;                \
        if (cu_r_ != 0) return cu_fail((b), #call, cu_r_);    \
    } while (0)

static const char *cl_error_name(cl_int e)
{
    switch (e) {
    case 0: return "CL_SUCCESS";
    case -1: return "CL_DEVICE_NOT_FOUND";
    case -2: return "CL_DEVICE_NOT_AVAILABLE";
    case -3: return "CL_COMPILER_NOT_AVAILABLE";
    case -4: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case -5: return "CL_OUT_OF_RESOURCES";
    case -6: return "CL_OUT_OF_HOST_MEMORY";
    case -7: return "CL_PROFILING_INFO_NOT_AVAILABLE";
    case -11: return "CL_BUILD_PROGRAM_FAILURE";
    case -14: return "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST";
    case -30: return "CL_INVALID_VALUE";
    case -32: return "CL_INVALID_PLATFORM";
    case -33: return "CL_INVALID_DEVICE";
    case -34: return "CL_INVALID_CONTEXT";
    case -35: return "CL_INVALID_QUEUE_PROPERTIES";
    case -36: return "CL_INVALID_COMMAND_QUEUE";
    case -38: return "CL_INVALID_MEM_OBJECT";
    case -44: return "CL_INVALID_PROGRAM";
    case -45: return "CL_INVALID_PROGRAM_EXECUTABLE";
    case -46: return "CL_INVALID_KERNEL_NAME";
    case -48: return "CL_INVALID_KERNEL";
    case -49: return "CL_INVALID_ARG_INDEX";
    case -50: return "CL_INVALID_ARG_VALUE";
    case -51: return "CL_INVALID_ARG_SIZE";
    case -52: return "CL_INVALID_KERNEL_ARGS";
    case -54: return "CL_INVALID_WORK_GROUP_SIZE";
    case -58: return "CL_INVALID_EVENT";
    case -59: return "CL_INVALID_OPERATION";
    case -61: return "CL_INVALID_BUFFER_SIZE";
    case -63: return "CL_INVALID_GLOBAL_WORK_SIZE";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    }
    return "unknown OpenCL error";
}

static int cl_fail(bench *b, const char *call, cl_int e)
{
    return bench_fail(b, "%s failed: %s (%d)", call, cl_error_name(e), (int)e);
}

#define CL(b, call)                                           \
    do {                                                      \
        cl_int cl_e_ = (b)->vendor->cl.call;                  \
        if (cl_e_ != BENCH_CL_SUCCESS) return cl_fail((b), #call, cl_e_); \
    } while (0)

static void *open_first(const char *const *names)
{
    for (; *names != NULL; names++) {
        void *lib = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
        if (lib != NULL) return lib;
    }
    return NULL;
}

static int absent_status(tally_status st)
{
    return st == TALLY_BACKEND_NOT_COMPILED || st == TALLY_LIBRARY_MISSING || st == TALLY_NO_DEVICE;
}

/* ------------------------------------------------------------------------
 * CUDA: load, pick the device, retain its primary context (the one tally
 * uses), create the app's stream and timing events.
 * ------------------------------------------------------------------------ */
static int cu_load(bench *b, bench_vendor *v)
{
    static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
    v->lib = open_first(names);
    if (v->lib == NULL) {
        v->absent = 1;
        return bench_fail(b, "libcuda could not be loaded: %s", dlerror());
    }
#define BENCH_CU_RESOLVE(name, args)                                        \
    *(void **)(&v->cu.name) = dlsym(v->lib, #name);                        \
    if (v->cu.name == NULL) return bench_fail(b, "libcuda lacks %s", #name);
    BENCH_CU_SYMBOLS(BENCH_CU_RESOLVE)
#undef BENCH_CU_RESOLVE
    *(void **)(&v->cu.event_elapsed) = dlsym(v->lib, "cuEventElapsedTime_v2");
    if (v->cu.event_elapsed == NULL) *(void **)(&v->cu.event_elapsed) = dlsym(v->lib, "cuEventElapsedTime");
    if (v->cu.event_elapsed == NULL)
        return bench_fail(b, "libcuda lacks both cuEventElapsedTime_v2 and cuEventElapsedTime");
    return 0;
}

/* Makes the primary context current on this thread. Called before every
 * group of the bench's own driver calls, since tally may change the current
 * context. */
static int cu_bind(bench *b)
{
    CU(b, cuCtxSetCurrent(b->vendor->cu_ctx));
    return 0;
}

static int cu_init_count(bench *b, bench_vendor *v, int *count)
{
    CUresult r = v->cu.cuInit(0);
    if (r != 0) {
        v->absent = r == BENCH_CU_ERROR_NO_DEVICE || r == BENCH_CU_ERROR_INSUFFICIENT_DRIVER ||
                    r == BENCH_CU_ERROR_STUB_LIBRARY;
        return cu_fail(b, "cuInit(0)", r);
    }
    CU(b, cuDeviceGetCount(count));
    if (*count == 0) {
        v->absent = 1;
        return bench_fail(b, "CUDA reports no device");
    }
    return 0;
}

static int cu_open(bench *b, bench_vendor *v)
{
    int count = 0;
    if (cu_load(b, v) || cu_init_count(b, v, &count)) return 1;
    int index = b->device < 0 ? 0 : b->device;
    if (index >= count) return bench_fail(b, "--device %d, but CUDA has %d device(s)", index, count);
    b->device = index;
    CU(b, cuDeviceGet(&v->cu_device, index));
    CU(b, cuDeviceGetAttribute(&v->sm_count, BENCH_CU_ATTR_MULTIPROCESSOR_COUNT, v->cu_device));
    CU(b, cuDevicePrimaryCtxRetain(&v->cu_ctx, v->cu_device));
    v->cu_ctx_retained = 1;
    CU(b, cuCtxSetCurrent(v->cu_ctx));
    /* A blocking stream (flags 0): ordered with the legacy default stream
     * too, so nothing tally might put there can overlap a timed batch. */
    CU(b, cuStreamCreate(&v->stream, 0));
    CU(b, cuEventCreate(&v->ev0, 0));
    CU(b, cuEventCreate(&v->ev1, 0));
    tally_status st = tally_context_create_cuda(index, (void *)v->stream, &b->ctx);
    if (st != TALLY_OK) {
        v->absent = absent_status(st);
        return bench_fail(b, "tally_context_create_cuda(%d, stream): %s: %s", index, tally_status_name(st),
                          tally_last_error(NULL));
    }
    if (cu_bind(b)) return 1;
    b->timer_name = "cuda_event";
    snprintf(b->device_name, sizeof b->device_name, "%s (CUDA device %d, %d SMs)",
             tally_context_device_name(b->ctx), index, v->sm_count);
    return 0;
}

static void cu_close(bench_vendor *v)
{
    if (v->cu_ctx_retained) v->cu.cuCtxSetCurrent(v->cu_ctx);
    if (v->ev0 != NULL) v->cu.cuEventDestroy_v2(v->ev0);
    if (v->ev1 != NULL) v->cu.cuEventDestroy_v2(v->ev1);
    if (v->stream != NULL) v->cu.cuStreamDestroy_v2(v->stream);
    if (v->cu_ctx_retained) v->cu.cuDevicePrimaryCtxRelease_v2(v->cu_device);
}

/* ------------------------------------------------------------------------
 * OpenCL: load, list devices over all platforms, build the app's context and
 * in-order profiling queue.
 * ------------------------------------------------------------------------ */
#define BENCH_CL_MAX_DEVICES 64

typedef struct cl_entry {
    cl_platform_id platform;
    cl_device_id device;
} cl_entry;

static int cl_load(bench *b, bench_vendor *v)
{
    static const char *const names[] = {"libOpenCL.so.1", "libOpenCL.so", NULL};
    v->lib = open_first(names);
    if (v->lib == NULL) {
        v->absent = 1;
        return bench_fail(b, "libOpenCL could not be loaded: %s", dlerror());
    }
#define BENCH_CL_RESOLVE(ret, name, args)                                   \
    *(void **)(&v->cl.name) = dlsym(v->lib, #name);                        \
    if (v->cl.name == NULL) return bench_fail(b, "libOpenCL lacks %s", #name);
    BENCH_CL_SYMBOLS(BENCH_CL_RESOLVE)
#undef BENCH_CL_RESOLVE
    return 0;
}

/* Every device of every platform, in the ICD loader's order: the list that
 * --device indexes. */
static int cl_enumerate(bench *b, bench_vendor *v, cl_entry *out, int *count)
{
    cl_platform_id platforms[16];
    cl_uint np = 0;
    cl_int e = v->cl.clGetPlatformIDs(16, platforms, &np);
    if (e == BENCH_CL_PLATFORM_NOT_FOUND_KHR || (e == BENCH_CL_SUCCESS && np == 0)) {
        v->absent = 1;
        return bench_fail(b, "OpenCL has no platform");
    }
    if (e != BENCH_CL_SUCCESS) return cl_fail(b, "clGetPlatformIDs", e);
    if (np > 16) np = 16;
    *count = 0;
    for (cl_uint p = 0; p < np; p++) {
        cl_device_id devices[BENCH_CL_MAX_DEVICES];
        cl_uint nd = 0;
        e = v->cl.clGetDeviceIDs(platforms[p], BENCH_CL_DEVICE_TYPE_ALL, BENCH_CL_MAX_DEVICES, devices, &nd);
        if (e == BENCH_CL_DEVICE_NOT_FOUND) continue;
        if (e != BENCH_CL_SUCCESS) return cl_fail(b, "clGetDeviceIDs", e);
        for (cl_uint d = 0; d < nd && d < BENCH_CL_MAX_DEVICES && *count < BENCH_CL_MAX_DEVICES; d++)
            out[(*count)++] = (cl_entry){.platform = platforms[p], .device = devices[d]};
    }
    if (*count == 0) {
        v->absent = 1;
        return bench_fail(b, "OpenCL platforms have no device");
    }
    return 0;
}

static void cl_describe(bench_vendor *v, cl_entry en, char *name, size_t name_size, char *platform,
                        size_t platform_size, int *is_gpu)
{
    cl_bitfield type = 0;
    name[0] = platform[0] = '\0';
    v->cl.clGetDeviceInfo(en.device, BENCH_CL_DEVICE_NAME, name_size, name, NULL);
    v->cl.clGetPlatformInfo(en.platform, BENCH_CL_PLATFORM_NAME, platform_size, platform, NULL);
    v->cl.clGetDeviceInfo(en.device, BENCH_CL_DEVICE_TYPE, sizeof type, &type, NULL);
    name[name_size - 1] = platform[platform_size - 1] = '\0';
    *is_gpu = (type & BENCH_CL_DEVICE_TYPE_GPU) != 0;
}

static int cl_open(bench *b, bench_vendor *v)
{
    cl_entry entries[BENCH_CL_MAX_DEVICES];
    int count = 0;
    if (cl_load(b, v) || cl_enumerate(b, v, entries, &count)) return 1;
    char name[128], platform[128];
    int index = b->device, is_gpu = 0;
    if (index < 0) {
        /* Default: the first GPU, else the first device. */
        index = 0;
        for (int i = count - 1; i >= 0; i--) {
            cl_describe(v, entries[i], name, sizeof name, platform, sizeof platform, &is_gpu);
            if (is_gpu) index = i;
        }
    }
    if (index >= count) return bench_fail(b, "--device %d, but OpenCL has %d device(s)", index, count);
    b->device = index;
    cl_entry en = entries[index];
    cl_describe(v, en, name, sizeof name, platform, sizeof platform, &v->cl_is_gpu);
    v->cl_device = en.device;
    CL(b, clGetDeviceInfo(en.device, BENCH_CL_DEVICE_MAX_COMPUTE_UNITS, sizeof v->compute_units,
                          &v->compute_units, NULL));
    CL(b, clGetDeviceInfo(en.device, BENCH_CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof v->max_alloc, &v->max_alloc,
                          NULL));
    cl_context_properties props[] = {0x1084 /* CL_CONTEXT_PLATFORM */, (cl_context_properties)en.platform, 0};
    cl_int e = BENCH_CL_SUCCESS;
    v->cl_ctx = v->cl.clCreateContext(props, 1, &en.device, NULL, NULL, &e);
    if (v->cl_ctx == NULL || e != BENCH_CL_SUCCESS) return cl_fail(b, "clCreateContext", e);
    v->queue = v->cl.clCreateCommandQueue(v->cl_ctx, en.device, BENCH_CL_QUEUE_PROFILING_ENABLE, &e);
    if (v->queue == NULL || e != BENCH_CL_SUCCESS) return cl_fail(b, "clCreateCommandQueue(PROFILING)", e);
    tally_status st = tally_context_create_opencl((void *)v->cl_ctx, (void *)en.device, (void *)v->queue, &b->ctx);
    if (st != TALLY_OK) {
        v->absent = absent_status(st);
        return bench_fail(b, "tally_context_create_opencl: %s: %s", tally_status_name(st), tally_last_error(NULL));
    }
    b->timer_name = "cl_marker";
    snprintf(b->device_name, sizeof b->device_name, "%s (OpenCL device %d, platform %s, %u CUs)",
             tally_context_device_name(b->ctx), index, platform, (unsigned)v->compute_units);
    return 0;
}

static void cl_close(bench_vendor *v)
{
    if (v->queue != NULL) v->cl.clReleaseCommandQueue(v->queue);
    if (v->cl_ctx != NULL) v->cl.clReleaseContext(v->cl_ctx);
}

/* ------------------------------------------------------------------------
 * Open / close / list.
 * ------------------------------------------------------------------------ */
int bench_open(bench *b)
{
    bench_vendor *v = calloc(1, sizeof *v);
    if (v == NULL) {
        bench_fail(b, "out of host memory");
        return 2;
    }
    b->vendor = v;
    b->err[0] = '\0';
    int failed = 0;
    switch (b->backend) {
    case TALLY_BACKEND_CUDA: failed = cu_open(b, v); break;
    case TALLY_BACKEND_OPENCL: failed = cl_open(b, v); break;
    case TALLY_BACKEND_HOST: {
        tally_status st = tally_context_create(TALLY_BACKEND_HOST, 0, &b->ctx);
        if (st != TALLY_OK) {
            failed = bench_fail(b, "tally_context_create(host): %s: %s", tally_status_name(st),
                                tally_last_error(NULL));
            break;
        }
        b->timer_name = "wall";
        snprintf(b->device_name, sizeof b->device_name, "%s (host)", tally_context_device_name(b->ctx));
        break;
    }
    default: failed = bench_fail(b, "unsupported backend %d", (int)b->backend); break;
    }
    if (!failed) return 0;
    return v->absent ? 1 : 2;
}

void bench_close(bench *b)
{
    bench_vendor *v = b->vendor;
    tally_context_release(b->ctx);
    b->ctx = NULL;
    if (v == NULL) return;
    if (b->backend == TALLY_BACKEND_CUDA && v->lib != NULL && v->cu.cuCtxSetCurrent != NULL) cu_close(v);
    if (b->backend == TALLY_BACKEND_OPENCL && v->lib != NULL && v->cl.clReleaseContext != NULL) cl_close(v);
    /* libcuda / libOpenCL stay loaded: tally holds its own handle, and some
     * vendor libraries do not survive being unloaded and reloaded. */
    free(v);
    b->vendor = NULL;
}

void bench_list_devices(void)
{
    bench b = {.backend = TALLY_BACKEND_CUDA};
    bench_vendor v = {0};
    b.vendor = &v;
    int count = 0;
    printf("cuda:\n");
    if (cu_load(&b, &v) || cu_init_count(&b, &v, &count)) {
        printf("  (none: %s)\n", b.err);
    } else {
        for (int i = 0; i < count; i++) {
            CUdevice d;
            char name[256] = "?";
            if (v.cu.cuDeviceGet(&d, i) == 0) v.cu.cuDeviceGetName(name, (int)sizeof name, d);
            printf("  --device %d: %s\n", i, name);
        }
    }
    memset(&v, 0, sizeof v);
    b.err[0] = '\0';
    printf("opencl:\n");
    cl_entry entries[BENCH_CL_MAX_DEVICES];
    if (cl_load(&b, &v) || cl_enumerate(&b, &v, entries, &count)) {
        printf("  (none: %s)\n", b.err);
    } else {
        for (int i = 0; i < count; i++) {
            char name[128], platform[128];
            int is_gpu;
            cl_describe(&v, entries[i], name, sizeof name, platform, sizeof platform, &is_gpu);
            printf("  --device %d: %s [%s]%s\n", i, name, platform, is_gpu ? " (GPU)" : "");
        }
    }
    printf("host:\n  --device 0: the host CPU\n");
}

/* ------------------------------------------------------------------------
 * Timing.
 * ------------------------------------------------------------------------ */
static int run_calls(bench *b, bench_call_fn fn, void *arg, int64_t first, int calls)
{
    for (int i = 0; i < calls; i++)
        if (fn(b, arg, first + i)) return 1;
    return 0;
}

static int cu_time_batch(bench *b, bench_call_fn fn, void *arg, int64_t first, int calls, double *dev_ms,
                         double *wall_ms)
{
    bench_vendor *v = b->vendor;
    if (cu_bind(b)) return 1;
    CU(b, cuStreamSynchronize(v->stream));
    double w0 = bench_now_s();
    CU(b, cuEventRecord(v->ev0, v->stream));
    if (run_calls(b, fn, arg, first, calls)) return 1;
    if (cu_bind(b)) return 1;
    CU(b, cuEventRecord(v->ev1, v->stream));
    CU(b, cuEventSynchronize(v->ev1));
    *wall_ms = 1e3 * (bench_now_s() - w0);
    float ms = 0.0f;
    CU(b, event_elapsed(&ms, v->ev0, v->ev1));
    *dev_ms = ms;
    return 0;
}

static int cl_marker_ns(bench *b, cl_event ev, cl_ulong *ns)
{
    cl_int e = b->vendor->cl.clGetEventProfilingInfo(ev, BENCH_CL_PROFILING_COMMAND_END, sizeof *ns, ns, NULL);
    return e != BENCH_CL_SUCCESS;
}

static int cl_time_batch(bench *b, bench_call_fn fn, void *arg, int64_t first, int calls, double *dev_ms,
                         double *wall_ms)
{
    bench_vendor *v = b->vendor;
    cl_event e0 = NULL, e1 = NULL;
    CL(b, clFinish(v->queue));
    double w0 = bench_now_s();
    CL(b, clEnqueueMarkerWithWaitList(v->queue, 0, NULL, &e0));
    if (run_calls(b, fn, arg, first, calls)) {
        v->cl.clReleaseEvent(e0);
        return 1;
    }
    cl_int e = v->cl.clEnqueueMarkerWithWaitList(v->queue, 0, NULL, &e1);
    if (e != BENCH_CL_SUCCESS) {
        v->cl.clReleaseEvent(e0);
        return cl_fail(b, "clEnqueueMarkerWithWaitList", e);
    }
    e = v->cl.clWaitForEvents(1, &e1);
    cl_int e_finish = v->cl.clFinish(v->queue);
    *wall_ms = 1e3 * (bench_now_s() - w0);
    cl_ulong t0 = 0, t1 = 0;
    int bad = cl_marker_ns(b, e0, &t0) || cl_marker_ns(b, e1, &t1) || t1 < t0;
    v->cl.clReleaseEvent(e0);
    v->cl.clReleaseEvent(e1);
    if (e != BENCH_CL_SUCCESS) return cl_fail(b, "clWaitForEvents(end marker)", e);
    if (e_finish != BENCH_CL_SUCCESS) return cl_fail(b, "clFinish", e_finish);
    double ms = bad ? -1.0 : 1e-6 * (double)(t1 - t0);
    /* Markers carry no work of their own, and some drivers stamp them when
     * they are submitted rather than when the device reaches them. Such a
     * stamp could post an impossibly fast time; the wall clock (which cannot
     * be beaten) replaces any marker interval that strays from it. */
    if (bad || ms > *wall_ms + 0.05 || ms < 0.5 * *wall_ms - 0.2) {
        v->markers_failed++;
        ms = *wall_ms;
    }
    *dev_ms = ms;
    return 0;
}

static int host_time_batch(bench *b, bench_call_fn fn, void *arg, int64_t first, int calls, double *dev_ms,
                           double *wall_ms)
{
    tally_status st = tally_sync(b->ctx);
    if (st != TALLY_OK) return bench_fail(b, "tally_sync: %s", tally_last_error(b->ctx));
    double w0 = bench_now_s();
    if (run_calls(b, fn, arg, first, calls)) return 1;
    st = tally_sync(b->ctx);
    if (st != TALLY_OK) return bench_fail(b, "tally_sync: %s", tally_last_error(b->ctx));
    *wall_ms = *dev_ms = 1e3 * (bench_now_s() - w0);
    return 0;
}

int bench_time_batch(bench *b, bench_call_fn fn, void *arg, int64_t first, int calls, double *dev_ms,
                     double *wall_ms)
{
    switch (b->backend) {
    case TALLY_BACKEND_CUDA: return cu_time_batch(b, fn, arg, first, calls, dev_ms, wall_ms);
    case TALLY_BACKEND_OPENCL: return cl_time_batch(b, fn, arg, first, calls, dev_ms, wall_ms);
    default: return host_time_batch(b, fn, arg, first, calls, dev_ms, wall_ms);
    }
}

#define BENCH_MAX_CALLS 100000
#define BENCH_SINGLE_CALLS 50

int bench_measure(bench *b, bench_call_fn fn, void *arg, int latency_bound, bench_timing *t)
{
    int reps = b->reps < 1 ? 1 : b->reps;
    int64_t idx = 0;
    double dev, wall;
    b->vendor->markers_failed = 0;
    /* Warm-up: module loads, program builds and first-touch faults stay out
     * of the numbers. The third call's time sizes the batches. */
    if (run_calls(b, fn, arg, idx, 2)) return 1;
    idx += 2;
    if (bench_time_batch(b, fn, arg, idx, 1, &dev, &wall)) return 1;
    idx += 1;
    int calls = b->calls;
    if (calls <= 0 && latency_bound) calls = b->small_calls;
    if (calls <= 0) {
        double per = dev > 1e-4 ? dev : 1e-4;
        double want = ceil(b->batch_ms / per);
        calls = want < 1.0 ? 1 : want > BENCH_MAX_CALLS ? BENCH_MAX_CALLS : (int)want;
    }
    /* One untimed batch, so clocks and queues are in their steady state. */
    if (bench_time_batch(b, fn, arg, idx, calls, &dev, &wall)) return 1;
    idx += calls;
    double *devs = malloc(sizeof(double) * (size_t)(2 * reps + BENCH_SINGLE_CALLS));
    if (devs == NULL) return bench_fail(b, "out of host memory");
    double *walls = devs + reps, *singles = devs + 2 * reps;
    int rc = 0;
    for (int r = 0; r < reps && rc == 0; r++) {
        rc = bench_time_batch(b, fn, arg, idx, calls, &devs[r], &walls[r]);
        idx += calls;
        devs[r] /= calls;
        walls[r] /= calls;
    }
    if (rc == 0) {
        t->batches = reps;
        t->calls = calls;
        t->ms_min = t->ms_max = devs[0];
        for (int r = 1; r < reps; r++) {
            if (devs[r] < t->ms_min) t->ms_min = devs[r];
            if (devs[r] > t->ms_max) t->ms_max = devs[r];
        }
        t->ms_median = median(devs, reps);
        t->wall_us_median = 1e3 * median(walls, reps);
        t->single_us = NAN;
    }
    if (rc == 0 && latency_bound) {
        /* Isolated calls on an idle queue: the latency of one call. */
        for (int r = 0; r < BENCH_SINGLE_CALLS && rc == 0; r++) {
            rc = bench_time_batch(b, fn, arg, idx++, 1, &singles[r], &wall);
            singles[r] *= 1e3;
        }
        if (rc == 0) t->single_us = median(singles, BENCH_SINGLE_CALLS);
    }
    free(devs);
    t->timer = b->vendor->markers_failed ? "wall (markers unusable)" : b->timer_name;
    return rc;
}

/* ------------------------------------------------------------------------
 * Ceilings: the rates every result is compared with, measured in the same
 * run on the same device through the same timer.
 * ------------------------------------------------------------------------ */
#define BENCH_CEIL_BYTES (4.0 * 1024 * 1024 * 1024) /* 4 GiB, scaled by --scale */
#define BENCH_ONE_F32 0x3f800000u                   /* the bits of 1.0f */
#define BENCH_POISON_F32 0x7fc00000u                /* a quiet NaN */
#define BENCH_READ_BLOCK 256u

typedef struct ceil_state {
    size_t bytes;
    /* CUDA */
    CUdeviceptr a, b, partial;
    CUmodule module;
    CUfunction read_fn;
    CUdeviceptr read_src;
    /* OpenCL */
    cl_mem cl_a, cl_b, cl_partial;
    cl_program program;
    cl_kernel kernel;
    /* host */
    unsigned char *h_a, *h_b;
    volatile uint64_t sink;
    /* both devices */
    unsigned long long n4;
    size_t threads;
} ceil_state;

static size_t ceil_bytes(bench *b, double limit)
{
    double want = BENCH_CEIL_BYTES * b->scale;
    if (limit > 0 && want > limit) want = limit;
    size_t bytes = (size_t)want & ~(size_t)0xFFFF; /* whole 64 KiB units */
    return bytes < 65536 ? 65536 : bytes;
}

static void report_ceiling(bench *b, bench_ceiling_report report, const char *name, const char *what,
                           double bytes, const bench_timing *t, double *slot, double value, int ok,
                           const char *check)
{
    double gbps = bytes / (t->ms_median * 1e-3) / 1e9;
    if (ok) *slot = gbps;
    report(b, name, what, bytes, t, value, ok, check);
}

/* Sums the per-thread partials of the read kernel in double: with every
 * input 1.0f each partial is a whole number well under 2^24, so the total
 * is exact and must equal the element count. */
static int check_read_total(const float *partials, size_t threads, double elements, double *total, char *msg,
                            size_t msg_size)
{
    double s = 0.0;
    for (size_t i = 0; i < threads; i++) s += partials[i];
    *total = s;
    int ok = s == elements;
    snprintf(msg, msg_size, "%s: sum of %.0f ones read back as %.0f", ok ? "ok" : "WRONG", elements, s);
    return ok;
}

/* Checks that the first and last 64 KiB of a device copy hold 1.0f. */
static int check_ones(const uint32_t *head, const uint32_t *tail, size_t words, const char *what, char *msg,
                      size_t msg_size)
{
    for (size_t i = 0; i < words; i++)
        if (head[i] != BENCH_ONE_F32 || tail[i] != BENCH_ONE_F32) {
            snprintf(msg, msg_size, "WRONG: %s left 0x%08x at word %zu", what,
                     head[i] != BENCH_ONE_F32 ? head[i] : tail[i], i);
            return 0;
        }
    snprintf(msg, msg_size, "ok: %s wrote 1.0f (first and last 64 KiB checked)", what);
    return 1;
}

/* ---- CUDA ---- */
static int cu_call_memset(bench *b, void *arg, int64_t i)
{
    ceil_state *c = arg;
    (void)i;
    CU(b, cuMemsetD32Async(c->a, BENCH_ONE_F32, c->bytes / 4, b->vendor->stream));
    return 0;
}

static int cu_call_copy(bench *b, void *arg, int64_t i)
{
    ceil_state *c = arg;
    (void)i;
    CU(b, cuMemcpyDtoDAsync_v2(c->b, c->a, c->bytes, b->vendor->stream));
    return 0;
}

static int cu_call_read(bench *b, void *arg, int64_t i)
{
    ceil_state *c = arg;
    (void)i;
    void *params[] = {&c->read_src, &c->n4, &c->partial};
    CU(b, cuLaunchKernel(c->read_fn, (unsigned)(c->threads / BENCH_READ_BLOCK), 1, 1, BENCH_READ_BLOCK, 1, 1, 0,
                         b->vendor->stream, params, NULL));
    return 0;
}

static int cu_read_total(bench *b, ceil_state *c, CUdeviceptr src, double *total, char *msg, size_t msg_size,
                         int *ok)
{
    c->read_src = src;
    if (cu_bind(b) || cu_call_read(b, c, 0)) return 1;
    CU(b, cuStreamSynchronize(b->vendor->stream));
    float *partials = malloc(c->threads * sizeof *partials);
    if (partials == NULL) return bench_fail(b, "out of host memory");
    CUresult r = b->vendor->cu.cuMemcpyDtoH_v2(partials, c->partial, c->threads * sizeof *partials);
    if (r != 0) {
        free(partials);
        return cu_fail(b, "cuMemcpyDtoH_v2(partials)", r);
    }
    *ok = check_read_total(partials, c->threads, (double)(c->bytes / 4), total, msg, msg_size);
    free(partials);
    return 0;
}

static int cu_check_ones(bench *b, CUdeviceptr p, size_t bytes, const char *what, char *msg, size_t msg_size,
                         int *ok)
{
    enum { WORDS = 65536 / 4 };
    static uint32_t head[WORDS], tail[WORDS];
    if (cu_bind(b)) return 1;
    CU(b, cuStreamSynchronize(b->vendor->stream));
    CU(b, cuMemcpyDtoH_v2(head, p, sizeof head));
    CU(b, cuMemcpyDtoH_v2(tail, p + bytes - sizeof tail, sizeof tail));
    *ok = check_ones(head, tail, WORDS, what, msg, msg_size);
    return 0;
}

static int cu_ceilings(bench *b, bench_ceiling_report report, ceil_state *c)
{
    bench_vendor *v = b->vendor;
    bench_timing t;
    char msg[256];
    int ok = 0, failures = 0;
    double total = 0.0;
    size_t free_bytes = 0, total_bytes = 0;
    if (cu_bind(b)) return 1;
    CU(b, cuMemGetInfo_v2(&free_bytes, &total_bytes));
    /* Two buffers plus headroom for tally's own allocations. */
    double room = ((double)free_bytes - 512.0 * 1024 * 1024) / 2.0;
    c->bytes = ceil_bytes(b, room);
    c->n4 = c->bytes / 16;
    c->threads = (size_t)(v->sm_count > 0 ? v->sm_count : 1) * 2048u;
    CU(b, cuMemAlloc_v2(&c->a, c->bytes));
    CU(b, cuMemAlloc_v2(&c->b, c->bytes));
    CU(b, cuMemAlloc_v2(&c->partial, c->threads * sizeof(float)));
    CU(b, cuMemsetD32Async(c->a, BENCH_POISON_F32, c->bytes / 4, v->stream));
    CU(b, cuMemsetD32Async(c->b, BENCH_POISON_F32, c->bytes / 4, v->stream));

    /* Write: a memset of the whole buffer (it leaves 1.0f everywhere, which
     * the read kernel below then checks). */
    if (bench_measure(b, cu_call_memset, c, 0, &t) || cu_check_ones(b, c->a, c->bytes, "memset", msg, sizeof msg, &ok))
        return 1;
    report_ceiling(b, report, "ceil_write", "cuMemsetD32Async, bytes written", (double)c->bytes, &t, &b->ceil_write,
                   NAN, ok, msg);
    failures += !ok;

    /* Read: the embedded streaming-read kernel, JIT-compiled from PTX. */
    char log[4096] = "";
    int options[] = {BENCH_CU_JIT_ERROR_LOG_BUFFER, BENCH_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, (void *)(uintptr_t)sizeof log};
    CUresult r = v->cu.cuModuleLoadDataEx(&c->module, tally_bench_read_ceiling_ptx, 2, options, values);
    if (r != 0) {
        fprintf(stderr, "ceil_read skipped: cuModuleLoadDataEx failed: %s (%d): %s\n", cu_error_name(v, r), r, log);
        c->module = NULL;
        failures++;
    } else {
        CU(b, cuModuleGetFunction(&c->read_fn, c->module, "tally_bench_read_sum"));
        c->read_src = c->a;
        if (bench_measure(b, cu_call_read, c, 0, &t) || cu_read_total(b, c, c->a, &total, msg, sizeof msg, &ok))
            return 1;
        report_ceiling(b, report, "ceil_read", "streaming-read kernel, bytes read", (double)c->bytes, &t,
                       &b->ceil_read, total, ok, msg);
        failures += !ok;
    }

    /* Copy: device to device, bytes read plus bytes written. */
    if (bench_measure(b, cu_call_copy, c, 0, &t) || cu_check_ones(b, c->b, c->bytes, "copy", msg, sizeof msg, &ok))
        return 1;
    report_ceiling(b, report, "ceil_copy", "cuMemcpyDtoDAsync, bytes read + written", 2.0 * (double)c->bytes, &t,
                   &b->ceil_copy, NAN, ok, msg);
    failures += !ok;
    return failures;
}

static void cu_ceilings_free(bench *b, ceil_state *c)
{
    bench_vendor *v = b->vendor;
    if (v->cu_ctx == NULL) return;
    v->cu.cuCtxSetCurrent(v->cu_ctx);
    v->cu.cuStreamSynchronize(v->stream);
    if (c->module != NULL) v->cu.cuModuleUnload(c->module);
    if (c->a) v->cu.cuMemFree_v2(c->a);
    if (c->b) v->cu.cuMemFree_v2(c->b);
    if (c->partial) v->cu.cuMemFree_v2(c->partial);
}

/* ---- OpenCL ---- */
static const char cl_read_source[] =
    "__kernel void tally_bench_read_sum(__global const float4 *restrict x, ulong n4,\n"
    "                                   __global float *restrict partial)\n"
    "{\n"
    "    ulong tid = get_global_id(0), stride = get_global_size(0), i = tid;\n"
    "    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;\n"
    "    for (; i + 3 * stride < n4; i += 4 * stride) {\n"
    "        float4 v0 = x[i], v1 = x[i + stride], v2 = x[i + 2 * stride], v3 = x[i + 3 * stride];\n"
    "        a0 += (v0.x + v0.y) + (v0.z + v0.w);\n"
    "        a1 += (v1.x + v1.y) + (v1.z + v1.w);\n"
    "        a2 += (v2.x + v2.y) + (v2.z + v2.w);\n"
    "        a3 += (v3.x + v3.y) + (v3.z + v3.w);\n"
    "    }\n"
    "    for (; i < n4; i += stride) {\n"
    "        float4 v = x[i];\n"
    "        a0 += (v.x + v.y) + (v.z + v.w);\n"
    "    }\n"
    "    partial[tid] = (a0 + a1) + (a2 + a3);\n"
    "}\n";

static int cl_call_fill(bench *b, void *arg, int64_t i)
{
    ceil_state *c = arg;
    const uint32_t one = BENCH_ONE_F32;
    (void)i;
    CL(b, clEnqueueFillBuffer(b->vendor->queue, c->cl_a, &one, sizeof one, 0, c->bytes, 0, NULL, NULL));
    return 0;
}

static int cl_call_copy(bench *b, void *arg, int64_t i)
{
    ceil_state *c = arg;
    (void)i;
    CL(b, clEnqueueCopyBuffer(b->vendor->queue, c->cl_a, c->cl_b, 0, 0, c->bytes, 0, NULL, NULL));
    return 0;
}

static int cl_call_read(bench *b, void *arg, int64_t i)
{
    ceil_state *c = arg;
    (void)i;
    CL(b, clEnqueueNDRangeKernel(b->vendor->queue, c->kernel, 1, NULL, &c->threads, NULL, 0, NULL, NULL));
    return 0;
}

static int cl_check_ones(bench *b, cl_mem m, size_t bytes, const char *what, char *msg, size_t msg_size, int *ok)
{
    enum { WORDS = 65536 / 4 };
    static uint32_t head[WORDS], tail[WORDS];
    CL(b, clEnqueueReadBuffer(b->vendor->queue, m, 1, 0, sizeof head, head, 0, NULL, NULL));
    CL(b, clEnqueueReadBuffer(b->vendor->queue, m, 1, bytes - sizeof tail, sizeof tail, tail, 0, NULL, NULL));
    *ok = check_ones(head, tail, WORDS, what, msg, msg_size);
    return 0;
}

static int cl_build_read(bench *b, ceil_state *c)
{
    bench_vendor *v = b->vendor;
    cl_int e = BENCH_CL_SUCCESS;
    const char *src = cl_read_source;
    c->program = v->cl.clCreateProgramWithSource(v->cl_ctx, 1, &src, NULL, &e);
    if (c->program == NULL || e != BENCH_CL_SUCCESS) return cl_fail(b, "clCreateProgramWithSource", e);
    e = v->cl.clBuildProgram(c->program, 1, &v->cl_device, "", NULL, NULL);
    if (e != BENCH_CL_SUCCESS) {
        char log[2048] = "";
        v->cl.clGetProgramBuildInfo(c->program, v->cl_device, BENCH_CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        return bench_fail(b, "clBuildProgram(read kernel) failed: %s (%d): %s", cl_error_name(e), (int)e, log);
    }
    c->kernel = v->cl.clCreateKernel(c->program, "tally_bench_read_sum", &e);
    if (c->kernel == NULL || e != BENCH_CL_SUCCESS) return cl_fail(b, "clCreateKernel", e);
    cl_ulong n4 = c->n4;
    CL(b, clSetKernelArg(c->kernel, 0, sizeof(cl_mem), &c->cl_a));
    CL(b, clSetKernelArg(c->kernel, 1, sizeof n4, &n4));
    CL(b, clSetKernelArg(c->kernel, 2, sizeof(cl_mem), &c->cl_partial));
    return 0;
}

static int cl_ceilings(bench *b, bench_ceiling_report report, ceil_state *c)
{
    bench_vendor *v = b->vendor;
    bench_timing t;
    char msg[256];
    int ok = 0, failures = 0;
    cl_int e = BENCH_CL_SUCCESS;
    c->bytes = ceil_bytes(b, (double)v->max_alloc);
    c->n4 = c->bytes / 16;
    c->threads = (size_t)(v->compute_units > 0 ? v->compute_units : 1) * 2048u;
    c->cl_a = v->cl.clCreateBuffer(v->cl_ctx, BENCH_CL_MEM_READ_WRITE, c->bytes, NULL, &e);
    if (c->cl_a == NULL || e != BENCH_CL_SUCCESS) return cl_fail(b, "clCreateBuffer(a)", e);
    c->cl_b = v->cl.clCreateBuffer(v->cl_ctx, BENCH_CL_MEM_READ_WRITE, c->bytes, NULL, &e);
    if (c->cl_b == NULL || e != BENCH_CL_SUCCESS) return cl_fail(b, "clCreateBuffer(b)", e);
    c->cl_partial = v->cl.clCreateBuffer(v->cl_ctx, BENCH_CL_MEM_READ_WRITE, c->threads * sizeof(float), NULL, &e);
    if (c->cl_partial == NULL || e != BENCH_CL_SUCCESS) return cl_fail(b, "clCreateBuffer(partial)", e);
    const uint32_t poison = BENCH_POISON_F32;
    CL(b, clEnqueueFillBuffer(v->queue, c->cl_a, &poison, sizeof poison, 0, c->bytes, 0, NULL, NULL));
    CL(b, clEnqueueFillBuffer(v->queue, c->cl_b, &poison, sizeof poison, 0, c->bytes, 0, NULL, NULL));

    if (bench_measure(b, cl_call_fill, c, 0, &t) || cl_check_ones(b, c->cl_a, c->bytes, "fill", msg, sizeof msg, &ok))
        return 1;
    report_ceiling(b, report, "ceil_write", "clEnqueueFillBuffer, bytes written", (double)c->bytes, &t,
                   &b->ceil_write, NAN, ok, msg);
    failures += !ok;

    if (cl_build_read(b, c)) {
        fprintf(stderr, "ceil_read skipped: %s\n", b->err);
        b->err[0] = '\0';
        failures++;
    } else {
        if (bench_measure(b, cl_call_read, c, 0, &t)) return 1;
        float *partials = malloc(c->threads * sizeof *partials);
        if (partials == NULL) return bench_fail(b, "out of host memory");
        e = v->cl.clEnqueueReadBuffer(v->queue, c->cl_partial, 1, 0, c->threads * sizeof *partials, partials, 0,
                                      NULL, NULL);
        double total = 0.0;
        if (e == BENCH_CL_SUCCESS)
            ok = check_read_total(partials, c->threads, (double)(c->bytes / 4), &total, msg, sizeof msg);
        free(partials);
        if (e != BENCH_CL_SUCCESS) return cl_fail(b, "clEnqueueReadBuffer(partials)", e);
        report_ceiling(b, report, "ceil_read", "streaming-read kernel, bytes read", (double)c->bytes, &t,
                       &b->ceil_read, total, ok, msg);
        failures += !ok;
    }

    if (bench_measure(b, cl_call_copy, c, 0, &t) || cl_check_ones(b, c->cl_b, c->bytes, "copy", msg, sizeof msg, &ok))
        return 1;
    report_ceiling(b, report, "ceil_copy", "clEnqueueCopyBuffer, bytes read + written", 2.0 * (double)c->bytes, &t,
                   &b->ceil_copy, NAN, ok, msg);
    failures += !ok;
    return failures;
}

static void cl_ceilings_free(bench *b, ceil_state *c)
{
    bench_vendor *v = b->vendor;
    if (v->queue != NULL) v->cl.clFinish(v->queue);
    if (c->kernel != NULL) v->cl.clReleaseKernel(c->kernel);
    if (c->program != NULL) v->cl.clReleaseProgram(c->program);
    if (c->cl_a != NULL) v->cl.clReleaseMemObject(c->cl_a);
    if (c->cl_b != NULL) v->cl.clReleaseMemObject(c->cl_b);
    if (c->cl_partial != NULL) v->cl.clReleaseMemObject(c->cl_partial);
}

/* ---- host (one thread: tally's host backend may use several, so its
 * fractions of these can exceed 1) ---- */
static int host_call_memset(bench *b, void *arg, int64_t i)
{
    ceil_state *c = arg;
    (void)b;
    memset(c->h_a, 0x3f, c->bytes);
    c->h_a[(size_t)i % c->bytes] = 0x3f; /* a use of i, so no call is provably redundant */
    return 0;
}

static int host_call_copy(bench *b, void *arg, int64_t i)
{
    ceil_state *c = arg;
    (void)b;
    (void)i;
    memcpy(c->h_b, c->h_a, c->bytes);
    return 0;
}

static int host_call_read(bench *b, void *arg, int64_t i)
{
    ceil_state *c = arg;
    const uint64_t *w = (const uint64_t *)(const void *)c->h_a;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t n = c->bytes / 8;
    (void)b;
    (void)i;
    for (size_t k = 0; k + 3 < n; k += 4) {
        s0 += w[k];
        s1 += w[k + 1];
        s2 += w[k + 2];
        s3 += w[k + 3];
    }
    c->sink = (s0 + s1) + (s2 + s3);
    return 0;
}

static int host_ceilings(bench *b, bench_ceiling_report report, ceil_state *c)
{
    bench_timing t;
    char msg[256];
    int ok, failures = 0;
    c->bytes = ceil_bytes(b, 0);
    c->h_a = malloc(c->bytes);
    c->h_b = malloc(c->bytes);
    if (c->h_a == NULL || c->h_b == NULL) return bench_fail(b, "out of host memory for 2 x %zu bytes", c->bytes);
    memset(c->h_b, 0, c->bytes); /* first touch outside the timing */

    if (bench_measure(b, host_call_memset, c, 0, &t)) return 1;
    ok = c->h_a[0] == 0x3f && c->h_a[c->bytes - 1] == 0x3f;
    report_ceiling(b, report, "ceil_write", "memset, one thread, bytes written", (double)c->bytes, &t,
                   &b->ceil_write, NAN, ok, ok ? "ok" : "WRONG: memset");
    failures += !ok;

    if (bench_measure(b, host_call_read, c, 0, &t)) return 1;
    uint64_t expect = (uint64_t)(c->bytes / 8) * UINT64_C(0x3f3f3f3f3f3f3f3f);
    ok = c->sink == expect;
    snprintf(msg, sizeof msg, "%s: 64-bit word sum", ok ? "ok" : "WRONG");
    report_ceiling(b, report, "ceil_read", "64-bit word sum, one thread, bytes read", (double)c->bytes, &t,
                   &b->ceil_read, NAN, ok, msg);
    failures += !ok;

    if (bench_measure(b, host_call_copy, c, 0, &t)) return 1;
    ok = memcmp(c->h_a, c->h_b, c->bytes) == 0;
    report_ceiling(b, report, "ceil_copy", "memcpy, one thread, bytes read + written", 2.0 * (double)c->bytes, &t,
                   &b->ceil_copy, NAN, ok, ok ? "ok" : "WRONG: memcpy");
    failures += !ok;
    return failures;
}

int bench_ceilings(bench *b, bench_ceiling_report report)
{
    ceil_state c;
    memset(&c, 0, sizeof c);
    int rc;
    switch (b->backend) {
    case TALLY_BACKEND_CUDA:
        rc = cu_ceilings(b, report, &c);
        cu_ceilings_free(b, &c);
        break;
    case TALLY_BACKEND_OPENCL:
        rc = cl_ceilings(b, report, &c);
        cl_ceilings_free(b, &c);
        break;
    default:
        rc = host_ceilings(b, report, &c);
        free(c.h_a);
        free(c.h_b);
        break;
    }
    return rc;
}
