/*
 * backends/opencl/opencl_cache.h - the on-disk store of OpenCL program
 * binaries: one file per key, read only when it is a regular file of sane
 * size whose SHA-256 digest of key and payload matches.
 *
 * File layout (all integers little-endian as stored by the machine that
 * wrote it; a file of another byte order fails the digest and is rebuilt):
 *   bytes  0..7    magic "TALLYCL2"
 *   bytes  8..39   the key: SHA-256 of everything that could change the binary
 *   bytes 40..47   payload size in bytes
 *   bytes 48..79   SHA-256 of bytes 8..47 followed by the payload
 *   bytes 80..     the payload (the driver's program binary)
 * The file is named by the key in hex, so entries of other builds never
 * collide. Writers use a temporary name in the same directory and rename.
 *
 * Not thread-safe on one cache object; separate objects (and processes)
 * may use one directory concurrently.
 */
#ifndef TALLY_OPENCL_CACHE_H
#define TALLY_OPENCL_CACHE_H

#include <stddef.h>

#include "src/sha256.h"

#define TALLY__CL_CACHE_MAGIC "TALLYCL2"
#define TALLY__CL_CACHE_HEADER_BYTES 80u
/* No program of tally's is near this (PoCL: about 2 MiB); a larger claim
 * is a damaged or foreign file and is rejected before it is read. */
#define TALLY__CL_CACHE_MAX_PAYLOAD ((size_t)64 << 20)
/* A temporary file older than this was left by a killed writer. */
#define TALLY__CL_CACHE_STALE_SECONDS (10 * 60)

typedef struct tally__cl_cache {
    char dir[4096 - 128];
    char path[4096];
    unsigned char key[TALLY__SHA256_BYTES];
} tally__cl_cache;

/* Finds (creating it, mode 0700) the cache directory, removes stale
 * temporaries from it and names the entry of `key`. 0 when the cache is off
 * (TALLY_CACHE=0) or has no usable directory. */
int tally__cl_cache_open(tally__cl_cache *cache, const unsigned char key[TALLY__SHA256_BYTES]);
/* The entry's payload (the caller frees it) and its size, or NULL when it is
 * missing or not a regular file, too large, truncated, of another key or
 * fails its digest. Never blocks on a FIFO or device node. */
unsigned char *tally__cl_cache_read(const tally__cl_cache *cache, size_t *size);
/* Stores a payload: temporary file, then rename. Failures are ignored. */
void tally__cl_cache_write(const tally__cl_cache *cache, const unsigned char *data, size_t size);
/* Removes the entry (one the driver refused to load). */
void tally__cl_cache_discard(const tally__cl_cache *cache);

/* The digest stored in bytes 48..79 for a key, size and payload (exposed for
 * the fault tests, which forge files with a valid digest). */
void tally__cl_cache_digest(const unsigned char key[TALLY__SHA256_BYTES], const unsigned char size_le[8],
                            const unsigned char *payload, size_t size, unsigned char digest[TALLY__SHA256_BYTES]);

#endif /* TALLY_OPENCL_CACHE_H */
