/*
 * tools/math/curand_record.cu - records cuRAND's Philox4_32_10 raw and uniform
 * streams for a few (seed, subsequence, offset) triples, in the format read
 * by tests/check_rng_contract.c (tests/data/curand_reference.txt).
 *
 * Run on an NVIDIA GPU:  nvcc -O2 -o curand_record tools/math/curand_record.cu && ./curand_record
 * Each line: KIND SEED SUBSEQUENCE OFFSET COUNT W0 W1 ... (hex; for uniform,
 * the float's bits). The device API is header-only, so no -lcurand.
 */
#include <cstdio>
#include <cstdint>
#include <curand_kernel.h>

#define COUNT 16

struct triple {
    unsigned long long seed, subsequence, offset;
};

__global__ void record(const triple *t, int n, unsigned *raw, unsigned *uni)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    curandStatePhilox4_32_10_t s;
    curand_init(t[i].seed, t[i].subsequence, t[i].offset, &s);
    for (int k = 0; k < COUNT; k++) raw[i * COUNT + k] = curand(&s);
    curand_init(t[i].seed, t[i].subsequence, t[i].offset, &s);
    for (int k = 0; k < COUNT; k++) {
        float u = curand_uniform(&s);
        uni[i * COUNT + k] = __float_as_uint(u);
    }
}

#define CHECK(x)                                                                     \
    do {                                                                             \
        cudaError_t e = (x);                                                         \
        if (e != cudaSuccess) {                                                      \
            fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e));          \
            return 1;                                                                \
        }                                                                            \
    } while (0)

int main()
{
    const triple host[] = {
        {0ull, 0ull, 0ull},
        {42ull, 0ull, 0ull},
        {42ull, 7ull, 3ull},
        {0xdeadbeefcafebabeull, 0x123456789abcdef0ull, 5ull},
        {1ull, (1ull << 40) + 1ull, (1ull << 33) + 2ull},
        {0xffffffffffffffffull, 0xffffffffffffffffull, 1023ull},
    };
    const int n = (int)(sizeof host / sizeof host[0]);
    triple *dt;
    unsigned *draw, *duni;
    CHECK(cudaMalloc(&dt, sizeof host));
    CHECK(cudaMalloc(&draw, n * COUNT * sizeof(unsigned)));
    CHECK(cudaMalloc(&duni, n * COUNT * sizeof(unsigned)));
    CHECK(cudaMemcpy(dt, host, sizeof host, cudaMemcpyHostToDevice));
    record<<<1, 32>>>(dt, n, draw, duni);
    CHECK(cudaGetLastError());
    unsigned raw[n * COUNT], uni[n * COUNT];
    CHECK(cudaMemcpy(raw, draw, sizeof raw, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(uni, duni, sizeof uni, cudaMemcpyDeviceToHost));
    printf("# cuRAND Philox4_32_10 (curand_init(seed, subsequence, offset)), recorded on an NVIDIA GPU\n");
    printf("# by tools/math/curand_record.cu. KIND SEED SUBSEQUENCE OFFSET COUNT then COUNT hex words\n");
    printf("# (uniform: the bits of curand_uniform's float).\n");
    for (int i = 0; i < n; i++) {
        for (int kind = 0; kind < 2; kind++) {
            printf("%s %llu %llu %llu %d", kind ? "uniform" : "raw", host[i].seed, host[i].subsequence,
                   host[i].offset, COUNT);
            for (int k = 0; k < COUNT; k++) printf(" %08x", (kind ? uni : raw)[i * COUNT + k]);
            printf("\n");
        }
    }
    return 0;
}
