/*
 * tools/cli_first_use.c - a word before the long wait of a first OpenCL use.
 *
 * The first context on an OpenCL device compiles tally's kernels, which
 * takes 10-20 s on a CPU device; the library caches the binary and never
 * prints, so without this the command sits silent. The CLI says once, on
 * stderr, that it is building and where the result goes, when the cache
 * holds no binary yet (or is turned off). A rough guess (a cache may hold
 * another device's binary), but it costs a directory listing, not a build.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

/* The library's cache location (backends/opencl/opencl_program.c). */
static int cache_location(char *dir, size_t capacity)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (xdg != NULL && xdg[0] == '/') n = snprintf(dir, capacity, "%s/tally", xdg);
    else if (home != NULL && home[0] == '/') n = snprintf(dir, capacity, "%s/.cache/tally", home);
    else return 0;
    return n > 0 && (size_t)n < capacity;
}

static int holds_a_binary(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        found = len > 4 && strcmp(e->d_name + len - 4, ".bin") == 0;
    }
    closedir(d);
    return found;
}

/* 1 when a context of `backend` may be an OpenCL one: OpenCL itself, or AUTO
 * where CUDA has no device (AUTO then tries OpenCL next). */
static int may_use_opencl(tally_backend backend)
{
    if (backend == TALLY_BACKEND_OPENCL) return 1;
    if (backend != TALLY_BACKEND_AUTO) return 0;
    const char *env = getenv("TALLY_BACKEND");
    if (env != NULL && env[0] != '\0' && strcmp(env, "auto") != 0) return strcmp(env, "opencl") == 0;
    int count = 0;
    return tally_devices(TALLY_BACKEND_CUDA, NULL, 0, &count) != TALLY_OK || count == 0;
}

void cli_note_first_opencl_use(tally_backend backend)
{
    if (!tally_backend_compiled(TALLY_BACKEND_OPENCL) || !may_use_opencl(backend)) return;
    const char *off = getenv("TALLY_CACHE");
    if (off != NULL && strcmp(off, "0") == 0) {
        fputs("tally: TALLY_CACHE=0, so OpenCL kernels are built on every run (10-20 s on a CPU device)\n",
              stderr);
        return;
    }
    char dir[4096];
    if (!cache_location(dir, sizeof dir)) {
        fputs("tally: no cache directory (set XDG_CACHE_HOME or HOME): OpenCL kernels are built on every run\n",
              stderr);
        return;
    }
    if (holds_a_binary(dir)) return;
    fprintf(stderr,
            "tally: building the OpenCL kernels for this device once (10-20 s on a CPU device); "
            "they are cached in %s for later runs\n",
            dir);
}
