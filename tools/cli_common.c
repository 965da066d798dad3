/*
 * tools/cli_common.c - shared helpers of the `tally` tool (see cli_common.h).
 */
/* realpath is an XSI interface. */
#define _XOPEN_SOURCE 700

#include "cli_common.h"
#include "tally/half.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- Numbers ---------------------------------------------------------- */

static int digit_value(char c, unsigned base)
{
    unsigned v;
    if (c >= '0' && c <= '9') v = (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v = (unsigned)(c - 'a') + 10u;
    else if (c >= 'A' && c <= 'F') v = (unsigned)(c - 'A') + 10u;
    else return -1;
    return v < base ? (int)v : -1;
}

/* Written by hand rather than with strtoull, which accepts leading spaces,
 * a sign ("-1" wraps to 2^64 - 1) and octal, none of which a seed or a
 * shape should silently become. */
int cli_parse_u64(const char *s, uint64_t *out)
{
    if (s == NULL || out == NULL) return -1;
    unsigned base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    if (*s == '\0') return -1;
    uint64_t v = 0;
    for (; *s != '\0'; s++) {
        int d = digit_value(*s, base);
        if (d < 0) return -1;
        if (v > (UINT64_MAX - (uint64_t)d) / base) return -1;
        v = v * base + (uint64_t)d;
    }
    *out = v;
    return 0;
}

int cli_parse_size(const char *s, int64_t *out)
{
    uint64_t v;
    if (cli_parse_u64(s, &v) != 0 || v > (uint64_t)INT64_MAX) return -1;
    *out = (int64_t)v;
    return 0;
}

int cli_parse_index(const char *s, int *out)
{
    uint64_t v;
    if (cli_parse_u64(s, &v) != 0 || v > 1000000u) return -1;
    *out = (int)v;
    return 0;
}

/* ---- Options ---------------------------------------------------------- */

/* ---- Reporting -------------------------------------------------------- */

const char *cli_command = NULL;

/* One line that says what is wrong and where the full text is: a wall of
 * usage hides the one line that matters. */
int cli_usage_error(const char *usage, const char *fmt, ...)
{
    (void)usage;
    va_list ap;
    va_start(ap, fmt);
    fputs("tally: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (cli_command != NULL) fprintf(stderr, "\nsee 'tally %s --help'\n", cli_command);
    else fputs("\nsee 'tally --help'\n", stderr);
    return CLI_EXIT_USAGE;
}

int cli_library_error(const tally_context *ctx, tally_status status)
{
    const char *message = tally_last_error(ctx);
    if (message == NULL || message[0] == '\0') message = tally_status_string(status);
    fprintf(stderr, "error: %s: %s\n", tally_status_name(status), message);
    return CLI_EXIT_FAIL;
}

int cli_io_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("error: IO_ERROR: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return CLI_EXIT_FAIL;
}

/* ---- Files ------------------------------------------------------------ */

static int host_is_little_endian(void)
{
    const uint32_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* Files are little-endian; a big-endian host swaps each element. */
static void to_or_from_little_endian(uint32_t *p, uint64_t count)
{
    if (host_is_little_endian()) return;
    for (uint64_t i = 0; i < count; i++) {
        uint32_t v = p[i];
        p[i] = (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
    }
}

/* Reads exactly count elements of `size` bytes (4 or 2), little-endian on
 * disk, into a fresh host array of 4-byte elements: 2-byte elements are
 * widened from `dtype` (TALLY_BF16 or TALLY_F16) to floats, exactly. */
static int read_elements(const char *what, const char *path, uint64_t count, size_t size, tally_dtype dtype,
                         void **out)
{
    *out = NULL;
    const char *type = size == 4u ? "fp32" : dtype == TALLY_BF16 ? "bf16" : "f16";
    if (count > (uint64_t)SIZE_MAX / 4u) {
        fprintf(stderr, "tally: %s: %llu elements do not fit this machine's memory\n", what,
                (unsigned long long)count);
        return CLI_EXIT_USAGE;
    }
    size_t bytes = (size_t)count * size;
    FILE *f = fopen(path, "rb");
    if (f == NULL) return cli_io_error("cannot open %s file '%s': %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size != (uint64_t)bytes) {
        fclose(f);
        fprintf(stderr, "tally: %s file '%s' has %lld bytes but its shape needs %llu (%llu %s values)\n",
                what, path, (long long)sb.st_size, (unsigned long long)bytes, (unsigned long long)count, type);
        return CLI_EXIT_USAGE;
    }
    void *data = malloc(count > 0 ? (size_t)count * 4u : 4u);
    if (data == NULL) {
        fclose(f);
        return cli_io_error("out of memory reading '%s' (%zu bytes)", path, bytes);
    }
    size_t got = fread(data, 1, bytes, f);
    int extra = fgetc(f) != EOF; /* non-regular files (pipes) are sized by reading */
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(data);
        return cli_io_error("cannot read %s file '%s'", what, path);
    }
    if (got != bytes || extra) {
        free(data);
        fprintf(stderr, "tally: %s file '%s' is %s than its shape needs (%zu bytes, %llu %s values)\n",
                what, path, got != bytes ? "shorter" : "longer", bytes, (unsigned long long)count, type);
        return CLI_EXIT_USAGE;
    }
    if (size == 4u) {
        to_or_from_little_endian(data, count);
    } else {
        /* Widen in place from the end, so no 2-byte element is overwritten
         * before it is read; bytes are assembled little-endian. */
        const unsigned char *b = data;
        float *f32 = data;
        for (uint64_t k = count; k-- > 0;) {
            const tally_u32 h = (tally_u32)b[2 * k] | ((tally_u32)b[2 * k + 1] << 8);
            f32[k] = dtype == TALLY_BF16 ? tally_bf16_to_f32(h) : tally_f16_to_f32(h);
        }
    }
    *out = data;
    return CLI_EXIT_OK;
}

int cli_read_elements(const char *what, const char *path, uint64_t count, void **out)
{
    return read_elements(what, path, count, 4u, TALLY_F32, out);
}

int cli_read_typed_elements(const char *what, const char *path, tally_dtype dtype, uint64_t count, void **out)
{
    if (dtype == TALLY_BF16 || dtype == TALLY_F16) return read_elements(what, path, count, 2u, dtype, out);
    return read_elements(what, path, count, 4u, TALLY_F32, out);
}

int cli_write_elements(const char *path, const void *data, uint64_t count)
{
    size_t bytes = (size_t)count * 4u;
    const void *src = data;
    uint32_t *swapped = NULL;
    if (!host_is_little_endian() && count > 0) {
        swapped = malloc(bytes);
        if (swapped == NULL) return cli_io_error("out of memory writing '%s'", path);
        memcpy(swapped, data, bytes);
        to_or_from_little_endian(swapped, count);
        src = swapped;
    }
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        free(swapped);
        return cli_io_error("cannot create '%s': %s", path, strerror(errno));
    }
    size_t put = bytes > 0 ? fwrite(src, 1, bytes, f) : 0;
    int failed = put != bytes || ferror(f);
    if (fclose(f) != 0) failed = 1;
    free(swapped);
    if (failed) return cli_io_error("cannot write '%s': %s", path, strerror(errno));
    return CLI_EXIT_OK;
}

/* ---- All-or-nothing outputs -------------------------------------------- */

int cli_staged_open(cli_staged *s, const char *path)
{
    s->path = path;
    s->tmp[0] = '\0';
    s->fd = -1;
    /* Only a regular file (or a new one) is staged. A device, FIFO or socket
     * (/dev/null, /dev/stdout, a pipe) is written in place: renaming over it
     * would replace the node itself. */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        s->fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (s->fd < 0) return cli_io_error("cannot open '%s': %s", path, strerror(errno));
        return CLI_EXIT_OK;
    }
    /* A symlink is written through: the temporary goes beside the file it
     * names, and the rename replaces that file, not the link. */
    char resolved[4096];
    struct stat lst;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) && realpath(path, resolved) != NULL &&
        strlen(resolved) < sizeof s->resolved) {
        memcpy(s->resolved, resolved, strlen(resolved) + 1);
        path = s->resolved;
    }
    s->target = path;
    /* The temporary lives beside the target: "<dir>/.<name>.tmp-XXXXXX". */
    const char *slash = strrchr(path, '/');
    int dir_len = slash != NULL ? (int)(slash - path + 1) : 0;
    const char *base = slash != NULL ? slash + 1 : path;
    int n = snprintf(s->tmp, sizeof s->tmp, "%.*s.%s.tmp-XXXXXX", dir_len, path, base);
    if (base[0] == '\0' || n < 0 || (size_t)n >= sizeof s->tmp) {
        s->tmp[0] = '\0';
        return cli_io_error("cannot create '%s': not a file name tally can stage", path);
    }
    s->fd = mkstemp(s->tmp);
    if (s->fd < 0) {
        int e = errno;
        s->tmp[0] = '\0';
        return cli_io_error("cannot create '%s' (a temporary beside it): %s", path, strerror(e));
    }
    /* mkstemp makes the file 0600; give it the mode fopen would have. */
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(s->fd, 0666 & ~mask);
    return CLI_EXIT_OK;
}

/* Writes `left` bytes to the staged file, retrying short writes. */
static int staged_put(cli_staged *s, const unsigned char *p, size_t left)
{
    while (left > 0) {
        ssize_t put = write(s->fd, p, left);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) return cli_io_error("cannot write '%s': %s", s->path, put < 0 ? strerror(errno) : "no space");
        p += put;
        left -= (size_t)put;
    }
    return CLI_EXIT_OK;
}

int cli_staged_write(cli_staged *s, const void *data, uint64_t count)
{
    /* Through a bounded bounce buffer, so that a big-endian host never holds
     * a second copy of the output. */
    uint32_t chunk[4096];
    const uint32_t *src = data;
    while (count > 0) {
        size_t n = count < 4096 ? (size_t)count : 4096;
        const void *from = src;
        if (!host_is_little_endian()) {
            memcpy(chunk, src, n * 4u);
            to_or_from_little_endian(chunk, n);
            from = chunk;
        }
        int rc = staged_put(s, from, n * 4u);
        if (rc != CLI_EXIT_OK) return rc;
        src += n;
        count -= n;
    }
    return CLI_EXIT_OK;
}

int cli_staged_write_typed(cli_staged *s, const float *data, uint64_t count, tally_dtype dtype)
{
    if (dtype != TALLY_BF16 && dtype != TALLY_F16) return cli_staged_write(s, data, count);
    /* Each float is a value of the half type (widened), so narrowing gives
     * back its encoding exactly; bytes are laid out little-endian. */
    unsigned char chunk[8192];
    while (count > 0) {
        size_t n = count < 4096 ? (size_t)count : 4096;
        for (size_t i = 0; i < n; i++) {
            const tally_u32 h = dtype == TALLY_BF16 ? tally_f32_to_bf16(data[i]) : tally_f32_to_f16(data[i]);
            chunk[2 * i] = (unsigned char)(h & 0xffu);
            chunk[2 * i + 1] = (unsigned char)(h >> 8);
        }
        int rc = staged_put(s, chunk, n * 2u);
        if (rc != CLI_EXIT_OK) return rc;
        data += n;
        count -= n;
    }
    return CLI_EXIT_OK;
}

int cli_staged_commit(cli_staged *s, int n)
{
    for (int i = 0; i < n; i++) {
        /* Durable before it replaces anything; a device written in place
         * (fsync fails with EINVAL on /dev/null) has nothing to sync. */
        int failed = s[i].fd < 0 || (s[i].tmp[0] != '\0' && fsync(s[i].fd) != 0);
        if (s[i].fd >= 0 && close(s[i].fd) != 0) failed = 1;
        s[i].fd = -1;
        if (failed) {
            cli_staged_abort(s, n);
            return cli_io_error("cannot write '%s': %s", s[i].path, strerror(errno));
        }
    }
    for (int i = 0; i < n; i++) {
        if (s[i].tmp[0] == '\0') continue; /* written in place */
        if (rename(s[i].tmp, s[i].target) != 0) {
            int e = errno;
            cli_staged_abort(s + i, n - i);
            return cli_io_error("cannot move the output into '%s': %s%s", s[i].path, strerror(e),
                                i > 0 ? " (earlier outputs were already in place)" : "");
        }
        s[i].tmp[0] = '\0';
    }
    return CLI_EXIT_OK;
}

void cli_staged_abort(cli_staged *s, int n)
{
    for (int i = 0; i < n; i++) {
        if (s[i].fd >= 0) close(s[i].fd);
        s[i].fd = -1;
        if (s[i].tmp[0] != '\0') unlink(s[i].tmp);
        s[i].tmp[0] = '\0';
    }
}

/* ---- Odds and ends ---------------------------------------------------- */

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

uint64_t cli_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (f != NULL) {
        char line[256];
        unsigned long long kib = 0;
        int found = 0;
        while (fgets(line, sizeof line, f) != NULL)
            if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
                found = 1;
                break;
            }
        fclose(f);
        if (found) return (uint64_t)kib * 1024u;
    }
#if defined(_SC_AVPHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) return (uint64_t)pages * (uint64_t)page;
#endif
    return 0;
}

int cli_processors(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) return 1;
    return n > 256 ? 256 : (int)n;
}

uint32_t cli_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float cli_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

int cli_same_bits(uint32_t a, uint32_t b)
{
    /* NaN payloads and signs are not part of tally's results: CUDA writes
     * one canonical NaN, x86 another, so any two NaNs count as the same. */
    int a_nan = (a & 0x7f800000u) == 0x7f800000u && (a & 0x007fffffu) != 0;
    int b_nan = (b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0;
    if (a_nan || b_nan) return a_nan && b_nan;
    return a == b;
}
