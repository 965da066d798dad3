/*
 * backends/opencl/opencl_cache.c - reading and writing cache entries
 * (layout in opencl_cache.h).
 *
 * Everything here assumes the directory may hold anything: a FIFO or a
 * symlink to /dev/zero under an entry's name, a file truncated by a full disk,
 * a header claiming a gigabyte, an entry of an older format whose checksum
 * still matches, temporaries of a writer that was killed. None of them may
 * block, exhaust memory or reach the driver; the worst outcome is that the
 * program is built from source again.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "opencl_cache.h"

static int cache_enabled(void)
{
    const char *e = getenv("TALLY_CACHE");
    return !(e != NULL && strcmp(e, "0") == 0);
}

/* $XDG_CACHE_HOME/tally, else ~/.cache/tally, created (mode 0700) with its
 * parents. 0 when there is no usable location. */
static int find_dir(char *dir, size_t capacity)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    /* The XDG spec ignores a relative XDG_CACHE_HOME. */
    if (xdg != NULL && xdg[0] == '/')
        n = snprintf(dir, capacity, "%s/tally", xdg);
    else if (home != NULL && home[0] == '/')
        n = snprintf(dir, capacity, "%s/.cache/tally", home);
    else
        return 0;
    if (n < 0 || (size_t)n >= capacity) return 0;
    for (char *p = dir + 1; *p != '\0'; p++) {
        if (*p != '/') continue;
        *p = '\0';
        int r = mkdir(dir, 0700);
        *p = '/';
        if (r != 0 && errno != EEXIST) return 0;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) return 0;
    struct stat st;
    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Removes regular files named .tmp-* whose last change is older than
 * TALLY__CL_CACHE_STALE_SECONDS: a writer takes well under a second between
 * mkstemp and rename, so an older one was killed in between. */
static void remove_stale_temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) return;
    int dfd = dirfd(d);
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, ".tmp-", 5) != 0) continue;
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        if (now - st.st_mtime > TALLY__CL_CACHE_STALE_SECONDS) (void)unlinkat(dfd, e->d_name, 0);
    }
    closedir(d);
}

int tally__cl_cache_open(tally__cl_cache *cache, const unsigned char key[TALLY__SHA256_BYTES])
{
    memcpy(cache->key, key, TALLY__SHA256_BYTES);
    if (!cache_enabled() || !find_dir(cache->dir, sizeof cache->dir)) return 0;
    remove_stale_temporaries(cache->dir);
    char hex[2 * TALLY__SHA256_BYTES + 1];
    for (unsigned i = 0; i < TALLY__SHA256_BYTES; i++) snprintf(hex + 2 * i, 3, "%02x", key[i]);
    int n = snprintf(cache->path, sizeof cache->path, "%s/%s.bin", cache->dir, hex);
    return n > 0 && (size_t)n < sizeof cache->path;
}

void tally__cl_cache_digest(const unsigned char key[TALLY__SHA256_BYTES], const unsigned char size_le[8],
                            const unsigned char *payload, size_t size, unsigned char digest[TALLY__SHA256_BYTES])
{
    tally__sha256 s;
    tally__sha256_init(&s);
    tally__sha256_update(&s, key, TALLY__SHA256_BYTES);
    tally__sha256_update(&s, size_le, 8);
    tally__sha256_update(&s, payload, size);
    tally__sha256_final(&s, digest);
}

static void put_u64(unsigned char *p, uint64_t v)
{
    memcpy(p, &v, sizeof v);
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Reads (writing 0) or writes exactly n bytes at p, through interruptions
 * and partial transfers; 0 on a short transfer or an error. write() only
 * reads p. */
static int transfer_all(int fd, unsigned char *p, size_t n, int writing)
{
    while (n > 0) {
        ssize_t done = writing ? write(fd, p, n) : read(fd, p, n);
        if (done < 0 && errno == EINTR) continue;
        if (done <= 0) return 0;
        p += done;
        n -= (size_t)done;
    }
    return 1;
}

static int read_all(int fd, unsigned char *p, size_t n)
{
    return transfer_all(fd, p, n, 0);
}

unsigned char *tally__cl_cache_read(const tally__cl_cache *cache, size_t *size)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer. O_NOFOLLOW: an
     * entry is never a symlink (a link to /dev/zero would read forever). */
    int fd = open(cache->path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return NULL;
    unsigned char header[TALLY__CL_CACHE_HEADER_BYTES], digest[TALLY__SHA256_BYTES];
    unsigned char *data = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) goto fail;
    /* The file's own size bounds everything read from it, so a header that
     * claims more than the file holds is rejected before any allocation. */
    if (st.st_size <= (off_t)TALLY__CL_CACHE_HEADER_BYTES ||
        (uint64_t)st.st_size > (uint64_t)TALLY__CL_CACHE_HEADER_BYTES + TALLY__CL_CACHE_MAX_PAYLOAD)
        goto fail;
    if (!read_all(fd, header, sizeof header)) goto fail;
    uint64_t n = get_u64(header + 40);
    if (memcmp(header, TALLY__CL_CACHE_MAGIC, 8) != 0 || memcmp(header + 8, cache->key, TALLY__SHA256_BYTES) != 0 ||
        n != (uint64_t)st.st_size - TALLY__CL_CACHE_HEADER_BYTES)
        goto fail;
    data = malloc((size_t)n);
    if (data == NULL || !read_all(fd, data, (size_t)n)) goto fail;
    tally__cl_cache_digest(cache->key, header + 40, data, (size_t)n, digest);
    if (memcmp(digest, header + 48, sizeof digest) != 0) goto fail;
    close(fd);
    *size = (size_t)n;
    return data;
fail:
    free(data);
    close(fd);
    return NULL;
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
    return transfer_all(fd, (unsigned char *)p, n, 1);
}

void tally__cl_cache_write(const tally__cl_cache *cache, const unsigned char *data, size_t size)
{
    if (size == 0 || size > TALLY__CL_CACHE_MAX_PAYLOAD) return;
    char tmp[sizeof cache->dir + 16];
    if (snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", cache->dir) >= (int)sizeof tmp) return;
    int fd = mkstemp(tmp);
    if (fd < 0) return;
    unsigned char header[TALLY__CL_CACHE_HEADER_BYTES];
    memcpy(header, TALLY__CL_CACHE_MAGIC, 8);
    memcpy(header + 8, cache->key, TALLY__SHA256_BYTES);
    put_u64(header + 40, size);
    tally__cl_cache_digest(cache->key, header + 40, data, size, header + 48);
    int ok = write_all(fd, header, sizeof header) && write_all(fd, data, size);
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, cache->path) != 0) unlink(tmp);
}

void tally__cl_cache_discard(const tally__cl_cache *cache)
{
    (void)unlink(cache->path);
}
