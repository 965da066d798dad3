/*
 * backends/opencl/opencl_loader.h - the OpenCL entry points, looked up at
 * run time so that nothing links libOpenCL: a machine without an
 * OpenCL loader still runs the other backends, and this one reports
 * TALLY_LIBRARY_MISSING. The one list of entry points for the library, the
 * tests and the bench alike.
 *
 * The OpenCL headers are read for types and constants only (OpenCL 1.2).
 * TALLY__CL_SYMBOLS declares the table's members and drives their lookup,
 * so the two cannot disagree.
 *
 * This is the non-exported static library tally_opencl_loader (see
 * backends/opencl/meson.build). It depends on nothing of libtally but the
 * public tally_status, so an executable that links libtally's shared library
 * can link it too; the library's own error reporting around it is in
 * opencl_api.h.
 */
#ifndef TALLY_OPENCL_LOADER_H
#define TALLY_OPENCL_LOADER_H

#ifndef CL_TARGET_OPENCL_VERSION
#  define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "tally.h"

/* X(return type, name, parameter list). The last group is what only the
 * tests and the bench call, as an application would (copies, markers and
 * their profiling). */
#define TALLY__CL_SYMBOLS(X)                                                                              \
    X(cl_int, clGetPlatformIDs, (cl_uint, cl_platform_id *, cl_uint *))                                   \
    X(cl_int, clGetPlatformInfo, (cl_platform_id, cl_platform_info, size_t, void *, size_t *))            \
    X(cl_int, clGetDeviceIDs, (cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *))       \
    X(cl_int, clGetDeviceInfo, (cl_device_id, cl_device_info, size_t, void *, size_t *))                  \
    X(cl_int, clRetainDevice, (cl_device_id))                                                             \
    X(cl_int, clReleaseDevice, (cl_device_id))                                                            \
    X(cl_context, clCreateContext,                                                                        \
      (const cl_context_properties *, cl_uint, const cl_device_id *,                                      \
       void(CL_CALLBACK *)(const char *, const void *, size_t, void *), void *, cl_int *))                 \
    X(cl_int, clRetainContext, (cl_context))                                                              \
    X(cl_int, clReleaseContext, (cl_context))                                                             \
    X(cl_int, clGetContextInfo, (cl_context, cl_context_info, size_t, void *, size_t *))                  \
    X(cl_command_queue, clCreateCommandQueue,                                                             \
      (cl_context, cl_device_id, cl_command_queue_properties, cl_int *))                                  \
    X(cl_int, clRetainCommandQueue, (cl_command_queue))                                                   \
    X(cl_int, clReleaseCommandQueue, (cl_command_queue))                                                  \
    X(cl_int, clGetCommandQueueInfo, (cl_command_queue, cl_command_queue_info, size_t, void *, size_t *)) \
    X(cl_mem, clCreateBuffer, (cl_context, cl_mem_flags, size_t, void *, cl_int *))                       \
    X(cl_int, clRetainMemObject, (cl_mem))                                                                \
    X(cl_int, clReleaseMemObject, (cl_mem))                                                               \
    X(cl_int, clGetMemObjectInfo, (cl_mem, cl_mem_info, size_t, void *, size_t *))                        \
    X(cl_program, clCreateProgramWithSource, (cl_context, cl_uint, const char **, const size_t *, cl_int *)) \
    X(cl_program, clCreateProgramWithBinary,                                                              \
      (cl_context, cl_uint, const cl_device_id *, const size_t *, const unsigned char **, cl_int *,       \
       cl_int *))                                                                                         \
    X(cl_int, clBuildProgram,                                                                             \
      (cl_program, cl_uint, const cl_device_id *, const char *, void(CL_CALLBACK *)(cl_program, void *),  \
       void *))                                                                                           \
    X(cl_int, clGetProgramInfo, (cl_program, cl_program_info, size_t, void *, size_t *))                  \
    X(cl_int, clGetProgramBuildInfo, (cl_program, cl_device_id, cl_program_build_info, size_t, void *,    \
                                      size_t *))                                                          \
    X(cl_int, clReleaseProgram, (cl_program))                                                             \
    X(cl_kernel, clCreateKernel, (cl_program, const char *, cl_int *))                                    \
    X(cl_int, clReleaseKernel, (cl_kernel))                                                               \
    X(cl_int, clSetKernelArg, (cl_kernel, cl_uint, size_t, const void *))                                 \
    X(cl_int, clGetKernelWorkGroupInfo, (cl_kernel, cl_device_id, cl_kernel_work_group_info, size_t,      \
                                         void *, size_t *))                                               \
    X(cl_int, clEnqueueNDRangeKernel,                                                                     \
      (cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *, const size_t *, cl_uint,     \
       const cl_event *, cl_event *))                                                                     \
    X(cl_int, clEnqueueWriteBuffer,                                                                       \
      (cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *, cl_uint, const cl_event *,        \
       cl_event *))                                                                                       \
    X(cl_int, clEnqueueReadBuffer,                                                                        \
      (cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint, const cl_event *, cl_event *)) \
    X(cl_int, clEnqueueFillBuffer,                                                                        \
      (cl_command_queue, cl_mem, const void *, size_t, size_t, size_t, cl_uint, const cl_event *,         \
       cl_event *))                                                                                       \
    X(void *, clEnqueueMapBuffer,                                                                         \
      (cl_command_queue, cl_mem, cl_bool, cl_map_flags, size_t, size_t, cl_uint, const cl_event *,        \
       cl_event *, cl_int *))                                                                             \
    X(cl_int, clEnqueueUnmapMemObject, (cl_command_queue, cl_mem, void *, cl_uint, const cl_event *,      \
                                        cl_event *))                                                      \
    X(cl_int, clFinish, (cl_command_queue))                                                               \
    X(cl_int, clEnqueueCopyBuffer,                                                                        \
      (cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint, const cl_event *, cl_event *))  \
    X(cl_int, clEnqueueMarkerWithWaitList, (cl_command_queue, cl_uint, const cl_event *, cl_event *))     \
    X(cl_int, clGetEventProfilingInfo, (cl_event, cl_profiling_info, size_t, void *, size_t *))           \
    X(cl_int, clWaitForEvents, (cl_uint, const cl_event *))                                               \
    X(cl_int, clReleaseEvent, (cl_event))

typedef struct tally__cl_api {
#define TALLY__CL_MEMBER(ret, name, params) ret(CL_API_CALL *name) params;
    TALLY__CL_SYMBOLS(TALLY__CL_MEMBER)
#undef TALLY__CL_MEMBER
} tally__cl_api;

/* The table, valid once tally__cl_load returned TALLY_OK. */
extern tally__cl_api tally__cl;

/* Opens libOpenCL.so.1 (then libOpenCL.so) and resolves every symbol, once
 * per process (thread-safe). Returns TALLY_OK, or TALLY_LIBRARY_MISSING with
 * *message (when message is not NULL) set to a one-line reason naming the
 * library or symbol that was missing, which lives as long as the process. */
tally_status tally__cl_open(const char **message);

/* "CL_OUT_OF_RESOURCES" for -5; "unknown OpenCL error" for codes it does
 * not know. */
const char *tally__cl_error_name(cl_int code);

#endif /* TALLY_OPENCL_LOADER_H */
