/*
 * tests/fuzz/fuzz_cli.c - libFuzzer target: `tally run`'s argument and file
 * parsing (tools/cli_run.c and what it calls) on the host backend.
 *
 * Input: byte 0 is the number of tokens (mod 32); each token is a selector
 * byte, either an entry of the dictionary below (ops, options, edge numbers,
 * NAME=PATH arguments) or 0xFF followed by a length byte and raw text. The
 * bytes after the tokens are the contents of the file @F; @E is an empty
 * file, @O.. output paths in a scratch directory (the process works in that
 * directory, and raw text cannot name a path elsewhere: '/' becomes '_').
 *
 * --backend is always host (a fuzzed one is dropped), and an input whose
 * shape options multiply past 2^24 elements is skipped: the tool would then
 * rightly allocate gigabytes, which is not a finding.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_common.h"
#include "fuzz_input.h"

int cli_run(int argc, char **argv);

/* Tokens the fuzzer picks from: every op name (tally.h's table), then options
 * and values. */
static const char *const dict[] = {
#define FUZZ_OP_NAME(id, name, reduce_op) #name,
    TALLY_OP_MAP(FUZZ_OP_NAME)
#undef FUZZ_OP_NAME
    "--in", "--out", "--rows", "--cols", "--axis", "--reduction",
    "--input-is-prob", "--log-target", "--with-coefficient", "--per-row-alpha", "--batch", "--components",
    "--dim", "--seed", "--subsequence", "--offset", "--dist", "--count", "--logits", "--help", "--device",
    "--backend", "0", "1", "2", "3", "4", "7", "16", "-1", "0x10", "0x", "1e3", " 5", "18446744073709551615",
    "18446744073709551616", "4611686018427387905", "9223372036854775807", "9223372036854775808", "all", "row",
    "none", "sum", "mean", "batchmean", "raw", "uniform", "normal", "x=@F", "counts=@F", "log_alpha=@F",
    "input=@F", "target=@F", "z=@F", "mu=@F", "log_var=@F", "logits=@F", "weights=@F", "x=/dev/null",
    "counts=/dev/null", "log_alpha=@E", "mu=@E", "y=@O1", "x=@O1", "z=@O1", "log_q=@O2", "component=@O3",
    "index=@O1", "y=/dev/null", "y=@O1", "=", "x=", "y=@D", "", "--", "-", "host",
};
#define DICT_SIZE (sizeof dict / sizeof dict[0])

static char dir[256];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof dir, "/tmp/tally-fuzz-cli-%ld-XXXXXX", (long)getpid());
    if (mkdtemp(dir) == NULL || chdir(dir) != 0) abort();
    FILE *e = fopen("empty", "wb");
    if (e == NULL) abort();
    fclose(e);
    if (freopen("/dev/null", "w", stdout) == NULL) abort();
    return 0;
}

/* Replaces the @ markers with paths in the scratch directory. */
static void expand(const char *tok, char *out, size_t cap)
{
    const char *at = strchr(tok, '@');
    if (at == NULL) {
        snprintf(out, cap, "%s", tok);
        return;
    }
    const char *what = at[1] == 'F' ? "file" : at[1] == 'E' ? "empty" : at[1] == 'D' ? "." : at[1] == 'O' ? "out" : "x";
    snprintf(out, cap, "%.*s%s/%s%s", (int)(at - tok), tok, dir, what, at[1] == 'O' ? at + 2 : "");
}

static int is_shape_option(const char *t)
{
    static const char *const shapes[] = {"--rows", "--cols", "--batch", "--components", "--dim", "--count"};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (strcmp(t, shapes[i]) == 0) return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_reader r = {.p = data, .n = size};
    int ntok = fuzz_u8(&r) % 32;
    static char storage[40][300];
    char *argv[44];
    int argc = 0;
    argv[argc++] = "run";
    for (int i = 0; i < ntok; i++) {
        uint8_t s = fuzz_u8(&r);
        char raw[64];
        const char *tok;
        if (s == 0xFF) {
            size_t len = fuzz_u8(&r) % 48;
            size_t k = 0;
            for (size_t j = 0; j < len; j++) {
                char ch = (char)fuzz_u8(&r);
                if (ch == '\0') continue;
                raw[k++] = ch == '/' ? '_' : ch;
            }
            raw[k] = '\0';
            tok = raw;
        } else {
            tok = dict[s % DICT_SIZE];
        }
        if (strcmp(tok, "--backend") == 0) { /* dropped with its value */
            i++;
            (void)fuzz_u8(&r);
            continue;
        }
        expand(tok, storage[argc], sizeof storage[argc]);
        argv[argc] = storage[argc];
        argc++;
    }
    argv[argc++] = "--backend";
    argv[argc++] = "host";
    argv[argc] = NULL;
    /* Bound the work: the product of the shape options' values. */
    double product = 1.0;
    for (int i = 1; i + 1 < argc; i++)
        if (is_shape_option(argv[i])) {
            uint64_t v;
            if (cli_parse_u64(argv[i + 1], &v) == 0 && v > 1) product *= (double)v;
        }
    if (product > (double)(1 << 24)) return 0;
    FILE *f = fopen("file", "wb");
    if (f == NULL) abort();
    if (r.n > 0 && fwrite(r.p, 1, r.n, f) != r.n) abort();
    fclose(f);
    int rc = cli_run(argc, argv);
    if (rc != 0 && rc != 1 && rc != 2) abort(); /* the documented exit statuses */
    /* All or nothing: no temporary output is ever left behind. */
    DIR *d = opendir(dir);
    if (d == NULL) abort();
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".tmp-") != NULL) {
            fprintf(stderr, "fuzz_cli: temporary %s left behind (exit %d)\n", e->d_name, rc);
            abort();
        }
    closedir(d);
    return 0;
}
