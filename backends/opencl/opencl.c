/*
 * backends/opencl/opencl.c - the OpenCL backend: devices, contexts (own or
 * the app's), buffers and kernel launches. The ops themselves are the shared
 * GPU layer's (backends/gpu/), so OpenCL and CUDA run the same kernels with
 * the same arguments in the same order.
 *
 * Device indices count across platforms: the devices of the first platform
 * clGetPlatformIDs returns (in clGetDeviceIDs order, CL_DEVICE_TYPE_ALL),
 * then those of the second platform, and so on. tally_devices lists them in
 * that order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opencl_backend.h"

/* Global sizes stay below 2^31 work-items, which every implementation
 * accepts; kernels stride over larger work. */
#define TALLY__CL_MAX_GROUPS ((1u << 23) - 1u)

/* A CPU-shaped twin (kernels/cpu.h) runs a whole group's work in one
 * work-item: it is launched with TALLY__CL_CPU_LOCAL work-items a group and
 * at most TALLY__CL_CPU_ITEMS_PER_UNIT work-items per compute unit, enough
 * for the runtime to balance its threads without paying for thousands of
 * tiny groups. The count never changes a result (a twin's work-items
 * stride over the units). */
#define TALLY__CL_CPU_LOCAL 1u
#define TALLY__CL_CPU_ITEMS_PER_UNIT 16u

static tally__cl_context *cl_ctx(tally_context *ctx)
{
    return (tally__cl_context *)ctx;
}

/* Whether this context launches the CPU-shaped twins: on a CPU device,
 * unless TALLY_OPENCL_KERNELS says otherwise ("gpu": the GPU kernels
 * everywhere, which is how the tests run those kernels on PoCL; "cpu": the
 * twins everywhere; "auto" or unset: by device type). */
static tally_status pick_kernel_shape(tally__cl_context *cc)
{
    cl_device_type type = 0;
    cl_int err = tally__cl.clGetDeviceInfo(cc->device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    if (err != CL_SUCCESS) return tally__cl_error(&cc->gpu.base, err, "clGetDeviceInfo(CL_DEVICE_TYPE)");
    const char *want = getenv("TALLY_OPENCL_KERNELS");
    if (want == NULL || want[0] == '\0' || strcmp(want, "auto") == 0) cc->cpu_kernels = (type & CL_DEVICE_TYPE_CPU) != 0;
    else if (strcmp(want, "gpu") == 0) cc->cpu_kernels = 0;
    else if (strcmp(want, "cpu") == 0) cc->cpu_kernels = 1;
    else
        return tally__error(&cc->gpu.base, TALLY_INVALID_ARGUMENT,
                            "TALLY_OPENCL_KERNELS='%s' is not one of auto, gpu, cpu", want);
    return TALLY_OK;
}

/* The float lanes of the twins' vector loops (kernels/cpu.h,
 * TALLY_CL_CPU_LANES): 16 where the device's native float vectors have 16
 * (AVX-512), else 8; TALLY_OPENCL_CPU_LANES ("8" or "16") overrides it, so
 * that the tests run both widths on one machine. Each lane computes its own
 * element, so the width never changes a bit. */
static tally_status pick_cpu_lanes(tally__cl_context *cc)
{
    cl_uint native = 0;
    cl_int err = tally__cl.clGetDeviceInfo(cc->device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof native, &native,
                                           NULL);
    if (err != CL_SUCCESS) return tally__cl_error(&cc->gpu.base, err, "clGetDeviceInfo(NATIVE_VECTOR_WIDTH_FLOAT)");
    const char *want = getenv("TALLY_OPENCL_CPU_LANES");
    if (want == NULL || want[0] == '\0') cc->cpu_lanes = native >= 16u ? 16u : 8u;
    else if (strcmp(want, "8") == 0) cc->cpu_lanes = 8u;
    else if (strcmp(want, "16") == 0) cc->cpu_lanes = 16u;
    else
        return tally__error(&cc->gpu.base, TALLY_INVALID_ARGUMENT, "TALLY_OPENCL_CPU_LANES='%s' is not 8 or 16", want);
    return TALLY_OK;
}

/* Whether the programs use the device's correctly rounded division and
 * square root (TALLY__CL_HW_DIV_SQRT): where the device reports
 * CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT, unless TALLY_OPENCL_HW_DIV_SQRT is
 * "0" ("1" or unset: by the device). Either way the results have the same
 * bits; the switch exists to show that, and to time the difference. */
static tally_status pick_div_sqrt(tally__cl_context *cc, cl_device_fp_config fp)
{
    const char *want = getenv("TALLY_OPENCL_HW_DIV_SQRT");
    const int capable = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
    if (want == NULL || want[0] == '\0' || strcmp(want, "1") == 0) cc->hw_div_sqrt = capable;
    else if (strcmp(want, "0") == 0) cc->hw_div_sqrt = 0;
    else
        return tally__error(&cc->gpu.base, TALLY_INVALID_ARGUMENT, "TALLY_OPENCL_HW_DIV_SQRT='%s' is not 0 or 1",
                            want);
    return TALLY_OK;
}

/* ------------------------------------------------------------------------
 * Enumeration
 * ------------------------------------------------------------------------ */

#define MAX_PLATFORMS 32
#define MAX_DEVICES 256

typedef struct cl_device_list {
    int count;
    cl_platform_id platform[MAX_DEVICES];
    cl_device_id device[MAX_DEVICES];
} cl_device_list;

/* Every device of every platform, in index order. Thread messages on
 * failure. */
static tally_status list_devices(cl_device_list *list)
{
    list->count = 0;
    tally_status st = tally__cl_load();
    if (st != TALLY_OK) return st;
    cl_platform_id platforms[MAX_PLATFORMS];
    cl_uint np = 0;
    cl_int err = tally__cl.clGetPlatformIDs(MAX_PLATFORMS, platforms, &np);
    if (err == -1001 || (err == CL_SUCCESS && np == 0))
        return tally__error(NULL, TALLY_NO_DEVICE,
                            "opencl backend: no OpenCL platform is installed (clGetPlatformIDs: %s)",
                            err == CL_SUCCESS ? "none" : tally__cl_error_name(err));
    if (err != CL_SUCCESS) return tally__cl_error(NULL, err, "clGetPlatformIDs");
    if (np > MAX_PLATFORMS) np = MAX_PLATFORMS;
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        cl_device_id *slot = list->device + list->count;
        cl_uint room = (cl_uint)(MAX_DEVICES - list->count);
        err = tally__cl.clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, room, slot, &nd);
        if (err == CL_DEVICE_NOT_FOUND) continue; /* a platform with no device */
        if (err != CL_SUCCESS) return tally__cl_error(NULL, err, "clGetDeviceIDs");
        if (nd > room) nd = room;
        for (cl_uint d = 0; d < nd; d++) list->platform[list->count + (int)d] = platforms[p];
        list->count += (int)nd;
    }
    if (list->count == 0) {
        char hint[1600];
        return tally__error(NULL, TALLY_NO_DEVICE, "opencl backend: %u OpenCL platform%s but no device%s",
                            (unsigned)np, np == 1 ? "" : "s", tally__cl_no_device_hint(hint, sizeof hint));
    }
    return TALLY_OK;
}

static void info_string(cl_device_id d, cl_device_info what, char *dst, size_t capacity)
{
    dst[0] = '\0';
    if (tally__cl.clGetDeviceInfo(d, what, capacity, dst, NULL) != CL_SUCCESS) dst[0] = '\0';
    dst[capacity - 1] = '\0';
}

static void platform_string(cl_platform_id p, cl_platform_info what, char *dst, size_t capacity)
{
    dst[0] = '\0';
    if (tally__cl.clGetPlatformInfo(p, what, capacity, dst, NULL) != CL_SUCCESS) dst[0] = '\0';
    dst[capacity - 1] = '\0';
}

static int is_gpu(cl_device_id d)
{
    cl_device_type type = 0;
    if (tally__cl.clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL) != CL_SUCCESS) return 0;
    return (type & CL_DEVICE_TYPE_GPU) != 0;
}

static tally_status cl_devices(tally_device_info *devices, int capacity, int *count)
{
    cl_device_list *list = malloc(sizeof *list);
    if (list == NULL) return tally__error(NULL, TALLY_OUT_OF_MEMORY, "opencl backend: out of memory");
    tally_status st = list_devices(list);
    if (st == TALLY_OK) {
        *count = list->count;
        for (int i = 0; i < list->count && i < capacity; i++) {
            memset(&devices[i], 0, sizeof devices[i]);
            devices[i].index = i;
            info_string(list->device[i], CL_DEVICE_NAME, devices[i].name, sizeof devices[i].name);
            platform_string(list->platform[i], CL_PLATFORM_NAME, devices[i].platform, sizeof devices[i].platform);
            devices[i].is_gpu = is_gpu(list->device[i]);
        }
    }
    free(list);
    return st;
}

/* ------------------------------------------------------------------------
 * Contexts
 * ------------------------------------------------------------------------ */

/* Refuses a device that cannot give tally's results: no single-precision
 * denormals (flushing changes bits), no OpenCL C 1.2, groups narrower than
 * one 256-lane tile, too little local memory, or no compiler. Errors go to
 * cc's message. */
static tally_status check_device(tally__cl_context *cc, const char *name)
{
    tally_context *ctx = &cc->gpu.base;
    cl_device_id d = cc->device;
    cl_device_fp_config fp = 0;
    cl_int err = tally__cl.clGetDeviceInfo(d, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
    if (err != CL_SUCCESS) return tally__cl_error(ctx, err, "clGetDeviceInfo(CL_DEVICE_SINGLE_FP_CONFIG)");
    if (!(fp & CL_FP_DENORM))
        return tally__error(ctx, TALLY_DEVICE_UNSUITABLE,
                            "opencl device '%s' does not support single-precision denormals (CL_FP_DENORM is "
                            "missing from CL_DEVICE_SINGLE_FP_CONFIG); flushing them would change results",
                            name);
    cc->fma_emulated = !(fp & CL_FP_FMA);
    tally_status st = pick_div_sqrt(cc, fp);
    if (st != TALLY_OK) return st;

    char version[128];
    info_string(d, CL_DEVICE_OPENCL_C_VERSION, version, sizeof version);
    int major = 0, minor = 0;
    if (sscanf(version, "OpenCL C %d.%d", &major, &minor) != 2 || major * 10 + minor < 12)
        return tally__error(ctx, TALLY_DEVICE_UNSUITABLE,
                            "opencl device '%s' does not support OpenCL C 1.2 (CL_DEVICE_OPENCL_C_VERSION is "
                            "'%s')",
                            name, version);

    size_t max_group = 0;
    size_t item_sizes[3] = {0, 0, 0};
    err = tally__cl.clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_group, &max_group, NULL);
    if (err == CL_SUCCESS)
        err = tally__cl.clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof item_sizes, item_sizes, NULL);
    if (err != CL_SUCCESS) return tally__cl_error(ctx, err, "clGetDeviceInfo(CL_DEVICE_MAX_WORK_GROUP_SIZE)");
    if (max_group < TALLY_GPU_GROUP_SIZE || item_sizes[0] < TALLY_GPU_GROUP_SIZE)
        return tally__error(ctx, TALLY_DEVICE_UNSUITABLE,
                            "opencl device '%s' allows work-groups of %zu work-items (%zu in dimension 0); "
                            "tally needs %u",
                            name, max_group, item_sizes[0], TALLY_GPU_GROUP_SIZE);

    cl_ulong local = 0;
    err = tally__cl.clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
    if (err != CL_SUCCESS) return tally__cl_error(ctx, err, "clGetDeviceInfo(CL_DEVICE_LOCAL_MEM_SIZE)");
    if (local < TALLY_K_LOCAL_BYTES)
        return tally__error(ctx, TALLY_DEVICE_UNSUITABLE,
                            "opencl device '%s' has %llu bytes of local memory; tally's kernels need %u", name,
                            (unsigned long long)local, (unsigned)TALLY_K_LOCAL_BYTES);

    cl_bool compiler = CL_FALSE;
    err = tally__cl.clGetDeviceInfo(d, CL_DEVICE_COMPILER_AVAILABLE, sizeof compiler, &compiler, NULL);
    if (err != CL_SUCCESS) return tally__cl_error(ctx, err, "clGetDeviceInfo(CL_DEVICE_COMPILER_AVAILABLE)");
    if (!compiler)
        return tally__error(ctx, TALLY_DEVICE_UNSUITABLE,
                            "opencl device '%s' has no OpenCL C compiler (CL_DEVICE_COMPILER_AVAILABLE is false)",
                            name);
    return TALLY_OK;
}

/* Releases everything cc holds (its own references only) and cc itself.
 * `message_to_thread`: the creation failed, so its message moves to the
 * thread record first. */
static void teardown(tally__cl_context *cc, int message_to_thread)
{
    if (message_to_thread) tally__error_to_thread(&cc->gpu.base);
    if (cc->queue != NULL) (void)tally__cl.clFinish(cc->queue);
    tally__gpu_context_cleanup(&cc->gpu);
    for (int k = 0; k < TALLY__KERNEL_COUNT; k++)
        if (cc->kernels[k] != NULL) (void)tally__cl.clReleaseKernel(cc->kernels[k]);
    if (cc->program != NULL) (void)tally__cl.clReleaseProgram(cc->program);
    if (cc->cpu_program != NULL) (void)tally__cl.clReleaseProgram(cc->cpu_program);
    if (cc->queue != NULL) (void)tally__cl.clReleaseCommandQueue(cc->queue);
    if (cc->context != NULL) (void)tally__cl.clReleaseContext(cc->context);
    if (cc->device_retained) (void)tally__cl.clReleaseDevice(cc->device);
    if (message_to_thread) free(cc->gpu.base.error);
    free(cc);
}

/* Everything after the context and queue exist: limits, the program and
 * every kernel (created once here, so no launch ever compiles). */
static tally_status setup(tally__cl_context *cc, const char *source, size_t source_size)
{
    tally_context *ctx = &cc->gpu.base;
    cl_device_id d = cc->device;
    char name[200];
    info_string(d, CL_DEVICE_NAME, name, sizeof name);
    tally_status st = check_device(cc, name);
    if (st != TALLY_OK) return st;
    snprintf(ctx->device_name, sizeof ctx->device_name, "%s%s", name,
             cc->fma_emulated ? " (fma emulated: no CL_FP_FMA)" : "");

    cl_uint align_bits = 0, units = 0;
    cl_int err = tally__cl.clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof cc->max_alloc, &cc->max_alloc,
                                           NULL);
    if (err == CL_SUCCESS)
        err = tally__cl.clGetDeviceInfo(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
    if (err == CL_SUCCESS)
        err = tally__cl.clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
    if (err != CL_SUCCESS) return tally__cl_error(ctx, err, "clGetDeviceInfo");
    cc->base_align = align_bits / 8u;
    cc->gpu.compute_units = units;
    cc->gpu.register_tiles = 0; /* see tally__gpu_context */
    cc->gpu.warp_shuffle = 0;
    cc->gpu.resident_bound = 0; /* see tally__gpu_context */
    /* Deprecated by OpenCL 2.0 but still answered; a device that does not
     * answer is taken not to share memory, so wrap_host is refused. */
    cl_bool unified = CL_FALSE;
    if (tally__cl.clGetDeviceInfo(d, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL) == CL_SUCCESS)
        cc->host_unified = unified == CL_TRUE;

    st = pick_kernel_shape(cc);
    if (st == TALLY_OK && cc->cpu_kernels) st = pick_cpu_lanes(cc);
    if (st != TALLY_OK) return st;
    cc->gpu.cpu_twins = cc->cpu_kernels; /* see tally__gpu_context */
    const char *options = cc->hw_div_sqrt ? TALLY__CL_BUILD_OPTIONS TALLY__CL_HW_DIV_SQRT : TALLY__CL_BUILD_OPTIONS;
    char cpu_options[160];
    snprintf(cpu_options, sizeof cpu_options, "%s -DTALLY_CL_CPU_LANES=%u%s", TALLY__CL_BUILD_OPTIONS_CPU,
             cc->cpu_lanes, cc->hw_div_sqrt ? TALLY__CL_HW_DIV_SQRT : "");
    st = tally__cl_build_program(cc, source, source_size, options, &cc->program, &cc->program_from_cache);
    if (st != TALLY_OK) return st;
    int cpu_from_cache = 0;
    if (cc->cpu_kernels) {
        st = tally__cl_build_program(cc, source, source_size, cpu_options, &cc->cpu_program, &cpu_from_cache);
        if (st != TALLY_OK) return st;
    }
    for (int k = 0; k < TALLY__KERNEL_COUNT; k++) {
        const char *kname = tally__gpu_kernel_name((tally__kernel_id)k);
        const int twin = tally__gpu_kernel_is_cpu_twin((tally__kernel_id)k);
        /* A GPU program's twins are empty: a context without cpu_kernels
         * creates them (every id has a kernel) but never launches them. */
        cl_program from = twin && cc->cpu_program != NULL ? cc->cpu_program : cc->program;
        cc->kernels[k] = tally__cl.clCreateKernel(from, kname, &err);
        if (err != CL_SUCCESS) {
            cc->kernels[k] = NULL;
            char what[96];
            snprintf(what, sizeof what, "clCreateKernel(%s)", kname);
            return tally__cl_error(ctx, err, what);
        }
        /* A kernel that needs too many registers may allow fewer
         * work-items per group than the device does. */
        size_t wg = 0;
        err = tally__cl.clGetKernelWorkGroupInfo(cc->kernels[k], d, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
        if (err != CL_SUCCESS) return tally__cl_error(ctx, err, "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)");
        const size_t need = tally__gpu_kernel_is_cpu_twin((tally__kernel_id)k) ? TALLY__CL_CPU_LOCAL
                                                                               : TALLY_GPU_GROUP_SIZE;
        if (wg < need)
            return tally__error(ctx, TALLY_DEVICE_UNSUITABLE,
                                "opencl device '%s' runs kernel %s with at most %zu work-items per group; tally "
                                "needs %u",
                                name, kname, wg, (unsigned)need);
    }
    return TALLY_OK;
}

/* A context on device `index` (counted across platforms), building
 * `source`. */
static tally_status open_device(int index, const char *source, size_t source_size, tally_context **out)
{
    cl_device_list *list = malloc(sizeof *list);
    if (list == NULL) return tally__error(NULL, TALLY_OUT_OF_MEMORY, "opencl backend: out of memory");
    tally_status st = list_devices(list);
    if (st != TALLY_OK) {
        free(list);
        return st;
    }
    if (index < 0 || index >= list->count) {
        int n = list->count;
        free(list);
        return tally__error(NULL, TALLY_NO_DEVICE,
                            "opencl backend: device %d does not exist (%d device%s, indices counted across "
                            "platforms)",
                            index, n, n == 1 ? "" : "s");
    }
    tally__cl_context *cc = calloc(1, sizeof *cc);
    if (cc == NULL) {
        free(list);
        return tally__error(NULL, TALLY_OUT_OF_MEMORY, "opencl backend: out of memory for a context");
    }
    cc->gpu.base.ops = &tally__opencl_ops;
    cc->gpu.dev = &tally__opencl_device_ops;
    cc->platform = list->platform[index];
    cc->device = list->device[index];
    free(list);

    tally_context *ctx = &cc->gpu.base;
    cl_int err;
    cl_context_properties props[3] = {CL_CONTEXT_PLATFORM, (cl_context_properties)cc->platform, 0};
    cc->context = tally__cl.clCreateContext(props, 1, &cc->device, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        cc->context = NULL;
        st = tally__cl_error(ctx, err, "clCreateContext");
    } else {
        cc->queue = tally__cl.clCreateCommandQueue(cc->context, cc->device, 0, &err);
        if (err != CL_SUCCESS) {
            cc->queue = NULL;
            st = tally__cl_error(ctx, err, "clCreateCommandQueue");
        }
    }
    if (st == TALLY_OK) st = setup(cc, source, source_size);
    if (st != TALLY_OK) {
        teardown(cc, 1);
        return st;
    }
    *out = ctx;
    return TALLY_OK;
}

static tally_status cl_context_create(int device, tally_context **out)
{
    return open_device(device, tally__opencl_source, tally__opencl_source_size, out);
}

tally_status tally__opencl_context_create_with_source(int device, const char *source, tally_context **out)
{
    if (out == NULL || source == NULL)
        return tally__error(NULL, TALLY_INVALID_ARGUMENT, "opencl test hook: NULL argument");
    *out = NULL;
    return open_device(device, source, strlen(source), out);
}

/* The app's cl_context, cl_device_id and in-order cl_command_queue. */
static tally_status cl_context_wrap(void *const handles[3], tally_context **out)
{
    tally_status st = tally__cl_load();
    if (st != TALLY_OK) return st;
    cl_context context = (cl_context)handles[0];
    cl_device_id device = (cl_device_id)handles[1];
    cl_command_queue queue = (cl_command_queue)handles[2];

    cl_context queue_context = NULL;
    cl_device_id queue_device = NULL;
    cl_command_queue_properties props = 0;
    cl_int err = tally__cl.clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof queue_context, &queue_context, NULL);
    if (err == CL_SUCCESS)
        err = tally__cl.clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof queue_device, &queue_device, NULL);
    if (err == CL_SUCCESS)
        err = tally__cl.clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
    if (err != CL_SUCCESS)
        return tally__error(NULL, TALLY_INVALID_ARGUMENT,
                            "tally_context_create_opencl: clGetCommandQueueInfo(the app's queue) failed: %s (%d)",
                            tally__cl_error_name(err), (int)err);
    if (queue_context != context || queue_device != device)
        return tally__error(NULL, TALLY_INVALID_ARGUMENT,
                            "tally_context_create_opencl: the command queue belongs to another %s",
                            queue_context != context ? "cl_context" : "device");
    if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return tally__error(NULL, TALLY_INVALID_ARGUMENT,
                            "tally_context_create_opencl: the command queue is out of order; tally needs an "
                            "in-order queue");

    tally__cl_context *cc = calloc(1, sizeof *cc);
    if (cc == NULL) return tally__error(NULL, TALLY_OUT_OF_MEMORY, "opencl backend: out of memory for a context");
    cc->gpu.base.ops = &tally__opencl_ops;
    cc->gpu.dev = &tally__opencl_device_ops;
    cc->device = device;
    tally_context *ctx = &cc->gpu.base;
    err = tally__cl.clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof cc->platform, &cc->platform, NULL);
    if (err != CL_SUCCESS) {
        st = tally__cl_error(ctx, err, "clGetDeviceInfo(CL_DEVICE_PLATFORM)");
        teardown(cc, 1);
        return st;
    }
    /* tally holds its own references from here on, released in
     * context_release; the app's stay the app's. */
    if (tally__cl.clRetainDevice(device) == CL_SUCCESS) cc->device_retained = 1;
    err = tally__cl.clRetainContext(context);
    if (err == CL_SUCCESS) {
        cc->context = context;
        err = tally__cl.clRetainCommandQueue(queue);
        if (err == CL_SUCCESS) cc->queue = queue;
    }
    if (err != CL_SUCCESS) {
        st = tally__cl_error(ctx, err, "clRetainContext / clRetainCommandQueue");
        teardown(cc, 1);
        return st;
    }
    st = setup(cc, tally__opencl_source, tally__opencl_source_size);
    if (st != TALLY_OK) {
        teardown(cc, 1);
        return st;
    }
    *out = ctx;
    return TALLY_OK;
}

static void cl_context_release(tally_context *ctx)
{
    teardown(cl_ctx(ctx), 0);
}

/* Makes the app's memory behind a USE_HOST_PTR buffer hold the buffer's
 * current contents: OpenCL guarantees that only while the region is mapped,
 * so a blocking map and an unmap follow the queued work. On a device that
 * shares memory this copies nothing. */
static cl_int publish_host_memory(tally__cl_context *cc, tally__cl_buffer *b)
{
    if (b->base.bytes == 0) return CL_SUCCESS;
    cl_int err;
    void *mapped = tally__cl.clEnqueueMapBuffer(cc->queue, b->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                                b->base.bytes, 0, NULL, NULL, &err);
    if (err != CL_SUCCESS) return err;
    err = tally__cl.clEnqueueUnmapMemObject(cc->queue, b->mem, mapped, 0, NULL, NULL);
    if (err == CL_SUCCESS) err = tally__cl.clFinish(cc->queue);
    return err;
}

static tally_status cl_sync(tally_context *ctx)
{
    tally__cl_context *cc = cl_ctx(ctx);
    cl_int err = tally__cl.clFinish(cc->queue);
    if (err != CL_SUCCESS) return tally__cl_error(ctx, err, "clFinish");
    /* tally.h promises that wrapped host memory holds the results after a
     * sync. */
    for (tally__cl_buffer *b = cc->host_wrapped; b != NULL; b = b->next_host) {
        err = publish_host_memory(cc, b);
        if (err != CL_SUCCESS) return tally__cl_error(ctx, err, "clEnqueueMapBuffer(wrapped host memory)");
    }
    return TALLY_OK;
}

int tally__opencl_program_from_cache(const tally_context *ctx)
{
    if (ctx == NULL || ctx->ops != &tally__opencl_ops) return -1;
    return ((const tally__cl_context *)ctx)->program_from_cache;
}

int tally__opencl_fma_emulated(const tally_context *ctx)
{
    if (ctx == NULL || ctx->ops != &tally__opencl_ops) return -1;
    return ((const tally__cl_context *)ctx)->fma_emulated;
}

/* ------------------------------------------------------------------------
 * Buffers
 * ------------------------------------------------------------------------ */

/* The host side of a new buffer of `bytes`, zeroed. Drivers may accept an
 * oversized buffer and fail only when it is first used (NVIDIA does), so
 * the device's limit is checked here. */
static tally_status new_buffer(tally__cl_context *cc, size_t bytes, tally__cl_buffer **out)
{
    tally_context *ctx = &cc->gpu.base;
    if ((cl_ulong)bytes > cc->max_alloc)
        return tally__error(ctx, TALLY_OUT_OF_MEMORY,
                            "opencl: %zu bytes exceed the device's largest allocation "
                            "(CL_DEVICE_MAX_MEM_ALLOC_SIZE = %llu bytes)",
                            bytes, (unsigned long long)cc->max_alloc);
    *out = calloc(1, sizeof **out);
    if (*out == NULL) return tally__error(ctx, TALLY_OUT_OF_MEMORY, "opencl: out of host memory for a buffer");
    return TALLY_OK;
}

static tally_status cl_buffer_create(tally_context *ctx, size_t bytes, tally_buffer **out)
{
    tally__cl_context *cc = cl_ctx(ctx);
    tally__cl_buffer *b = NULL;
    tally_status st = new_buffer(cc, bytes, &b);
    if (st != TALLY_OK) return st;
    cl_int err;
    /* OpenCL has no empty buffers: a zero-byte request gets a small one. */
    b->mem = tally__cl.clCreateBuffer(cc->context, CL_MEM_READ_WRITE, bytes > 0 ? bytes : 16u, NULL, &err);
    if (err != CL_SUCCESS) {
        free(b);
        char what[64];
        snprintf(what, sizeof what, "clCreateBuffer(%zu bytes)", bytes);
        return tally__cl_error(ctx, err, what);
    }
    b->base.ctx = ctx;
    b->base.bytes = bytes;
    b->base.wrapped = 0;
    *out = &b->base;
    return TALLY_OK;
}

static tally_status cl_buffer_wrap(tally_context *ctx, void *native, uint64_t address, size_t bytes,
                                   tally_buffer **out)
{
    (void)address;
    (void)bytes;
    tally__cl_context *cc = cl_ctx(ctx);
    cl_mem mem = (cl_mem)native;
    cl_context owner = NULL;
    size_t size = 0;
    cl_int err = tally__cl.clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
    if (err == CL_SUCCESS) err = tally__cl.clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err != CL_SUCCESS)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT,
                            "tally_buffer_wrap_opencl: clGetMemObjectInfo(the app's cl_mem) failed: %s (%d)",
                            tally__cl_error_name(err), (int)err);
    if (owner != cc->context)
        return tally__error(ctx, TALLY_WRONG_CONTEXT,
                            "tally_buffer_wrap_opencl: the cl_mem belongs to another cl_context than the "
                            "tally context's");
    tally__cl_buffer *b = calloc(1, sizeof *b);
    if (b == NULL) return tally__error(ctx, TALLY_OUT_OF_MEMORY, "opencl: out of host memory for a buffer");
    err = tally__cl.clRetainMemObject(mem);
    if (err != CL_SUCCESS) {
        free(b);
        return tally__cl_error(ctx, err, "clRetainMemObject");
    }
    b->mem = mem;
    b->base.ctx = ctx;
    b->base.bytes = size;
    b->base.wrapped = 1;
    *out = &b->base;
    return TALLY_OK;
}

static tally_status cl_buffer_wrap_host(tally_context *ctx, void *ptr, size_t bytes, tally_buffer **out)
{
    tally__cl_context *cc = cl_ctx(ctx);
    if (!cc->host_unified)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT,
                            "tally_buffer_wrap_host: %s does not share memory with the host "
                            "(CL_DEVICE_HOST_UNIFIED_MEMORY is false); create a buffer and upload instead",
                            ctx->device_name);
    tally__cl_buffer *b = NULL;
    tally_status st = new_buffer(cc, bytes, &b);
    if (st != TALLY_OK) return st;
    cl_int err;
    /* OpenCL has no empty buffers: an empty wrap gets a small buffer of its
     * own that no view can reach (the front end bounds views by bytes). */
    if (bytes > 0)
        b->mem = tally__cl.clCreateBuffer(cc->context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, ptr, &err);
    else
        b->mem = tally__cl.clCreateBuffer(cc->context, CL_MEM_READ_WRITE, 16u, NULL, &err);
    if (err != CL_SUCCESS) {
        free(b);
        return tally__cl_error(ctx, err, "clCreateBuffer(CL_MEM_USE_HOST_PTR)");
    }
    b->host_ptr = bytes > 0 ? ptr : NULL;
    b->host_listed = 1;
    b->base.ctx = ctx;
    b->base.bytes = bytes;
    b->base.wrapped = 1;
    b->next_host = cc->host_wrapped;
    if (cc->host_wrapped != NULL) cc->host_wrapped->prev_host = b;
    cc->host_wrapped = b;
    *out = &b->base;
    return TALLY_OK;
}

static void cl_buffer_release(tally_buffer *buf)
{
    tally__cl_buffer *b = (tally__cl_buffer *)buf;
    if (b->host_listed) {
        tally__cl_context *cc = cl_ctx(buf->ctx);
        /* The app reads its memory as soon as this returns. A release has
         * nowhere to report a failure; the op that failed already did. */
        (void)publish_host_memory(cc, b);
        if (b->prev_host != NULL) b->prev_host->next_host = b->next_host;
        else cc->host_wrapped = b->next_host;
        if (b->next_host != NULL) b->next_host->prev_host = b->prev_host;
    }
    /* Queued work keeps the cl_mem alive through OpenCL's reference count.
     * An app's buffer is waited for, so that once this returns the app may
     * use it from other queues (tally.h promises that). */
    if (buf->wrapped) (void)tally__cl.clFinish(cl_ctx(buf->ctx)->queue);
    (void)tally__cl.clReleaseMemObject(b->mem);
    free(b);
}

static tally_status cl_buffer_upload(tally_buffer *buf, size_t offset, const void *src, size_t bytes)
{
    tally__cl_buffer *b = (tally__cl_buffer *)buf;
    cl_int err = tally__cl.clEnqueueWriteBuffer(cl_ctx(buf->ctx)->queue, b->mem, CL_TRUE, offset, bytes, src, 0,
                                                NULL, NULL);
    if (err != CL_SUCCESS) return tally__cl_error(buf->ctx, err, "clEnqueueWriteBuffer");
    return TALLY_OK;
}

static tally_status cl_buffer_download(const tally_buffer *buf, size_t offset, void *dst, size_t bytes)
{
    const tally__cl_buffer *b = (const tally__cl_buffer *)buf;
    cl_int err = tally__cl.clEnqueueReadBuffer(cl_ctx(buf->ctx)->queue, b->mem, CL_TRUE, offset, bytes, dst, 0,
                                               NULL, NULL);
    if (err != CL_SUCCESS) return tally__cl_error(buf->ctx, err, "clEnqueueReadBuffer");
    return TALLY_OK;
}

static tally_status cl_buffer_fill(tally_buffer *buf, size_t offset, size_t bytes, uint32_t pattern)
{
    tally__cl_buffer *b = (tally__cl_buffer *)buf;
    cl_uint p = pattern;
    cl_int err = tally__cl.clEnqueueFillBuffer(cl_ctx(buf->ctx)->queue, b->mem, &p, sizeof p, offset, bytes, 0,
                                               NULL, NULL);
    if (err != CL_SUCCESS) return tally__cl_error(buf->ctx, err, "clEnqueueFillBuffer");
    return TALLY_OK;
}

static uint32_t cl_buffer_alignment(const tally_buffer *buf)
{
    const tally__cl_buffer *b = (const tally__cl_buffer *)buf;
    if (b->host_ptr != NULL) {
        /* A USE_HOST_PTR buffer may be the app's memory itself, which is
         * only as aligned as its address. */
        uint32_t alignment = 1;
        while (alignment < cl_ctx(buf->ctx)->base_align && ((uintptr_t)b->host_ptr & alignment) == 0)
            alignment *= 2;
        return alignment;
    }
    /* Every cl_mem (a sub-buffer's origin included) starts on a multiple of
     * CL_DEVICE_MEM_BASE_ADDR_ALIGN, which OpenCL 1.2 makes at least 128
     * bytes on a full-profile device. */
    return cl_ctx(buf->ctx)->base_align;
}

/* ------------------------------------------------------------------------
 * Launches (the shared GPU layer's device interface)
 * ------------------------------------------------------------------------ */

static tally_status cl_launch(tally_context *ctx, tally__kernel_id kernel, uint64_t groups,
                              const tally__gpu_arg *args, int nargs)
{
    tally__cl_context *cc = cl_ctx(ctx);
    if ((int)kernel < 0 || (int)kernel >= TALLY__KERNEL_COUNT)
        return tally__error(ctx, TALLY_BACKEND_ERROR, "opencl launch: kernel id %d does not exist", (int)kernel);
    if (groups == 0) return TALLY_OK;
    if (cc->cpu_kernels) kernel = tally__gpu_kernel_cpu_twin(kernel);
    const char *name = tally__gpu_kernel_name(kernel);
    if (groups > TALLY__CL_MAX_GROUPS)
        return tally__error(ctx, TALLY_BACKEND_ERROR, "opencl launch of %s: %llu groups exceed %u", name,
                            (unsigned long long)groups, TALLY__CL_MAX_GROUPS);
    cl_kernel k = cc->kernels[kernel];
    for (int i = 0; i < nargs; i++) {
        /* A buffer becomes its cl_mem (a NULL buffer a NULL cl_mem, which
         * the kernel does not read and clSetKernelArg accepts); a scalar is
         * passed in place (tally__gpu_scalar_bytes), its OpenCL type having
         * the size of its C type. */
        cl_mem m = NULL;
        const void *value = &args[i].v;
        size_t size = tally__gpu_scalar_bytes(args[i].kind);
        if (args[i].kind == TALLY__ARG_BUFFER) {
            if (args[i].v.buffer != NULL) m = ((const tally__cl_buffer *)args[i].v.buffer)->mem;
            value = &m;
            size = sizeof m;
        } else if (size == 0) {
            return tally__error(ctx, TALLY_BACKEND_ERROR, "opencl launch of %s: argument %d has kind %d", name, i,
                                (int)args[i].kind);
        }
        cl_int err = tally__cl.clSetKernelArg(k, (cl_uint)i, size, value);
        if (err != CL_SUCCESS) {
            char what[96];
            snprintf(what, sizeof what, "clSetKernelArg(%s, argument %d)", name, i);
            return tally__cl_error(ctx, err, what);
        }
    }
    /* The op layer never launches these here (stage_bytes is 0): their
     * OpenCL bodies are empty. A kernel whose stage is optional runs
     * without one. */
    if ((tally__gpu_kernel_stage_bytes(kernel) != 0 && !tally__gpu_kernel_stage_optional(kernel)) ||
        tally__gpu_kernel_group_size(kernel) != TALLY_GPU_GROUP_SIZE)
        return tally__error(ctx, TALLY_BACKEND_ERROR,
                            "opencl launch of %s: the kernel needs dynamic local memory or a group of other than %u "
                            "work-items, which this backend does not give", name, TALLY_GPU_GROUP_SIZE);
    size_t local = TALLY_GPU_GROUP_SIZE;
    size_t global = (size_t)groups * TALLY_GPU_GROUP_SIZE;
    if (tally__gpu_kernel_is_cpu_twin(kernel)) {
        const uint64_t cap = (uint64_t)(cc->gpu.compute_units > 0 ? cc->gpu.compute_units : 1u) *
                             TALLY__CL_CPU_ITEMS_PER_UNIT;
        const uint64_t items = groups < cap ? groups : cap;
        local = TALLY__CL_CPU_LOCAL;
        global = (size_t)((items + TALLY__CL_CPU_LOCAL - 1u) / TALLY__CL_CPU_LOCAL * TALLY__CL_CPU_LOCAL);
    }
    cl_int err = tally__cl.clEnqueueNDRangeKernel(cc->queue, k, 1, NULL, &global, &local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "clEnqueueNDRangeKernel(%s)", name);
        return tally__cl_error(ctx, err, what);
    }
    return TALLY_OK;
}

/* The backend's tables, built by the shared GPU layer from the device
 * operations above (TALLY__GPU_BACKEND, backends/gpu/gpu.h). */
TALLY__GPU_BACKEND(opencl, TALLY_BACKEND_OPENCL, cl_, TALLY__CL_MAX_GROUPS, .context_wrap = cl_context_wrap,
                  .buffer_wrap = cl_buffer_wrap, .buffer_wrap_host = cl_buffer_wrap_host);
