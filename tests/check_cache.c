/*
 * tests/check_cache.c - the OpenCL program binary cache: an entry is
 * written once and reused, another program is another key, TALLY_CACHE=0
 * switches it off, and (issue 15) it holds under hostile conditions. Each
 * hostile scenario puts something bad where the cache looks, then
 * creates a context: creation must succeed, never block, never hand a bad
 * entry to the driver (PoCL aborts the process on some malformed binaries,
 * which would fail this test as a crash), and leave a good entry behind
 * where the directory is writable.
 *
 * Every test runs in its own process (Check's fork mode) with a fresh
 * XDG_CACHE_HOME; PoCL's own kernel cache is pointed elsewhere
 * (POCL_CACHE_DIR) so that only tally's cache is under attack. Programs are
 * stubs with every kernel name and trivial bodies, so they build in a moment.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "kernels/kernel_list.h"

const int tally_test_needs_backend = 1;

extern int tally__opencl_program_from_cache(const tally_context *ctx) __attribute__((weak));
extern tally_status tally__opencl_context_create_with_source(int device, const char *source, tally_context **out)
    __attribute__((weak));
extern void tally__cl_cache_digest(const unsigned char key[32], const unsigned char size_le[8],
                                   const unsigned char *payload, size_t size, unsigned char digest[32])
    __attribute__((weak));

static const char *const kernel_names[] = {
#define KERNEL_NAME(name, args) "tally_k_" #name,
    TALLY_K_KERNELS(KERNEL_NAME)
#undef KERNEL_NAME
};
#define KERNEL_COUNT (sizeof kernel_names / sizeof kernel_names[0])
#define HEADER 80u /* backends/opencl/opencl_cache.h */

static char root[256];      /* XDG_CACHE_HOME of this test */
static char cache_dir[512]; /* root/tally */

static void remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        chmod(path, 0700);
        DIR *d = opendir(path);
        if (d != NULL) {
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
                char sub[1024];
                snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                remove_tree(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* PoCL's cache, shared by every test of the run (made once in the parent
 * process by an unchecked fixture), so that a stub program is compiled by
 * LLVM once rather than once per context. */
static char pocl_dir[256];

static void pocl_dir_setup(void)
{
    snprintf(pocl_dir, sizeof pocl_dir, "/tmp/tally-check-cache-pocl-%ld-XXXXXX", (long)getpid());
    if (mkdtemp(pocl_dir) == NULL) pocl_dir[0] = '\0';
}

static void remove_tree(const char *path);

static void pocl_dir_teardown(void)
{
    if (pocl_dir[0] != '\0') remove_tree(pocl_dir);
}

static void setup(void)
{
    snprintf(root, sizeof root, "/tmp/tally-check-cache-%ld-XXXXXX", (long)getpid());
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(cache_dir, sizeof cache_dir, "%s/tally", root);
    ck_assert_msg(pocl_dir[0] != '\0', "no directory for PoCL's cache");
    setenv("POCL_CACHE_DIR", pocl_dir, 1);
    setenv("XDG_CACHE_HOME", root, 1);
    unsetenv("TALLY_CACHE");
    /* One program, so one entry, per context: on a CPU device a context
     * also builds the twins' program (kernels/cpu.h), a second entry of the
     * same text under other options, which the counts below do not expect. */
    setenv("TALLY_OPENCL_KERNELS", "gpu", 1);
    ck_assert_ptr_nonnull(tally__opencl_context_create_with_source);
}

static void teardown(void)
{
    remove_tree(root);
}

static char *stub_program(const char *tag)
{
    size_t cap = 4096 + KERNEL_COUNT * 128;
    char *src = tt_alloc(cap);
    size_t used = (size_t)snprintf(src, cap, "#pragma OPENCL FP_CONTRACT OFF\n/* %s */\n", tag);
    for (size_t k = 0; k < KERNEL_COUNT; k++)
        used += (size_t)snprintf(src + used, cap - used,
                                 "__kernel void %s(__global float *x) { if (x != 0) x[0] = 1.0f; }\n",
                                 kernel_names[k]);
    return src;
}

/* A context on the stub; it must work. Returns whether it loaded from cache. */
static int open_stub(const char *src)
{
    tally_context *ctx = NULL;
    tally_status st = tally__opencl_context_create_with_source(0, src, &ctx);
    ck_assert_msg(st == TALLY_OK, "stub context: %s: %s", tally_status_name(st), tally_last_error(NULL));
    tally_buffer *b = NULL;
    ck_assert_int_eq(tally_buffer_create(ctx, 64, &b), TALLY_OK);
    ck_assert_int_eq(tally_buffer_fill(b, 0, 64, 0x3f800000u), TALLY_OK);
    float x[16];
    ck_assert_int_eq(tally_buffer_download(b, 0, x, sizeof x), TALLY_OK);
    ck_assert(x[15] == 1.0f);
    tally_buffer_release(b);
    int cached = tally__opencl_program_from_cache(ctx);
    tally_context_release(ctx);
    return cached;
}

/* Counts directory entries: .bin entries (the last one's path in `entry`)
 * and temporaries. */
static void scan(int *bins, int *temps, char *entry, size_t capacity)
{
    *bins = *temps = 0;
    DIR *d = opendir(cache_dir);
    if (d == NULL) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".bin") == 0) {
            (*bins)++;
            if (entry != NULL) snprintf(entry, capacity, "%s/%s", cache_dir, e->d_name);
        } else if (strncmp(e->d_name, ".tmp-", 5) == 0) {
            (*temps)++;
        }
    }
    closedir(d);
}

/* A good entry of `src`; its path in `entry`, its bytes returned. */
static unsigned char *good_entry(const char *src, char *entry, size_t capacity, size_t *n)
{
    ck_assert_int_eq(open_stub(src), 0);
    int bins, temps;
    scan(&bins, &temps, entry, capacity);
    ck_assert_int_eq(bins, 1);
    ck_assert_int_eq(temps, 0);
    FILE *f = fopen(entry, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    ck_assert_int_gt(len, (long)HEADER);
    unsigned char *data = tt_alloc((size_t)len);
    ck_assert_uint_eq(fread(data, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return data;
}

static void put_file(const char *path, const void *data, size_t n)
{
    unlink(path);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* After a bad entry: the context was built from source and the entry is a
 * good regular file again, which the next context loads. */
static void expect_rebuilt_and_repaired(const char *src, const char *entry)
{
    ck_assert_int_eq(open_stub(src), 0);
    struct stat st;
    ck_assert_int_eq(lstat(entry, &st), 0);
    ck_assert_msg(S_ISREG(st.st_mode), "the entry was not replaced by a regular file");
    ck_assert_int_eq(open_stub(src), 1);
    int bins, temps;
    scan(&bins, &temps, NULL, 0);
    ck_assert_int_eq(bins, 1);
    ck_assert_int_eq(temps, 0);
}

/* ---- Damaged files ---------------------------------------------------- */

typedef enum damage {
    TRUNCATED_HALF,
    TRUNCATED_HEADER,
    TRUNCATED_ONE_BYTE,
    EXTRA_BYTE,
    PAYLOAD_FLIP,   /* inside the driver's binary: the old checksum's blind spot was other files */
    DIGEST_FLIP,
    OLD_FORMAT,     /* a TALLYCL1 entry with its FNV-1a checksum right over a malformed payload */
    HUGE_CLAIM,     /* header claims 1 GiB */
    SPARSE_GIB,     /* a 1 GiB file (sparse): rejected by size before reading */
    EMPTY,
    NOT_A_CACHE_FILE,
    OTHER_KEY,      /* another key's entry under this name */
    DAMAGE_COUNT
} damage;

static const char *const damage_names[DAMAGE_COUNT] = {
    "truncated to half", "truncated to the header", "one byte short", "one byte extra",
    "payload byte flipped", "digest byte flipped", "old format, checksummed", "header claims 1 GiB",
    "sparse 1 GiB file", "empty", "not a cache file", "another key's entry",
};

START_TEST(damaged_entry)
{
    char *src = stub_program("damaged");
    char entry[1024];
    size_t n;
    unsigned char *good = good_entry(src, entry, sizeof entry, &n);
    unsigned char *bad = tt_alloc(n + 1);
    memcpy(bad, good, n);
    size_t len = n;
    uint64_t claim;
    switch ((damage)_i) {
    case TRUNCATED_HALF: len = n / 2; break;
    case TRUNCATED_HEADER: len = HEADER; break;
    case TRUNCATED_ONE_BYTE: len = n - 1; break;
    case EXTRA_BYTE: bad[n] = 0; len = n + 1; break;
    case PAYLOAD_FLIP: bad[HEADER + (n - HEADER) / 2] ^= 0x10; break;
    case DIGEST_FLIP: bad[60] ^= 1; break;
    case OLD_FORMAT: {
        /* magic, two u64 of key, size, FNV-1a 64 of the payload: the layout
         * the malformed-but-checksummed file had. */
        memcpy(bad, "TALLYCL1", 8);
        uint64_t size = n - 40, h = 0xcbf29ce484222325ull;
        for (size_t i = 40; i < n; i++) bad[i] = (unsigned char)(i * 31u + 7u);
        for (size_t i = 40; i < n; i++) h = (h ^ bad[i]) * 0x100000001b3ull;
        memcpy(bad + 24, &size, 8);
        memcpy(bad + 32, &h, 8);
        break;
    }
    case HUGE_CLAIM:
        claim = (uint64_t)1 << 30;
        memcpy(bad + 40, &claim, 8);
        break;
    case SPARSE_GIB: break;
    case EMPTY: len = 0; break;
    case NOT_A_CACHE_FILE: memcpy(bad, "GARBAGE!", 8); break;
    case OTHER_KEY: bad[9] ^= 1; break;
    case DAMAGE_COUNT: break;
    }
    put_file(entry, bad, len);
    if ((damage)_i == SPARSE_GIB) ck_assert_int_eq(truncate(entry, (off_t)1 << 30), 0);
    fprintf(stderr, "damage: %s\n", damage_names[_i]);
    expect_rebuilt_and_repaired(src, entry);
    free(bad);
    free(good);
    free(src);
}
END_TEST

/* An entry with a valid digest over a payload the driver refuses: the
 * context is built from source and the entry replaced (it is unlinked
 * first, so that it is gone even when the new one cannot be written). */
START_TEST(refused_entry_deleted)
{
    char *src = stub_program("refused");
    char entry[1024];
    size_t n;
    unsigned char *bad = good_entry(src, entry, sizeof entry, &n);
    for (size_t i = HEADER; i < n; i++) bad[i] = (unsigned char)(i * 131u + 5u);
    ck_assert_ptr_nonnull(tally__cl_cache_digest);
    tally__cl_cache_digest(bad + 8, bad + 40, bad + HEADER, n - HEADER, bad + 48);
    put_file(entry, bad, n);
    expect_rebuilt_and_repaired(src, entry);
    free(bad);
    free(src);
}
END_TEST

/* ---- Things that are not files ----------------------------------------- */

/* What stands under the entry's name, made by `make`; `replaced`: the
 * context is built from source and the entry replaced by a good file, or
 * (0) it cannot be replaced and every context builds from source. */
static int make_fifo(const char *path) { return mkfifo(path, 0600); }
static int make_zero_link(const char *path) { return symlink("/dev/zero", path); }
static int make_directory(const char *path) { return mkdir(path, 0700); }

static const struct {
    const char *tag;
    int (*make)(const char *path);
    int replaced;
} not_files[] = {
    /* Opening a FIFO for reading would wait for a writer forever. */
    {"fifo", make_fifo, 1},
    /* An endless stream of zeros: the link is not followed, and rename
     * replaces the link, not /dev/zero. */
    {"symlink to /dev/zero", make_zero_link, 1},
    /* A directory cannot be renamed over. */
    {"directory", make_directory, 0},
};

/* The alarm's default action kills a hung test process, which Check
 * reports as a failure ("Alarm clock"). */
START_TEST(not_a_file_entry)
{
    char *src = stub_program(not_files[_i].tag);
    char entry[1024];
    size_t n;
    free(good_entry(src, entry, sizeof entry, &n));
    ck_assert_int_eq(unlink(entry), 0);
    ck_assert_msg(not_files[_i].make(entry) == 0, "cannot make a %s: %s", not_files[_i].tag, strerror(errno));
    alarm(120);
    if (not_files[_i].replaced) {
        expect_rebuilt_and_repaired(src, entry);
    } else {
        ck_assert_int_eq(open_stub(src), 0);
        ck_assert_int_eq(open_stub(src), 0);
        rmdir(entry);
    }
    alarm(0);
    struct stat st;
    ck_assert_int_eq(stat("/dev/zero", &st), 0);
    ck_assert(S_ISCHR(st.st_mode));
    free(src);
}
END_TEST

/* ---- The directory ------------------------------------------------------ */

/* XDG_CACHE_HOME deep under directories that do not exist: created. */
START_TEST(missing_directory)
{
    char deep[400];
    snprintf(deep, sizeof deep, "%s/not/yet/there", root);
    setenv("XDG_CACHE_HOME", deep, 1);
    snprintf(cache_dir, sizeof cache_dir, "%s/tally", deep);
    char *src = stub_program("missing");
    ck_assert_int_eq(open_stub(src), 0);
    ck_assert_int_eq(open_stub(src), 1);
    struct stat st;
    ck_assert_int_eq(stat(cache_dir, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0700);
    free(src);
}
END_TEST

/* The cache directory's place taken by a regular file, and a read-only
 * directory: the cache is skipped, contexts still work. (As root the mode
 * bits do not stop writes; the file case holds for everyone.) */
START_TEST(unusable_directory)
{
    char *src = stub_program("unusable");
    put_file(cache_dir, "x", 1);
    ck_assert_int_eq(open_stub(src), 0);
    ck_assert_int_eq(open_stub(src), 0);
    ck_assert_int_eq(unlink(cache_dir), 0);
    ck_assert_int_eq(mkdir(cache_dir, 0500), 0);
    ck_assert_int_eq(open_stub(src), 0);
    int bins, temps;
    scan(&bins, &temps, NULL, 0);
    ck_assert_int_eq(temps, 0);
    if (geteuid() != 0) ck_assert_int_eq(bins, 0);
    ck_assert_int_eq(chmod(cache_dir, 0700), 0);
    free(src);
}
END_TEST

/* ---- Writers ------------------------------------------------------------ */

/* Six processes start on an empty cache at once: every context works, one
 * good entry remains and no temporary. */
START_TEST(concurrent_writers)
{
    char *src = stub_program("concurrent");
    enum { WRITERS = 6 };
    pid_t pids[WRITERS];
    /* Warm PoCL's own kernel cache first (in a child, with tally's cache
     * off), so that the writers race on tally's cache and not on PoCL's. */
    pid_t warm = fork();
    ck_assert_int_ge(warm, 0);
    if (warm == 0) {
        setenv("TALLY_CACHE", "0", 1);
        tally_context *ctx = NULL;
        tally_status st = tally__opencl_context_create_with_source(0, src, &ctx);
        tally_context_release(ctx);
        _exit(st == TALLY_OK ? 0 : 1);
    }
    int warm_status = 0;
    ck_assert_int_eq(waitpid(warm, &warm_status, 0), warm);
    ck_assert_msg(WIFEXITED(warm_status) && WEXITSTATUS(warm_status) == 0, "warm-up context failed");
    int bins, temps;
    scan(&bins, &temps, NULL, 0);
    ck_assert_int_eq(bins, 0);
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    for (int i = 0; i < WRITERS; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            char c;
            close(go[1]);
            if (read(go[0], &c, 1) < 0) _exit(3);
            tally_context *ctx = NULL;
            tally_status st = tally__opencl_context_create_with_source(0, src, &ctx);
            if (st != TALLY_OK) fprintf(stderr, "writer: %s: %s\n", tally_status_name(st), tally_last_error(NULL));
            tally_context_release(ctx);
            _exit(st == TALLY_OK ? 0 : 1);
        }
    }
    close(go[0]);
    close(go[1]); /* releases every child at once */
    for (int i = 0; i < WRITERS; i++) {
        int status = 0;
        ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed (status 0x%x)", i, status);
    }
    scan(&bins, &temps, NULL, 0);
    ck_assert_int_eq(bins, 1);
    ck_assert_int_eq(temps, 0);
    ck_assert_int_eq(open_stub(src), 1);
    free(src);
}
END_TEST

static void make_temp(const char *name, time_t age, int as_dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", cache_dir, name);
    if (as_dir)
        ck_assert_int_eq(mkdir(path, 0700), 0);
    else
        put_file(path, "partial", 7);
    struct timeval times[2];
    times[0].tv_sec = times[1].tv_sec = time(NULL) - age;
    times[0].tv_usec = times[1].tv_usec = 0;
    ck_assert_int_eq(utimes(path, times), 0);
}

static int exists(const char *name)
{
    char path[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", cache_dir, name);
    return lstat(path, &st) == 0;
}

/* Temporaries left by killed writers: the old ones are removed when a
 * context opens the cache; a fresh one (a writer at work) and anything that
 * is not a regular file stay. */
START_TEST(stale_temporaries)
{
    ck_assert_int_eq(mkdir(cache_dir, 0700), 0);
    make_temp(".tmp-old111", 3600, 0);
    make_temp(".tmp-old222", 11 * 60, 0);
    make_temp(".tmp-new333", 5, 0);
    make_temp(".tmp-dir444", 3600, 1);
    make_temp("unrelated", 3600, 0);
    char *src = stub_program("stale");
    ck_assert_int_eq(open_stub(src), 0);
    ck_assert(!exists(".tmp-old111"));
    ck_assert(!exists(".tmp-old222"));
    ck_assert(exists(".tmp-new333"));
    ck_assert(exists(".tmp-dir444"));
    ck_assert(exists("unrelated"));
    free(src);
}
END_TEST

/* PoCL reports no device when it cannot create its own kernel cache; the
 * NO_DEVICE message must name that directory and the way to skip OpenCL
 * (issue 15, defect 8), and AUTO must still give a context. Another driver
 * may not care (status OK): then only AUTO is checked. */
START_TEST(no_device_names_driver_cache)
{
    char blocker[600], pocl[700];
    snprintf(blocker, sizeof blocker, "%s/not-a-dir", root);
    put_file(blocker, "x", 1);
    snprintf(pocl, sizeof pocl, "%s/pocl", blocker);
    setenv("POCL_CACHE_DIR", pocl, 1);
    /* The default device, not one that TALLY_DEVICE names among all of them:
     * with PoCL gone the indices of the others move. */
    unsetenv("TALLY_DEVICE");
    tally_context *ctx = NULL;
    tally_status st = tally_context_create(TALLY_BACKEND_OPENCL, TALLY_DEVICE_DEFAULT, &ctx);
    ck_assert_msg(st == TALLY_OK || st == TALLY_NO_DEVICE, "got %s: %s", tally_status_name(st), tally_last_error(NULL));
    if (st == TALLY_NO_DEVICE) {
        const char *msg = tally_last_error(NULL);
        ck_assert_msg(strstr(msg, pocl) != NULL, "message does not name %s: %s", pocl, msg);
        ck_assert_msg(strstr(msg, "a file is in the way") != NULL, "message: %s", msg);
        ck_assert_msg(strstr(msg, "TALLY_BACKEND=host") != NULL, "message: %s", msg);
    }
    tally_context_release(ctx);
    ctx = NULL;
    ck_assert_int_eq(tally_context_create(TALLY_BACKEND_AUTO, TALLY_DEVICE_DEFAULT, &ctx), TALLY_OK);
    tally_context_release(ctx);
}
END_TEST

/* ---- Reuse and switching off ------------------------------------------ */

/* The number of .bin entries; a temporary must never be left behind. */
static int entries(void)
{
    int bins, temps;
    scan(&bins, &temps, NULL, 0);
    ck_assert_int_eq(temps, 0);
    return bins;
}

/* An entry is written once and loaded by every later context of the same
 * program; another program text is another key. */
START_TEST(reuse_and_keys)
{
    char *src = stub_program("reuse"), *other = stub_program("other");
    ck_assert_int_eq(open_stub(src), 0);
    ck_assert_int_eq(entries(), 1);
    ck_assert_int_eq(open_stub(src), 1);
    ck_assert_int_eq(open_stub(src), 1);
    ck_assert_int_eq(entries(), 1);
    ck_assert_int_eq(open_stub(other), 0);
    ck_assert_int_eq(entries(), 2);
    free(src);
    free(other);
}
END_TEST

/* TALLY_CACHE=0 neither reads nor writes; any other value leaves it on. */
START_TEST(switched_off)
{
    char *src = stub_program("disabled");
    setenv("TALLY_CACHE", "0", 1);
    ck_assert_int_eq(open_stub(src), 0);
    ck_assert_int_eq(open_stub(src), 0);
    ck_assert_int_eq(entries(), 0);
    setenv("TALLY_CACHE", "1", 1);
    ck_assert_int_eq(open_stub(src), 0);
    ck_assert_int_eq(open_stub(src), 1);
    ck_assert_int_eq(entries(), 1);
    free(src);
}
END_TEST

/* The real program: the runner's probe built it into the user's cache, so
 * contexts of this process load it from there (no fixture: the user's own
 * cache directory). */
START_TEST(real_program_cached)
{
    const char *env = getenv("TALLY_CACHE");
    tally_context *a = NULL, *b = NULL;
    ck_assert_int_eq(tally_context_create(TALLY_BACKEND_OPENCL, TALLY_DEVICE_DEFAULT, &a), TALLY_OK);
    ck_assert_int_eq(tally_context_create(TALLY_BACKEND_OPENCL, TALLY_DEVICE_DEFAULT, &b), TALLY_OK);
    if (env == NULL || strcmp(env, "0") != 0) ck_assert_int_eq(tally__opencl_program_from_cache(b), 1);
    tally_context_release(a);
    tally_context_release(b);
}
END_TEST

/* Every test runs against the PoCL cache directory of its case and a fresh
 * tally cache of its own. */
#define CACHE_FIXTURES                                                                                    \
    .unchecked_setup = pocl_dir_setup, .unchecked_teardown = pocl_dir_teardown, .setup = setup, .teardown = teardown, \
    .timeout = 300

TT_SUITE("cache", {.name = "damaged", .tests = {damaged_entry}, .loops = DAMAGE_COUNT, CACHE_FIXTURES},
         {.name = "not_files", .tests = {not_a_file_entry}, .loops = (int)(sizeof not_files / sizeof not_files[0]),
          CACHE_FIXTURES},
         {.name = "cache",
          .tests = {reuse_and_keys, switched_off, refused_entry_deleted, missing_directory, unusable_directory,
                    concurrent_writers, stale_temporaries, no_device_names_driver_cache},
          CACHE_FIXTURES},
         {.name = "real", .tests = {real_program_cached}, .timeout = 600})
