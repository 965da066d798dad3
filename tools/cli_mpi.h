/*
 * tools/cli_mpi.h - the hook between the `tally` tool's dispatcher and its
 * MPI mode (tools/cli_mpi.c): `tally run OP ... --mpi` and
 * `tally crosscheck --mpi`, under mpirun.
 */
#ifndef TALLY_CLI_MPI_H
#define TALLY_CLI_MPI_H

#include <stdio.h>
#include <string.h>

#include "cli_common.h"

/* 1 when a command's arguments ask for the MPI mode. */
static inline int cli_wants_mpi(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--mpi") == 0) return 1;
    return 0;
}

#if defined(TALLY_CLI_MPI) && TALLY_CLI_MPI
/* Runs `command` ("run" or "crosscheck") with its arguments on every rank of
 * MPI_COMM_WORLD; returns the exit status (the same on every rank). */
int cli_mpi(const char *command, int argc, char **argv);
#else
static inline int cli_mpi(const char *command, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "tally: %s --mpi: this tally was built without MPI (install libopenmpi-dev and "
                    "reconfigure with -Dmpi=enabled)\n", command);
    return CLI_EXIT_USAGE;
}
#endif

#endif
