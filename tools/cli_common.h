/*
 * tools/cli_common.h - what the subcommands of the `tally` tool share:
 * exit codes, strict number parsing, a small long-option scanner, error
 * reporting, raw little-endian files, clocks and memory queries.
 *
 * The tool reaches the library only through the public API (tally.h).
 */
#ifndef TALLY_CLI_COMMON_H
#define TALLY_CLI_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "args.h"
#include "tally.h"

/* Exit codes of every subcommand. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1  /* a library error, an I/O error or a crosscheck mismatch */
#define CLI_EXIT_USAGE 2 /* bad arguments */

#if defined(__GNUC__)
#  define CLI_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#  define CLI_PRINTF(fmt_index, first_arg)
#endif

/* ---- Subcommands (one file each). ---- */
int cli_info(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_crosscheck(int argc, char **argv);
int cli_demo(int argc, char **argv);

extern const char cli_info_usage[];
extern const char cli_run_usage[];
extern const char cli_crosscheck_usage[];
extern const char cli_demo_usage[];

/* ---- Number parsing: the whole string must be the number. ---- */

/* Unsigned 64-bit: decimal digits, or 0x followed by hex digits. Rejects an
 * empty string, signs, spaces, junk after the digits and overflow.
 * Returns 0 on success, -1 otherwise. */
int cli_parse_u64(const char *s, uint64_t *out);
/* A non-negative count that fits int64_t (sizes and shapes). */
int cli_parse_size(const char *s, int64_t *out);
/* A non-negative int (device indices). */
int cli_parse_index(const char *s, int *out);

/* Long options: harness/args.h. */

/* ---- Reporting. ---- */

/* "tally: <message>" and the usage text on stderr; returns CLI_EXIT_USAGE. */
/* Prints 'tally: MESSAGE' and "see 'tally COMMAND --help'" on stderr and
 * returns CLI_EXIT_USAGE. `usage` is the command's text (kept for the
 * callers; the full text is printed by --help, not on errors). */
int cli_usage_error(const char *usage, const char *fmt, ...) CLI_PRINTF(2, 3);
/* The subcommand being run ("run", ...), NULL before one is chosen; set by
 * main so that errors can point at the right --help. */
extern const char *cli_command;

/* Before creating a context of `backend`: says on stderr that the first
 * OpenCL use builds the kernels and where they are cached, when the cache
 * holds none yet (tools/cli_first_use.c). */
void cli_note_first_opencl_use(tally_backend backend);
/* "error: STATUS_NAME: <tally_last_error(ctx)>" on stderr (the status's own
 * sentence when the library left no message); returns CLI_EXIT_FAIL. */
int cli_library_error(const tally_context *ctx, tally_status status);
/* "error: IO_ERROR: <message>" on stderr; returns CLI_EXIT_FAIL. */
int cli_io_error(const char *fmt, ...) CLI_PRINTF(1, 2);

/* ---- Raw files: little-endian 4-byte elements. ---- */

/* Reads a file that must hold exactly `count` 4-byte elements into a new
 * malloc'd array (at least 4 bytes even when count is 0). Returns
 * CLI_EXIT_OK, CLI_EXIT_USAGE (the size does not match: message printed) or
 * CLI_EXIT_FAIL (the file cannot be read: message printed). */
int cli_read_elements(const char *what, const char *path, uint64_t count, void **out);
/* The same for a file of `dtype` elements: 4-byte for TALLY_F32, 2-byte
 * little-endian for TALLY_BF16 and TALLY_F16, which are widened to floats
 * (exactly) in *out. */
int cli_read_typed_elements(const char *what, const char *path, tally_dtype dtype, uint64_t count, void **out);
/* Writes count 4-byte elements; CLI_EXIT_OK or CLI_EXIT_FAIL (printed). */
int cli_write_elements(const char *path, const void *data, uint64_t count);

/*
 * Outputs that appear all at once or not at all. Each output is written to
 * a temporary file in its target's directory (so that rename cannot cross
 * file systems); cli_staged_commit renames every one into place only after
 * all were written completely, and cli_staged_abort removes the temporaries,
 * leaving any pre-existing targets untouched. SIGXFSZ must be ignored by the
 * caller so that a file-size limit comes back as an error (EFBIG) rather
 * than killing the process with temporaries on disk.
 */
typedef struct cli_staged {
    const char *path;   /* the target as given (for messages) */
    const char *target; /* the file renamed over: path, or resolved when path is a symlink */
    char resolved[4096];
    char tmp[4096];     /* the temporary, "" when none (not staged, or done) */
    int fd;
} cli_staged;

/* Creates the temporary of `path` (mode as a new file would get). A path
 * that names a device, FIFO or socket is opened and written in place. */
int cli_staged_open(cli_staged *s, const char *path);
/* Appends count little-endian 4-byte elements. */
int cli_staged_write(cli_staged *s, const void *data, uint64_t count);
/* Appends count elements of `dtype`: floats holding values of TALLY_BF16 or
 * TALLY_F16 are written as their 2-byte little-endian encodings, anything
 * else as cli_staged_write does. */
int cli_staged_write_typed(cli_staged *s, const float *data, uint64_t count, tally_dtype dtype);
/* Closes and renames all n temporaries into place; on any failure removes
 * the ones not yet renamed. CLI_EXIT_OK or CLI_EXIT_FAIL (printed). */
int cli_staged_commit(cli_staged *s, int n);
/* Closes and removes all n temporaries (the targets are not touched). */
void cli_staged_abort(cli_staged *s, int n);

/* ---- Odds and ends. ---- */

/* Seconds on a monotonic clock. */
double cli_now(void);
/* Bytes of memory the system can still give (MemAvailable), or 0 if unknown. */
uint64_t cli_mem_available(void);
/* Online processors (at least 1). */
int cli_processors(void);
/* 1 when a and b are the same bits, or both are NaNs (any payload). */
int cli_same_bits(uint32_t a, uint32_t b);
uint32_t cli_f32_bits(float f);
float cli_bits_f32(uint32_t u);

#endif /* TALLY_CLI_COMMON_H */
