/*
 * src/sha256.h - SHA-256 (FIPS 180-4), for the integrity of on-disk caches.
 *
 * Small and dependency-free; not constant-time and not meant for secrets.
 * Usage: tally__sha256_init, any number of tally__sha256_update calls, then
 * tally__sha256_final, which writes the 32-byte digest. A state is owned by
 * its caller; calls on different states may run on different threads.
 */
#ifndef TALLY_SHA256_H
#define TALLY_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define TALLY__SHA256_BYTES 32u

typedef struct tally__sha256 {
    uint32_t h[8];
    uint64_t length;          /* bytes hashed so far */
    unsigned char block[64];  /* the pending partial block */
    size_t used;              /* bytes in block */
} tally__sha256;

void tally__sha256_init(tally__sha256 *s);
void tally__sha256_update(tally__sha256 *s, const void *data, size_t n);
void tally__sha256_final(tally__sha256 *s, unsigned char digest[TALLY__SHA256_BYTES]);
/* One call for a whole message. */
void tally__sha256_digest(const void *data, size_t n, unsigned char digest[TALLY__SHA256_BYTES]);

#endif /* TALLY_SHA256_H */
