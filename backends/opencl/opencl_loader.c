/*
 * backends/opencl/opencl_loader.c - loading libOpenCL at run time (see
 * opencl_loader.h), and the names of OpenCL's error codes.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "opencl_loader.h"

tally__cl_api tally__cl;

/* The ICD loader's versioned name first (what distributions install for
 * programs), then the development symlink. */
static const char *const library_names[] = {"libOpenCL.so.1", "libOpenCL.so"};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static tally_status load_status = TALLY_LIBRARY_MISSING;
static char load_message[512];

static void load(void)
{
    void *lib = NULL;
    char first_error[256] = "";
    for (size_t i = 0; i < sizeof library_names / sizeof library_names[0] && lib == NULL; i++) {
        lib = dlopen(library_names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib == NULL && i == 0) {
            const char *e = dlerror();
            snprintf(first_error, sizeof first_error, "%s", e != NULL ? e : "unknown dlopen error");
        }
    }
    if (lib == NULL) {
        snprintf(load_message, sizeof load_message,
                 "opencl backend: could not load libOpenCL.so.1 or libOpenCL.so (%s); install an OpenCL ICD "
                 "loader and a driver",
                 first_error);
        return;
    }
    /* The table is filled through one list; a missing symbol names
     * itself. (A void* to function pointer conversion through memcpy keeps
     * the code strictly conforming.) */
#define TALLY__CL_RESOLVE(ret, name, params)                                                               \
    {                                                                                                      \
        void *sym = dlsym(lib, #name);                                                                     \
        if (sym == NULL) {                                                                                 \
            snprintf(load_message, sizeof load_message,                                                    \
                     "opencl backend: the OpenCL library has no symbol %s (an OpenCL 1.2 loader is needed)", \
                     #name);                                                                               \
            dlclose(lib);                                                                                  \
            return;                                                                                        \
        }                                                                                                  \
        memcpy(&tally__cl.name, &sym, sizeof sym);                                                         \
    }
    TALLY__CL_SYMBOLS(TALLY__CL_RESOLVE)
#undef TALLY__CL_RESOLVE
    /* The library stays loaded for the life of the process: contexts may be
     * created and released at any time from any thread. */
    load_status = TALLY_OK;
}

tally_status tally__cl_open(const char **message)
{
    pthread_once(&load_once, load);
    if (message != NULL) *message = load_message;
    return load_status;
}

/* Numbers are spelled out: headers for an older OpenCL version lack the
 * later names. */
#define TALLY__CL_ERRORS(X)                                \
    X(0, CL_SUCCESS)                                       \
    X(-1, CL_DEVICE_NOT_FOUND)                             \
    X(-2, CL_DEVICE_NOT_AVAILABLE)                         \
    X(-3, CL_COMPILER_NOT_AVAILABLE)                       \
    X(-4, CL_MEM_OBJECT_ALLOCATION_FAILURE)                \
    X(-5, CL_OUT_OF_RESOURCES)                             \
    X(-6, CL_OUT_OF_HOST_MEMORY)                           \
    X(-7, CL_PROFILING_INFO_NOT_AVAILABLE)                 \
    X(-8, CL_MEM_COPY_OVERLAP)                             \
    X(-9, CL_IMAGE_FORMAT_MISMATCH)                        \
    X(-10, CL_IMAGE_FORMAT_NOT_SUPPORTED)                  \
    X(-11, CL_BUILD_PROGRAM_FAILURE)                       \
    X(-12, CL_MAP_FAILURE)                                 \
    X(-13, CL_MISALIGNED_SUB_BUFFER_OFFSET)                \
    X(-14, CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)   \
    X(-15, CL_COMPILE_PROGRAM_FAILURE)                     \
    X(-16, CL_LINKER_NOT_AVAILABLE)                        \
    X(-17, CL_LINK_PROGRAM_FAILURE)                        \
    X(-18, CL_DEVICE_PARTITION_FAILED)                     \
    X(-19, CL_KERNEL_ARG_INFO_NOT_AVAILABLE)               \
    X(-30, CL_INVALID_VALUE)                               \
    X(-31, CL_INVALID_DEVICE_TYPE)                         \
    X(-32, CL_INVALID_PLATFORM)                            \
    X(-33, CL_INVALID_DEVICE)                              \
    X(-34, CL_INVALID_CONTEXT)                             \
    X(-35, CL_INVALID_QUEUE_PROPERTIES)                    \
    X(-36, CL_INVALID_COMMAND_QUEUE)                       \
    X(-37, CL_INVALID_HOST_PTR)                            \
    X(-38, CL_INVALID_MEM_OBJECT)                          \
    X(-39, CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)             \
    X(-40, CL_INVALID_IMAGE_SIZE)                          \
    X(-41, CL_INVALID_SAMPLER)                             \
    X(-42, CL_INVALID_BINARY)                              \
    X(-43, CL_INVALID_BUILD_OPTIONS)                       \
    X(-44, CL_INVALID_PROGRAM)                             \
    X(-45, CL_INVALID_PROGRAM_EXECUTABLE)                  \
    X(-46, CL_INVALID_KERNEL_NAME)                         \
    X(-47, CL_INVALID_KERNEL_DEFINITION)                   \
    X(-48, CL_INVALID_KERNEL)                              \
    X(-49, CL_INVALID_ARG_INDEX)                           \
    X(-50, CL_INVALID_ARG_VALUE)                           \
    X(-51, CL_INVALID_ARG_SIZE)                            \
    X(-52, CL_INVALID_KERNEL_ARGS)                         \
    X(-53, CL_INVALID_WORK_DIMENSION)                      \
    X(-54, CL_INVALID_WORK_GROUP_SIZE)                     \
    X(-55, CL_INVALID_WORK_ITEM_SIZE)                      \
    X(-56, CL_INVALID_GLOBAL_OFFSET)                       \
    X(-57, CL_INVALID_EVENT_WAIT_LIST)                     \
    X(-58, CL_INVALID_EVENT)                               \
    X(-59, CL_INVALID_OPERATION)                           \
    X(-60, CL_INVALID_GL_OBJECT)                           \
    X(-61, CL_INVALID_BUFFER_SIZE)                         \
    X(-62, CL_INVALID_MIP_LEVEL)                           \
    X(-63, CL_INVALID_GLOBAL_WORK_SIZE)                    \
    X(-64, CL_INVALID_PROPERTY)                            \
    X(-65, CL_INVALID_IMAGE_DESCRIPTOR)                    \
    X(-66, CL_INVALID_COMPILER_OPTIONS)                    \
    X(-67, CL_INVALID_LINKER_OPTIONS)                      \
    X(-68, CL_INVALID_DEVICE_PARTITION_COUNT)              \
    X(-69, CL_INVALID_PIPE_SIZE)                           \
    X(-70, CL_INVALID_DEVICE_QUEUE)                        \
    X(-71, CL_INVALID_SPEC_ID)                             \
    X(-72, CL_MAX_SIZE_RESTRICTION_EXCEEDED)               \
    X(-1001, CL_PLATFORM_NOT_FOUND_KHR)

const char *tally__cl_error_name(cl_int code)
{
    switch (code) {
#define TALLY__CL_ERROR_CASE(number, name) \
    case number:                           \
        return #name;
        TALLY__CL_ERRORS(TALLY__CL_ERROR_CASE)
#undef TALLY__CL_ERROR_CASE
    }
    return "unknown OpenCL error";
}
