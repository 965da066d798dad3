/*
 * backends/opencl/opencl_api.h - the OpenCL backend's side of the loader
 * (opencl_loader.h): opening libOpenCL and reporting failed calls on
 * tally's error records.
 */
#ifndef TALLY_OPENCL_API_H
#define TALLY_OPENCL_API_H

#include "backend.h"
#include "opencl_loader.h"

/* tally__cl_open, with the reason of a failure (TALLY_LIBRARY_MISSING)
 * written to the calling thread's record. Once per process; any thread. */
#define tally__cl_load() tally__vendor_load(tally__cl_open)

/* Reports a failed call on ctx (NULL: the thread): "<call> failed:
 * <NAME> (<code>)". Allocation failures (CL_MEM_OBJECT_ALLOCATION_FAILURE,
 * CL_OUT_OF_RESOURCES, CL_OUT_OF_HOST_MEMORY, CL_INVALID_BUFFER_SIZE) give
 * TALLY_OUT_OF_MEMORY, everything else TALLY_BACKEND_ERROR. */
tally_status tally__cl_error(tally_context *ctx, cl_int code, const char *call);

#endif /* TALLY_OPENCL_API_H */
