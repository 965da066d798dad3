/*
 * harness/place.c - see place.h.
 */
#include "place.h"

#include <stddef.h>
#include <string.h>

static uint64_t row_stride(const harness_window *w)
{
    return w->rows > 1 ? (uint64_t)w->stride : (uint64_t)w->cols;
}

int harness_window_extent(const harness_window *w, uint64_t pad, uint64_t *elements)
{
    if (w->rows < 0 || w->cols < 0 || w->offset < 0 || (w->rows > 1 && w->stride < 0)) return -1;
    uint64_t rows = (uint64_t)w->rows, cols = (uint64_t)w->cols, stride = row_stride(w);
    uint64_t end = (uint64_t)w->offset;
    if (rows > 0 && cols > 0) {
        if (rows - 1 > 0 && stride > (UINT64_MAX - end - cols) / (rows - 1)) return -1;
        end += (rows - 1) * stride + cols;
    }
    if (end > UINT64_MAX - pad) return -1;
    end += pad;
    if (end > (uint64_t)SIZE_MAX / 4u) return -1;
    *elements = end;
    return 0;
}

void harness_poison(uint32_t *image, uint64_t n, uint32_t poison)
{
    for (uint64_t i = 0; i < n; i++) image[i] = poison;
}

void harness_window_scatter(const harness_window *w, const uint32_t *dense, uint32_t *image)
{
    const size_t stride = (size_t)row_stride(w), cols = (size_t)w->cols;
    for (size_t r = 0; r < (size_t)w->rows && cols > 0; r++)
        memcpy(image + (size_t)w->offset + r * stride, dense + r * cols, cols * 4u);
}

int64_t harness_window_gather(const harness_window *w, const uint32_t *image, uint64_t total, uint32_t poison,
                              uint32_t *dense)
{
    const size_t stride = (size_t)row_stride(w), cols = (size_t)w->cols, rows = (size_t)w->rows;
    size_t pos = 0;
    int64_t first_changed = -1;
    if (rows > 0 && cols > 0) {
        for (size_t r = 0; r < rows; r++) {
            const size_t begin = (size_t)w->offset + r * stride;
            for (; pos < begin && first_changed < 0; pos++)
                if (image[pos] != poison) first_changed = (int64_t)pos;
            if (dense != NULL) memcpy(dense + r * cols, image + begin, cols * 4u);
            pos = begin + cols;
        }
    }
    for (; pos < (size_t)total && first_changed < 0; pos++)
        if (image[pos] != poison) first_changed = (int64_t)pos;
    return first_changed;
}
