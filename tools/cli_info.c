/*
 * tools/cli_info.c - `tally info`: versions, compiled backends, their
 * availability and devices, and what AUTO picks here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "json.h"

const char cli_info_usage[] =
    "usage: tally info [--json]\n"
    "\n"
    "Prints the library's version (at run time) and the header's (at build time),\n"
    "each backend (cuda, opencl, host): whether it is compiled in, whether it is\n"
    "available here and, if not, why; its devices (index, name, platform, GPU or\n"
    "CPU); and the backend and device that --backend auto would use (this honours\n"
    "TALLY_BACKEND and TALLY_DEVICE). --json prints the same as one JSON object.\n";

#define MAX_DEVICES 64

typedef struct backend_report {
    tally_backend backend;
    int compiled;
    tally_status status;
    char reason[512];
    int count; /* devices available */
    tally_device_info devices[MAX_DEVICES];
} backend_report;

static const tally_backend all_backends[] = {TALLY_BACKEND_CUDA, TALLY_BACKEND_OPENCL, TALLY_BACKEND_HOST};
#define N_BACKENDS (sizeof all_backends / sizeof all_backends[0])

static void probe(backend_report *r)
{
    r->compiled = tally_backend_compiled(r->backend);
    r->reason[0] = '\0';
    r->count = 0;
    int count = 0;
    r->status = tally_devices(r->backend, r->devices, MAX_DEVICES, &count);
    if (r->status != TALLY_OK) {
        snprintf(r->reason, sizeof r->reason, "%s", tally_last_error(NULL));
        if (r->reason[0] == '\0') snprintf(r->reason, sizeof r->reason, "%s", tally_status_string(r->status));
        return;
    }
    r->count = count < MAX_DEVICES ? count : MAX_DEVICES;
    if (r->count == 0) snprintf(r->reason, sizeof r->reason, "no device");
}

int cli_info(int argc, char **argv)
{
    int json = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(cli_info_usage, stdout);
            return CLI_EXIT_OK;
        } else return cli_usage_error(cli_info_usage, "info: unexpected argument '%s'", argv[i]);
    }

    backend_report *reports = calloc(N_BACKENDS, sizeof *reports);
    if (reports == NULL) return cli_io_error("out of memory");
    for (size_t b = 0; b < N_BACKENDS; b++) {
        reports[b].backend = all_backends[b];
        probe(&reports[b]);
    }

    /* What AUTO chooses: the one way to know is to ask for a context. */
    tally_context *ctx = NULL;
    tally_status auto_status = tally_context_create(TALLY_BACKEND_AUTO, TALLY_DEVICE_DEFAULT, &ctx);
    char auto_text[512];
    const char *auto_backend = NULL;
    if (auto_status == TALLY_OK) {
        auto_backend = tally_backend_name(tally_context_backend(ctx));
        snprintf(auto_text, sizeof auto_text, "%s", tally_context_device_name(ctx));
    } else {
        snprintf(auto_text, sizeof auto_text, "%s", tally_last_error(NULL));
    }

    unsigned lib_hex = tally_version();
    const char *lib_version = tally_version_string();
    int match = lib_hex == (unsigned)TALLY_VERSION_HEX;

    if (json) {
        printf("{\n  \"version\": {\"library\": ");
        harness_json_string(stdout, lib_version);
        printf(", \"library_hex\": \"0x%06x\", \"header\": ", lib_hex);
        harness_json_string(stdout, TALLY_VERSION_STRING);
        printf(", \"header_hex\": \"0x%06x\", \"match\": %s},\n", (unsigned)TALLY_VERSION_HEX,
               match ? "true" : "false");
        printf("  \"backends\": [\n");
        for (size_t b = 0; b < N_BACKENDS; b++) {
            const backend_report *r = &reports[b];
            printf("    {\"name\": \"%s\", \"compiled\": %s, \"available\": %s, \"status\": \"%s\", \"reason\": ",
                   tally_backend_name(r->backend), r->compiled ? "true" : "false",
                   r->count > 0 ? "true" : "false", tally_status_name(r->status));
            if (r->count > 0) printf("null");
            else harness_json_string(stdout, r->reason);
            printf(", \"devices\": [");
            for (int d = 0; d < r->count; d++) {
                printf("%s\n      {\"index\": %d, \"name\": ", d ? "," : "", r->devices[d].index);
                harness_json_string(stdout, r->devices[d].name);
                printf(", \"platform\": ");
                harness_json_string(stdout, r->devices[d].platform);
                printf(", \"gpu\": %s}", r->devices[d].is_gpu ? "true" : "false");
            }
            printf("%s]}%s\n", r->count > 0 ? "\n    " : "", b + 1 < N_BACKENDS ? "," : "");
        }
        printf("  ],\n  \"auto\": ");
        if (auto_status == TALLY_OK) {
            printf("{\"backend\": \"%s\", \"device\": ", auto_backend);
            harness_json_string(stdout, auto_text);
            printf("}\n");
        } else {
            printf("{\"backend\": null, \"status\": \"%s\", \"error\": ", tally_status_name(auto_status));
            harness_json_string(stdout, auto_text);
            printf("}\n");
        }
        printf("}\n");
    } else {
        printf("version:  library %s (0x%06x, loaded at run time), header %s (compiled into this tool)\n",
               lib_version, lib_hex, TALLY_VERSION_STRING);
        if (!match) printf("          WARNING: the library and the header this tool was built with differ\n");
        printf("backends:\n");
        for (size_t b = 0; b < N_BACKENDS; b++) {
            const backend_report *r = &reports[b];
            const char *name = tally_backend_name(r->backend);
            if (!r->compiled) {
                printf("  %-7s not compiled\n", name);
            } else if (r->count == 0) {
                printf("  %-7s compiled, unavailable: %s: %s\n", name, tally_status_name(r->status), r->reason);
            } else {
                printf("  %-7s compiled, available, %d device%s\n", name, r->count, r->count == 1 ? "" : "s");
                for (int d = 0; d < r->count; d++)
                    printf("            [%d] %s (platform: %s; %s)\n", r->devices[d].index, r->devices[d].name,
                           r->devices[d].platform, r->devices[d].is_gpu ? "GPU" : "not a GPU");
            }
        }
        if (auto_status == TALLY_OK) printf("auto:     %s, device '%s'\n", auto_backend, auto_text);
        else printf("auto:     no backend: %s: %s\n", tally_status_name(auto_status), auto_text);
    }
    tally_context_release(ctx);
    free(reports);
    if (fflush(stdout) != 0 || ferror(stdout)) return cli_io_error("cannot write to standard output");
    return CLI_EXIT_OK;
}
