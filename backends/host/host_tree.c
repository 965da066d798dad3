/*
 * backends/host/host_tree.c - see host_tree.h and docs/reduction-tree.md.
 */
#include "host_tree.h"

#include <stdlib.h>

#include "host_parallel.h"
#include "tally/terms.h"

/* One tile of one level: each active lane folds its elements in order
 * (quad steps ascending, the four elements of a quad ascending), then the
 * lanes combine pairwise, halving the stride each step. */
static float reduce_tile(const tally__tree_level *level, uint64_t tile, int kind, tally__host_term_fn term,
                         const void *state)
{
    float lane[TALLY_TREE_LANES];
    const uint64_t lanes = level->lanes, steps = level->quads_per_lane;
    const uint64_t quads = level->n / 4 + (level->n % 4 != 0);
    const uint64_t base = tile * lanes * steps;
    const uint64_t active = quads - base < lanes ? quads - base : lanes;
    for (uint64_t j = 0; j < active; j++) {
        float acc = 0.0f;
        int first = 1;
        for (uint64_t q = 0; q < steps; q++) {
            uint64_t quad = base + q * lanes + j;
            if (quad >= quads) break;
            for (uint64_t c = 0; c < 4; c++) {
                uint64_t k = quad * 4 + c;
                if (k >= level->n) break;
                float v = term(state, k);
                acc = first ? v : tally_combine(kind, acc, v);
                first = 0;
            }
        }
        lane[j] = acc;
    }
    for (uint64_t s = lanes / 2; s >= 1; s /= 2)
        for (uint64_t j = 0; j < s; j++)
            if (j + s < active) lane[j] = tally_combine(kind, lane[j], lane[j + s]);
    return lane[0];
}

static float read_partial(const void *state, uint64_t k)
{
    return ((const float *)state)[k];
}

/* One tile of one level, by one of the two paths below: level 0 reads the
 * source's terms (partials NULL), an upper level the partials of the level
 * beneath it. */
typedef float (*tile_fn)(const void *source, const tally__tree_level *level, uint64_t tile, int kind,
                         const float *partials);

typedef struct level_task {
    const tally__tree_level *level;
    int kind;
    tile_fn tile;
    const void *source;
    float *partials;
} level_task;

static void run_tiles(void *arg, uint64_t begin, uint64_t end)
{
    level_task *t = arg;
    for (uint64_t tile = begin; tile < end; tile++)
        t->partials[tile] = t->tile(t->source, t->level, tile, t->kind, NULL);
}

/* The tree of `plan` by either path: level 0's tiles (over threads when
 * `parallel`), then each upper level in turn. */
static tally_status tree_reduce(const tally__tree_plan *plan, int kind, tile_fn tile, const void *source,
                                int parallel, float empty_value, float *out)
{
    if (plan->levels == 0) {
        *out = empty_value;
        return TALLY_OK;
    }
    if (plan->levels == 1) {
        *out = tile(source, &plan->level[0], 0, kind, NULL);
        return TALLY_OK;
    }
    float *partials = malloc(plan->level[0].tiles * sizeof *partials);
    if (partials == NULL) return TALLY_OUT_OF_MEMORY;
    level_task task = {.level = &plan->level[0], .kind = kind, .tile = tile, .source = source,
                       .partials = partials};
    if (parallel)
        tally__host_parallel_for(plan->level[0].tiles, TALLY_TREE_TILE, run_tiles, &task);
    else
        run_tiles(&task, 0, plan->level[0].tiles);
    /* Upper levels reduce the partials in place: tile t of a level reads
     * only partials at or after t * tile_size, so writing partial t never
     * clobbers an unread value. The partials of a level are one contiguous
     * vector. */
    for (int i = 1; i < plan->levels; i++) {
        const tally__tree_level *level = &plan->level[i];
        for (uint64_t t = 0; t < level->tiles; t++) partials[t] = tile(source, level, t, kind, partials);
    }
    *out = partials[0];
    free(partials);
    return TALLY_OK;
}

/* ---- The scalar path: a term function over the elements. ---- */

typedef struct term_source {
    tally__host_term_fn term;
    const void *state;
} term_source;

static float term_tile(const void *source, const tally__tree_level *level, uint64_t tile, int kind,
                       const float *partials)
{
    const term_source *s = source;
    if (partials != NULL) return reduce_tile(level, tile, kind, read_partial, partials);
    return reduce_tile(level, tile, kind, s->term, s->state);
}

tally_status tally__host_tree_reduce(const tally__tree_plan *plan, int kind, tally__host_term_fn term,
                                     const void *state, int parallel, float empty_value, float *out)
{
    const term_source source = {.term = term, .state = state};
    return tree_reduce(plan, kind, term_tile, &source, parallel, empty_value, out);
}

/* ---- The same tree through vector kernels (host_simd.h). ---- */

typedef struct kernel_source {
    const tally__host_kernels *k;
    const tally__host_src *src;
} kernel_source;

static float kernel_tile(const void *source, const tally__tree_level *level, uint64_t tile, int kind,
                         const float *partials)
{
    const kernel_source *s = source;
    if (partials == NULL) return s->k->tile(level, tile, kind, s->src);
    const tally__host_src up = {.term = TALLY__HOST_TERM_PLAIN,
                                .in = {{.p = partials, .cols = level->n, .stride = level->n}}};
    return s->k->tile(level, tile, kind, &up);
}

tally_status tally__host_tree_reduce_k(const tally__tree_plan *plan, int kind, const tally__host_kernels *k,
                                       const tally__host_src *src, int parallel, float empty_value, float *out)
{
    const kernel_source source = {.k = k, .src = src};
    return tree_reduce(plan, kind, kernel_tile, &source, parallel, empty_value, out);
}
