/*
 * tests/fuzz/replay.c - the main of a fuzz target built without libFuzzer:
 * runs LLVMFuzzerTestOneInput once per file named on the command line (or
 * per file in a named directory), so the seed corpus is a regression test
 * on any compiler.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    uint8_t *data = malloc(1 << 20);
    size_t n = data != NULL ? fread(data, 1, 1 << 20, f) : 0;
    fclose(f);
    if (data == NULL) return 1;
    LLVMFuzzerTestOneInput(data, n);
    free(data);
    return 0;
}

int main(int argc, char **argv)
{
    /* A target may change directory when it starts: resolve the paths first. */
    for (int i = 1; i < argc; i++) {
        char *abs = realpath(argv[i], NULL);
        if (abs != NULL) argv[i] = abs;
    }
    LLVMFuzzerInitialize(&argc, &argv);
    int failed = 0, runs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            while (d != NULL && (e = readdir(d)) != NULL) {
                if (e->d_name[0] == '.') continue;
                char path[4096];
                snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
                failed |= run_file(path);
                runs++;
            }
            if (d != NULL) closedir(d);
        } else {
            failed |= run_file(argv[i]);
            runs++;
        }
    }
    fprintf(stderr, "replay: %d inputs, %s\n", runs, failed ? "some unreadable" : "no crash");
    return failed || runs == 0;
}
