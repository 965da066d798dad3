/*
 * tally/dialect.h - the small vocabulary that lets one body of code compile
 * unchanged as C11 (host), CUDA C++ (nvcc) and OpenCL C 1.2.
 *
 * Every function that decides result bits (Philox, tally's math, the
 * per-element terms of each op, the reduction combine steps) is written once
 * against these macros. The feature macros below are always defined to 0 or 1
 * and are tested with #if, never #ifdef, so that -Wundef catches a typo; any of
 * them can be forced with -D on the command line.
 *
 * Why this matters: bit-identical results need the same operations in the same
 * order with the same rounding on every target. The macros only change
 * spellings (qualifiers, bit casts, integer types); they never change
 * arithmetic.
 */
#ifndef TALLY_DIALECT_H
#define TALLY_DIALECT_H

/* ---- Which compiler is reading this file. Exactly one is 1. ---- */
#ifndef TALLY_TARGET_OPENCL
#  if defined(__OPENCL_VERSION__) || defined(__OPENCL_C_VERSION__)
#    define TALLY_TARGET_OPENCL 1
#  else
#    define TALLY_TARGET_OPENCL 0
#  endif
#endif
#ifndef TALLY_TARGET_CUDA
#  if defined(__CUDACC__)
#    define TALLY_TARGET_CUDA 1
#  else
#    define TALLY_TARGET_CUDA 0
#  endif
#endif
#ifndef TALLY_TARGET_C
#  if TALLY_TARGET_OPENCL || TALLY_TARGET_CUDA
#    define TALLY_TARGET_C 0
#  else
#    define TALLY_TARGET_C 1
#  endif
#endif

/* Device code: 1 when the file is being compiled for a GPU/OpenCL device. */
#if TALLY_TARGET_CUDA && defined(__CUDA_ARCH__)
#  define TALLY_DEVICE_PASS 1
#elif TALLY_TARGET_OPENCL
#  define TALLY_DEVICE_PASS 1
#else
#  define TALLY_DEVICE_PASS 0
#endif

#if TALLY_TARGET_OPENCL
/* Contraction must be off in every OpenCL program: a*b+c fused into an fma
 * rounds once instead of twice and changes the bits (measured: 22% of
 * results differ). Repeating the pragma here protects any program that
 * includes this header, even if its own first line forgot it. */
#  pragma OPENCL FP_CONTRACT OFF
#endif

/* ---- Integer types with fixed widths. ---- */
#if TALLY_TARGET_OPENCL
typedef uint tally_u32;
typedef int tally_i32;
typedef ulong tally_u64;
#elif TALLY_TARGET_CUDA
typedef unsigned int tally_u32;
typedef int tally_i32;
typedef unsigned long long tally_u64;
#else
#  include <stdint.h>
#  include <string.h>
#  include <math.h>
typedef uint32_t tally_u32;
typedef int32_t tally_i32;
typedef uint64_t tally_u64;
#endif

/* ---- Function qualifiers for shared bodies. ---- */
/* TALLY_CL_CPU: 1 where the OpenCL backend builds the program for a CPU
 * device (-DTALLY_CL_CPU=1; kernels/cpu.h), 0 everywhere else. */
#ifndef TALLY_CL_CPU
#  define TALLY_CL_CPU 0
#endif
#if TALLY_TARGET_OPENCL && TALLY_CL_CPU
/* The twins' program (kernels/cpu.h) inlines everything, as CUDA's
 * __forceinline__ below does: a call left inside a loop keeps a CPU
 * compiler (PoCL) from vectorising the loop, and PoCL's inliner declines
 * the larger portable functions (sincospi's core) on cost. That program
 * holds the twins alone, so this costs no compile time elsewhere. */
#  define TALLY_FN static inline __attribute__((always_inline))
#elif TALLY_TARGET_OPENCL
#  define TALLY_FN static inline
#elif TALLY_TARGET_CUDA
/* Device only: host-side CUDA code never needs these (the host backend
 * compiles the same bodies as C), and device-only functions may read
 * __constant__ tables. */
#  define TALLY_FN static __device__ __forceinline__
#else
#  define TALLY_FN static inline
#endif

/* TALLY_FN_COLD: a function that a kernel calls from many places on a
 * rare path (a count that a table lacks). CUDA keeps one copy of it out of
 * line instead of one per call site, which keeps the hot loop small; the
 * other targets inline it as TALLY_FN does. The same operations either way. */
#if TALLY_TARGET_CUDA
#  define TALLY_FN_COLD static __device__ __noinline__
#else
#  define TALLY_FN_COLD TALLY_FN
#endif

/* Unrolls the loop that follows completely when its trip count is a
 * constant after inlining (Philox's ten rounds). It changes no operation;
 * it lets a loop around it be vectorised, since vectorisers take innermost
 * loops only. */
#if TALLY_TARGET_OPENCL && TALLY_CL_CPU
#  define TALLY_UNROLL _Pragma("unroll")
#else
#  define TALLY_UNROLL
#endif

/* Unrolls the loop that follows completely on every device compiler (its
 * trip count is a constant): a private array indexed by the loop's counter
 * then lives in registers instead of memory. It changes no operation. */
#if TALLY_TARGET_OPENCL || TALLY_TARGET_CUDA
#  define TALLY_UNROLL_ALL _Pragma("unroll")
#else
#  define TALLY_UNROLL_ALL
#endif

/* ---- Kernel vocabulary (device code only). ---- */
#if TALLY_TARGET_OPENCL
#  define TALLY_KERNEL __kernel
#  define TALLY_KERNEL_GROUPS_PER_CU(n) __kernel
#  define TALLY_KERNEL_GROUP_OF(size) __kernel
#  define TALLY_GLOBAL __global
#  define TALLY_LOCAL __local
#  define TALLY_LOCAL_ARRAY(type, name, n) __local type name[n]
#  define TALLY_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#  define TALLY_LID() ((tally_u32)get_local_id(0))
#  define TALLY_GROUP_ID() ((tally_u64)get_group_id(0))
#  define TALLY_GROUP_COUNT() ((tally_u64)get_num_groups(0))
#  define TALLY_RESTRICT restrict
#elif TALLY_TARGET_CUDA
#  define TALLY_KERNEL extern "C" __global__
/* A kernel whose groups of TALLY_K_GROUP_SIZE work-items should fit n to a
 * multiprocessor (nvcc then caps the registers per thread). Placement only:
 * it never changes a result. */
#  define TALLY_KERNEL_GROUPS_PER_CU(n) extern "C" __global__ __launch_bounds__(256, n)
/* A kernel launched with groups of `size` work-items instead of
 * TALLY_K_GROUP_SIZE (backends/gpu/gpu_core.c's group size of it). */
#  define TALLY_KERNEL_GROUP_OF(size) extern "C" __global__ __launch_bounds__(size, 1)
#  define TALLY_GLOBAL
#  define TALLY_LOCAL
#  define TALLY_LOCAL_ARRAY(type, name, n) __shared__ type name[n]
#  define TALLY_BARRIER() __syncthreads()
#  define TALLY_LID() ((tally_u32)threadIdx.x)
#  define TALLY_GROUP_ID() ((tally_u64)blockIdx.x)
#  define TALLY_GROUP_COUNT() ((tally_u64)gridDim.x)
#  define TALLY_RESTRICT __restrict__
#else
#  define TALLY_GLOBAL
#  define TALLY_LOCAL
#  define TALLY_RESTRICT restrict
#endif

/* A barrier among the 256 work-items of part `part` of a group, work-items
 * 256 part .. 256 part + 255. A group of 256 work-items is part 0, for
 * which this is TALLY_BARRIER(). CUDA kernels of 512 threads run two parts
 * that synchronise independently (named barriers 0 and 1, each of 256
 * threads; such a kernel never calls TALLY_BARRIER()). OpenCL C has no
 * barrier of part of a group: there a group is always one part. */
#if TALLY_TARGET_OPENCL
#  define TALLY_BARRIER_PART(part) barrier(CLK_LOCAL_MEM_FENCE)
#elif TALLY_TARGET_CUDA
#  define TALLY_BARRIER_PART(part) asm volatile("bar.sync %0, 256;" ::"r"((unsigned)(part)) : "memory")
#endif

/* Orders local memory among work-items 0 .. 31 of a group, or of a part
 * (for a step of a tree that only they take part in). Every work-item of
 * the group must reach it, as a barrier: OpenCL C gives a full barrier; on
 * CUDA work-items 0 .. 31 are one warp and each warp synchronises only
 * itself. */
#if TALLY_TARGET_OPENCL
#  define TALLY_BARRIER_FIRST32() barrier(CLK_LOCAL_MEM_FENCE)
#elif TALLY_TARGET_CUDA
#  define TALLY_BARRIER_FIRST32() __syncwarp()
#endif

/* Orders local memory within each run of 32 work-items, 32 w .. 32 w + 31,
 * of a group (for trees that runs of 32 take in parallel, one array each).
 * The same definitions as TALLY_BARRIER_FIRST32: every work-item must
 * reach it; OpenCL C gives a full barrier, and on CUDA each run is one
 * warp that synchronises only itself. */
#define TALLY_BARRIER_EACH32() TALLY_BARRIER_FIRST32()

/* Barrier that also orders global memory among the work-items of a group,
 * for kernels that read back what other work-items of the group wrote to
 * global memory (a sampled row, say). __syncthreads already covers global
 * memory within a block. */
#if TALLY_TARGET_OPENCL
#  define TALLY_BARRIER_GLOBAL() barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)
#elif TALLY_TARGET_CUDA
#  define TALLY_BARRIER_GLOBAL() __syncthreads()
#endif

/* The hardware's maximum and minimum of two floats (one instruction on a
 * GPU, where a comparison and a select take two). They ignore a NaN
 * operand, and the sign of a zero result is the target's: so they never
 * decide result bits by themselves. A caller shows why its results do not
 * depend on either, or redoes the rare case with an exact fold, as the
 * fused KL from logits does (kernels/kl_logits.h). */
#if TALLY_TARGET_OPENCL
#  define TALLY_MAXNUM(a, b) fmax((a), (b))
#  define TALLY_MINNUM(a, b) fmin((a), (b))
#else
#  define TALLY_MAXNUM(a, b) fmaxf((a), (b))
#  define TALLY_MINNUM(a, b) fminf((a), (b))
#endif

/* The larger of each pair of 16-bit halves of two words, as a word: one
 * instruction on sm_90 (VIMNMX.U16x2). An integer operation, used only
 * in tests of which path a batch takes, never in a result. */
#if TALLY_TARGET_OPENCL
#  define TALLY_MAX_U16X2(a, b) as_uint(max(as_ushort2(a), as_ushort2(b)))
#elif TALLY_TARGET_CUDA
#  define TALLY_MAX_U16X2(a, b) __vmaxu2((a), (b))
#endif
/* The smaller of each pair, likewise (VIMNMX.U16x2 with the minimum). */
#if TALLY_TARGET_OPENCL
#  define TALLY_MIN_U16X2(a, b) as_uint(min(as_ushort2(a), as_ushort2(b)))
#elif TALLY_TARGET_CUDA
#  define TALLY_MIN_U16X2(a, b) __vminu2((a), (b))
#endif
/* Byte i of the result is byte ((s >> 4 i) & 7) of the eight bytes of x
 * (0 .. 3) and y (4 .. 7): CUDA's __byte_perm for selectors below 8 (one
 * PRMT instruction); elsewhere shifts and masks, which a constant selector
 * folds. It moves bits only. */
#if TALLY_TARGET_OPENCL
TALLY_FN uint tally_byte_perm(uint x, uint y, uint s)
{
    const ulong both = ((ulong)y << 32) | x;
    uint r = 0u;
    for (uint i = 0u; i < 4u; i++) r |= (uint)((both >> (8u * ((s >> (4u * i)) & 7u))) & 0xffu) << (8u * i);
    return r;
}
#  define TALLY_BYTE_PERM(x, y, s) tally_byte_perm((x), (y), (s))
#elif TALLY_TARGET_CUDA
#  define TALLY_BYTE_PERM(x, y, s) __byte_perm((x), (y), (s))
#endif

/* Four floats moved as one 16-byte access. Both OpenCL C and CUDA call the
 * type float4 and name its members x, y, z, w. TALLY_LOAD_F4(p, i) reads
 * p[4i .. 4i+3] and TALLY_STORE_F4(p, i, v) writes them; p + 4i must be
 * 16-byte aligned, which the host checks before it picks a kernel variant
 * that uses them. They only move bits, so they never change a result. */
#if TALLY_TARGET_OPENCL || TALLY_TARGET_CUDA
typedef float4 tally_f4;
#  define TALLY_LOAD_F4(p, i) (((TALLY_GLOBAL const tally_f4 *)(p))[(i)])
#  define TALLY_STORE_F4(p, i, value) (((TALLY_GLOBAL tally_f4 *)(p))[(i)] = (value))
#endif
/* The same moves for data that a kernel touches once, as a stream: on CUDA
 * with the evict-first cache hint (__ldcs, __stcs: ld.global.cs and
 * st.global.cs), so that streams do not push other lines out of the L2;
 * elsewhere plain. Hints only, so never a change of result. */
#if TALLY_TARGET_CUDA
#  define TALLY_LOAD_F4_ONCE(p, i) __ldcs(((const tally_f4 *)(p)) + (i))
#  define TALLY_STORE_F4_ONCE(p, i, value) __stcs(((tally_f4 *)(p)) + (i), (value))
#elif TALLY_TARGET_OPENCL
#  define TALLY_LOAD_F4_ONCE(p, i) TALLY_LOAD_F4(p, i)
#  define TALLY_STORE_F4_ONCE(p, i, value) TALLY_STORE_F4(p, i, value)
#endif

/* TALLY_PREFETCH_L2(p, bytes) asks for `bytes` (a multiple of 16, from a
 * 16-byte aligned global address p) to be brought into the L2 cache ahead
 * of their loads, where the device has one instruction for it (sm_90's
 * bulk prefetch; TALLY_HAS_PREFETCH_L2 1); nothing elsewhere. A hint that
 * moves no value into the program, so never a change of result. */
#if TALLY_TARGET_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#  define TALLY_HAS_PREFETCH_L2 1
#  define TALLY_PREFETCH_L2(p, bytes)                                                                          \
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(__cvta_generic_to_global(p)),          \
                   "r"((unsigned)(bytes))                                                                      \
                   : "memory")
#else
#  define TALLY_HAS_PREFETCH_L2 0
#  define TALLY_PREFETCH_L2(p, bytes) ((void)(p), (void)(bytes))
#endif

/* TALLY_HAS_REGISTER_TILES is 1 where a kernel may hold a whole tile in a
 * work-item's constant-indexed private arrays across barriers (CUDA) and 0
 * in OpenCL C, where the backend never launches such a kernel
 * (tally__gpu_context's register_tiles). There the fused KL kernel's body
 * is left out: an assertion-enabled PoCL build aborted compiling it
 * (region_entry_barrier in createParallelRegionBefore), and a kernel that
 * never runs must not keep a program from building. */
#if TALLY_TARGET_CUDA
#  define TALLY_HAS_REGISTER_TILES 1
#else
#  define TALLY_HAS_REGISTER_TILES 0
#endif

/* TALLY_HAS_WARP_SHUFFLE is 1 where the work-items 32 w .. 32 w + 31 of a
 * group form one warp that TALLY_WARP_SHUFFLE(v, j) reads across: the
 * value v of work-item j of the caller's warp (every work-item of the warp
 * must reach it). CUDA: __shfl_sync over the whole warp; 0 in OpenCL C 1.2,
 * which has no sub-groups, where such kernels have empty bodies and the
 * backend never launches them (tally__gpu_context's warp_shuffle). */
#if TALLY_TARGET_CUDA
#  define TALLY_HAS_WARP_SHUFFLE 1
#  define TALLY_WARP_SHUFFLE(v, j) __shfl_sync(0xffffffffu, (v), (int)(j))
/* The lowest work-item j of the caller's warp whose p is nonzero, -1 when
 * none is (every work-item of the warp must reach it). */
#  define TALLY_WARP_FIRST(p) (__ffs(__ballot_sync(0xffffffffu, (p) != 0)) - 1)
#else
#  define TALLY_HAS_WARP_SHUFFLE 0
#endif

/* Staging quads in local memory without passing them through registers.
 * TALLY_HAS_STAGE is 1 where a kernel can declare TALLY_STAGE(name), an
 * array of tally_f4 in dynamic local memory whose size the launch sets
 * (CUDA: the kernel's stage bytes, backends/gpu/gpu_core.c); OpenCL C has
 * no dynamic local memory outside kernel arguments, so there it is 0 and
 * the op layer never launches a staging kernel (tally__gpu_context's
 * stage_bytes is 0). TALLY_STAGE_COPY(dst, src) starts copying one quad
 * from global to local memory (cp.async on sm_80 and later, which needs
 * 16-byte aligned addresses; a plain copy elsewhere) and TALLY_STAGE_WAIT()
 * waits for every copy the work-item started and makes them visible to it:
 * a work-item that reads back only its own copies needs no barrier. They
 * only move bits, so they never change a result. */
#if TALLY_TARGET_CUDA
#  define TALLY_HAS_STAGE 1
#  define TALLY_STAGE(name) extern __shared__ tally_f4 name[]
#else
#  define TALLY_HAS_STAGE 0
#endif
#if TALLY_TARGET_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#  define TALLY_STAGE_COPY(dst, src)                                                                           \
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)), \
                   "l"(src)                                                                                    \
                   : "memory")
#  define TALLY_STAGE_WAIT() asm volatile("cp.async.wait_all;\n" ::: "memory")
#elif TALLY_TARGET_OPENCL || TALLY_TARGET_CUDA
#  define TALLY_STAGE_COPY(dst, src) (*(dst) = *(src))
#  define TALLY_STAGE_WAIT() ((void)0)
#endif

/* ---- IEEE-exact primitives. Only these (plus + - * on floats, which the
 * build keeps uncontracted) may appear in bit-deciding code. ---- */
#if TALLY_TARGET_OPENCL
#  define tally_fma(a, b, c) fma((a), (b), (c))
#  define tally_rint(x) rint(x)
#  define tally_floor(x) floor(x)
#  define tally_trunc(x) trunc(x)
#  define tally_as_u32(f) as_uint(f)
#  define tally_as_f32(u) as_float(u)
#elif TALLY_TARGET_CUDA
#  define tally_fma(a, b, c) __fmaf_rn((a), (b), (c))
#  define tally_rint(x) rintf(x)
#  define tally_floor(x) floorf(x)
#  define tally_trunc(x) truncf(x)
#  define tally_as_u32(f) __float_as_uint(f)
#  define tally_as_f32(u) __uint_as_float(u)
#else
/* fmaf is correctly rounded in C99/C11 whether or not the CPU has an fma
 * instruction, so it gives the same bits as the GPU's fma. */
#  define tally_fma(a, b, c) fmaf((a), (b), (c))
#  define tally_rint(x) rintf(x)
#  define tally_floor(x) floorf(x)
#  define tally_trunc(x) truncf(x)
TALLY_FN tally_u32 tally_as_u32(float f) { tally_u32 u; memcpy(&u, &f, 4); return u; }
TALLY_FN float tally_as_f32(tally_u32 u) { float f; memcpy(&f, &u, 4); return f; }
#endif

/* TALLY_HW_DIV_SQRT: 1 where the target's own square root, reciprocal and
 * division are IEEE 754's correctly rounded operations on every float,
 * subnormals included; 0 elsewhere. IEEE 754 defines one result for each of
 * them, and tally's portable tally_sqrtf and tally_recipf give it on all
 * 2^32 floats (docs/accuracy.md; tally_divf by Markstein's final step), so
 * where this is 1 portable_math.h uses the hardware's operation inside the
 * ranges where both are correctly rounded and leaves every special value to
 * its own selects: the same bits, for a fraction of the instructions. CUDA's
 * __fsqrt_rn, __frcp_rn and __fdiv_rn are round-to-nearest-even whatever
 * -prec-sqrt and -prec-div say. OpenCL C promises this only under
 * -cl-fp32-correctly-rounded-divide-sqrt, which the backend passes, with
 * -DTALLY_HW_DIV_SQRT=1, where the device reports
 * CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT. The host C build keeps the portable
 * arithmetic, the reference every device is checked against. */
#ifndef TALLY_HW_DIV_SQRT
#  if TALLY_TARGET_CUDA
#    define TALLY_HW_DIV_SQRT 1
#  else
#    define TALLY_HW_DIV_SQRT 0
#  endif
#endif
#if TALLY_HW_DIV_SQRT && TALLY_TARGET_CUDA
#  define tally_hw_sqrtf(x) __fsqrt_rn(x)
#  define tally_hw_recipf(x) __frcp_rn(x)
#  define tally_hw_divf(a, b) __fdiv_rn((a), (b))
#elif TALLY_HW_DIV_SQRT && TALLY_TARGET_OPENCL
#  define tally_hw_sqrtf(x) sqrt(x)
#  define tally_hw_recipf(x) (1.0f / (x))
#  define tally_hw_divf(a, b) ((a) / (b))
#elif TALLY_HW_DIV_SQRT
#  error "TALLY_HW_DIV_SQRT=1 needs a CUDA or OpenCL target"
#endif

/* Special values spelled without library macros, so they are the same bits
 * everywhere. */
#define TALLY_F32_INF tally_as_f32(0x7f800000u)
#define TALLY_F32_NEG_INF tally_as_f32(0xff800000u)
#define TALLY_F32_NAN tally_as_f32(0x7fc00000u)

TALLY_FN int tally_isnan(float x) { return x != x; }
TALLY_FN int tally_isinf(float x) { return (tally_as_u32(x) & 0x7fffffffu) == 0x7f800000u; }
TALLY_FN int tally_isfinite(float x) { return (tally_as_u32(x) & 0x7f800000u) != 0x7f800000u; }

/* 32x32 -> 64 bit multiply split into halves (Philox needs both halves). */
#if TALLY_TARGET_OPENCL && TALLY_CL_CPU
/* PoCL's mul_hi keeps a loop around it scalar; the wide product is the
 * same number and vectorises. */
TALLY_FN tally_u32 tally_mulhi32(tally_u32 a, tally_u32 b) { return (tally_u32)(((tally_u64)a * b) >> 32); }
#elif TALLY_TARGET_OPENCL
TALLY_FN tally_u32 tally_mulhi32(tally_u32 a, tally_u32 b) { return mul_hi(a, b); }
#elif TALLY_TARGET_CUDA
TALLY_FN tally_u32 tally_mulhi32(tally_u32 a, tally_u32 b) { return __umulhi(a, b); }
#else
TALLY_FN tally_u32 tally_mulhi32(tally_u32 a, tally_u32 b)
{
    return (tally_u32)(((tally_u64)a * (tally_u64)b) >> 32);
}
#endif

#endif /* TALLY_DIALECT_H */
