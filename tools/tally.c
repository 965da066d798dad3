/*
 * tools/tally.c - the `tally` command-line tool: inspect the backends, run
 * one op on files, cross-check every backend against the host and float64
 * references, and run the founding workloads. It uses only the public API
 * (tally.h) and, for the cross-check, the float64 references of
 * harness/reference.h.
 */
#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "cli_mpi.h"

static const char usage[] =
    "usage: tally COMMAND [ARGS]\n"
    "\n"
    "Commands:\n"
    "  info [--json]              versions, backends, devices, and what auto picks\n"
    "  run OP [OPTIONS]           run one op on raw fp32 files (tally run --help)\n"
    "  crosscheck [--backends LIST] [--quick] [--json]\n"
    "                             every op on every backend, compared bit for bit\n"
    "                             with the host and with float64 references\n"
    "  demo [--backend B]         the founding workloads at their founding shapes\n"
    "  help [COMMAND]             this text, or a command's\n"
    "  version, -V, --version     the library's version\n"
    "\n"
    "Environment: TALLY_BACKEND and TALLY_DEVICE choose what 'auto' means.\n"
    "Exit status: 0 success; 1 a library or I/O error, printed as\n"
    "'error: STATUS_NAME: message', or a crosscheck mismatch; 2 bad arguments.\n";

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *usage;
} command;

static const command commands[] = {
    {.name = "info", .fn = cli_info, .usage = cli_info_usage},
    {.name = "run", .fn = cli_run, .usage = cli_run_usage},
    {.name = "crosscheck", .fn = cli_crosscheck, .usage = cli_crosscheck_usage},
    {.name = "demo", .fn = cli_demo, .usage = cli_demo_usage},
};

int main(int argc, char **argv)
{
    if (argc < 2) return cli_usage_error(usage, "name a command");
    const char *name = argv[1];
    if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        if (argc > 2)
            for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
                if (strcmp(argv[2], commands[i].name) == 0) {
                    fputs(commands[i].usage, stdout);
                    return CLI_EXIT_OK;
                }
        if (argc > 2) return cli_usage_error(usage, "help: unknown command '%s'", argv[2]);
        fputs(usage, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "version") == 0 || strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        if (argc > 2) return cli_usage_error(usage, "version takes no arguments");
        printf("%s\n", tally_version_string());
        return CLI_EXIT_OK;
    }
    /* run and crosscheck under mpirun: tools/cli_mpi.c. */
    if ((strcmp(name, "run") == 0 || strcmp(name, "crosscheck") == 0) && cli_wants_mpi(argc - 2, argv + 2))
        return cli_mpi(name, argc - 2, argv + 2);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0) {
            cli_command = commands[i].name;
            return commands[i].fn(argc - 2, argv + 2);
        }
    return cli_usage_error(usage, "unknown command '%s'", name);
}
