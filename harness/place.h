/*
 * harness/place.h - poisoned strided placement, on the host side: a dense
 * [rows, cols] array laid into a larger image at an element offset with a
 * row stride, every other element of the image holding a poison pattern, and
 * read back with a check that nothing outside the window changed. The tests
 * (tests/testutil.c: tt_place) and the CLI (tools/cli_exec.c) upload such
 * images, so that an op reading a gap sees NaNs and one writing outside its
 * output view is caught.
 *
 * Elements are 4 bytes. Element (r, c) of a window is at
 * offset + r * stride + c; a window of one row ignores its stride.
 *
 * Thread rules: pure functions over the caller's arrays.
 */
#ifndef TALLY_HARNESS_PLACE_H
#define TALLY_HARNESS_PLACE_H

#include <stdint.h>

typedef struct harness_window {
    int64_t rows, cols;
    int64_t offset, stride;
} harness_window;

/* Elements of an image that holds the window and `pad` spare elements after
 * it. Returns 0, or -1 when the count does not fit 64 bits or (as bytes)
 * size_t. */
int harness_window_extent(const harness_window *w, uint64_t pad, uint64_t *elements);

/* Sets n elements of image to poison. */
void harness_poison(uint32_t *image, uint64_t n, uint32_t poison);

/* Copies dense [rows, cols] into the window of image. */
void harness_window_scatter(const harness_window *w, const uint32_t *dense, uint32_t *image);

/* Copies the window of image into dense [rows, cols] (dense may be NULL)
 * and returns the index of the first of image's `total` elements outside
 * the window that no longer holds poison, or -1 when every one does. */
int64_t harness_window_gather(const harness_window *w, const uint32_t *image, uint64_t total, uint32_t poison,
                              uint32_t *dense);

#endif /* TALLY_HARNESS_PLACE_H */
