/*
 * cuda_math_compare - tally's portable math on an NVIDIA GPU against
 *   (a) the same functions compiled as plain C on the host: every GPU result
 *       must have exactly the host's bits (the program exits 1 otherwise);
 *   (b) double-precision references computed on the host, for the accuracy
 *       of tally's functions and of CUDA's own built-ins (expf, logf,
 *       log1pf, lgammaf, sqrtf, 1.0f/x, sinpif, cospif, sincospif, a/b)
 *       over the same inputs.
 * It prints markdown tables (for docs/accuracy.md, section "CUDA (H200)").
 *
 * Build (the host side of tally must be the C build, so it comes from
 * tools/math/math_host_eval.c compiled by gcc; this file includes the header for
 * device code only):
 *   gcc -std=c11 -O2 -ffp-contract=off -Wall -Wextra -Wundef -Werror -Iinclude \
 *       -c tools/math/math_host_eval.c -o /tmp/math_host_eval.o
 *   nvcc -O2 -fmad=false -Xcompiler -ffp-contract=off -arch=sm_90 -Iinclude \
 *       tools/math/cuda_math_compare.cu /tmp/math_host_eval.o -o /tmp/cuda_math_compare
 *   /tmp/cuda_math_compare          # 2^24 inputs per function
 *   /tmp/cuda_math_compare 26       # 2^26 inputs per function
 * Keep nvcc's defaults -ftz=false -prec-div=true -prec-sqrt=true; fast-math
 * options would change the built-ins being measured, so they are never used.
 *
 * Inputs per function (deterministic): a quarter uniform over the main
 * range, half log-uniform over the function's whole domain (random exponent
 * field and mantissa, so subnormals and huge values appear), a quarter raw
 * random bit patterns (NaNs, infinities and out-of-domain values included;
 * they count for the bit comparison, and for accuracy only where a finite
 * reference exists).
 *
 * Timing: each thread evaluates the function 64 times on values derived
 * from its input in registers, so the kernel is compute-bound; the column
 * is nanoseconds per 2^30 evaluations (lower is faster), a rough guide only.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "../../harness/rand.h"
#include "math_ref.h"
#include "tally/portable_math.h"

extern "C" void tally_tools_eval_host(int fn, const float *in, float *out, size_t n);

/* Keep in sync with tools/math/math_host_eval.c. */
enum {
    TALLY_TOOLS_FN_EXP, TALLY_TOOLS_FN_LOG, TALLY_TOOLS_FN_LOG1P, TALLY_TOOLS_FN_LGAMMA,
    TALLY_TOOLS_FN_SQRT, TALLY_TOOLS_FN_RECIP, TALLY_TOOLS_FN_SINPI, TALLY_TOOLS_FN_COSPI,
    TALLY_TOOLS_FN_DIV, TALLY_TOOLS_FN_SINCOSPI, TALLY_TOOLS_FN_COUNT
};

static const char *fn_name[TALLY_TOOLS_FN_COUNT] = {
    "exp", "log", "log1p", "lgamma", "sqrt", "recip", "sinpi", "cospi", "div", "sincospi"
};
static const char *builtin_name[TALLY_TOOLS_FN_COUNT] = {
    "expf", "logf", "log1pf", "lgammaf", "sqrtf", "1.0f/x", "sinpif", "cospif", "a/b", "sincospif"
};

#define CUDA_CHECK(e)                                                                  \
    do {                                                                               \
        cudaError_t err_ = (e);                                                        \
        if (err_ != cudaSuccess) {                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #e,                 \
                    cudaGetErrorString(err_));                                         \
            exit(2);                                                                   \
        }                                                                              \
    } while (0)

/* ---------------- device side ---------------- */

__device__ __forceinline__ float tally_unary(int fn, float x)
{
    switch (fn) {
    case TALLY_TOOLS_FN_EXP: return tally_expf(x);
    case TALLY_TOOLS_FN_LOG: return tally_logf(x);
    case TALLY_TOOLS_FN_LOG1P: return tally_log1pf(x);
    case TALLY_TOOLS_FN_LGAMMA: return tally_lgammaf(x);
    case TALLY_TOOLS_FN_SQRT: return tally_sqrtf(x);
    case TALLY_TOOLS_FN_RECIP: return tally_recipf(x);
    case TALLY_TOOLS_FN_SINPI: return tally_sinpif(x);
    case TALLY_TOOLS_FN_COSPI: return tally_cospif(x);
    }
    return 0.0f;
}

__device__ __forceinline__ float builtin_unary(int fn, float x)
{
    switch (fn) {
    case TALLY_TOOLS_FN_EXP: return expf(x);
    case TALLY_TOOLS_FN_LOG: return logf(x);
    case TALLY_TOOLS_FN_LOG1P: return log1pf(x);
    case TALLY_TOOLS_FN_LGAMMA: return lgammaf(x);
    case TALLY_TOOLS_FN_SQRT: return sqrtf(x);
    case TALLY_TOOLS_FN_RECIP: return 1.0f / x;
    case TALLY_TOOLS_FN_SINPI: return sinpif(x);
    case TALLY_TOOLS_FN_COSPI: return cospif(x);
    }
    return 0.0f;
}

/* which = 0: tally, 1: CUDA built-in.  Layout as in math_host_eval.c. */
__global__ void k_eval(int which, int fn, const float *in, float *out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        if (fn == TALLY_TOOLS_FN_DIV) {
            float a = in[2 * i], b = in[2 * i + 1];
            out[i] = which ? a / b : tally_divf(a, b);
        } else if (fn == TALLY_TOOLS_FN_SINCOSPI) {
            float s, c;
            if (which)
                sincospif(in[i], &s, &c);
            else
                tally_sincospif(in[i], &s, &c);
            out[2 * i] = s;
            out[2 * i + 1] = c;
        } else {
            out[i] = which ? builtin_unary(fn, in[i]) : tally_unary(fn, in[i]);
        }
    }
}

/* Compute-bound timing kernel: 64 dependent-free evaluations per thread. */
template <int WHICH, int FN>
__global__ void k_bench(const float *in, float *out, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float x = in[i], acc = 0.0f;
    for (int k = 0; k < 64; k++) {
        float v;
        if (FN == TALLY_TOOLS_FN_DIV) {
            v = WHICH ? x / (x + 1.5f) : tally_divf(x, x + 1.5f);
        } else if (FN == TALLY_TOOLS_FN_SINCOSPI) {
            float s, c;
            if (WHICH)
                sincospif(x, &s, &c);
            else
                tally_sincospif(x, &s, &c);
            v = s + c;
        } else {
            v = WHICH ? builtin_unary(FN, x) : tally_unary(FN, x);
        }
        acc += v;
        x = x * 1.0000001f + 1e-7f;
    }
    out[i] = acc;
}

/* ---------------- host side ---------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
/* splitmix64 (harness/rand.h): deterministic inputs, the same on every run. */
static uint64_t rng_next(void)
{
    return harness_splitmix64(&rng_state);
}

static float f_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t u_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

struct domain {
    float lo, hi;          /* uniform main range */
    int both_signs;        /* log-uniform part: random sign? */
    uint32_t emax_field;   /* log-uniform part: exponent fields 0..emax_field */
};

static domain domain_of(int fn)
{
    switch (fn) {
    case TALLY_TOOLS_FN_EXP: return domain{ -104.0f, 89.0f, 1, 133 };     /* |x| < 128 */
    case TALLY_TOOLS_FN_LOG: return domain{ 0.0f, 4.0f, 0, 254 };
    case TALLY_TOOLS_FN_LOG1P: return domain{ -1.0f, 4.0f, 0, 254 };
    case TALLY_TOOLS_FN_LGAMMA: return domain{ 0.0f, 8.0f, 0, 254 };
    case TALLY_TOOLS_FN_SQRT: return domain{ 0.0f, 4.0f, 0, 254 };
    case TALLY_TOOLS_FN_RECIP: return domain{ 0.5f, 2.0f, 1, 254 };
    case TALLY_TOOLS_FN_DIV: return domain{ 0.5f, 2.0f, 1, 254 };
    default: return domain{ 0.0f, 2.0f, 1, 254 };                          /* sinpi, cospi */
    }
}

static float draw(const domain &d, size_t i, size_t n)
{
    uint64_t r = rng_next();
    if (i < n / 4)
        return d.lo + (d.hi - d.lo) * (float)((r >> 40) * 0x1p-24);
    if (i < 3 * n / 4) {
        uint32_t e = (uint32_t)((r >> 32) % (d.emax_field + 1));
        uint32_t s = (d.both_signs && (r & 0x80000000ull)) ? 0x80000000u : 0u;
        return f_of(s | (e << 23) | ((uint32_t)r & 0x007fffffu));
    }
    return f_of((uint32_t)r);
}


static double reference(int fn, float x, float y)
{
    double d = x;
    switch (fn) {
    case TALLY_TOOLS_FN_EXP: return exp(d);
    case TALLY_TOOLS_FN_LOG: return log(d);
    case TALLY_TOOLS_FN_LOG1P: return log1p(d);
    case TALLY_TOOLS_FN_LGAMMA: return (x > 0.0f) ? lgamma(d) : NAN; /* tally's domain */
    case TALLY_TOOLS_FN_SQRT: return sqrt(d);
    case TALLY_TOOLS_FN_RECIP: return 1.0 / d;
    case TALLY_TOOLS_FN_SINPI: return math_ref_sincospi(x, 0);
    case TALLY_TOOLS_FN_COSPI: return math_ref_sincospi(x, 1);
    case TALLY_TOOLS_FN_DIV: return d / (double)y;
    }
    return NAN;
}



struct acc_stats {
    uint64_t n = 0, n_off = 0, special = 0, n_abs = 0;
    int64_t max_ulp = 0;
    double max_err = 0, max_abs = 0;
    float at_ulp = 0, at_err = 0, at_abs = 0;
    void add(int fn, float x, float got, double ref)
    {
        if (std::isnan(ref))
            return; /* no finite reference: only the bit comparison counts */
        float rf = (float)ref;
        n++;
        if (std::isnan(got) || std::isinf(got) || std::isinf(rf)) {
            if (u_of(got) != u_of(rf))
                special++;
            return;
        }
        if (fn == TALLY_TOOLS_FN_LGAMMA && fabs(ref) < 0.1) {
            double ae = fabs((double)got - ref);
            n_abs++;
            if (ae > max_abs) { max_abs = ae; at_abs = x; }
            return;
        }
        int64_t d = math_ref_ordinal(got) - math_ref_ordinal(rf);
        if (d < 0) d = -d;
        if (d) n_off++;
        if (d > max_ulp) { max_ulp = d; at_ulp = x; }
        double e = fabs((double)got - ref) / math_ref_ulp(ref);
        if (e > max_err) { max_err = e; at_err = x; }
    }
};

static float bench(int which, int fn, const float *d_in, float *d_out, size_t n)
{
    void (*kern)(const float *, float *, size_t) = nullptr;
#define PICK(F)                                                                        \
    case F: kern = which ? k_bench<1, F> : k_bench<0, F>; break;
    switch (fn) {
        PICK(TALLY_TOOLS_FN_EXP) PICK(TALLY_TOOLS_FN_LOG) PICK(TALLY_TOOLS_FN_LOG1P)
        PICK(TALLY_TOOLS_FN_LGAMMA) PICK(TALLY_TOOLS_FN_SQRT) PICK(TALLY_TOOLS_FN_RECIP)
        PICK(TALLY_TOOLS_FN_SINPI) PICK(TALLY_TOOLS_FN_COSPI) PICK(TALLY_TOOLS_FN_DIV)
        PICK(TALLY_TOOLS_FN_SINCOSPI)
    }
#undef PICK
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    unsigned blocks = (unsigned)((n + 255) / 256);
    kern<<<blocks, 256>>>(d_in, d_out, n); /* warm-up */
    CUDA_CHECK(cudaEventRecord(e0));
    for (int r = 0; r < 5; r++)
        kern<<<blocks, 256>>>(d_in, d_out, n);
    CUDA_CHECK(cudaEventRecord(e1));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    double evals = 5.0 * 64.0 * (double)n;
    return (float)(ms / evals * 1073741824.0); /* ms per 2^30 evaluations */
}

static void fmt_x(char *buf, size_t len, float x)
{
    snprintf(buf, len, "%.9g", (double)x);
}

int main(int argc, char **argv)
{
    int lg = (argc > 1) ? atoi(argv[1]) : 24;
    if (lg < 10 || lg > 28) {
        fprintf(stderr, "usage: %s [log2 of inputs per function, 10..28]\n", argv[0]);
        return 2;
    }
    size_t n = (size_t)1 << lg;

    cudaDeviceProp prop;
    int dev = 0, rt = 0, drv = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    CUDA_CHECK(cudaRuntimeGetVersion(&rt));
    CUDA_CHECK(cudaDriverGetVersion(&drv));
    printf("Device: %s (sm_%d%d), CUDA runtime %d, driver %d; 2^%d inputs per function.\n\n",
           prop.name, prop.major, prop.minor, rt, drv, lg);

    std::vector<float> in(2 * n), out_dev(2 * n), out_host(2 * n), out_bi(2 * n);
    float *d_in = nullptr, *d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, 2 * n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_out, 2 * n * sizeof(float)));

    printf("| function | GPU tally vs host C tally: bit differences | tally max ulp | tally max err (ulp) at x "
           "| tally results != RN(ref) | CUDA built-in | built-in max ulp | built-in max err (ulp) at x "
           "| built-in results != RN(ref) | special mismatches tally / built-in "
           "| time per 2^30 evals, ms: tally / built-in |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");

    uint64_t total_bad = 0;
    for (int fn = 0; fn < TALLY_TOOLS_FN_COUNT; fn++) {
        domain d = domain_of(fn);
        size_t n_in = (fn == TALLY_TOOLS_FN_DIV) ? 2 * n : n;
        size_t n_out = (fn == TALLY_TOOLS_FN_SINCOSPI) ? 2 * n : n;
        for (size_t i = 0; i < n_in; i++)
            in[i] = draw(d, (fn == TALLY_TOOLS_FN_DIV) ? i / 2 : i, n);
        CUDA_CHECK(cudaMemcpy(d_in, in.data(), n_in * sizeof(float), cudaMemcpyHostToDevice));

        k_eval<<<4096, 256>>>(0, fn, d_in, d_out, n);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemcpy(out_dev.data(), d_out, n_out * sizeof(float), cudaMemcpyDeviceToHost));
        k_eval<<<4096, 256>>>(1, fn, d_in, d_out, n);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemcpy(out_bi.data(), d_out, n_out * sizeof(float), cudaMemcpyDeviceToHost));
        tally_tools_eval_host(fn, in.data(), out_host.data(), n);

        uint64_t bad = 0;
        size_t first_bad = 0;
        for (size_t i = 0; i < n_out; i++)
            if (u_of(out_dev[i]) != u_of(out_host[i])) {
                if (!bad) first_bad = i;
                bad++;
            }
        total_bad += bad;

        acc_stats ts, bs;
        uint64_t div_ieee_tally = 0, div_ieee_bi = 0;
        for (size_t i = 0; i < n; i++) {
            if (fn == TALLY_TOOLS_FN_SINCOSPI) {
                ts.add(TALLY_TOOLS_FN_SINPI, in[i], out_dev[2 * i], math_ref_sincospi(in[i], 0));
                ts.add(TALLY_TOOLS_FN_COSPI, in[i], out_dev[2 * i + 1], math_ref_sincospi(in[i], 1));
                bs.add(TALLY_TOOLS_FN_SINPI, in[i], out_bi[2 * i], math_ref_sincospi(in[i], 0));
                bs.add(TALLY_TOOLS_FN_COSPI, in[i], out_bi[2 * i + 1], math_ref_sincospi(in[i], 1));
            } else if (fn == TALLY_TOOLS_FN_DIV) {
                float a = in[2 * i], b = in[2 * i + 1];
                double ref = reference(fn, a, b);
                ts.add(fn, a, out_dev[i], ref);
                bs.add(fn, a, out_bi[i], ref);
                volatile float q = a / b; /* the host's IEEE division */
                float qq = q;
                int tn = std::isnan(out_dev[i]) && std::isnan(qq);
                int bn = std::isnan(out_bi[i]) && std::isnan(qq);
                if (!tn && u_of(out_dev[i]) != u_of(qq)) div_ieee_tally++;
                if (!bn && u_of(out_bi[i]) != u_of(qq)) div_ieee_bi++;
            } else {
                double ref = reference(fn, in[i], 0.0f);
                ts.add(fn, in[i], out_dev[i], ref);
                bs.add(fn, in[i], out_bi[i], ref);
            }
        }

        float t_tally = bench(0, fn, d_in, d_out, n);
        float t_bi = bench(1, fn, d_in, d_out, n);

        char a1[48], a2[48];
        fmt_x(a1, sizeof a1, ts.at_err);
        fmt_x(a2, sizeof a2, bs.at_err);
        printf("| %s | %llu", fn_name[fn], (unsigned long long)bad);
        if (bad)
            printf(" (first x=%a: GPU 0x%08x, host 0x%08x)", (double)in[fn == TALLY_TOOLS_FN_SINCOSPI ? first_bad / 2 : first_bad],
                   u_of(out_dev[first_bad]), u_of(out_host[first_bad]));
        printf(" | %lld | %.3f at %s | %llu | %s | %lld | %.3f at %s | %llu | %llu / %llu | %.2f / %.2f |\n",
               (long long)ts.max_ulp, ts.max_err, a1, (unsigned long long)ts.n_off, builtin_name[fn],
               (long long)bs.max_ulp, bs.max_err, a2, (unsigned long long)bs.n_off,
               (unsigned long long)ts.special, (unsigned long long)bs.special, t_tally, t_bi);
        if (fn == TALLY_TOOLS_FN_LGAMMA)
            printf("| lgamma where abs(lgamma) < 0.1 | | max abs err %.3g at %.9g | | | lgammaf | max abs err %.3g at %.9g | | | | |\n",
                   ts.max_abs, (double)ts.at_abs, bs.max_abs, (double)bs.at_abs);
        if (fn == TALLY_TOOLS_FN_DIV)
            printf("| div bits != host IEEE a/b | | %llu | | | a/b | %llu | | | | |\n",
                   (unsigned long long)div_ieee_tally, (unsigned long long)div_ieee_bi);
        fflush(stdout);
    }
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    printf("\n%s: %llu GPU results differ from the host C build.\n",
           total_bad ? "FAIL" : "OK", (unsigned long long)total_bad);
    return total_bad ? 1 : 0;
}
