/*
 * tests/check_sha256.c - src/sha256.c against the NIST example vectors
 * (FIPS 180-4 examples and the CAVS "one million a" message), fed whole and
 * in every split of awkward chunk sizes so the block buffering is covered.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/sha256.h"
#include "testutil.h"

typedef struct kat {
    const char *message; /* repeated `repeat` times */
    size_t repeat;
    const char *digest;  /* hex */
} kat;

static const kat kats[] = {
    {"", 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"abc", 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
     1, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    {"a", 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
};

static void hex(const unsigned char d[TALLY__SHA256_BYTES], char out[2 * TALLY__SHA256_BYTES + 1])
{
    for (unsigned i = 0; i < TALLY__SHA256_BYTES; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static unsigned char *message_of(const kat *k, size_t *n)
{
    size_t len = strlen(k->message);
    *n = len * k->repeat;
    unsigned char *m = tt_alloc(*n + 1);
    for (size_t r = 0; r < k->repeat; r++) memcpy(m + r * len, k->message, len);
    return m;
}

START_TEST(nist_vectors)
{
    const kat *k = &kats[_i];
    size_t n;
    unsigned char *m = message_of(k, &n), d[TALLY__SHA256_BYTES];
    char got[2 * TALLY__SHA256_BYTES + 1];
    tally__sha256_digest(m, n, d);
    hex(d, got);
    ck_assert_msg(strcmp(got, k->digest) == 0, "vector %d: got %s, want %s", _i, got, k->digest);
    /* The same message in chunks of 1, 3, 55, 63, 64, 65 and 1000 bytes. */
    static const size_t chunks[] = {1, 3, 55, 63, 64, 65, 1000};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        if (n > 200000 && chunks[c] < 55) continue; /* keeps the long vector quick */
        tally__sha256 s;
        tally__sha256_init(&s);
        for (size_t at = 0; at < n; at += chunks[c]) tally__sha256_update(&s, m + at, n - at < chunks[c] ? n - at : chunks[c]);
        tally__sha256_final(&s, d);
        hex(d, got);
        ck_assert_msg(strcmp(got, k->digest) == 0, "vector %d in chunks of %zu: got %s", _i, chunks[c], got);
    }
    free(m);
}
END_TEST

/* Every length 0..130 (each padding case: 55, 56, 63, 64 bytes in the last
 * block) in one call and byte by byte must agree. */
START_TEST(lengths_agree)
{
    unsigned char m[130], a[TALLY__SHA256_BYTES], b[TALLY__SHA256_BYTES];
    for (int i = 0; i < 130; i++) m[i] = (unsigned char)(i * 37 + 11);
    for (size_t n = 0; n <= sizeof m; n++) {
        tally__sha256_digest(m, n, a);
        tally__sha256 s;
        tally__sha256_init(&s);
        for (size_t i = 0; i < n; i++) tally__sha256_update(&s, m + i, 1);
        tally__sha256_final(&s, b);
        ck_assert_msg(memcmp(a, b, sizeof a) == 0, "length %zu", n);
    }
}
END_TEST

TT_SUITE("sha256", {.name = "nist", .tests = {nist_vectors}, .loops = (int)(sizeof kats / sizeof kats[0])},
         {.name = "sha256", .tests = {lengths_agree}})
