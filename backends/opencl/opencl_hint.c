/*
 * backends/opencl/opencl_hint.c - the likely cause of "no OpenCL device",
 * for the NO_DEVICE message.
 *
 * The common case seen in practice is not a missing GPU but a driver that
 * cannot use its own kernel cache: PoCL keeps one under $POCL_CACHE_DIR,
 * else $XDG_CACHE_HOME/pocl, else ~/.cache/pocl, and when that directory is
 * read-only or its disk is full it reports no device (or its compiler exits
 * the process). tally cannot fix that, but it can name the directory and say
 * whether it is writable, and how to skip OpenCL.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "opencl_backend.h"

/* The deepest existing ancestor of path (path itself when it exists). */
static void existing_ancestor(const char *path, char *out, size_t capacity)
{
    snprintf(out, capacity, "%s", path);
    while (out[0] != '\0' && access(out, F_OK) != 0) {
        char *slash = strrchr(out, '/');
        if (slash == NULL || slash == out) {
            snprintf(out, capacity, "/");
            return;
        }
        *slash = '\0';
    }
}

const char *tally__cl_no_device_hint(char *buf, size_t capacity)
{
    const char *pocl = getenv("POCL_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char dir[1024];
    if (pocl != NULL && pocl[0] != '\0')
        snprintf(dir, sizeof dir, "%s", pocl);
    else if (xdg != NULL && xdg[0] == '/')
        snprintf(dir, sizeof dir, "%s/pocl", xdg);
    else if (home != NULL && home[0] == '/')
        snprintf(dir, sizeof dir, "%s/.cache/pocl", home);
    else
        snprintf(dir, sizeof dir, "(no cache directory: HOME and XDG_CACHE_HOME unset)");
    char probe[1024];
    existing_ancestor(dir, probe, sizeof probe);
    const char *state = "";
    struct statvfs vfs;
    struct stat st;
    if (dir[0] == '/') {
        if (stat(probe, &st) == 0 && !S_ISDIR(st.st_mode))
            state = " (a file is in the way of that path)";
        else if (access(probe, W_OK) != 0)
            state = " (it is not writable here)";
        else if (statvfs(probe, &vfs) == 0 && vfs.f_bavail == 0)
            state = " (its file system is full)";
    }
    snprintf(buf, capacity,
             "; a likely cause is the driver's own kernel cache: PoCL needs to write %s%s (set POCL_CACHE_DIR "
             "or XDG_CACHE_HOME to a writable directory), and needs /sys mounted to list CPUs. "
             "TALLY_BACKEND=host (or cuda) makes AUTO skip OpenCL; see the README's troubleshooting section",
             dir, state);
    return buf;
}
