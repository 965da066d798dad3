/*
 * backends/cuda/cuda_driver.h - the CUDA backend's side of the driver
 * loader (cuda_loader.h): opening the driver and reporting its failures on
 * tally's error records.
 */
#ifndef TALLY_CUDA_DRIVER_H
#define TALLY_CUDA_DRIVER_H

#include "backend.h"
#include "cuda_loader.h"

/*
 * tally__cuda_open, with the reason of a failure written to the calling
 * thread's record: LIBRARY_MISSING, NO_DEVICE or BACKEND_ERROR (see
 * tally__cuda_open). Once per process; any thread.
 */
#define tally__cuda_load() tally__vendor_load(tally__cuda_open)

/*
 * Reports a failed driver call in one line on ctx (or the thread record when
 * ctx is NULL): "<what> failed: CUDA_ERROR_X: <driver text>", with the status
 * that tally__cuda_status gives. Returns that status.
 */
tally_status tally__cuda_error(tally_context *ctx, CUresult result, const char *what);

#endif
