/*
 * backends/cuda/cuda_loader.c - opens the CUDA driver at run time (see
 * cuda_loader.h) and names its results.
 */
#include "cuda_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

tally__cuda_api tally__cu;

/* Each pointer type in the list must be the type cuda.h gives the same
 * symbol, or a call through it would pass arguments the driver does not
 * expect. gcc and clang can check that at compile time. */
#if defined(__GNUC__)
#  define TALLY__CUDA_CHECK(sym, params)                                            \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&sym), CUresult(*) params), \
                   #sym " is declared differently in cuda.h");
TALLY__CUDA_SYMBOLS(TALLY__CUDA_CHECK)
#  undef TALLY__CUDA_CHECK
#endif

/* The outcome of the one load attempt, replayed to every later caller. */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static tally_status load_status = TALLY_BACKEND_ERROR;
static char load_message[512];

/* The stub libcuda that the toolkit ships for linking cannot name its own
 * errors, so that one case is spelt out here. */
void tally__cuda_describe(CUresult result, char *dst, size_t capacity)
{
    const char *name = NULL, *text = NULL;
    if (tally__cu.cuGetErrorName == NULL || tally__cu.cuGetErrorName(result, &name) != CUDA_SUCCESS)
        name = NULL;
    if (tally__cu.cuGetErrorString == NULL || tally__cu.cuGetErrorString(result, &text) != CUDA_SUCCESS)
        text = NULL;
    if (name != NULL)
        snprintf(dst, capacity, "%s: %s", name, text != NULL ? text : "no description");
    else if (result == CUDA_ERROR_STUB_LIBRARY)
        snprintf(dst, capacity, "CUDA_ERROR_STUB_LIBRARY: it is the CUDA toolkit's stub, not a driver");
    else
        snprintf(dst, capacity, "CUresult %d", (int)result);
}

/* dlsym returns void *. ISO C has no conversion from that to a function
 * pointer, so the bits are copied; POSIX guarantees they mean the same. */
static void *resolve(void *lib, const char *first, const char *second)
{
    void *address = dlsym(lib, first);
    if (address == NULL && second != NULL) address = dlsym(lib, second);
    return address;
}

static int missing(void *lib, const char *sym)
{
    load_status = TALLY_LIBRARY_MISSING;
    snprintf(load_message, sizeof load_message, "%s lacks the symbol %s (the NVIDIA driver is too old for tally)",
             TALLY__CUDA_LIBRARY, sym);
    memset(&tally__cu, 0, sizeof tally__cu);
    dlclose(lib);
    return 1;
}

static void load_driver(void)
{
    /* RTLD_LOCAL keeps the driver's symbols out of the global namespace; the
     * app's own libcudart, if any, opens the same library and shares it. */
    void *lib = dlopen(TALLY__CUDA_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        load_status = TALLY_LIBRARY_MISSING;
        snprintf(load_message, sizeof load_message, "%s was not found (%s)", TALLY__CUDA_LIBRARY,
                 why != NULL ? why : "dlopen failed");
        return;
    }
#define TALLY__CUDA_RESOLVE(sym, params)                                         \
    {                                                                            \
        void *address = resolve(lib, #sym, NULL);                                \
        if (address == NULL && missing(lib, #sym)) return;                       \
        memcpy(&tally__cu.sym, &address, sizeof address);                        \
    }
    TALLY__CUDA_SYMBOLS(TALLY__CUDA_RESOLVE)
#undef TALLY__CUDA_RESOLVE
#define TALLY__CUDA_RESOLVE_RENAMED(member, first, second, params)               \
    {                                                                            \
        void *address = resolve(lib, first, second);                             \
        if (address == NULL && missing(lib, first)) return;                      \
        memcpy(&tally__cu.member, &address, sizeof address);                     \
    }
    TALLY__CUDA_RENAMED(TALLY__CUDA_RESOLVE_RENAMED)
#undef TALLY__CUDA_RESOLVE_RENAMED

    CUresult r = tally__cu.cuInit(0);
    if (r != CUDA_SUCCESS) {
        char what[320];
        tally__cuda_describe(r, what, sizeof what);
        load_status = tally__cuda_status(r);
        snprintf(load_message, sizeof load_message, "%s was loaded but cuInit failed: %s",
                 TALLY__CUDA_LIBRARY, what);
        return;
    }
    /* The library stays open for the life of the process: function pointers
     * into it are held by every context. */
    load_status = TALLY_OK;
    load_message[0] = '\0';
}

tally_status tally__cuda_open(const char **message)
{
    pthread_once(&load_once, load_driver);
    if (message != NULL) *message = load_message;
    return load_status;
}

/* Every name below exists in cuda.h since CUDA 11.1; the fatbin's sm_89 and
 * sm_90 targets need CUDA 11.8 anyway. */
tally_status tally__cuda_status(CUresult result)
{
    switch (result) {
    case CUDA_SUCCESS:
        return TALLY_OK;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return TALLY_OUT_OF_MEMORY;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_SYSTEM_NOT_READY:
        return TALLY_NO_DEVICE;
    /* A stub libcuda (the one in the toolkit's stubs/ folder) or a driver
     * that cannot run on this system: as if no usable driver were
     * installed. */
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
        return TALLY_LIBRARY_MISSING;
    /* The module has no code this device can run: too old a GPU, or a
     * driver older than the toolkit that built tally's kernels. */
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_NOT_SUPPORTED:
        return TALLY_DEVICE_UNSUITABLE;
    default:
        return TALLY_BACKEND_ERROR;
    }
}
