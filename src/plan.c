/*
 * src/plan.c - the reduction planner: maps a vector length to the fixed
 * tree that every backend follows (docs/reduction-tree.md). Pure C with no
 * device dependence: the plan is a function of n alone.
 */
#include "backend.h"
#include "tally/terms.h"

static uint32_t next_pow2_u32(uint64_t v)
{
    uint32_t p = 1;
    while (p < v && p < TALLY_TREE_LANES) p <<= 1;
    return p;
}

tally__tree_level tally__plan_level(uint64_t n)
{
    tally__tree_level level = {.n = n, .lanes = 0, .quads_per_lane = 0, .tiles = 0};
    if (n == 0) return level;
    uint64_t quads = n / 4 + (n % 4 != 0);
    const uint64_t full_tile_quads = (uint64_t)TALLY_TREE_LANES * TALLY_TREE_QUADS_PER_LANE;
    if (quads > full_tile_quads) {
        /* Many tiles of the full shape; the last may be partial. */
        level.lanes = TALLY_TREE_LANES;
        level.quads_per_lane = TALLY_TREE_QUADS_PER_LANE;
        level.tiles = quads / full_tile_quads + (quads % full_tile_quads != 0);
    } else {
        /* One tile, as narrow as the data allows, so short vectors (a row
         * of 64 dimensions, say) use few lanes. */
        level.lanes = next_pow2_u32(quads);
        level.quads_per_lane = (uint32_t)(quads / level.lanes + (quads % level.lanes != 0));
        level.tiles = 1;
    }
    return level;
}

tally__tree_plan tally__plan_vector(uint64_t n)
{
    tally__tree_plan plan = {.levels = 0};
    while (n > 0 && plan.levels < TALLY__TREE_MAX_LEVELS) {
        tally__tree_level level = tally__plan_level(n);
        plan.level[plan.levels++] = level;
        if (level.tiles == 1) break;
        n = level.tiles;
    }
    return plan;
}
